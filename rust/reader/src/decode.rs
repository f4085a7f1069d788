//! Decoding splits into column batches.
//!
//! A split is read in batches: each call decodes from a resume position until the batch is
//! full (`max_rows` rows or `max_bytes` of variable-width data) or the split ends, and says
//! where to resume. Only records the [`RecordFilter`] accepts become rows.

use std::ops::ControlFlow;
use std::sync::Arc;

use rmq_store::StoreError;

use crate::columns::{ColumnSet, Columns};
use crate::commitlog::{step, CommitLogView, Event, Step, Stop};
use crate::filter::RecordFilter;
use crate::plan::{QueueSplit, ScanSplit};
use crate::queue::{is_real, QueueView};
use crate::segment::Segment;
use crate::{corrupt, Result};

/// What to build and how much at a time.
#[derive(Debug, Clone, Copy)]
pub struct DecodeOptions {
    pub columns: ColumnSet,
    /// Rows per batch (at least 1).
    pub max_rows: usize,
    /// Bytes of variable-width data per batch (a batch stops after the row crossing it).
    pub max_bytes: usize,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            columns: ColumnSet::ALL,
            max_rows: 8192,
            max_bytes: 64 << 20,
        }
    }
}

/// One batch of rows and where the split continues.
#[derive(Debug)]
pub struct Batch {
    pub columns: Columns,
    /// Resume position: a CommitLog offset (scan) or a logical queue offset (queue).
    pub next: i64,
    /// The split has no more rows.
    pub done: bool,
    /// Records examined (matching or not) and their bytes.
    pub records_seen: u64,
    pub bytes_seen: u64,
}

fn new_columns(opts: &DecodeOptions) -> Columns {
    let rows = opts.max_rows.clamp(1, 1 << 16);
    Columns::new(opts.columns, rows, opts.max_bytes.min(rows * 1024))
}

/// Decode the records of `split` from `from` (the split's start or a batch's `next`).
///
/// Errors: `NotFound` if the split's file has been deleted (retention); `Corrupt` if the
/// records do not end exactly on a cut point the planner found (`end_is_boundary`).
pub fn decode_scan(
    log: &CommitLogView,
    split: &ScanSplit,
    from: i64,
    filter: &RecordFilter,
    opts: &DecodeOptions,
) -> Result<Batch> {
    let mut cols = new_columns(opts);
    let (mut seen, mut bytes) = (0u64, 0u64);
    if from >= split.end {
        return Ok(Batch {
            columns: cols,
            next: from,
            done: true,
            records_seen: 0,
            bytes_seen: 0,
        });
    }
    if from == split.start {
        if let Some(seg) = log.segment_containing(from)? {
            seg.advise_sequential();
        }
    }
    let max_rows = opts.max_rows.max(1);
    let end = log.walk(from, split.end, true, |ev| {
        if let Event::Record(pos, rec) = ev {
            seen += 1;
            bytes += rec.total_size as u64;
            if let Some(class) = filter.matches(pos, rec) {
                cols.push(pos, rec, class);
                if cols.rows() >= max_rows || cols.bytes() >= opts.max_bytes {
                    return ControlFlow::Break(());
                }
            }
        }
        ControlFlow::Continue(())
    })?;
    let done = match end.stop {
        Stop::Visitor => end.pos >= split.end,
        Stop::NoSegment if end.pos == from => {
            return Err(StoreError::NotFound(format!(
                "CommitLog file holding offset {from} (deleted since the read was planned?)"
            )))
        }
        _ => true,
    };
    if done && split.end_is_boundary && end.pos != split.end {
        return Err(corrupt(
            "commitlog",
            format!(
                "records of split [{}, {}) end at {} instead of the next split's start",
                split.start, split.end, end.pos
            ),
        ));
    }
    Ok(Batch {
        columns: cols,
        next: end.pos,
        done,
        records_seen: seen,
        bytes_seen: bytes,
    })
}

/// Units read from a queue per `pread`.
const UNITS_PER_READ: i64 = 4096;

