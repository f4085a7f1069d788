//! The END_TRANSACTION fast path over a real store: commits and rollbacks decided once, as the
//! Python path decides them; what it leaves to the Python path.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{fast, frame, records, store};
use rmq_net::send::{Sent, SEND_MESSAGE_V2};
use rmq_net::transaction::{END_TRANSACTION, TRANS_OP_HALF_TOPIC};
use rmq_net::FastSend;
use rmq_store::message::decode_offset_msg_id;
use rmq_store::{GetRequest, MessageStore};

fn host() -> SocketAddr {
    "127.0.0.1:40000".parse().unwrap()
}

fn handle(fs: &FastSend, f: &[u8]) -> Option<(Sent, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rnd = || 0u32;
    let sent = fs.handle(f, host(), &mut rnd, &mut out)?;
    // What it stored is written before it is answered, as the network thread does.
    assert!(fs.write_deferred());
    Some((sent, out))
}

/// Park a half message for topic T queue `qid` through the fast path: (CommitLog offset, half
/// queue offset).
fn half(fs: &FastSend, qid: i32, key: &str) -> (i64, i64) {
    let props = format!(
        "KEYS\\u0001{key}\\u0002TRAN_MSG\\u0001true\\u0002PGROUP\\u0001pg\\u0002UNIQ_KEY\\u0001{key}\\u0002WAIT\\u0001true"
    );
    let ext = format!(
        r#"{{"a":"pg","b":"T","c":"TBW102","d":"4","e":"{qid}","f":"4","g":"1700000000000","h":"0","i":"{props}","j":"0","k":"false","m":"false"}}"#
    );
    let (_, out) =
        handle(fs, &frame(SEND_MESSAGE_V2, 0, 1, &ext, key.as_bytes())).expect("half taken");
    let hlen = u32::from_be_bytes(out[4..8].try_into().unwrap()) as usize;
    let v: serde_json::Value = serde_json::from_slice(&out[8..8 + hlen]).unwrap();
    let (_, phys) = decode_offset_msg_id(v["extFields"]["msgId"].as_str().unwrap()).unwrap();
    (
        phys,
        v["extFields"]["queueOffset"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap(),
    )
}

fn end(phys: i64, table: i64, kind: i32, group: &str, flag: i32) -> Vec<u8> {
    let ext = format!(
        r#"{{"commitLogOffset":"{phys}","commitOrRollback":"{kind}","fromTransactionCheck":"false","msgId":"X","producerGroup":"{group}","tranStateTableOffset":"{table}","transactionId":"X"}}"#
    );
    frame(END_TRANSACTION, flag, 9, &ext, b"")
}

/// (topic, body, properties, sys_flag, prepared offset) of every record of a queue.
fn queue(s: &MessageStore, topic: &str, qid: i32) -> Vec<(String, String, String, i32, i64)> {
    assert!(s.wait_dispatched(s.commitlog_max_offset(), Duration::from_secs(5)));
    let r = s.get_message(&GetRequest {
        topic,
        queue_id: qid,
        offset: 0,
        max_msgs: 64,
        max_bytes: 0,
        filter: None,
        sql: None,
    });
    records(&r.buffer)
        .iter()
        .map(|m| {
            (
                m.topic.to_string(),
                String::from_utf8(m.body.to_vec()).unwrap(),
                m.properties.to_string(),
                m.sys_flag,
                m.prepared_transaction_offset,
            )
        })
        .collect()
}

#[test]
fn commits_and_rollbacks_are_decided_once_as_the_python_path_decides_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), false);
    let fs = fast(s.clone(), true);
    fs.allow_topic("T", 4, 4, false);
    fs.allow_half();
    let (p0, t0) = half(&fs, 1, "k0");
    let (p1, t1) = half(&fs, 2, "k1");
    let (p2, t2) = half(&fs, 3, "k2");
    assert_eq!((t0, t1, t2), (0, 1, 2));
    let e = fs.end_transaction();

    assert_eq!(
        handle(&fs, &end(p0, t0, 8, "pg", 2)),
        None,
        "not before the Python path allowed it"
    );
    e.allow();
    // What the Python path answers or refuses is left to it.
    assert_eq!(
        handle(&fs, &end(p0, t0, 8, "other", 2)),
        None,
        "another producer group"
    );
    assert_eq!(
        handle(&fs, &end(p0, t1, 8, "pg", 2)),
        None,
        "the wrong table offset"
    );
    assert_eq!(
        handle(&fs, &end(p0 + 1, t0, 8, "pg", 2)),
        None,
        "not a record's offset"
    );
    assert_eq!(
        handle(&fs, &end(p0, t0, 0, "pg", 2)),
        None,
        "neither commit nor rollback"
    );
    assert!(!e.is_claimed(t0), "a declined request claims nothing");

    // A oneway commit: stored in its real topic and queue, then the op record.
    assert_eq!(
        handle(&fs, &end(p0, t0, 8, "pg", 2)).unwrap().0,
        Sent::NoReply
    );
    assert!(e.is_claimed(t0));
    let real = queue(&s, "T", 1);
    assert_eq!(real.len(), 1);
    let (topic, body, props, sys_flag, prepared) = &real[0];
    assert_eq!((topic.as_str(), body.as_str(), *prepared), ("T", "k0", p0));
    assert_eq!(*sys_flag & 0xC, 8, "a COMMIT record");
    assert_eq!(
        props,
        "KEYS\u{1}k0\u{2}TRAN_MSG\u{1}true\u{2}PGROUP\u{1}pg\u{2}UNIQ_KEY\u{1}k0\u{2}__transactionId__\u{1}k0\u{2}REAL_TOPIC\u{1}T\u{2}REAL_QID\u{1}1\u{2}CLUSTER\u{1}DefaultCluster\u{2}WAIT\u{1}false",
        "the half's properties, WAIT false appended (the Python path's dict order)"
    );
    // A second decision of the same half is the Python path's ("already decided").
    assert_eq!(handle(&fs, &end(p0, t0, 8, "pg", 2)), None);
    assert_eq!(queue(&s, "T", 1).len(), 1, "committed once");

    // A rollback answered (not oneway): the op record only.
    let (sent, out) = handle(&fs, &end(p1, t1, 12, "pg", 0)).unwrap();
    assert_eq!(sent, Sent::Replied);
    let hlen = u32::from_be_bytes(out[4..8].try_into().unwrap()) as usize;
    assert_eq!(
        std::str::from_utf8(&out[8..8 + hlen]).unwrap(),
        r#"{"code":0,"flag":1,"language":"JAVA","opaque":9,"serializeTypeCurrentRPC":"JSON","version":409}"#
    );
    assert!(queue(&s, "T", 2).is_empty());
    let ops: Vec<(String, String)> = queue(&s, TRANS_OP_HALF_TOPIC, 0)
        .into_iter()
        .map(|(_, body, props, _, _)| (body, props))
        .collect();
    assert_eq!(
        ops,
        [
            ("0".into(), "TAGS\u{1}d".into()),
            ("1".into(), "TAGS\u{1}d".into())
        ]
    );
    assert_eq!(e.stats(), (1, 1, 0, 2));

    // A half the Python side claimed (decided or checked) is left to it; the floor drops claims.
    assert!(e.claim(t2));
    assert_eq!(handle(&fs, &end(p2, t2, 8, "pg", 2)), None);
    e.release(t2);
    e.set_floor(3);
    assert_eq!(e.stats().3, 0);
    assert_eq!(
        handle(&fs, &end(p2, t2, 8, "pg", 2)),
        None,
        "below the floor: settled"
    );
    assert!(!e.claim(t2));

    // Forgotten with the half and op topics and every broker-wide change.
    let (p3, t3) = half(&fs, 0, "k3");
    fs.forget_topic(TRANS_OP_HALF_TOPIC);
    assert_eq!(handle(&fs, &end(p3, t3, 8, "pg", 2)), None);
    e.allow();
    fs.forget_topics();
    assert_eq!(handle(&fs, &end(p3, t3, 8, "pg", 2)), None);
}

#[test]
fn acl_leaves_end_transaction_to_the_python_path() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), false);
    let plain = fast(s.clone(), true);
    plain.allow_topic("T", 4, 4, false);
    plain.allow_half();
    let (p, t) = half(&plain, 1, "k");
    // The same store behind a fast path with ACL on: the validator must check the account may
    // send to the real topic, so the request is the Python path's.
    let acl = fast(s.clone(), true).with_acl();
    acl.end_transaction().allow();
    assert_eq!(handle(&acl, &end(p, t, 8, "pg", 2)), None);
    plain.end_transaction().allow();
    assert!(
        handle(&plain, &end(p, t, 8, "pg", 2)).is_some(),
        "taken without ACL"
    );
}
