//! The stored message record (RocketMQ 4.x "v1" layout), message ids and properties.
//!
//! Record layout, all integers big-endian (IPv4 hosts; an IPv6 host adds 12 bytes):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | TOTALSIZE (whole record) |
//! | 4 | 4 | MAGICCODE `0xDAA320A7` (`0xCBD43194` = end-of-file blank) |
//! | 8 | 4 | BODYCRC (`crc32(body) & 0x7fffffff`) |
//! | 12 | 4 | QUEUEID |
//! | 16 | 4 | FLAG |
//! | 20 | 8 | QUEUEOFFSET |
//! | 28 | 8 | PHYSICALOFFSET |
//! | 36 | 4 | SYSFLAG |
//! | 40 | 8 | BORNTIMESTAMP |
//! | 48 | 8/20 | BORNHOST (ip + 4-byte port) |
//! | 56 | 8 | STORETIMESTAMP |
//! | 64 | 8/20 | STOREHOST |
//! | 72 | 4 | RECONSUMETIMES |
//! | 76 | 8 | PREPARED TRANSACTION OFFSET |
//! | 84 | 4+b | BODY |
//! | 88+b | 1+t | TOPIC (1-byte length) |
//! | 89+b+t | 2+p | PROPERTIES (2-byte length) |

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::error::{Result, StoreError};

/// Magic code of a v1 message record.
pub const MESSAGE_MAGIC_CODE: i32 = 0xDAA3_20A7_u32 as i32;
/// Magic code of the end-of-file blank marker.
pub const BLANK_MAGIC_CODE: i32 = 0xCBD4_3194_u32 as i32;
/// Bytes always kept free at a file's end for the blank marker (size + magic).
pub const END_FILE_MIN_BLANK_LENGTH: usize = 8;
/// Fixed part of a record with IPv4 hosts (everything but body, topic and properties).
pub const RECORD_FIXED_SIZE_V4: usize = 91;

/// Offsets of the fields the appender patches.
pub const POS_QUEUE_OFFSET: usize = 20;
pub const POS_PHYSICAL_OFFSET: usize = 28;
pub const POS_SYSFLAG: usize = 36;
pub const POS_BORN_HOST: usize = 48;

/// Message sysflag bits (`MessageSysFlag`).
pub mod sysflag {
    pub const COMPRESSED: i32 = 0x1;
    pub const MULTI_TAGS: i32 = 0x2;
    pub const TRANSACTION_NOT_TYPE: i32 = 0;
    pub const TRANSACTION_PREPARED_TYPE: i32 = 0x4;
    pub const TRANSACTION_COMMIT_TYPE: i32 = 0x8;
    pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0xC;
    pub const BORNHOST_V6: i32 = 0x10;
    pub const STOREHOST_V6: i32 = 0x20;

    /// The transaction type bits of a sysflag.
    pub fn transaction_type(flag: i32) -> i32 {
        flag & TRANSACTION_ROLLBACK_TYPE
    }
}

/// Property names the store itself reads.
pub mod property {
    pub const TAGS: &str = "TAGS";
    pub const KEYS: &str = "KEYS";
    pub const UNIQ_KEY: &str = "UNIQ_KEY";
    pub const DELAY: &str = "DELAY";
    /// The LMQs (comma-separated `%LMQ%` topics) a record is also dispatched into.
    pub const INNER_MULTI_DISPATCH: &str = "INNER_MULTI_DISPATCH";
    pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
    pub const PROPERTY_SEPARATOR: char = '\u{2}';
}

/// The topic of delayed messages; their ConsumeQueue tag code is the delivery time.
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";

/// The topic of transaction op messages (which half messages are settled).
pub const TRANS_OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";

/// The name prefix of light message queue (LMQ) topics.
pub const LMQ_PREFIX: &str = "%LMQ%";

/// A message to append, borrowing its bytes from the caller.
#[derive(Debug, Clone)]
pub struct MessageRef<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub flag: i32,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: &'a [u8],
    pub properties: &'a [u8],
}

/// RocketMQ's body CRC: CRC-32 (IEEE) with the sign bit cleared.
pub fn body_crc(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7fff_ffff) as i32
}

fn host_len(addr: &SocketAddr) -> usize {
    match addr {
        SocketAddr::V4(_) => 8,
        SocketAddr::V6(_) => 20,
    }
}

