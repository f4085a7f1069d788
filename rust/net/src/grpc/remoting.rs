//! A Remoting connection to a broker for the gRPC port's own calls: requests written as they come
//! (several in flight, gathered into one write), answers matched by opaque.
//!
//! Requests carry ROCKETMQ binary headers (REMOTING.md §1.3, as the Java client 5.x writes them:
//! no JSON to build or parse on either side); one with an empty field value, or a code the form's
//! int16 cannot carry (POP_MESSAGE 200050, BATCH_ACK_MESSAGE 200151, ...), goes with a JSON header
//! instead, as the binary form reads an empty value back as absent. Answers are read in
//! either form (a broker answers in the request's).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use crate::frame::{self, SERIALIZE_JSON, SERIALIZE_ROCKETMQ};

/// Largest answer frame accepted (answers to sends are small).
const MAX_ANSWER: usize = 16 << 20;
/// `version` of the requests (RocketMQ 4.9.7's, as the Python client sends).
const VERSION: i32 = 475;

/// A broker's answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Reply {
    pub code: i32,
    #[serde(default)]
    pub opaque: i32,
    #[serde(default)]
    pub remark: Option<String>,
    #[serde(default, rename = "extFields")]
    pub ext: Option<HashMap<String, String>>,
    /// The answer's body (POP_MESSAGE's messages).
    #[serde(skip)]
    pub body: Vec<u8>,
}

impl Reply {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.ext.as_ref()?.get(name).map(String::as_str)
    }
}

type Pending = Arc<Mutex<HashMap<i32, oneshot::Sender<Reply>>>>;

/// One TCP connection to a broker.
pub struct Broker {
    next: AtomicI32,
    pending: Pending,
    frames: mpsc::UnboundedSender<Vec<u8>>,
    dead: Arc<AtomicBool>,
}

impl Broker {
    /// Connect to `addr` (`host:port`); the connection's reader and writer run as tasks of the
    /// current tokio runtime.
    pub async fn connect(addr: &str) -> std::io::Result<Arc<Broker>> {
        let stream = TcpStream::connect(addr).await?;
        let _ = stream.set_nodelay(true);
        let (mut rd, mut wr) = stream.into_split();
        let pending: Pending = Arc::default();
        let dead = Arc::new(AtomicBool::new(false));
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let d = dead.clone();
        tokio::spawn(async move {
            let mut out = Vec::new();
            while let Some(first) = rx.recv().await {
                out.clear();
                out.extend_from_slice(&first);
                while let Ok(more) = rx.try_recv() {
                    out.extend_from_slice(&more);
                }
                if wr.write_all(&out).await.is_err() {
                    break;
                }
            }
            d.store(true, Ordering::Release);
        });
        let (p, d) = (pending.clone(), dead.clone());
        tokio::spawn(async move {
            let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
            let mut chunk = vec![0u8; 64 * 1024];
            'read: loop {
                let n = match rd.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                let mut used = 0;
                loop {
                    match frame::next_frame_len(&buf[used..], MAX_ANSWER) {
                        Ok(Some(len)) => {
                            let f = &buf[used..used + len];
                            used += len;
                            let Some(parts) = frame::parts(f) else {
                                break 'read;
                            };
                            let Some(mut reply) = read_reply(parts.serialize_type, parts.header)
                            else {
                                break 'read;
                            };
                            reply.body = parts.body.to_vec();
                            if let Some(waiter) = p.lock().remove(&reply.opaque) {
                                let _ = waiter.send(reply);
                            }
                        }
                        Ok(None) => break,
                        Err(_) => break 'read,
                    }
                }
                buf.drain(..used);
            }
            d.store(true, Ordering::Release);
            p.lock().clear(); // every waiter sees the connection gone
        });
        Ok(Arc::new(Broker {
            next: AtomicI32::new(1),
            pending,
            frames: tx,
            dead,
        }))
    }

    /// Whether the connection is gone (a new one is needed).
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    /// Send request `code` with `fields` and `body`, and wait up to `timeout` for the answer.
    pub async fn call(
        &self,
        code: i32,
        fields: &[(&str, &str)],
        body: &[u8],
        timeout: Duration,
    ) -> Result<Reply, String> {
        let opaque = self.next.fetch_add(1, Ordering::Relaxed) & 0x7FFF_FFFF;
        let f = request_frame(code, opaque, fields, body)?;
        let (tx, rx) = oneshot::channel();
        self.pending.lock().insert(opaque, tx);
        if self.is_dead() || self.frames.send(f).is_err() {
            self.pending.lock().remove(&opaque);
            return Err("connection closed".into());
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err("connection closed".into()),
            Err(_) => {
                self.pending.lock().remove(&opaque);
                Err(format!("no answer in {} ms", timeout.as_millis()))
            }
        }
    }
}

