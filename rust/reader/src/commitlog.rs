//! CommitLogView: the CommitLog's segment files, read-only, and walks over their records.
//!
//! Layout (REMOTING.md §4.1, §6.2): files `<commitlog>/<20-digit start offset>`, all of one
//! size (1 GiB by default); records back to back, never spanning files; a file's data ends
//! with the 8-byte blank (`remaining`, [`BLANK_MAGIC_CODE`]) when the next record did not
//! fit. Every record carries its own absolute offset (PHYSICALOFFSET at byte 28), which lets a
//! reader resynchronise at any byte position: [`find_record_start`] looks for the magic code
//! and accepts a candidate only if the whole record checks out *and* its PHYSICALOFFSET is the
//! candidate's own position.
//!
//! Damage: records are written back to back up to the blank marker, so inside a written range
//! (a closed file, or the head below the committed end) a position where no valid record
//! starts is damage, not the end of the data. A walk with [`OnInvalid::Skip`] reports the bad
//! bytes ([`Event::Damage`]) and resumes at the next position where a whole record checks out
//! (magic code, TOTALSIZE and field sizes, PHYSICALOFFSET, and the body CRC when checked),
//! found with [`find_record_start`]; if none follows, at the end of the walk's range in that
//! file. A zero run longer than [`MAX_RECORD_SIZE`] ends the search (it is a file's unwritten
//! tail), so records after a zeroed run that long are not found.
//!
//! Segments are listed once and mapped on first use; a file that appears later (roll-over)
//! is found by re-listing on a miss.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memchr::memmem;
use parking_lot::{Mutex, RwLock};
use rmq_store::mapped_file::{OS_PAGE_SIZE, ZERO_RUN_END};
use rmq_store::message::{
    self, read_i32, read_i64, Record, BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, POS_PHYSICAL_OFFSET,
    RECORD_FIXED_SIZE_V4,
};

use crate::segment::{list_segments, Segment, SegmentInfo};
use crate::Result;

/// Upper bound of a record's length (4 MiB body + headers and properties, rounded up).
pub const MAX_RECORD_SIZE: usize = ZERO_RUN_END;
/// The v1 message magic code as it appears in the file.
const MAGIC: [u8; 4] = MESSAGE_MAGIC_CODE.to_be_bytes();

/// What lies at a position of a segment.
#[derive(Debug)]
pub enum Step<'a> {
    /// A valid record (it ends inside the buffer).
    Record(Record<'a>),
    /// The end-of-file blank marker: the segment has no more records.
    Blank,
    /// No valid record: the end of the data (or a damaged or incomplete record).
    End,
}

/// Examine `buf[pos..]`, which sits at CommitLog offset `abs`: magic code, TOTALSIZE within
/// the buffer, PHYSICALOFFSET equal to `abs`, the fields adding up to TOTALSIZE, and (if
/// `check_crc`) the body CRC.
pub fn step(buf: &[u8], pos: usize, abs: i64, check_crc: bool) -> Step<'_> {
    let Some(tail) = buf.get(pos..) else {
        return Step::End;
    };
    let (Some(total), Some(magic)) = (read_i32(tail, 0), read_i32(tail, 4)) else {
        return Step::End;
    };
    if magic == BLANK_MAGIC_CODE {
        return Step::Blank;
    }
    if magic != MESSAGE_MAGIC_CODE
        || total < RECORD_FIXED_SIZE_V4 as i32
        || total as usize > tail.len()
        || read_i64(tail, POS_PHYSICAL_OFFSET) != Some(abs)
    {
        return Step::End;
    }
    match message::decode(&tail[..total as usize], check_crc) {
        Ok(r) => Step::Record(r),
        Err(_) => Step::End,
    }
}

/// Bytes searched at a time by [`find_record_start`].
const SEARCH_CHUNK: usize = 1 << 20;

