//! ACL 1.0 on the SEND fast path: a signed send is taken only when its signature is right and
//! its account may publish to its topic; everything else is declined ([`crate::Decline::Acl`])
//! so the Python validator answers it (its remarks, its logging, its white lists). Sans-I/O.
//!
//! The rules are not read here: the Python validator parses the ACL files and pushes what the
//! fast path needs ([`AclAccount`]: each account's secret key and whether it may PUB on a topic,
//! by its default and per topic), on load and on every change ([`AclGate::set_rules`]). The
//! fast path accepts a strict subset of what the validator accepts:
//!
//! * the account (`AccessKey`) is one of the pushed accounts;
//! * the topic the fast path stores to is the one the validator checks (`topic` of a
//!   SEND_MESSAGE, `b` of a SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE; never a `%RETRY%` topic,
//!   which needs a group's SUB) and the account may PUB on it;
//! * the `Signature` is what the client signer computes: Base64 of HmacSHA1, under the secret
//!   key, of the `extFields` values sorted by key as Java sorts strings (UTF-16 code units),
//!   `Signature` and `_UNIQUE_KEY_QUERY` left out (when that fails and `_UNIQUE_KEY_QUERY` is
//!   there, with it in), then the body; compared in constant time.
//!
//! Anything else (no or an unknown access key, a wrong signature, a denied topic, an
//! `extFields` key twice, a value the Python path would read otherwise) is declined, and the
//! validator decides: a globally white-listed address or an account's `whiteRemoteAddress`
//! may be let through there without a valid signature, never here.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use parking_lot::RwLock;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use sha1::Sha1;
use subtle::ConstantTimeEq;

use crate::header::{TextField, Value, SEND_MESSAGE};

type HmacSha1 = Hmac<Sha1>;

const ACCESS_KEY: &str = "AccessKey";
const SIGNATURE: &str = "Signature";
const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";
const RETRY_PREFIX: &str = "%RETRY%";
/// Base64 of a 20-byte HmacSHA1.
const SIGNATURE_LEN: usize = 28;

/// One account as the Python validator compiled it for the fast path.
#[derive(Clone)]
pub struct AclAccount {
    /// The HMAC keyed with the account's secret key (cloned per request).
    mac: HmacSha1,
    /// Whether the account may PUB on a topic its `topics` do not name.
    default_pub: bool,
    /// Per topic, whether it may PUB there.
    topics: HashMap<String, bool>,
}

impl AclAccount {
    pub fn new(secret_key: &str, default_pub: bool, topics: HashMap<String, bool>) -> AclAccount {
        AclAccount {
            mac: HmacSha1::new_from_slice(secret_key.as_bytes()).expect("HMAC takes any key"),
            default_pub,
            topics,
        }
    }

    fn may_pub(&self, topic: &str) -> bool {
        self.topics.get(topic).copied().unwrap_or(self.default_pub)
    }

    /// Whether `given` is the signature of `fields` (sorted by key) and `body`, leaving out
    /// `Signature` and, unless `with_unique_key`, `_UNIQUE_KEY_QUERY`.
    fn signed(&self, fields: &[Field<'_>], body: &[u8], given: &[u8]) -> bool {
        let attempt = |with_unique_key: bool| {
            let mut mac = self.mac.clone();
            for (k, v) in fields {
                if k != SIGNATURE && (with_unique_key || k != UNIQUE_KEY_QUERY) {
                    mac.update(v.as_bytes());
                }
            }
            mac.update(body);
            let tag = mac.finalize().into_bytes();
            let mut b64 = [0u8; SIGNATURE_LEN];
            let n = base64::engine::general_purpose::STANDARD
                .encode_slice(tag, &mut b64)
                .expect("28 bytes hold a SHA-1 HMAC in Base64");
            bool::from(b64[..n].ct_eq(given))
        };
        attempt(false) || (fields.iter().any(|(k, _)| k == UNIQUE_KEY_QUERY) && attempt(true))
    }
}

impl fmt::Debug for AclAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // never the secret key
        f.debug_struct("AclAccount")
            .field("default_pub", &self.default_pub)
            .field("topics", &self.topics.len())
            .finish_non_exhaustive()
    }
}

/// The accounts the fast path knows, by access key.
#[derive(Debug, Default, Clone)]
pub struct AclRules {
    accounts: HashMap<String, AclAccount>,
}

