//! Whole-store tests: recovery after torn tails, damaged records and lost ConsumeQueues,
//! and retention.

use std::path::Path;
use std::time::Duration;

use rmq_store::message::{self, MessageRef};
use rmq_store::store::LastShutdown;
use rmq_store::{GetMessageStatus, GetRequest, GetResult, MessageStore, StoreConfig, StoreError};

fn config(root: &Path) -> StoreConfig {
    let mut c = StoreConfig::with_root(root);
    c.mapped_file_size_commit_log = 64 * 1024;
    c.mapped_file_size_consume_queue = 20 * 100;
    c.max_hash_slot_num = 101;
    c.max_index_num = 400;
    // What retention deletes, and whether writes are refused, must not follow how full the
    // host's disk is: these tests are not about the disk (`retention::cleaning`).
    c.disk_max_used_space_ratio = 100;
    c.disk_space_clean_forcibly_ratio = 100;
    c.disk_space_warning_level_ratio = 100;
    c
}

fn msg<'a>(topic: &'a str, qid: i32, body: &'a [u8], props: &'a [u8]) -> MessageRef<'a> {
    MessageRef {
        topic,
        queue_id: qid,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: "127.0.0.1:4000".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties: props,
    }
}

fn fill(store: &MessageStore, n: usize) -> Vec<rmq_store::commitlog::AppendResult> {
    let mut out = Vec::new();
    for i in 0..n {
        let body = format!("message-{i:05}-").repeat(1 + i % 9);
        let props = format!("KEYS\u{1}key-{i}\u{2}TAGS\u{1}T{}", i % 3);
        out.push(
            store
                .put(&msg(
                    "Topic",
                    (i % 2) as i32,
                    body.as_bytes(),
                    props.as_bytes(),
                ))
                .unwrap(),
        );
    }
    assert!(store.wait_dispatched(store.commitlog_max_offset(), Duration::from_secs(5)));
    out
}

/// Up to 32 messages of a queue from `offset`, unfiltered.
fn get(store: &MessageStore, topic: &str, qid: i32, offset: i64) -> GetResult {
    store.get_message(&GetRequest {
        topic,
        queue_id: qid,
        offset,
        max_msgs: 32,
        max_bytes: 0,
        filter: None,
        sql: None,
    })
}

fn read_all(store: &MessageStore, topic: &str, qid: i32) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut off = store.min_offset_in_queue(topic, qid);
    loop {
        let r = get(store, topic, qid, off);
        if r.status != GetMessageStatus::Found {
            break;
        }
        let mut pos = 0;
        while pos < r.buffer.len() {
            let rec = message::decode(&r.buffer[pos..], true).unwrap();
            out.push(rec.body.to_vec());
            pos += rec.total_size as usize;
        }
        off = r.next_begin_offset;
    }
    out
}

fn commitlog_file(root: &Path, offset: i64, size: u64) -> std::path::PathBuf {
    let base = offset as u64 / size * size;
    root.join("commitlog").join(format!("{base:020}"))
}

fn patch(path: &Path, at: usize, bytes: &[u8]) {
    let mut data = std::fs::read(path).unwrap();
    data[at..at + bytes.len()].copy_from_slice(bytes);
    std::fs::write(path, data).unwrap();
}

#[test]
fn torn_tail_is_truncated_after_a_crash() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path());
    let store = MessageStore::open(cfg.clone()).unwrap();
    let written = fill(&store, 150);
    let end = store.commitlog_max_offset();
    store.shutdown().unwrap();
    drop(store);
    // A crash while writing the next record: its first 40 bytes made it to the page.
    let partial = {
        let mut v = vec![0u8; 40];
        v[..4].copy_from_slice(&500i32.to_be_bytes());
        v[4..8].copy_from_slice(&message::MESSAGE_MAGIC_CODE.to_be_bytes());
        v
    };
    let file = commitlog_file(d.path(), end, cfg.mapped_file_size_commit_log);
    patch(
        &file,
        (end as u64 % cfg.mapped_file_size_commit_log) as usize,
        &partial,
    );
    std::fs::write(d.path().join("abort"), b"").unwrap();

    let store = MessageStore::open(cfg.clone()).unwrap();
    assert_eq!(store.recovery_report().last_shutdown, LastShutdown::Crashed);
    assert_eq!(store.commitlog_max_offset(), end);
    assert_eq!(read_all(&store, "Topic", 0).len(), 75);
    assert_eq!(read_all(&store, "Topic", 1).len(), 75);
    let next = store.put(&msg("Topic", 0, b"after", b"")).unwrap();
    assert_eq!(next.physical_offset, end);
    assert_eq!(next.queue_offset, 75);
    assert_eq!(written.len(), 150);
}

