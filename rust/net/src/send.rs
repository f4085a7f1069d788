//! The SEND fast path: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320)
//! requests for topics the broker already vetted, stored and answered without Python, as the
//! Java client 4.9.8 and 5.x (its ROCKETMQ binary headers answered in kind) and the C++ client
//! 0.4.4 send them ([`crate::header`]), batches included (the C++ client's compressed ones are
//! inflated first, as the Python path does; a UNIQ_KEY of the batch's own is dropped, as the
//! Python path does, so each message keeps its own).
//!
//! The fast path only takes the common case and declines everything else (returns `None`,
//! counted per [`Decline`] reason), so the Python processor keeps every rule and every error
//! answer: unknown or not-yet-vetted topics, retry topics, delay levels, timer messages,
//! empty or oversized bodies, malformed batches, header values it does not read as the Python
//! path would, store errors. A transactional half message (TRAN_MSG=true) is parked in
//! RMQ_SYS_TRANS_HALF_TOPIC queue 0 as the Python path parks it, once the Python path allowed
//! it ([`FastSend::allow_half`]: it created that topic and the broker takes transactional
//! messages); one whose properties it does not read as the Python path would is declined.
//! A topic becomes eligible when the Python
//! side calls [`FastSend::allow_topic`] after it accepted a send to it. Every change to what
//! vetted it (the topic's config, the broker's permission) reaches the fast path through one
//! hook on the Python side, which calls [`FastSend::forget_topic`] for a change to one topic
//! and [`FastSend::forget_topics`] for a change to all; the next send goes through Python
//! again, which answers it by the new rules and vets the topic again if it may.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use flate2::{Decompress, FlushDecompress, Status};
use parking_lot::{Mutex, RwLock};
use rmq_store::commitlog::AppendResult;
use rmq_store::message::{
    decode_batch_body, push_offset_msg_id_hex, push_offset_msg_id_hex_bytes, sysflag, MessageRef,
};
use rmq_store::{FlushDiskType, MessageStore};
use std::collections::HashMap;

use crate::acl::{AclGate, AclStats};
use crate::frame::{self, FLAG_ONEWAY, FLAG_RESPONSE, SERIALIZE_JSON, SERIALIZE_ROCKETMQ};
use crate::header::{self, Code, Header, SendHeader};
use crate::metrics::{self, Latency, MetricsSnapshot, TopicIn};
use crate::pull::{FastPull, HeldPull, Holding, Pulled, LITE_PULL_MESSAGE, PULL_MESSAGE};
use crate::replica::{Release, Replication};
use crate::stats::{Counters, Decline, Stats};
use crate::transaction::{Decided, FastEnd, END_TRANSACTION, TRANS_OP_HALF_TOPIC};

pub use crate::codes::{FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE};
pub use crate::header::{SEND_BATCH_MESSAGE, SEND_MESSAGE, SEND_MESSAGE_V2};
/// The compression type bits of a sysflag (`MessageSysFlag.COMPRESSION_TYPE_MASK`).
const COMPRESSION_TYPE_MASK: i32 = 0x700;
const MAX_PROPERTIES: usize = 32767;
const SEP: char = '\u{2}';
const KV: char = '\u{1}';
pub use crate::codes::TRANS_HALF_TOPIC;
/// The properties the Python path sets on a half message (a producer's own are left to it).
const HALF_KEYS: [&str; 3] = ["__transactionId__", "REAL_TOPIC", "REAL_QID"];

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

#[derive(Debug, Clone)]
struct Route {
    queues: i32,
    write_queues: i32,
    multi_tag: bool,
    /// The topic's counters (kept across forget / allow).
    counts: Arc<TopicIn>,
    /// Its transactional half messages' counters (message type `transaction`).
    half_counts: Arc<TopicIn>,
}

/// What [`FastSend::handle`] did with a request it took.
#[derive(Debug, PartialEq, Eq)]
pub enum Sent {
    /// A oneway send: stored, nothing to answer.
    NoReply,
    /// The answer frame was appended to the output.
    Replied,
    /// SYNC_MASTER / SYNC_FLUSH: answer once a slave acknowledged the CommitLog up to `end`
    /// and (SYNC_FLUSH) it is durable up to `end` ([`crate::held::Waiters`]). Its flush is
    /// not requested yet: the caller makes `end` durable with [`FastSend::flush_held`] (after
    /// the other requests at hand, so that one flush covers them all).
    Hold(Held),
    /// A pull that found nothing new, to be held for long polling ([`crate::long_poll`]).
    Pull(HeldPull),
}

/// An answer waiting for a slave's acknowledgement and/or the flush's group commit.
#[derive(Debug, PartialEq, Eq)]
pub struct Held {
    pub end: i64,
    /// SYNC_MASTER: it waits for a slave to acknowledge `end` (then for the flush if `flush`).
    pub replica: bool,
    /// SYNC_FLUSH: it waits for the flush to cover `end`.
    pub flush: bool,
    /// The answer once released: SUCCESS, or SLAVE_NOT_AVAILABLE waiting for the flush.
    pub(crate) response: i32,
    pub(crate) opaque: i32,
    pub(crate) ext: AnswerExt,
    pub(crate) code: i32,
    pub(crate) started: Instant,
}

