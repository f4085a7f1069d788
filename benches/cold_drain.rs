//! Cold backlog drain (`cargo bench -p rmq-store --bench cold_drain`): how fast the pull path
//! (`MessageStore::get_message`, batches of 32 round-robin over 8 queues, as pulls from a
//! consumer catching up) reads a backlog that is not in the page cache, beside the disk's
//! sequential read rate measured in the same run, with the CommitLog's read-ahead on and off,
//! and the same drain warm.
//!
//! Steps: write `RMQ_COLD_MIB` (default 1536: a full 1 GiB file and part of the one being appended to) MiB of 1 KiB messages, shut the store down,
//! then for each measurement evict the CommitLog from the page cache (`fsync`, then
//! `POSIX_FADV_DONTNEED`: only this run's files, nothing else on the machine) and
//!
//! * disk: read the CommitLog files with `read(2)` in 1 MiB blocks (as `dd bs=1M`);
//! * drain: open the store, evict again (recovery read some of it), drain every queue.
//!
//! The figures are printed and written into the cold-drain section of `benches/RESULTS.md`.
//! `RMQ_BENCH_DIR` chooses the directory (default: `bench-data` in cargo's target directory,
//! found from this executable's path).

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rmq_store::message::MessageRef;
use rmq_store::{GetMessageStatus, GetRequest, MessageStore, StoreConfig};

const QUEUES: i32 = 8;
const BODY: usize = 1024;
const BATCH: u32 = 32;

fn bench_root() -> PathBuf {
    if let Some(d) = std::env::var_os("RMQ_BENCH_DIR") {
        return PathBuf::from(d);
    }
    // <target>/<profile>/deps/cold_drain-<hash>
    let exe = std::env::current_exe().expect("current_exe");
    exe.ancestors()
        .nth(3)
        .expect("bench executable outside a cargo target directory")
        .join("bench-data")
}

fn config(root: &Path) -> StoreConfig {
    StoreConfig {
        store_path_root_dir: root.to_path_buf(),
        ..StoreConfig::default()
    }
}

fn commitlog_files(root: &Path) -> Vec<PathBuf> {
    let dir = config(root).commit_log_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// fsync and drop from the page cache every CommitLog file (closed files only).
fn evict_files(root: &Path) {
    for p in commitlog_files(root) {
        let f = std::fs::File::open(&p).unwrap();
        f.sync_all().unwrap();
        // SAFETY: an advisory call on a descriptor we own.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(rc, 0, "posix_fadvise DONTNEED {}", p.display());
    }
}

/// Bytes of the log's first `data` bytes resident in the page cache (mincore over a fresh
/// mapping; the pages the store populates ahead of its appender are past the data).
fn resident(root: &Path, data: u64) -> u64 {
    let page = 4096u64;
    let mut total = 0;
    let mut left = data;
    for p in commitlog_files(root) {
        let f = std::fs::File::open(&p).unwrap();
        let len = (f.metadata().unwrap().len()).min(left) as usize;
        left -= len as u64;
        if len == 0 {
            break;
        }
        // SAFETY: a read-only shared mapping of a file we do not modify, unmapped below.
        let m = unsafe { memmap2::MmapOptions::new().len(len).map(&f) }.unwrap();
        let mut vec = vec![0u8; len.div_ceil(page as usize)];
        // SAFETY: vec has one byte per page of the mapping.
        let rc = unsafe { libc::mincore(m.as_ptr() as *mut _, len, vec.as_mut_ptr()) };
        assert_eq!(rc, 0);
        total += vec.iter().filter(|b| *b & 1 == 1).count() as u64 * page;
    }
    total
}

/// Sequential read(2) of the written part of every CommitLog file in `block` blocks, through
/// the page cache (with `POSIX_FADV_SEQUENTIAL`) or with `O_DIRECT`.
fn disk_read(store: &MessageStore, root: &Path, data: u64, block: usize, direct: bool) -> f64 {
    // The store's own mappings first: pages mapped by a process stay cached.
    store.commitlog().evict_page_cache().unwrap();
    evict_files(root);
    let left = resident(root, data);
    assert!(left < 8 << 20, "{left} bytes still cached after eviction");
    // O_DIRECT needs an aligned buffer: take a page-aligned slice of a larger one.
    let mut raw = vec![0u8; block + 4096];
    let skew = raw.as_ptr().align_offset(4096);
    let buf = &mut raw[skew..skew + block];
    let mut left = data.div_ceil(4096) * 4096;
    let t = Instant::now();
    for p in commitlog_files(root) {
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true);
        if direct {
            std::os::unix::fs::OpenOptionsExt::custom_flags(&mut opts, libc::O_DIRECT);
        }
        let mut f = opts.open(&p).unwrap();
        // SAFETY: an advisory call on a descriptor we own.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL) };
        while left > 0 {
            let want = buf.len().min(left as usize);
            let n = f.read(&mut buf[..want]).unwrap();
            if n == 0 {
                break;
            }
            left -= n as u64;
        }
    }
    let read = data.div_ceil(4096) * 4096 - left;
    read as f64 / t.elapsed().as_secs_f64() / 1e6
}