/// Encoded length of a record with these parts.
pub fn record_len(
    body_len: usize,
    topic_len: usize,
    props_len: usize,
    born: &SocketAddr,
    store: &SocketAddr,
) -> usize {
    4 + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + host_len(born)
        + 8
        + host_len(store)
        + 4
        + 8
        + 4
        + body_len
        + 1
        + topic_len
        + 2
        + props_len
}

/// Check a message against the format's hard limits and `max_body`.
pub fn validate(msg: &MessageRef<'_>, max_body: u64) -> Result<()> {
    if msg.topic.is_empty() {
        return Err(StoreError::MessageIllegal("topic is empty".into()));
    }
    if msg.topic.len() > 127 {
        return Err(StoreError::MessageIllegal(format!(
            "topic is {} bytes, at most 127 fit the record",
            msg.topic.len()
        )));
    }
    if msg.properties.len() > i16::MAX as usize {
        return Err(StoreError::MessageIllegal(format!(
            "properties are {} bytes, at most 32767 fit the record",
            msg.properties.len()
        )));
    }
    if msg.body.len() as u64 > max_body {
        return Err(StoreError::MessageIllegal(format!(
            "body is {} bytes, maxMessageSize is {max_body}",
            msg.body.len()
        )));
    }
    Ok(())
}

fn sysflag_with_hosts(mut flag: i32, born: &SocketAddr, store: &SocketAddr) -> i32 {
    flag &= !(sysflag::BORNHOST_V6 | sysflag::STOREHOST_V6);
    if born.is_ipv6() {
        flag |= sysflag::BORNHOST_V6;
    }
    if store.is_ipv6() {
        flag |= sysflag::STOREHOST_V6;
    }
    flag
}

struct Writer<'b> {
    buf: &'b mut [u8],
    pos: usize,
}

impl Writer<'_> {
    #[inline]
    fn put(&mut self, b: &[u8]) {
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }
    #[inline]
    fn i32(&mut self, v: i32) {
        self.put(&v.to_be_bytes())
    }
    #[inline]
    fn i64(&mut self, v: i64) {
        self.put(&v.to_be_bytes())
    }
    fn host(&mut self, a: &SocketAddr) {
        match a {
            SocketAddr::V4(v4) => self.put(&v4.ip().octets()),
            SocketAddr::V6(v6) => self.put(&v6.ip().octets()),
        }
        self.i32(a.port() as i32);
    }
}

/// Values the appender assigns to a record.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub store_timestamp: i64,
    pub store_host: SocketAddr,
}

/// Encode `msg` into `buf`, which must be exactly [`record_len`] bytes.
pub fn encode_into(buf: &mut [u8], msg: &MessageRef<'_>, crc: i32, at: &Placement) {
    let total = buf.len();
    let mut w = Writer { buf, pos: 0 };
    w.i32(total as i32);
    w.i32(MESSAGE_MAGIC_CODE);
    w.i32(crc);
    w.i32(msg.queue_id);
    w.i32(msg.flag);
    w.i64(at.queue_offset);
    w.i64(at.physical_offset);
    w.i32(sysflag_with_hosts(
        msg.sys_flag,
        &msg.born_host,
        &at.store_host,
    ));
    w.i64(msg.born_timestamp);
    w.host(&msg.born_host);
    w.i64(at.store_timestamp);
    w.host(&at.store_host);
    w.i32(msg.reconsume_times);
    w.i64(msg.prepared_transaction_offset);
    w.i32(msg.body.len() as i32);
    w.put(msg.body);
    w.put(&[msg.topic.len() as u8]);
    w.put(msg.topic.as_bytes());
    w.put(&(msg.properties.len() as i16).to_be_bytes());
    w.put(msg.properties);
    debug_assert_eq!(w.pos, total);
}

/// Encode `msg` into a new vector.
pub fn encode(msg: &MessageRef<'_>, at: &Placement) -> Vec<u8> {
    let len = record_len(
        msg.body.len(),
        msg.topic.len(),
        msg.properties.len(),
        &msg.born_host,
        &at.store_host,
    );
    let mut v = vec![0u8; len];
    encode_into(&mut v, msg, body_crc(msg.body), at);
    v
}