/// A send answer's `extFields`, in the serialization of its request.
#[derive(Debug, PartialEq, Eq)]
pub enum AnswerExt {
    /// The JSON object (a JSON header's).
    Json(String),
    /// The encoded entries (a ROCKETMQ binary header's).
    Binary(Vec<u8>),
}

impl AnswerExt {
    /// Append the answer frame with `response` and `remark` (plain text, empty: none).
    fn push(&self, out: &mut Vec<u8>, response: i32, opaque: i32, version: i32, remark: &str) {
        match self {
            AnswerExt::Json(ext) => {
                let remark = if remark.is_empty() {
                    String::new()
                } else {
                    frame::json_string(remark)
                };
                frame::push_response(out, response, opaque, version, &remark, ext)
            }
            AnswerExt::Binary(entries) => {
                frame::push_binary_response(out, response, opaque, version, remark, entries)
            }
        }
    }
}

/// The fast path's state: the store, the vetted topics and the answer template.
pub struct FastSend {
    store: Arc<MessageStore>,
    cfg: FastSendConfig,
    cluster_prop: String,
    ext_tail: String,
    sync_flush: bool,
    /// Looked up on every send: a fast hash, not std's SipHash.
    routes: RwLock<HashMap<String, Route, foldhash::fast::RandomState>>,
    counters: Counters,
    /// Every topic the fast path was allowed to take, with what it stored for it: plain
    /// messages, transactional half messages.
    topic_in: Mutex<HashMap<String, metrics::TopicCounters>>,
    /// Half messages may be taken ([`FastSend::allow_half`]); cleared with every vetted topic.
    half_ok: AtomicBool,
    latency: Latency,
    /// SYNC_MASTER: answers wait for a slave.
    replication: Option<Replication>,
    /// SYNC_FLUSH: the end of the sends answered without waiting for their flush since the
    /// last [`FastSend::write_deferred`], whose flush it requests (0: none).
    flush_after_write: AtomicI64,
    /// ACL on: a send is taken only once [`crate::acl`] checked its signature and permission.
    acl: Option<AclGate>,
    /// RocketMQ's fast failure: `(waitTimeMillsInSendQueue in ns, osPageCacheBusyTimeOutMills)`
    /// (None: `brokerFastFailureEnable=false`).
    fast_failure: Option<(u64, i64)>,
    /// The PULL fast path ([`crate::pull`]), sharing the store and the latency histogram.
    pull: FastPull,
    /// The END_TRANSACTION fast path ([`crate::transaction`]).
    end: FastEnd,
}

