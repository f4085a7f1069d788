//! ReceiveMessage and AckMessage served by the gRPC port itself, for the consumers the endpoint
//! told it of (not lite ones), on topics whose masters it handed over: a receive is one
//! POP_MESSAGE to the named broker (every queue, id -1) answered with the messages as the
//! endpoint converts them (python/rmq/proxy/messages.py `from_broker`) and their receipt handles
//! (python/rmq/proxy/pop.py); an ack joins the other acks waiting for the same broker, sent as one
//! BATCH_ACK_MESSAGE while the previous one is under way (the Java client acks each message with a
//! call of its own). What the broker does not take as a batch is acked one by one, so each call
//! gets its own answer. Anything else is the endpoint's ([`prepare_receive`] / [`prepare_ack`]
//! answer `None`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message as _;
use rmq_store::message::{self as record, Record};
use tokio::sync::{mpsc, oneshot};

use super::pb::{self, Code};
use super::remoting::Reply;
use super::routes::{DeadLetter, FastSends};
use super::send::{from_remoting, overall, status, Brokers};

const POP_MESSAGE: i32 = 200050;
const ACK_MESSAGE: i32 = 200051;
const BATCH_ACK_MESSAGE: i32 = 200151;
const PULL_NOT_FOUND: i32 = 19;
const POLLING_FULL: i32 = 209;
const POLLING_TIMEOUT: i32 = 210;
const NO_MESSAGE: i32 = 208;
/// The revive queue id of an orderly pop's handles (their acks stay the endpoint's).
const ORDER_REVIVE_QUEUE: i64 = 999;

const DEFAULT_INVISIBLE_MS: i64 = 30_000;
const DEFAULT_POLL_MS: i64 = 20_000;
const MAX_POLL_MS: i64 = 30_000;
const RECEIVE_BATCH_MAX: i32 = 32;
const DEADLINE_MARGIN_MS: i64 = 1000;
/// How far past its checkpoint's start an ack may be and still go in a batch (its bit set).
const MAX_BATCH_SPAN: i64 = 4096;
/// The largest body inflated for a consumer.
const MAX_INFLATED: usize = 64 << 20;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn duration_ms(d: &prost_types::Duration) -> i64 {
    d.seconds * 1000 + i64::from(d.nanos).div_euclid(1_000_000)
}

fn timestamp(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
    }
}

/// The topic a handle's retry mark names (`0` the topic, `1`/`2` the group's retry topics).
fn real_topic(topic: &str, group: &str, mark: &str) -> Option<String> {
    match mark {
        "0" => Some(topic.to_string()),
        "1" => Some(format!("%RETRY%{group}_{topic}")),
        "2" => Some(format!("%RETRY%{group}+{topic}")),
        _ => None,
    }
}

fn retry_mark(topic: &str) -> &'static str {
    match topic.strip_prefix("%RETRY%") {
        Some(rest) if rest.contains('+') => "2",
        Some(_) => "1",
        None => "0",
    }
}

/// A receipt handle (the broker's extraInfo, then the message's CommitLog offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handle {
    pub ck_queue_offset: i64,
    pub pop_time: i64,
    pub invisible_time: i64,
    pub revive_qid: i64,
    pub retry: String,
    pub broker_name: String,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub commit_log_offset: i64,
}

impl Handle {
    pub fn parse(text: &str) -> Option<Handle> {
        let p: Vec<&str> = text.split(' ').collect();
        if p.len() < 8 {
            return None;
        }
        Some(Handle {
            ck_queue_offset: p[0].parse().ok()?,
            pop_time: p[1].parse().ok()?,
            invisible_time: p[2].parse().ok()?,
            revive_qid: p[3].parse().ok()?,
            retry: p[4].to_string(),
            broker_name: p[5].to_string(),
            queue_id: p[6].parse().ok()?,
            queue_offset: p[7].parse().ok()?,
            commit_log_offset: match p.get(8) {
                Some(v) => v.parse().ok()?,
                None => -1,
            },
        })
    }
}

