//! QueueView: one ConsumeQueue, read-only.
//!
//! Layout (REMOTING.md §6.3, `rmq_store::consume_queue`): `<consumequeue>/<topic>/<queueId>/`,
//! files named by the 20-digit byte offset of their first unit, all of one size; unit n
//! (logical offset n) at byte n × 20: CommitLog offset (i64), record size (i32), tags code
//! (i64). Valid units form a prefix (`offset ≥ 0 && size > 0`); the rest of the last file is
//! zeros. A queue first created at a logical offset > 0 starts with placeholder units
//! (offset 0, size `i32::MAX`).
//!
//! Units are read with `pread` (a queue is 20 bytes a message; no mapping to keep alive).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use rmq_store::config::CQ_UNIT_SIZE;
use rmq_store::consume_queue::{decode_unit, is_placeholder, CqUnit};

use crate::segment::{list_segments, SegmentInfo};
use crate::{io_err, Result};

const UNIT: usize = CQ_UNIT_SIZE as usize;

/// True for a unit a broker's recovery keeps (`offset ≥ 0 && size > 0`, placeholders too).
pub fn is_valid(u: &CqUnit) -> bool {
    u.0 >= 0 && u.1 > 0
}

/// True for a unit that refers to a record.
pub fn is_real(u: &CqUnit) -> bool {
    is_valid(u) && !is_placeholder(u)
}

/// The sub-directories of `dir` (sorted); a missing directory lists as empty.
fn list_dirs(dir: &Path) -> Result<Vec<String>> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(dir, e)),
    };
    let mut out: Vec<String> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    out.sort();
    Ok(out)
}

/// The queue ids of `topic` that have a directory.
pub fn queue_ids(cq_root: &Path, topic: &str) -> Result<Vec<i32>> {
    let mut ids: Vec<i32> = list_dirs(&cq_root.join(topic))?
        .iter()
        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|n| n.parse().ok())
        .collect();
    ids.sort_unstable();
    Ok(ids)
}

/// Every `(topic, queue id)` with a ConsumeQueue directory.
pub fn list_queues(cq_root: &Path) -> Result<Vec<(String, i32)>> {
    let mut out = Vec::new();
    for topic in list_dirs(cq_root)? {
        for q in queue_ids(cq_root, &topic)? {
            out.push((topic.clone(), q));
        }
    }
    Ok(out)
}

/// One ConsumeQueue's files.
#[derive(Debug, Clone)]
pub struct QueueView {
    topic: String,
    queue_id: i32,
    files: Vec<SegmentInfo>,
}

impl QueueView {
    /// The queue `<cq_root>/<topic>/<queue_id>`, `None` if it has no files.
    pub fn open(cq_root: &Path, topic: &str, queue_id: i32) -> Result<Option<QueueView>> {
        let files: Vec<SegmentInfo> =
            list_segments(&cq_root.join(topic).join(queue_id.to_string()))?
                .into_iter()
                .filter(|f| f.len >= CQ_UNIT_SIZE)
                .collect();
        if files.is_empty() {
            return Ok(None);
        }
        Ok(Some(QueueView {
            topic: topic.to_string(),
            queue_id,
            files,
        }))
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }
    pub fn queue_id(&self) -> i32 {
        self.queue_id
    }

    fn file_for(&self, index: i64) -> Option<&SegmentInfo> {
        let byte = index.checked_mul(CQ_UNIT_SIZE as i64)?;
        let i = self.files.partition_point(|f| f.base <= byte);
        let f = self.files.get(i.checked_sub(1)?)?;
        (byte + CQ_UNIT_SIZE as i64 <= f.end()).then_some(f)
    }

    /// Read the units `[start, end)` of one file into `out` (stopping at the file's end).
    fn read_file_units(
        &self,
        f: &SegmentInfo,
        start: i64,
        end: i64,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        let from = (start * CQ_UNIT_SIZE as i64 - f.base) as u64;
        let to =
            ((end * CQ_UNIT_SIZE as i64 - f.base) as u64).min(f.len / CQ_UNIT_SIZE * CQ_UNIT_SIZE);
        if to <= from {
            return Ok(());
        }
        let file = match File::open(&f.path) {
            Ok(file) => file,
            // Deleted by retention since the listing: nothing left to read there.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err(&f.path, e)),
        };
        let n = out.len();
        out.resize(n + (to - from) as usize, 0);
        let mut done = 0usize;
        while n + done < out.len() {
            let got = file
                .read_at(&mut out[n + done..], from + done as u64)
                .map_err(|e| io_err(&f.path, e))?;
            if got == 0 {
                break;
            }
            done += got;
        }
        out.truncate(n + done / UNIT * UNIT);
        Ok(())
    }

