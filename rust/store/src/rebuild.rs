//! Checks at open that the ConsumeQueues and the index agree with the CommitLog, and plans
//! what to dispatch again where they do not: a queue or index that is missing, short or
//! points at records that are not its own is rebuilt from the CommitLog on any start.
//!
//! What should exist comes from the queue manifest, `<storePathRootDir>/queues.manifest`,
//! written after recovery, every thorough ConsumeQueue flush, on topic deletion and at
//! shutdown. One line per queue, tab-separated: `<topic>\t<queueId>\t<maxOffset>`, and one
//! line `#index\t<endPhyOffset>` for the index. Its figures only ever lag the queues, so a
//! queue below them lost data.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use crate::commitlog::CommitLog;
use crate::consume_queue::{is_placeholder, ConsumeQueue};
use crate::dispatch::QueueTable;
use crate::index::IndexService;
use crate::journal::Journal;
use crate::message;

/// The manifest's file name under the store root.
pub const MANIFEST: &str = "queues.manifest";
const INDEX_LINE: &str = "#index";
const COMMITLOG_LINE: &str = "#commitlog-file-size";

/// What a previous run left in the manifest.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub queues: HashMap<(String, i32), i64>,
    pub index_end: Option<i64>,
    /// The CommitLog's segment size when the manifest was written.
    pub commitlog_file_size: Option<u64>,
}

impl Manifest {
    pub fn read(root: &Path) -> Manifest {
        let mut m = Manifest::default();
        let Ok(text) = std::fs::read_to_string(root.join(MANIFEST)) else {
            return m;
        };
        for line in text.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            match f.as_slice() {
                [INDEX_LINE, end] => m.index_end = end.parse().ok(),
                [COMMITLOG_LINE, size] => m.commitlog_file_size = size.parse().ok(),
                [topic, qid, max] => {
                    if let (Ok(q), Ok(x)) = (qid.parse(), max.parse()) {
                        m.queues.insert((topic.to_string(), q), x);
                    }
                }
                _ => {}
            }
        }
        m
    }
}

/// Write the manifest of the queues and index as they are now (atomically: a temporary file
/// renamed into place).
pub fn write_manifest(
    root: &Path,
    log: &CommitLog,
    queues: &QueueTable,
    index: Option<&IndexService>,
) -> std::io::Result<()> {
    let mut text = format!("{COMMITLOG_LINE}\t{}\n", log.queue().file_size());
    for q in queues.all() {
        text.push_str(&format!(
            "{}\t{}\t{}\n",
            q.topic(),
            q.queue_id(),
            q.max_offset()
        ));
    }
    if let Some(i) = index {
        text.push_str(&format!("{INDEX_LINE}\t{}\n", i.end_phy_offset()));
    }
    let tmp = root.join(format!("{MANIFEST}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_data()?;
    std::fs::rename(&tmp, root.join(MANIFEST))
}

/// Where to dispatch again from, and why.
#[derive(Debug, Default)]
pub struct Rebuild {
    /// Lowest CommitLog offset to dispatch again from, if anything needs rebuilding.
    pub from: Option<i64>,
    /// One line per queue or index found wanting.
    pub findings: Vec<String>,
}

impl Rebuild {
    fn need(&mut self, from: i64, finding: String) {
        self.from = Some(self.from.map_or(from, |f| f.min(from)));
        self.findings.push(finding);
    }

    /// Journal each finding at WARN.
    pub fn report(&self, journal: &Journal) {
        for f in &self.findings {
            journal.warn("rebuild", f.clone());
        }
    }
}

/// Whether the unit at logical `n` of `cq` refers to a record of that queue with that queue
/// offset (units whose record has expired count as consistent: nothing is left to check).
fn unit_consistent(cq: &ConsumeQueue, log: &CommitLog, n: i64) -> bool {
    let Some(u) = cq.unit(n) else {
        return true;
    };
    if is_placeholder(&u) || u.0 < log.min_offset() {
        return true;
    }
    let Some(rec) = log.slice(u.0, u.1 as usize) else {
        return false;
    };
    match message::decode(rec.bytes(), false) {
        Ok(r) => {
            r.physical_offset == u.0
                && r.topic == cq.topic()
                && r.queue_id == cq.queue_id()
                && r.queue_offset == n
        }
        Err(_) => false,
    }
}

/// Check every queue (and the index) against the manifest and the CommitLog, truncating a
/// queue at its first unit that does not match its record; returns what to dispatch again.
pub fn plan(
    manifest: &Manifest,
    log: &CommitLog,
    queues: &QueueTable,
    index: Option<&IndexService>,
    end: i64,
) -> Rebuild {
    let cl_min = log.min_offset();
    let mut out = Rebuild::default();
    for ((topic, qid), max) in &manifest.queues {
        match queues.get(topic, *qid) {
            None => out.need(
                cl_min,
                format!(
                    "ConsumeQueue {topic}-{qid} is missing (it held offsets up to {max}): \
                     rebuilt from the CommitLog from offset {cl_min}"
                ),
            ),
            Some(cq) if cq.max_offset() < *max => {
                let from = cq.max_physic_offset().max(cl_min);
                out.need(
                    from,
                    format!(
                        "ConsumeQueue {topic}-{qid} is short: {} of {max} units: rebuilt from \
                         CommitLog offset {from}",
                        cq.max_offset()
                    ),
                );
            }
            _ => {}
        }
    }
    for cq in queues.all() {
        let max = cq.max_offset();
        let min = cq.min_offset();
        if max <= min || unit_consistent(&cq, log, max - 1) {
            continue;
        }
        // Binary search the first inconsistent unit (a prefix of the queue is sound).
        let (mut lo, mut hi) = (min, max - 1);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if unit_consistent(&cq, log, mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let bad = cq.unit(lo).map_or(end, |u| u.0);
        let _ = cq.truncate_dirty(bad.min(end));
        let from = cq.max_physic_offset().max(cl_min);
        out.need(
            from,
            format!(
                "ConsumeQueue {}-{} disagrees with the CommitLog from unit {lo} (of {max}): \
                 {} units dropped and rebuilt from CommitLog offset {from}",
                cq.topic(),
                cq.queue_id(),
                max - cq.max_offset()
            ),
        );
    }
    if let (Some(i), Some(was)) = (index, manifest.index_end) {
        let now = i.end_phy_offset();
        if now < was {
            let from = now.max(cl_min);
            out.need(
                from,
                format!(
                    "index ends at CommitLog offset {now}, it had reached {was}: rebuilt from \
                     offset {from}"
                ),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let queues = QueueTable::new(d.path().join("consumequeue"), 6000);
        queues
            .get_or_create("TopicA", 1)
            .put(100, 50, 0, 0)
            .unwrap();
        queues.get_or_create("Topic\u{4e2d}", 0);
        let log = CommitLog::new(d.path(), 4096, "127.0.0.1:1".parse().unwrap(), 1024, false);
        write_manifest(d.path(), &log, &queues, None).unwrap();
        let m = Manifest::read(d.path());
        assert_eq!(m.queues.len(), 2);
        assert_eq!(m.queues[&("TopicA".to_string(), 1)], 1);
        assert_eq!(m.queues[&("Topic\u{4e2d}".to_string(), 0)], 0);
        assert_eq!(m.index_end, None);
        assert_eq!(m.commitlog_file_size, Some(4096));
        assert_eq!(
            Manifest::read(&d.path().join("nowhere")),
            Manifest::default()
        );
    }
}