/// A record decoded in place.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    pub total_size: i32,
    pub magic: i32,
    pub body_crc: i32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: SocketAddr,
    pub store_timestamp: i64,
    pub store_host: SocketAddr,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: &'a [u8],
    pub topic: &'a str,
    pub properties: &'a str,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    // Inlined: decoding a record is a dozen of these, on every read of every message.
    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        match self.pos.checked_add(n) {
            Some(end) if end <= self.buf.len() => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            _ => Err(self.short(n)),
        }
    }
    #[cold]
    #[inline(never)]
    fn short(&self, n: usize) -> StoreError {
        StoreError::corrupt(
            "record",
            format!(
                "needs {n} bytes at {} but only {} remain",
                self.pos,
                self.buf.len() - self.pos.min(self.buf.len())
            ),
        )
    }
    #[inline]
    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }
    #[inline]
    fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().unwrap()))
    }
    #[inline]
    fn host(&mut self, v6: bool) -> Result<SocketAddr> {
        let ip: IpAddr = if v6 {
            let b: [u8; 16] = self.take(16)?.try_into().unwrap();
            IpAddr::V6(Ipv6Addr::from(b))
        } else {
            let b: [u8; 4] = self.take(4)?.try_into().unwrap();
            IpAddr::V4(Ipv4Addr::from(b))
        };
        let port = self.i32()?;
        Ok(SocketAddr::new(ip, port as u16))
    }
}

/// Read the 4-byte big-endian integer at `pos`.
pub fn read_i32(buf: &[u8], pos: usize) -> Option<i32> {
    Some(i32::from_be_bytes(buf.get(pos..pos + 4)?.try_into().ok()?))
}

/// Read the 8-byte big-endian integer at `pos`.
pub fn read_i64(buf: &[u8], pos: usize) -> Option<i64> {
    Some(i64::from_be_bytes(buf.get(pos..pos + 8)?.try_into().ok()?))
}

/// Offset of STORETIMESTAMP inside a record with this sysflag.
pub fn store_timestamp_pos(sys_flag: i32) -> usize {
    if sys_flag & sysflag::BORNHOST_V6 != 0 {
        68
    } else {
        56
    }
}

/// Decode one message record at the start of `buf` (which may hold more after it).
/// Checks the magic code, that the encoded lengths add up to TOTALSIZE, and, if asked,
/// the body CRC.
pub fn decode(buf: &[u8], check_crc: bool) -> Result<Record<'_>> {
    let mut r = Reader { buf, pos: 0 };
    let total_size = r.i32()?;
    let magic = r.i32()?;
    if magic != MESSAGE_MAGIC_CODE {
        return Err(StoreError::corrupt(
            "record",
            format!("magic code {magic:#x} is not a message"),
        ));
    }
    if total_size < RECORD_FIXED_SIZE_V4 as i32 || total_size as usize > buf.len() {
        return Err(StoreError::corrupt(
            "record",
            format!(
                "total size {total_size} outside [{RECORD_FIXED_SIZE_V4}, {}]",
                buf.len()
            ),
        ));
    }
    let r_buf = &buf[..total_size as usize];
    let mut r = Reader { buf: r_buf, pos: 8 };
    let body_crc_v = r.i32()?;
    let queue_id = r.i32()?;
    let flag = r.i32()?;
    let queue_offset = r.i64()?;
    let physical_offset = r.i64()?;
    let sys_flag = r.i32()?;
    let born_timestamp = r.i64()?;
    let born_host = r.host(sys_flag & sysflag::BORNHOST_V6 != 0)?;
    let store_timestamp = r.i64()?;
    let store_host = r.host(sys_flag & sysflag::STOREHOST_V6 != 0)?;
    let reconsume_times = r.i32()?;
    let prepared_transaction_offset = r.i64()?;
    let body_len = r.i32()?;
    if body_len < 0 {
        return Err(StoreError::corrupt("record", "negative body length"));
    }
    let body = r.take(body_len as usize)?;
    let topic_len = r.take(1)?[0] as usize;
    let topic = std::str::from_utf8(r.take(topic_len)?)
        .map_err(|_| StoreError::corrupt("record", "topic is not UTF-8"))?;
    let props_len = i16::from_be_bytes(r.take(2)?.try_into().unwrap());
    if props_len < 0 {
        return Err(StoreError::corrupt("record", "negative properties length"));
    }
    let properties = std::str::from_utf8(r.take(props_len as usize)?)
        .map_err(|_| StoreError::corrupt("record", "properties are not UTF-8"))?;
    if r.pos != total_size as usize {
        return Err(StoreError::corrupt(
            "record",
            format!(
                "fields add up to {} bytes but TOTALSIZE is {total_size}",
                r.pos
            ),
        ));
    }
    if check_crc && body_crc(body) != body_crc_v {
        return Err(StoreError::corrupt(
            "record",
            format!("body CRC mismatch at physical offset {physical_offset}"),
        ));
    }
    Ok(Record {
        total_size,
        magic,
        body_crc: body_crc_v,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body,
        topic,
        properties,
    })
}

