//! Replication between two whole stores: the master's CommitLog read in ranges, appended
//! verbatim by the slave, whose dispatch builds the same ConsumeQueues and index.

use std::path::Path;
use std::time::Duration;

use rmq_store::message::{self, MessageRef};
use rmq_store::store::LastShutdown;
use rmq_store::{GetMessageStatus, GetRequest, MessageStore, StoreConfig, StoreError};

const FILE_SIZE: u64 = 64 * 1024;

fn config(root: &Path) -> StoreConfig {
    let mut c = StoreConfig::with_root(root);
    c.mapped_file_size_commit_log = FILE_SIZE;
    c.mapped_file_size_consume_queue = 20 * 100;
    c.max_hash_slot_num = 101;
    c.max_index_num = 4000;
    // What retention deletes, and whether writes are refused, must not follow how full the
    // host's disk is: these tests are not about the disk (`retention::cleaning`).
    c.disk_max_used_space_ratio = 100;
    c.disk_space_clean_forcibly_ratio = 100;
    c.disk_space_warning_level_ratio = 100;
    c
}

fn fill(store: &MessageStore, from: usize, n: usize) {
    for i in from..from + n {
        let body = format!("message-{i:05}-").repeat(1 + i % 17);
        let props = format!("KEYS\u{1}key-{i}\u{2}TAGS\u{1}T{}", i % 3);
        store
            .put(&MessageRef {
                topic: if i % 5 == 0 { "Other" } else { "Topic" },
                queue_id: (i % 3) as i32,
                flag: 0,
                sys_flag: 0,
                born_timestamp: 1_700_000_000_000,
                born_host: "127.0.0.1:4000".parse().unwrap(),
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: body.as_bytes(),
                properties: props.as_bytes(),
            })
            .unwrap();
    }
}

/// Copy the master's log to the slave from where the slave ends, `chunk` bytes at a time.
fn replicate(master: &MessageStore, slave: &MessageStore, chunk: usize) {
    let mut at = slave.commitlog_max_offset();
    while let Some(bytes) = master.read_commitlog(at, chunk) {
        slave.append_commitlog(at, &bytes).unwrap();
        at += bytes.len() as i64;
    }
}

/// Every file of `sub` (commitlog, consumequeue/T/q) under a store root, by relative path,
/// with the bytes up to the last non-zero one (preallocated tails differ in length only).
fn files(root: &Path, sub: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.join(sub)];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let mut data = std::fs::read(&p).unwrap();
                let end = data.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
                data.truncate(end);
                if !data.is_empty() {
                    out.push((p.strip_prefix(root).unwrap().display().to_string(), data));
                }
            }
        }
    }
    out.sort();
    out
}

fn queue_view(store: &MessageStore) -> Vec<(String, i32, i64, i64, Vec<u8>)> {
    let mut queues = store.queues();
    queues.sort();
    queues
        .into_iter()
        .map(|(t, q)| {
            let r = store.get_message(&GetRequest {
                topic: &t,
                queue_id: q,
                offset: 0,
                max_msgs: 100_000,
                max_bytes: u64::MAX,
                filter: None,
                sql: None,
            });
            assert_eq!(r.status, GetMessageStatus::Found);
            let (min, max) = (
                store.min_offset_in_queue(&t, q),
                store.max_offset_in_queue(&t, q),
            );
            (t, q, min, max, r.buffer)
        })
        .collect()
}

fn settle(store: &MessageStore) {
    assert!(store.wait_dispatched(store.commitlog_max_offset(), Duration::from_secs(10)));
}