#[test]
fn flipped_byte_in_last_record_drops_it_and_its_queue_unit() {
    for crashed in [true, false] {
        let d = tempfile::tempdir().unwrap();
        let cfg = config(d.path());
        let store = MessageStore::open(cfg.clone()).unwrap();
        let written = fill(&store, 41);
        store.shutdown().unwrap();
        drop(store);
        let last = written.last().unwrap();
        let file = commitlog_file(
            d.path(),
            last.physical_offset,
            cfg.mapped_file_size_commit_log,
        );
        let pos = (last.physical_offset as u64 % cfg.mapped_file_size_commit_log) as usize;
        // A byte inside the body (after the 84-byte fixed head and the 4-byte length).
        let mut data = std::fs::read(&file).unwrap();
        data[pos + 90] ^= 0x20;
        std::fs::write(&file, data).unwrap();
        if crashed {
            std::fs::write(d.path().join("abort"), b"").unwrap();
        }
        let store = MessageStore::open(cfg.clone()).unwrap();
        assert_eq!(store.commitlog_max_offset(), last.physical_offset);
        // Message 40 went to queue 0: it is gone, and its unit with it.
        assert_eq!(store.max_offset_in_queue("Topic", 0), 20);
        assert_eq!(read_all(&store, "Topic", 0).len(), 20);
        assert_eq!(read_all(&store, "Topic", 1).len(), 20);
        let r = store.put(&msg("Topic", 0, b"replacement", b"")).unwrap();
        assert_eq!(
            (r.queue_offset, r.physical_offset),
            (20, last.physical_offset)
        );
        assert!(store.lookup(last.physical_offset).is_some());
    }
}

#[test]
fn deleted_consume_queues_are_rebuilt() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path());
    let store = MessageStore::open(cfg.clone()).unwrap();
    fill(&store, 300);
    store.shutdown().unwrap();
    drop(store);
    let cq_file = d.path().join("consumequeue/Topic/1/00000000000000000000");
    let before = std::fs::read(&cq_file).unwrap();
    std::fs::remove_dir_all(d.path().join("consumequeue")).unwrap();

    let store = MessageStore::open(cfg.clone()).unwrap();
    assert_eq!(store.max_offset_in_queue("Topic", 0), 150);
    assert_eq!(store.max_offset_in_queue("Topic", 1), 150);
    store.shutdown().unwrap();
    let after = std::fs::read(&cq_file).unwrap();
    assert_eq!(before, after, "rebuilt ConsumeQueue file is byte-identical");
}

#[test]
fn lagging_consume_queue_is_completed_after_a_crash() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path());
    let store = MessageStore::open(cfg.clone()).unwrap();
    fill(&store, 60);
    store.shutdown().unwrap();
    drop(store);
    // The crash happened before the last 10 units of queue 1 reached the file.
    let cq_file = d.path().join("consumequeue/Topic/1/00000000000000000000");
    patch(&cq_file, 20 * 20, &[0u8; 20 * 10]);
    std::fs::write(d.path().join("abort"), b"").unwrap();
    let store = MessageStore::open(cfg).unwrap();
    assert_eq!(store.max_offset_in_queue("Topic", 1), 30);
    assert_eq!(read_all(&store, "Topic", 1).len(), 30);
}

#[test]
fn index_survives_restart_and_finds_keys() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path());
    let store = MessageStore::open(cfg.clone()).unwrap();
    let written = fill(&store, 500);
    store.shutdown().unwrap();
    drop(store);
    let store = MessageStore::open(cfg).unwrap();
    let q = store.query_by_key("Topic", "key-321", 10, 0, i64::MAX);
    assert_eq!(q.records.len(), 1);
    let rec = message::decode(&q.records[0], true).unwrap();
    assert_eq!(rec.physical_offset, written[321].physical_offset);
    // More than one index file was needed (400 entries each).
    assert!(std::fs::read_dir(d.path().join("index")).unwrap().count() >= 2);
    assert!(store
        .query_by_key("Other", "key-321", 10, 0, i64::MAX)
        .records
        .is_empty());
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

fn be_i64(bytes: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(bytes[at..at + 8].try_into().unwrap())
}