impl std::fmt::Display for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} {} {} {} {} {} {}",
            self.ck_queue_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.retry,
            self.broker_name,
            self.queue_id,
            self.queue_offset
        )?;
        if self.commit_log_offset >= 0 {
            write!(f, " {}", self.commit_log_offset)?;
        }
        Ok(())
    }
}

/// `startOffsetInfo` as `{"<retry>@<queueId>": [values]}`.
fn offset_info(text: &str) -> HashMap<String, Vec<i64>> {
    let mut out = HashMap::new();
    for one in text.split(';').filter(|s| !s.is_empty()) {
        let parts: Vec<&str> = one.split(' ').collect();
        if parts.len() == 3 {
            let values = parts[2].split(',').filter_map(|v| v.parse().ok()).collect();
            out.insert(format!("{}@{}", parts[0], parts[1]), values);
        }
    }
    out
}

// --- ReceiveMessage ------------------------------------------------------------------------------

/// A receive the port serves.
pub struct Receive {
    addr: String,
    broker_name: String,
    group: String,
    topic: String,
    namespace: String,
    fields: Vec<(&'static str, String)>,
    poll_ms: i64,
    invisible_ms: i64,
    max_attempts: i32,
}

/// The grpc-timeout header's time in milliseconds (`<digits><unit>`).
pub fn grpc_timeout_ms(value: &str) -> Option<i64> {
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    let n: i64 = digits.parse().ok()?;
    Some(match unit {
        "H" => n.saturating_mul(3_600_000),
        "M" => n.saturating_mul(60_000),
        "S" => n.saturating_mul(1000),
        "m" => n,
        "u" => n / 1000,
        "n" => n / 1_000_000,
        _ => return None,
    })
}

/// The receive `raw` (a ReceiveMessageRequest) of client `client_id` as the port serves it, or
/// `None`: the endpoint's. `deadline_ms`: the call's grpc-timeout.
pub fn prepare_receive(
    raw: &[u8],
    client_id: Option<&str>,
    deadline_ms: Option<i64>,
    fast: &FastSends,
) -> Option<Receive> {
    let facts = fast.client(client_id?)?;
    if facts.lite {
        return None;
    }
    let r = pb::ReceiveMessageRequest::decode(raw).ok()?;
    let group = r.group.as_ref()?;
    let mq = r.message_queue.as_ref()?;
    let topic = mq.topic.as_ref()?;
    let broker = mq.broker.as_ref()?;
    if group.name.is_empty() || topic.name.is_empty() || r.batch_size < 0 {
        return None;
    }
    let invisible_ms = match &r.invisible_duration {
        Some(d) => duration_ms(d),
        None => DEFAULT_INVISIBLE_MS,
    };
    if invisible_ms <= 0 {
        return None;
    }
    let mut poll_ms = match &r.long_polling_timeout {
        Some(d) => duration_ms(d),
        None => DEFAULT_POLL_MS,
    }
    .clamp(0, MAX_POLL_MS);
    if let Some(left) = deadline_ms {
        poll_ms = poll_ms.min(left - DEADLINE_MARGIN_MS).max(0);
    }
    let addr = fast.master(&topic.name, &broker.name)?;
    let batch = if r.batch_size == 0 {
        RECEIVE_BATCH_MAX
    } else {
        r.batch_size
    };
    let (exp_type, exp) = match &r.filter_expression {
        Some(f) => (
            if f.r#type == pb::FilterType::Sql as i32 {
                "SQL92"
            } else {
                "TAG"
            },
            if f.expression.is_empty() {
                "*".to_string()
            } else {
                f.expression.clone()
            },
        ),
        None => ("TAG", "*".to_string()),
    };
    let mut fields = vec![
        ("consumerGroup", group.name.clone()),
        ("topic", topic.name.clone()),
        ("queueId", "-1".to_string()),
        ("maxMsgNums", batch.to_string()),
        ("invisibleTime", invisible_ms.to_string()),
        ("pollTime", poll_ms.to_string()),
        ("bornTime", now_ms().to_string()),
        ("initMode", "1".to_string()),
        ("expType", exp_type.to_string()),
        ("exp", exp),
        ("order", facts.fifo.to_string()),
    ];
    if let Some(a) = r.attempt_id.as_ref().filter(|a| !a.is_empty()) {
        fields.push(("attemptId", a.clone()));
    }
    Some(Receive {
        addr,
        broker_name: broker.name.clone(),
        group: group.name.clone(),
        topic: topic.name.clone(),
        namespace: group.resource_namespace.clone(),
        fields,
        poll_ms,
        invisible_ms,
        max_attempts: facts.max_attempts,
    })
}