#[test]
fn a_slave_builds_the_same_queues_and_index_from_replicated_bytes() {
    let d = tempfile::tempdir().unwrap();
    let master = MessageStore::open(config(&d.path().join("m"))).unwrap();
    let slave = MessageStore::open(config(&d.path().join("s"))).unwrap();
    fill(&master, 0, 1200);
    assert!(master.commitlog_max_offset() > 3 * FILE_SIZE as i64);
    // Odd chunks: most end inside a record, which dispatch must wait for, not skip.
    replicate(&master, &slave, 997);
    fill(&master, 1200, 100);
    replicate(&master, &slave, 32 * 1024);
    settle(&master);
    settle(&slave);
    assert_eq!(slave.commitlog_max_offset(), master.commitlog_max_offset());
    assert_eq!(queue_view(&slave), queue_view(&master));
    let found = slave.query_by_key("Topic", "key-401", 4, 0, i64::MAX);
    assert_eq!(found.records.len(), 1);
    let rec = message::decode(&found.records[0], true).unwrap();
    assert!(rec.body.starts_with(b"message-00401-"));
    master.shutdown().unwrap();
    slave.shutdown().unwrap();
    assert_eq!(
        files(&d.path().join("s"), "commitlog"),
        files(&d.path().join("m"), "commitlog")
    );
    assert_eq!(
        files(&d.path().join("s"), "consumequeue"),
        files(&d.path().join("m"), "consumequeue")
    );
}

#[test]
fn a_slave_cut_inside_a_record_recovers_to_a_boundary_and_resumes() {
    for crashed in [true, false] {
        let d = tempfile::tempdir().unwrap();
        let master = MessageStore::open(config(&d.path().join("m"))).unwrap();
        let slave = MessageStore::open(config(&d.path().join("s"))).unwrap();
        fill(&master, 0, 300);
        // Stop the copy inside a record.
        let mut at = 0;
        while at < master.commitlog_max_offset() / 2 {
            let bytes = master.read_commitlog(at, 1001).unwrap();
            slave.append_commitlog(at, &bytes).unwrap();
            at += bytes.len() as i64;
        }
        // The files end at the last whole record; the rest waited in memory and is lost.
        let cut = slave.commitlog_max_offset();
        assert!(cut <= at && at - cut < 1001 + 600, "{cut} {at}");
        settle(&slave);
        slave.shutdown().unwrap();
        drop(slave);
        if crashed {
            std::fs::write(d.path().join("s").join("abort"), b"").unwrap();
        }
        let slave = MessageStore::open(config(&d.path().join("s"))).unwrap();
        let end = slave.commitlog_max_offset();
        assert_eq!(end, cut);
        // `end` is where a record of the master starts.
        assert!(
            master.lookup(end).is_some(),
            "recovered to {end}, not a record boundary"
        );
        if crashed {
            assert_eq!(slave.recovery_report().last_shutdown, LastShutdown::Crashed);
        }
        replicate(&master, &slave, 4096);
        settle(&master);
        settle(&slave);
        assert_eq!(queue_view(&slave), queue_view(&master), "crashed={crashed}");
        master.shutdown().unwrap();
        slave.shutdown().unwrap();
        assert_eq!(
            files(&d.path().join("s"), "commitlog"),
            files(&d.path().join("m"), "commitlog")
        );
    }
}

#[test]
fn an_append_not_at_the_end_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let master = MessageStore::open(config(&d.path().join("m"))).unwrap();
    let slave = MessageStore::open(config(&d.path().join("s"))).unwrap();
    fill(&master, 0, 50);
    let bytes = master.read_commitlog(0, 500).unwrap();
    slave.append_commitlog(0, &bytes).unwrap();
    let e = slave.append_commitlog(1000, &bytes).unwrap_err();
    assert!(matches!(
        e,
        StoreError::ReplicaOffset {
            offset: 1000,
            log_end: 500,
            ..
        }
    ));
    assert!(e.to_string().contains("offset 1000"), "{e}");
    assert!(e.to_string().contains("ends at 500"), "{e}");
}

#[test]
fn a_slave_store_refuses_puts_and_takes_replicated_bytes() {
    let d = tempfile::tempdir().unwrap();
    let master = MessageStore::open(config(&d.path().join("m"))).unwrap();
    let slave = MessageStore::open(config(&d.path().join("s"))).unwrap();
    slave.set_slave(true);
    fill(&master, 0, 20);
    let e = slave
        .put(&MessageRef {
            topic: "Topic",
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: "127.0.0.1:4000".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"no",
            properties: b"",
        })
        .unwrap_err();
    assert!(matches!(e, StoreError::Slave), "{e}");
    replicate(&master, &slave, 32 * 1024);
    assert_eq!(slave.commitlog_max_offset(), master.commitlog_max_offset());
    slave.set_slave(false);
    fill(&slave, 20, 1);
}
