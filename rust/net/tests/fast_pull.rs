//! The PULL fast path over a real store: what it takes, what it answers, what it leaves to the
//! Python path, what it hands over, and what makes it forget.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{fast, frame, records, store};
use rmq_net::pull::PULL_MESSAGE;
use rmq_net::send::{Sent, SEND_MESSAGE_V2};
use rmq_net::{FastSend, QueueTaken};
use rmq_store::message::java_string_hash;

fn host() -> SocketAddr {
    "127.0.0.1:40000".parse().unwrap()
}

fn handle(fs: &FastSend, f: &[u8]) -> Option<Vec<u8>> {
    let mut out = b"kept".to_vec();
    let mut rnd = || 0u32;
    let sent = fs.handle(f, host(), &mut rnd, &mut out)?;
    // What it stored is written before it is answered, as the network thread does.
    assert!(fs.write_deferred());
    assert_eq!(sent, Sent::Replied);
    assert_eq!(&out[..4], b"kept", "appends, never overwrites");
    Some(out.split_off(4))
}

/// Send `n` messages with `tag` to queue 1 of T.
fn send(fs: &FastSend, tag: &str, n: usize) {
    for i in 0..n {
        let ext = format!(
            r#"{{"a":"pg","b":"T","c":"TBW102","d":"4","e":"1","f":"0","g":"1700000000000","h":"0","i":"TAGS\u0001{tag}\u0002WAIT\u0001true","j":"0","k":"false","m":"false"}}"#
        );
        let f = frame(SEND_MESSAGE_V2, 0, 1, &ext, format!("body{i}").as_bytes());
        handle(fs, &f).expect("send taken");
    }
}

/// A Java client 4.9.8 PULL_MESSAGE frame (its header's field names, every value a string).
fn pull(group: &str, queue: i32, offset: i64, sys_flag: i32, commit: i64, extra: &str) -> Vec<u8> {
    let ext = format!(
        r#"{{"commitOffset":"{commit}","consumerGroup":"{group}","expressionType":"TAG","maxMsgNums":"32","queueId":"{queue}","queueOffset":"{offset}","subVersion":"1700000000000","suspendTimeoutMillis":"15000","sysFlag":"{sys_flag}","topic":"T"{extra}}}"#
    );
    frame(PULL_MESSAGE, 0, 77, &ext, b"")
}

/// (header, body) of one answer frame.
fn answer(bytes: &[u8]) -> (serde_json::Value, Vec<u8>) {
    let total = i32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
    assert_eq!(total + 4, bytes.len(), "one whole frame");
    let hlen = u32::from_be_bytes(bytes[4..8].try_into().unwrap()) as usize;
    let header = serde_json::from_slice(&bytes[8..8 + hlen]).unwrap();
    (header, bytes[8 + hlen..].to_vec())
}

fn bodies(buf: &[u8]) -> Vec<String> {
    records(buf)
        .iter()
        .map(|m| String::from_utf8(m.body.to_vec()).unwrap())
        .collect()
}

