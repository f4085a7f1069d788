//! A store whose filesystem refuses space (injected: every block reservation fails with
//! ENOSPC). Its own test binary: the injection is process-wide.

use std::path::Path;
use std::time::Duration;

use rmq_store::message::{self, MessageRef};
use rmq_store::{disk, GetMessageStatus, GetRequest, MessageStore, StoreConfig, StoreError};

fn config(root: &Path) -> StoreConfig {
    let mut c = StoreConfig::with_root(root);
    c.mapped_file_size_commit_log = 64 * 1024;
    c.mapped_file_size_consume_queue = 20 * 1000;
    c.max_hash_slot_num = 101;
    c.max_index_num = 4000;
    c
}

fn msg(body: &[u8]) -> MessageRef<'_> {
    MessageRef {
        topic: "T",
        queue_id: 0,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1,
        born_host: "127.0.0.1:4000".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties: b"KEYS\x01k",
    }
}

fn served(store: &MessageStore) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut off = 0;
    loop {
        let r = store.get_message(&GetRequest {
            topic: "T",
            queue_id: 0,
            offset: off,
            max_msgs: 32,
            max_bytes: 0,
            filter: None,
            sql: None,
        });
        if r.status != GetMessageStatus::Found {
            return out;
        }
        let mut pos = 0;
        while pos < r.buffer.len() {
            let rec = message::decode(&r.buffer[pos..], true).unwrap();
            out.push(rec.body.to_vec());
            pos += rec.total_size as usize;
        }
        off = r.next_begin_offset;
    }
}

#[test]
fn a_disk_that_refuses_space_refuses_writes_keeps_reads_and_recovers() {
    let d = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(d.path())).unwrap();
    let mut acked = Vec::new();
    for i in 0..50 {
        let body = format!("before-{i:04}-").repeat(20).into_bytes();
        store.put(&msg(&body)).unwrap();
        acked.push(body);
    }
    assert!(store.wait_dispatched(store.commitlog_max_offset(), Duration::from_secs(5)));

    disk::inject_no_space(true);
    // Appends go on into the reserved segment, then the next one cannot be reserved.
    let mut refused = None;
    for i in 0..2000 {
        let body = format!("during-{i:04}-").repeat(20).into_bytes();
        match store.put(&msg(&body)) {
            Ok(_) => acked.push(body),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let refused = refused.expect("writes are refused");
    assert!(matches!(refused, StoreError::NoSpace { .. }), "{refused:?}");
    assert!(refused.to_string().contains("disk full"), "{refused}");
    assert!(store.is_disk_full());
    // Refused again without trying the disk, and journaled once.
    assert!(matches!(
        store.put(&msg(b"again")),
        Err(StoreError::NoSpace { .. })
    ));
    // Reads go on: whatever was dispatched is served, intact.
    let now = served(&store);
    assert!(now.len() >= 50);
    assert_eq!(now[..], acked[..now.len()]);

    // Space comes back: writes are accepted again without a restart, and dispatch catches up.
    disk::inject_no_space(false);
    store.put(&msg(b"after")).unwrap();
    acked.push(b"after".to_vec());
    assert!(!store.is_disk_full());
    assert!(store.wait_dispatched(store.commitlog_max_offset(), Duration::from_secs(5)));
    assert_eq!(served(&store), acked);
    let kinds: Vec<String> = store
        .journal()
        .all()
        .into_iter()
        .filter(|e| e.kind.starts_with("disk"))
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, vec!["disk-full", "disk-ok"]);
    store.shutdown().unwrap();
    drop(store);

    // A restart while the disk refuses space opens and serves reads.
    disk::inject_no_space(true);
    let store = MessageStore::open(config(d.path())).unwrap();
    assert_eq!(served(&store), acked);
    disk::inject_no_space(false);
    store.shutdown().unwrap();
}