/// LanguageCode.PYTHON, the language the requests name (as rmq's Python client's do).
const LANGUAGE_PYTHON: u8 = 3;

/// A whole request frame: a binary header, or a JSON one when a field is empty or the code is
/// beyond an int16 (see the module documentation), then `body`.
fn request_frame(
    code: i32,
    opaque: i32,
    fields: &[(&str, &str)],
    body: &[u8],
) -> Result<Vec<u8>, String> {
    let Ok(code16) = i16::try_from(code) else {
        return json_request_frame(code, opaque, fields, body);
    };
    if fields.iter().any(|(k, v)| k.is_empty() || v.is_empty()) {
        return json_request_frame(code, opaque, fields, body);
    }
    let ext_len: usize = fields.iter().map(|(k, v)| 6 + k.len() + v.len()).sum();
    let header_len = 2 + 1 + 2 + 4 + 4 + 4 + 4 + ext_len;
    let mut f = Vec::with_capacity(8 + header_len + body.len());
    f.extend_from_slice(&((4 + header_len + body.len()) as i32).to_be_bytes());
    let word = (u32::from(SERIALIZE_ROCKETMQ) << 24) | header_len as u32;
    f.extend_from_slice(&word.to_be_bytes());
    f.extend_from_slice(&code16.to_be_bytes());
    f.push(LANGUAGE_PYTHON);
    f.extend_from_slice(&(VERSION as i16).to_be_bytes());
    f.extend_from_slice(&opaque.to_be_bytes());
    f.extend_from_slice(&0i32.to_be_bytes()); // flag: a request, not oneway
    f.extend_from_slice(&0i32.to_be_bytes()); // no remark
    f.extend_from_slice(&(ext_len as i32).to_be_bytes());
    for (k, v) in fields {
        frame::push_binary_entry(&mut f, k, v);
    }
    f.extend_from_slice(body);
    Ok(f)
}

/// A whole request frame with a JSON header.
fn json_request_frame(
    code: i32,
    opaque: i32,
    fields: &[(&str, &str)],
    body: &[u8],
) -> Result<Vec<u8>, String> {
    let ext: serde_json::Map<String, serde_json::Value> = fields
        .iter()
        .map(|(k, v)| ((*k).to_string(), serde_json::Value::from(*v)))
        .collect();
    let header = serde_json::json!({
        "code": code,
        "language": "PYTHON",
        "version": VERSION,
        "opaque": opaque,
        "flag": 0,
        "serializeTypeCurrentRPC": "JSON",
        "extFields": ext,
    });
    let header = serde_json::to_vec(&header).map_err(|e| e.to_string())?;
    let mut f = Vec::with_capacity(8 + header.len() + body.len());
    f.extend_from_slice(&((4 + header.len() + body.len()) as i32).to_be_bytes());
    f.extend_from_slice(&(header.len() as i32).to_be_bytes()); // serialize type 0: JSON
    f.extend_from_slice(&header);
    f.extend_from_slice(body);
    Ok(f)
}

/// An answer's header in either form; `None` when it does not read (the connection is dropped).
fn read_reply(serialize_type: u8, header: &[u8]) -> Option<Reply> {
    match serialize_type {
        SERIALIZE_JSON => serde_json::from_slice::<Reply>(header).ok(),
        SERIALIZE_ROCKETMQ => read_binary_reply(header),
        _ => None,
    }
}

