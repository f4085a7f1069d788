//! The SEND fast path: SEND_MESSAGE (10) and SEND_MESSAGE_V2 (310) requests for topics the
//! broker already vetted, stored and answered without Python.
//!
//! The fast path only takes the common case and declines everything else (returns `None`), so
//! the Python processor keeps every rule and every error answer: batches, unknown or
//! not-yet-vetted topics, retry topics, delay levels, timer and transactional messages,
//! empty or oversized bodies, unusual header encodings, store errors. A topic becomes eligible
//! when the Python side calls [`FastSend::allow_topic`] after it accepted a send to it. Every
//! change to what vetted it (the topic's config, the broker's permission) reaches the fast path
//! through one hook on the Python side, which calls [`FastSend::forget_topic`] for a change to
//! one topic and [`FastSend::forget_topics`] for a change to all; the next send goes through
//! Python again, which answers it by the new rules and vets the topic again if it may.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use rmq_store::message::{push_offset_msg_id_hex, MessageRef};
use rmq_store::{FlushDiskType, MessageStore};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::frame::{self, FLAG_ONEWAY, FLAG_RESPONSE, SERIALIZE_JSON};

pub const SEND_MESSAGE: i32 = 10;
pub const SEND_MESSAGE_V2: i32 = 310;
pub const FLUSH_DISK_TIMEOUT: i32 = 10;
const MULTI_TAGS_FLAG: i32 = 0x2;
const MAX_PROPERTIES: usize = 32767;
const SEP: char = '\u{2}';

/// Broker settings the fast path answers with.
#[derive(Debug, Clone)]
pub struct FastSendConfig {
    /// `brokerClusterName`, stored as the CLUSTER property of every message.
    pub cluster_name: String,
    /// `regionId`, answered as MSG_REGION.
    pub region_id: String,
    /// `traceOn`, answered as TRACE_ON.
    pub trace_on: bool,
    /// `maxMessageSize`.
    pub max_body: usize,
    /// The version number written in response headers.
    pub version: i32,
}

#[derive(Debug, Clone, Copy)]
struct Route {
    queues: i32,
    write_queues: i32,
    multi_tag: bool,
}

#[derive(Deserialize)]
struct Header<'a> {
    code: i32,
    #[serde(default)]
    flag: i32,
    #[serde(default)]
    opaque: i32,
    #[serde(borrow, rename = "extFields")]
    ext: Option<&'a RawValue>,
}

type Field<'a> = Option<Cow<'a, str>>;

/// SEND_MESSAGE_V2's one-letter header fields.
#[derive(Deserialize)]
struct ExtV2<'a> {
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
}

/// SEND_MESSAGE's named header fields.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExtV1<'a> {
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
}

struct SendHeader<'a> {
    topic: Field<'a>,
    queue_id: Field<'a>,
    sys_flag: Field<'a>,
    born_timestamp: Field<'a>,
    flag: Field<'a>,
    properties: Field<'a>,
    reconsume_times: Field<'a>,
    batch: Field<'a>,
}

/// What [`FastSend::handle`] did with a request it took.
#[derive(Debug, PartialEq, Eq)]
pub enum Sent {
    /// A oneway send: stored, nothing to answer.
    NoReply,
    /// The answer frame was appended to the output.
    Replied,
    /// SYNC_FLUSH: answer once the CommitLog is durable up to `end`.
    Hold(Held),
}

/// A SYNC_FLUSH answer waiting for its group commit.
#[derive(Debug, PartialEq, Eq)]
pub struct Held {
    pub end: i64,
    opaque: i32,
    ext_json: String,
}

/// The fast path's state: the store, the vetted topics and the answer template.
pub struct FastSend {
    store: Arc<MessageStore>,
    cfg: FastSendConfig,
    cluster_prop: String,
    ext_tail: String,
    sync_flush: bool,
    routes: RwLock<HashMap<String, Route>>,
    puts: AtomicU64,
}

