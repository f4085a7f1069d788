//! A reader of ROCKETMQ binary frame headers (serialize type 1, REMOTING.md §1.3), for the send
//! fast path: the Java client 5.x writes its requests so.
//!
//! ```text
//! int16 code, int8 language, int16 version, int32 opaque, int32 flag,
//! int32 n + n bytes remark, int32 m + m bytes of extFields entries:
//!   int16 k + k bytes key, int32 v + v bytes value
//! ```
//!
//! It reads what the Python path's decoder reads (`rmq.remoting.codec.decode_binary_header`):
//! strings are UTF-8, a zero-length value is absent. Where that decoder would refuse the header
//! (a length running past it, a string that is not UTF-8) or read it otherwise (a field the
//! send reads given twice: the Python path keeps the last), this reader returns `None` and the
//! request is left to the Python path.

use std::borrow::Cow;

use super::{Ext, Header, Value};

/// Read `h` as a frame header; `None` when the fast path must leave it to the Python path.
pub(super) fn header(h: &[u8]) -> Option<Header<'_>> {
    let mut r = Reader { s: h, i: 0 };
    let code = r.i16()?;
    let _language = r.take(1)?;
    let _version = r.i16()?;
    let opaque = r.i32()?;
    let flag = r.i32()?;
    let remark_len = r.len32()?;
    std::str::from_utf8(r.take(remark_len)?).ok()?;
    let ext_len = r.len32()?;
    let mut e = Reader {
        s: r.take(ext_len)?,
        i: 0,
    };
    let mut ext = Ext::default();
    let mut seen = 0u32;
    while e.i < e.s.len() {
        let key_len = usize::try_from(e.i16()?).ok()?;
        let key = std::str::from_utf8(e.take(key_len)?).ok()?;
        let value_len = e.len32()?;
        let value = std::str::from_utf8(e.take(value_len)?).ok()?;
        let Some((bit, slot)) = ext.slot(key) else {
            continue;
        };
        if value.is_empty() || key.is_empty() {
            continue; // read as absent (an empty key is never one of the above)
        }
        if seen & (1 << bit) != 0 {
            return None; // a field twice
        }
        seen |= 1 << bit;
        *slot = Some(Value::Text(Cow::Borrowed(value)));
    }
    Some(Header {
        code: i32::from(code),
        flag,
        opaque,
        ext: Some(ext),
    })
}

struct Reader<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.i.checked_add(n)?;
        let out = self.s.get(self.i..end)?;
        self.i = end;
        Some(out)
    }

    fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }

    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    /// An int32 length; a negative one is malformed.
    fn len32(&mut self) -> Option<usize> {
        usize::try_from(self.i32()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A binary header as `encode_binary_header` writes one.
    pub(crate) fn encode(
        code: i16,
        opaque: i32,
        flag: i32,
        remark: &str,
        ext: &[(&str, &str)],
    ) -> Vec<u8> {
        let mut h = code.to_be_bytes().to_vec();
        h.push(0);
        h.extend_from_slice(&401i16.to_be_bytes());
        h.extend_from_slice(&opaque.to_be_bytes());
        h.extend_from_slice(&flag.to_be_bytes());
        h.extend_from_slice(&(remark.len() as i32).to_be_bytes());
        h.extend_from_slice(remark.as_bytes());
        let mut entries = Vec::new();
        for (k, v) in ext {
            entries.extend_from_slice(&(k.len() as i16).to_be_bytes());
            entries.extend_from_slice(k.as_bytes());
            entries.extend_from_slice(&(v.len() as i32).to_be_bytes());
            entries.extend_from_slice(v.as_bytes());
        }
        h.extend_from_slice(&(entries.len() as i32).to_be_bytes());
        h.extend_from_slice(&entries);
        h
    }

    /// The Java client 5.5.0's SEND_BATCH_MESSAGE header, as captured from `BatchProducer`.
    const JAVA5_BATCH: &[(&str, &str)] = &[
        ("a", "benchmark_batch_producer"),
        ("b", "BenchmarkTest"),
        ("c", "TBW102"),
        ("d", "4"),
        ("e", "3"),
        ("f", "0"),
        ("g", "1795856272047"),
        ("h", "0"),
        (
            "i",
            "UNIQ_KEY\u{1}FD00000000000000000000000000000225F230946E098CF822AF1055\u{2}WAIT\u{1}true\u{2}",
        ),
        ("j", "0"),
        ("k", "false"),
        ("m", "true"),
        ("n", "broker-a"),
    ];

    #[test]
    fn reads_the_java_5_clients_batch() {
        let bytes = encode(320, 494, 0, "", JAVA5_BATCH);
        let h = header(&bytes).unwrap();
        assert_eq!((h.code, h.flag, h.opaque), (320, 0, 494));
        let ext = h.ext.unwrap();
        let f = ext.send_header(320).unwrap();
        assert_eq!(
            (f.topic, f.queue_id, f.sys_flag, f.batch),
            ("BenchmarkTest", 3, 0, true)
        );
        assert_eq!(f.born_timestamp, 1795856272047);
        assert!(f.properties.starts_with("UNIQ_KEY\u{1}FD0"));
    }

    #[test]
    fn reads_what_the_python_decoder_reads_or_nothing() {
        // an empty value is absent; keys the send does not read are skipped
        let bytes = encode(
            310,
            1,
            2,
            "a remark",
            &[("b", "T"), ("e", "1"), ("f", ""), ("zz", "x")],
        );
        let h = header(&bytes).unwrap();
        assert_eq!((h.code, h.flag, h.opaque), (310, 2, 1));
        let ext = h.ext.unwrap();
        let f = ext.send_header(310).unwrap();
        assert_eq!((f.topic, f.queue_id, f.sys_flag), ("T", 1, 0));
        // a field twice, a string that is not UTF-8, lengths past the end: not read
        assert!(header(&encode(310, 1, 0, "", &[("b", "T"), ("b", "U")])).is_none());
        let mut bad = encode(310, 1, 0, "", &[("b", "T\u{e9}")]);
        let n = bad.len();
        bad[n - 1] = 0xff;
        assert!(header(&bad).is_none());
        let whole = encode(310, 1, 0, "", &[("b", "T"), ("e", "0")]);
        for cut in 0..whole.len() {
            assert!(header(&whole[..cut]).is_none(), "cut at {cut}");
        }
        let mut negative = encode(310, 1, 0, "", &[]);
        negative[13..17].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(header(&negative).is_none());
    }
}
