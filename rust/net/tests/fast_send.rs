//! The SEND fast path on its own: what it takes, what it answers, what it leaves to Python.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{fast, frame as send_frame, store};
use rmq_net::replica::Release;
use rmq_net::send::{Sent, FLUSH_DISK_TIMEOUT, SEND_BATCH_MESSAGE, SEND_MESSAGE, SEND_MESSAGE_V2};
use rmq_net::FastSend;
use rmq_store::message::{decode, decode_offset_msg_id, encode_batch_body};

fn host() -> SocketAddr {
    "127.0.0.1:40000".parse().unwrap()
}

/// The fast path's verdict on `frame`, with the answer it appended (if any).
fn handle(fs: &FastSend, frame: &[u8], random: &mut dyn FnMut() -> u32) -> Option<(Sent, Vec<u8>)> {
    let mut out = b"kept".to_vec();
    let sent = fs.handle(frame, host(), random, &mut out)?;
    // What it stored is written before it is answered, as the network thread does.
    assert!(fs.write_deferred());
    assert_eq!(&out[..4], b"kept", "appends, never overwrites");
    Some((sent, out.split_off(4)))
}

fn reply_header(handled: Option<(Sent, Vec<u8>)>) -> serde_json::Value {
    let (sent, bytes) = handled.expect("taken");
    assert_eq!(sent, Sent::Replied, "expected a reply");
    serde_json::from_slice(&bytes[8..]).unwrap()
}

#[test]
fn stores_a_v2_send_and_answers_like_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), false);
    let fs = fast(s.clone(), true);
    let ext = r#"{"a":"pg","b":"T","c":"TBW102","d":"4","e":"2","f":"0","g":"1700000000000","h":"0","i":"KEYS\u0001k1\u0002TAGS\u0001tg\u0002WAIT\u0001true\u0002","j":"0","k":"false","m":"false"}"#;
    let frame = send_frame(SEND_MESSAGE_V2, 0, 42, ext, b"hello");
    let mut rnd = || 0u32;
    assert_eq!(handle(&fs, &frame, &mut rnd), None, "topic not vetted yet");
    fs.allow_topic("T", 4, 4, false);
    let v = reply_header(handle(&fs, &frame, &mut rnd));
    assert_eq!(v["code"], 0);
    assert_eq!(v["opaque"], 42);
    assert_eq!(v["flag"], 1);
    assert_eq!(v["extFields"]["queueId"], "2");
    assert_eq!(v["extFields"]["queueOffset"], "0");
    assert_eq!(v["extFields"]["MSG_REGION"], "DefaultRegion");
    assert_eq!(v["extFields"]["TRACE_ON"], "true");
    let id = v["extFields"]["msgId"].as_str().unwrap();
    assert_eq!(id.len(), 32);
    let (_, phys) = rmq_store::message::decode_offset_msg_id(id).unwrap();
    // The stored record: WAIT removed, CLUSTER appended.
    let record = s.lookup(phys).unwrap();
    let text = String::from_utf8_lossy(&record);
    assert!(text.contains("KEYS\u{1}k1\u{2}TAGS\u{1}tg\u{2}CLUSTER\u{1}DefaultCluster"));
    assert!(!text.contains("WAIT"));
    assert_eq!(fs.puts(), 1);
    s.shutdown().unwrap();
}

