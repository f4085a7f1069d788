//! The END_TRANSACTION fast path: a producer's commit or rollback of a transactional half
//! message, decided by the network thread without Python once the Python path has decided one.
//!
//! A commit re-puts the half message to its real topic and queue (REAL_TOPIC, REAL_QID) as a
//! COMMIT record whose properties are the half's with WAIT set to false, the half's CommitLog
//! offset as its prepared-transaction offset; commit and rollback both append the op record
//! (RMQ_SYS_TRANS_OP_HALF_TOPIC queue 0, tag `d`, the half's queue offset as its body) — as the
//! Python path does. What is decided is shared with the Python side through one claim set
//! ([`FastEnd::claim`]): whichever side claims a half offset first decides it, so neither decides
//! one twice and the check service never checks one that is decided; the Python side reads the
//! op records this path appends as it reads any other (they are in the store) and moves the
//! floor below which every half offset is settled ([`FastEnd::set_floor`]), which bounds the set.
//!
//! Declined (left to the Python path, which answers errors and keeps every rule): a binary
//! header, a state that is neither commit nor rollback, a record that is not the half message
//! the header names (topic, producer group, queue offset, CommitLog offset), a half offset
//! already claimed, properties the Python path would rewrite otherwise (an empty or keyless
//! entry, a key twice), a commit without REAL_TOPIC or REAL_QID, a store error.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use rmq_store::message::{decode, MessageRef};
use rmq_store::MessageStore;
use serde::Deserialize;

use crate::frame::{self, FLAG_ONEWAY, FLAG_RESPONSE};
use crate::header::{int, Field, Request, Value};

use crate::codes::TRANS_HALF_TOPIC;
pub use crate::codes::{END_TRANSACTION, TRANS_OP_HALF_TOPIC};
/// `commitOrRollback` values (MessageSysFlag's transaction types).
const COMMIT: i32 = 0x8;
const ROLLBACK: i32 = 0xC;
const TRANSACTION_TYPE_MASK: i32 = 0xC;
const SEP: char = '\u{2}';
const KV: char = '\u{1}';

type EndFrame<'a> = Request<EndExt<'a>>;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EndExt<'a> {
    #[serde(borrow, default)]
    producer_group: Field<'a>,
    #[serde(borrow, default)]
    tran_state_table_offset: Field<'a>,
    #[serde(borrow, default)]
    commit_log_offset: Field<'a>,
    #[serde(borrow, default)]
    commit_or_rollback: Field<'a>,
}

/// A decision taken: answered, or a oneway request (nothing to answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    Answered,
    Oneway,
}

/// The claim set shared with the Python side.
#[derive(Default)]
struct Claims {
    /// Every half offset below is settled.
    floor: i64,
    /// Claimed half offsets at or above the floor.
    claimed: HashSet<i64>,
}

/// The END_TRANSACTION fast path's state.
#[derive(Default)]
pub struct FastEnd {
    allowed: AtomicBool,
    claims: Mutex<Claims>,
    commits: AtomicU64,
    rollbacks: AtomicU64,
    /// Commits stored whose op record could not be (a store error): their claims are kept.
    ops_lost: AtomicU64,
}

impl FastEnd {
    /// Let END_TRANSACTION requests take the fast path (the Python path decided one: the op topic
    /// exists; ACL is off).
    pub fn allow(&self) {
        self.allowed.store(true, Ordering::Relaxed);
    }

    /// Leave every END_TRANSACTION to the Python path again (a config change, the op or half
    /// topic changed).
    pub fn forget(&self) {
        self.allowed.store(false, Ordering::Relaxed);
    }

    /// Claim the right to decide `half_offset`: false if it is settled or already claimed.
    pub fn claim(&self, half_offset: i64) -> bool {
        let mut c = self.claims.lock();
        half_offset >= c.floor && c.claimed.insert(half_offset)
    }

    /// Give a claim back (its decision failed to be stored).
    pub fn release(&self, half_offset: i64) {
        self.claims.lock().claimed.remove(&half_offset);
    }

    /// Whether `half_offset` is settled or claimed.
    pub fn is_claimed(&self, half_offset: i64) -> bool {
        let c = self.claims.lock();
        half_offset < c.floor || c.claimed.contains(&half_offset)
    }

    /// Every half offset below `floor` is settled (the Python side's half floor): the claims
    /// below it are dropped.
    pub fn set_floor(&self, floor: i64) {
        let mut c = self.claims.lock();
        if floor > c.floor {
            c.floor = floor;
            c.claimed.retain(|h| *h >= floor);
        }
    }

    /// (commits, rollbacks) decided here so far, commits stored without their op record, and
    /// the claims held.
    pub fn stats(&self) -> (u64, u64, u64, usize) {
        (
            self.commits.load(Ordering::Relaxed),
            self.rollbacks.load(Ordering::Relaxed),
            self.ops_lost.load(Ordering::Relaxed),
            self.claims.lock().claimed.len(),
        )
    }