/// Iterate `(name, value)` over a RocketMQ property string, applying the Java parser's rules
/// (segments with an empty name or value are skipped).
pub fn properties_iter(props: &str) -> impl Iterator<Item = (&str, &str)> {
    // Both separators are ASCII, so byte positions are char boundaries; memchr over the bytes
    // is several times faster than a char pattern on this per-record path.
    let sep = property::PROPERTY_SEPARATOR as u8;
    let nv = property::NAME_VALUE_SEPARATOR as u8;
    let bytes = props.as_bytes();
    let mut start = 0usize;
    std::iter::from_fn(move || {
        while start <= bytes.len() {
            let end = memchr::memchr(sep, &bytes[start..]).map_or(bytes.len(), |k| start + k);
            let seg = start..end;
            start = end + 1;
            let Some(i) = memchr::memchr(nv, &bytes[seg.clone()]) else {
                continue;
            };
            let (k, v) = (
                &props[seg.start..seg.start + i],
                &props[seg.start + i + 1..seg.end],
            );
            if !k.is_empty() && !v.is_empty() {
                return Some((k, v));
            }
        }
        None
    })
}

/// The last value of `name` in a property string (later duplicates win, as in Java).
pub fn property<'a>(props: &'a str, name: &str) -> Option<&'a str> {
    properties_iter(props)
        .filter(|(k, _)| *k == name)
        .map(|(_, v)| v)
        .last()
}

/// Java's `String.hashCode` over UTF-16 code units.
pub fn java_string_hash(s: &str) -> i32 {
    java_string_hash_on(0, s)
}

/// Java's `String.hashCode` of a concatenation, continued: `java_string_hash_on(hash(a), b)`
/// is `hash(a + b)`.
pub fn java_string_hash_on(mut h: i32, s: &str) -> i32 {
    // An ASCII byte is its own UTF-16 unit: hash the ASCII prefix (usually all of it) byte by
    // byte; a non-ASCII byte starts a character, where the UTF-16 units take over.
    let bytes = s.as_bytes();
    let ascii = bytes
        .iter()
        .position(|&b| !b.is_ascii())
        .unwrap_or(bytes.len());
    // Four bytes a step (h·31⁴ + a·31³ + b·31² + c·31 + d): the products are independent, so
    // the step is not four multiplications one after the other.
    let mut quads = bytes[..ascii].chunks_exact(4);
    for q in &mut quads {
        h = h
            .wrapping_mul(923_521)
            .wrapping_add(i32::from(q[0]).wrapping_mul(29_791))
            .wrapping_add(i32::from(q[1]).wrapping_mul(961))
            .wrapping_add(i32::from(q[2]).wrapping_mul(31))
            .wrapping_add(i32::from(q[3]));
    }
    for &b in quads.remainder() {
        h = h.wrapping_mul(31).wrapping_add(i32::from(b));
    }
    for u in s[ascii..].encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(u as i32);
    }
    h
}

/// The ConsumeQueue tags code of a message: `String.hashCode(TAGS)` (0 without a tag).
pub fn tags_code(props: &str) -> i64 {
    property(props, property::TAGS)
        .map(|t| java_string_hash(t) as i64)
        .unwrap_or(0)
}

/// The offset message id as RocketMQ renders it: the store host's address (4 or 16 bytes),
/// its port (4 bytes) and the CommitLog offset (8 bytes), big-endian, in uppercase hex.
pub fn offset_msg_id_hex(store_host: &SocketAddr, physical_offset: i64) -> String {
    let mut s = String::with_capacity(56);
    push_offset_msg_id_hex(&mut s, store_host, physical_offset);
    s
}