fn status_answer(code: Code, message: String) -> Vec<pb::ReceiveMessageResponse> {
    vec![pb::ReceiveMessageResponse {
        content: Some(pb::receive_message_response::Content::Status(status(
            code, message,
        ))),
    }]
}

/// A stored message as a 5.x consumer is shown it.
fn to_v2(
    rec: &Record<'_>,
    props: &[(&str, &str)],
    handle: &Handle,
    r: &Receive,
    fast: &FastSends,
) -> pb::Message {
    let get = |k: &str| props.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
    let body = if rec.sys_flag & 1 != 0
        && (rec.sys_flag >> 8) & 0x7 != 1
        && (rec.sys_flag >> 8) & 0x7 != 2
    {
        crate::send::inflate(rec.body, MAX_INFLATED).unwrap_or_else(|| rec.body.to_vec())
    } else {
        rec.body.to_vec()
    };
    let message_id = match get("UNIQ_KEY") {
        Some(id) if !id.is_empty() => id.to_string(),
        _ => record::offset_msg_id_hex(&rec.store_host, rec.physical_offset),
    };
    let message_type = if get("TRAN_MSG") == Some("true") {
        pb::MessageType::Transaction
    } else if get("__SHARDINGKEY").is_some() {
        pb::MessageType::Fifo
    } else if get("__LITE_TOPIC").is_some() {
        pb::MessageType::Lite
    } else if get("TIMER_DELIVER_MS").is_some() || get("DELAY").is_some_and(|v| v != "0") {
        pb::MessageType::Delay
    } else {
        pb::MessageType::Normal
    };
    let sp = pb::SystemProperties {
        tag: get("TAGS").filter(|t| !t.is_empty()).map(str::to_string),
        keys: get("KEYS")
            .map(|k| {
                k.split(' ')
                    .filter(|k| !k.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        message_id,
        body_digest: Some(pb::Digest {
            r#type: pb::DigestType::Crc32 as i32,
            checksum: format!("{:08X}", crc32fast::hash(&body)),
        }),
        body_encoding: pb::Encoding::Identity as i32,
        message_type: message_type as i32,
        born_timestamp: Some(timestamp(rec.born_timestamp)),
        born_host: match get("__BORNHOST").filter(|h| !h.is_empty()) {
            Some(h) => h.to_string(),
            None => rec.born_host.ip().to_string(),
        },
        store_timestamp: Some(timestamp(rec.store_timestamp)),
        store_host: rec.store_host.to_string(),
        delivery_timestamp: get("TIMER_DELIVER_MS")
            .and_then(|v| v.parse::<i64>().ok())
            .map(timestamp),
        receipt_handle: Some(handle.to_string()),
        queue_id: rec.queue_id,
        queue_offset: Some(rec.queue_offset),
        invisible_duration: Some(prost_types::Duration {
            seconds: handle.invisible_time.div_euclid(1000),
            nanos: (handle.invisible_time.rem_euclid(1000) * 1_000_000) as i32,
        }),
        delivery_attempt: Some(rec.reconsume_times + 1),
        message_group: get("__SHARDINGKEY").map(str::to_string),
        trace_context: get("TRACE_CONTEXT").map(str::to_string),
        orphaned_transaction_recovery_duration: get("CHECK_IMMUNITY_TIME_IN_SECONDS")
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|v| *v >= 0)
            .map(|v| prost_types::Duration {
                seconds: v,
                nanos: 0,
            }),
        dead_letter_queue: None,
        lite_topic: get("__LITE_TOPIC").map(str::to_string),
        ..Default::default()
    };
    let hidden = fast.hidden_names();
    let user = props
        .iter()
        .filter(|(k, _)| !hidden.contains(*k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    pb::Message {
        topic: Some(pb::Resource {
            name: r.topic.clone(),
            resource_namespace: r.namespace.clone(),
        }),
        user_properties: user,
        system_properties: Some(sp),
        body,
    }
}

/// A record's properties as the clients parse them: entries with a name and a value, the last of
/// a name winning.
fn properties(text: &str) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for entry in text.split('\u{2}') {
        if let Some((k, v)) = entry.split_once('\u{1}') {
            if k.is_empty() || v.is_empty() {
                continue;
            }
            if let Some(slot) = out.iter_mut().find(|(n, _)| *n == k) {
                slot.1 = v;
            } else {
                out.push((k, v));
            }
        }
    }
    out
}

/// Pop and answer: the stream's responses (a status, the messages, when they left), or one status.
pub async fn receive(
    r: Receive,
    brokers: &Brokers,
    fast: &FastSends,
) -> Vec<pb::ReceiveMessageResponse> {
    let what = format!("pop from {}", r.broker_name);
    let fields: Vec<(&str, &str)> = r.fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let timeout = Duration::from_millis((r.poll_ms + 3000) as u64);
    let reply = match brokers.get(&r.addr).await {
        Ok(b) => b.call(POP_MESSAGE, &fields, &[], timeout).await,
        Err(e) => Err(e.to_string()),
    };
    let mut reply = match reply {
        Ok(x) => x,
        Err(e) => {
            return status_answer(Code::ProxyTimeout, format!("{what} ({}): {e}", r.addr));
        }
    };
    let none = || status_answer(Code::MessageNotFound, "no new message".to_string());
    match reply.code {
        0 => {}
        PULL_NOT_FOUND | POLLING_TIMEOUT | POLLING_FULL | NO_MESSAGE => return none(),
        other => return status_answer(from_remoting(other), remark(&what, &reply)),
    }
    let pop_time: i64 = reply
        .field("popTime")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let invisible: i64 = reply
        .field("invisibleTime")
        .and_then(|v| v.parse().ok())
        .unwrap_or(r.invisible_ms);
    let revive_qid: i64 = reply
        .field("reviveQid")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let start = offset_info(reply.field("startOffsetInfo").unwrap_or(""));
    let body = std::mem::take(&mut reply.body);
    let mut messages = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let rec = match record::decode(&body[at..], false) {
            Ok(rec) => rec,
            Err(e) => {
                return status_answer(
                    Code::InternalServerError,
                    format!("{what}: a message of the answer does not decode: {e}"),
                )
            }
        };
        at += rec.total_size as usize;
        let props = properties(rec.properties);
        let given = props
            .iter()
            .find(|(k, _)| *k == "POP_CK")
            .and_then(|(_, v)| Handle::parse(v));
        let handle = match given {
            Some(mut h) => {
                h.commit_log_offset = rec.physical_offset;
                h
            }
            None => {
                let mark = retry_mark(rec.topic);
                let key = format!("{mark}@{}", rec.queue_id);
                let ck = start
                    .get(&key)
                    .and_then(|v| v.first().copied())
                    .unwrap_or(rec.queue_offset);
                Handle {
                    ck_queue_offset: ck,
                    pop_time,
                    invisible_time: invisible,
                    revive_qid,
                    retry: mark.to_string(),
                    broker_name: r.broker_name.clone(),
                    queue_id: rec.queue_id,
                    queue_offset: rec.queue_offset,
                    commit_log_offset: rec.physical_offset,
                }
            }
        };
        let message = to_v2(&rec, &props, &handle, &r, fast);
        if r.max_attempts > 0 && rec.reconsume_times >= r.max_attempts {
            let sp = message.system_properties.as_ref();
            fast.add_dead_letter(DeadLetter {
                group: r.group.clone(),
                topic: r.topic.clone(),
                receipt_handle: handle.to_string(),
                message_id: sp.map(|s| s.message_id.clone()).unwrap_or_default(),
            });
            continue;
        }
        messages.push(message);
    }
    if messages.is_empty() {
        return none();
    }
    use pb::receive_message_response::Content;
    let mut out = Vec::with_capacity(messages.len() + 2);
    out.push(pb::ReceiveMessageResponse {
        content: Some(Content::Status(status(Code::Ok, "OK"))),
    });
    out.extend(messages.into_iter().map(|m| pb::ReceiveMessageResponse {
        content: Some(Content::Message(m)),
    }));
    out.push(pb::ReceiveMessageResponse {
        content: Some(Content::DeliveryTimestamp(timestamp(now_ms()))),
    });
    out
}

fn remark(what: &str, reply: &Reply) -> String {
    let text = format!(
        "{what}: broker answered code {}: {}",
        reply.code,
        reply.remark.as_deref().unwrap_or("")
    );
    text.trim_end_matches([':', ' ']).to_string()
}

// --- AckMessage ----------------------------------------------------------------------------------

/// One ack the port serves.
#[derive(Debug, Clone)]
pub struct Ack {
    group: String,
    topic: String,
    handle: Handle,
    addr: String,
}

/// The acks of `raw` (an AckMessageRequest) the port serves, with the request, or `None`.
pub fn prepare_ack(raw: &[u8], fast: &FastSends) -> Option<(pb::AckMessageRequest, Vec<Ack>)> {
    let request = pb::AckMessageRequest::decode(raw).ok()?;
    let group = request.group.as_ref()?.name.clone();
    let topic = request.topic.as_ref()?.name.clone();
    if group.is_empty() || topic.is_empty() || request.entries.is_empty() {
        return None;
    }
    let mut acks = Vec::with_capacity(request.entries.len());
    for e in &request.entries {
        if e.lite_topic.is_some() {
            return None;
        }
        let handle = Handle::parse(&e.receipt_handle)?;
        real_topic(&topic, &group, &handle.retry)?;
        if handle.revive_qid == ORDER_REVIVE_QUEUE || handle.revive_qid < 0 {
            return None;
        }
        let addr = fast.master(&topic, &handle.broker_name)?;
        acks.push(Ack {
            group: group.clone(),
            topic: topic.clone(),
            handle,
            addr,
        });
    }
    Some((request, acks))
}

type AckResult = Result<(), (Code, String)>;

/// The acks waiting for one broker, sent together by its task.
pub struct AckBatcher {
    queue: mpsc::UnboundedSender<(Ack, oneshot::Sender<AckResult>)>,
}

/// Per broker address, the connection's ack batchers.
#[derive(Default)]
pub struct Batchers {
    by_addr: parking_lot::Mutex<HashMap<String, Arc<AckBatcher>>>,
}

impl Batchers {
    fn get(&self, addr: &str, brokers: &Arc<Brokers>) -> Arc<AckBatcher> {
        let mut all = self.by_addr.lock();
        if let Some(b) = all.get(addr) {
            if !b.queue.is_closed() {
                return b.clone();
            }
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<(Ack, oneshot::Sender<AckResult>)>();
        let (addr_owned, brokers) = (addr.to_string(), brokers.clone());
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while let Ok(more) = rx.try_recv() {
                    batch.push(more);
                }
                send_acks(&addr_owned, batch, &brokers).await;
            }
        });
        let b = Arc::new(AckBatcher { queue: tx });
        all.insert(addr.to_string(), b.clone());
        b
    }
}

