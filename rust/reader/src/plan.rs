//! Planning: the work of one read, cut into independent splits.
//!
//! * [`ScanSplit`]: a byte range of one CommitLog file. Cut points are found near every
//!   `slice` bytes with [`find_record_start`], so a split always starts on a record boundary
//!   (or at the file's first byte) without walking the file from its start; a split reads the
//!   records that *start* inside it, and its reader checks that the last one ends exactly on
//!   the next split's start. Damage never moves a split's start past intact records: a cut is
//!   the first valid record after its search position, and the reader of the split before it
//!   resynchronises on its own up to that cut.
//! * [`QueueSplit`]: a logical-offset range of one ConsumeQueue. When the filter names topics
//!   (and maybe queues and offset ranges), the queues list exactly the records to read; that
//!   is cheaper than a scan when those records are a small part of the scanned range
//!   ([`prefer_queues`]).

use rmq_store::mapped_file::OS_PAGE_SIZE;

use crate::commitlog::{find_record_start, step, CommitLogView, Step};
use crate::filter::{Range, RecordFilter};
use crate::queue::{queue_ids, QueueView};
use crate::Result;

/// A byte range of one CommitLog file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanSplit {
    /// Offset of the first record.
    pub start: i64,
    /// Records starting below this offset belong to the split.
    pub end: i64,
    /// `end` is the start of the next split's first record: the split's last record must end
    /// exactly there (a check on the cut point).
    pub end_is_boundary: bool,
}

impl ScanSplit {
    pub fn len(&self) -> u64 {
        (self.end - self.start).max(0) as u64
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Cut the records starting in `[range.lo, range.hi)` into splits of about `slice` bytes,
/// never crossing a file. Files whose records all lie outside `store_time` are skipped, using
/// the store timestamps of each file's first record (store time grows along the log).
pub fn plan_scan(
    log: &CommitLogView,
    range: Range,
    slice: u64,
    store_time: Range,
) -> Result<Vec<ScanSplit>> {
    let slice = slice.max(OS_PAGE_SIZE as u64) as usize;
    let listing = log.listing();
    let crc = log.check_crc();
    let mut splits = Vec::new();
    for (i, info) in listing.iter().enumerate() {
        let (s, e) = (range.lo.max(info.base), range.hi.min(info.end()));
        if s >= e {
            continue;
        }
        if store_time != Range::ALL {
            if let Some(first) = log.first_store_timestamp(info)? {
                if first >= store_time.hi {
                    break;
                }
            }
            if let Some(next) = listing.get(i + 1) {
                if log
                    .first_store_timestamp(next)?
                    .is_some_and(|t| t < store_time.lo)
                {
                    continue;
                }
            }
        }
        let Some(seg) = log.segment(info)? else {
            continue;
        };
        let (s_pos, e_pos) = ((s - info.base) as usize, (e - info.base) as usize);
        let first = match step(seg.bytes(), s_pos, s, crc) {
            Step::Record(_) => Some(s_pos),
            // A file's data starts at its first byte: damage there is the reader's to report.
            _ if s_pos == 0 => Some(0),
            _ => find_record_start(&seg, s_pos, e_pos, crc),
        };
        let Some(mut cur) = first else { continue };
        while cur + slice < e_pos {
            match find_record_start(&seg, cur + slice, e_pos, crc) {
                Some(p) => {
                    splits.push(ScanSplit {
                        start: info.base + cur as i64,
                        end: info.base + p as i64,
                        end_is_boundary: true,
                    });
                    cur = p;
                }
                None => break,
            }
        }
        splits.push(ScanSplit {
            start: info.base + cur as i64,
            end: e,
            end_is_boundary: false,
        });
    }
    Ok(splits)
}

/// A logical-offset range `[start, end)` of one ConsumeQueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSplit {
    pub topic: String,
    pub queue_id: i32,
    pub start: i64,
    pub end: i64,
}

/// The ConsumeQueue ranges a filter selects, with their estimated size.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueuePlan {
    pub splits: Vec<QueueSplit>,
    /// Units in the ranges.
    pub rows: u64,
    /// Estimated record bytes (rows × sampled mean record size).
    pub bytes: u64,
}

impl QueuePlan {
    /// Pages a read through the queues touches: each record's pages plus the queue units.
    pub fn pages(&self) -> u64 {
        let page = OS_PAGE_SIZE as u64;
        let mean = self.bytes.checked_div(self.rows).unwrap_or(0);
        self.rows * (1 + mean / page) + (self.rows * 20).div_ceil(page)
    }
}

