//! The header of a send request (SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE) as the
//! official clients write it, parsed without copying. Sans-I/O.
//!
//! The clients differ in how they spell the same header (REMOTING.md §3.1):
//!
//! ```text
//! Java 4.9.8  SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320), one-letter names, every value a string:
//!   {"a":"pg","b":"T","c":"TBW102","d":"4","e":"0","f":"0","g":"1795548446992","h":"0",
//!    "i":"KEYS\u0001k0\u0002...","j":"0","k":"false","m":"false","n":"broker-a"}
//! C++ 0.4.4   SEND_MESSAGE (10), long names, some values JSON numbers; a batch is code 10 with batch "1":
//!   {"AccessKey":"","OnsChannel":"ALIYUN","Signature":"...","batch":"0","bornTimestamp":"1795548431611",
//!    "defaultTopic":"TBW102","defaultTopicQueueNums":4,"flag":0,"producerGroup":"g1",
//!    "properties":"KEYS\u0001k0\u0002...\u0002","queueId":0,"reconsumeTimes":"0","sysFlag":0,
//!    "topic":"T","unitMode":"0"}
//! ```
//!
//! Java 5.x    the same letters in a ROCKETMQ binary header (`header/binary.rs`); a batch also carries a
//!   UNIQ_KEY of its own in `i`, besides each message's.
//!
//! A value is read as the Python path reads it: a string as is, an integer as its decimal
//! text, `true` / `false` as those words, `null` as absent. Anything else (a float, an object)
//! fails the parse, and the request is left to the Python path.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

mod binary;
mod compact;

pub const SEND_MESSAGE: i32 = 10;
pub const SEND_MESSAGE_V2: i32 = 310;
pub const SEND_BATCH_MESSAGE: i32 = 320;

/// Whether `code` is one of the send requests.
pub fn is_send(code: i32) -> bool {
    code == SEND_MESSAGE || code == SEND_MESSAGE_V2 || code == SEND_BATCH_MESSAGE
}

/// One `extFields` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value<'a> {
    Text(Cow<'a, str>),
    Int(i64),
}

