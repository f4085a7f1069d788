//! RocketMQ remoting frames (REMOTING.md §1.1): splitting a byte stream into frames and the
//! few JSON headers the network thread writes itself. Sans-I/O.
//!
//! ```text
//! int32 length = 4 + H + B      (does not count itself)
//! int32 header word = serialize type << 24 | H
//! H bytes header, B bytes body
//! ```

/// Serialize type of a JSON header (what every official client sends by default).
pub const SERIALIZE_JSON: u8 = 0;
/// Serialize type of a ROCKETMQ binary header (REMOTING.md §1.3; the Java client's
/// `rocketmq.serialize.type=ROCKETMQ`).
pub const SERIALIZE_ROCKETMQ: u8 = 1;
/// Response flag bit.
pub const FLAG_RESPONSE: i32 = 1;
/// Oneway flag bit (no response is wanted).
pub const FLAG_ONEWAY: i32 = 2;

/// A stream that cannot be framed: the connection must be closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError(pub String);

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FrameError {}

/// The length (prefix included) of the whole frame at the start of `buf`, `Ok(None)` when
/// more bytes are needed. `max_frame` counts the prefix too.
pub fn next_frame_len(buf: &[u8], max_frame: usize) -> Result<Option<usize>, FrameError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let length = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if length < 4 {
        return Err(FrameError(format!("frame length {length} < 4")));
    }
    let total = length as usize + 4;
    if total > max_frame {
        return Err(FrameError(format!(
            "frame of {total} bytes exceeds the limit of {max_frame}"
        )));
    }
    Ok(if buf.len() >= total {
        Some(total)
    } else {
        None
    })
}

/// A frame split into its parts (`frame` includes the length prefix).
pub struct Parts<'a> {
    pub serialize_type: u8,
    pub header: &'a [u8],
    pub body: &'a [u8],
}

/// Split a whole frame; `None` when the header length overruns the frame.
pub fn parts(frame: &[u8]) -> Option<Parts<'_>> {
    let word = u32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let hlen = (word & 0x00FF_FFFF) as usize;
    let hend = 8usize.checked_add(hlen)?;
    if hend > frame.len() {
        return None;
    }
    Some(Parts {
        serialize_type: (word >> 24) as u8,
        header: &frame[8..hend],
        body: &frame[hend..],
    })
}

/// `(code, flag)` of a ROCKETMQ binary header: int16 code, int8 language, int16 version,
/// int32 opaque, int32 flag, ...; `None` when it is too short.
pub fn binary_code_flag(header: &[u8]) -> Option<(i32, i32)> {
    let code = i16::from_be_bytes(header.get(0..2)?.try_into().ok()?);
    let flag = i32::from_be_bytes(header.get(9..13)?.try_into().ok()?);
    Some((code as i32, flag))
}

/// A JSON string literal (quotes included) for `s`.
pub fn json_string(s: &str) -> String {
    serde_json::to_string(s).expect("a str always serializes")
}

/// A whole response frame (length, header length, JSON header; no body) appended to `out`:
/// `ext_json` is the complete `extFields` object (or empty for none), `remark_json` an already
/// escaped JSON string literal (or empty for none).
pub fn push_response(
    out: &mut Vec<u8>,
    code: i32,
    opaque: i32,
    version: i32,
    remark_json: &str,
    ext_json: &str,
) {
    let ext = (!ext_json.is_empty())
        .then_some(|o: &mut Vec<u8>| o.extend_from_slice(ext_json.as_bytes()));
    push_response_with(out, code, opaque, version, remark_json, ext);
}