/// A ROCKETMQ binary answer header: int16 code, int8 language, int16 version, int32 opaque, int32
/// flag, int32 n + remark, int32 m + entries (int16 k + key, int32 v + value). An empty remark is
/// none, as in the Python client's reader.
fn read_binary_reply(h: &[u8]) -> Option<Reply> {
    fn take<'a>(h: &'a [u8], at: &mut usize, n: usize) -> Option<&'a [u8]> {
        let s = h.get(*at..at.checked_add(n)?)?;
        *at += n;
        Some(s)
    }
    fn len32(h: &[u8], at: &mut usize) -> Option<usize> {
        let n = i32::from_be_bytes(take(h, at, 4)?.try_into().ok()?);
        usize::try_from(n).ok()
    }
    let mut at = 0;
    let code = i16::from_be_bytes(take(h, &mut at, 2)?.try_into().ok()?);
    take(h, &mut at, 3)?; // language, version
    let opaque = i32::from_be_bytes(take(h, &mut at, 4)?.try_into().ok()?);
    take(h, &mut at, 4)?; // flag
    let n = len32(h, &mut at)?;
    let remark = std::str::from_utf8(take(h, &mut at, n)?).ok()?;
    let m = len32(h, &mut at)?;
    let entries = take(h, &mut at, m)?;
    let mut ext = HashMap::new();
    let mut e = 0;
    while e < entries.len() {
        let k = u16::from_be_bytes(take(entries, &mut e, 2)?.try_into().ok()?) as usize;
        let key = std::str::from_utf8(take(entries, &mut e, k)?).ok()?;
        let v = len32(entries, &mut e)?;
        let value = std::str::from_utf8(take(entries, &mut e, v)?).ok()?;
        if !value.is_empty() {
            ext.insert(key.to_string(), value.to_string());
        }
    }
    Some(Reply {
        code: i32::from(code),
        opaque,
        remark: (!remark.is_empty()).then(|| remark.to_string()),
        ext: Some(ext),
        body: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Vec<(&'static str, &'static str)> {
        vec![
            ("topic", "T"),
            ("queueId", "3"),
            ("properties", "KEYS\u{1}k"),
        ]
    }

    #[test]
    fn requests_go_with_binary_headers_the_network_thread_reads() {
        let f = request_frame(310, 7, &fields(), b"body").unwrap();
        let p = frame::parts(&f).unwrap();
        assert_eq!(p.serialize_type, SERIALIZE_ROCKETMQ);
        assert_eq!(p.body, b"body");
        assert_eq!(frame::binary_code_flag(p.header), Some((310, 0)));
        let h = crate::header::Header::parse_binary(p.header).expect("the fast path reads it");
        assert_eq!(h.opaque, 7);
        let len = u32::from_be_bytes(f[..4].try_into().unwrap()) as usize;
        assert_eq!(len + 4, f.len());
    }

    #[test]
    fn codes_beyond_an_int16_go_with_json_headers() {
        for code in [200050, 200151, 200051, 32768] {
            let f = request_frame(code, 1, &fields(), b"").unwrap();
            let p = frame::parts(&f).unwrap();
            assert_eq!(p.serialize_type, SERIALIZE_JSON, "{code}");
            let v: serde_json::Value = serde_json::from_slice(p.header).unwrap();
            assert_eq!(v["code"], code);
        }
    }

    #[test]
    fn an_empty_value_sends_the_request_with_a_json_header() {
        let f = request_frame(200050, 9, &[("topic", "T"), ("exp", "")], b"").unwrap();
        let p = frame::parts(&f).unwrap();
        assert_eq!(p.serialize_type, SERIALIZE_JSON);
        let v: serde_json::Value = serde_json::from_slice(p.header).unwrap();
        assert_eq!(v["code"], 200050);
        assert_eq!(v["opaque"], 9);
        assert_eq!(v["extFields"]["exp"], "");
        assert_eq!(v["extFields"]["topic"], "T");
    }

    #[test]
    fn binary_and_json_answers_read_the_same() {
        let mut entries = Vec::new();
        frame::push_binary_entry(&mut entries, "msgId", "AB");
        frame::push_binary_entry(&mut entries, "queueOffset", "12");
        let mut out = Vec::new();
        frame::push_binary_response(&mut out, 0, 41, 475, "", &entries);
        let p = frame::parts(&out).unwrap();
        let b = read_reply(p.serialize_type, p.header).unwrap();
        let mut out = Vec::new();
        frame::push_response(
            &mut out,
            0,
            41,
            475,
            "",
            r#"{"msgId":"AB","queueOffset":"12"}"#,
        );
        let p = frame::parts(&out).unwrap();
        let j = read_reply(p.serialize_type, p.header).unwrap();
        for r in [&b, &j] {
            assert_eq!((r.code, r.opaque, r.remark.as_deref()), (0, 41, None));
            assert_eq!(r.field("msgId"), Some("AB"));
            assert_eq!(r.field("queueOffset"), Some("12"));
        }
        let mut out = Vec::new();
        frame::push_binary_response(&mut out, 17, 5, 475, "topic not exist", &[]);
        let p = frame::parts(&out).unwrap();
        let r = read_reply(p.serialize_type, p.header).unwrap();
        assert_eq!((r.code, r.remark.as_deref()), (17, Some("topic not exist")));
        assert!(read_binary_reply(&p.header[..p.header.len() - 2]).is_none());
        assert!(read_reply(7, p.header).is_none());
    }
}