    /// The unit at logical offset `index` (invalid or placeholder units included).
    pub fn unit(&self, index: i64) -> Result<Option<CqUnit>> {
        let Some(f) = self.file_for(index) else {
            return Ok(None);
        };
        let mut buf = Vec::with_capacity(UNIT);
        self.read_file_units(f, index, index + 1, &mut buf)?;
        Ok(decode_unit(&buf))
    }

    /// The units `[start, end)`, stopping early at the first invalid unit (the end of the
    /// data) or at a missing file.
    pub fn read_units(&self, start: i64, end: i64) -> Result<Vec<CqUnit>> {
        let mut raw = Vec::new();
        let mut idx = start.max(0);
        while idx < end {
            let Some(f) = self.file_for(idx) else { break };
            let file_end = f.end() / CQ_UNIT_SIZE as i64;
            let stop = end.min(file_end);
            let before = raw.len();
            self.read_file_units(f, idx, stop, &mut raw)?;
            if raw.len() - before < ((stop - idx) as usize) * UNIT {
                break;
            }
            idx = stop;
        }
        Ok(raw
            .chunks_exact(UNIT)
            .filter_map(decode_unit)
            .take_while(is_valid)
            .collect())
    }

    /// Number of leading units of `f` satisfying `pred`, assuming they form a prefix.
    fn prefix_len(&self, f: &SegmentInfo, pred: impl Fn(&CqUnit) -> bool) -> Result<i64> {
        let first = f.base / CQ_UNIT_SIZE as i64;
        let (mut lo, mut hi) = (0i64, (f.len / CQ_UNIT_SIZE) as i64);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let mut buf = Vec::with_capacity(UNIT);
            self.read_file_units(f, first + mid, first + mid + 1, &mut buf)?;
            if decode_unit(&buf).is_some_and(|u| pred(&u)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// `(min, max)` logical offsets: the first unit after any leading placeholders, and one
    /// past the last valid unit. Units may still refer to CommitLog files deleted since.
    pub fn bounds(&self) -> Result<(i64, i64)> {
        let mut max = None;
        for f in self.files.iter().rev() {
            let n = self.prefix_len(f, is_valid)?;
            if n > 0 {
                max = Some(f.base / CQ_UNIT_SIZE as i64 + n);
                break;
            }
        }
        let Some(max) = max else { return Ok((0, 0)) };
        let first = &self.files[0];
        let min = first.base / CQ_UNIT_SIZE as i64 + self.prefix_len(first, is_placeholder)?;
        Ok((min.min(max), max))
    }

    /// First logical offset in `[lo, hi)` whose unit's CommitLog offset is ≥ `cl` (units
    /// grow with the logical offset); `hi` if there is none.
    pub fn lower_bound_commitlog(&self, lo: i64, hi: i64, cl: i64) -> Result<i64> {
        let (mut lo, mut hi) = (lo, hi);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.unit(mid)? {
                Some(u) if is_real(&u) && u.0 >= cl => hi = mid,
                Some(u) if is_valid(&u) => lo = mid + 1,
                _ => hi = mid,
            }
        }
        Ok(lo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::write_cq;
    use rmq_store::consume_queue::{encode_unit, PLACEHOLDER_SIZE};

    #[test]
    fn bounds_units_and_search() {
        let dir = tempfile::tempdir().unwrap();
        let mut raw = Vec::new();
        for _ in 0..3 {
            raw.extend_from_slice(&encode_unit(0, PLACEHOLDER_SIZE, 0));
        }
        for i in 0..20i64 {
            raw.extend_from_slice(&encode_unit(1000 + i * 100, 100, 7));
        }
        // 200-byte files = 10 units each: 23 units fill two files and 3 units of a third.
        write_cq(dir.path(), "T", 2, &raw, 200);
        std::fs::write(
            dir.path().join("T/2").join(format!("{:020}", 600)),
            vec![0u8; 200],
        )
        .unwrap();
        assert_eq!(queue_ids(dir.path(), "T").unwrap(), [2]);
        assert_eq!(list_queues(dir.path()).unwrap(), [("T".to_string(), 2)]);
        let q = QueueView::open(dir.path(), "T", 2).unwrap().unwrap();
        assert_eq!(q.bounds().unwrap(), (3, 23));
        assert_eq!(q.unit(3).unwrap(), Some((1000, 100, 7)));
        let u = q.read_units(8, 100).unwrap();
        assert_eq!(u.len(), 15);
        assert_eq!(u[0].0, 1500);
        assert_eq!(q.lower_bound_commitlog(3, 23, 1550).unwrap(), 9);
        assert_eq!(q.lower_bound_commitlog(3, 23, 0).unwrap(), 3);
        assert_eq!(q.lower_bound_commitlog(3, 23, 99_999).unwrap(), 23);
        assert!(QueueView::open(dir.path(), "T", 9).unwrap().is_none());
    }
}
