//! Decoding splits into column batches.
//!
//! A split is read in batches: each call decodes from a resume position until the batch is
//! full (`max_rows` rows or `max_bytes` of variable-width data) or the split ends, and says
//! where to resume. Only records the [`RecordFilter`] accepts become rows.
//!
//! Damage (bytes where a record should start and none checks out, see [`crate::commitlog`]) is
//! an error naming the file and the offset, or with [`DecodeOptions::skip_damage`] a
//! [`Damage`] entry in the batch: a scan resumes at the next intact record (every intact
//! record is read once, whatever the split boundaries), a queue read at the next unit.

use std::fmt;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;

use rmq_store::StoreError;

use crate::columns::{ColumnSet, Columns};
use crate::commitlog::{step, CommitLogView, Event, OnInvalid, Step, Stop};
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
    /// Pass over damaged records, listing them in [`Batch::damage`], instead of failing.
    pub skip_damage: bool,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            columns: ColumnSet::ALL,
            max_rows: 8192,
            max_bytes: 64 << 20,
            skip_damage: false,
        }
    }
}

/// Where reading went on after damaged bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// At the next intact record.
    NextRecord,
    /// At the end of the range read in that file: no intact record follows in it.
    RangeEnd,
    /// At the next ConsumeQueue unit (the damaged record is the one a unit lists).
    NextUnit,
}

/// Damaged bytes of a CommitLog file: where a record should start, none checks out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub file: PathBuf,
    /// Offset of the file's first byte.
    pub base: i64,
    /// CommitLog offset of the first damaged byte.
    pub offset: i64,
    /// Bytes passed over.
    pub skipped: u64,
    pub resume: Resume,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CommitLog file {} is damaged at offset {} (byte {} of the file): no valid record \
             starts there; ",
            self.file.display(),
            self.offset,
            self.offset - self.base
        )?;
        match self.resume {
            Resume::NextRecord => write!(
                f,
                "the next intact record is {} bytes on, at offset {}",
                self.skipped,
                self.offset + self.skipped as i64
            ),
            Resume::RangeEnd => write!(
                f,
                "no intact record follows in the {} bytes read after it",
                self.skipped
            ),
            Resume::NextUnit => write!(
                f,
                "its ConsumeQueue unit lists a {}-byte record there",
                self.skipped
            ),
        }
    }
}

impl Damage {
    fn at(log: &CommitLogView, offset: i64, skipped: u64, resume: Resume) -> Result<Damage> {
        let (file, base) = match log.segment_containing(offset)? {
            Some(s) => (s.info().path.clone(), s.base()),
            None => (log.dir().to_path_buf(), 0),
        };
        Ok(Damage {
            file,
            base,
            offset,
            skipped,
            resume,
        })
    }

    fn into_error(self) -> StoreError {
        corrupt("commitlog", self.to_string())
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
    /// Damaged ranges passed over (only with [`DecodeOptions::skip_damage`]).
    pub damage: Vec<Damage>,
}

fn new_columns(opts: &DecodeOptions) -> Columns {
    let rows = opts.max_rows.clamp(1, 1 << 16);
    Columns::new(opts.columns, rows, opts.max_bytes.min(rows * 1024))
}

/// Decode the records of `split` from `from` (the split's start or a batch's `next`).
///
/// Errors: `NotFound` if the split's file has been deleted (retention); `Corrupt` at damage
/// (unless `skip_damage`), or if the records do not end exactly on a cut point the planner
/// found (`end_is_boundary`).
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
            damage: Vec::new(),
        });
    }
    if from == split.start {
        if let Some(seg) = log.segment_containing(from)? {
            seg.advise_sequential();
        }
    }
    let max_rows = opts.max_rows.max(1);
    let mut damaged = Vec::new();
    let end = log.walk(from, split.end, true, OnInvalid::Skip, |ev| {
        match ev {
            Event::Record(pos, rec) => {
                seen += 1;
                bytes += rec.total_size as u64;
                if let Some(class) = filter.matches(pos, rec) {
                    cols.push(pos, rec, class);
                    if cols.rows() >= max_rows || cols.bytes() >= opts.max_bytes {
                        return ControlFlow::Break(());
                    }
                }
            }
            Event::Damage { from, to, resynced } => {
                damaged.push((from, to, resynced));
                if !opts.skip_damage {
                    return ControlFlow::Break(());
                }
            }
            Event::Blank(_) => {}
        }
        ControlFlow::Continue(())
    })?;
    let mut damage = Vec::with_capacity(damaged.len());
    for (from, to, resynced) in damaged {
        // The split's end is the next intact record when the planner cut there.
        let resume = if resynced || (to == split.end && split.end_is_boundary) {
            Resume::NextRecord
        } else {
            Resume::RangeEnd
        };
        let d = Damage::at(log, from, (to - from) as u64, resume)?;
        if !opts.skip_damage {
            return Err(d.into_error());
        }
        damage.push(d);
    }
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
        damage,
    })
}

