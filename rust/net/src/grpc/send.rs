//! SendMessage served by the gRPC port itself: a request of plain messages (no transaction, delay,
//! message group or lite topic) to a topic whose queues the endpoint handed over becomes one
//! SEND_MESSAGE_V2 per message to the queue's broker, with the properties the Python endpoint
//! writes (python/rmq/proxy/messages.py `to_broker`) and its answers (`SendResultEntry` per
//! message, one status for all). Anything else, or anything the endpoint would refuse, is left to
//! the endpoint ([`prepare`] answers `None`), which says what is wrong.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message as _;

use super::pb::{self, Code, Encoding, MessageType};
use super::remoting::{Broker, Reply};
use super::routes::{FastSends, TopicQueues};

/// SEND_MESSAGE_V2.
const SEND_MESSAGE_V2: i32 = 310;
/// The largest body a 5.x client may send (the endpoint's `MAX_BODY_SIZE`).
pub const MAX_BODY_SIZE: usize = 4 * 1024 * 1024;
/// How long a broker has to answer a send (the endpoint's).
const SEND_TIMEOUT: Duration = Duration::from_millis(3000);
const COMPRESSED_FLAG: i32 = 0x1;
const TOPIC_NOT_EXIST: i32 = 17;

/// One message ready for its broker.
pub struct Outgoing {
    message_id: String,
    sys_flag: i32,
    properties: String,
    body: Vec<u8>,
}

/// A request the port serves: its topic's queues and its messages.
pub struct Prepared {
    topic: String,
    queues: Arc<TopicQueues>,
    messages: Vec<Outgoing>,
}

fn control(s: &str) -> bool {
    s.chars().any(|c| (c as u32) < 0x20 || c as u32 == 0x7F)
}

fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

fn millis(ts: &prost_types::Timestamp) -> i64 {
    ts.seconds * 1000 + i64::from(ts.nanos).div_euclid(1_000_000)
}

fn push(props: &mut String, key: &str, value: &str) {
    if !props.is_empty() {
        props.push('\u{2}');
    }
    props.push_str(key);
    props.push('\u{1}');
    props.push_str(value);
}

/// The message's send, or `None` when the endpoint is to handle it.
fn outgoing(msg: pb::Message, topic: &str, peer: &str, fast: &FastSends) -> Option<Outgoing> {
    let sp = msg.system_properties?;
    if msg.body.len() > MAX_BODY_SIZE
        || sp.message_type == MessageType::Transaction as i32
        || sp.delivery_timestamp.is_some()
        || sp.message_group.is_some()
        || sp.lite_topic.is_some()
        || blank(&sp.message_id)
    {
        return None;
    }
    let mut props = String::with_capacity(160);
    for (k, v) in &msg.user_properties {
        if fast.is_system_name(k) || control(k) || control(v) {
            return None;
        }
        push(&mut props, k, v);
    }
    if let Some(tag) = &sp.tag {
        if blank(tag) || tag.contains('|') || control(tag) {
            return None;
        }
        push(&mut props, "TAGS", tag);
    }
    if !sp.keys.is_empty() {
        if sp.keys.iter().any(|k| blank(k) || control(k)) {
            return None;
        }
        push(&mut props, "KEYS", &sp.keys.join(" "));
    }
    push(&mut props, "UNIQ_KEY", &sp.message_id);
    push(
        &mut props,
        "RECONSUME_TIME",
        itoa::Buffer::new().format(sp.delivery_attempt.unwrap_or(0)),
    );
    push(&mut props, "PGROUP", topic);
    if let Some(trace) = sp.trace_context.as_deref().filter(|t| !t.is_empty()) {
        push(&mut props, "TRACE_CONTEXT", trace);
    }
    let born_host = if sp.born_host.is_empty() {
        peer
    } else {
        &sp.born_host
    };
    if !born_host.is_empty() {
        push(&mut props, "__BORNHOST", born_host);
    }
    if let Some(ts) = &sp.born_timestamp {
        push(
            &mut props,
            "BORN_TIMESTAMP",
            itoa::Buffer::new().format(millis(ts)),
        );
    }
    let mut sys_flag = 0;
    if sp.body_encoding == Encoding::Gzip as i32 {
        sys_flag |= COMPRESSED_FLAG;
    }
    Some(Outgoing {
        message_id: sp.message_id,
        sys_flag,
        properties: props,
        body: msg.body,
    })
}

/// The request `raw` (a SendMessageRequest) as the port serves it, or `None`: the endpoint's.
pub fn prepare(raw: &[u8], peer: &str, fast: &FastSends) -> Option<Prepared> {
    let request = pb::SendMessageRequest::decode(raw).ok()?;
    let first = request.messages.first()?.topic.as_ref()?;
    if !first.resource_namespace.is_empty() {
        return None;
    }
    let topic = first.name.clone();
    let queues = fast.queues(&topic)?;
    let mut messages = Vec::with_capacity(request.messages.len());
    for msg in request.messages {
        let t = msg.topic.as_ref()?;
        if t.name != topic || !t.resource_namespace.is_empty() {
            return None;
        }
        messages.push(outgoing(msg, &topic, peer, fast)?);
    }
    Some(Prepared {
        topic,
        queues,
        messages,
    })
}

