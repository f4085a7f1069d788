//! A Remoting connection to a broker for the gRPC port's own sends: requests with JSON headers
//! written as they come (several in flight, gathered into one write), answers matched by opaque.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use crate::frame::{self, SERIALIZE_JSON};

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
                            if parts.serialize_type != SERIALIZE_JSON {
                                break 'read;
                            }
                            let Ok(mut reply) = serde_json::from_slice::<Reply>(parts.header)
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
        let mut ext = serde_json::Map::with_capacity(fields.len());
        for (k, v) in fields {
            ext.insert((*k).to_string(), serde_json::Value::from(*v));
        }
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