impl AclRules {
    pub fn new(accounts: impl IntoIterator<Item = (String, AclAccount)>) -> AclRules {
        AclRules {
            accounts: accounts.into_iter().collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.accounts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.accounts.is_empty()
    }

    /// Whether a send request with `code` whose frame header is `header` (its JSON text), with
    /// `body`, stored to `topic`, is signed by an account that may PUB on `topic`. False for
    /// anything this cannot decide (the Python validator answers it).
    pub fn allows(&self, code: i32, header: &str, body: &[u8], topic: &str) -> bool {
        if topic.starts_with(RETRY_PREFIX) {
            return false;
        }
        ext_fields(header).is_some_and(|fields| self.allows_fields(code, fields, body, topic))
    }

    /// [`AclRules::allows`] for a header whose `extFields` entries were already read as text
    /// (by the fast path's own header pass: [`crate::header::Header::parse_signed`]).
    pub fn allows_fields(
        &self,
        code: i32,
        mut fields: Vec<Field<'_>>,
        body: &[u8],
        topic: &str,
    ) -> bool {
        if topic.starts_with(RETRY_PREFIX) {
            return false;
        }
        // Keys below U+E000 (every client's: ASCII) sort as Java sorts them by their bytes.
        if fields.iter().all(|(k, _)| k.bytes().all(|c| c < 0xEE)) {
            fields.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        } else {
            fields.sort_unstable_by(|a, b| java_order(&a.0, &b.0));
        }
        if fields.windows(2).any(|w| w[0].0 == w[1].0) {
            return false; // a key twice: the Python path keeps one of them
        }
        let get = |key: &str| fields.iter().find(|(k, _)| k == key).map(|(_, v)| &**v);
        // The topic the validator checks, named as the send's code names it.
        let checked = get(if code == SEND_MESSAGE { "topic" } else { "b" });
        if checked != Some(topic) {
            return false;
        }
        let Some(account) = get(ACCESS_KEY).and_then(|ak| self.accounts.get(ak)) else {
            return false;
        };
        let Some(given) = get(SIGNATURE).filter(|s| !s.is_empty()) else {
            return false;
        };
        account.may_pub(topic) && account.signed(&fields, body, given.as_bytes())
    }
}

/// The `extFields` of a frame header as the Python path reads them (integers as their decimal
/// text, booleans as `true` / `false`), unsorted; None when it has none or one the fast path
/// does not read (a null, a float, an object, a lone surrogate: the Python path decides).
fn ext_fields(header: &str) -> Option<Vec<Field<'_>>> {
    // The fast path's own header reader where it reads the header (its one pass), else serde_json.
    let gathered = crate::header::Header::parse_signed(header)
        .ok()
        .and_then(|h| h.ext)
        .and_then(|e| e.signed);
    gathered.or_else(|| {
        let h: AclHeader<'_> = serde_json::from_str(header).ok()?;
        h.ext.map(|e| e.0)
    })
}

/// One `extFields` entry: its key and its value as text.
type Field<'a> = TextField<'a>;

/// Java's `String.compareTo`: by UTF-16 code units. UTF-8 bytes sort as code points, which is
/// the same order unless a character at or above U+E000 is compared (lead bytes 0xEE and up).
fn java_order(a: &str, b: &str) -> std::cmp::Ordering {
    if a.bytes().chain(b.bytes()).all(|c| c < 0xEE) {
        a.cmp(b)
    } else {
        a.encode_utf16().cmp(b.encode_utf16())
    }
}

#[derive(Deserialize)]
struct AclHeader<'a> {
    #[serde(borrow, rename = "extFields")]
    ext: Option<ExtMap<'a>>,
}

struct ExtMap<'a>(Vec<Field<'a>>);

