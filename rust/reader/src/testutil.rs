//! Test helpers: hand-laid CommitLog and ConsumeQueue files, and stores written by rmq-store.

use std::collections::HashMap;
use std::path::Path;

use rmq_store::consume_queue::encode_unit;
use rmq_store::message::{encode, tags_code, MessageRef, Placement, BLANK_MAGIC_CODE};
use rmq_store::{MessageStore, StoreConfig};

/// One encoded record.
pub fn record_bytes(
    topic: &str,
    queue_id: i32,
    queue_offset: i64,
    physical_offset: i64,
    body: &[u8],
    props: &str,
    store_ts: i64,
) -> Vec<u8> {
    let msg = MessageRef {
        topic,
        queue_id,
        flag: 0,
        sys_flag: 0,
        born_timestamp: store_ts - 1,
        born_host: "10.0.0.2:5555".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties: props.as_bytes(),
    };
    encode(
        &msg,
        &Placement {
            queue_offset,
            physical_offset,
            store_timestamp: store_ts,
            store_host: "10.0.0.1:10911".parse().unwrap(),
        },
    )
}

/// Write `(topic, body)` messages (queue 0, tag = topic, store time 1000 + i) as a CommitLog
/// of `file_size`-byte files in `dir`, rolling over with a blank marker as a broker does, and
/// ConsumeQueues under `cq_root` if given. Returns each record's offset.
pub fn write_store(
    dir: &Path,
    cq_root: Option<&Path>,
    file_size: usize,
    msgs: &[(&str, Vec<u8>)],
) -> Vec<i64> {
    std::fs::create_dir_all(dir).unwrap();
    let mut files: Vec<Vec<u8>> = vec![vec![0u8; file_size]];
    let mut pos = 0usize;
    let mut starts = Vec::new();
    let mut qoffs: HashMap<&str, i64> = HashMap::new();
    let mut units: HashMap<&str, Vec<u8>> = HashMap::new();
    for (i, (topic, body)) in msgs.iter().enumerate() {
        let props = format!("TAGS\u{1}{topic}\u{2}KEYS\u{1}k{i}");
        let qo = *qoffs.get(topic).unwrap_or(&0);
        let base = (files.len() - 1) * file_size;
        let mut rec = record_bytes(
            topic,
            0,
            qo,
            (base + pos) as i64,
            body,
            &props,
            1000 + i as i64,
        );
        if rec.len() + 8 > file_size - pos {
            let f = files.last_mut().unwrap();
            f[pos..pos + 4].copy_from_slice(&((file_size - pos) as i32).to_be_bytes());
            f[pos + 4..pos + 8].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
            files.push(vec![0u8; file_size]);
            pos = 0;
            let base = (files.len() - 1) * file_size;
            rec = record_bytes(topic, 0, qo, base as i64, body, &props, 1000 + i as i64);
        }
        let base = (files.len() - 1) * file_size;
        files.last_mut().unwrap()[pos..pos + rec.len()].copy_from_slice(&rec);
        starts.push((base + pos) as i64);
        units
            .entry(topic)
            .or_default()
            .extend_from_slice(&encode_unit(
                (base + pos) as i64,
                rec.len() as i32,
                tags_code(&props),
            ));
        qoffs.insert(topic, qo + 1);
        pos += rec.len();
    }
    for (i, f) in files.iter().enumerate() {
        std::fs::write(dir.join(format!("{:020}", i * file_size)), f).unwrap();
    }
    if let Some(root) = cq_root {
        for (topic, u) in units {
            write_cq(root, topic, 0, &u, 6_000_000);
        }
    }
    starts
}

/// As [`write_store`] without ConsumeQueues.
pub fn write_log(dir: &Path, file_size: usize, msgs: &[(&str, Vec<u8>)]) -> Vec<i64> {
    write_store(dir, None, file_size, msgs)
}

/// Write raw units as the ConsumeQueue files of one queue.
pub fn write_cq(root: &Path, topic: &str, queue_id: i32, units: &[u8], file_size: usize) {
    let dir = root.join(topic).join(queue_id.to_string());
    std::fs::create_dir_all(&dir).unwrap();
    for (i, chunk) in units.chunks(file_size).enumerate() {
        let mut f = vec![0u8; file_size];
        f[..chunk.len()].copy_from_slice(chunk);
        std::fs::write(dir.join(format!("{:020}", i * file_size)), f).unwrap();
    }
}

/// A store written by rmq-store (small files) and shut down cleanly.
pub fn rmq_store(root: &Path, file_size: u64, put: impl FnOnce(&MessageStore)) {
    let mut cfg = StoreConfig::with_root(root);
    cfg.set("mappedFileSizeCommitLog", &file_size.to_string())
        .unwrap();
    cfg.set("mappedFileSizeConsumeQueue", "6000").unwrap();
    let store = MessageStore::open(cfg).unwrap();
    put(&store);
    store.wait_dispatched(
        store.commitlog_max_offset(),
        std::time::Duration::from_secs(5),
    );
    store.shutdown().unwrap();
}

/// A message for [`rmq_store`].
pub fn msg<'a>(topic: &'a str, queue_id: i32, body: &'a [u8], props: &'a [u8]) -> MessageRef<'a> {
    MessageRef {
        topic,
        queue_id,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1,
        born_host: "127.0.0.1:1".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties: props,
    }
}