#[test]
fn answers_found_pulls_of_vetted_pairs_as_the_python_path() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), false);
    let fs = fast(s.clone(), true);
    fs.allow_topic("T", 4, 4, false);
    send(&fs, "a", 3);
    send(&fs, "b", 2);
    assert!(s.wait_dispatched(s.commitlog_max_offset(), Duration::from_secs(5)));

    let p = pull("g", 1, 0, 2 | 1, 0, "");
    assert_eq!(
        handle(&fs, &p),
        None,
        "not before the Python path vetted the pair"
    );
    fs.pull().allow(
        "g",
        "T",
        4,
        Some(vec![java_string_hash("a")]),
        None,
        1700000000000,
        0,
    );
    let (h, body) = answer(&handle(&fs, &p).expect("taken"));
    assert_eq!(h["code"], 0);
    assert_eq!(h["flag"], 1);
    assert_eq!(h["opaque"], 77);
    assert_eq!(h["remark"], "FOUND");
    assert_eq!(h["version"], 409);
    assert_eq!(
        h["extFields"],
        serde_json::json!({"suggestWhichBrokerId":"0","nextBeginOffset":"5","minOffset":"0","maxOffset":"5"})
    );
    assert_eq!(bodies(&body), ["body0", "body1", "body2"], "tag a only");
    // The frame's header is written in the Python path's key order.
    let raw = handle(&fs, &p).unwrap();
    let hlen = u32::from_be_bytes(raw[4..8].try_into().unwrap()) as usize;
    let text = std::str::from_utf8(&raw[8..8 + hlen]).unwrap();
    assert_eq!(
        text,
        r#"{"code":0,"extFields":{"suggestWhichBrokerId":"0","nextBeginOffset":"5","minOffset":"0","maxOffset":"5"},"flag":1,"language":"JAVA","opaque":77,"remark":"FOUND","serializeTypeCurrentRPC":"JSON","version":409}"#
    );

    // A commit offset is handed over with the counts; the last one of a queue wins.
    let _ = fs.pull().take_taken();
    handle(&fs, &pull("g", 1, 0, 3, 2, "")).unwrap();
    handle(&fs, &pull("g", 1, 1, 2, 4, "")).unwrap(); // no COMMIT_OFFSET bit: not committed
    handle(&fs, &pull("g", 1, 3, 3, 3, "")).unwrap_or_default();
    let taken = fs.pull().take_taken();
    assert_eq!(taken.len(), 1);
    let ((g, t, q), v) = &taken[0];
    assert_eq!((g.as_str(), t.as_str(), *q), ("g", "T", 1));
    assert_eq!(
        *v,
        QueueTaken {
            requests: 2,
            messages: 3 + 2,
            bytes: v.bytes,
            next_offset: 5,
            commit: Some(2),
        },
        "the pull from offset 3 found nothing (tag b only after it): left to Python, not counted"
    );
    assert!(v.bytes > 0);
    assert!(fs.pull().take_taken().is_empty(), "taken once");

    // Every subscription `*` answers all.
    fs.pull().allow("g2", "T", 4, None, None, 1700000000000, 0);
    let (_, body) = answer(&handle(&fs, &pull("g2", 1, 2, 2, -1, "")).unwrap());
    assert_eq!(bodies(&body), ["body2", "body0", "body1"]);
}

#[test]
fn leaves_the_rest_to_the_python_path() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), false);
    let fs = fast(s.clone(), true);
    fs.allow_topic("T", 4, 4, false);
    send(&fs, "a", 2);
    assert!(s.wait_dispatched(s.commitlog_max_offset(), Duration::from_secs(5)));
    fs.pull().allow("g", "T", 2, None, None, 1700000000000, 0);
    assert!(handle(&fs, &pull("g", 1, 0, 2, -1, "")).is_some());
    let declined = [
        pull("g", 1, 2, 2, -1, ""),     // nothing new: long polling is Python's
        pull("g", 1, 9, 2, -1, ""),     // offset overflow
        pull("g", 0, 0, 2, -1, ""),     // an empty queue
        pull("g", 2, 0, 2, -1, ""),     // beyond the vetted read queues
        pull("g", -1, 0, 2, -1, ""),    // a negative queue
        pull("other", 1, 0, 2, -1, ""), // a pair not vetted
        pull("g", 1, 0, 2 | 4, -1, ""), // the subscription in the request
        pull("g", 1, 0, 2 | 8, -1, ""), // class filter
        pull("g", 1, 0, 2, -1, r#","subVersion":"9""#), // a field twice
    ];
    for (i, f) in declined.iter().enumerate() {
        assert_eq!(handle(&fs, f), None, "case {i}");
    }
    let newer = r#"{"consumerGroup":"g","maxMsgNums":"32","queueId":"1","queueOffset":"0","subVersion":"1800000000000","sysFlag":"2","topic":"T"}"#;
    assert_eq!(
        handle(&fs, &frame(PULL_MESSAGE, 0, 1, newer, b"")),
        None,
        "a newer subscription than held"
    );
    let odd = r#"{"consumerGroup":"g","queueId":"x","queueOffset":"0","topic":"T"}"#;
    assert_eq!(
        handle(&fs, &frame(PULL_MESSAGE, 0, 1, odd, b"")),
        None,
        "a queue id Python would refuse"
    );
    let missing = r#"{"consumerGroup":"g","queueId":"1","topic":"T"}"#;
    assert_eq!(
        handle(&fs, &frame(PULL_MESSAGE, 0, 1, missing, b"")),
        None,
        "no queueOffset"
    );
    let fine = r#"{"consumerGroup":"g","queueId":1,"queueOffset":0,"topic":"T"}"#;
    assert!(
        handle(&fs, &frame(PULL_MESSAGE, 0, 1, fine, b"")).is_some(),
        "numbers as numbers, defaults"
    );
    assert_eq!(
        handle(&fs, &frame(PULL_MESSAGE, 2, 1, fine, b"")),
        None,
        "oneway"
    );

    // Forgetting: the group, the topic, everything.
    let p = pull("g", 1, 0, 2, -1, "");
    fs.pull().forget_group("g");
    assert_eq!(handle(&fs, &p), None);
    fs.pull().allow("g", "T", 2, None, None, 0, 0);
    fs.forget_topic("T");
    assert_eq!(handle(&fs, &p), None, "the topic's config changed");
    fs.pull().allow("g", "T", 2, None, None, 0, 0);
    fs.forget_topics();
    assert_eq!(handle(&fs, &p), None, "a broker-wide rule changed");
    assert!(!fs.pull().any());
}