fn msg(body: &[u8], queue_id: i32) -> MessageRef<'_> {
    MessageRef {
        topic: "ColdTopic",
        queue_id,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: "127.0.0.1:50000".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties: b"TAGS\x01TagA\x02UNIQ_KEY\x017F000001000000000000000000000001",
    }
}

fn fill(root: &Path, mib: u64) -> (MessageStore, u64) {
    let store = MessageStore::open(config(root)).unwrap();
    let body = vec![b'x'; BODY];
    let mut i = 0i32;
    while (store.commitlog_max_offset() as u64) < mib << 20 {
        // One message per queue in turn, as concurrent producers interleave them in the log.
        store.put(&msg(&body, i % QUEUES)).unwrap();
        i = i.wrapping_add(1);
    }
    let end = store.commitlog_max_offset();
    assert!(store.wait_dispatched(end, Duration::from_secs(120)));
    (store, end as u64)
}

struct Drain {
    mb_s: f64,
    cpu_pct: f64,
    msgs: u64,
    advised: u64,
}

/// Pull every queue from offset 0 in batches of 32, round-robin, from the store that wrote
/// them (a broker whose consumers fell behind: the file being appended to keeps its
/// append-time advice).
fn drain(store: &MessageStore, root: &Path, data: u64, cold: bool, read_ahead: bool) -> Drain {
    store.commitlog().set_read_ahead(read_ahead);
    if cold {
        store.commitlog().evict_page_cache().unwrap();
        let left = resident(root, data);
        assert!(left < 8 << 20, "{left} bytes still cached after eviction");
    } else {
        drain_once(store); // warm the cache
    }
    let before = store.commitlog().read_ahead_bytes();
    let t = Instant::now();
    let cpu0 = thread_cpu();
    let (msgs, bytes) = drain_once(store);
    let cpu = thread_cpu() - cpu0;
    let secs = t.elapsed().as_secs_f64();
    let advised = store.commitlog().read_ahead_bytes() - before;
    Drain {
        mb_s: bytes as f64 / secs / 1e6,
        cpu_pct: 100.0 * cpu / secs,
        msgs,
        advised,
    }
}

fn drain_once(store: &MessageStore) -> (u64, u64) {
    let mut next = vec![0i64; QUEUES as usize];
    let mut done = vec![false; QUEUES as usize];
    let (mut msgs, mut bytes) = (0u64, 0u64);
    while done.iter().any(|d| !d) {
        for q in 0..QUEUES {
            if done[q as usize] {
                continue;
            }
            let r = store.get_message(&GetRequest {
                topic: "ColdTopic",
                queue_id: q,
                offset: next[q as usize],
                max_msgs: BATCH,
                max_bytes: 0,
                filter: None,
                sql: None,
            });
            if r.status != GetMessageStatus::Found {
                done[q as usize] = true;
                continue;
            }
            msgs += r.message_count as u64;
            bytes += r.buffer.len() as u64;
            next[q as usize] = r.next_begin_offset;
        }
    }
    (msgs, bytes)
}