fn int<T: std::str::FromStr>(v: &Field<'_>, default: Option<T>) -> Option<T> {
    match v.as_deref() {
        None | Some("") => default,
        Some(s) => s.parse().ok(),
    }
}

impl FastSend {
    pub fn new(store: Arc<MessageStore>, cfg: FastSendConfig) -> FastSend {
        let sync_flush = store.config().flush_disk_type == FlushDiskType::SyncFlush;
        let cluster_prop = format!("CLUSTER\u{1}{}", cfg.cluster_name);
        let ext_tail = format!(
            ",\"MSG_REGION\":{},\"TRACE_ON\":\"{}\"}}",
            frame::json_string(&cfg.region_id),
            if cfg.trace_on { "true" } else { "false" }
        );
        FastSend {
            store,
            cfg,
            cluster_prop,
            ext_tail,
            sync_flush,
            routes: RwLock::new(HashMap::new()),
            puts: AtomicU64::new(0),
        }
    }

    pub fn store(&self) -> &MessageStore {
        &self.store
    }

    /// Let sends to `topic` take the fast path (the caller checked the topic is writable on a
    /// writable broker and is not a system topic that refuses sends).
    pub fn allow_topic(&self, topic: &str, read_queues: i32, write_queues: i32, multi_tag: bool) {
        let route = Route {
            queues: read_queues.min(write_queues),
            write_queues,
            multi_tag,
        };
        self.routes.write().insert(topic.to_string(), route);
    }

    /// Forget one vetted topic (its config changed or it was deleted).
    pub fn forget_topic(&self, topic: &str) {
        self.routes.write().remove(topic);
    }

    /// Forget every vetted topic (a broker-wide rule changed).
    pub fn forget_topics(&self) {
        self.routes.write().clear();
    }

    /// Messages stored by the fast path so far.
    pub fn puts(&self) -> u64 {
        self.puts.load(Ordering::Relaxed)
    }

    /// Handle `frame` (length prefix included) if it is a send the fast path takes; an
    /// immediate answer is appended to `out`. `random` picks a queue when the request asks
    /// for any (queueId < 0).
    pub fn handle(
        &self,
        frame_bytes: &[u8],
        born_host: SocketAddr,
        random: &mut dyn FnMut() -> u32,
        out: &mut Vec<u8>,
    ) -> Option<Sent> {
        let p = frame::parts(frame_bytes)?;
        if p.serialize_type != SERIALIZE_JSON {
            return None;
        }
        let h: Header<'_> = serde_json::from_slice(p.header).ok()?;
        if h.flag & FLAG_RESPONSE != 0 || !(h.code == SEND_MESSAGE || h.code == SEND_MESSAGE_V2) {
            return None;
        }
        let ext = h.ext?.get();
        let f = if h.code == SEND_MESSAGE_V2 {
            let e: ExtV2<'_> = serde_json::from_str(ext).ok()?;
            SendHeader {
                topic: e.b,
                queue_id: e.e,
                sys_flag: e.f,
                born_timestamp: e.g,
                flag: e.h,
                properties: e.i,
                reconsume_times: e.j,
                batch: e.m,
            }
        } else {
            let e: ExtV1<'_> = serde_json::from_str(ext).ok()?;
            SendHeader {
                topic: e.topic,
                queue_id: e.queue_id,
                sys_flag: e.sys_flag,
                born_timestamp: e.born_timestamp,
                flag: e.flag,
                properties: e.properties,
                reconsume_times: e.reconsume_times,
                batch: e.batch,
            }
        };
        if let Some(b) = f.batch.as_deref() {
            let b = b.trim();
            if b == "1" || b.eq_ignore_ascii_case("true") {
                return None;
            }
        }
        let topic = f.topic.as_deref().filter(|t| !t.is_empty())?;
        let mut queue_id: i32 = int(&f.queue_id, None)?;
        let mut sys_flag: i32 = int(&f.sys_flag, Some(0))?;
        let born_timestamp: i64 = int(&f.born_timestamp, Some(0))?;
        let flag: i32 = int(&f.flag, Some(0))?;
        let reconsume_times: i32 = int(&f.reconsume_times, Some(0))?;
        let body = p.body;
        if body.is_empty() || body.len() > self.cfg.max_body {
            return None;
        }
        let route = *self.routes.read().get(topic)?;
        if queue_id >= route.queues {
            return None;
        }
        if queue_id < 0 {
            queue_id = (random() % route.write_queues.max(1) as u32) as i32;
        }
        let (stored, wait) = self.properties(f.properties.as_deref().unwrap_or(""))?;
        if route.multi_tag {
            sys_flag |= MULTI_TAGS_FLAG;
        }
        let msg = MessageRef {
            topic,
            queue_id,
            flag,
            sys_flag,
            born_timestamp,
            born_host,
            reconsume_times,
            prepared_transaction_offset: 0,
            body,
            properties: stored.as_bytes(),
        };
        // Store errors (disk full, shut down, ...) are answered by the Python path.
        let r = self.store.put(&msg).ok()?;
        self.puts.fetch_add(1, Ordering::Relaxed);
        if h.flag & FLAG_ONEWAY != 0 {
            return Some(Sent::NoReply);
        }
        let mut ext_json = String::with_capacity(128 + self.ext_tail.len());
        ext_json.push_str("{\"msgId\":\"");
        push_offset_msg_id_hex(
            &mut ext_json,
            &self.store.config().store_host,
            r.physical_offset,
        );
        let _ = write!(
            ext_json,
            "\",\"queueId\":\"{}\",\"queueOffset\":\"{}\"{}",
            queue_id, r.queue_offset, self.ext_tail
        );
        let end = r.end_offset();
        if self.sync_flush && wait && self.store.flushed_offset() < end {
            return Some(Sent::Hold(Held {
                end,
                opaque: h.opaque,
                ext_json,
            }));
        }
        frame::push_response(out, 0, h.opaque, self.cfg.version, "", &ext_json);
        Some(Sent::Replied)
    }