#[test]
fn an_index_that_stopped_growing_is_synced_and_kept_after_a_crash() {
    let d = tempfile::tempdir().unwrap();
    let mut cfg = config(d.path());
    cfg.flush_interval_consume_queue = 10;
    let store = MessageStore::open(cfg.clone()).unwrap();
    fill(&store, 300);
    // One IndexFile, being written (400 entries each). Once it stops growing the background
    // round syncs it and the checkpoint's indexMsgTimestamp reaches its endTimestamp.
    let index_file = std::fs::read_dir(d.path().join("index"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let end = be_i64(&std::fs::read(&index_file).unwrap(), 8);
    assert!(end > 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while be_i64(&std::fs::read(d.path().join("checkpoint")).unwrap(), 16) != end {
        assert!(
            std::time::Instant::now() < deadline,
            "the idle IndexFile was never synced"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The files as a crash would leave them (the store still running): the IndexFile ends
    // at the checkpoint, so recovery keeps it, and the oldest keys are still found.
    let crashed = tempfile::tempdir().unwrap();
    copy_dir(d.path(), crashed.path());
    std::fs::write(crashed.path().join("abort"), b"").unwrap();
    store.shutdown().unwrap();
    drop(store);
    let store = MessageStore::open(config(crashed.path())).unwrap();
    for key in ["key-0", "key-1", "key-299"] {
        assert_eq!(
            store
                .query_by_key("Topic", key, 10, 0, i64::MAX)
                .records
                .len(),
            1,
            "{key}"
        );
    }
}

#[test]
fn a_disk_above_the_used_ratio_loses_only_expired_files() {
    let d = tempfile::tempdir().unwrap();
    // diskMaxUsedSpaceRatio is read as at least 10%.
    if !disk_fuller_than(d.path(), 10.0) {
        return;
    }
    let mut cfg = config(d.path());
    cfg.disk_max_used_space_ratio = 10;
    cfg.clean_resource_interval = 10;
    cfg.delete_commit_log_files_interval = 0;
    let store = MessageStore::open(cfg.clone()).unwrap();
    fill(&store, 2000);
    assert!(store.commitlog_max_offset() > 3 * cfg.mapped_file_size_commit_log as i64);
    // Above diskMaxUsedSpaceRatio alone: rounds run (every 10 ms) but nothing is 72 h old.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(store.commitlog_min_offset(), 0);
    assert_eq!(read_all(&store, "Topic", 0).len(), 1000);
    store.shutdown().unwrap();
    drop(store);
    // Above diskSpaceCleanForciblyRatio too: the oldest files go, expired or not, and say so.
    cfg.disk_space_clean_forcibly_ratio = 1;
    let store = MessageStore::open(cfg).unwrap();
    wait_for_retention(&store, |m| m.contains("diskSpaceCleanForciblyRatio 1%"));
    assert!(store.commitlog_min_offset() > 0);
    assert!(read_all(&store, "Topic", 0).len() < 1000);
}

#[test]
fn a_manual_request_deletes_expired_files_at_any_hour() {
    let d = tempfile::tempdir().unwrap();
    let mut cfg = config(d.path());
    cfg.clean_resource_interval = 10;
    cfg.delete_commit_log_files_interval = 0;
    cfg.file_reserved_time = 0; // every file is expired at once
    cfg.delete_when = "99".into(); // never the hour
    let store = MessageStore::open(cfg).unwrap();
    fill(&store, 2000);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        store.commitlog_min_offset(),
        0,
        "not the hour, no request: nothing goes"
    );
    store.delete_files_manually();
    wait_for_retention(&store, |m| m.starts_with("deleted"));
    assert!(store.commitlog_min_offset() > 0);
    wait_for_retention(&store, |m| m.contains("asked to delete expired files"));
}

#[test]
fn unused_topics_and_expired_queues_are_cleaned_as_rocketmq_does() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path());
    let store = MessageStore::open(cfg).unwrap();
    fill(&store, 2000); // "Topic", queues 0 and 1, over several CommitLog files
    for t in ["Kept", "Gone", message::SCHEDULE_TOPIC, "%LMQ%x"] {
        store.put(&msg(t, 0, b"x", b"")).unwrap();
    }
    assert!(store.wait_dispatched(store.commitlog_max_offset(), Duration::from_secs(5)));
    let keep: std::collections::HashSet<String> =
        ["Topic", "Kept"].iter().map(|s| s.to_string()).collect();
    assert_eq!(
        store.clean_unused_topics(&keep).unwrap(),
        vec!["Gone".to_string()]
    );
    let mut left = store.queues();
    left.sort();
    let names: Vec<&str> = left.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        names,
        ["%LMQ%x", "Kept", message::SCHEDULE_TOPIC, "Topic", "Topic"]
    );
    assert!(!d.path().join("consumequeue/Gone").exists());
    assert_eq!(
        store
            .put(&msg("Gone", 0, b"again", b""))
            .unwrap()
            .queue_offset,
        0
    );
    // Nothing expired yet.
    assert!(store.clean_expired_queues().unwrap().is_empty());
    // Every file but the last deleted: queue 1 of "Topic" and "Kept" get messages in the
    // last file, queue 0 not; SCHEDULE_TOPIC_XXXX stays whatever it holds.
    let big = vec![b'q'; 1024];
    let mut one = store.put(&msg("Topic", 1, &big, b"")).unwrap();
    for _ in 0..100 {
        one = store.put(&msg("Topic", 1, &big, b"")).unwrap(); // 100 KiB: a new file
    }
    store.put(&msg("Kept", 0, b"late", b"")).unwrap();
    assert!(store.wait_dispatched(store.commitlog_max_offset(), Duration::from_secs(5)));
    assert!(store.delete_expired_files(0, true).unwrap() > 0);
    let removed = store.clean_expired_queues().unwrap();
    assert!(removed.contains(&("Topic".to_string(), 0)), "{removed:?}");
    assert!(!removed.contains(&("Topic".to_string(), 1)), "{removed:?}");
    assert!(!removed
        .iter()
        .any(|(t, _)| t == message::SCHEDULE_TOPIC || t == "Kept"));
    assert!(!d.path().join("consumequeue/Topic/0").exists());
    assert!(d.path().join("consumequeue/Topic/1").exists());
    let said = journal_has(&store, "clean-expired-queue");
    assert_eq!(said.len(), 1, "{said:?}");
    // The queue starts again at 0; the other keeps counting.
    assert_eq!(
        store
            .put(&msg("Topic", 0, b"new", b""))
            .unwrap()
            .queue_offset,
        0
    );
    assert_eq!(
        store
            .put(&msg("Topic", 1, b"next", b""))
            .unwrap()
            .queue_offset,
        one.queue_offset + 1
    );
}

#[test]
fn retention_deletes_old_files_and_queue_heads() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path());
    let store = MessageStore::open(cfg.clone()).unwrap();
    fill(&store, 2000);
    // Files in use (the directory may also hold a preallocated next file).
    let size = cfg.mapped_file_size_commit_log as i64;
    let in_use = (store.commitlog_max_offset() / size + 1) as usize;
    assert!(in_use >= 4);
    // Nothing is older than 1 hour.
    assert_eq!(store.delete_expired_files(3_600_000, false).unwrap(), 0);
    let deleted = store.delete_expired_files(0, false).unwrap();
    assert_eq!(deleted, in_use - 1, "all but the current file");
    assert_eq!(store.commitlog_min_offset(), (in_use as i64 - 1) * size);
    let names: Vec<String> = std::fs::read_dir(d.path().join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.len() == 20)
        .collect();
    assert!(names.contains(&format!("{:020}", (in_use as i64 - 1) * size)));
    assert!(names.len() <= 2);
    let min = store.commitlog_min_offset();
    assert!(min > 0);
    let qmin = store.min_offset_in_queue("Topic", 0);
    assert!(qmin > 0);
    let r = get(&store, "Topic", 0, 0);
    assert_eq!(r.status, GetMessageStatus::OffsetTooSmall);
    assert_eq!(r.next_begin_offset, qmin);
    assert!(!read_all(&store, "Topic", 0).is_empty());
    // CQ files wholly below the new minimum are gone.
    let cq_files = std::fs::read_dir(d.path().join("consumequeue/Topic/0"))
        .unwrap()
        .count();
    assert!(cq_files < 3);
    store.shutdown().unwrap();
    drop(store);
    // And the store reopens on the shortened log.
    let store = MessageStore::open(cfg).unwrap();
    assert_eq!(store.commitlog_min_offset(), min);
    assert_eq!(store.min_offset_in_queue("Topic", 0), qmin);
}