/// CPU seconds of the calling thread (user + system).
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches` runs bench targets with --test: nothing to check here
    }
    let mib: u64 = std::env::var("RMQ_COLD_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1536);
    let base = bench_root();
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::Builder::new()
        .prefix("cold-drain")
        .tempdir_in(&base)
        .unwrap();
    let root = dir.path();
    eprintln!("writing {mib} MiB into {} ...", root.display());
    let (store, data) = fill(root, mib);
    store.commitlog().evict_page_cache().unwrap();

    // Each round measures everything once; rows give the median of the rounds and every run,
    // so the disk and the drain are compared under the same conditions.
    const NAMES: [&str; 6] = [
        "disk: sequential `read(2)`, 8 MiB blocks, through the page cache",
        "disk: sequential `read(2)`, 32 MiB blocks, `O_DIRECT`",
        "drain, cold, read-ahead on",
        "drain, cold, read-ahead off",
        "drain, warm, read-ahead on",
        "drain, warm, read-ahead off",
    ];
    let rounds: usize = std::env::var("RMQ_COLD_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let mut runs: Vec<Vec<f64>> = vec![Vec::new(); NAMES.len()];
    let mut notes: Vec<String> = vec![String::new(); NAMES.len()];
    let mut ratios = Vec::new();
    let mut loads = Vec::new();
    let mut busy = false;
    for _ in 0..rounds {
        let l = loadavg();
        // Above one runnable task on average before the round, something else was running.
        busy |= l
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(|v| v > 1.0);
        loads.push(l);
        // The disk's sequential rate: the better of reads through the page cache and direct
        // reads, each in large blocks.
        runs[0].push(disk_read(&store, root, data, 8 << 20, false));
        runs[1].push(disk_read(&store, root, data, 32 << 20, true));
        let disk = runs[0].last().unwrap().max(*runs[1].last().unwrap());
        for (i, cold, ra) in [
            (2, true, true),
            (3, true, false),
            (4, false, true),
            (5, false, false),
        ] {
            let d = drain(&store, root, data, cold, ra);
            runs[i].push(d.mb_s);
            notes[i] = format!(
                "{} msgs; drain thread {:.0}% of a core; {} MiB advised",
                d.msgs,
                d.cpu_pct,
                d.advised >> 20
            );
            if i == 2 {
                ratios.push(d.mb_s / disk);
            }
        }
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let disk = median(&runs[0]).max(median(&runs[1]));
    let provisional = if busy {
        " (provisional: other jobs running)"
    } else {
        ""
    };
    let mut rows = Vec::new();
    for (i, name) in NAMES.iter().enumerate() {
        let m = median(&runs[i]);
        let all: Vec<String> = runs[i].iter().map(|r| format!("{r:.0}")).collect();
        rows.push(format!(
            "| {name} | {m:.0} (runs {}) | {:.0}% | {}{provisional} |",
            all.join(" / "),
            100.0 * m / disk,
            notes[i]
        ));
    }
    let cold_on = median(&ratios);
    let now = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .unwrap_or_default();
    let mut text = vec![
        "## Cold backlog drain (`cargo bench -p rmq-store --bench cold_drain`)".to_string(),
        String::new(),
        format!(
            "Measured {} on this machine; {:.0} MiB of CommitLog (1 KiB messages over {QUEUES} queues) \
             drained through `MessageStore::get_message` in pulls of {BATCH}, round-robin over the \
             queues. Cold: the CommitLog's pages dropped from the page cache (fsync + \
             `POSIX_FADV_DONTNEED`) before the run. MB/s counts record bytes returned.",
            now.trim(),
            data as f64 / (1 << 20) as f64
        ),
        String::new(),
        format!(
            "Load average (1/5/15 min) at the start of each round: {}.",
            loads.join("; ")
        ),
        String::new(),
        "| read | MB/s, median | of the disk's sequential rate | notes |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    text.extend(rows);
    text.push(String::new());
    text.push(format!(
        "- Cold drain with read-ahead: **{:.0}%** of the disk's sequential read rate measured in \
         the same round (median of {rounds}; target ≥ 80%).",
        100.0 * cold_on
    ));
    write_section(&text.join("\n"));
    println!("{}", text.join("\n"));
}

fn write_section(text: &str) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../benches/RESULTS.md");
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let (begin, end) = ("<!-- cold-drain:begin -->", "<!-- cold-drain:end -->");
    let block = format!("{begin}\n{text}\n{end}");
    let new = match (old.find(begin), old.find(end)) {
        (Some(a), Some(b)) if b > a => format!("{}{block}{}", &old[..a], &old[b + end.len()..]),
        _ => format!("{}\n{block}\n", old.trim_end()),
    };
    std::fs::write(path, new).unwrap();
}