    /// The answer to a held send, appended to `out`: SUCCESS, or FLUSH_DISK_TIMEOUT when its
    /// flush timed out.
    pub fn held_reply(&self, held: &Held, timed_out: bool, out: &mut Vec<u8>) {
        let v = self.cfg.version;
        if timed_out {
            let remark = frame::json_string("flush to disk timed out");
            frame::push_response(
                out,
                FLUSH_DISK_TIMEOUT,
                held.opaque,
                v,
                &remark,
                &held.ext_json,
            );
        } else {
            frame::push_response(out, 0, held.opaque, v, "", &held.ext_json);
        }
    }

    /// The properties to store and whether the producer waits for the store (WAIT), or `None`
    /// for messages the Python path must see (delay, timer, transaction, too long).
    fn properties(&self, props: &str) -> Option<(String, bool)> {
        if props.contains("DELAY\u{1}")
            || props.contains("TRAN_MSG\u{1}")
            || props.contains("TIMER_")
        {
            return None;
        }
        let mut props: Cow<'_, str> = Cow::Borrowed(props.trim_end_matches(SEP));
        let mut wait = true;
        if let Some(i) = props.find("WAIT\u{1}") {
            if i == 0 || props.as_bytes()[i - 1] == SEP as u8 {
                let start = i + "WAIT\u{1}".len();
                let j = props[start..].find(SEP).map(|k| start + k);
                wait = &props[start..j.unwrap_or(props.len())] != "false";
                // RocketMQ does not store WAIT with single messages.
                props = Cow::Owned(match j {
                    Some(j) => format!("{}{}", &props[..i], &props[j + 1..]),
                    None => props[..i.saturating_sub(1)].to_string(),
                });
            }
        }
        let stored = if props.is_empty() {
            self.cluster_prop.clone()
        } else {
            format!("{props}{SEP}{}", self.cluster_prop)
        };
        if stored.len() > MAX_PROPERTIES {
            return None;
        }
        Some((stored, wait))
    }
}