/// [`push_response`] with the `extFields` object written by `ext` straight into `out` (`None`:
/// no `extFields`): an answer built in place, not first as a string of its own.
pub fn push_response_with(
    out: &mut Vec<u8>,
    code: i32,
    opaque: i32,
    version: i32,
    remark_json: &str,
    ext: Option<impl FnOnce(&mut Vec<u8>)>,
) {
    let start = out.len();
    // The two lengths are patched in once the header is written.
    out.extend_from_slice(&[0; 8]);
    // Pieces appended as they are (no formatting machinery: this runs once per answer), each
    // `"name":value,` in the header's key order; a remark that is empty is left out.
    let mut num = itoa::Buffer::new();
    out.extend_from_slice(b"{\"code\":");
    out.extend_from_slice(num.format(code).as_bytes());
    out.push(b',');
    if let Some(ext) = ext {
        out.extend_from_slice(b"\"extFields\":");
        ext(out);
        out.push(b',');
    }
    out.extend_from_slice(b"\"flag\":");
    out.extend_from_slice(num.format(FLAG_RESPONSE).as_bytes());
    out.extend_from_slice(b",\"language\":\"JAVA\",\"opaque\":");
    out.extend_from_slice(num.format(opaque).as_bytes());
    out.push(b',');
    if !remark_json.is_empty() {
        out.extend_from_slice(b"\"remark\":");
        out.extend_from_slice(remark_json.as_bytes());
        out.push(b',');
    }
    out.extend_from_slice(b"\"serializeTypeCurrentRPC\":\"JSON\",\"version\":");
    out.extend_from_slice(num.format(version).as_bytes());
    out.push(b'}');
    let header_len = out.len() - start - 8;
    out[start..start + 4].copy_from_slice(&(4 + header_len as i32).to_be_bytes());
    out[start + 4..start + 8].copy_from_slice(&(header_len as u32).to_be_bytes());
}

/// A whole response frame with a ROCKETMQ binary header (REMOTING.md §1.3: the answer to a
/// request that came so) appended to `out`: language JAVA, `remark` as is (empty: none), then
/// `ext_entries`, the extFields entries already encoded ([`push_binary_entry`]).
pub fn push_binary_response(
    out: &mut Vec<u8>,
    code: i32,
    opaque: i32,
    version: i32,
    remark: &str,
    ext_entries: &[u8],
) {
    let start = out.len();
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&(code as i16).to_be_bytes());
    out.push(0); // LanguageCode.JAVA
    out.extend_from_slice(&(version as i16).to_be_bytes());
    out.extend_from_slice(&opaque.to_be_bytes());
    out.extend_from_slice(&FLAG_RESPONSE.to_be_bytes());
    out.extend_from_slice(&(remark.len() as i32).to_be_bytes());
    out.extend_from_slice(remark.as_bytes());
    out.extend_from_slice(&(ext_entries.len() as i32).to_be_bytes());
    out.extend_from_slice(ext_entries);
    let header_len = out.len() - start - 8;
    out[start..start + 4].copy_from_slice(&(4 + header_len as i32).to_be_bytes());
    let word = (u32::from(SERIALIZE_ROCKETMQ) << 24) | header_len as u32;
    out[start + 4..start + 8].copy_from_slice(&word.to_be_bytes());
}