impl Value<'_> {
    /// The value as text, `None` for a number (a topic or properties that are numbers are
    /// left to the Python path).
    pub fn text(&self) -> Option<&str> {
        match self {
            Value::Text(t) => Some(t),
            Value::Int(_) => None,
        }
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string, an integer or a boolean")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Value<'de>, E> {
        Ok(Value::Text(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value<'de>, E> {
        Ok(Value::Text(Cow::Owned(v.to_string())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value<'de>, E> {
        Ok(Value::Text(Cow::Owned(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value<'de>, E> {
        Ok(Value::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value<'de>, E> {
        i64::try_from(v)
            .map(Value::Int)
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value<'de>, E> {
        Ok(Value::Text(Cow::Borrowed(if v { "true" } else { "false" })))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Value<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value<'a>, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

pub(crate) type Field<'a> = Option<Value<'a>>;

/// The frame header's own fields, its `extFields` read as a send request's in the same pass
/// (a frame whose `extFields` a send's could not be does not parse: see [`Code`]).
#[derive(Debug, PartialEq, Eq, Deserialize)]
pub struct Header<'a> {
    pub code: i32,
    #[serde(default)]
    pub flag: i32,
    #[serde(default)]
    pub opaque: i32,
    #[serde(borrow, rename = "extFields")]
    pub ext: Option<Ext<'a>>,
}

impl<'a> Header<'a> {
    /// Parse a frame header's JSON text: the compact form every client writes by a reader of
    /// its own ([`compact`]), anything else by serde_json (same result where both read it).
    pub fn parse(text: &'a str) -> serde_json::Result<Header<'a>> {
        let mut h = Header::EMPTY;
        Header::parse_into(text, false, &mut h)?;
        Ok(h)
    }

    /// No code, no `extFields`: what [`Header::parse_into`] fills.
    pub const EMPTY: Header<'static> = Header {
        code: 0,
        flag: 0,
        opaque: 0,
        ext: None,
    };

    /// [`Header::parse`] (`signed`: [`Header::parse_signed`]) into `h`, in place: an `Ext` is a
    /// few hundred bytes, and every move of a parsed header was a memcpy of them.
    pub fn parse_into(text: &'a str, signed: bool, h: &mut Header<'a>) -> serde_json::Result<()> {
        if compact::header(text, signed, h).is_none() {
            *h = serde_json::from_str(text)?;
        }
        Ok(())
    }

    /// [`Header::parse`], and for an ACL signature check ([`crate::acl`]) every `extFields`
    /// entry as text in [`Ext::signed`], gathered in the same pass (only by the compact
    /// reader: after serde_json it is `None`, and the check reads the text itself).
    pub fn parse_signed(text: &'a str) -> serde_json::Result<Header<'a>> {
        let mut h = Header::EMPTY;
        Header::parse_into(text, true, &mut h)?;
        Ok(h)
    }
}

/// One `extFields` entry as text: its key, and its value as the Python path reads it (an
/// integer as its decimal text, `true` / `false` as those words).
pub type TextField<'a> = (Cow<'a, str>, Cow<'a, str>);

impl Header<'_> {
    /// Read a ROCKETMQ binary frame header (the Java client 5.x's), as the Python path's
    /// decoder reads it (`header/binary.rs`); `None` when the request is left to the Python path.
    pub fn parse_binary(header: &[u8]) -> Option<Header<'_>> {
        binary::header(header)
    }
}

/// A request's JSON frame header with its `extFields` read as `E` (the pull's and the
/// END_TRANSACTION's fields: [`crate::pull`], [`crate::transaction`]).
#[derive(Deserialize)]
pub(crate) struct Request<E> {
    pub code: i32,
    #[serde(default)]
    pub flag: i32,
    #[serde(default)]
    pub opaque: i32,
    #[serde(rename = "extFields")]
    pub ext: Option<E>,
}

/// Just the code and flag of a frame header (its `extFields` skipped unread).
#[derive(Deserialize)]
pub struct Code {
    pub code: i32,
    #[serde(default)]
    pub flag: i32,
}

/// A send request's `extFields` under either spelling: SEND_MESSAGE's names and
/// SEND_MESSAGE_V2's letters, read together in one pass; [`Ext::send_header`] picks the set the
/// code uses.
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ext<'a> {
    #[serde(borrow)]
    b: Field<'a>,
    #[serde(borrow)]
    e: Field<'a>,
    #[serde(borrow)]
    f: Field<'a>,
    #[serde(borrow)]
    g: Field<'a>,
    #[serde(borrow)]
    h: Field<'a>,
    #[serde(borrow)]
    i: Field<'a>,
    #[serde(borrow)]
    j: Field<'a>,
    #[serde(borrow)]
    m: Field<'a>,
    #[serde(borrow)]
    topic: Field<'a>,
    #[serde(borrow)]
    queue_id: Field<'a>,
    #[serde(borrow)]
    sys_flag: Field<'a>,
    #[serde(borrow)]
    born_timestamp: Field<'a>,
    #[serde(borrow)]
    flag: Field<'a>,
    #[serde(borrow)]
    properties: Field<'a>,
    #[serde(borrow)]
    reconsume_times: Field<'a>,
    #[serde(borrow)]
    batch: Field<'a>,
    /// Every entry as text, in the order of the header ([`Header::parse_signed`] only; `None`
    /// also when an entry is `null`, which the signature check leaves to the Python path).
    #[serde(skip)]
    pub signed: Option<Vec<TextField<'a>>>,
}

impl<'a> Ext<'a> {
    /// Where a send's field named `key` goes, and its bit in a set of the fields seen; `None`
    /// for a key that is not a send's field (skipped, as serde skips unknown fields).
    fn slot(&mut self, key: &str) -> Option<(u32, &mut Field<'a>)> {
        Some(match key {
            "b" => (0, &mut self.b),
            "e" => (1, &mut self.e),
            "f" => (2, &mut self.f),
            "g" => (3, &mut self.g),
            "h" => (4, &mut self.h),
            "i" => (5, &mut self.i),
            "j" => (6, &mut self.j),
            "m" => (7, &mut self.m),
            "topic" => (8, &mut self.topic),
            "queueId" => (9, &mut self.queue_id),
            "sysFlag" => (10, &mut self.sys_flag),
            "bornTimestamp" => (11, &mut self.born_timestamp),
            "flag" => (12, &mut self.flag),
            "properties" => (13, &mut self.properties),
            "reconsumeTimes" => (14, &mut self.reconsume_times),
            "batch" => (15, &mut self.batch),
            _ => return None,
        })
    }
}

/// A send request's header, whichever code and spelling it came in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendHeader<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub flag: i32,
    pub properties: &'a str,
    pub reconsume_times: i32,
    /// SEND_BATCH_MESSAGE, or SEND_MESSAGE with `batch` true (the C++ client's batches).
    pub batch: bool,
}

/// A header field the fast path cannot read as the Python path would, or lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable;

/// An integer field as the Python path reads it (absent or empty: `default`, which `None`
/// makes required); `None` for what it would refuse or read otherwise.
pub(crate) fn int<T: std::str::FromStr + TryFrom<i64>>(
    v: &Field<'_>,
    default: Option<T>,
) -> Option<T> {
    match v {
        None => default,
        Some(Value::Int(n)) => T::try_from(*n).ok(),
        Some(Value::Text(s)) if s.is_empty() => default,
        Some(Value::Text(s)) => s.parse().ok(),
    }
}

/// `"true"` / `"1"` (any case, surrounding whitespace ignored), as the Python path reads a flag.
fn truthy(v: &Field<'_>) -> bool {
    match v {
        None => false,
        Some(Value::Int(n)) => *n == 1,
        Some(Value::Text(s)) => {
            let s = s.trim();
            s == "1" || s.eq_ignore_ascii_case("true")
        }
    }
}

impl<'a> Ext<'a> {
    /// The header of a send request with `code` (SEND_MESSAGE's names, else SEND_MESSAGE_V2's
    /// letters), its values checked; read in place.
    pub fn send_header(&self, code: i32) -> Result<SendHeader<'_>, Unreadable> {
        let fields = if code == SEND_MESSAGE {
            [
                &self.topic,
                &self.queue_id,
                &self.sys_flag,
                &self.born_timestamp,
                &self.flag,
                &self.properties,
                &self.reconsume_times,
                &self.batch,
            ]
        } else {
            [
                &self.b, &self.e, &self.f, &self.g, &self.h, &self.i, &self.j, &self.m,
            ]
        };
        checked(fields, code)
    }
}

/// A send's fields (topic, queue id, sys flag, born timestamp, flag, properties, reconsume
/// times, batch) checked into its header.
fn checked<'e>(fields: [&'e Field<'_>; 8], code: i32) -> Result<SendHeader<'e>, Unreadable> {
    let [topic, queue_id, sys_flag, born_timestamp, flag, properties, reconsume_times, batch] =
        fields;
    let text = |v: &Field<'_>| -> Result<(), Unreadable> {
        match v {
            Some(Value::Int(_)) => Err(Unreadable),
            _ => Ok(()),
        }
    };
    text(topic)?;
    text(properties)?;
    let topic = topic.as_ref().and_then(Value::text).unwrap_or("");
    if topic.is_empty() {
        return Err(Unreadable);
    }
    Ok(SendHeader {
        topic,
        queue_id: int(queue_id, None).ok_or(Unreadable)?,
        sys_flag: int(sys_flag, Some(0)).ok_or(Unreadable)?,
        born_timestamp: int(born_timestamp, Some(0)).ok_or(Unreadable)?,
        flag: int(flag, Some(0)).ok_or(Unreadable)?,
        properties: properties.as_ref().and_then(Value::text).unwrap_or(""),
        reconsume_times: int(reconsume_times, Some(0)).ok_or(Unreadable)?,
        batch: code == SEND_BATCH_MESSAGE || truthy(batch),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Read `ext` (the `extFields` object alone) as a send request's.
    fn parse_ext(ext: &str) -> Result<Ext<'_>, Unreadable> {
        serde_json::from_str(ext).map_err(|_| Unreadable)
    }

    /// The C++ client 0.4.4's SEND_MESSAGE header, as captured from `Producer.send_sync`.
    pub const CPP_SEND: &str = r#"{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"1ZXdrf+tGT7w+fGZKzhHhUiZE1g=","batch":"0","bornTimestamp":"1795548431611","defaultTopic":"TBW102","defaultTopicQueueNums":4,"flag":0,"producerGroup":"g1","properties":"KEYS\u0001k0\u0002UNIQ_KEY\u00010100007F00001FFA00007A27FC7F0100\u0002WAIT\u0001true\u0002seq\u00010\u0002","queueId":0,"reconsumeTimes":"0","sysFlag":0,"topic":"CapT","unitMode":"0"}"#;

    /// The Java client 4.9.8's SEND_MESSAGE_V2 header, as captured from `DefaultMQProducer.send`.
    pub const JAVA_SEND: &str = r#"{"a":"jg_P","b":"JCapT","c":"TBW102","d":"4","e":"0","f":"0","g":"1795548446992","h":"0","i":"KEYS\u0001k0\u0002UNIQ_KEY\u0001FD00000000000000000000000000000209E24E0E2F2A7A9F190E0000\u0002WAIT\u0001true\u0002TAGS\u0001TagA\u0002seq\u00010","j":"0","k":"false","m":"false","n":"broker-a"}"#;

    #[test]
    fn reads_the_cpp_clients_numbers() {
        let e = parse_ext(CPP_SEND).unwrap();
        let h = e.send_header(SEND_MESSAGE).unwrap();
        assert_eq!(h.topic, "CapT");
        assert_eq!(h.queue_id, 0);
        assert_eq!(h.sys_flag, 0);
        assert_eq!(h.flag, 0);
        assert_eq!(h.born_timestamp, 1795548431611);
        assert!(h.properties.starts_with("KEYS\u{1}k0\u{2}UNIQ_KEY"));
        assert!(h.properties.ends_with("seq\u{1}0\u{2}"));
        assert!(!h.batch);
        let b = CPP_SEND.replace(r#""batch":"0""#, r#""batch":"1""#);
        let e = parse_ext(&b).unwrap();
        assert!(e.send_header(SEND_MESSAGE).unwrap().batch);
    }

    #[test]
    fn reads_the_java_clients_letters() {
        let e = parse_ext(JAVA_SEND).unwrap();
        let h = e.send_header(SEND_MESSAGE_V2).unwrap();
        assert_eq!((h.topic, h.queue_id, h.batch), ("JCapT", 0, false));
        assert!(h.properties.ends_with("TAGS\u{1}TagA\u{2}seq\u{1}0"));
        let h = e.send_header(SEND_BATCH_MESSAGE).unwrap();
        assert!(h.batch, "320 is a batch whatever m says");
    }

    #[test]
    fn reads_the_ext_in_the_frame_headers_own_pass() {
        let java = format!(
            r#"{{"code":310,"extFields":{JAVA_SEND},"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":401}}"#
        );
        let h: Header<'_> = serde_json::from_str(&java).unwrap();
        assert_eq!((h.code, h.flag, h.opaque), (310, 0, 7));
        let ext = h.ext.unwrap();
        assert_eq!(ext.send_header(310).unwrap().topic, "JCapT");
        // the C++ client's order: extFields first, the code after it
        let cpp = format!(r#"{{"extFields":{CPP_SEND},"code":10,"flag":0,"opaque":1}}"#);
        let h: Header<'_> = serde_json::from_str(&cpp).unwrap();
        let ext = h.ext.unwrap();
        assert_eq!(ext.send_header(h.code).unwrap().topic, "CapT");
        // an extFields no send's could be does not parse as one; its code still reads
        let odd = r#"{"code":310,"extFields":{"b":{}},"flag":0}"#;
        assert!(serde_json::from_str::<Header<'_>>(odd).is_err());
        assert_eq!(serde_json::from_str::<Code>(odd).unwrap().code, 310);
    }

    #[test]
    fn values_read_as_the_python_path_reads_them() {
        // (queueId, sysFlag, bornTimestamp, batch)
        let h = |ext: &str| {
            parse_ext(ext).and_then(|e| {
                e.send_header(SEND_MESSAGE_V2)
                    .map(|h| (h.queue_id, h.sys_flag, h.born_timestamp, h.batch))
            })
        };
        let ok = h(r#"{"b":"T","e":-1,"f":"","g":null,"m":true}"#).unwrap();
        assert_eq!(ok, (-1, 0, 0, true));
        assert_eq!(h(r#"{"b":"T","e":1}"#), Ok((1, 0, 0, false)));
        assert!(h(r#"{"b":"T","e":1,"m":1}"#).unwrap().3);
        // what the Python path refuses or reads differently is not read here
        assert_eq!(h(r#"{"b":"T"}"#), Err(Unreadable), "queueId is required");
        assert_eq!(h(r#"{"b":"","e":"0"}"#), Err(Unreadable));
        assert_eq!(h(r#"{"b":"T","e":1.0}"#), Err(Unreadable));
        assert_eq!(h(r#"{"b":"T","e":"x"}"#), Err(Unreadable));
        assert_eq!(h(r#"{"b":"T","e":2147483648}"#), Err(Unreadable));
        assert_eq!(h(r#"{"b":"T","e":"0","f":{}}"#), Err(Unreadable));
        assert_eq!(h(r#"{"b":5,"e":"0"}"#), Err(Unreadable));
        assert_eq!(h(r#"{"b":"T","e":"0","i":7}"#), Err(Unreadable));
        assert_eq!(h(r#"{"b":"T","e":"0","e":"1"}"#), Err(Unreadable));
        // escapes are unescaped
        let e = parse_ext(r#"{"b":"T\u0041","e":"0"}"#).unwrap();
        assert_eq!(e.send_header(SEND_MESSAGE_V2).unwrap().topic, "TA");
    }
}