#[test]
fn acl_leaves_every_pull_to_the_validator() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), false);
    let fs = fast(s.clone(), true).with_acl();
    fs.pull().allow("g", "T", 4, None, None, 0, 0);
    assert_eq!(handle(&fs, &pull("g", 1, 0, 2, -1, "")), None);
}

#[test]
fn lite_pulls_carry_their_own_tag_subscription() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), false);
    let fs = fast(s.clone(), true);
    fs.allow_topic("T", 4, 4, false);
    send(&fs, "a", 2);
    send(&fs, "b", 2);
    assert!(s.wait_dispatched(s.commitlog_max_offset(), Duration::from_secs(5)));
    // The helper's header has expressionType TAG; these requests spell their own.
    let lite = |sub: &str, etype: &str| {
        let f = pull(
            "lg",
            1,
            0,
            2 | 4,
            -1,
            &format!(r#","subscription":"{sub}""#),
        );
        let text = String::from_utf8(f[8..].to_vec()).unwrap();
        let text = if etype.is_empty() {
            text.replace(r#""expressionType":"TAG","#, "")
        } else {
            text.replace(
                r#""expressionType":"TAG""#,
                &format!(r#""expressionType":"{etype}""#),
            )
        };
        let mut out = Vec::new();
        out.extend_from_slice(&((4 + text.len()) as i32).to_be_bytes());
        out.extend_from_slice(&(text.len() as u32).to_be_bytes());
        out.extend_from_slice(text.as_bytes());
        out
    };
    // The subscription version is the request's (Python does not compare it either).
    fs.pull().allow("lg", "T", 4, None, None, 0, 0);
    assert_eq!(
        handle(&fs, &lite("b", "TAG")),
        None,
        "a held subscription does not vet lite pulls"
    );
    fs.pull().allow_lite("lg", "T", 4, 0);
    let got = |f: &[u8]| handle(&fs, f).map(|a| bodies(&answer(&a).1));
    assert_eq!(
        got(&lite("b", "TAG")).unwrap(),
        ["body0", "body1"],
        "tag b: the 3rd and 4th"
    );
    assert_eq!(got(&lite(" a || b ", "tag")).unwrap().len(), 4);
    assert_eq!(got(&lite("*", "")).unwrap().len(), 4, "no type: TAG");
    assert_eq!(
        got(&lite("", "TAG")).unwrap().len(),
        4,
        "empty: every message"
    );
    assert_eq!(
        got(&lite("x || *", "TAG")).unwrap().len(),
        4,
        "a * among the tags"
    );
    assert_eq!(
        got(&lite("x", "TAG")),
        None,
        "nothing matches: left to Python (retry)"
    );
    assert_eq!(got(&lite("a > 1", "SQL92")), None, "SQL92: Python's");
    assert_eq!(got(&lite("||", "TAG")), None, "no tag: Python refuses it");
    assert_eq!(got(&lite("\u{e9}t\u{e9}", "TAG")), None, "not plain ASCII");
    // Allowing lite pulls keeps the held subscription, and the reverse.
    fs.pull().allow(
        "lg",
        "T",
        4,
        Some(vec![java_string_hash("a")]),
        None,
        1700000000000,
        0,
    );
    assert_eq!(
        got(&pull("lg", 1, 0, 2, -1, "")).unwrap(),
        ["body0", "body1"]
    );
    assert_eq!(got(&lite("b", "TAG")).unwrap().len(), 2);
}

#[test]
fn an_sql92_subscription_the_broker_holds_filters_as_the_python_path() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), false);
    let fs = fast(s.clone(), true);
    fs.allow_topic("T", 4, 4, false);
    for n in 0..6 {
        let ext = format!(
            r#"{{"a":"pg","b":"T","c":"TBW102","d":"4","e":"1","f":"0","g":"1700000000000","h":"0","i":"n\u0001{n}\u0002WAIT\u0001true","j":"0","k":"false","m":"false"}}"#
        );
        handle(
            &fs,
            &frame(SEND_MESSAGE_V2, 0, 1, &ext, format!("n{n}").as_bytes()),
        )
        .unwrap();
    }
    assert!(s.wait_dispatched(s.commitlog_max_offset(), Duration::from_secs(5)));
    let sql = std::sync::Arc::new(rmq_filter::Sql92Filter::compile("n >= 2 AND n < 5").unwrap());
    fs.pull()
        .allow("sg", "T", 4, None, Some(sql), 1700000000000, 0);
    let (h, body) = answer(&handle(&fs, &pull("sg", 1, 0, 2, -1, "")).unwrap());
    assert_eq!(bodies(&body), ["n2", "n3", "n4"]);
    assert_eq!(h["extFields"]["nextBeginOffset"], "6");
}

