//! The PULL fast path: PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361) requests that find messages,
//! answered by the network thread without Python, for the (consumer group, topic) pairs the Python
//! path vetted.
//!
//! Like the SEND fast path it takes only the common case and declines everything else (returns
//! `None`), so the Python processor keeps every rule, every error answer and long polling:
//!
//! * taken: a JSON header whose fields read as the Python path reads them, a pair the Python
//!   path allowed ([`FastPull::allow`]: the broker and the topic readable, the group there and
//!   consuming, its subscription (tags, or SQL92 with the broker's property filter on) held by
//!   the broker, no ACL, a master), a queue
//!   the topic reads, a subscription version the held one is not behind, and the store
//!   answering FOUND. A lite pull consumer's request carries its subscription (the SUBSCRIPTION
//!   bit): taken for a pair allowed by [`FastPull::allow_lite`] when the expression is a tag one
//!   read as the Python path reads it (`*`, or tags joined by `||`, in ASCII). The answer is the Python path's byte for byte: remark FOUND, the
//!   offsets, `suggestWhichBrokerId` (the group's broker id), the stored records as the body;
//!   a commit offset the request carries is kept for the Python side, with counts of what was
//!   read ([`FastPull::take_taken`]), which applies them in order before it reads or writes
//!   the offset table.
//! * held: a pull that finds nothing new (PULL_NOT_FOUND) with the suspend bit, once the Python
//!   side turned long polling on here ([`FastPull::set_holding`]): the network thread holds it
//!   ([`crate::long_poll`]) until its queue grows or its `suspendTimeoutMillis` pass, then runs
//!   it again ([`Holding::Done`]) and answers FOUND, or PULL_NOT_FOUND as the Python path does;
//!   its commit offset is kept when it arrives, as the Python path commits a pull it holds.
//! * declined: a binary header, the class filter bit, a subscription in the request that is not
//!   a plain tag expression, an unknown pair or queue, and every other answer (offsets moved, to
//!   retry; and nothing new when not held here).
//!
//! The Python side forgets what it vetted through the SEND fast path's hooks (a topic's or the
//! broker's config changed) and [`FastPull::forget_group`] (the group's config or its
//! consumers' subscription changed).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use rmq_filter::Sql92Filter;
use rmq_store::{GetMessageStatus, GetRequest, MessageStore, SqlFilter, TagFilter};
use serde::Deserialize;

use crate::frame::{self, FLAG_ONEWAY, FLAG_RESPONSE};
use crate::header::{int, Field, Request, Value};
use crate::metrics::Latency;
use rmq_store::message::java_string_hash;

pub use crate::codes::{LITE_PULL_MESSAGE, PULL_MESSAGE};
/// PullSysFlag: the request carries its subscription (the lite pull consumer).
const SUBSCRIPTION: i32 = 0x4;
/// PullSysFlag: the broker may hold the pull while nothing new is there (long polling).
const SUSPEND: i32 = 0x2;
/// RocketMQ's PULL_NOT_FOUND: nothing new.
const PULL_NOT_FOUND: i32 = 19;
/// PullSysFlag: class filtering, left to the Python path.
const CLASS_FILTER: i32 = 0x8;
/// PullSysFlag: the request carries the consumer's offset to commit.
const COMMIT_OFFSET: i32 = 0x1;
/// The most messages one pull returns (the Python path's bound).
const MAX_MSGS: i32 = 1024;

/// What the Python path vetted for one (group, topic).
#[derive(Debug, Clone, Default)]
struct PullRoute {
    read_queues: i32,
    /// The subscription the broker holds; `None`: pulls without their own subscription are not
    /// vetted.
    held: Option<Held>,
    /// Pulls carrying their own subscription are vetted.
    lite: bool,
    /// `suggestWhichBrokerId` of every answer.
    suggest: i64,
}

/// A subscription the broker holds.
#[derive(Debug, Clone)]
struct Held {
    /// Tag codes to match (`None`: every message, or an SQL92 subscription).
    tags: Option<TagFilter>,
    /// An SQL92 subscription's compiled expression and its key (`group#topic`: the dispatcher's
    /// bloom bits).
    sql: Option<(Arc<Sql92Filter>, String)>,
    version: i64,
}

/// What the fast path served for one queue of a group since the Python side last took it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueTaken {
    /// Pulls answered.
    pub requests: u64,
    /// Messages and bytes of records returned.
    pub messages: u64,
    pub bytes: u64,
    /// The last answer's `nextBeginOffset`.
    pub next_offset: i64,
    /// The last commit offset a request carried (with the COMMIT_OFFSET bit), if any.
    pub commit: Option<i64>,
}

