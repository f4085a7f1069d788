//! The populating thread: only SYNC_FLUSH has one (writing zeros ahead at normal priority);
//! ASYNC_FLUSH appends with write(2) and prepares no pages (one test: it reads every thread of
//! the process).

use rmq_store::config::FlushDiskType;
use rmq_store::{MessageStore, StoreConfig};

/// The scheduling policy of each of this process's threads named `name` (field 41 of stat).
fn policies(name: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = t.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        // Fields from the third on: the policy is field 41.
        out.push(after.split(' ').nth(41 - 3).unwrap().parse().unwrap());
    }
    out
}

#[test]
fn zeros_are_written_ahead_at_normal_priority_and_only_with_sync_flush() {
    for (flush, want) in [
        (FlushDiskType::AsyncFlush, vec![]),
        (FlushDiskType::SyncFlush, vec![libc::SCHED_OTHER as u32]),
    ] {
        let d = tempfile::tempdir().unwrap();
        let mut cfg = StoreConfig::with_root(d.path());
        cfg.mapped_file_size_commit_log = 1 << 20;
        cfg.flush_disk_type = flush;
        let store = MessageStore::open(cfg).unwrap();
        // The thread sets its class as it starts.
        let mut seen = policies("rmq-populate");
        for _ in 0..100 {
            if seen == want {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            seen = policies("rmq-populate");
        }
        assert_eq!(seen, want, "{flush:?}");
        store.shutdown().unwrap();
        drop(store);
    }
}