#[test]
fn pulls_that_find_nothing_new_are_held_and_answered_as_the_python_path() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), false);
    let fs = fast(s.clone(), true);
    fs.allow_topic("T", 4, 4, false);
    send(&fs, "a", 2);
    assert!(s.wait_dispatched(s.commitlog_max_offset(), Duration::from_secs(5)));
    fs.pull().allow("g", "T", 4, None, None, 1700000000000, 0);
    let mut rnd = || 0u32;
    let at_end = pull("g", 1, 2, 2 | 1, 1, "");

    // Long polling not turned on here: the Python path holds it, as before.
    let mut out = Vec::new();
    assert_eq!(fs.handle(&at_end, host(), &mut rnd, &mut out), None);

    fs.pull().set_holding(true);
    let _ = fs.pull().take_taken();
    let held = match fs.handle(&at_end, host(), &mut rnd, &mut out) {
        Some(Sent::Pull(h)) => h,
        other => panic!("held expected, got {other:?}"),
    };
    assert!(out.is_empty(), "nothing answered yet");
    assert_eq!(
        (held.topic.as_str(), held.queue_id, held.offset),
        ("T", 1, 2)
    );
    let wait = held.deadline - held.started;
    assert_eq!(
        wait,
        Duration::from_millis(15_000),
        "its suspendTimeoutMillis"
    );
    // Its commit offset is kept when it arrives; the pull is counted when answered.
    let taken = fs.pull().take_taken();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].1.commit, Some(1));
    assert_eq!(taken[0].1.requests, 0);

    // Without the suspend bit, or not at the end: not held.
    assert_eq!(
        fs.handle(&pull("g", 1, 2, 1, 1, ""), host(), &mut rnd, &mut out),
        None,
        "no suspend bit: the Python path answers PULL_NOT_FOUND"
    );
    assert_eq!(
        fs.handle(&pull("g", 1, 9, 3, 1, ""), host(), &mut rnd, &mut out),
        None,
        "offset past the end (moved): the Python path"
    );

    // Its time over with nothing new: PULL_NOT_FOUND, as the Python path answers it.
    assert_eq!(fs.pull_again(&held, &mut out), Some(()));
    let (h, body) = answer(&out);
    assert_eq!(h["code"], 19);
    assert_eq!(h["opaque"], 77);
    assert_eq!(h["remark"], "OFFSET_OVERFLOW_ONE");
    assert_eq!(
        h["extFields"],
        serde_json::json!({"suggestWhichBrokerId":"0","nextBeginOffset":"2","minOffset":"0","maxOffset":"2"})
    );
    assert!(body.is_empty());
    let taken = fs.pull().take_taken();
    assert_eq!(
        (taken[0].1.requests, taken[0].1.commit),
        (1, None),
        "counted once answered; not committed again"
    );

    // Woken by a message: FOUND with it.
    out.clear();
    send(&fs, "b", 1);
    assert!(s.wait_dispatched(s.commitlog_max_offset(), Duration::from_secs(5)));
    assert_eq!(fs.max_offset_in_queue("T", 1), 3);
    assert_eq!(fs.pull_again(&held, &mut out), Some(()));
    let (h, body) = answer(&out);
    assert_eq!(
        (h["code"].as_i64(), h["remark"].as_str()),
        (Some(0), Some("FOUND"))
    );
    assert_eq!(bodies(&body), ["body0"]);

    // Forgotten pair: the Python path answers the held pull.
    fs.pull().forget_group("g");
    out.clear();
    assert_eq!(fs.pull_again(&held, &mut out), None);
    assert!(out.is_empty());
}
