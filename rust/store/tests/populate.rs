//! The populating thread's scheduling class (one test: it reads every thread of the process).

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
fn pages_are_faulted_in_at_idle_priority_and_zeros_written_at_normal() {
    for (flush, want) in [
        (FlushDiskType::AsyncFlush, libc::SCHED_IDLE as u32),
        (FlushDiskType::SyncFlush, libc::SCHED_OTHER as u32),
    ] {
        let d = tempfile::tempdir().unwrap();
        let mut cfg = StoreConfig::with_root(d.path());
        cfg.mapped_file_size_commit_log = 1 << 20;
        cfg.flush_disk_type = flush;
        let store = MessageStore::open(cfg).unwrap();
        // The thread sets its class as it starts.
        let mut seen = policies("rmq-populate");
        for _ in 0..100 {
            if seen.len() == 1 && seen[0] == want {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            seen = policies("rmq-populate");
        }
        assert_eq!(seen, vec![want], "{flush:?}");
        store.shutdown().unwrap();
        drop(store);
    }
}
