//! StoreView: a store directory opened for reading, and where its committed data ends.
//!
//! Directory (REMOTING.md §6.1): `commitlog/` (or `storePathCommitLog`),
//! `consumequeue/<topic>/<queueId>/`, `checkpoint` (physicMsgTimestamp at byte 0), `abort`
//! (present while a broker runs, and after a crash). Only these are read; `lock` is never
//! touched.

use std::fs::File;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rmq_store::checkpoint::POS_PHYSIC_MSG_TIMESTAMP;
use rmq_store::message::Record;

use crate::commitlog::{last_record_hint, step, CommitLogView, Event, OnInvalid, Step};
use crate::filter::{Range, RecordFilter};
use crate::plan::{self, QueuePlan, ScanSplit};
use crate::queue::QueueView;
use crate::Result;

/// The last record of a walk, whose completeness is not yet known.
#[derive(Debug, Clone)]
struct Tail {
    offset: i64,
    end: i64,
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    store_timestamp: i64,
}

impl Tail {
    fn of(offset: i64, r: &Record<'_>) -> Tail {
        Tail {
            offset,
            end: offset + r.total_size as i64,
            topic: r.topic.to_string(),
            queue_id: r.queue_id,
            queue_offset: r.queue_offset,
            store_timestamp: r.store_timestamp,
        }
    }
}

/// Entries of a store directory besides `commitlog/`: one of them (or an empty directory)
/// makes a directory without a CommitLog an empty store rather than no store at all.
const STORE_ENTRIES: [&str; 6] = [
    "checkpoint",
    "consumequeue",
    "config",
    "index",
    "abort",
    "lock",
];

fn not_found(what: String) -> rmq_store::StoreError {
    rmq_store::StoreError::NotFound(what)
}

/// Check that `root` is a store directory and `cl` (`explicit`: the caller named it) its
/// CommitLog directory. A store may have no CommitLog yet (an empty store); a directory that
/// has neither a CommitLog nor any other store entry, but something else, is not a store.
fn check_layout(root: &Path, cl: &Path, explicit: bool) -> Result<()> {
    if !root.is_dir() {
        let why = if root.exists() {
            "is not a directory"
        } else {
            "does not exist"
        };
        return Err(not_found(format!(
            "store directory {} ({why})",
            root.display()
        )));
    }
    if cl.is_dir() {
        return Ok(());
    }
    if cl.exists() || explicit {
        let why = if cl.exists() {
            "is not a directory"
        } else {
            "does not exist"
        };
        return Err(not_found(format!(
            "CommitLog directory {} ({why})",
            cl.display()
        )));
    }
    let mut entries = std::fs::read_dir(root).map_err(|e| crate::io_err(root, e))?;
    let empty = entries.next().is_none();
    if empty || STORE_ENTRIES.iter().any(|e| root.join(e).exists()) {
        return Ok(());
    }
    Err(not_found(format!(
        "a RocketMQ store in {}: it has no commitlog/ directory, nor any of {}",
        root.display(),
        STORE_ENTRIES.join(", ")
    )))
}

/// A store directory, read-only.
pub struct StoreView {
    root: PathBuf,
    log: CommitLogView,
    cq_root: PathBuf,
}