#[test]
fn writes_are_refused_above_the_disk_ratio() {
    let d = tempfile::tempdir().unwrap();
    let mut cfg = config(d.path());
    cfg.disk_space_warning_level_ratio = 1;
    if !disk_fuller_than(d.path(), 1.0) {
        return;
    }
    let store = MessageStore::open(cfg).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !store.is_disk_full() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    match store.put(&msg("T", 0, b"x", b"")) {
        Err(StoreError::DiskFull { limit_percent, .. }) => assert_eq!(limit_percent, 1),
        other => panic!("expected DiskFull, got {other:?}"),
    }
}

#[test]
fn a_second_open_is_refused_and_bad_config_reported() {
    let d = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(d.path())).unwrap();
    assert!(matches!(
        MessageStore::open(config(d.path())),
        Err(StoreError::Locked(_))
    ));
    drop(store);
    let mut bad = config(d.path());
    bad.mapped_file_size_consume_queue = 30;
    assert!(matches!(
        MessageStore::open(bad),
        Err(StoreError::Config(_))
    ));
    // A commitlog file of the wrong size is reported, not a crash.
    let mut cfg = config(d.path());
    cfg.mapped_file_size_commit_log = 128 * 1024;
    let s = MessageStore::open(config(d.path())).unwrap();
    s.put(&msg("T", 0, b"x", b"")).unwrap();
    s.shutdown().unwrap();
    drop(s);
    assert!(matches!(
        MessageStore::open(cfg),
        Err(StoreError::Corrupt { .. })
    ));
}

/// Whether the filesystem of `dir` is more than `percent` used, which a test of a disk ratio
/// needs; on a nearly empty one (a fresh tmpfs as TMPDIR) it says it is skipped.
fn disk_fuller_than(dir: &Path, percent: f64) -> bool {
    let used = rmq_store::disk::disk_used_percent(dir).unwrap_or(0.0);
    if used <= percent {
        eprintln!(
            "skipped: the disk of {} is only {used:.2}% used",
            dir.display()
        );
    }
    used > percent
}

/// Wait (up to 10 s) until retention journals an entry `says`; fail naming what it journaled.
fn wait_for_retention(store: &MessageStore, says: impl Fn(&str) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let said = || journal_has(store, "retention").iter().any(|m| says(m));
    while !said() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(said(), "{:?}", journal_has(store, "retention"));
}

fn journal_has(store: &MessageStore, kind: &str) -> Vec<String> {
    store
        .journal()
        .all()
        .into_iter()
        .filter(|e| e.kind == kind)
        .map(|e| e.message)
        .collect()
}

/// Bodies of `fill(n)`'s messages of queue `qid`, in order, skipping indexes in `gone`.
fn expected_bodies(n: usize, qid: usize, gone: &[usize]) -> Vec<Vec<u8>> {
    (0..n)
        .filter(|i| i % 2 == qid && !gone.contains(i))
        .map(|i| format!("message-{i:05}-").repeat(1 + i % 9).into_bytes())
        .collect()
}