/// [`offset_msg_id_hex`] appended to `out`.
pub fn push_offset_msg_id_hex(out: &mut String, store_host: &SocketAddr, physical_offset: i64) {
    let mut id = [0u8; 56];
    let n = offset_msg_id_hex_into(&mut id, store_host, physical_offset);
    out.extend(id[..n].iter().map(|&b| b as char));
}

/// [`offset_msg_id_hex`] appended to `out` as bytes (ASCII).
pub fn push_offset_msg_id_hex_bytes(
    out: &mut Vec<u8>,
    store_host: &SocketAddr,
    physical_offset: i64,
) {
    let mut id = [0u8; 56];
    let n = offset_msg_id_hex_into(&mut id, store_host, physical_offset);
    out.extend_from_slice(&id[..n]);
}

/// [`offset_msg_id_hex`] written to the start of `id`; its length (32, or 56 for IPv6).
fn offset_msg_id_hex_into(
    id: &mut [u8; 56],
    store_host: &SocketAddr,
    physical_offset: i64,
) -> usize {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut n = 0;
    let mut push = |bytes: &[u8]| {
        for &b in bytes {
            id[n] = HEX[(b >> 4) as usize];
            id[n + 1] = HEX[(b & 15) as usize];
            n += 2;
        }
    };
    match store_host {
        SocketAddr::V4(a) => push(&a.ip().octets()),
        SocketAddr::V6(a) => push(&a.ip().octets()),
    }
    push(&(store_host.port() as i32).to_be_bytes());
    push(&physical_offset.to_be_bytes());
    n
}

/// Decode an offset message id (either case) into store host and commitlog offset.
pub fn decode_offset_msg_id(id: &str) -> Result<(SocketAddr, i64)> {
    let bad = || StoreError::MessageIllegal(format!("{id:?} is not an offset message id"));
    if !(id.len() == 32 || id.len() == 56) || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let bytes: Vec<u8> = (0..id.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&id[i..i + 2], 16).map_err(|_| bad()))
        .collect::<Result<_>>()?;
    let ip_len = if id.len() == 32 { 4 } else { 16 };
    let ip: IpAddr = if ip_len == 4 {
        IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(&bytes[..4]).unwrap()))
    } else {
        IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&bytes[..16]).unwrap()))
    };
    let port = i32::from_be_bytes(bytes[ip_len..ip_len + 4].try_into().unwrap());
    let off = i64::from_be_bytes(bytes[ip_len + 4..ip_len + 12].try_into().unwrap());
    let port = u16::try_from(port).map_err(|_| bad())?;
    if off < 0 {
        return Err(bad());
    }
    Ok((SocketAddr::new(ip, port), off))
}

/// One message of a batch body (§4.5), with its final property string.
#[derive(Debug, Clone)]
pub struct BatchItem<'a> {
    pub flag: i32,
    pub body: &'a [u8],
    pub properties: Vec<u8>,
}

/// Split a batch body into its messages, appending `extra_props` (the batch-level
/// properties, e.g. `CLUSTER`) to each message's own properties.
pub fn decode_batch_body<'a>(body: &'a [u8], extra_props: &[u8]) -> Result<Vec<BatchItem<'a>>> {
    decode_batch_inner(body, extra_props).map_err(|e| match e {
        StoreError::Corrupt { detail, .. } => {
            StoreError::MessageIllegal(format!("malformed batch body: {detail}"))
        }
        other => other,
    })
}