/// One (group, topic, queue) and what was served for it.
pub type Taken = ((String, String, i32), QueueTaken);

type PullFrame<'a> = Request<PullExt<'a>>;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PullExt<'a> {
    #[serde(borrow, default)]
    consumer_group: Field<'a>,
    #[serde(borrow, default)]
    topic: Field<'a>,
    #[serde(borrow, default)]
    queue_id: Field<'a>,
    #[serde(borrow, default)]
    queue_offset: Field<'a>,
    #[serde(borrow, default)]
    max_msg_nums: Field<'a>,
    #[serde(borrow, default)]
    sys_flag: Field<'a>,
    #[serde(borrow, default)]
    commit_offset: Field<'a>,
    #[serde(borrow, default)]
    sub_version: Field<'a>,
    #[serde(borrow, default)]
    subscription: Field<'a>,
    #[serde(borrow, default)]
    expression_type: Field<'a>,
    #[serde(borrow, default)]
    suspend_timeout_millis: Field<'a>,
}

/// A pull request's header as the Python path reads it.
#[derive(Debug, PartialEq, Eq)]
struct PullHeader<'a> {
    code: i32,
    opaque: i32,
    group: &'a str,
    topic: &'a str,
    queue_id: i32,
    offset: i64,
    max_msgs: i32,
    sys_flag: i32,
    commit_offset: i64,
    sub_version: i64,
    subscription: Option<&'a str>,
    expression_type: Option<&'a str>,
    suspend_ms: i64,
}

fn text<'a>(v: &'a Field<'_>) -> Option<&'a str> {
    match v {
        Some(Value::Text(t)) if !t.is_empty() => Some(t),
        _ => None,
    }
}

/// The frame as a pull request; `None` when it is not one or a field does not read as the Python
/// path reads it.
fn pull_header<'a>(f: &'a PullFrame<'_>) -> Option<PullHeader<'a>> {
    let pull = f.code == PULL_MESSAGE || f.code == LITE_PULL_MESSAGE;
    if !pull || f.flag & (FLAG_RESPONSE | FLAG_ONEWAY) != 0 {
        return None;
    }
    let e = f.ext.as_ref()?;
    Some(PullHeader {
        code: f.code,
        opaque: f.opaque,
        group: text(&e.consumer_group)?,
        topic: text(&e.topic)?,
        queue_id: int(&e.queue_id, None)?,
        offset: int(&e.queue_offset, None)?,
        max_msgs: int(&e.max_msg_nums, Some(32))?,
        sys_flag: int(&e.sys_flag, Some(0))?,
        commit_offset: int(&e.commit_offset, Some(-1))?,
        sub_version: int(&e.sub_version, Some(0))?,
        subscription: opt_text(&e.subscription)?,
        expression_type: opt_text(&e.expression_type)?,
        suspend_ms: int(&e.suspend_timeout_millis, Some(15_000))?,
    })
}

/// An optional text field: `Some(None)` when absent, `None` when it is not text.
fn opt_text<'a>(v: &'a Field<'_>) -> Option<Option<&'a str>> {
    match v {
        None => Some(None),
        Some(Value::Text(t)) => Some(Some(t)),
        Some(Value::Int(_)) => None,
    }
}

/// A subscription carried by the request, read as the Python path's `parse_subscription` reads a
/// tag expression: `Some(None)` for every message, `Some(Some(codes))` for tags; `None` for what
/// it reads otherwise or refuses (SQL92, an unknown type, no tag, anything not plain ASCII).
fn request_filter(
    expression_type: Option<&str>,
    subscription: Option<&str>,
) -> Option<Option<TagFilter>> {
    let plain = |s: &str| s.bytes().all(|b| (0x20..0x7f).contains(&b));
    let etype = expression_type.unwrap_or("");
    let text = subscription.unwrap_or("");
    if !plain(etype) || !plain(text) {
        return None;
    }
    let etype = etype.trim();
    if !(etype.is_empty() || etype.eq_ignore_ascii_case("TAG")) {
        return None;
    }
    let text = text.trim();
    if text.is_empty() || text == "*" {
        return Some(None);
    }
    let tags: Vec<&str> = text
        .split("||")
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if tags.is_empty() {
        return None;
    }
    if tags.contains(&"*") {
        return Some(None);
    }
    let codes = tags.iter().map(|t| java_string_hash(t)).collect();
    Some(Some(TagFilter { codes }))
}

/// When a pull is handled: on arrival (it may be held), or once held (it is answered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holding {
    May,
    Done,
}