/// One extFields entry of a binary header appended to `out`; an empty key or value is left out
/// (the format cannot carry one: it reads back as absent).
pub fn push_binary_entry(out: &mut Vec<u8>, key: &str, value: &str) {
    if key.is_empty() || value.is_empty() {
        return;
    }
    out.extend_from_slice(&(key.len() as i16).to_be_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&(value.len() as i32).to_be_bytes());
    out.extend_from_slice(value.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_the_length_prefix() {
        let f = [0, 0, 0, 6, 0, 0, 0, 2, b'{', b'}'];
        assert_eq!(next_frame_len(&f[..3], 100), Ok(None));
        assert_eq!(next_frame_len(&f[..9], 100), Ok(None));
        assert_eq!(next_frame_len(&f, 100), Ok(Some(10)));
        let p = parts(&f).unwrap();
        assert_eq!(p.serialize_type, SERIALIZE_JSON);
        assert_eq!(p.header, b"{}");
        assert!(p.body.is_empty());
    }

    #[test]
    fn reads_code_and_flag_of_a_binary_header() {
        // code 310, language 0, version 409, opaque 7, flag 2, then remark and ext lengths
        let mut h = vec![0x01, 0x36, 0, 0x01, 0x99, 0, 0, 0, 7, 0, 0, 0, 2];
        assert_eq!(binary_code_flag(&h), Some((310, 2)));
        h.extend_from_slice(&[0; 8]);
        assert_eq!(binary_code_flag(&h), Some((310, 2)));
        assert_eq!(binary_code_flag(&h[..12]), None);
    }

    #[test]
    fn binary_responses_read_back_as_written() {
        let mut ext = Vec::new();
        push_binary_entry(&mut ext, "msgId", "AB");
        push_binary_entry(&mut ext, "MSG_REGION", "");
        push_binary_entry(&mut ext, "queueId", "3");
        let mut f = b"x".to_vec();
        push_binary_response(&mut f, 12, -7, 409, "flush timed out", &ext);
        let f = &f[1..];
        assert_eq!(next_frame_len(f, 1 << 20), Ok(Some(f.len())));
        let p = parts(f).unwrap();
        assert_eq!(p.serialize_type, SERIALIZE_ROCKETMQ);
        assert!(p.body.is_empty());
        let h = p.header;
        assert_eq!(binary_code_flag(h), Some((12, FLAG_RESPONSE)));
        assert_eq!(h[2], 0, "language JAVA");
        assert_eq!(i16::from_be_bytes([h[3], h[4]]), 409);
        assert_eq!(i32::from_be_bytes([h[5], h[6], h[7], h[8]]), -7);
        let remark_len = i32::from_be_bytes(h[13..17].try_into().unwrap()) as usize;
        assert_eq!(&h[17..17 + remark_len], b"flush timed out");
        let rest = &h[17 + remark_len..];
        assert_eq!(
            i32::from_be_bytes(rest[..4].try_into().unwrap()) as usize,
            ext.len()
        );
        assert_eq!(&rest[4..], &ext[..]);
        // the empty MSG_REGION is left out: two entries
        assert_eq!(ext.len(), (2 + 5 + 4 + 2) + (2 + 7 + 4 + 1));
    }

    #[test]
    fn rejects_bad_lengths() {
        assert!(next_frame_len(&[0, 0, 0, 3, 0, 0, 0, 0], 100).is_err());
        assert!(next_frame_len(&[0xFF, 0, 0, 0], 100).is_err());
        assert!(next_frame_len(&[0, 0, 0, 100], 100).is_err());
        // header length beyond the frame
        let f = [0, 0, 0, 4, 0, 0, 0, 9];
        assert!(parts(&f).is_none());
    }

    #[test]
    fn responses_are_frames_with_a_json_header() {
        let mut f = b"before".to_vec();
        push_response(
            &mut f,
            10,
            7,
            409,
            &json_string("flush \"x\""),
            r#"{"a":"1"}"#,
        );
        let f = &f[6..];
        assert_eq!(next_frame_len(f, 1 << 20), Ok(Some(f.len())));
        let p = parts(f).unwrap();
        assert!(p.body.is_empty());
        let v: serde_json::Value = serde_json::from_slice(p.header).unwrap();
        assert_eq!(v["code"], 10);
        assert_eq!(v["opaque"], 7);
        assert_eq!(v["flag"], 1);
        assert_eq!(v["remark"], "flush \"x\"");
        assert_eq!(v["extFields"]["a"], "1");
        // The header's exact text, keys in order, the empty remark left out.
        let mut f = Vec::new();
        push_response(&mut f, 0, 5, 409, "", r#"{"a":"1"}"#);
        assert_eq!(
            parts(&f).unwrap().header,
            br#"{"code":0,"extFields":{"a":"1"},"flag":1,"language":"JAVA","opaque":5,"serializeTypeCurrentRPC":"JSON","version":409}"#
        );
        let mut g = Vec::new();
        push_response_with(
            &mut g,
            0,
            5,
            409,
            "",
            Some(|o: &mut Vec<u8>| o.extend_from_slice(br#"{"a":"1"}"#)),
        );
        assert_eq!(f, g);
        let mut f = Vec::new();
        push_response(&mut f, 0, 1, 409, "", "");
        let text = std::str::from_utf8(&f[8..]).unwrap();
        assert_eq!(
            text,
            r#"{"code":0,"flag":1,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":409}"#
        );
    }
}