/// The properties a request carries for the store, whether its producer waits for it, and
/// whether it is a transactional half message (its stored properties then name its topic and
/// queue, as REAL_TOPIC and REAL_QID).
struct Props {
    stored: String,
    wait: bool,
    half: bool,
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
            routes: RwLock::new(HashMap::default()),
            counters: Counters::default(),
            topic_in: Mutex::new(HashMap::new()),
            half_ok: AtomicBool::new(false),
            latency: Latency::default(),
            replication: None,
            flush_after_write: AtomicI64::new(0),
            acl: None,
            fast_failure: None,
            pull: FastPull::default(),
            end: FastEnd::default(),
        }
    }

    /// RocketMQ's fast failure (`brokerFastFailureEnable`): a send read more than `wait_ms`
    /// (`waitTimeMillsInSendQueue`) ago, or met while an append has held the put lock longer
    /// than `page_cache_busy_ms` (`osPageCacheBusyTimeOutMills`), is not taken ([`Decline::Busy`])
    /// but left to the Python path, which answers it SYSTEM_BUSY.
    pub fn with_fast_failure(mut self, wait_ms: u64, page_cache_busy_ms: i64) -> FastSend {
        self.fast_failure = Some((wait_ms.saturating_mul(1_000_000), page_cache_busy_ms));
        self
    }

    /// Whether a request read `waited_ns` ago must be refused as RocketMQ's fast failure refuses
    /// it (see [`FastSend::with_fast_failure`]).
    pub fn too_busy(&self, waited_ns: u64) -> bool {
        let Some((wait_ns, pc_busy_ms)) = self.fast_failure else {
            return false;
        };
        waited_ns >= wait_ns || self.store.put_lock_held_ms() > pc_busy_ms
    }

    /// Whether RocketMQ's fast failure is on ([`FastSend::with_fast_failure`]).
    pub fn fast_failure(&self) -> bool {
        self.fast_failure.is_some()
    }

    /// ACL on: every send is checked against the rules [`FastSend::acl`] is given (none
    /// until then: every send is declined), and declined unless [`crate::acl`] can vouch for it.
    pub fn with_acl(mut self) -> FastSend {
        self.acl = Some(AclGate::new());
        self
    }

    /// ACL on: the check's rules and counters; None with ACL off.
    pub fn acl(&self) -> Option<&AclGate> {
        self.acl.as_ref()
    }

    /// ACL on: the check's counters; None with ACL off.
    pub fn acl_stats(&self) -> Option<AclStats> {
        self.acl.as_ref().map(AclGate::stats)
    }

    /// Write the sends stored since the last call: their records were kept back
    /// ([`MessageStore::put_deferred`]) to be written in one `write(2)`. The caller calls
    /// this once it has handled the requests at hand, and always before it sends an answer or
    /// makes a held answer durable ([`FastSend::flush_held`]). On a write error (the disk
    /// failing: the blocks are reserved beforehand) the records stay kept back for the next
    /// call, and their held answers time out; nothing is published that was not written.
    /// Returns false then: the caller must not send the answers of the sends stored since the
    /// last call that succeeded (they would say SEND_OK of records not written).
    pub fn write_deferred(&self) -> bool {
        if self.store.write_deferred().is_err() {
            return false; // their flush is requested once they are written
        }
        let end = self.flush_after_write.swap(0, Ordering::Relaxed);
        if end > 0 {
            self.store.request_flush(end);
        }
        true
    }

    /// SYNC_MASTER: answer a send (that waits for the store) once a slave acknowledged its
    /// record, as [`crate::replica`] describes.
    pub fn sync_master(mut self, replication: Replication) -> FastSend {
        self.replication = Some(replication);
        self
    }

    /// SYNC_MASTER: the slave's state; None on other brokers.
    pub fn replication(&self) -> Option<&Replication> {
        self.replication.as_ref()
    }

    pub fn store(&self) -> &MessageStore {
        &self.store
    }

    /// The PULL fast path's vetted pairs and what it served.
    pub fn pull(&self) -> &FastPull {
        &self.pull
    }

    /// Answer a held pull (woken, or its suspend time over) into `out`: FOUND, or PULL_NOT_FOUND
    /// when still nothing is new. `None`: the Python path answers it (offsets moved, to retry,
    /// or the pair is no longer vetted).
    pub fn pull_again(&self, held: &HeldPull, out: &mut Vec<u8>) -> Option<()> {
        if self.acl.is_some() {
            return None;
        }
        let version = self.cfg.version;
        match self.pull.handle(
            &self.store,
            &held.header,
            version,
            &self.latency,
            held.started,
            Holding::Done,
            out,
        )? {
            Pulled::Answered => Some(()),
            Pulled::Held(_) => None,
        }
    }

    /// The store's dispatch notifier for the network thread (readable after each dispatch
    /// round; drain it with [`FastSend::drain_dispatched`]).
    pub fn dispatch_fd(&self) -> i32 {
        self.store.net_dispatch_notify_fd()
    }

    pub fn drain_dispatched(&self) {
        self.store.drain_net_dispatch_notifications();
    }

    /// The max offset of a queue (the next message's), for held pulls.
    pub fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.store.max_offset_in_queue(topic, queue_id)
    }

    /// The END_TRANSACTION fast path's claims and counts.
    pub fn end_transaction(&self) -> &FastEnd {
        &self.end
    }

    /// Let sends to `topic` take the fast path (the caller checked the topic is writable on a
    /// writable broker and is not a system topic that refuses sends).
    pub fn allow_topic(&self, topic: &str, read_queues: i32, write_queues: i32, multi_tag: bool) {
        let (counts, half_counts) = self
            .topic_in
            .lock()
            .entry(topic.to_string())
            .or_default()
            .clone();
        let route = Route {
            queues: read_queues.min(write_queues),
            write_queues,
            multi_tag,
            counts,
            half_counts,
        };
        self.routes.write().insert(topic.to_string(), route);
    }

    /// Let transactional half messages to vetted topics take the fast path (the caller created
    /// RMQ_SYS_TRANS_HALF_TOPIC and the broker takes transactional messages:
    /// `rejectTransactionMessage=false`). Forgotten with the vetted topics.
    pub fn allow_half(&self) {
        self.half_ok.store(true, Ordering::Relaxed);
    }

    /// Forget one vetted topic (its config changed or it was deleted); the half topic's
    /// forgets the half messages' allowance.
    pub fn forget_topic(&self, topic: &str) {
        if topic == TRANS_HALF_TOPIC {
            self.half_ok.store(false, Ordering::Relaxed);
        }
        if topic == TRANS_HALF_TOPIC || topic == TRANS_OP_HALF_TOPIC {
            self.end.forget();
        }
        self.routes.write().remove(topic);
        self.pull.forget_topic(topic);
    }

    /// Forget every vetted topic and the half messages' allowance (a broker-wide rule
    /// changed).
    pub fn forget_topics(&self) {
        self.half_ok.store(false, Ordering::Relaxed);
        self.routes.write().clear();
        self.pull.forget_all();
        self.end.forget();
    }

    /// Messages stored by the fast path so far.
    pub fn puts(&self) -> u64 {
        self.counters.messages()
    }

    /// Batches whose own UNIQ_KEY the fast path dropped so far.
    pub fn batch_uniq_keys_dropped(&self) -> u64 {
        self.counters.batch_uniq_keys_dropped()
    }

    /// Send requests taken and declined so far.
    pub fn stats(&self) -> Stats {
        self.counters.snapshot()
    }

    /// Per-topic messages, bytes and sizes stored by the fast path, and its answers' latency.
    pub fn metrics(&self) -> MetricsSnapshot {
        let topics = self.topic_in.lock();
        metrics::snapshot(topics.iter(), &self.latency)
    }

    /// Count `frame` as a send declined for `why` if it is one: the network thread passes it to
    /// the Python path without asking [`FastSend::handle`] (it queues behind a request the
    /// Python path is still handling on its connection, or the broker is too busy).
    pub fn note_declined(&self, frame_bytes: &[u8], why: Decline) {
        if let Some((code, flag)) = code_flag(frame_bytes) {
            if flag & FLAG_RESPONSE == 0 && header::is_send(code) {
                self.counters.declined(why);
            }
        }
    }

    /// Handle `frame` (length prefix included) if it is a send the fast path takes; an
    /// immediate answer is appended to `out`. `random` picks a queue when the request asks
    /// for any (queueId < 0). `None`: the Python path answers it (counted per reason when
    /// it is a send).
    pub fn handle(
        &self,
        frame_bytes: &[u8],
        born_host: SocketAddr,
        random: &mut dyn FnMut() -> u32,
        out: &mut Vec<u8>,
    ) -> Option<Sent> {
        self.handle_read_at(frame_bytes, Instant::now(), born_host, random, out)
    }

    /// [`FastSend::handle`] for a frame read at `read_at` (the network thread reads the clock
    /// once per read, not per request): the answer's latency counts from there.
    pub fn handle_read_at(
        &self,
        frame_bytes: &[u8],
        read_at: Instant,
        born_host: SocketAddr,
        random: &mut dyn FnMut() -> u32,
        out: &mut Vec<u8>,
    ) -> Option<Sent> {
        let p = frame::parts(frame_bytes)?;
        if p.serialize_type == SERIALIZE_ROCKETMQ {
            // The Java client 5.x's binary header: answered in kind.
            let Some(mut h) = Header::parse_binary(p.header) else {
                if let Some((code, flag)) = frame::binary_code_flag(p.header) {
                    if flag & FLAG_RESPONSE == 0 && header::is_send(code) {
                        self.counters.declined(Decline::Header);
                    }
                }
                return None;
            };
            return self.take(&mut h, None, p.body, read_at, born_host, random, out);
        }
        if p.serialize_type != SERIALIZE_JSON {
            return None;
        }
        // One UTF-8 check over the whole header, not one per string value.
        let text = std::str::from_utf8(p.header).unwrap_or("");
        // ACL on: the header's entries are gathered as text in the same pass, for the signature.
        let mut h = Header::EMPTY;
        let Ok(()) = Header::parse_into(text, self.acl.is_some(), &mut h) else {
            // Not a send's header, or a send's that is not read here (a value of another
            // type, a field twice): counted when it is a send.
            if let Ok(c) = serde_json::from_slice::<Code>(p.header) {
                if c.flag & FLAG_RESPONSE == 0 && header::is_send(c.code) {
                    self.counters.declined(Decline::Header);
                }
            }
            return None;
        };
        self.take(&mut h, Some(text), p.body, read_at, born_host, random, out)
    }

    /// A parsed request: handled if it is a send the fast path takes. `header_text` is the JSON
    /// header the request came with (None: a binary header, answered in binary); `started`:
    /// when it was read.
    #[allow(clippy::too_many_arguments)]
    fn take(
        &self,
        h: &mut Header<'_>,
        header_text: Option<&str>,
        body: &[u8],
        started: Instant,
        born_host: SocketAddr,
        random: &mut dyn FnMut() -> u32,
        out: &mut Vec<u8>,
    ) -> Option<Sent> {
        if (h.code == PULL_MESSAGE || h.code == LITE_PULL_MESSAGE) && self.acl.is_none() {
            // ACL on: every pull is left to the Python validator.
            let text = header_text?;
            let version = self.cfg.version;
            return match self.pull.handle(
                &self.store,
                text,
                version,
                &self.latency,
                started,
                Holding::May,
                out,
            )? {
                Pulled::Answered => Some(Sent::Replied),
                Pulled::Held(held) => Some(Sent::Pull(held)),
            };
        }
        if h.code == END_TRANSACTION && self.acl.is_none() && !self.sync_flush {
            // ACL on: the Python path checks the account may send to the real topic; SYNC_FLUSH:
            // the Python path's commit is not kept back with the deferred sends.
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64);
            let version = self.cfg.version;
            return match self
                .end
                .handle(&self.store, header_text?, version, now_ms, out)?
            {
                Decided::Answered => Some(Sent::Replied),
                Decided::Oneway => Some(Sent::NoReply),
            };
        }
        if h.flag & FLAG_RESPONSE != 0 || !header::is_send(h.code) {
            return None;
        }
        let binary = header_text.is_none();
        match self.send(
            h,
            header_text,
            body,
            born_host,
            random,
            out,
            started,
            binary,
        ) {
            Ok(sent) => Some(sent),
            Err(why) => {
                self.counters.declined(why);
                None
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn send(
        &self,
        h: &mut Header<'_>,
        header_text: Option<&str>,
        body: &[u8],
        born_host: SocketAddr,
        random: &mut dyn FnMut() -> u32,
        out: &mut Vec<u8>,
        started: Instant,
        binary: bool,
    ) -> Result<Sent, Decline> {
        // Read in place: a header is a few hundred bytes, and each move of it was a memcpy.
        let ext = h.ext.as_mut().ok_or(Decline::Header)?;
        let signed_fields = ext.signed.take();
        let f = ext.send_header(h.code).map_err(|_| Decline::Header)?;
        if body.is_empty() || body.len() > self.cfg.max_body {
            return Err(Decline::Body);
        }
        // Read-locked for the send, not cloned: a clone and its drop were four atomic updates.
        let routes = self.routes.read();
        let route = routes.get(f.topic).ok_or(Decline::Topic)?;
        if let Some(acl) = &self.acl {
            // The signature is checked over the JSON header's fields; a binary header's sends are
            // left to the ACL validator.
            let signed = match (signed_fields, header_text) {
                (Some(fields), _) => acl.allows_fields(h.code, fields, body, f.topic),
                (None, Some(text)) => acl.allows(h.code, text, body, f.topic),
                (None, None) => false,
            };
            if !signed {
                return Err(Decline::Acl);
            }
        }
        let mut queue_id = f.queue_id;
        if queue_id >= route.queues {
            return Err(Decline::QueueId);
        }
        if queue_id < 0 {
            queue_id = (random() % route.write_queues.max(1) as u32) as i32;
        }
        let props = self.properties(f.properties, f.batch, f.topic, queue_id)?;
        let mut sys_flag = f.sys_flag;
        let (mut topic, mut store_queue_id) = (f.topic, queue_id);
        if props.half {
            // Parked as the Python path parks it; answered with the queue it is meant for.
            (topic, store_queue_id) = (TRANS_HALF_TOPIC, 0);
            sys_flag &= !sysflag::TRANSACTION_ROLLBACK_TYPE;
        }
        if route.multi_tag {
            sys_flag |= sysflag::MULTI_TAGS;
        }
        let (batch_results, single);
        let results: &[AppendResult] = if f.batch {
            batch_results = self.put_batch(&f, queue_id, sys_flag, body, &props, born_host)?;
            &batch_results
        } else {
            let msg = MessageRef {
                topic,
                queue_id: store_queue_id,
                flag: f.flag,
                sys_flag,
                born_timestamp: f.born_timestamp,
                born_host,
                reconsume_times: f.reconsume_times,
                prepared_transaction_offset: 0,
                body,
                properties: props.stored.as_bytes(),
            };
            // Store errors (disk full, shut down, ...) are answered by the Python path.
            single = [self.store.put_deferred(&msg).map_err(|_| Decline::Store)?];
            &single
        };
        self.counters.taken(results.len());
        if let Some(acl) = &self.acl {
            acl.taken();
        }
        let counts = if props.half {
            &route.half_counts
        } else {
            &route.counts
        };
        for r in results {
            counts.add(r.size as u64);
        }
        let end = results
            .last()
            .expect("a put stores at least one")
            .end_offset();
        let oneway = h.flag & FLAG_ONEWAY != 0;
        // SYNC_FLUSH: a held answer's flush is not requested here but by the caller, once per
        // poll round (see `Sent::Hold`); nobody waits for the others, so the group commit
        // flushes them.
        let flush_wait =
            self.sync_flush && props.wait && !oneway && self.store.flushed_offset() < end;
        if self.sync_flush && !flush_wait {
            // Requested once the record is written (`write_deferred`).
            self.flush_after_write.fetch_max(end, Ordering::Relaxed);
        }
        if oneway {
            return Ok(Sent::NoReply);
        }
        let mut response = 0;
        let mut replica = false;
        if let (Some(r), true) = (&self.replication, props.wait) {
            // As the Python path's `_replicate`: wait for a slave that is there and keeps up,
            // else answer SLAVE_NOT_AVAILABLE (stored all the same).
            if r.admit(end) {
                replica = r.acked() < end;
            } else {
                response = SLAVE_NOT_AVAILABLE;
            }
        }
        let flush = self.sync_flush && props.wait;
        if replica || flush_wait {
            return Ok(Sent::Hold(Held {
                end,
                replica,
                flush,
                response,
                opaque: h.opaque,
                ext: self.answer(results, queue_id, binary),
                code: h.code,
                started,
            }));
        }
        if binary {
            self.answer(results, queue_id, true).push(
                out,
                response,
                h.opaque,
                self.cfg.version,
                "",
            );
        } else {
            // Written in place: the answer is not built as a string first.
            let ext = |o: &mut Vec<u8>| self.push_answer_json(o, results, queue_id);
            frame::push_response_with(out, response, h.opaque, self.cfg.version, "", Some(ext));
        }
        self.latency.record(h.code, response, started.elapsed());
        Ok(Sent::Replied)
    }

    /// Store a batch body (the Java client's SEND_BATCH_MESSAGE, the C++ client's batch
    /// SEND_MESSAGE) as consecutive records of one queue, inflating it first when the C++
    /// client compressed it; each message keeps its own properties plus the request's.
    fn put_batch(
        &self,
        f: &SendHeader<'_>,
        queue_id: i32,
        mut sys_flag: i32,
        body: &[u8],
        props: &Props,
        born_host: SocketAddr,
    ) -> Result<Vec<AppendResult>, Decline> {
        let inflated;
        let body = if sys_flag & sysflag::COMPRESSED != 0 {
            inflated = inflate(body, self.cfg.max_body).ok_or(Decline::Batch)?;
            sys_flag &= !(sysflag::COMPRESSED | COMPRESSION_TYPE_MASK);
            &inflated[..]
        } else {
            body
        };
        let items = decode_batch_body(body, props.stored.as_bytes()).map_err(|_| Decline::Batch)?;
        let msgs: Vec<MessageRef<'_>> = items
            .iter()
            .map(|it| MessageRef {
                topic: f.topic,
                queue_id,
                flag: it.flag,
                sys_flag,
                born_timestamp: f.born_timestamp,
                born_host,
                reconsume_times: f.reconsume_times,
                prepared_transaction_offset: 0,
                body: it.body,
                properties: &it.properties,
            })
            .collect();
        self.store
            .put_batch_deferred(&msgs)
            .map_err(|_| Decline::Store)
    }

    /// The answer's `extFields`: the message ids (comma-separated for a batch), the queue and
    /// the first message's queue offset; binary entries for a binary request.
    fn answer(&self, results: &[AppendResult], queue_id: i32, binary: bool) -> AnswerExt {
        let host = &self.store.config().store_host;
        if binary {
            let mut ids = String::with_capacity(33 * results.len());
            for (i, r) in results.iter().enumerate() {
                if i > 0 {
                    ids.push(',');
                }
                push_offset_msg_id_hex(&mut ids, host, r.physical_offset);
            }
            let mut entries = Vec::with_capacity(96 + ids.len() + self.cfg.region_id.len());
            let mut num = itoa::Buffer::new();
            frame::push_binary_entry(&mut entries, "msgId", &ids);
            frame::push_binary_entry(&mut entries, "queueId", num.format(queue_id));
            frame::push_binary_entry(
                &mut entries,
                "queueOffset",
                num.format(results[0].queue_offset),
            );
            frame::push_binary_entry(&mut entries, "MSG_REGION", &self.cfg.region_id);
            let trace = if self.cfg.trace_on { "true" } else { "false" };
            frame::push_binary_entry(&mut entries, "TRACE_ON", trace);
            return AnswerExt::Binary(entries);
        }
        let mut ext_json = Vec::with_capacity(64 + 33 * results.len() + self.ext_tail.len());
        self.push_answer_json(&mut ext_json, results, queue_id);
        AnswerExt::Json(String::from_utf8(ext_json).expect("ASCII and the UTF-8 of ext_tail"))
    }

    /// A JSON answer's `extFields` object appended to `out`.
    fn push_answer_json(&self, out: &mut Vec<u8>, results: &[AppendResult], queue_id: i32) {
        let host = &self.store.config().store_host;
        out.extend_from_slice(b"{\"msgId\":\"");
        for (i, r) in results.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_offset_msg_id_hex_bytes(out, host, r.physical_offset);
        }
        let mut num = itoa::Buffer::new();
        out.extend_from_slice(b"\",\"queueId\":\"");
        out.extend_from_slice(num.format(queue_id).as_bytes());
        out.extend_from_slice(b"\",\"queueOffset\":\"");
        out.extend_from_slice(num.format(results[0].queue_offset).as_bytes());
        out.push(b'"');
        out.extend_from_slice(self.ext_tail.as_bytes());
    }

    /// Make the CommitLog durable up to `end` for held answers: on this thread when
    /// `inline` and no group commit is in flight (one waiter: a hand-off to a group-commit
    /// thread and back would cost more than the flush), else by the group commit. Returns
    /// whether `end` is durable on return.
    pub fn flush_held(&self, end: i64, inline: bool) -> bool {
        self.store.flush_or_request(end, inline)
    }

    /// The answer to a held send, appended to `out`: its answer (SUCCESS, SLAVE_NOT_AVAILABLE)
    /// when released, FLUSH_DISK_TIMEOUT when its flush timed out, FLUSH_SLAVE_TIMEOUT when no
    /// slave acknowledged it in time (with the remarks the Python path gives them).
    pub fn held_reply(&self, held: &Held, how: Release, out: &mut Vec<u8>) {
        let (response, remark) = match how {
            Release::Done => (held.response, ""),
            Release::FlushTimeout => (FLUSH_DISK_TIMEOUT, "flush to disk timed out"),
            Release::SlaveTimeout => (FLUSH_SLAVE_TIMEOUT, ""),
        };
        self.latency
            .record(held.code, response, held.started.elapsed());
        held.ext
            .push(out, response, held.opaque, self.cfg.version, remark);
    }

    /// The properties to store and whether the producer waits for the store (WAIT); a
    /// delay or timer message is the Python path's, and a transactional one unless it is a
    /// half message the fast path may take ([`is_half`]). A single message's
    /// properties are stored without WAIT (as RocketMQ does) and with CLUSTER; a batch's are
    /// what each of its messages gets appended to its own.
    fn properties(
        &self,
        props: &str,
        batch: bool,
        topic: &str,
        queue_id: i32,
    ) -> Result<Props, Decline> {
        let props = props.trim_end_matches(SEP);
        let found = Entries::scan(props);
        if found.special {
            return Err(Decline::Special);
        }
        let half = found.half;
        if half && (batch || !self.half_ok.load(Ordering::Relaxed) || !is_half(props)) {
            return Err(Decline::Special);
        }
        let mut wait = true;
        // A single message's properties are stored without their WAIT entry: before and after.
        let (mut head, mut tail) = (props, "");
        if let Some((i, v, j)) = found.wait {
            wait = &props[v..j] != "false";
            if !batch {
                (head, tail) = if j < props.len() {
                    (&props[..i], &props[j + 1..])
                } else {
                    (&props[..i.saturating_sub(1)], "")
                };
            }
        }
        let kept;
        if batch {
            if let Some(k) = without_uniq_key(props) {
                // The batch's own id, not its messages': appended to each message after its own
                // UNIQ_KEY it would replace it (Apache ISSUE #9416); dropped as the Python path
                // drops it.
                kept = k;
                head = &kept;
                self.counters.batch_uniq_key_dropped();
            }
        }
        let mut stored =
            String::with_capacity(head.len() + tail.len() + 96 + self.cluster_prop.len());
        stored.push_str(head);
        stored.push_str(tail);
        if half {
            // As the Python path's `_park`: the transaction is named after the message (as
            // RocketMQ 5.x's broker names it), then where a commit puts it.
            if let Some(uniq) = value_of(&stored, "UNIQ_KEY") {
                let uniq = uniq.to_string();
                push_entry(&mut stored, HALF_KEYS[0], &uniq);
            }
            push_entry(&mut stored, HALF_KEYS[1], topic);
            push_entry(
                &mut stored,
                HALF_KEYS[2],
                itoa::Buffer::new().format(queue_id),
            );
        }
        if !stored.is_empty() {
            stored.push(SEP);
        }
        stored.push_str(&self.cluster_prop);
        if !batch && stored.len() > MAX_PROPERTIES {
            return Err(Decline::Properties);
        }
        Ok(Props { stored, wait, half })
    }
}