/// What the fast path did with a pull it took.
#[derive(Debug, PartialEq, Eq)]
pub enum Pulled {
    /// The answer was appended to the output.
    Answered,
    /// Nothing new yet: the caller holds it ([`crate::long_poll`]).
    Held(HeldPull),
}

/// A pull the network thread holds for long polling.
#[derive(Debug, PartialEq, Eq)]
pub struct HeldPull {
    pub topic: String,
    pub queue_id: i32,
    /// Its queue offset: it is woken once the queue's max offset is past it.
    pub offset: i64,
    /// When its suspend time is over.
    pub deadline: Instant,
    /// When it arrived (its answer's latency counts from there).
    pub started: Instant,
    /// Its JSON header, to run it again.
    pub header: String,
}

/// The fast path's vetted pairs and what it served since the Python side last looked.
#[derive(Default)]
pub struct FastPull {
    /// topic → group → route.
    routes: RwLock<HashMap<String, HashMap<String, Arc<PullRoute>>>>,
    taken: Mutex<HashMap<(String, String, i32), QueueTaken>>,
    /// Pulls that find nothing new are held here (long polling on, the Python side says).
    holding: AtomicBool,
}

impl FastPull {
    /// Let pulls of `group` on `topic` take the fast path: the caller answered one FOUND by the
    /// rules above. `tag_codes`: the subscription's tag codes (`None`: `*`, or SQL92); `sql`:
    /// an SQL92 subscription's compiled expression.
    #[allow(clippy::too_many_arguments)]
    pub fn allow(
        &self,
        group: &str,
        topic: &str,
        read_queues: i32,
        tag_codes: Option<Vec<i32>>,
        sql: Option<Arc<Sql92Filter>>,
        sub_version: i64,
        suggest: i64,
    ) {
        let held = Held {
            tags: tag_codes.map(|codes| TagFilter { codes }),
            sql: sql.map(|f| (f, format!("{group}#{topic}"))),
            version: sub_version,
        };
        self.update(group, topic, read_queues, suggest, |r| r.held = Some(held));
    }

    /// Let pulls of `group` on `topic` carrying their own tag subscription (the lite pull
    /// consumer's) take the fast path: the caller answered one FOUND by the rules above.
    pub fn allow_lite(&self, group: &str, topic: &str, read_queues: i32, suggest: i64) {
        self.update(group, topic, read_queues, suggest, |r| r.lite = true);
    }

    fn update(
        &self,
        group: &str,
        topic: &str,
        read_queues: i32,
        suggest: i64,
        change: impl FnOnce(&mut PullRoute),
    ) {
        let mut routes = self.routes.write();
        let groups = routes.entry(topic.to_string()).or_default();
        let mut route = groups.get(group).map(|r| (**r).clone()).unwrap_or_default();
        route.read_queues = read_queues;
        route.suggest = suggest;
        change(&mut route);
        groups.insert(group.to_string(), Arc::new(route));
    }

    /// Forget the pairs of `topic` (its config changed or it was deleted).
    pub fn forget_topic(&self, topic: &str) {
        self.routes.write().remove(topic);
    }

    /// Forget the pairs of `group` (its config or its consumers' subscription changed).
    pub fn forget_group(&self, group: &str) {
        for groups in self.routes.write().values_mut() {
            groups.remove(group);
        }
    }

    /// Forget every pair (a broker-wide rule changed).
    pub fn forget_all(&self) {
        self.routes.write().clear();
    }

    /// Hold pulls that find nothing new in the network thread (RocketMQ's `longPollingEnable`);
    /// off: they go to the Python path.
    pub fn set_holding(&self, on: bool) {
        self.holding.store(on, Ordering::Relaxed);
    }

    /// Whether any pair is vetted.
    pub fn any(&self) -> bool {
        !self.routes.read().is_empty()
    }

    /// What was served per (group, topic, queue) since the last call, in no order.
    pub fn take_taken(&self) -> Vec<Taken> {
        std::mem::take(&mut *self.taken.lock())
            .into_iter()
            .collect()
    }