#[test]
fn damage_in_the_middle_keeps_every_intact_record_after_it() {
    // A flipped body byte (CRC) and a flipped size field, after clean and unclean shutdowns.
    for (crashed, field_offset) in [(false, 90usize), (true, 90), (false, 1), (true, 1)] {
        let d = tempfile::tempdir().unwrap();
        let cfg = config(d.path());
        let store = MessageStore::open(cfg.clone()).unwrap();
        let n = 700;
        let written = fill(&store, n);
        let end = store.commitlog_max_offset();
        store.shutdown().unwrap();
        drop(store);
        // Damage record 650: in the last files, which every start scans.
        let victim = written[650];
        let file = commitlog_file(
            d.path(),
            victim.physical_offset,
            cfg.mapped_file_size_commit_log,
        );
        let pos = (victim.physical_offset as u64 % cfg.mapped_file_size_commit_log) as usize;
        let mut data = std::fs::read(&file).unwrap();
        data[pos + field_offset] ^= 0x40;
        std::fs::write(&file, data).unwrap();
        if crashed {
            std::fs::write(d.path().join("abort"), b"").unwrap();
        }

        let store = MessageStore::open(cfg.clone()).unwrap();
        assert_eq!(
            store.commitlog_max_offset(),
            end,
            "nothing after the damage is cut"
        );
        assert_eq!(read_all(&store, "Topic", 0), expected_bodies(n, 0, &[650]));
        assert_eq!(read_all(&store, "Topic", 1), expected_bodies(n, 1, &[650]));
        let damage = journal_has(&store, "commitlog-damage");
        assert_eq!(damage.len(), 1, "{damage:?}");
        let range = format!(
            "[{}, {})",
            victim.physical_offset,
            victim.physical_offset + victim.size as i64
        );
        assert!(damage[0].contains(&range), "{damage:?} lacks {range}");
        assert!(journal_has(&store, "torn-tail").is_empty());
        // The queues' units from the damage on were dropped and dispatched again.
        assert_eq!(journal_has(&store, "consumequeue-truncate").len(), 1);
        // New messages go after the intact ones, never over them; queue offsets continue.
        let r = store.put(&msg("Topic", 0, b"after", b"")).unwrap();
        assert_eq!(r.physical_offset, end);
        assert_eq!(r.queue_offset, 350);
        store.shutdown().unwrap();
        drop(store);
        // The next clean start still serves everything once.
        let store = MessageStore::open(cfg).unwrap();
        // Queue 0: 349 intact messages and the new one; queue 1 untouched.
        assert_eq!(read_all(&store, "Topic", 0).len(), 350);
        assert_eq!(read_all(&store, "Topic", 1), expected_bodies(n, 1, &[]));
    }
}

#[test]
fn one_deleted_consume_queue_is_rebuilt_after_a_clean_shutdown() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path());
    let store = MessageStore::open(cfg.clone()).unwrap();
    fill(&store, 300);
    store.shutdown().unwrap();
    drop(store);
    std::fs::remove_dir_all(d.path().join("consumequeue/Topic/1")).unwrap();

    let store = MessageStore::open(cfg.clone()).unwrap();
    assert_eq!(read_all(&store, "Topic", 1), expected_bodies(300, 1, &[]));
    assert_eq!(read_all(&store, "Topic", 0), expected_bodies(300, 0, &[]));
    let found = journal_has(&store, "rebuild");
    assert!(
        found.iter().any(|m| m.contains("Topic-1 is missing")),
        "{found:?}"
    );
    let r = store.put(&msg("Topic", 1, b"next", b"")).unwrap();
    assert_eq!(r.queue_offset, 150);
}

#[test]
fn short_and_inconsistent_consume_queues_are_rebuilt() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path());
    let store = MessageStore::open(cfg.clone()).unwrap();
    fill(&store, 300);
    store.shutdown().unwrap();
    drop(store);
    // Queue 1's last unit points at queue 0's last record (a later one, so the queue's own
    // recovery, which checks that offsets grow, keeps it); queue 0's second file is cut in
    // the middle of a unit.
    let q0 = d.path().join("consumequeue/Topic/0/00000000000000002000");
    let q0_last = std::fs::read(&q0).unwrap()[49 * 20..50 * 20].to_vec();
    let q1 = d.path().join("consumequeue/Topic/1/00000000000000002000");
    patch(&q1, 49 * 20, &q0_last);
    let len = std::fs::metadata(&q0).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&q0)
        .unwrap()
        .set_len(len / 2 - 15)
        .unwrap();

    let store = MessageStore::open(cfg).unwrap();
    assert_eq!(read_all(&store, "Topic", 0), expected_bodies(300, 0, &[]));
    assert_eq!(read_all(&store, "Topic", 1), expected_bodies(300, 1, &[]));
    let found = journal_has(&store, "rebuild");
    assert!(
        found.iter().any(|m| m.contains("Topic-0 is short")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|m| m.contains("Topic-1 disagrees")),
        "{found:?}"
    );
    assert_eq!(journal_has(&store, "short-file").len(), 1);
}