/// Decode the records a queue split lists, from logical offset `from`. Units referring below
/// the CommitLog's first file, at or past `committed_end`, or to a record that is not that
/// queue's (a stale unit) are skipped.
pub fn decode_queue(
    log: &CommitLogView,
    queue: &QueueView,
    split: &QueueSplit,
    from: i64,
    committed_end: i64,
    filter: &RecordFilter,
    opts: &DecodeOptions,
) -> Result<Batch> {
    let mut cols = new_columns(opts);
    let (mut seen, mut bytes) = (0u64, 0u64);
    let min = log.min_offset();
    let mut seg: Option<Arc<Segment>> = None;
    let mut lo = from.max(split.start);
    while lo < split.end {
        let want = (split.end - lo).min(UNITS_PER_READ);
        let units = queue.read_units(lo, lo + want)?;
        for (i, u) in units.iter().enumerate() {
            let qo = lo + i as i64;
            let (off, size) = (u.0, u.1 as i64);
            if !is_real(u) || off < min || off + size > committed_end {
                continue;
            }
            if !seg
                .as_ref()
                .is_some_and(|s| s.base() <= off && off < s.end())
            {
                seg = log.segment_containing(off)?;
            }
            let Some(s) = &seg else { continue };
            let at = (off - s.base()) as usize;
            let Step::Record(rec) = step(s.bytes(), at, off, log.check_crc()) else {
                continue;
            };
            if rec.total_size as i64 != size
                || rec.queue_id != split.queue_id
                || rec.queue_offset != qo
                || rec.topic != split.topic
            {
                continue;
            }
            seen += 1;
            bytes += size as u64;
            if let Some(class) = filter.matches(off, &rec) {
                cols.push(off, &rec, class);
                if cols.rows() >= opts.max_rows.max(1) || cols.bytes() >= opts.max_bytes {
                    return Ok(Batch {
                        columns: cols,
                        next: qo + 1,
                        done: qo + 1 >= split.end,
                        records_seen: seen,
                        bytes_seen: bytes,
                    });
                }
            }
        }
        let got = units.len() as i64;
        // Fewer units than asked for: the queue's data ends inside the split.
        lo = if got < want { split.end } else { lo + got };
    }
    Ok(Batch {
        columns: cols,
        next: lo,
        done: true,
        records_seen: seen,
        bytes_seen: bytes,
    })
}

/// The position after the `n`-th record accepted by `filter` at or after `start` (a record
/// boundary), or `end` if fewer are there; and how many were counted. For a streaming
/// trigger's "at most n rows".
pub fn advance(
    log: &CommitLogView,
    start: i64,
    end: i64,
    n: u64,
    filter: &RecordFilter,
) -> Result<(i64, u64)> {
    if n == 0 || start >= end {
        return Ok((start, 0));
    }
    let mut count = 0u64;
    let w = log.walk(start, end, false, |ev| {
        if let Event::Record(pos, rec) = ev {
            if filter.matches(pos, rec).is_some() {
                count += 1;
                if count >= n {
                    return ControlFlow::Break(());
                }
            }
        }
        ControlFlow::Continue(())
    })?;
    Ok((if w.stop == Stop::Visitor { w.pos } else { end }, count))
}