#[test]
fn declines_what_python_must_answer() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), false);
    let fs = fast(s.clone(), true);
    fs.allow_topic("T", 4, 4, false);
    let mut rnd = || 0u32;
    let declined = |ext: &str, body: &[u8], code: i32| {
        let frame = send_frame(code, 0, 1, ext, body);
        handle(&fs, &frame, &mut || 0u32).is_none()
    };
    assert!(declined(
        r#"{"b":"T","e":"0","m":"true"}"#,
        b"x",
        SEND_MESSAGE_V2
    ));
    assert!(declined(
        r#"{"b":"T","e":"0","m":"1"}"#,
        b"x",
        SEND_MESSAGE_V2
    ));
    assert!(declined(r#"{"b":"T","e":"0"}"#, b"", SEND_MESSAGE_V2));
    assert!(declined(r#"{"b":"T","e":"4"}"#, b"x", SEND_MESSAGE_V2));
    assert!(declined(r#"{"b":"U","e":"0"}"#, b"x", SEND_MESSAGE_V2));
    assert!(declined(r#"{"b":"T"}"#, b"x", SEND_MESSAGE_V2));
    assert!(declined(r#"{"b":"T","e":"x"}"#, b"x", SEND_MESSAGE_V2));
    assert!(declined(r#"{"b":"T","e":0.0}"#, b"x", SEND_MESSAGE_V2));
    assert!(declined(
        r#"{"b":"T","e":"0","i":"DELAY\u00013"}"#,
        b"x",
        SEND_MESSAGE_V2
    ));
    assert!(declined(
        r#"{"b":"T","e":"0","i":"TRAN_MSG\u0001true"}"#,
        b"x",
        SEND_MESSAGE_V2
    ));
    assert!(declined(
        r#"{"b":"T","e":"0","i":"TIMER_DELAY_SEC\u00013"}"#,
        b"x",
        SEND_MESSAGE_V2
    ));
    // V1 names are not V2 letters
    assert!(declined(
        r#"{"topic":"T","queueId":"0"}"#,
        b"x",
        SEND_MESSAGE_V2
    ));
    assert!(declined(r#"{"b":"T","e":"0"}"#, b"x", SEND_MESSAGE));
    assert!(declined(r#"{"b":"T","e":"0"}"#, b"x", 11));
    // a batch whose own properties ask for a delay, or whose body is not a batch
    let one = encode_batch_body(&[(0, b"x", b"")]);
    assert!(declined(
        r#"{"b":"T","e":"0","i":"DELAY\u00013"}"#,
        &one,
        SEND_BATCH_MESSAGE
    ));
    assert!(declined(
        r#"{"b":"T","e":"0"}"#,
        b"not a batch",
        SEND_BATCH_MESSAGE
    ));
    assert!(declined(
        r#"{"topic":"T","queueId":0,"batch":"1","sysFlag":1}"#,
        &one,
        SEND_MESSAGE
    ));
    // a ROCKETMQ binary header: the Python path's (counted); not a send: not counted
    let binary = |code: i16| {
        let mut h = code.to_be_bytes().to_vec();
        h.extend_from_slice(&[
            0, 0x01, 0x99, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ]);
        let mut f = ((4 + h.len() + 1) as i32).to_be_bytes().to_vec();
        f.extend_from_slice(&(h.len() as u32 | 1 << 24).to_be_bytes());
        f.extend_from_slice(&h);
        f.push(b'x');
        handle(&fs, &f, &mut || 0u32).is_none()
    };
    assert!(binary(SEND_MESSAGE_V2 as i16));
    assert!(binary(11));
    let big = vec![0u8; (1 << 20) + 1];
    assert!(declined(r#"{"b":"T","e":"0"}"#, &big, SEND_MESSAGE_V2));
    // a V1 send is taken
    let frame = send_frame(SEND_MESSAGE, 0, 3, r#"{"topic":"T","queueId":"1"}"#, b"x");
    let v = reply_header(handle(&fs, &frame, &mut rnd));
    assert_eq!(v["extFields"]["queueId"], "1");
    // oneway: stored, no answer
    let frame = send_frame(SEND_MESSAGE_V2, 2, 4, r#"{"b":"T","e":"1"}"#, b"x");
    assert_eq!(
        handle(&fs, &frame, &mut rnd),
        Some((Sent::NoReply, Vec::new()))
    );
    assert!(s.wait_dispatched(s.commitlog_max_offset(), Duration::from_secs(5)));
    assert_eq!(s.max_offset_in_queue("T", 1), 2);
    // any queue
    let frame = send_frame(SEND_MESSAGE_V2, 0, 5, r#"{"b":"T","e":"-1"}"#, b"x");
    let mut three = || 7u32;
    let v = reply_header(handle(&fs, &frame, &mut three));
    assert_eq!(v["extFields"]["queueId"], "3");
    // forgetting another topic leaves T vetted; forgetting T, or all, declines it
    fs.allow_topic("U", 1, 1, false);
    fs.forget_topic("U");
    let frame = send_frame(SEND_MESSAGE_V2, 0, 6, r#"{"b":"T","e":"1"}"#, b"x");
    assert!(handle(&fs, &frame, &mut rnd).is_some());
    let u = send_frame(SEND_MESSAGE_V2, 0, 7, r#"{"b":"U","e":"0"}"#, b"x");
    assert!(handle(&fs, &u, &mut rnd).is_none());
    fs.forget_topic("T");
    assert!(handle(&fs, &frame, &mut rnd).is_none());
    fs.allow_topic("T", 4, 4, false);
    fs.forget_topics();
    assert!(handle(&fs, &frame, &mut rnd).is_none());
    let st = fs.stats();
    assert_eq!((st.taken, st.messages), (4, 4));
    let declined: std::collections::HashMap<_, _> = st.declined.iter().copied().collect();
    assert_eq!(declined["header"], 5 + 1);
    assert_eq!(declined["topic"], 3 + 1);
    assert_eq!(declined["queue_id"], 1);
    assert_eq!(declined["body"], 2);
    assert_eq!(declined["special"], 4);
    assert_eq!(declined["batch"], 4);
    assert_eq!(
        st.declined_total(),
        21,
        "code 11 is not a send: not counted"
    );
    s.shutdown().unwrap();
}

#[test]
fn sync_flush_holds_until_durable() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), true);
    let fs = fast(s.clone(), true);
    fs.allow_topic("T", 1, 1, true);
    let frame = send_frame(SEND_MESSAGE_V2, 0, 9, r#"{"b":"T","e":"0"}"#, b"durable");
    // Handled as the network thread handles it, without the write `handle` adds.
    let sent = fs
        .handle(&frame, host(), &mut || 0u32, &mut Vec::new())
        .unwrap();
    let held = match sent {
        Sent::Hold(h) => h,
        Sent::Replied => {
            // the flush thread may already have caught up; nothing else to check
            s.shutdown().unwrap();
            return;
        }
        Sent::NoReply => panic!("not oneway"),
        Sent::Pull(_) => panic!("not a pull"),
    };
    // Stored but kept back until the network thread writes the round's sends at its end.
    assert!(s.commitlog_max_offset() < held.end);
    fs.write_deferred();
    assert_eq!(s.commitlog_max_offset(), held.end);
    s.wait_flushed(held.end, Duration::from_secs(5)).unwrap();
    let held_reply = |timed_out: Release| {
        let mut out = Vec::new();
        fs.held_reply(&held, timed_out, &mut out);
        serde_json::from_slice::<serde_json::Value>(&out[8..]).unwrap()
    };
    let ok = held_reply(Release::Done);
    assert_eq!(ok["code"], 0);
    let late = held_reply(Release::FlushTimeout);
    assert_eq!(late["code"], FLUSH_DISK_TIMEOUT);
    assert_eq!(late["remark"], "flush to disk timed out");
    assert_eq!(late["extFields"]["queueId"], "0");
    // WAIT=false answers at once
    let frame = send_frame(
        SEND_MESSAGE_V2,
        0,
        10,
        r#"{"b":"T","e":"0","i":"WAIT\u0001false"}"#,
        b"x",
    );
    assert!(matches!(
        handle(&fs, &frame, &mut || 0u32),
        Some((Sent::Replied, _))
    ));
    s.shutdown().unwrap();
}

/// The stored record at the commitlog offset of `msg_id`.
fn record(s: &rmq_store::MessageStore, msg_id: &str) -> Vec<u8> {
    let (_, phys) = decode_offset_msg_id(msg_id).unwrap();
    s.lookup(phys).unwrap()
}

#[test]
fn takes_the_cpp_clients_send_message_with_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), false);
    let fs = fast(s.clone(), false);
    fs.allow_topic("CapT", 4, 4, false);
    // As the C++ client 0.4.4 sends it: code 10, queueId / sysFlag / flag as JSON numbers,
    // properties ending in a separator.
    let ext = r#"{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"1ZXdrf+tGT7w+fGZKzhHhUiZE1g=","batch":"0","bornTimestamp":"1795548431611","defaultTopic":"TBW102","defaultTopicQueueNums":4,"flag":0,"producerGroup":"g1","properties":"KEYS\u0001k0\u0002UNIQ_KEY\u00010100007F00001FFA00007A27FC7F0100\u0002WAIT\u0001true\u0002seq\u00010\u0002","queueId":3,"reconsumeTimes":"0","sysFlag":0,"topic":"CapT","unitMode":"0"}"#;
    let frame = send_frame(SEND_MESSAGE, 0, 2, ext, b"CapT#0");
    let v = reply_header(handle(&fs, &frame, &mut || 0u32));
    assert_eq!(v["code"], 0);
    assert_eq!(v["opaque"], 2);
    assert_eq!(v["extFields"]["queueId"], "3");
    assert_eq!(v["extFields"]["queueOffset"], "0");
    assert_eq!(v["extFields"]["TRACE_ON"], "false");
    let rec = record(&s, v["extFields"]["msgId"].as_str().unwrap());
    let r = decode(&rec, true).unwrap();
    assert_eq!((r.topic, r.queue_id, r.flag, r.sys_flag), ("CapT", 3, 0, 0));
    assert_eq!(r.born_timestamp, 1795548431611);
    assert_eq!(r.body, b"CapT#0");
    assert_eq!(
        r.properties,
        "KEYS\u{1}k0\u{2}UNIQ_KEY\u{1}0100007F00001FFA00007A27FC7F0100\u{2}seq\u{1}0\u{2}CLUSTER\u{1}DefaultCluster"
    );
    assert_eq!(fs.stats().taken, 1);
    s.shutdown().unwrap();
}

#[test]
fn takes_batches_as_the_java_and_cpp_clients_send_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), false);
    let fs = fast(s.clone(), true);
    fs.allow_topic("B", 4, 4, true);
    let props: Vec<String> = (0..3)
        .map(|i| format!("KEYS\u{1}k{i}\u{2}UNIQ_KEY\u{1}FD{i:030}\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagA\u{2}seq\u{1}{i}"))
        .collect();
    let bodies: Vec<Vec<u8>> = (0..3).map(|i| format!("B#{i}").into_bytes()).collect();
    let items: Vec<(i32, &[u8], &[u8])> = (0..3)
        .map(|i| (i as i32, &bodies[i][..], props[i].as_bytes()))
        .collect();
    let body = encode_batch_body(&items);
    // The Java client 4.9.8's SEND_BATCH_MESSAGE.
    let java = r#"{"a":"jg_P","b":"B","c":"TBW102","d":"4","e":"3","f":"0","g":"1795548450134","h":"0","i":"WAIT\u0001true","j":"0","k":"false","m":"true","n":"broker-a"}"#;
    let frame = send_frame(SEND_BATCH_MESSAGE, 0, 4, java, &body);
    let v = reply_header(handle(&fs, &frame, &mut || 0u32));
    assert_eq!(v["extFields"]["queueId"], "3");
    assert_eq!(v["extFields"]["queueOffset"], "0");
    let ids: Vec<&str> = v["extFields"]["msgId"]
        .as_str()
        .unwrap()
        .split(',')
        .collect();
    assert_eq!(ids.len(), 3);
    for (i, id) in ids.iter().enumerate() {
        let rec = record(&s, id);
        let r = decode(&rec, true).unwrap();
        assert_eq!((r.topic, r.queue_id, r.queue_offset), ("B", 3, i as i64));
        assert_eq!(
            (r.flag, r.sys_flag),
            (i as i32, 2),
            "each message's flag; MULTI_TAG"
        );
        assert_eq!(r.body, &bodies[i][..]);
        // The message's own properties, then the request's (WAIT kept) and CLUSTER.
        assert_eq!(
            r.properties,
            format!(
                "{}\u{2}WAIT\u{1}true\u{2}CLUSTER\u{1}DefaultCluster",
                props[i]
            )
        );
    }
    // The C++ client 0.4.4's batch: SEND_MESSAGE with batch "1", its body zlib-compressed
    // (sysflag 1) once 4 KiB or more; stored inflated, the compression bits cleared.
    let big: Vec<Vec<u8>> = (0..8).map(|i| vec![b'a' + i as u8; 1024]).collect();
    let items: Vec<(i32, &[u8], &[u8])> = big
        .iter()
        .map(|b| (0, &b[..], &b"seq\x010\x02"[..]))
        .collect();
    let plain = encode_batch_body(&items);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut z, &plain).unwrap();
    let z = z.finish().unwrap();
    let cpp = r#"{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"x","batch":"1","bornTimestamp":"1795548438823","defaultTopic":"TBW102","defaultTopicQueueNums":4,"flag":0,"producerGroup":"g1","properties":"WAIT\u0001true\u0002","queueId":0,"reconsumeTimes":"0","sysFlag":1,"topic":"B","unitMode":"0"}"#;
    let frame = send_frame(SEND_MESSAGE, 0, 5, cpp, &z);
    let v = reply_header(handle(&fs, &frame, &mut || 0u32));
    let ids: Vec<&str> = v["extFields"]["msgId"]
        .as_str()
        .unwrap()
        .split(',')
        .collect();
    assert_eq!(ids.len(), 8);
    for (i, id) in ids.iter().enumerate() {
        let rec = record(&s, id);
        let r = decode(&rec, true).unwrap();
        assert_eq!((r.queue_id, r.queue_offset, r.sys_flag), (0, i as i64, 2));
        assert_eq!(r.body, &big[i][..]);
        assert_eq!(
            r.properties,
            "seq\u{1}0\u{2}WAIT\u{1}true\u{2}CLUSTER\u{1}DefaultCluster"
        );
    }
    let st = fs.stats();
    assert_eq!((st.taken, st.messages, st.declined_total()), (2, 11, 0));
    assert_eq!(fs.puts(), 11);
    s.shutdown().unwrap();
}

#[test]
fn counts_per_topic_and_times_its_answers() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), false);
    let fs = fast(s.clone(), true);
    let mut rnd = || 0u32;
    let send = |topic: &str, body: &[u8], rnd: &mut dyn FnMut() -> u32| {
        let ext = format!(r#"{{"b":"{topic}","e":"0"}}"#);
        handle(&fs, &send_frame(SEND_MESSAGE_V2, 0, 1, &ext, body), rnd)
    };
    assert!(
        send("T", b"x", &mut rnd).is_none(),
        "not vetted: not counted"
    );
    assert!(fs.metrics().topics.is_empty());
    fs.allow_topic("T", 1, 1, false);
    fs.allow_topic("U", 1, 1, false);
    for _ in 0..3 {
        assert!(send("T", &[b'a'; 100], &mut rnd).is_some());
    }
    assert!(send("U", &vec![b'b'; 3000], &mut rnd).is_some());
    // A batch of two: counted per message.
    let items: [(i32, &[u8], &[u8]); 2] = [(0, b"one", b""), (0, b"two", b"")];
    let batch = send_frame(
        SEND_BATCH_MESSAGE,
        0,
        2,
        r#"{"b":"T","e":"0","m":"true"}"#,
        &encode_batch_body(&items),
    );
    assert!(handle(&fs, &batch, &mut rnd).is_some());
    // Forgetting a topic keeps its counts; vetting it again goes on counting.
    fs.forget_topic("T");
    fs.allow_topic("T", 1, 1, false);
    assert!(send("T", &[b'a'; 100], &mut rnd).is_some());

    let mut m = fs.metrics();
    m.topics.sort_by(|a, b| a.topic.cmp(&b.topic));
    let (t, u) = (&m.topics[0], &m.topics[1]);
    assert_eq!((t.topic.as_str(), t.messages), ("T", 6));
    assert_eq!(
        t.sizes,
        [6, 0, 0, 0, 0, 0, 0],
        "small records: all <= 1 KiB"
    );
    assert_eq!((u.topic.as_str(), u.messages), ("U", 1));
    assert_eq!(u.sizes, [0, 1, 0, 0, 0, 0, 0], "a 3000 byte body: <= 4 KiB");
    let stored = s.commitlog_max_offset() as u64;
    assert_eq!(
        t.bytes + u.bytes,
        stored,
        "the records' sizes add up to the CommitLog"
    );
    assert!(u.bytes > 3000);
    let answers = |code| -> u64 {
        m.latency
            .iter()
            .filter(|l| l.code == code && l.response == 0)
            .map(|l| l.buckets.iter().sum::<u64>())
            .sum()
    };
    assert_eq!(answers(SEND_MESSAGE_V2), 5);
    assert_eq!(answers(SEND_BATCH_MESSAGE), 1);
    s.shutdown().unwrap();
}

#[test]
fn fast_failure_refuses_what_waited_too_long_and_only_when_on() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), false);
    let off = fast(s.clone(), true);
    assert!(!off.fast_failure());
    assert!(
        !off.too_busy(u64::MAX),
        "brokerFastFailureEnable=false: never busy"
    );
    let on = fast(s.clone(), true).with_fast_failure(200, 1000);
    assert!(on.fast_failure());
    assert!(!on.too_busy(0), "just read, put lock free");
    assert!(!on.too_busy(199_999_999));
    assert!(on.too_busy(200_000_000), "read 200 ms ago");
    let at_once = fast(s, true).with_fast_failure(0, 1000);
    assert!(at_once.too_busy(0), "a wait of 0 ms refuses everything");
}

#[test]
fn parks_half_messages_as_the_python_path_once_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), false);
    let fs = fast(s.clone(), true);
    fs.allow_topic("T", 4, 4, true);
    let ext = |props: &str| {
        format!(
            r#"{{"a":"pg","b":"T","c":"TBW102","d":"4","e":"2","f":"4","g":"1700000000000","h":"0","i":"{props}","j":"0","k":"false","m":"false"}}"#
        )
    };
    let half = "KEYS\\u0001k1\\u0002TRAN_MSG\\u0001true\\u0002PGROUP\\u0001pg\\u0002UNIQ_KEY\\u0001AB12\\u0002WAIT\\u0001true\\u0002";
    let frame = send_frame(SEND_MESSAGE_V2, 0, 7, &ext(half), b"half");
    let mut rnd = || 0u32;
    assert_eq!(
        handle(&fs, &frame, &mut rnd),
        None,
        "not before the Python path allowed half messages"
    );
    fs.allow_half();
    let v = reply_header(handle(&fs, &frame, &mut rnd));
    assert_eq!(v["code"], 0);
    assert_eq!(
        v["extFields"]["queueId"], "2",
        "answered with the queue it is meant for"
    );
    assert_eq!(v["extFields"]["queueOffset"], "0");
    let rec = record(&s, v["extFields"]["msgId"].as_str().unwrap());
    let r = decode(&rec, true).unwrap();
    // Parked in the half topic's queue 0, transaction type bits cleared (the topic's MULTI_TAG
    // flag kept), properties as `_park` writes them: WAIT dropped, then the transaction id
    // (the message's), REAL_TOPIC, REAL_QID, CLUSTER.
    assert_eq!(
        (r.topic, r.queue_id, r.sys_flag),
        ("RMQ_SYS_TRANS_HALF_TOPIC", 0, 2)
    );
    assert_eq!(
        r.properties,
        "KEYS\u{1}k1\u{2}TRAN_MSG\u{1}true\u{2}PGROUP\u{1}pg\u{2}UNIQ_KEY\u{1}AB12\u{2}__transactionId__\u{1}AB12\u{2}REAL_TOPIC\u{1}T\u{2}REAL_QID\u{1}2\u{2}CLUSTER\u{1}DefaultCluster"
    );
    assert_eq!(r.body, b"half");
    // Counted as the topic's transaction messages.
    let m = fs.metrics();
    let types: Vec<(&str, &str, u64)> = m
        .topics
        .iter()
        .map(|t| (t.topic.as_str(), t.message_type, t.messages))
        .collect();
    assert_eq!(types, [("T", "normal", 0), ("T", "transaction", 1)]);

    // What the Python path would store otherwise is left to it.
    for props in [
        "TRAN_MSG\\u0001false",
        "TRAN_MSG\\u0001true\\u0002TRAN_MSG\\u0001true",
        "TRAN_MSG\\u0001true\\u0002REAL_TOPIC\\u0001X",
        "TRAN_MSG\\u0001true\\u0002__transactionId__\\u0001X",
        "TRAN_MSG\\u0001true\\u0002KEYS\\u0001",
        "TRAN_MSG\\u0001true\\u0002\\u0002KEYS\\u0001k",
        "TRAN_MSG\\u0001true\\u0002DELAY\\u00013",
    ] {
        let frame = send_frame(SEND_MESSAGE_V2, 0, 8, &ext(props), b"half");
        assert_eq!(handle(&fs, &frame, &mut rnd), None, "{props}");
    }
    // A key that only ends in TRAN_MSG is not one (the Python path reads keys whole): stored
    // in its own topic as any message.
    let frame = send_frame(
        SEND_MESSAGE_V2,
        0,
        8,
        &ext("XTRAN_MSG\\u0001true"),
        b"plain",
    );
    let v = reply_header(handle(&fs, &frame, &mut rnd));
    let r = record(&s, v["extFields"]["msgId"].as_str().unwrap());
    let r = decode(&r, true).unwrap();
    assert_eq!(
        (r.topic, r.properties),
        ("T", "XTRAN_MSG\u{1}true\u{2}CLUSTER\u{1}DefaultCluster")
    );
    // A half message without UNIQ_KEY gets no transaction id, as in the Python path.
    let frame = send_frame(SEND_MESSAGE_V2, 0, 9, &ext("TRAN_MSG\\u0001TRUE"), b"h");
    let v = reply_header(handle(&fs, &frame, &mut rnd));
    let rec = record(&s, v["extFields"]["msgId"].as_str().unwrap());
    assert_eq!(
        decode(&rec, true).unwrap().properties,
        "TRAN_MSG\u{1}TRUE\u{2}REAL_TOPIC\u{1}T\u{2}REAL_QID\u{1}2\u{2}CLUSTER\u{1}DefaultCluster"
    );
    // A change to the broker's rules forgets the allowance with the topics; so does one to the
    // half topic.
    fs.forget_topics();
    fs.allow_topic("T", 4, 4, true);
    assert_eq!(handle(&fs, &frame, &mut rnd), None);
    fs.allow_half();
    assert!(handle(&fs, &frame, &mut rnd).is_some());
    fs.forget_topic("RMQ_SYS_TRANS_HALF_TOPIC");
    assert_eq!(handle(&fs, &frame, &mut rnd), None);
    s.shutdown().unwrap();
}