#[test]
fn a_deleted_index_is_rebuilt() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path());
    let store = MessageStore::open(cfg.clone()).unwrap();
    let written = fill(&store, 300);
    store.shutdown().unwrap();
    drop(store);
    std::fs::remove_dir_all(d.path().join("index")).unwrap();
    let store = MessageStore::open(cfg).unwrap();
    let q = store.query_by_key("Topic", "key-17", 10, 0, i64::MAX);
    assert_eq!(q.records.len(), 1);
    assert_eq!(
        message::decode(&q.records[0], true)
            .unwrap()
            .physical_offset,
        written[17].physical_offset
    );
    assert!(!journal_has(&store, "rebuild").is_empty());
}

#[test]
fn a_short_last_commitlog_file_is_recovered() {
    for crashed in [false, true] {
        let d = tempfile::tempdir().unwrap();
        let cfg = config(d.path());
        let store = MessageStore::open(cfg.clone()).unwrap();
        let written = fill(&store, 700);
        store.shutdown().unwrap();
        drop(store);
        let size = cfg.mapped_file_size_commit_log;
        let last = written.last().unwrap();
        let file = commitlog_file(d.path(), last.physical_offset, size);
        // Cut the last file inside record 690.
        let cut = written[690].physical_offset as u64 % size + 30;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .unwrap()
            .set_len(cut)
            .unwrap();
        if crashed {
            std::fs::write(d.path().join("abort"), b"").unwrap();
        }
        let store = MessageStore::open(cfg.clone()).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().len(), size);
        assert_eq!(store.commitlog_max_offset(), written[690].physical_offset);
        let gone: Vec<usize> = (690..700).collect();
        assert_eq!(read_all(&store, "Topic", 0), expected_bodies(700, 0, &gone));
        assert_eq!(read_all(&store, "Topic", 1), expected_bodies(700, 1, &gone));
        assert_eq!(journal_has(&store, "short-file").len(), 1);
        assert_eq!(journal_has(&store, "torn-tail").len(), 1);
        let r = store.put(&msg("Topic", 0, b"after", b"")).unwrap();
        assert_eq!(r.physical_offset, written[690].physical_offset);
        assert_eq!(r.queue_offset, 345);
    }
}

#[test]
fn moved_queue_index_checkpoint_and_abort_paths_are_honoured() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    let elsewhere = d.path().join("elsewhere");
    let mut cfg = config(&root);
    cfg.store_path_commit_log = Some(elsewhere.join("cl"));
    cfg.store_path_consume_queue = Some(elsewhere.join("cq"));
    cfg.store_path_index = Some(elsewhere.join("idx"));
    cfg.store_checkpoint = Some(elsewhere.join("meta").join("cp"));
    cfg.abort_file = Some(elsewhere.join("marks").join("abort"));
    for key in [
        "storePathConsumeQueue",
        "storePathIndex",
        "storeCheckpoint",
        "abortFile",
    ] {
        assert!(StoreConfig::KEYS.contains(&key), "{key}");
    }

    let store = MessageStore::open(cfg.clone()).unwrap();
    assert!(
        elsewhere.join("marks").join("abort").exists(),
        "abort marker while open"
    );
    fill(&store, 40);
    store.shutdown().unwrap();
    drop(store);
    assert!(
        !elsewhere.join("marks").join("abort").exists(),
        "removed at a clean stop"
    );
    assert_eq!(
        std::fs::metadata(elsewhere.join("meta").join("cp"))
            .unwrap()
            .len(),
        4096
    );
    assert!(elsewhere.join("cq").join("Topic").join("0").is_dir());
    assert!(std::fs::read_dir(elsewhere.join("idx")).unwrap().count() > 0);
    for default in ["consumequeue", "index", "checkpoint", "abort", "commitlog"] {
        assert!(
            !root.join(default).exists(),
            "{default} written under the root"
        );
    }

    // A crash is told by the moved abort file, and recovery uses the moved queues and index.
    std::fs::write(elsewhere.join("marks").join("abort"), b"").unwrap();
    let store = MessageStore::open(cfg.clone()).unwrap();
    assert_eq!(store.recovery_report().last_shutdown, LastShutdown::Crashed);
    assert_eq!(read_all(&store, "Topic", 0).len(), 20);
    assert_eq!(read_all(&store, "Topic", 1).len(), 20);
    let found = store.query_by_key("Topic", "key-7", 10, 0, i64::MAX);
    assert_eq!(found.records.len(), 1);
    store.shutdown().unwrap();
}

/// Every unit of every queue of `topic` reads a record of `topic` stored at that queue offset,
/// and each queue ends where the CommitLog's count for it goes on.
fn assert_queues_match_the_log(store: &MessageStore, topic: &str, queues: i32) {
    for qid in 0..queues {
        let end = store.max_offset_in_queue(topic, qid);
        assert_eq!(
            end,
            store.commitlog().next_queue_offset(topic, qid),
            "{topic}-{qid} ends where the CommitLog counts from"
        );
        let mut off = store.min_offset_in_queue(topic, qid);
        while off < end {
            let r = store.get_message(&GetRequest {
                topic,
                queue_id: qid,
                offset: off,
                max_msgs: 1,
                max_bytes: 0,
                filter: None,
                sql: None,
            });
            assert_eq!(r.status, GetMessageStatus::Found, "{topic}-{qid} at {off}");
            let rec = message::decode(&r.buffer, true).unwrap();
            assert_eq!((rec.topic, rec.queue_offset), (topic, off));
            off = r.next_begin_offset;
        }
    }
}