/// The first position `p` in `[from, limit)` of `seg` where a valid record starts.
///
/// The search gives up after a run of zero bytes longer than any record: records start with a
/// non-zero size, so the written data has ended (this keeps a search through a file's
/// preallocated, sparse tail short).
pub fn find_record_start(
    seg: &Segment,
    from: usize,
    limit: usize,
    check_crc: bool,
) -> Option<usize> {
    let buf = seg.bytes();
    let limit = limit.min(buf.len());
    let finder = memmem::Finder::new(&MAGIC);
    let mut zeros = 0usize;
    let mut at = from;
    while at < limit {
        let end = (at + SEARCH_CHUNK).min(limit);
        // Candidates p in [at, end): their magic code sits at p + 4.
        let hay = buf.get(at + 4..(end + 4).min(buf.len()))?;
        let valid = |p: &usize| {
            matches!(
                step(buf, *p, seg.base() + *p as i64, check_crc),
                Step::Record(_)
            )
        };
        if let Some(p) = finder.find_iter(hay).map(|i| at + i).find(valid) {
            return Some(p);
        }
        if buf[at..end].iter().all(|&b| b == 0) {
            zeros += end - at;
            if zeros > MAX_RECORD_SIZE + SEARCH_CHUNK {
                return None;
            }
        } else {
            zeros = 0;
        }
        at = end;
    }
    None
}

/// A position at or shortly before the end of `seg`'s data where a valid record starts, or
/// `None` when none is found near the end (callers then walk from the start).
///
/// Written data is a prefix followed by zeros (files are created sparse and torn tails are
/// zeroed), so a binary search over pages finds where the zeros begin; the last valid record
/// starts less than [`MAX_RECORD_SIZE`] before that. A zero page inside the data only moves
/// the hint earlier, never past the end, because the hint is itself a valid record start.
pub fn last_record_hint(seg: &Segment, check_crc: bool) -> Option<usize> {
    let buf = seg.bytes();
    let pages = buf.len().div_ceil(OS_PAGE_SIZE);
    let zero = |i: usize| {
        let s = i * OS_PAGE_SIZE;
        buf[s..(s + OS_PAGE_SIZE).min(buf.len())]
            .iter()
            .all(|&b| b == 0)
    };
    let (mut lo, mut hi) = (0usize, pages);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if zero(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let data_end = (lo * OS_PAGE_SIZE).min(buf.len());
    if data_end == 0 {
        return None;
    }
    let from = data_end.saturating_sub(MAX_RECORD_SIZE + OS_PAGE_SIZE);
    let hay = buf.get(from + 4..(data_end + 4).min(buf.len()))?;
    memmem::rfind_iter(hay, &MAGIC)
        .map(|i| from + i)
        .find(|&p| {
            matches!(
                step(buf, p, seg.base() + p as i64, check_crc),
                Step::Record(_)
            )
        })
}

/// What a walk reports to its visitor.
#[derive(Debug)]
pub enum Event<'a> {
    /// A valid record at this offset.
    Record(i64, &'a Record<'a>),
    /// The end-of-file blank at this offset: the data continues at the next segment.
    Blank(i64),
    /// `[from, to)` holds no valid record where one should start (walks with
    /// [`OnInvalid::Skip`]): `to` is the next valid record (`resynced`), or else the end of the
    /// walk's range in that segment.
    Damage { from: i64, to: i64, resynced: bool },
}

/// What a walk does at a position where no valid record starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnInvalid {
    /// The data ends there ([`Stop::Invalid`]): the walk is looking for the end.
    End,
    /// The walk's range is known to hold records: report [`Event::Damage`] and resume at the
    /// next valid record.
    Skip,
}

/// Why a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The position reached the walk's limit.
    Limit,
    /// The visitor asked to stop (after the record it was shown).
    Visitor,
    /// No valid record at the position: the end of the data.
    Invalid,
    /// The segment the position falls in does not exist (end of the log, or deleted).
    NoSegment,
    /// A one-segment walk reached its segment's end (blank marker or last byte).
    SegmentEnd,
}

/// Where and why a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkEnd {
    pub pos: i64,
    pub stop: Stop,
}