/// What the fast path looks for among a send's property entries, in one pass over them: a
/// delay or timer entry (DELAY, TIMER_*), TRAN_MSG, and where the first WAIT entry is (its
/// start, its value's start, its end).
#[derive(Debug, Default, PartialEq, Eq)]
struct Entries {
    special: bool,
    half: bool,
    wait: Option<(usize, usize, usize)>,
}

impl Entries {
    fn scan(props: &str) -> Entries {
        let b = props.as_bytes();
        let mut found = Entries::default();
        let mut start = 0;
        while start <= b.len() {
            let end = memchr::memchr(SEP as u8, &b[start..]).map_or(b.len(), |k| start + k);
            if let Some(k) = memchr::memchr(KV as u8, &b[start..end]) {
                match &b[start..start + k] {
                    b"DELAY" => found.special = true,
                    b"TRAN_MSG" => found.half = true,
                    b"WAIT" if found.wait.is_none() => {
                        found.wait = Some((start, start + k + 1, end))
                    }
                    key if key.starts_with(b"TIMER_") => found.special = true,
                    _ => {}
                }
            }
            start = end + 1;
        }
        found
    }
}

/// A frame's request code and flag, when its header says (JSON or ROCKETMQ binary).
fn code_flag(frame_bytes: &[u8]) -> Option<(i32, i32)> {
    let p = frame::parts(frame_bytes)?;
    match p.serialize_type {
        SERIALIZE_JSON => serde_json::from_slice::<Code>(p.header)
            .ok()
            .map(|h| (h.code, h.flag)),
        SERIALIZE_ROCKETMQ => frame::binary_code_flag(p.header),
        _ => None,
    }
}