#[test]
fn a_topic_deleted_while_it_is_sent_to_keeps_its_queues_and_the_log_in_step() {
    let d = tempfile::tempdir().unwrap();
    let mut cfg = config(d.path());
    cfg.mapped_file_size_commit_log = 4 << 20;
    let store = std::sync::Arc::new(MessageStore::open(cfg).unwrap());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sender = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let body = format!("hot-{i}");
                store.put(&msg("Hot", i % 4, body.as_bytes(), b"")).unwrap();
                i += 1;
                if i % 8 == 0 {
                    // A busy broker's pace, not a pace its dispatch could never keep up with.
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
            i
        })
    };
    let mut deleted = 0;
    for _ in 0..200 {
        std::thread::sleep(Duration::from_micros(500));
        store.delete_topic("Hot").unwrap();
        deleted += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = sender.join().unwrap();
    assert!(
        sent > 1000 && deleted == 200,
        "{sent} sends, {deleted} deletions"
    );
    // Messages sent after the last deletion are where their queue offsets say.
    let after: Vec<_> = (0..40)
        .map(|i| (i % 4, store.put(&msg("Hot", i % 4, b"after", b"")).unwrap()))
        .collect();
    assert!(store.wait_dispatched(store.commitlog_max_offset(), Duration::from_secs(5)));
    assert_queues_match_the_log(&store, "Hot", 4);
    for (qid, r) in &after {
        let at = store.get_message(&GetRequest {
            topic: "Hot",
            queue_id: *qid,
            offset: r.queue_offset,
            max_msgs: 1,
            max_bytes: 0,
            filter: None,
            sql: None,
        });
        assert_eq!(at.status, GetMessageStatus::Found);
        assert_eq!(message::decode(&at.buffer, true).unwrap().body, b"after");
    }
}

/// Two topics with their own retention times on one store: the shorter one's old messages stop
/// being served while the CommitLog keeps them for the longer one, which keeps its files
/// until its own time has passed.
#[test]
fn per_topic_retention_hides_short_topics_and_keeps_files_for_long_ones() {
    let d = tempfile::tempdir().unwrap();
    let mut cfg = config(d.path());
    cfg.clean_resource_interval = 3_600_000; // no background round meanwhile
    let size = cfg.mapped_file_size_commit_log as i64;
    let store = MessageStore::open(cfg).unwrap();
    let body = vec![b'x'; 1024];
    // Old messages: about 5 CommitLog files.
    for _ in 0..100 {
        for t in ["Short", "Long", "Plain"] {
            store.put(&msg(t, 0, &body, b"")).unwrap();
        }
    }
    std::thread::sleep(Duration::from_millis(1500));
    // New ones, in a later file.
    let mut long_new = i64::MAX;
    for _ in 0..10 {
        store.put(&msg("Short", 0, b"new", b"")).unwrap();
        let r = store.put(&msg("Long", 0, b"new", b"")).unwrap();
        long_new = long_new.min(r.physical_offset);
    }
    assert!(store.wait_dispatched(store.commitlog_max_offset(), Duration::from_secs(5)));
    assert!(long_new >= 4 * size, "{long_new}");
    store.set_topic_retention("Short", Some(1000));
    store.set_topic_retention("Long", Some(3_600_000));
    assert_eq!(
        store.topic_retention(),
        [("Long".to_string(), 3_600_000), ("Short".to_string(), 1000)]
    );

    // Short's 100 old messages are no longer served or counted; Long's and Plain's are.
    let done = store.expire_topics().unwrap();
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(
        (done[0].topic.as_str(), done[0].offsets, done[0].queues),
        ("Short", 100, 1)
    );
    assert_eq!(store.min_offset_in_queue("Short", 0), 100);
    assert_eq!(store.max_offset_in_queue("Short", 0), 110);
    let r = get(&store, "Short", 0, 0);
    assert_eq!(r.status, GetMessageStatus::OffsetTooSmall);
    assert_eq!(r.next_begin_offset, 100);
    assert_eq!(read_all(&store, "Short", 0), vec![b"new".to_vec(); 10]);
    assert_eq!(store.min_offset_in_queue("Long", 0), 0);
    assert_eq!(read_all(&store, "Long", 0).len(), 110);
    assert_eq!(read_all(&store, "Plain", 0).len(), 100);
    let said = journal_has(&store, "topic-retention");
    assert!(
        said[0].contains("topic Short") && said[0].contains("100 messages"),
        "{said:?}"
    );
    // A second round has nothing more to do.
    assert!(store.expire_topics().unwrap().is_empty());

    // Every file is older than a reserved time of 0, but Long needs them all.
    assert_eq!(store.delete_expired_files(0, false).unwrap(), 0);
    assert_eq!(store.commitlog_min_offset(), 0);
    assert_eq!(read_all(&store, "Plain", 0).len(), 100);

    // Long's time shrinks to 1 s: its old messages expire, the files before its new ones go
    // (whole), the file holding them stays.
    store.set_topic_retention("Long", Some(1000));
    let deleted = store.delete_expired_files(0, false).unwrap();
    assert_eq!(deleted as i64, long_new / size);
    assert_eq!(store.commitlog_min_offset(), long_new / size * size);
    // The deleted files took most of Long's old messages; the rest expire logically.
    let gone = store.min_offset_in_queue("Long", 0);
    assert!(gone > 0 && gone < 100, "{gone}");
    let done = store.expire_topics().unwrap();
    assert_eq!(
        (done[0].topic.as_str(), done[0].offsets),
        ("Long", 100 - gone)
    );
    assert_eq!(store.min_offset_in_queue("Long", 0), 100);
    assert_eq!(read_all(&store, "Long", 0), vec![b"new".to_vec(); 10]);
    assert!(read_all(&store, "Plain", 0).len() < 100);
    // A forced round ignores topic times.
    store.set_topic_retention("Long", Some(3_600_000));
    store.set_topic_retention("Short", None);
    assert_eq!(store.topic_retention().len(), 1);
    for _ in 0..70 {
        store.put(&msg("Plain", 0, &body, b"")).unwrap();
    }
    assert!(store.wait_dispatched(store.commitlog_max_offset(), Duration::from_secs(5)));
    assert_eq!(store.delete_expired_files(0, false).unwrap(), 0);
    assert!(store.delete_expired_files(0, true).unwrap() > 0);
    assert!(store.commitlog_min_offset() > long_new);
}