    /// Decide the END_TRANSACTION whose JSON header is `header_text` if the fast path takes it;
    /// an answer (unless oneway) is appended to `out`. `None`: the Python path decides it.
    pub fn handle(
        &self,
        store: &MessageStore,
        header_text: &str,
        version: i32,
        now_ms: i64,
        out: &mut Vec<u8>,
    ) -> Option<Decided> {
        if !self.allowed.load(Ordering::Relaxed) {
            return None;
        }
        let f: EndFrame<'_> = serde_json::from_str(header_text).ok()?;
        if f.code != END_TRANSACTION || f.flag & FLAG_RESPONSE != 0 {
            return None;
        }
        let e = f.ext.as_ref()?;
        let kind: i32 = int(&e.commit_or_rollback, None)?;
        if kind != COMMIT && kind != ROLLBACK {
            return None;
        }
        let group = match &e.producer_group {
            Some(Value::Text(t)) => t.as_ref(),
            _ => return None,
        };
        let table_offset: i64 = int(&e.tran_state_table_offset, None)?;
        let cl_offset: i64 = int(&e.commit_log_offset, None)?;
        let raw = store.lookup(cl_offset)?;
        let half = decode(&raw, false).ok()?;
        if half.topic != TRANS_HALF_TOPIC
            || half.queue_offset != table_offset
            || half.physical_offset != cl_offset
        {
            return None;
        }
        let props = Props::parse(half.properties)?;
        if props.get("PGROUP") != Some(group) {
            return None;
        }
        let real = if kind == COMMIT {
            let topic = props.get("REAL_TOPIC")?;
            let queue_id: i32 = props.get("REAL_QID")?.parse().ok()?;
            Some((topic, queue_id, props.with_wait_false()))
        } else {
            None
        };
        if !self.claim(half.queue_offset) {
            return None;
        }
        if let Some((topic, queue_id, properties)) = &real {
            let msg = MessageRef {
                topic,
                queue_id: *queue_id,
                flag: half.flag,
                sys_flag: (half.sys_flag & !TRANSACTION_TYPE_MASK) | COMMIT,
                born_timestamp: half.born_timestamp,
                born_host: half.born_host,
                reconsume_times: half.reconsume_times,
                prepared_transaction_offset: half.physical_offset,
                body: half.body,
                properties: properties.as_bytes(),
            };
            if store.put(&msg).is_err() {
                self.release(half.queue_offset);
                return None;
            }
        }
        let body = half.queue_offset.to_string();
        let op = MessageRef {
            topic: TRANS_OP_HALF_TOPIC,
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: now_ms,
            born_host: store_host(store),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: body.as_bytes(),
            properties: b"TAGS\x01d",
        };
        if store.put(&op).is_err() {
            // The commit is stored, its op record is not (counted; the Python side logs it):
            // the claim is kept, so it is not committed twice, and the check service (which
            // reads the claims) leaves it be. Declined: the Python path answers the error.
            self.ops_lost.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        if kind == COMMIT {
            self.commits.fetch_add(1, Ordering::Relaxed);
        } else {
            self.rollbacks.fetch_add(1, Ordering::Relaxed);
        }
        if f.flag & FLAG_ONEWAY != 0 {
            return Some(Decided::Oneway);
        }
        frame::push_response(out, crate::codes::SUCCESS, f.opaque, version, "", "");
        Some(Decided::Answered)
    }
}

fn store_host(store: &MessageStore) -> SocketAddr {
    store.config().store_host
}

/// A half message's properties as the Python path reads them, or `None` when it would read
/// them otherwise (an empty entry, one without a key or a value, a key twice).
struct Props<'a> {
    entries: Vec<(&'a str, &'a str)>,
}

impl<'a> Props<'a> {
    fn parse(text: &'a str) -> Option<Props<'a>> {
        let mut entries: Vec<(&str, &str)> = Vec::new();
        for seg in text.split(SEP) {
            let (k, v) = seg.split_once(KV)?;
            if k.is_empty() || v.is_empty() || entries.iter().any(|(key, _)| *key == k) {
                return None;
            }
            entries.push((k, v));
        }
        Some(Props { entries })
    }

    fn get(&self, key: &str) -> Option<&'a str> {
        self.entries
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    /// The properties with WAIT false (in its place, or last), joined as the Python path joins
    /// them.
    fn with_wait_false(&self) -> String {
        let mut out = String::new();
        let mut seen = false;
        for (k, v) in &self.entries {
            if !out.is_empty() {
                out.push(SEP);
            }
            out.push_str(k);
            out.push(KV);
            if *k == "WAIT" {
                seen = true;
                out.push_str("false");
            } else {
                out.push_str(v);
            }
        }
        if !seen {
            if !out.is_empty() {
                out.push(SEP);
            }
            out.push_str("WAIT\u{1}false");
        }
        out
    }
}