fn ack_failure(what: &str, addr: &str, e: &str) -> (Code, String) {
    (Code::ProxyTimeout, format!("{what} ({addr}): {e}"))
}

/// BATCH_ACK_MESSAGE's body for `acks` (all of one broker name).
fn batch_body(broker_name: &str, acks: &[&Ack]) -> Vec<u8> {
    use base64::Engine as _;
    // One entry per checkpoint: group, topic, retry, queue, its start and pop.
    let mut entries: Vec<(&Ack, Vec<u8>)> = Vec::new();
    for a in acks {
        let h = &a.handle;
        let bit = (h.queue_offset - h.ck_queue_offset) as usize;
        let slot = entries.iter_mut().find(|(e, _)| {
            let g = &e.handle;
            e.group == a.group
                && e.topic == a.topic
                && g.retry == h.retry
                && g.ck_queue_offset == h.ck_queue_offset
                && g.queue_id == h.queue_id
                && g.revive_qid == h.revive_qid
                && g.pop_time == h.pop_time
                && g.invisible_time == h.invisible_time
        });
        let bits = match slot {
            Some((_, bits)) => bits,
            None => {
                entries.push((a, Vec::new()));
                &mut entries.last_mut().expect("just pushed").1
            }
        };
        if bits.len() <= bit / 8 {
            bits.resize(bit / 8 + 1, 0);
        }
        bits[bit / 8] |= 1 << (bit % 8);
    }
    let list: Vec<serde_json::Value> = entries
        .iter()
        .map(|(a, bits)| {
            let h = &a.handle;
            serde_json::json!({
                "b": base64::engine::general_purpose::STANDARD.encode(bits),
                "c": a.group,
                "it": h.invisible_time,
                "pt": h.pop_time,
                "q": h.queue_id,
                "r": h.retry,
                "rq": h.revive_qid,
                "so": h.ck_queue_offset,
                "t": a.topic,
            })
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({"acks": list, "brokerName": broker_name}))
        .expect("JSON of plain values")
}

/// One ACK_MESSAGE (the endpoint's `Brokers.ack`).
async fn ack_one(a: &Ack, brokers: &Brokers) -> AckResult {
    let what = format!("ack at {}", a.handle.broker_name);
    let h = &a.handle;
    let topic = real_topic(&a.topic, &a.group, &h.retry).unwrap_or_default();
    let (queue_id, extra, offset) = (
        h.queue_id.to_string(),
        h.to_string(),
        h.queue_offset.to_string(),
    );
    let fields = [
        ("consumerGroup", a.group.as_str()),
        ("topic", topic.as_str()),
        ("queueId", queue_id.as_str()),
        ("extraInfo", extra.as_str()),
        ("offset", offset.as_str()),
    ];
    let b = brokers
        .get(&a.addr)
        .await
        .map_err(|e| ack_failure(&what, &a.addr, &e.to_string()))?;
    let reply = b
        .call(ACK_MESSAGE, &fields, &[], Duration::from_millis(3000))
        .await
        .map_err(|e| ack_failure(&what, &a.addr, &e))?;
    if reply.code != 0 {
        return Err((from_remoting(reply.code), remark(&what, &reply)));
    }
    Ok(())
}

/// Send a batch of acks for the broker at `addr` and answer each.
async fn send_acks(addr: &str, batch: Vec<(Ack, oneshot::Sender<AckResult>)>, brokers: &Brokers) {
    let (batchable, single): (Vec<_>, Vec<_>) = batch.into_iter().partition(|(a, _)| {
        let span = a.handle.queue_offset - a.handle.ck_queue_offset;
        (0..MAX_BATCH_SPAN).contains(&span)
    });
    let mut by_name: HashMap<&str, Vec<&(Ack, oneshot::Sender<AckResult>)>> = HashMap::new();
    for item in &batchable {
        by_name
            .entry(item.0.handle.broker_name.as_str())
            .or_default()
            .push(item);
    }
    let mut done = vec![false; batchable.len()];
    if batchable.len() > 1 {
        if let Ok(b) = brokers.get(addr).await {
            for (name, items) in &by_name {
                let acks: Vec<&Ack> = items.iter().map(|(a, _)| a).collect();
                let body = batch_body(name, &acks);
                let ok = matches!(
                    b.call(BATCH_ACK_MESSAGE, &[], &body, Duration::from_millis(3000)).await,
                    Ok(r) if r.code == 0 && r.field("skipped").is_none_or(|s| s == "0")
                );
                if ok {
                    for it in items {
                        let i = batchable
                            .iter()
                            .position(|x| std::ptr::eq(x, *it))
                            .expect("an item of the batch");
                        done[i] = true;
                    }
                }
            }
        }
    }
    let mut answers = Vec::new();
    for (i, (a, tx)) in batchable.into_iter().enumerate() {
        if done[i] {
            let _ = tx.send(Ok(()));
        } else {
            answers.push((a, tx));
        }
    }
    answers.extend(single);
    for (a, tx) in answers {
        let _ = tx.send(ack_one(&a, brokers).await);
    }
}

/// Ack every entry of `request` (through the connection's batchers) and answer the call.
pub async fn ack(
    request: pb::AckMessageRequest,
    acks: Vec<Ack>,
    batchers: &Batchers,
    brokers: &Arc<Brokers>,
) -> pb::AckMessageResponse {
    let mut waits = Vec::with_capacity(acks.len());
    for a in acks {
        let (tx, rx) = oneshot::channel();
        let addr = a.addr.clone();
        if let Err(mpsc::error::SendError((a, tx))) =
            batchers.get(&addr, brokers).queue.send((a, tx))
        {
            let _ = tx.send(ack_one(&a, brokers).await);
        }
        waits.push(rx);
    }
    let mut entries = Vec::with_capacity(waits.len());
    for (e, rx) in request.entries.into_iter().zip(waits) {
        let st = match rx.await {
            Ok(Ok(())) => status(Code::Ok, "OK"),
            Ok(Err((code, message))) => status(code, message),
            Err(_) => status(Code::InternalServerError, "the ack was dropped".to_string()),
        };
        entries.push(pb::AckMessageResultEntry {
            message_id: e.message_id,
            receipt_handle: e.receipt_handle,
            status: Some(st),
        });
    }
    let top = overall(entries.iter().map(|e| e.status.as_ref()));
    pb::AckMessageResponse {
        status: Some(top),
        entries,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_read_and_written_as_the_endpoint_does() {
        let h = Handle::parse("10 1700000000000 30000 3 0 broker-a 2 12 4096").unwrap();
        assert_eq!(h.ck_queue_offset, 10);
        assert_eq!(h.commit_log_offset, 4096);
        assert_eq!(
            h.to_string(),
            "10 1700000000000 30000 3 0 broker-a 2 12 4096"
        );
        let short = Handle::parse("10 1 2 3 1 b 0 11").unwrap();
        assert_eq!(short.commit_log_offset, -1);
        assert_eq!(short.to_string(), "10 1 2 3 1 b 0 11");
        assert!(Handle::parse("1 2 3").is_none());
        assert!(Handle::parse("x 1 2 3 0 b 0 1").is_none());
        assert_eq!(real_topic("T", "G", "1").unwrap(), "%RETRY%G_T");
        assert_eq!(real_topic("T", "G", "2").unwrap(), "%RETRY%G+T");
        assert!(real_topic("T", "G", "7").is_none());
        assert_eq!(retry_mark("%RETRY%G+T"), "2");
        assert_eq!(retry_mark("%RETRY%G_T"), "1");
        assert_eq!(retry_mark("T"), "0");
    }

    #[test]
    fn grpc_timeouts_and_offset_infos() {
        assert_eq!(grpc_timeout_ms("30S"), Some(30_000));
        assert_eq!(grpc_timeout_ms("2500m"), Some(2500));
        assert_eq!(grpc_timeout_ms("7u"), Some(0));
        assert_eq!(grpc_timeout_ms("1M"), Some(60_000));
        assert_eq!(grpc_timeout_ms("x"), None);
        let info = offset_info("0 1 5;1 3 7,8");
        assert_eq!(info["0@1"], vec![5]);
        assert_eq!(info["1@3"], vec![7, 8]);
        let props = properties("A\u{1}1\u{2}B\u{1}\u{2}A\u{1}2\u{2}\u{1}x");
        assert_eq!(props, vec![("A", "2")]);
    }

    #[test]
    fn acks_of_one_checkpoint_share_an_entry() {
        let ack = |q: i64| Ack {
            group: "G".into(),
            topic: "T".into(),
            handle: Handle::parse(&format!("10 5 30000 1 0 b 3 {q}")).unwrap(),
            addr: "a".into(),
        };
        let (a, b, c) = (ack(10), ack(12), ack(19));
        let body = batch_body("b", &[&a, &b, &c]);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["brokerName"], "b");
        let acks = v["acks"].as_array().unwrap();
        assert_eq!(acks.len(), 1);
        // Bits 0, 2 and 9: bytes 0b101, 0b10 (BitSet.toByteArray order).
        assert_eq!(acks[0]["b"], "BQI=");
        assert_eq!(acks[0]["so"], 10);
        assert_eq!(acks[0]["q"], 3);
        assert_eq!(acks[0]["t"], "T");
    }
}