impl StoreView {
    /// Open the store at `root` (its CommitLog in `commitlog_dir` if given, else
    /// `<root>/commitlog`). `check_crc` verifies every record's body CRC.
    ///
    /// `NotFound` names what is missing when `root` is not a store directory (see
    /// [`STORE_ENTRIES`]); a store without CommitLog files reads as empty.
    pub fn open(root: &Path, commitlog_dir: Option<&Path>, check_crc: bool) -> Result<StoreView> {
        let cl = commitlog_dir.map_or_else(|| root.join("commitlog"), Path::to_path_buf);
        check_layout(root, &cl, commitlog_dir.is_some())?;
        Ok(StoreView {
            root: root.to_path_buf(),
            log: CommitLogView::open(&cl, check_crc)?,
            cq_root: root.join("consumequeue"),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn log(&self) -> &CommitLogView {
        &self.log
    }
    pub fn cq_root(&self) -> &Path {
        &self.cq_root
    }

    /// A broker has the store open, or crashed: the `abort` marker exists.
    pub fn is_live(&self) -> bool {
        self.root.join("abort").exists()
    }

    /// physicMsgTimestamp of the checkpoint: records stored before it are flushed (0 if the
    /// checkpoint is missing or short).
    pub fn checkpoint_physic_timestamp(&self) -> i64 {
        let mut b = [0u8; 8];
        File::open(self.root.join("checkpoint"))
            .and_then(|f| f.read_exact_at(&mut b, POS_PHYSIC_MSG_TIMESTAMP as u64))
            .map(|_| i64::from_be_bytes(b))
            .unwrap_or(0)
    }

    /// Whether the broker dispatched the record: its ConsumeQueue has its unit.
    fn dispatched(&self, t: &Tail) -> bool {
        QueueView::open(&self.cq_root, &t.topic, t.queue_id)
            .ok()
            .flatten()
            .and_then(|q| q.unit(t.queue_offset).ok().flatten())
            .is_some_and(|u| u.0 == t.offset && u.1 as i64 == t.end - t.offset)
    }

    /// The CommitLog offset below which every record is complete and will not change.
    ///
    /// `hint` is a record boundary known from an earlier call (a stream's last end); the walk
    /// starts there or near the end of the head file, whichever is later. See the crate doc
    /// for the rules.
    pub fn committed_end(&self, hint: Option<i64>) -> Result<i64> {
        self.log.refresh()?;
        let listing = self.log.listing();
        let Some(last) = listing.last() else {
            return Ok(hint.unwrap_or(0));
        };
        let crc = self.log.check_crc();
        // The head: the last file starting with a valid record (later ones are preallocated).
        let mut start = listing[0].base;
        for info in listing.iter().rev() {
            let Some(seg) = self.log.segment(info)? else {
                continue;
            };
            if let Step::Record(_) = step(seg.bytes(), 0, seg.base(), crc) {
                start = seg.base() + last_record_hint(&seg, crc).unwrap_or(0) as i64;
                break;
            }
        }
        if let Some(h) = hint.filter(|&h| h > start && h <= last.end()) {
            start = h;
        }
        let mut complete = start;
        let mut tail: Option<Tail> = None;
        self.log
            .walk(start, i64::MAX, false, OnInvalid::End, |ev| {
                match ev {
                    Event::Record(pos, r) => {
                        complete = pos;
                        tail = Some(Tail::of(pos, r));
                    }
                    Event::Blank(pos) => {
                        let seg_end = listing
                            .iter()
                            .find(|s| s.base <= pos && pos < s.end())
                            .map_or(pos, |s| s.end());
                        complete = seg_end;
                        tail = None;
                    }
                    // Not reported: this walk ends at the first invalid record.
                    Event::Damage { .. } => {}
                }
                ControlFlow::Continue(())
            })?;
        if let Some(t) = tail {
            if !self.is_live()
                || t.store_timestamp < self.checkpoint_physic_timestamp()
                || self.dispatched(&t)
            {
                complete = t.end;
            }
        }
        Ok(complete)
    }

    /// Scan splits of the committed records in `filter`'s CommitLog range.
    pub fn plan_scan(
        &self,
        filter: &RecordFilter,
        committed_end: i64,
        slice: u64,
    ) -> Result<Vec<ScanSplit>> {
        let range = filter
            .commitlog_offset
            .intersect(&Range::new(self.log.min_offset(), committed_end));
        if range.is_empty() || filter.is_unsatisfiable() {
            return Ok(Vec::new());
        }
        plan::plan_scan(&self.log, range, slice, filter.store_time)
    }

    /// ConsumeQueue splits for `filter` (`None` without a topic list).
    pub fn plan_queues(
        &self,
        filter: &RecordFilter,
        committed_end: i64,
        slice: u64,
    ) -> Result<Option<QueuePlan>> {
        let range = filter
            .commitlog_offset
            .intersect(&Range::new(self.log.min_offset(), committed_end));
        if filter.is_unsatisfiable() || range.is_empty() {
            return Ok(filter.topics.as_ref().map(|_| QueuePlan::default()));
        }
        plan::plan_queues(&self.cq_root, filter, range, slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{msg, rmq_store};

    #[test]
    fn committed_end_of_a_clean_and_a_live_store() {
        let dir = tempfile::tempdir().unwrap();
        let mut ends = Vec::new();
        rmq_store(dir.path(), 64 << 10, |s| {
            for i in 0..400 {
                let r = s
                    .put(&msg(
                        if i % 2 == 0 { "A" } else { "B" },
                        0,
                        &[7u8; 500],
                        b"TAGS\x01t",
                    ))
                    .unwrap();
                ends.push(r.end_offset());
            }
        });
        let v = StoreView::open(dir.path(), None, true).unwrap();
        assert!(!v.is_live());
        let end = *ends.last().unwrap();
        assert!(v.log().listing().len() > 2);
        assert_eq!(v.committed_end(None).unwrap(), end);
        assert_eq!(v.committed_end(Some(ends[390])).unwrap(), end);

        // A live store (abort marker): the last record counts once its queue lists it.
        std::fs::write(dir.path().join("abort"), b"").unwrap();
        std::fs::write(dir.path().join("checkpoint"), [0u8; 4096]).unwrap();
        assert_eq!(v.committed_end(None).unwrap(), end);
        let cq = dir.path().join("consumequeue/B/0");
        let f = std::fs::read_dir(&cq)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let mut units = std::fs::read(&f).unwrap();
        units[199 * 20..200 * 20].fill(0); // B's 200th unit, the last record's
        std::fs::write(&f, &units).unwrap();
        assert_eq!(v.committed_end(None).unwrap(), ends[398]);
        // ... or once the checkpoint has flushed past its store time.
        std::fs::write(dir.path().join("checkpoint"), i64::MAX.to_be_bytes()).unwrap();
        assert_eq!(v.committed_end(None).unwrap(), end);
    }

    #[test]
    fn torn_tail_is_not_committed() {
        let dir = tempfile::tempdir().unwrap();
        let mut ends = Vec::new();
        rmq_store(dir.path(), 1 << 20, |s| {
            for _ in 0..10 {
                ends.push(s.put(&msg("A", 0, &[1u8; 100], b"")).unwrap().end_offset());
            }
        });
        let f = dir.path().join("commitlog").join(format!("{:020}", 0));
        let mut bytes = std::fs::read(&f).unwrap();
        // Half of the last record's body has not reached the file yet.
        let last_start = ends[8] as usize;
        bytes[last_start + 100..ends[9] as usize].fill(0);
        std::fs::write(&f, &bytes).unwrap();
        let v = StoreView::open(dir.path(), None, true).unwrap();
        assert_eq!(v.committed_end(None).unwrap(), ends[8]);
        assert!(StoreView::open(&dir.path().join("missing"), None, true).is_err());
    }

    #[test]
    fn empty_stores_open_and_other_directories_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let end = |p: &Path| StoreView::open(p, None, true)?.committed_end(None);
        // An empty directory, a store with only a checkpoint, an empty commitlog/: no records.
        assert_eq!(end(root).unwrap(), 0);
        std::fs::write(root.join("checkpoint"), [0u8; 24]).unwrap();
        assert_eq!(end(root).unwrap(), 0);
        std::fs::create_dir(root.join("commitlog")).unwrap();
        assert_eq!(end(root).unwrap(), 0);

        let other = root.join("photos");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("cat.jpg"), b"meow").unwrap();
        let err = StoreView::open(&other, None, true)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains(&other.display().to_string()), "{err}");
        assert!(err.contains("no commitlog/ directory"), "{err}");
        let file = other.join("cat.jpg");
        let err = StoreView::open(&file, None, true)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("is not a directory"), "{err}");
        let missing = root.join("elsewhere");
        let err = StoreView::open(root, Some(&missing), true)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains(&format!("CommitLog directory {}", missing.display())),
            "{err}"
        );
    }
}