fn decode_batch_inner<'a>(body: &'a [u8], extra_props: &[u8]) -> Result<Vec<BatchItem<'a>>> {
    let mut items = Vec::new();
    let mut r = Reader { buf: body, pos: 0 };
    while r.pos < body.len() {
        let _total = r.i32()?;
        let _magic = r.i32()?;
        let _crc = r.i32()?;
        let flag = r.i32()?;
        let body_len = r.i32()?;
        if body_len < 0 {
            return Err(StoreError::MessageIllegal(
                "batch entry has a negative body length".into(),
            ));
        }
        let b = r.take(body_len as usize).map_err(|_| {
            StoreError::MessageIllegal("batch entry body runs past the end of the batch".into())
        })?;
        let props_len = i16::from_be_bytes(r.take(2)?.try_into().unwrap());
        if props_len < 0 {
            return Err(StoreError::MessageIllegal(
                "batch entry has a negative properties length".into(),
            ));
        }
        let p = r.take(props_len as usize).map_err(|_| {
            StoreError::MessageIllegal(
                "batch entry properties run past the end of the batch".into(),
            )
        })?;
        let mut props = Vec::with_capacity(p.len() + extra_props.len() + 1);
        props.extend_from_slice(p);
        if !extra_props.is_empty() {
            if !p.is_empty() && *p.last().unwrap() != 2u8 {
                props.push(2u8);
            }
            props.extend_from_slice(extra_props);
        }
        items.push(BatchItem {
            flag,
            body: b,
            properties: props,
        });
    }
    if items.is_empty() {
        return Err(StoreError::MessageIllegal("batch body is empty".into()));
    }
    Ok(items)
}

/// Encode messages as a batch body (the inverse of [`decode_batch_body`]; used by tests
/// and benchmarks).
pub fn encode_batch_body(items: &[(i32, &[u8], &[u8])]) -> Vec<u8> {
    let mut v = Vec::new();
    for (flag, body, props) in items {
        v.extend_from_slice(&((22 + body.len() + props.len()) as i32).to_be_bytes());
        v.extend_from_slice(&0i32.to_be_bytes());
        v.extend_from_slice(&0i32.to_be_bytes());
        v.extend_from_slice(&flag.to_be_bytes());
        v.extend_from_slice(&(body.len() as i32).to_be_bytes());
        v.extend_from_slice(body);
        v.extend_from_slice(&(props.len() as i16).to_be_bytes());
        v.extend_from_slice(props);
    }
    v
}

/// The half queue offsets a transaction op record's body decides: one decimal (RocketMQ 4.x) or
/// several separated by commas (5.x); a part that is not a decimal number decides nothing.
pub fn op_half_offsets(body: &[u8]) -> impl Iterator<Item = i64> + '_ {
    body.split(|&b| b == b',').filter_map(|part| {
        std::str::from_utf8(part)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
    })
}