pub(crate) fn status(code: Code, message: impl Into<String>) -> pb::Status {
    pb::Status {
        code: code as i32,
        message: message.into(),
    }
}

/// The 5.x code of a broker's non-success answer (the endpoint's `from_remoting`).
pub(crate) fn from_remoting(code: i32) -> Code {
    match code {
        17 => Code::TopicNotFound,
        26 => Code::ConsumerGroupNotFound,
        16 => Code::Forbidden,
        13 | 25 => Code::BadRequest,
        2 => Code::TooManyRequests,
        24 => Code::NotFound,
        23 => Code::IllegalFilterExpression,
        3 => Code::NotImplemented,
        _ => Code::InternalServerError,
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Where the port's sends go: one connection per broker address, made when first needed.
#[derive(Default)]
pub struct Brokers {
    conns: tokio::sync::Mutex<std::collections::HashMap<String, Arc<Broker>>>,
}

impl Brokers {
    pub(crate) async fn get(&self, addr: &str) -> std::io::Result<Arc<Broker>> {
        let mut conns = self.conns.lock().await;
        if let Some(b) = conns.get(addr) {
            if !b.is_dead() {
                return Ok(b.clone());
            }
        }
        let b = Broker::connect(addr).await?;
        conns.insert(addr.to_string(), b.clone());
        Ok(b)
    }
}

async fn send_one(
    m: &Outgoing,
    p: &Prepared,
    brokers: &Brokers,
    fast: &FastSends,
) -> pb::SendResultEntry {
    let q = p.queues.next();
    let failed = |code: Code, message: String| pb::SendResultEntry {
        status: Some(status(code, message)),
        ..Default::default()
    };
    let reply: Result<Reply, String> = match brokers.get(&q.addr).await {
        Ok(b) => {
            let (queue_id, sys_flag, born) = (
                q.queue_id.to_string(),
                m.sys_flag.to_string(),
                now_ms().to_string(),
            );
            let fields = [
                ("a", p.topic.as_str()),
                ("b", p.topic.as_str()),
                ("c", "TBW102"),
                ("d", "4"),
                ("e", queue_id.as_str()),
                ("f", sys_flag.as_str()),
                ("g", born.as_str()),
                ("h", "0"),
                ("i", m.properties.as_str()),
                ("j", "0"),
                ("k", "false"),
                ("m", "false"),
                ("n", q.broker_name.as_str()),
            ];
            b.call(SEND_MESSAGE_V2, &fields, &m.body, SEND_TIMEOUT)
                .await
        }
        Err(e) => Err(e.to_string()),
    };
    let reply = match reply {
        Ok(r) => r,
        Err(e) => {
            fast.forget(&p.topic);
            return failed(
                Code::ProxyTimeout,
                format!("send to {} ({}): {e}", q.broker_name, q.addr),
            );
        }
    };
    let code = match reply.code {
        0 => Code::Ok,
        10 => Code::MasterPersistenceTimeout,
        12 => Code::SlavePersistenceTimeout,
        11 => Code::HaNotAvailable,
        other => {
            if other == TOPIC_NOT_EXIST {
                fast.forget(&p.topic);
            }
            let text = format!(
                "send to {}: broker answered code {other}: {}",
                q.broker_name,
                reply.remark.as_deref().unwrap_or("")
            );
            return failed(
                from_remoting(other),
                text.trim_end_matches([':', ' ']).to_string(),
            );
        }
    };
    pb::SendResultEntry {
        status: Some(status(code, code.as_str_name())),
        message_id: m.message_id.clone(),
        transaction_id: String::new(),
        offset: reply
            .field("queueOffset")
            .and_then(|o| o.parse().ok())
            .unwrap_or(-1),
        recall_handle: String::new(),
    }
}

/// Send the prepared messages one after the other, as the endpoint does, and answer.
pub async fn run(p: Prepared, brokers: &Brokers, fast: &FastSends) -> pb::SendMessageResponse {
    let mut entries = Vec::with_capacity(p.messages.len());
    for m in &p.messages {
        entries.push(send_one(m, &p, brokers, fast).await);
    }
    let top = overall(entries.iter().map(|e| e.status.as_ref()));
    pb::SendMessageResponse {
        status: Some(top),
        entries,
    }
}

/// The status of a call answering several entries (the endpoint's): OK when every entry is, the
/// entries' own when they share one, else MULTIPLE_RESULTS.
pub(crate) fn overall<'a>(
    mut statuses: impl Iterator<Item = Option<&'a pb::Status>>,
) -> pb::Status {
    let first = statuses.next().flatten().cloned().unwrap_or_default();
    if !statuses.all(|s| s.map(|s| s.code) == Some(first.code)) {
        status(Code::MultipleResults, "MULTIPLE_RESULTS")
    } else if first.code == Code::Ok as i32 {
        status(Code::Ok, "OK")
    } else {
        first
    }
}

/// The lower-case name of an answer's status code, as the endpoint's metrics label it (no
/// status: `ok`).
pub fn code_label(status: Option<&pb::Status>) -> String {
    let Some(code) = status.map(|s| s.code) else {
        return "ok".to_string();
    };
    Code::try_from(code)
        .map(|c| c.as_str_name().to_ascii_lowercase())
        .unwrap_or_else(|_| code.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::routes::WriteQueue;

    fn message(topic: &str, id: &str) -> pb::Message {
        pb::Message {
            topic: Some(pb::Resource {
                name: topic.into(),
                resource_namespace: String::new(),
            }),
            user_properties: [("color".to_string(), "red".to_string())].into(),
            system_properties: Some(pb::SystemProperties {
                tag: Some("TagA".into()),
                keys: vec!["k1".into(), "k2".into()],
                message_id: id.into(),
                born_timestamp: Some(prost_types::Timestamp {
                    seconds: 1_700_000_000,
                    nanos: 123_456_789,
                }),
                ..Default::default()
            }),
            body: b"hello".to_vec(),
        }
    }

    fn fast() -> FastSends {
        let f = FastSends::default();
        f.enable(true, ["TAGS".to_string(), "UNIQ_KEY".to_string()]);
        f.set_topic(
            "T",
            vec![WriteQueue {
                broker_name: "b".into(),
                queue_id: 0,
                addr: "127.0.0.1:1".into(),
            }],
        );
        f
    }

    fn raw(messages: Vec<pb::Message>) -> Vec<u8> {
        pb::SendMessageRequest { messages }.encode_to_vec()
    }

    #[test]
    fn one_status_for_several_entries() {
        let ok = status(Code::Ok, "OK");
        let gone = status(Code::TopicNotFound, "gone");
        let top = |v: &[&pb::Status]| overall(v.iter().map(|s| Some(*s))).code;
        assert_eq!(top(&[&ok, &ok]), Code::Ok as i32);
        assert_eq!(top(&[&gone, &gone]), Code::TopicNotFound as i32);
        assert_eq!(top(&[&ok, &gone]), Code::MultipleResults as i32);
        assert_eq!(overall([Some(&gone)].into_iter()).message, "gone");
    }

    #[test]
    fn plain_messages_get_the_endpoints_properties() {
        let f = fast();
        let p = prepare(&raw(vec![message("T", "ID1")]), "10.0.0.1:5", &f).unwrap();
        assert_eq!(p.messages.len(), 1);
        let m = &p.messages[0];
        assert_eq!(m.message_id, "ID1");
        assert_eq!(m.body, b"hello");
        assert_eq!(m.sys_flag, 0);
        assert_eq!(
            m.properties,
            "color\u{1}red\u{2}TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2\u{2}UNIQ_KEY\u{1}ID1\u{2}\
             RECONSUME_TIME\u{1}0\u{2}PGROUP\u{1}T\u{2}__BORNHOST\u{1}10.0.0.1:5\u{2}\
             BORN_TIMESTAMP\u{1}1700000000123"
        );
    }

    #[test]
    fn what_the_endpoint_handles_is_left_to_it() {
        let f = fast();
        let unknown = raw(vec![message("U", "ID1")]);
        assert!(prepare(&unknown, "", &f).is_none(), "no queues handed over");
        let mixed = raw(vec![message("T", "ID1"), message("U", "ID2")]);
        assert!(prepare(&mixed, "", &f).is_none(), "two topics");
        let edits: Vec<fn(&mut pb::Message)> = vec![
            |m| {
                m.system_properties.as_mut().unwrap().message_type = MessageType::Transaction as i32
            },
            |m| m.system_properties.as_mut().unwrap().message_group = Some("g".into()),
            |m| m.system_properties.as_mut().unwrap().lite_topic = Some("l".into()),
            |m| {
                m.system_properties.as_mut().unwrap().delivery_timestamp =
                    Some(prost_types::Timestamp::default())
            },
            |m| m.system_properties.as_mut().unwrap().tag = Some("a|b".into()),
            |m| m.system_properties.as_mut().unwrap().tag = Some(" ".into()),
            |m| m.system_properties.as_mut().unwrap().keys = vec!["a\u{7}".into()],
            |m| m.system_properties.as_mut().unwrap().message_id = String::new(),
            |m| {
                m.user_properties.insert("UNIQ_KEY".into(), "x".into());
            },
            |m| {
                m.user_properties.insert("k".into(), "v\n".into());
            },
            |m| m.body = vec![0; MAX_BODY_SIZE + 1],
            |m| m.topic.as_mut().unwrap().resource_namespace = "ns".into(),
        ];
        for (i, edit) in edits.into_iter().enumerate() {
            let mut m = message("T", "ID1");
            edit(&mut m);
            assert!(prepare(&raw(vec![m]), "", &f).is_none(), "edit {i}");
        }
        assert!(prepare(b"\xff\xff", "", &f).is_none(), "not a request");
        f.enable(true, Vec::<String>::new());
        let mut gz = message("T", "ID1");
        gz.system_properties.as_mut().unwrap().body_encoding = Encoding::Gzip as i32;
        assert_eq!(
            prepare(&raw(vec![gz]), "", &f).unwrap().messages[0].sys_flag,
            1
        );
    }
}