/// The CommitLog directory, read-only.
pub struct CommitLogView {
    dir: PathBuf,
    check_crc: bool,
    listing: RwLock<Vec<SegmentInfo>>,
    mapped: Mutex<BTreeMap<i64, Arc<Segment>>>,
}

impl CommitLogView {
    /// List the segments of `dir` (nothing is mapped yet).
    pub fn open(dir: &Path, check_crc: bool) -> Result<CommitLogView> {
        Ok(CommitLogView {
            dir: dir.to_path_buf(),
            check_crc,
            listing: RwLock::new(list_segments(dir)?),
            mapped: Mutex::new(BTreeMap::new()),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn check_crc(&self) -> bool {
        self.check_crc
    }

    /// List the directory again (files appear on roll-over and vanish with retention).
    pub fn refresh(&self) -> Result<()> {
        *self.listing.write() = list_segments(&self.dir)?;
        Ok(())
    }

    /// The segments as last listed, by base offset.
    pub fn listing(&self) -> Vec<SegmentInfo> {
        self.listing.read().clone()
    }

    /// The first offset still on disk (0 for an empty log).
    pub fn min_offset(&self) -> i64 {
        self.listing.read().first().map_or(0, |s| s.base)
    }

    fn info_containing(&self, offset: i64) -> Option<SegmentInfo> {
        let l = self.listing.read();
        let i = l.partition_point(|s| s.base <= offset);
        let s = l.get(i.checked_sub(1)?)?;
        (offset < s.end()).then(|| s.clone())
    }

    /// The mapped segment listed as `info` (`None` if it has been deleted meanwhile).
    pub fn segment(&self, info: &SegmentInfo) -> Result<Option<Arc<Segment>>> {
        let mut mapped = self.mapped.lock();
        if let Some(s) = mapped.get(&info.base) {
            if s.info().len == info.len {
                return Ok(Some(s.clone()));
            }
        }
        let Some(seg) = Segment::open(info)? else {
            return Ok(None);
        };
        let seg = Arc::new(seg);
        mapped.insert(info.base, seg.clone());
        Ok(Some(seg))
    }

    /// The mapped segment holding `offset`, re-listing once if it is not known yet.
    pub fn segment_containing(&self, offset: i64) -> Result<Option<Arc<Segment>>> {
        let info = match self.info_containing(offset) {
            Some(i) => Some(i),
            None => {
                self.refresh()?;
                self.info_containing(offset)
            }
        };
        match info {
            Some(i) => self.segment(&i),
            None => Ok(None),
        }
    }

    /// Store timestamp of the first record of a segment, if it starts with a valid record.
    pub fn first_store_timestamp(&self, info: &SegmentInfo) -> Result<Option<i64>> {
        let Some(seg) = self.segment(info)? else {
            return Ok(None);
        };
        Ok(match step(seg.bytes(), 0, seg.base(), self.check_crc) {
            Step::Record(r) => Some(r.store_timestamp),
            _ => None,
        })
    }

    /// Walk records from `start` (a record boundary) while the position is below `limit`,
    /// showing each record (and blank marker, and with [`OnInvalid::Skip`] each damaged range)
    /// to `visit`. With `one_segment` the walk ends at the end of `start`'s segment instead of
    /// continuing in the next one.
    pub fn walk<F>(
        &self,
        start: i64,
        limit: i64,
        one_segment: bool,
        on_invalid: OnInvalid,
        mut visit: F,
    ) -> Result<WalkEnd>
    where
        F: FnMut(Event<'_>) -> ControlFlow<()>,
    {
        let mut pos = start;
        let mut seg: Option<Arc<Segment>> = None;
        loop {
            if pos >= limit {
                return Ok(WalkEnd {
                    pos,
                    stop: Stop::Limit,
                });
            }
            let s = match &seg {
                Some(s) if pos < s.end() => s.clone(),
                Some(_) if one_segment => {
                    return Ok(WalkEnd {
                        pos,
                        stop: Stop::SegmentEnd,
                    })
                }
                _ => match self.segment_containing(pos)? {
                    Some(s) => {
                        seg = Some(s.clone());
                        s
                    }
                    None => {
                        return Ok(WalkEnd {
                            pos,
                            stop: Stop::NoSegment,
                        })
                    }
                },
            };
            let buf = s.bytes();
            let mut at = (pos - s.base()) as usize;
            let seg_end = s.end();
            while pos < limit {
                match step(buf, at, pos, self.check_crc) {
                    Step::Record(r) => {
                        let size = r.total_size as usize;
                        let flow = visit(Event::Record(pos, &r));
                        at += size;
                        pos += size as i64;
                        if flow.is_break() {
                            return Ok(WalkEnd {
                                pos,
                                stop: Stop::Visitor,
                            });
                        }
                    }
                    Step::Blank => {
                        let _ = visit(Event::Blank(pos));
                        pos = seg_end;
                        break;
                    }
                    Step::End if at >= buf.len() => {
                        pos = seg_end;
                        break;
                    }
                    Step::End if on_invalid == OnInvalid::End => {
                        return Ok(WalkEnd {
                            pos,
                            stop: Stop::Invalid,
                        })
                    }
                    Step::End => {
                        let stop = (limit - s.base()).min(buf.len() as i64) as usize;
                        let next = find_record_start(&s, at + 1, stop, self.check_crc);
                        let from = pos;
                        at = next.unwrap_or(stop);
                        pos = s.base() + at as i64;
                        let resynced = next.is_some();
                        if visit(Event::Damage {
                            from,
                            to: pos,
                            resynced,
                        })
                        .is_break()
                        {
                            return Ok(WalkEnd {
                                pos,
                                stop: Stop::Visitor,
                            });
                        }
                    }
                }
            }
            if one_segment && pos >= seg_end && pos < limit {
                return Ok(WalkEnd {
                    pos,
                    stop: Stop::SegmentEnd,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{record_bytes, write_log};

    #[test]
    fn step_checks_position_and_fields() {
        let rec = record_bytes("T", 0, 0, 100, b"body", "TAGS\u{1}a", 5);
        let mut buf = vec![0u8; 100];
        buf.extend_from_slice(&rec);
        assert!(matches!(step(&buf, 100, 100, true), Step::Record(_)));
        // Same bytes believed to sit elsewhere: PHYSICALOFFSET does not match.
        assert!(matches!(step(&buf, 100, 101, true), Step::End));
        assert!(matches!(step(&buf, 0, 0, true), Step::End));
        assert!(matches!(
            step(&buf[..buf.len() - 1], 100, 100, true),
            Step::End
        ));
        let mut bad = buf.clone();
        let body_at = 100 + 84 + 4;
        bad[body_at] ^= 1;
        assert!(matches!(step(&bad, 100, 100, true), Step::End));
        assert!(matches!(step(&bad, 100, 100, false), Step::Record(_)));
        let mut blank = vec![0u8; 8];
        blank[4..8].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
        assert!(matches!(step(&blank, 0, 0, true), Step::Blank));
    }

    #[test]
    fn resync_and_tail_hint() {
        let dir = tempfile::tempdir().unwrap();
        // Bodies that contain the magic code and a forged header: only true starts are found.
        let mut body = vec![0u8; 300];
        body[10..14].copy_from_slice(&MESSAGE_MAGIC_CODE.to_be_bytes());
        let starts = write_log(dir.path(), 1 << 16, &vec![("T", body); 40]);
        let log = CommitLogView::open(dir.path(), true).unwrap();
        let seg = log.segment(&log.listing()[0]).unwrap().unwrap();
        for w in starts.windows(2) {
            let (a, b) = (w[0] as usize, w[1] as usize);
            assert_eq!(find_record_start(&seg, a, 1 << 16, true), Some(a));
            assert_eq!(find_record_start(&seg, a + 1, 1 << 16, true), Some(b));
        }
        let last = *starts.last().unwrap() as usize;
        assert_eq!(find_record_start(&seg, last + 1, 1 << 16, true), None);
        assert_eq!(last_record_hint(&seg, true), Some(last));
        let mut n = 0;
        let end = log
            .walk(0, i64::MAX, false, OnInvalid::End, |e| {
                if let Event::Record(..) = e {
                    n += 1;
                }
                ControlFlow::Continue(())
            })
            .unwrap();
        assert_eq!(n, 40);
        assert_eq!(end.stop, Stop::Invalid);
    }

    #[test]
    fn a_skipping_walk_resumes_at_the_next_intact_record() {
        let dir = tempfile::tempdir().unwrap();
        let starts = write_log(dir.path(), 1 << 16, &vec![("T", vec![3u8; 200]); 10]);
        let f = dir.path().join(format!("{:020}", 0));
        let mut bytes = std::fs::read(&f).unwrap();
        bytes[starts[2] as usize + 6] ^= 0x10; // a magic code
        bytes[starts[6] as usize..starts[8] as usize - 3].fill(0xee); // garbage over two records
        std::fs::write(&f, &bytes).unwrap();
        let log = CommitLogView::open(dir.path(), true).unwrap();
        let walk = |on: OnInvalid, limit: i64| {
            let mut seen = Vec::new();
            let end = log
                .walk(0, limit, false, on, |e| {
                    seen.push(match e {
                        Event::Record(p, _) => (p, 0, true),
                        Event::Blank(p) => (p, -1, false),
                        Event::Damage { from, to, resynced } => (from, to, resynced),
                    });
                    ControlFlow::Continue(())
                })
                .unwrap();
            (seen, end)
        };
        let (seen, end) = walk(OnInvalid::End, i64::MAX);
        assert_eq!(seen.len(), 2);
        assert_eq!(
            end,
            WalkEnd {
                pos: starts[2],
                stop: Stop::Invalid
            }
        );
        let data_end = starts[9] + (starts[1] - starts[0]);
        let (seen, end) = walk(OnInvalid::Skip, data_end);
        let rec = |i: usize| (starts[i], 0, true);
        assert_eq!(
            seen,
            [
                rec(0),
                rec(1),
                (starts[2], starts[3], true),
                rec(3),
                rec(4),
                rec(5),
                (starts[6], starts[8], true),
                rec(8),
                rec(9)
            ]
        );
        assert_eq!(end.stop, Stop::Limit);
        // Damage with nothing intact after it runs to the limit.
        let (seen, end) = walk(OnInvalid::Skip, starts[7] + 10);
        assert_eq!(seen.last(), Some(&(starts[6], starts[7] + 10, false)));
        assert_eq!(
            end,
            WalkEnd {
                pos: starts[7] + 10,
                stop: Stop::Limit
            }
        );
    }

    #[test]
    fn search_stops_in_a_long_zero_tail() {
        let dir = tempfile::tempdir().unwrap();
        let size = 8 << 20;
        let mut file = vec![0u8; size];
        let near = record_bytes("T", 0, 0, 1 << 20, b"x", "", 1);
        file[1 << 20..(1 << 20) + near.len()].copy_from_slice(&near);
        let far = record_bytes("T", 0, 1, 7 << 20, b"x", "", 2);
        file[7 << 20..(7 << 20) + far.len()].copy_from_slice(&far);
        std::fs::write(dir.path().join(format!("{:020}", 0)), &file).unwrap();
        let log = CommitLogView::open(dir.path(), true).unwrap();
        let seg = log.segment(&log.listing()[0]).unwrap().unwrap();
        assert_eq!(find_record_start(&seg, 0, size, true), Some(1 << 20));
        // Past 5 MiB of zeros the data has ended: a record beyond is not a boundary to cut at.
        assert_eq!(find_record_start(&seg, (1 << 20) + 1, size, true), None);
        assert_eq!(find_record_start(&seg, 6 << 20, size, true), Some(7 << 20));
    }
}