/// Whether `frame_bytes` is a send request (SEND_MESSAGE, SEND_MESSAGE_V2,
/// SEND_BATCH_MESSAGE), or a frame whose code cannot be told (counted as one).
pub fn may_be_send(frame_bytes: &[u8]) -> bool {
    code_flag(frame_bytes)
        .is_none_or(|(code, flag)| flag & FLAG_RESPONSE == 0 && header::is_send(code))
}

/// Whether `props` (a single message's, TRAN_MSG among them) is a half message whose stored
/// properties the fast path builds as the Python path does: TRAN_MSG is `true` (any case),
/// every entry is `key\u{1}value` with neither empty, no key comes twice, and none of the
/// properties the Python path sets on a half message is there already. Anything else is left
/// to the Python path (which keeps the last of a repeated key, drops empty entries, ...).
fn is_half(props: &str) -> bool {
    let mut keys: Vec<&str> = Vec::with_capacity(12);
    let mut tran = false;
    for entry in props.trim_end_matches(SEP).split(SEP) {
        let Some((k, v)) = entry.split_once(KV) else {
            return false;
        };
        if k.is_empty() || v.is_empty() || keys.contains(&k) || HALF_KEYS.contains(&k) {
            return false;
        }
        if k == "TRAN_MSG" {
            tran = v.eq_ignore_ascii_case("true");
        }
        keys.push(k);
    }
    tran
}