#[test]
fn records_naming_lmqs_are_dispatched_into_them_once() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config(d.path());
    let store = MessageStore::open(cfg.clone()).unwrap();
    let lmq_a = "%LMQ%$Parent$a";
    let lmq_b = "%LMQ%$Parent$b";
    let mut bodies_a = Vec::new();
    for i in 0..40 {
        let lmqs = if i % 4 == 0 {
            format!("{lmq_a},{lmq_b}")
        } else if i % 2 == 0 {
            lmq_a.to_string()
        } else {
            // Not LMQ names: not dispatched anywhere but the record's own queue.
            "NotAnLmq,%LMQ%".to_string()
        };
        if i % 2 == 0 {
            bodies_a.push(format!("m{i}").into_bytes());
        }
        let props = format!("INNER_MULTI_DISPATCH\u{1}{lmqs}\u{2}TAGS\u{1}T");
        let body = format!("m{i}");
        store
            .put(&msg("Parent", i % 3, body.as_bytes(), props.as_bytes()))
            .unwrap();
    }
    assert!(store.wait_dispatched(store.commitlog_max_offset(), Duration::from_secs(5)));
    assert_eq!(read_all(&store, lmq_a, 0), bodies_a);
    assert_eq!(store.max_offset_in_queue(lmq_a, 0), 20);
    assert_eq!(store.max_offset_in_queue(lmq_b, 0), 10);
    assert_eq!(store.max_offset_in_queue("NotAnLmq", 0), 0);
    // The parent's queues hold every record.
    let parent: usize = (0..3).map(|q| read_all(&store, "Parent", q).len()).sum();
    assert_eq!(parent, 40);
    // A record sent back to a retry or dead-letter topic, or waiting in a system topic, keeps the
    // property and is not dispatched into the LMQ again.
    let props = format!("INNER_MULTI_DISPATCH\u{1}{lmq_a}");
    for t in [
        "%DLQ%G",
        "%RETRY%G",
        "rmq_sys_wheel_timer",
        message::SCHEDULE_TOPIC,
    ] {
        store.put(&msg(t, 0, b"again", props.as_bytes())).unwrap();
    }
    assert!(store.wait_dispatched(store.commitlog_max_offset(), Duration::from_secs(5)));
    assert_eq!(store.max_offset_in_queue(lmq_a, 0), 20);
    store.shutdown().unwrap();

    // A lost LMQ ConsumeQueue is rebuilt from the CommitLog with the same offsets; one that
    // is there is not dispatched into twice.
    std::fs::remove_dir_all(d.path().join("consumequeue").join(lmq_b)).unwrap();
    let store = MessageStore::open(cfg.clone()).unwrap();
    assert!(store.wait_dispatched(store.commitlog_max_offset(), Duration::from_secs(5)));
    assert_eq!(read_all(&store, lmq_a, 0), bodies_a);
    assert_eq!(store.max_offset_in_queue(lmq_b, 0), 10);
    store.shutdown().unwrap();

    // With enableMultiDispatch off, records stay in their own queue only.
    let d2 = tempfile::tempdir().unwrap();
    let mut off = config(d2.path());
    off.set("enableMultiDispatch", "false").unwrap();
    let store = MessageStore::open(off).unwrap();
    let props = format!("INNER_MULTI_DISPATCH\u{1}{lmq_a}");
    store
        .put(&msg("Parent", 0, b"x", props.as_bytes()))
        .unwrap();
    assert!(store.wait_dispatched(store.commitlog_max_offset(), Duration::from_secs(5)));
    assert_eq!(store.max_offset_in_queue(lmq_a, 0), 0);
    assert_eq!(store.max_offset_in_queue("Parent", 0), 1);
}
