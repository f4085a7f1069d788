//! The SEND fast path on its own: what it takes, what it answers, what it leaves to Python.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{fast, frame as send_frame, store};
use rmq_net::send::{Sent, FLUSH_DISK_TIMEOUT, SEND_MESSAGE, SEND_MESSAGE_V2};
use rmq_net::FastSend;

fn host() -> SocketAddr {
    "127.0.0.1:40000".parse().unwrap()
}

/// The fast path's verdict on `frame`, with the answer it appended (if any).
fn handle(fs: &FastSend, frame: &[u8], random: &mut dyn FnMut() -> u32) -> Option<(Sent, Vec<u8>)> {
    let mut out = b"kept".to_vec();
    let sent = fs.handle(frame, host(), random, &mut out)?;
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
    assert!(declined(r#"{"b":"T","e":0}"#, b"x", SEND_MESSAGE_V2));
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
    s.shutdown().unwrap();
}

#[test]
fn sync_flush_holds_until_durable() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), true);
    let fs = fast(s.clone(), true);
    fs.allow_topic("T", 1, 1, true);
    let frame = send_frame(SEND_MESSAGE_V2, 0, 9, r#"{"b":"T","e":"0"}"#, b"durable");
    let (sent, _) = handle(&fs, &frame, &mut || 0u32).unwrap();
    let held = match sent {
        Sent::Hold(h) => h,
        Sent::Replied => {
            // the flush thread may already have caught up; nothing else to check
            s.shutdown().unwrap();
            return;
        }
        Sent::NoReply => panic!("not oneway"),
    };
    s.wait_flushed(held.end, Duration::from_secs(5)).unwrap();
    let held_reply = |timed_out| {
        let mut out = Vec::new();
        fs.held_reply(&held, timed_out, &mut out);
        serde_json::from_slice::<serde_json::Value>(&out[8..]).unwrap()
    };
    let ok = held_reply(false);
    assert_eq!(ok["code"], 0);
    let late = held_reply(true);
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