/// Walk op records stored back to back in `buf` (a read of the op queue): how many records were
/// read and, for each half offset one decides, `(op record's queue offset, half offset)`. Stops at
/// the first record that does not decode (what came before it is returned).
pub fn op_records(buf: &[u8]) -> (usize, Vec<(i64, i64)>) {
    let (mut pos, mut n, mut pairs) = (0usize, 0usize, Vec::new());
    while pos < buf.len() {
        let Ok(rec) = decode(&buf[pos..], false) else {
            break;
        };
        n += 1;
        pairs.extend(op_half_offsets(rec.body).map(|h| (rec.queue_offset, h)));
        pos += rec.total_size as usize;
    }
    (n, pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record built byte by byte from REMOTING.md §4.1, independent of `encode`.
    fn hand_built() -> Vec<u8> {
        let body = b"hello";
        let topic = b"TopicTest";
        let props = "TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2".as_bytes();
        let total = 91 + body.len() + topic.len() + props.len();
        let mut v = Vec::new();
        v.extend_from_slice(&(total as u32).to_be_bytes());
        v.extend_from_slice(&[0xDA, 0xA3, 0x20, 0xA7]);
        // zlib.crc32(b"hello") = 0x3610a686, masked: 0x3610a686
        v.extend_from_slice(&0x3610_a686u32.to_be_bytes());
        v.extend_from_slice(&3u32.to_be_bytes()); // queue id
        v.extend_from_slice(&7u32.to_be_bytes()); // flag
        v.extend_from_slice(&42u64.to_be_bytes()); // queue offset
        v.extend_from_slice(&4096u64.to_be_bytes()); // physical offset
        v.extend_from_slice(&0u32.to_be_bytes()); // sysflag
        v.extend_from_slice(&1_700_000_000_000u64.to_be_bytes()); // born ts
        v.extend_from_slice(&[10, 0, 0, 2]);
        v.extend_from_slice(&5555u32.to_be_bytes());
        v.extend_from_slice(&1_700_000_000_123u64.to_be_bytes()); // store ts
        v.extend_from_slice(&[10, 0, 0, 1]);
        v.extend_from_slice(&10911u32.to_be_bytes());
        v.extend_from_slice(&2u32.to_be_bytes()); // reconsume
        v.extend_from_slice(&0u64.to_be_bytes()); // prepared tx offset
        v.extend_from_slice(&(body.len() as u32).to_be_bytes());
        v.extend_from_slice(body);
        v.push(topic.len() as u8);
        v.extend_from_slice(topic);
        v.extend_from_slice(&(props.len() as u16).to_be_bytes());
        v.extend_from_slice(props);
        v
    }

    fn sample<'a>(props: &'a [u8]) -> MessageRef<'a> {
        MessageRef {
            topic: "TopicTest",
            queue_id: 3,
            flag: 7,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            born_host: "10.0.0.2:5555".parse().unwrap(),
            reconsume_times: 2,
            prepared_transaction_offset: 0,
            body: b"hello",
            properties: props,
        }
    }

    #[test]
    fn encode_matches_hand_built_bytes() {
        let props = "TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2".as_bytes();
        let at = Placement {
            queue_offset: 42,
            physical_offset: 4096,
            store_timestamp: 1_700_000_000_123,
            store_host: "10.0.0.1:10911".parse().unwrap(),
        };
        let enc = encode(&sample(props), &at);
        assert_eq!(enc, hand_built());
        let r = decode(&enc, true).unwrap();
        assert_eq!(r.topic, "TopicTest");
        assert_eq!(r.body, b"hello");
        assert_eq!(r.queue_offset, 42);
        assert_eq!(r.store_host, at.store_host);
        assert_eq!(r.born_host, "10.0.0.2:5555".parse().unwrap());
        assert_eq!(property(r.properties, "KEYS"), Some("k1 k2"));
        assert_eq!(
            read_i64(&enc, store_timestamp_pos(r.sys_flag)),
            Some(1_700_000_000_123)
        );
    }

    #[test]
    fn op_records_pairs_each_decided_half_offset_with_its_record() {
        let at = |q| Placement {
            queue_offset: q,
            physical_offset: 0,
            store_timestamp: 1,
            store_host: "10.0.0.1:10911".parse().unwrap(),
        };
        let mut buf = Vec::new();
        for (q, body) in [(7, &b"12"[..]), (8, b"3, 4,x,,5"), (9, b"not a number")] {
            let mut m = sample(b"TAGS\x01d");
            m.body = body;
            buf.extend(encode(&m, &at(q)));
        }
        let (n, pairs) = op_records(&buf);
        assert_eq!(n, 3);
        assert_eq!(pairs, vec![(7, 12), (8, 3), (8, 4), (8, 5)]);
        // A damaged tail stops the walk; what came before it stands.
        let whole = buf.len();
        buf.extend_from_slice(&[0, 0, 0, 90, 1, 2, 3]);
        assert_eq!(op_records(&buf).0, 3);
        assert_eq!(
            op_records(&buf[..whole - 1]).1,
            vec![(7, 12), (8, 3), (8, 4), (8, 5)]
        );
    }

    #[test]
    fn ipv6_hosts_set_flags_and_grow() {
        let props = b"";
        let mut m = sample(props);
        m.born_host = "[::1]:1234".parse().unwrap();
        let at = Placement {
            queue_offset: 0,
            physical_offset: 0,
            store_timestamp: 5,
            store_host: "[::2]:10911".parse().unwrap(),
        };
        let enc = encode(&m, &at);
        assert_eq!(enc.len(), 115 + 5 + 9);
        let r = decode(&enc, true).unwrap();
        assert_eq!(r.sys_flag, sysflag::BORNHOST_V6 | sysflag::STOREHOST_V6);
        assert_eq!(r.store_timestamp, 5);
        assert_eq!(read_i64(&enc, store_timestamp_pos(r.sys_flag)), Some(5));
    }

    #[test]
    fn decode_rejects_damage() {
        let good = hand_built();
        let mut bad = good.clone();
        bad[90] ^= 0xff; // inside the body
        assert!(decode(&bad, true).is_err());
        assert!(decode(&bad, false).is_ok());
        assert!(decode(&good[..good.len() - 1], true).is_err());
        let mut bad = good.clone();
        bad[4] = 0;
        assert!(decode(&bad, true).is_err());
        let mut bad = good.clone();
        bad[3] = bad[3].wrapping_sub(1); // TOTALSIZE one short
        assert!(decode(&bad, true).is_err());
        assert!(decode(&[], true).is_err());
        assert!(decode(&[0xff; 200], true).is_err());
    }

    #[test]
    fn properties_follow_java_rules() {
        let p = "A\u{1}1\u{2}\u{1}x\u{2}B\u{1}\u{2}A\u{1}2\u{2}junk";
        let v: Vec<_> = properties_iter(p).collect();
        assert_eq!(v, vec![("A", "1"), ("A", "2")]);
        assert_eq!(property(p, "A"), Some("2"));
        assert_eq!(property(p, "B"), None);
        assert_eq!(properties_iter("").count(), 0);
        assert_eq!(properties_iter("\u{2}\u{2}").count(), 0);
    }

    #[test]
    fn properties_iter_agrees_with_splitting_on_chars() {
        use rand::{Rng, SeedableRng};
        let reference = |p: &str| -> Vec<(String, String)> {
            p.split('\u{2}')
                .filter_map(|seg| {
                    let i = seg.find('\u{1}')?;
                    let (k, v) = (&seg[..i], &seg[i + 1..]);
                    (!k.is_empty() && !v.is_empty()).then(|| (k.to_string(), v.to_string()))
                })
                .collect()
        };
        let alphabet = ['a', 'Z', '\u{1}', '\u{2}', 'é', '😀', ' '];
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for _ in 0..5000 {
            let n = rng.gen_range(0..24);
            let p: String = (0..n)
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect();
            let got: Vec<(String, String)> = properties_iter(&p)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(got, reference(&p), "{p:?}");
        }
    }

    #[test]
    fn java_hash_and_tags_code() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("TagA"), 2_598_919);
        assert_eq!(java_string_hash("hello world"), 1_794_106_052);
        assert_eq!(java_string_hash("😀"), 1_772_899);
        // The ASCII prefix byte by byte, then UTF-16 units: as the units throughout.
        for s in [
            "",
            "abc",
            "abcd",
            "abcdefghi",
            "é",
            "aéb😀c d",
            "x😀",
            "TopicTest#UNIQ é",
            "AC11000100002A9F0000000000000001",
        ] {
            let units = s
                .encode_utf16()
                .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(u as i32));
            assert_eq!(java_string_hash(s), units, "{s}");
        }
        assert_eq!(tags_code("TAGS\u{1}TagA"), 2_598_919);
        assert_eq!(tags_code(""), 0);
        let t = java_string_hash("Topic#");
        assert_eq!(
            java_string_hash_on(t, "kéy😀"),
            java_string_hash("Topic#kéy😀")
        );
    }

    #[test]
    fn msg_ids() {
        let host: SocketAddr = "10.0.0.1:10911".parse().unwrap();
        let id = offset_msg_id_hex(&host, 0x1234);
        assert_eq!(id, "0A00000100002A9F0000000000001234");
        assert_eq!(
            decode_offset_msg_id(&id.to_lowercase()).unwrap(),
            (host, 0x1234)
        );
        assert!(decode_offset_msg_id("zz").is_err());
        // A client UNIQ_KEY has the same shape but no valid port field.
        assert!(decode_offset_msg_id("7F0000010F2A18B4AAC27A2C11D70000").is_err());
        let h6: SocketAddr = "[::1]:9".parse().unwrap();
        assert_eq!(
            decode_offset_msg_id(&offset_msg_id_hex(&h6, 77)).unwrap(),
            (h6, 77)
        );
    }

    #[test]
    fn batch_roundtrip() {
        let body = encode_batch_body(&[(1, b"a", b"K\x01v"), (2, b"bb", b"")]);
        let items = decode_batch_body(&body, b"CLUSTER\x01c").unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].properties, b"K\x01v\x02CLUSTER\x01c");
        assert_eq!(items[1].properties, b"CLUSTER\x01c");
        assert_eq!(items[1].body, b"bb");
        assert!(decode_batch_body(&body[..body.len() - 3], b"").is_err());
        assert!(decode_batch_body(b"", b"").is_err());
    }
}