fn text(v: Value<'_>) -> Cow<'_, str> {
    match v {
        Value::Text(t) => t,
        Value::Int(n) => Cow::Owned(n.to_string()),
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for ExtMap<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ExtMap<'a>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ExtMap<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of strings, integers and booleans")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ExtMap<'de>, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(16));
                while let Some((k, v)) = map.next_entry::<Value<'de>, Value<'de>>()? {
                    if matches!(k, Value::Int(_)) {
                        return Err(de::Error::custom("a key that is not a string"));
                    }
                    out.push((text(k), text(v)));
                }
                Ok(ExtMap(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// The fast path's ACL state: off, or on with the rules last pushed (none until the first
/// push: every send is declined until then).
#[derive(Default)]
pub struct AclGate {
    rules: RwLock<Arc<AclRules>>,
    /// Sends taken after this check let them through.
    checked: AtomicU64,
    /// Sends this check declined.
    refused: AtomicU64,
    /// Times rules were pushed.
    loads: AtomicU64,
}

/// A snapshot of [`AclGate`]'s counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AclStats {
    /// Sends taken by the fast path after their signature and permission were checked here.
    pub checked: u64,
    /// Sends this check left to the Python validator.
    pub declined: u64,
    /// Times rules were pushed.
    pub loads: u64,
    /// Accounts in the rules in force.
    pub accounts: u64,
}

impl AclGate {
    pub fn new() -> AclGate {
        AclGate::default()
    }

    /// Take new rules (in force for the next send).
    pub fn set_rules(&self, rules: AclRules) {
        *self.rules.write() = Arc::new(rules);
        self.loads.fetch_add(1, Ordering::Relaxed);
    }

    /// [`AclRules::allows`] under the rules in force, counted when it declines.
    pub fn allows(&self, code: i32, header: &str, body: &[u8], topic: &str) -> bool {
        let ok = self.rules.read().allows(code, header, body, topic);
        self.count(ok)
    }

    /// [`AclRules::allows_fields`] under the rules in force, counted when it declines.
    pub fn allows_fields(
        &self,
        code: i32,
        fields: Vec<Field<'_>>,
        body: &[u8],
        topic: &str,
    ) -> bool {
        let ok = self.rules.read().allows_fields(code, fields, body, topic);
        self.count(ok)
    }

    fn count(&self, ok: bool) -> bool {
        if !ok {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// A send this check let through was stored and answered.
    pub fn taken(&self) {
        self.checked.fetch_add(1, Ordering::Relaxed);
    }

    pub fn stats(&self) -> AclStats {
        AclStats {
            checked: self.checked.load(Ordering::Relaxed),
            declined: self.refused.load(Ordering::Relaxed),
            loads: self.loads.load(Ordering::Relaxed),
            accounts: self.rules.read().len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> AclRules {
        let app_topics = HashMap::from([
            ("AclTopic".to_string(), true),
            ("DeniedTopic".to_string(), false),
        ]);
        AclRules::new([
            (
                "app".to_string(),
                AclAccount::new("app-secret-0002", false, app_topics),
            ),
            (
                "rmqadmin".to_string(),
                AclAccount::new("admin-secret-0001", true, HashMap::new()),
            ),
        ])
    }

    fn frame_header(ext: &str) -> String {
        format!(
            r#"{{"code":310,"extFields":{ext},"flag":0,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":401}}"#
        )
    }

    // Signatures computed by rmq's Python signer (`rmq.acl.signing.RequestSigner`, the Java
    // client's AclClientRPCHook), e.g. for VECTOR_JAVA:
    //   r = create_request(310, {"a": "PG", "b": "AclTopic", ..., "n": "broker-a"}, b"hello acl")
    //   RequestSigner("app", "app-secret-0002")(r); r.ext_fields["Signature"]
    const VECTOR_JAVA: &str = r#"{"AccessKey":"app","Signature":"eXrkelI6dRoc5JEPyeoTr0AqLvk=","a":"PG","b":"AclTopic","c":"TBW102","d":"4","e":"0","f":"0","g":"1795548446992","h":"0","i":"KEYS\u0001k0\u0002UNIQ_KEY\u0001FD00\u0002WAIT\u0001true","j":"0","k":"false","m":"false","n":"broker-a"}"#;
    const BODY_JAVA: &[u8] = b"hello acl";

    #[test]
    fn takes_the_python_signers_signature() {
        let r = rules();
        assert!(r.allows(310, &frame_header(VECTOR_JAVA), BODY_JAVA, "AclTopic"));
        // the keys in another order in the JSON: the same content
        let reordered = VECTOR_JAVA
            .replace(r#""AccessKey":"app","#, "")
            .replace(r#""n":"broker-a"}"#, r#""n":"broker-a","AccessKey":"app"}"#);
        assert!(r.allows(310, &frame_header(&reordered), BODY_JAVA, "AclTopic"));
    }

    #[test]
    fn declines_what_it_cannot_vouch_for() {
        let r = rules();
        let h = frame_header(VECTOR_JAVA);
        assert!(
            !r.allows(310, &h, b"hello acl!", "AclTopic"),
            "another body"
        );
        assert!(
            !r.allows(310, &h, BODY_JAVA, "OtherTopic"),
            "the stored topic is not b"
        );
        let other_q = VECTOR_JAVA.replace(r#""e":"0""#, r#""e":"1""#);
        assert!(!r.allows(310, &frame_header(&other_q), BODY_JAVA, "AclTopic"));
        let unknown = VECTOR_JAVA.replace(r#""AccessKey":"app""#, r#""AccessKey":"nobody""#);
        assert!(!r.allows(310, &frame_header(&unknown), BODY_JAVA, "AclTopic"));
        let unsigned = VECTOR_JAVA.replace("eXrkelI6dRoc5JEPyeoTr0AqLvk=", "");
        assert!(!r.allows(310, &frame_header(&unsigned), BODY_JAVA, "AclTopic"));
        let twice = VECTOR_JAVA.replace(r#""a":"PG""#, r#""a":"PG","a":"PG""#);
        assert!(!r.allows(310, &frame_header(&twice), BODY_JAVA, "AclTopic"));
        let null = VECTOR_JAVA.replace(r#""k":"false""#, r#""k":null"#);
        assert!(!r.allows(310, &frame_header(&null), BODY_JAVA, "AclTopic"));
        assert!(!r.allows(310, r#"{"code":310,"flag":0}"#, BODY_JAVA, "AclTopic"));
        assert!(!r.allows(310, "not json", BODY_JAVA, "AclTopic"));
        // no rules pushed yet: nothing is taken
        assert!(!AclRules::default().allows(310, &h, BODY_JAVA, "AclTopic"));
    }

    /// The fast path's one header pass (entries gathered as text), where it reads the header.
    fn one_pass(header: &str) -> Option<Vec<Field<'_>>> {
        crate::header::Header::parse_signed(header)
            .ok()?
            .ext?
            .signed
    }

    #[test]
    fn the_header_pass_gathers_what_the_check_reads() {
        let r = rules();
        let reordered = VECTOR_JAVA.replace(r#""AccessKey":"app","#, "").replace(
            r#""n":"broker-a"}"#,
            r#""n":"broker-a","AccessKey":"app","x":7,"y":true}"#,
        );
        for ext in [
            VECTOR_JAVA,
            reordered.as_str(),
            crate::header::tests::CPP_SEND,
        ] {
            let h = frame_header(ext);
            let mut gathered = one_pass(&h).expect("the compact reader reads it");
            let mut read = ext_fields(&h).expect("the check reads it");
            gathered.sort();
            read.sort();
            assert_eq!(gathered, read, "{ext}");
        }
        let h = frame_header(VECTOR_JAVA);
        assert!(r.allows_fields(310, one_pass(&h).unwrap(), BODY_JAVA, "AclTopic"));
        assert!(!r.allows_fields(310, one_pass(&h).unwrap(), b"other", "AclTopic"));
        assert!(!r.allows_fields(310, one_pass(&h).unwrap(), BODY_JAVA, "DeniedTopic"));
        // a null entry: nothing gathered (the check declines, the Python path decides)
        let null = frame_header(&VECTOR_JAVA.replace(r#""k":"false""#, r#""k":null"#));
        assert!(crate::header::Header::parse_signed(&null)
            .unwrap()
            .ext
            .unwrap()
            .signed
            .is_none());
        // without ACL nothing is gathered
        assert!(crate::header::Header::parse(&h)
            .unwrap()
            .ext
            .unwrap()
            .signed
            .is_none());
    }

    fn serde_reading(header: &str) -> Option<Vec<Field<'_>>> {
        let h: AclHeader<'_> = serde_json::from_str(header).ok()?;
        h.ext.map(|e| e.0)
    }

    #[test]
    fn the_header_pass_reads_as_serde_json_or_leaves_it_to_serde_json() {
        let read = [
            frame_header(VECTOR_JAVA),
            frame_header(
                r#"{"k":"a\"b\\c\/d\n\t\b\f\r\u00e9\u0001x","n":-12,"t":true,"f":false,"e":""}"#,
            ),
            frame_header(r#"{}"#),
            " { \"remark\" : null , \"extFields\" : { \"a\" : \"1\" , \"b\":2 } , \"code\":-3 } \n"
                .to_string(),
        ];
        for h in &read {
            let gathered = one_pass(h);
            assert!(gathered.is_some(), "{h}");
            assert_eq!(gathered, serde_reading(h), "{h}");
            assert_eq!(ext_fields(h), serde_reading(h), "{h}");
        }
        // outside the header reader's subset: serde_json decides (an escaped key, a surrogate
        // pair, a nested top-level value, no code)
        for h in [
            r#"{"extFields":{"\u0041K":"é主"},"language":"JAVA"}"#.to_string(),
            frame_header(r#"{"\ud83d\ude00":"smile"}"#),
            r#"{"x":{"y":[1]},"extFields":{"a":"1"}}"#.to_string(),
        ] {
            assert_eq!(one_pass(&h), None, "{h}");
            assert!(serde_reading(&h).is_some(), "{h}");
            assert_eq!(ext_fields(&h), serde_reading(&h), "{h}");
        }
        // neither reads these
        for bad in [
            frame_header(r#"{"a":1.5}"#),
            frame_header(r#"{"a":null}"#),
            frame_header(r#"{"a":"\ud800"}"#),
            frame_header(r#"{"a":01}"#),
            frame_header("{\"a\":\"raw\u{1}control\"}"),
            r#"{"extFields":{"a":"1"},"extFields":{"a":"2"}}"#.to_string(),
            r#"{"extFields":{"a":"1"}} x"#.to_string(),
            r#"{"code":310}"#.to_string(),
        ] {
            assert_eq!(ext_fields(&bad), None, "{bad}");
        }
    }

    #[test]
    fn sorts_keys_as_java_does() {
        use std::cmp::Ordering::*;
        assert_eq!(java_order("AccessKey", "a"), Less);
        assert_eq!(
            java_order("\u{FFFF}", "\u{1F600}"),
            Greater,
            "UTF-16: U+FFFF > U+D83D"
        );
        assert_eq!(java_order("\u{E000}", "\u{1F600}"), Greater);
        assert_eq!(java_order("\u{D7FF}", "\u{1F600}"), Less);
        assert_eq!(java_order("b", "b"), Equal);
    }

    // A correctly signed send to a topic the account may not PUB on (signed by the Python
    // signer with app's secret, b = DeniedTopic, body "x").
    const VECTOR_DENIED: &str = r#"{"AccessKey":"app","Signature":"c4ovIzCV1qehhkKBYHafDheeWqc=","a":"PG","b":"DeniedTopic","e":"0"}"#;

    #[test]
    fn declines_a_topic_the_account_may_not_publish_to() {
        let r = rules();
        assert!(!r.allows(310, &frame_header(VECTOR_DENIED), b"x", "DeniedTopic"));
        let retry = VECTOR_DENIED.replace("DeniedTopic", "%RETRY%G");
        assert!(!r.allows(310, &frame_header(&retry), b"x", "%RETRY%G"));
    }

    // The C++ client's SEND_MESSAGE (code 10): long names, numbers among the values (signed as
    // their decimal text), `_UNIQUE_KEY_QUERY` signed by the client (the second attempt), a
    // key outside the BMP to check the UTF-16 order; signed by the admin account.
    const VECTOR_CPP: &str = r#"{"AccessKey":"rmqadmin","Signature":"FQHNr9AMc6MTtd5hO1m0tWBMud0=","_UNIQUE_KEY_QUERY":"false","batch":"0","bornTimestamp":"1795548431611","defaultTopic":"TBW102","defaultTopicQueueNums":4,"flag":0,"producerGroup":"g1","properties":"KEYS\u0001k0\u0002","queueId":0,"reconsumeTimes":"0","sysFlag":0,"topic":"CapT","unitMode":"0","\ud83d\ude00":"smile","\uffff":"last"}"#;

    #[test]
    fn reads_numbers_and_sorts_as_java_does() {
        let r = rules();
        let h = VECTOR_CPP;
        let header = format!(r#"{{"code":10,"extFields":{h},"flag":0,"opaque":1}}"#);
        assert!(r.allows(10, &header, b"cpp body", "CapT"));
        assert!(!r.allows(10, &header, b"cpp body", "Other"));
        // SEND_MESSAGE stores to `topic` whatever `b` says, and the validator checks `topic`
        assert!(
            !r.allows(310, &header, b"cpp body", "CapT"),
            "a V2 names it b"
        );
    }
}