/// Decode one record per input buffer (`None` or undecodable = a null row); for records held
/// outside a store. `check_crc` verifies body CRCs.
pub fn decode_buffers<'a>(
    records: impl Iterator<Item = Option<&'a [u8]>>,
    columns: ColumnSet,
    check_crc: bool,
) -> Columns {
    let mut cols = Columns::new(columns, 0, 0);
    for r in records {
        match r.map(|b| rmq_store::message::decode(b, check_crc)) {
            Some(Ok(rec)) => cols.push_detached(&rec),
            _ => cols.push_null(),
        }
    }
    cols
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::Column;
    use crate::filter::Range;
    use crate::plan::{plan_queues, plan_scan};
    use crate::testutil::{record_bytes, write_store};

    fn topics_of(b: &Batch) -> Vec<String> {
        let f = b.columns.clone().finish();
        let (rows, cols) = (f.rows, f.columns);
        let t = cols.iter().find(|c| c.column == Column::Topic).unwrap();
        let off = t.buffers[1].as_ref().unwrap();
        let data = t.buffers[2].as_ref().unwrap();
        (0..rows)
            .map(|i| {
                let a = i32::from_le_bytes(off[i * 4..i * 4 + 4].try_into().unwrap()) as usize;
                let z = i32::from_le_bytes(off[i * 4 + 4..i * 4 + 8].try_into().unwrap()) as usize;
                String::from_utf8(data[a..z].to_vec()).unwrap()
            })
            .collect()
    }

    fn fixture() -> (tempfile::TempDir, Vec<i64>) {
        let dir = tempfile::tempdir().unwrap();
        let msgs: Vec<(&str, Vec<u8>)> = (0..200)
            .map(|i| (["A", "B", "C", "D"][i % 4], vec![i as u8; 300]))
            .collect();
        let starts = write_store(
            &dir.path().join("cl"),
            Some(&dir.path().join("cq")),
            16 << 10,
            &msgs,
        );
        (dir, starts)
    }

    #[test]
    fn scan_in_batches_with_filter() {
        let (dir, starts) = fixture();
        let log = CommitLogView::open(&dir.path().join("cl"), true).unwrap();
        let splits = plan_scan(&log, Range::ALL, 4096, Range::ALL).unwrap();
        let f = RecordFilter {
            topics: Some(vec!["B".into()]),
            ..Default::default()
        };
        let opts = DecodeOptions {
            columns: ColumnSet::NONE.with(Column::Topic),
            max_rows: 7,
            ..Default::default()
        };
        let (mut rows, mut seen) = (0, 0);
        for s in &splits {
            let mut pos = s.start;
            loop {
                let b = decode_scan(&log, s, pos, &f, &opts).unwrap();
                assert!(b.columns.rows() <= 7);
                assert!(topics_of(&b).iter().all(|t| t == "B"));
                rows += b.columns.rows();
                seen += b.records_seen;
                pos = b.next;
                if b.done {
                    break;
                }
            }
        }
        assert_eq!((rows, seen), (50, 200));
        // A cut point that is not where the records end is reported.
        let bad = ScanSplit {
            start: starts[0],
            end: starts[1] + 1,
            end_is_boundary: true,
        };
        let all = RecordFilter::default();
        assert!(decode_scan(&log, &bad, bad.start, &all, &opts).is_err());
    }

    #[test]
    fn queue_reads_match_scans() {
        let (dir, starts) = fixture();
        let log = CommitLogView::open(&dir.path().join("cl"), true).unwrap();
        let f = RecordFilter {
            topics: Some(vec!["C".into()]),
            queue_offset: Range::new(3, 40),
            ..Default::default()
        };
        let end = *starts.last().unwrap(); // the last record (a "D") is not committed
        let plan = plan_queues(&dir.path().join("cq"), &f, Range::new(0, end), 2000)
            .unwrap()
            .unwrap();
        let q = QueueView::open(&dir.path().join("cq"), "C", 0)
            .unwrap()
            .unwrap();
        let mut rows = 0;
        for s in &plan.splits {
            let b = decode_queue(&log, &q, s, s.start, end, &f, &DecodeOptions::default()).unwrap();
            assert!(b.done);
            rows += b.columns.rows();
        }
        assert_eq!(rows, 37);
        let (pos, n) = advance(&log, 0, i64::MAX, 10, &f).unwrap();
        assert_eq!(n, 10);
        // The 10th "C" at queue offset >= 3 is queue offset 12, record 50 (91 + 300 + 1 + 15 bytes).
        assert_eq!(pos, starts[50] + 407);
        assert_eq!(advance(&log, 0, starts[3], 10, &f).unwrap(), (starts[3], 0));
    }

    #[test]
    fn buffers_decode_to_rows_or_nulls() {
        let good = record_bytes("T", 1, 2, 3, b"b", "UNIQ_KEY\u{1}U1", 5);
        let cols = decode_buffers(
            [Some(&good[..]), None, Some(&b"junk"[..])].into_iter(),
            ColumnSet::ALL,
            true,
        );
        let f = cols.finish();
        assert_eq!((f.rows, f.row_validity), (3, Some(vec![0b001])));
    }
}