    /// Handle a pull whose JSON header is `header_text` if the fast path takes it: its answer
    /// is appended to `out`, or (on arrival, nothing new) it is to be held. `None`: the Python
    /// path answers it.
    #[allow(clippy::too_many_arguments)]
    pub fn handle(
        &self,
        store: &MessageStore,
        header_text: &str,
        version: i32,
        latency: &Latency,
        started: Instant,
        holding: Holding,
        out: &mut Vec<u8>,
    ) -> Option<Pulled> {
        let parsed: PullFrame<'_> = serde_json::from_str(header_text).ok()?;
        let h = pull_header(&parsed)?;
        if h.sys_flag & CLASS_FILTER != 0 {
            return None;
        }
        let route = self.routes.read().get(h.topic)?.get(h.group)?.clone();
        if h.queue_id < 0 || h.queue_id >= route.read_queues {
            return None;
        }
        let own;
        let (filter, sql) = if h.sys_flag & SUBSCRIPTION != 0 {
            if !route.lite {
                return None;
            }
            own = request_filter(h.expression_type, h.subscription)?;
            (own.as_ref(), None)
        } else {
            let held = route.held.as_ref()?;
            if held.version < h.sub_version {
                return None;
            }
            let sql = held
                .sql
                .as_ref()
                .map(|(f, key)| SqlFilter { filter: f, key });
            (held.tags.as_ref(), sql)
        };
        let r = store.get_message(&GetRequest {
            topic: h.topic,
            queue_id: h.queue_id,
            offset: h.offset,
            max_msgs: h.max_msgs.clamp(1, MAX_MSGS) as u32,
            max_bytes: 0,
            filter,
            sql,
        });
        let found = r.status == GetMessageStatus::Found;
        // The Python path's PULL_NOT_FOUND: nothing new at the end of the queue.
        let nothing_new = match r.status {
            GetMessageStatus::OffsetOverflowOne | GetMessageStatus::OffsetFoundNull => true,
            GetMessageStatus::NoMatchedLogicQueue | GetMessageStatus::NoMessageInQueue => {
                h.offset == 0
            }
            _ => false,
        };
        let hold = holding == Holding::May
            && nothing_new
            && h.sys_flag & SUSPEND != 0
            && self.holding.load(Ordering::Relaxed);
        // Answered here: FOUND; nothing new once held (PULL_NOT_FOUND). Else held, or Python's.
        let answer_not_found = nothing_new && holding == Holding::Done;
        if !(found || hold || answer_not_found) {
            return None;
        }
        {
            let mut taken = self.taken.lock();
            let q = taken
                .entry((h.group.to_string(), h.topic.to_string(), h.queue_id))
                .or_default();
            if !hold {
                q.requests += 1;
                q.messages += u64::from(r.message_count);
                q.bytes += r.buffer.len() as u64;
                q.next_offset = r.next_begin_offset;
            }
            // The offset a pull carries is committed when it arrives, held or not (not again
            // when a held one is answered).
            if holding == Holding::May && h.sys_flag & COMMIT_OFFSET != 0 && h.commit_offset >= 0 {
                q.commit = Some(h.commit_offset);
            }
        }
        if hold {
            return Some(Pulled::Held(HeldPull {
                topic: h.topic.to_string(),
                queue_id: h.queue_id,
                offset: h.offset,
                deadline: started + Duration::from_millis(h.suspend_ms.max(0) as u64),
                started,
                header: header_text.to_string(),
            }));
        }
        let code = if found {
            crate::codes::SUCCESS
        } else {
            PULL_NOT_FOUND
        };
        push_answer(out, &h, code, r.status.name(), route.suggest, &r, version);
        match holding {
            Holding::May => latency.record(h.code, code, started.elapsed()),
            // A held pull's answer, its wait included, is a long poll's: timed apart.
            Holding::Done => latency.record_held(h.code, code, started.elapsed()),
        }
        Some(Pulled::Answered)
    }
}

/// The FOUND answer (the records as its body) or the PULL_NOT_FOUND one, as the Python path
/// writes them: remark the store's status.
fn push_answer(
    out: &mut Vec<u8>,
    h: &PullHeader<'_>,
    code: i32,
    remark: &str,
    suggest: i64,
    r: &rmq_store::GetResult,
    version: i32,
) {
    let mut ext = String::with_capacity(120);
    let mut num = itoa::Buffer::new();
    for (i, (key, value)) in [
        ("suggestWhichBrokerId", suggest),
        ("nextBeginOffset", r.next_begin_offset),
        ("minOffset", r.min_offset),
        ("maxOffset", r.max_offset),
    ]
    .into_iter()
    .enumerate()
    {
        ext.push(if i == 0 { '{' } else { ',' });
        ext.push('"');
        ext.push_str(key);
        ext.push_str("\":\"");
        ext.push_str(num.format(value));
        ext.push('"');
    }
    ext.push('}');
    let start = out.len();
    let remark = format!("\"{remark}\"");
    frame::push_response(out, code, h.opaque, version, &remark, &ext);
    if code == crate::codes::SUCCESS {
        out.extend_from_slice(&r.buffer);
    }
    let total = (out.len() - start - 4) as i32;
    out[start..start + 4].copy_from_slice(&total.to_be_bytes());
}