/// The value of `key` in a property string (its first entry of that key).
fn value_of<'a>(props: &'a str, key: &str) -> Option<&'a str> {
    props.split(SEP).find_map(|e| {
        let (k, v) = e.split_once(KV)?;
        (k == key && !v.is_empty()).then_some(v)
    })
}

/// Append `key\u{1}value` to a property string.
fn push_entry(props: &mut String, key: &str, value: &str) {
    if !props.is_empty() {
        props.push(SEP);
    }
    props.push_str(key);
    props.push(KV);
    props.push_str(value);
}

/// `props` without its UNIQ_KEY entries (every entry, empty ones too, kept in order otherwise),
/// or `None` when it has none.
fn without_uniq_key(props: &str) -> Option<String> {
    const KEY: &str = "UNIQ_KEY\u{1}";
    if !props.contains(KEY) {
        return None;
    }
    let kept: Vec<&str> = props.split(SEP).filter(|e| !e.starts_with(KEY)).collect();
    if kept.len() == props.split(SEP).count() {
        return None; // "UNIQ_KEY\u{1}" inside another entry
    }
    Some(kept.join("\u{2}"))
}

/// Inflate a zlib stream of at most `limit` bytes; `None` when it is not valid zlib, is cut
/// short or inflates to more.
pub(crate) fn inflate(data: &[u8], limit: usize) -> Option<Vec<u8>> {
    let mut d = Decompress::new(true);
    let mut out = Vec::with_capacity(limit.min(data.len().saturating_mul(4)).max(64) + 1);
    loop {
        if out.len() == out.capacity() {
            let grow = out.capacity().min(limit + 1 - out.len());
            out.reserve_exact(grow.max(1));
        }
        let (seen, made) = (d.total_in(), out.len());
        let rest = &data[seen as usize..];
        let status = d
            .decompress_vec(rest, &mut out, FlushDecompress::None)
            .ok()?;
        if out.len() > limit {
            return None;
        }
        match status {
            Status::StreamEnd => return Some(out),
            _ if d.total_in() == seen && out.len() == made => return None,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{inflate, without_uniq_key, Entries};
    use flate2::write::ZlibEncoder;
    use flate2::Compression;
    use std::io::Write;

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = ZlibEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn a_batch_level_uniq_key_is_dropped_as_the_python_path_drops_it() {
        let batch = "UNIQ_KEY\u{1}FD01\u{2}WAIT\u{1}true";
        assert_eq!(without_uniq_key(batch).as_deref(), Some("WAIT\u{1}true"));
        assert_eq!(without_uniq_key("UNIQ_KEY\u{1}FD01").as_deref(), Some(""));
        assert_eq!(
            without_uniq_key("A\u{1}1\u{2}\u{2}UNIQ_KEY\u{1}x\u{2}UNIQ_KEY\u{1}y\u{2}B\u{1}2")
                .as_deref(),
            Some("A\u{1}1\u{2}\u{2}B\u{1}2"),
            "every one, empty entries kept"
        );
        assert_eq!(without_uniq_key("WAIT\u{1}true"), None);
        assert_eq!(
            without_uniq_key("KEYS\u{1}UNIQ_KEY\u{1}x"),
            None,
            "inside another entry"
        );
    }

    #[test]
    fn scans_property_entries_by_their_keys() {
        let scan = |p: &str| Entries::scan(p);
        assert_eq!(scan(""), Entries::default());
        let p = "UNIQ_KEY\u{1}AB\u{2}WAIT\u{1}true\u{2}TAGS\u{1}t";
        let found = scan(p);
        assert_eq!((found.special, found.half), (false, false));
        let (i, v, j) = found.wait.unwrap();
        assert_eq!((&p[i..j], &p[v..j]), ("WAIT\u{1}true", "true"));
        // The first WAIT entry; one at the end.
        let p = "WAIT\u{1}false\u{2}WAIT\u{1}true";
        assert_eq!(scan(p).wait, Some((0, 5, 10)));
        let p = "a\u{1}b\u{2}WAIT\u{1}";
        assert_eq!(scan(p).wait, Some((4, 9, 9)));
        // Delay and timer entries, by key only; TRAN_MSG whatever its value.
        for p in [
            "DELAY\u{1}3",
            "a\u{1}b\u{2}TIMER_DELAY_MS\u{1}5",
            "TIMER_X\u{1}",
        ] {
            assert!(scan(p).special, "{p:?}");
        }
        for p in [
            "XDELAY\u{1}3",
            "k\u{1}DELAY\u{1}3",
            "k\u{1}TIMER_",
            "DELAY",
            "WAIT",
        ] {
            assert_eq!(scan(p), Entries::default(), "{p:?}");
        }
        assert!(scan("TRAN_MSG\u{1}false").half);
        assert!(!scan("XTRAN_MSG\u{1}true").half);
    }

    #[test]
    fn inflates_within_the_limit_only() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let z = zlib(&data);
        assert_eq!(inflate(&z, data.len()).as_deref(), Some(&data[..]));
        assert_eq!(inflate(&z, data.len() - 1), None, "one byte over the limit");
        assert_eq!(inflate(&z[..z.len() - 5], data.len()), None, "cut short");
        assert_eq!(inflate(b"not zlib at all", 1000), None);
        assert_eq!(inflate(&zlib(b""), 10).as_deref(), Some(&b""[..]));
    }
}