/// Plan reading the queues of the filter's topics. `None` when the filter lists no topics
/// (every queue would have to be read). `cl` is the CommitLog range to keep (already clamped
/// to what is on disk and committed); units outside it are left out where the queue's order
/// allows, and the reader drops the rest.
pub fn plan_queues(
    cq_root: &std::path::Path,
    filter: &RecordFilter,
    cl: Range,
    slice: u64,
) -> Result<Option<QueuePlan>> {
    let Some(topics) = &filter.topics else {
        return Ok(None);
    };
    let mut plan = QueuePlan::default();
    for topic in topics.iter().filter(|t| filter.topic_allowed(t)) {
        for qid in queue_ids(cq_root, topic)?
            .into_iter()
            .filter(|&q| filter.queue_allowed(q))
        {
            let Some(q) = QueueView::open(cq_root, topic, qid)? else {
                continue;
            };
            let (min, max) = q.bounds()?;
            let (mut lo, mut hi) = (
                min.max(filter.queue_offset.lo),
                max.min(filter.queue_offset.hi),
            );
            if lo >= hi {
                continue;
            }
            lo = q.lower_bound_commitlog(lo, hi, cl.lo)?;
            hi = q.lower_bound_commitlog(lo, hi, cl.hi)?;
            if lo >= hi {
                continue;
            }
            let rows = (hi - lo) as u64;
            let samples = rows.min(16);
            let mut sampled = 0u64;
            let mut sum = 0u64;
            for k in 0..samples {
                if let Some(u) = q.unit(lo + (k * rows / samples) as i64)? {
                    sum += u.1.max(0) as u64;
                    sampled += 1;
                }
            }
            let mean = sum.checked_div(sampled).unwrap_or(1).max(1);
            plan.rows += rows;
            plan.bytes += rows * mean;
            let per = (slice / mean).max(1) as i64;
            let mut s = lo;
            while s < hi {
                let e = (s + per).min(hi);
                plan.splits.push(QueueSplit {
                    topic: topic.clone(),
                    queue_id: qid,
                    start: s,
                    end: e,
                });
                s = e;
            }
        }
    }
    Ok(Some(plan))
}

/// Whether reading through the queues beats scanning `scan`: it must touch fewer than half
/// the pages (random reads cost more than sequential ones).
pub fn prefer_queues(queues: &QueuePlan, scan: &[ScanSplit]) -> bool {
    let scan_pages: u64 = scan.iter().map(|s| s.len()).sum::<u64>() / OS_PAGE_SIZE as u64;
    queues.pages() * 2 < scan_pages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::write_store;

    #[test]
    fn scan_splits_on_record_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let log_dir = dir.path().join("commitlog");
        let msgs: Vec<(&str, Vec<u8>)> = (0..300)
            .map(|i| {
                (
                    if i % 3 == 0 { "A" } else { "B" },
                    vec![i as u8; 200 + i % 50],
                )
            })
            .collect();
        let starts = write_store(&log_dir, None, 32 << 10, &msgs);
        let log = CommitLogView::open(&log_dir, true).unwrap();
        let splits = plan_scan(&log, Range::ALL, 8 << 10, Range::ALL).unwrap();
        assert!(splits.len() > log.listing().len());
        for s in &splits {
            assert!(starts.contains(&s.start), "{s:?}");
            if s.end_is_boundary {
                assert!(starts.contains(&s.end));
            }
        }
        // Splits tile each file's records: every record start is in exactly one split.
        for st in &starts {
            assert_eq!(
                splits
                    .iter()
                    .filter(|s| s.start <= *st && *st < s.end)
                    .count(),
                1
            );
        }
        // A range starting inside a record begins at the next record.
        let r = plan_scan(
            &log,
            Range::new(starts[5] + 1, starts[9]),
            1 << 20,
            Range::ALL,
        )
        .unwrap();
        assert_eq!(
            r,
            [ScanSplit {
                start: starts[6],
                end: starts[9],
                end_is_boundary: false
            }]
        );
        // Store times are 1000 + i: a range late in the log skips the first files.
        let late = plan_scan(&log, Range::ALL, 1 << 20, Range::new(1290, i64::MAX)).unwrap();
        assert!(late[0].start > 0 && late[0].start <= starts[290]);
        assert!(plan_scan(&log, Range::ALL, 1 << 20, Range::new(0, 1000))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn queue_plan_and_choice() {
        let dir = tempfile::tempdir().unwrap();
        let msgs: Vec<(&str, Vec<u8>)> = (0..500)
            .map(|i| (if i % 50 == 0 { "Rare" } else { "Common" }, vec![1u8; 1000]))
            .collect();
        let starts = write_store(
            &dir.path().join("cl"),
            Some(&dir.path().join("cq")),
            1 << 20,
            &msgs,
        );
        let log = CommitLogView::open(&dir.path().join("cl"), true).unwrap();
        let scan = plan_scan(&log, Range::ALL, 1 << 20, Range::ALL).unwrap();
        let f = RecordFilter {
            topics: Some(vec!["Rare".into()]),
            ..Default::default()
        };
        let q = plan_queues(&dir.path().join("cq"), &f, Range::ALL, 4096)
            .unwrap()
            .unwrap();
        assert_eq!(q.rows, 10);
        assert_eq!(q.splits.len(), 4); // about 1.1 KiB records: 3 a split
        assert!(prefer_queues(&q, &scan));
        let f = RecordFilter {
            topics: Some(vec!["Common".into()]),
            ..Default::default()
        };
        let q = plan_queues(&dir.path().join("cq"), &f, Range::ALL, 1 << 20)
            .unwrap()
            .unwrap();
        assert_eq!(q.rows, 490);
        assert!(!prefer_queues(&q, &scan));
        // Offset ranges narrow the queue ranges.
        let f = RecordFilter {
            topics: Some(vec!["Common".into()]),
            queue_offset: Range::new(10, 20),
            ..Default::default()
        };
        let q = plan_queues(
            &dir.path().join("cq"),
            &f,
            Range::new(0, starts[15]),
            1 << 20,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            q.splits,
            [QueueSplit {
                topic: "Common".into(),
                queue_id: 0,
                start: 10,
                end: 14
            }]
        );
        assert!(plan_queues(
            &dir.path().join("cq"),
            &RecordFilter::default(),
            Range::ALL,
            1
        )
        .unwrap()
        .is_none());
    }
}