/// Units read from a queue per `pread`.
const UNITS_PER_READ: i64 = 4096;

/// Decode the records a queue split lists, from logical offset `from`. Units referring below
/// the CommitLog's first file, at or past `committed_end`, or to a record that is not that
/// queue's (a stale unit) are skipped; a unit whose record does not check out is damage.
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
    let mut damage = Vec::new();
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
                let d = Damage::at(log, off, size as u64, Resume::NextUnit)?;
                if !opts.skip_damage {
                    return Err(d.into_error());
                }
                damage.push(d);
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
                        damage,
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
        damage,
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
    // Damage is skipped here; reading the range reports it.
    let w = log.walk(start, end, false, OnInvalid::Skip, |ev| {
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
        // Up to the committed end (here: the last record is not committed).
        let splits = plan_scan(&log, Range::new(0, starts[199]), 4096, Range::ALL).unwrap();
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
        assert_eq!((rows, seen), (50, 199));
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

    fn offsets_of(b: &Batch) -> Vec<i64> {
        let f = b.columns.clone().finish();
        let c = f
            .columns
            .iter()
            .find(|c| c.column == Column::CommitlogOffset)
            .unwrap();
        c.buffers[1]
            .as_ref()
            .unwrap()
            .chunks(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect()
    }

    /// Rows (commitlog offsets) and damage of reading every split, or the first error.
    fn read_splits(
        log: &CommitLogView,
        splits: &[ScanSplit],
        opts: &DecodeOptions,
    ) -> Result<(Vec<i64>, Vec<Damage>)> {
        let (mut rows, mut damage) = (Vec::new(), Vec::new());
        for s in splits {
            let mut pos = s.start;
            loop {
                let b = decode_scan(log, s, pos, &RecordFilter::default(), opts)?;
                rows.extend(offsets_of(&b));
                damage.extend(b.damage);
                pos = b.next;
                if b.done {
                    break;
                }
            }
        }
        Ok((rows, damage))
    }

    #[test]
    fn damage_is_an_error_or_skipped_to_the_next_intact_record() {
        let dir = tempfile::tempdir().unwrap();
        let (cl, cq) = (dir.path().join("cl"), dir.path().join("cq"));
        let msgs: Vec<(&str, Vec<u8>)> = (0..120)
            .map(|i| (["A", "B"][i % 2], vec![i as u8; 300 + i % 7]))
            .collect();
        let starts = write_store(&cl, Some(&cq), 16 << 10, &msgs);
        let file = |i: i64| cl.join(format!("{:020}", i * (16 << 10)));
        let in_file = |i: i64| starts.iter().filter(move |&&s| s / (16 << 10) == i);
        let (f0, f1): (Vec<i64>, Vec<i64>) =
            (in_file(0).copied().collect(), in_file(1).copied().collect());
        assert!(in_file(2).count() > 0, "the damaged files are closed ones");
        let mut b0 = std::fs::read(file(0)).unwrap();
        let at = |o: i64| o as usize;
        b0[at(f0[3]) + 5] ^= 0xff; // a magic code
        b0[at(f0[4]) + 120] ^= 0xff; // a body byte: the CRC fails
        b0[at(f0[10]) + 150..at(f0[12]) + 50].fill(0); // three records, partly zeroed
        std::fs::write(file(0), &b0).unwrap();
        let mut b1 = std::fs::read(file(1)).unwrap();
        let base1 = 16 << 10;
        b1[at(f1[0] - base1) + 2] ^= 0xff; // the file's first record: its TOTALSIZE
        let last = at(f1[f1.len() - 1] - base1);
        let magic = rmq_store::message::BLANK_MAGIC_CODE.to_be_bytes();
        let blank = last + b1[last..].windows(4).position(|w| w == magic).unwrap() - 4;
        b1[blank..blank + 8].fill(0); // the end-of-file blank marker
        std::fs::write(file(1), &b1).unwrap();
        let lost = [f0[3], f0[4], f0[10], f0[11], f0[12], f1[0]];
        let intact: Vec<i64> = starts
            .iter()
            .copied()
            .filter(|o| !lost.contains(o))
            .collect();

        let log = CommitLogView::open(&cl, true).unwrap();
        let end = crate::StoreView::open(dir.path(), Some(&cl), true)
            .unwrap()
            .committed_end(None)
            .unwrap();
        assert!(end > *starts.last().unwrap());
        let cols = ColumnSet::NONE.with(Column::CommitlogOffset);
        let skip = DecodeOptions {
            columns: cols,
            max_rows: 5,
            skip_damage: true,
            ..Default::default()
        };
        let fail = DecodeOptions {
            skip_damage: false,
            ..skip
        };
        for slice in [4096, 5000, 7000, 8192, 1 << 20] {
            let splits = plan_scan(&log, Range::new(0, end), slice, Range::ALL).unwrap();
            let (rows, damage) = read_splits(&log, &splits, &skip).unwrap();
            assert_eq!(rows, intact, "slice {slice}");
            let spots: Vec<(i64, Resume)> = damage.iter().map(|d| (d.offset, d.resume)).collect();
            assert_eq!(
                spots,
                [
                    (f0[3], Resume::NextRecord), // records 3 and 4
                    (f0[10], Resume::NextRecord),
                    (f1[0], Resume::NextRecord),
                    (blank as i64 + base1, Resume::RangeEnd),
                ],
                "slice {slice}"
            );
            assert_eq!(damage[0].skipped as i64, f0[5] - f0[3]);
            assert_eq!(damage[1].skipped as i64, f0[13] - f0[10]);
            assert_eq!(damage[3].skipped as usize, (16 << 10) - blank);
            let err = read_splits(&log, &splits, &fail).unwrap_err().to_string();
            let want = format!(
                "{} is damaged at offset {} (byte {} of the file)",
                file(0).display(),
                f0[3],
                f0[3]
            );
            assert!(err.contains(&want), "{err}");
        }

        // Through the ConsumeQueues the same records are read; each damaged one is listed.
        let f = RecordFilter {
            topics: Some(vec!["A".into(), "B".into()]),
            ..Default::default()
        };
        let plan = plan_queues(&cq, &f, Range::new(0, end), 2000)
            .unwrap()
            .unwrap();
        let mut rows = Vec::new();
        let mut damaged = Vec::new();
        for s in &plan.splits {
            let q = QueueView::open(&cq, &s.topic, s.queue_id).unwrap().unwrap();
            let b = decode_queue(&log, &q, s, s.start, end, &f, &skip).unwrap();
            rows.extend(offsets_of(&b));
            damaged.extend(b.damage.iter().map(|d| d.offset));
            let failed = decode_queue(&log, &q, s, s.start, end, &f, &fail);
            assert_eq!(failed.is_err(), !b.damage.is_empty());
        }
        rows.sort();
        damaged.sort();
        assert_eq!(rows, intact);
        assert_eq!(damaged, lost);
        // A stream's "next n rows" steps over the damage too.
        let (pos, n) = advance(&log, 0, end, 10, &RecordFilter::default()).unwrap();
        assert_eq!((pos, n), (intact[10], 10));
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
