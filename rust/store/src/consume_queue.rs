//! ConsumeQueue: the per-(topic, queue) list of a topic's messages in the CommitLog.
//!
//! Directory `<consumequeue root>/<topic>/<queueId>/`, files named by the 20-digit start
//! **byte** offset of their first unit, every file exactly `file_size` bytes (default
//! 6,000,000 = 300,000 units). Unit n (logical offset n) sits at byte n × [`CQ_UNIT_SIZE`]
//! across the file sequence; all integers big-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | [`UNIT_POS_OFFSET`] = 0 | 8 | CommitLog offset of the record (i64) |
//! | [`UNIT_POS_SIZE`] = 8 | 4 | record size (i32) |
//! | [`UNIT_POS_TAGS`] = 12 | 8 | tags code (i64; delivery time for `SCHEDULE_TOPIC_XXXX`) |
//!
//! A queue whose first file is created at a logical offset > 0 has the slots before that
//! offset in the file filled with placeholder units (offset 0, size [`PLACEHOLDER_SIZE`],
//! tags 0). Recovery (REMOTING.md §6.7) reads units from the third-last file while
//! `offset ≥ 0 && size > 0`; the first failing unit ends the data.
//!
//! Concurrency: one writer (the dispatcher; truncation, expiry and recovery take the same
//! lock) and any number of readers. A unit is written below the file's unpublished write
//! position and then published, so readers never see a half-written unit.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::config::CQ_UNIT_SIZE;
use crate::error::{Result, StoreError};
use crate::mapped_file::MappedFile;
use crate::mapped_file_queue::MappedFileQueue;

/// Bytes per unit, as a `usize`.
const UNIT: usize = CQ_UNIT_SIZE as usize;
/// Byte position of the CommitLog offset inside a unit.
pub const UNIT_POS_OFFSET: usize = 0;
/// Byte position of the record size inside a unit.
pub const UNIT_POS_SIZE: usize = 8;
/// Byte position of the tags code inside a unit.
pub const UNIT_POS_TAGS: usize = 12;
/// Size field of a placeholder unit (`Integer.MAX_VALUE`); its offset and tags are 0.
pub const PLACEHOLDER_SIZE: i32 = i32::MAX;
/// Placeholder units written per `write_at` call when filling.
const FILL_CHUNK_UNITS: usize = 4096;
/// The most disk blocks (bytes) a ConsumeQueue file reserves ahead of its writer at a time.
const RESERVE_AHEAD_MAX: usize = 1 << 20;

/// One unit: (CommitLog offset, record size, tags code).
pub type CqUnit = (i64, i32, i64);

/// Encode one unit.
pub fn encode_unit(cl_offset: i64, size: i32, tags_code: i64) -> [u8; CQ_UNIT_SIZE as usize] {
    let mut b = [0u8; UNIT];
    b[UNIT_POS_OFFSET..UNIT_POS_SIZE].copy_from_slice(&cl_offset.to_be_bytes());
    b[UNIT_POS_SIZE..UNIT_POS_TAGS].copy_from_slice(&size.to_be_bytes());
    b[UNIT_POS_TAGS..UNIT].copy_from_slice(&tags_code.to_be_bytes());
    b
}

/// Decode the unit at the start of `b`; `None` if fewer than 20 bytes.
pub fn decode_unit(b: &[u8]) -> Option<CqUnit> {
    let off = i64::from_be_bytes(b.get(UNIT_POS_OFFSET..UNIT_POS_SIZE)?.try_into().ok()?);
    let size = i32::from_be_bytes(b.get(UNIT_POS_SIZE..UNIT_POS_TAGS)?.try_into().ok()?);
    let tags = i64::from_be_bytes(b.get(UNIT_POS_TAGS..UNIT)?.try_into().ok()?);
    Some((off, size, tags))
}

/// True for the placeholder written before the first real unit of a queue (or into a gap).
pub fn is_placeholder(u: &CqUnit) -> bool {
    u.0 == 0 && u.1 == PLACEHOLDER_SIZE
}

/// True for a unit recovery accepts (`offset ≥ 0 && size > 0`; placeholders included).
fn is_valid(u: &CqUnit) -> bool {
    u.0 >= 0 && u.1 > 0
}

/// True for a unit that refers to a message.
fn is_real(u: &CqUnit) -> bool {
    is_valid(u) && !is_placeholder(u)
}

/// A run of units inside one file, pinned by an `Arc` so it stays readable even if the file
/// is deleted meanwhile. Never crosses a file boundary: callers loop from
/// [`CqSlice::next_offset`].
#[derive(Debug, Clone)]
pub struct CqSlice {
    file: Arc<MappedFile>,
    pos: usize,
    len: usize,
    start: i64,
}

impl CqSlice {
    /// Logical offset of the first unit.
    pub fn start_offset(&self) -> i64 {
        self.start
    }
    /// Number of units.
    pub fn len(&self) -> usize {
        self.len / UNIT
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Logical offset after the last unit.
    pub fn next_offset(&self) -> i64 {
        self.start + self.len() as i64
    }
    /// The raw units (`len() × 20` bytes).
    pub fn bytes(&self) -> &[u8] {
        self.file
            .raw_from(self.pos)
            .get(..self.len)
            .unwrap_or_default()
    }
    /// The units in order; unit i has logical offset `start_offset() + i`. A gap-filling
    /// placeholder decodes as `(0, PLACEHOLDER_SIZE, 0)` (see [`is_placeholder`]).
    pub fn iter(&self) -> impl Iterator<Item = CqUnit> + '_ {
        self.bytes().chunks_exact(UNIT).filter_map(decode_unit)
    }
}

/// The ConsumeQueue of one (topic, queue id).
pub struct ConsumeQueue {
    topic: String,
    queue_id: i32,
    units_per_file: u64,
    alloc_chunk: usize,
    files: MappedFileQueue,
    /// First consumable logical offset (before clamping to the files present).
    min_logic: AtomicI64,
    /// End (offset + size) of the last real unit; −1 when there is none.
    max_physic: AtomicI64,
    writer: Mutex<()>,
}

impl std::fmt::Debug for ConsumeQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumeQueue")
            .field("topic", &self.topic)
            .field("queue_id", &self.queue_id)
            .field("min", &self.min_offset())
            .field("max", &self.max_offset())
            .finish()
    }
}

impl ConsumeQueue {
    /// The queue at `<root>/<topic>/<queue_id>`. `file_size` is rounded down to a whole number
    /// of units (at least one); `StoreConfig::validate` rejects other values beforehand.
    pub fn new(root: &Path, topic: &str, queue_id: i32, file_size: u64) -> ConsumeQueue {
        let units_per_file = (file_size / CQ_UNIT_SIZE).max(1);
        let dir = root.join(topic).join(queue_id.to_string());
        ConsumeQueue {
            topic: topic.to_string(),
            queue_id,
            units_per_file,
            // Disk blocks reserved ahead of the writer: at least a page, what a write into a
            // sparse file takes anyway, growing with the file (see `reserve_ahead`); a whole
            // file where reading a hole takes space (tmpfs).
            alloc_chunk: if crate::disk::holes_take_space(root) {
                (units_per_file * CQ_UNIT_SIZE) as usize
            } else {
                crate::mapped_file::OS_PAGE_SIZE
            },
            files: MappedFileQueue::new(dir, units_per_file * CQ_UNIT_SIZE, false, false),
            min_logic: AtomicI64::new(0),
            max_physic: AtomicI64::new(-1),
            writer: Mutex::new(()),
        }
    }

    /// Bytes of disk blocks to reserve ahead of a write at `pos` of a file: as many as the
    /// file already holds (at least [`ConsumeQueue::alloc_chunk`], at most
    /// [`RESERVE_AHEAD_MAX`]). A page at a time, the reservations of queues written side by
    /// side interleave on disk, one extent per page, and writing a second of a busy queue
    /// back then walks hundreds of extents (a tenth of the broker's CPU at 600,000 messages
    /// a second over 8 queues); a quiet queue still holds at most twice what it wrote.
    fn reserve_ahead(&self, pos: usize) -> usize {
        self.alloc_chunk.max(pos.min(RESERVE_AHEAD_MAX))
    }

    /// Every queue found under `<root>/<topic>/<queueId>/`, loaded (mapped) but not yet
    /// recovered, sorted by topic then queue id. Entries that are not directories and queue
    /// directories whose name is not a non-negative integer are ignored.
    pub fn discover(root: &Path, file_size: u64) -> Result<Vec<ConsumeQueue>> {
        let mut out = Vec::new();
        for topic_dir in list_dirs(root)? {
            let Some(topic) = topic_dir.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            for qdir in list_dirs(&topic_dir)? {
                let queue_id = qdir
                    .file_name()
                    .and_then(|n| n.to_str())
                    .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|n| n.parse::<i32>().ok());
                if let Some(queue_id) = queue_id {
                    let cq = ConsumeQueue::new(root, topic, queue_id, file_size);
                    cq.load()?;
                    out.push(cq);
                }
            }
        }
        out.sort_by(|a, b| (&a.topic, a.queue_id).cmp(&(&b.topic, b.queue_id)));
        Ok(out)
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }
    pub fn queue_id(&self) -> i32 {
        self.queue_id
    }
    pub fn dir(&self) -> &Path {
        self.files.dir()
    }
    /// Size of one file in bytes.
    pub fn file_size(&self) -> u64 {
        self.files.file_size()
    }

    /// Files the last load found short and extended with zeros (path, former length).
    pub fn extended_files(&self) -> Vec<(PathBuf, u64)> {
        self.files.extended_files()
    }

    /// Map the files on disk (a short file is extended, see [`MappedFile::open`]). Call
    /// [`ConsumeQueue::recover`] next: until then every file counts as full.
    pub fn load(&self) -> Result<()> {
        let _w = self.writer.lock();
        self.files.load()?;
        self.min_logic.store(0, Ordering::Release);
        self.max_physic.store(-1, Ordering::Release);
        Ok(())
    }

    /// Find the end of the valid units (scanning from the third-last file), truncate there,
    /// and recompute the min offset and max physical offset. Besides `offset ≥ 0 && size > 0`
    /// a unit must refer to a later CommitLog offset than the real unit before it (dispatch is
    /// in CommitLog order), which also catches a unit torn across a page boundary.
    pub fn recover(&self) -> Result<()> {
        let _w = self.writer.lock();
        let files = self.files.files();
        let start = files.len().saturating_sub(3);
        let Some(first_scanned) = files.get(start) else {
            self.min_logic.store(0, Ordering::Release);
            self.max_physic.store(-1, Ordering::Release);
            return Ok(());
        };
        let mut end = first_scanned.from_offset();
        let mut prev_real = -1i64;
        for f in &files[start..] {
            let data = f.raw_from(0);
            let mut pos = 0usize;
            while let Some(u) = data.get(pos..).and_then(decode_unit) {
                if !is_valid(&u) {
                    break;
                }
                if !is_placeholder(&u) {
                    if u.0 <= prev_real {
                        break;
                    }
                    prev_real = u.0;
                }
                pos += UNIT;
            }
            end = f.from_offset() + pos as u64;
            if pos + UNIT <= f.size() {
                break;
            }
        }
        self.files.truncate_dirty(end)?;
        self.max_physic
            .store(self.scan_max_physic(), Ordering::Release);
        self.min_logic
            .store(self.first_unit_at_or_above(i64::MIN), Ordering::Release);
        Ok(())
    }

    /// Next logical offset to write.
    pub fn max_offset(&self) -> i64 {
        (self.files.max_offset() / CQ_UNIT_SIZE) as i64
    }

    /// First consumable logical offset: placeholders and units whose CommitLog data is gone
    /// (see [`ConsumeQueue::correct_min_offset`]) are below it. Equals `max_offset()` when
    /// the queue holds nothing consumable.
    pub fn min_offset(&self) -> i64 {
        let max = self.max_offset();
        let first = self
            .files
            .first_file()
            .map(|f| (f.from_offset() / CQ_UNIT_SIZE) as i64)
            .unwrap_or(0);
        self.min_logic.load(Ordering::Acquire).max(first).min(max)
    }

    /// End (offset + size) of the last unit's record in the CommitLog; −1 for an empty queue.
    pub fn max_physic_offset(&self) -> i64 {
        self.max_physic.load(Ordering::Acquire)
    }

    /// Logical offset below which everything is on disk.
    pub fn flushed_offset(&self) -> i64 {
        (self.files.flushed_where() / CQ_UNIT_SIZE) as i64
    }

    /// Write the unit at logical `queue_offset`.
    ///
    /// * Already present (`cl_offset + size ≤ max_physic_offset()`, or `queue_offset <
    ///   max_offset()`, i.e. a re-dispatch after recovery): ignored.
    /// * Queue without units: the file holding `queue_offset` is created and its slots before
    ///   `queue_offset` are filled with placeholders; the min offset becomes `queue_offset`.
    /// * A gap after existing units (`queue_offset > max_offset()`, which dispatch in
    ///   CommitLog order never produces) is filled with placeholders when it is at most one
    ///   file of units long, and is refused with [`StoreError::Corrupt`] beyond that, so a
    ///   damaged queue offset cannot fill the disk.
    pub fn put(&self, cl_offset: i64, size: i32, tags_code: i64, queue_offset: i64) -> Result<()> {
        let unit = (cl_offset, size, tags_code);
        if !is_real(&unit) || queue_offset < 0 {
            return Err(StoreError::corrupt(
                "consume queue unit",
                format!(
                    "{}-{}: offset {cl_offset}, size {size} at queue offset {queue_offset}",
                    self.topic, self.queue_id
                ),
            ));
        }
        let byte = (queue_offset as u64)
            .checked_mul(CQ_UNIT_SIZE)
            .filter(|b| b.checked_add(self.file_size()).is_some())
            .ok_or_else(|| {
                StoreError::corrupt("consume queue offset", format!("{queue_offset} overflows"))
            })?;
        let _w = self.writer.lock();
        if cl_offset.saturating_add(size as i64) <= self.max_physic_offset() {
            return Ok(());
        }
        // The common case, with one look at the files: the unit goes right after the last
        // one, in the file holding it, which has room. That file holds units (`pos > 0`),
        // so the first file starts below this unit, and the queue had something
        // consumable exactly when `min_logic` is below it (see `min_offset`).
        let appended = self.files.with_last_file(|f| {
            let pos = f.wrote_position();
            if pos > 0 && f.from_offset() + pos as u64 == byte && pos + UNIT <= f.size() {
                f.ensure_allocated(pos + UNIT, self.reserve_ahead(pos))?;
                f.write_at(pos, &encode_unit(cl_offset, size, tags_code))?;
                f.set_wrote_position(pos + UNIT);
                return Ok(true);
            }
            Ok::<bool, StoreError>(false)
        });
        if appended.transpose()? == Some(true) {
            if self.min_logic.load(Ordering::Acquire) >= queue_offset {
                self.min_logic.store(queue_offset, Ordering::Release);
            }
            self.max_physic
                .store(cl_offset.saturating_add(size as i64), Ordering::Release);
            return Ok(());
        }
        let max = self.max_offset();
        if queue_offset < max {
            return Ok(());
        }
        let had_consumable = self.min_offset() < max;
        let has_units = self.files.max_offset() > self.files.min_offset();
        let fill_from = if has_units {
            let gap = (queue_offset - max) as u64;
            if gap > self.units_per_file {
                return Err(StoreError::corrupt(
                    "consume queue offset",
                    format!(
                        "{}-{}: unit at {queue_offset} leaves a gap of {gap} after max offset {max}",
                        self.topic, self.queue_id
                    ),
                ));
            }
            max as u64
        } else {
            // No unit anywhere: empty files that do not hold `queue_offset` are dropped (no
            // data is lost), and the file holding it is started with placeholders.
            let holds = self.files.last_file().is_some_and(|f| {
                byte >= f.from_offset() && byte - f.from_offset() < f.size() as u64
            });
            if !holds && !self.files.is_empty() {
                self.files.destroy()?;
            }
            let file_units = self.units_per_file;
            let start = (queue_offset as u64) / file_units * file_units;
            start.max(self.files.max_offset() / CQ_UNIT_SIZE)
        };
        self.fill_placeholders(fill_from, queue_offset as u64)?;
        let (f, pos) = self.file_at(byte)?;
        f.ensure_allocated(pos + UNIT, self.reserve_ahead(pos))?;
        f.write_at(pos, &encode_unit(cl_offset, size, tags_code))?;
        f.set_wrote_position(pos + UNIT);
        if !had_consumable {
            self.min_logic.store(queue_offset, Ordering::Release);
        }
        self.max_physic
            .store(cl_offset.saturating_add(size as i64), Ordering::Release);
        Ok(())
    }

    /// The file to append to and its write position, which must be byte offset `byte`.
    fn file_at(&self, byte: u64) -> Result<(Arc<MappedFile>, usize)> {
        let f = self.files.last_or_create(byte)?;
        let pos = f.wrote_position();
        if f.from_offset() + pos as u64 != byte {
            return Err(StoreError::corrupt(
                "consume queue position",
                format!(
                    "{}: write position {} is not the expected {byte}",
                    f.path().display(),
                    f.from_offset() + pos as u64
                ),
            ));
        }
        Ok((f, pos))
    }

    /// Write placeholders at logical offsets `[from, to)`, which must start at the write
    /// position (or at a file boundary of an empty queue).
    fn fill_placeholders(&self, from: u64, to: u64) -> Result<()> {
        if from >= to {
            return Ok(());
        }
        let chunk_units = (to - from).min(FILL_CHUNK_UNITS as u64) as usize;
        let chunk: Vec<u8> = encode_unit(0, PLACEHOLDER_SIZE, 0)
            .iter()
            .copied()
            .cycle()
            .take(chunk_units * UNIT)
            .collect();
        let mut cur = from;
        while cur < to {
            let byte = cur * CQ_UNIT_SIZE;
            let (f, pos) = self.file_at(byte)?;
            let room = ((f.size() - pos) / UNIT) as u64;
            let n = (to - cur).min(room).min(chunk_units as u64) as usize;
            f.ensure_allocated(pos + n * UNIT, self.reserve_ahead(pos))?;
            f.write_at(pos, &chunk[..n * UNIT])?;
            f.set_wrote_position(pos + n * UNIT);
            cur += n as u64;
        }
        Ok(())
    }

    /// The unit at logical `index`, if it is within `[min_offset, max_offset)`.
    pub fn unit(&self, index: i64) -> Option<CqUnit> {
        if index < self.min_offset() {
            return None;
        }
        self.raw_unit(index)
    }

    /// Up to `max` units from logical `start`, within one file. `None` when `start` is below
    /// the min offset or at/after the max offset (or `max` is 0).
    pub fn read_units(&self, start: i64, max: usize) -> Option<CqSlice> {
        if max == 0 || start < self.min_offset() {
            return None;
        }
        let byte = (start as u64).checked_mul(CQ_UNIT_SIZE)?;
        let file = self.files.find(byte)?;
        let pos = (byte - file.from_offset()) as usize;
        let wrote = file.wrote_position() / UNIT * UNIT;
        if pos >= wrote {
            return None;
        }
        let len = (wrote - pos).min(max.saturating_mul(UNIT));
        Some(CqSlice {
            file,
            pos,
            len,
            start,
        })
    }

    /// The unit at `index` regardless of the min offset (placeholders included).
    fn raw_unit(&self, index: i64) -> Option<CqUnit> {
        let byte = u64::try_from(index).ok()?.checked_mul(CQ_UNIT_SIZE)?;
        let f = self.files.find(byte)?;
        let pos = (byte - f.from_offset()) as usize;
        f.slice(pos, UNIT).and_then(decode_unit)
    }

    /// The written units of `f` (whole units only).
    fn written(f: &MappedFile) -> &[u8] {
        let wrote = f.wrote_position() / UNIT * UNIT;
        f.raw_from(0).get(..wrote).unwrap_or_default()
    }

    /// End of the last real unit's record, −1 if there is none.
    fn scan_max_physic(&self) -> i64 {
        for f in self.files.files().iter().rev() {
            let last_real = Self::written(f)
                .chunks_exact(UNIT)
                .rev()
                .filter_map(decode_unit)
                .find(is_real);
            if let Some(u) = last_real {
                return u.0.saturating_add(u.1 as i64);
            }
        }
        -1
    }

    /// Logical offset of the first real unit whose CommitLog offset is ≥ `cl_min`; the max
    /// offset if there is none.
    fn first_unit_at_or_above(&self, cl_min: i64) -> i64 {
        for f in self.files.files() {
            let data = Self::written(&f);
            // Real offsets only grow: skip a whole file whose last unit is real and too low.
            let last = data
                .len()
                .checked_sub(UNIT)
                .and_then(|p| data.get(p..))
                .and_then(decode_unit);
            if last.is_some_and(|u| is_real(&u) && u.0 < cl_min) {
                continue;
            }
            let base = (f.from_offset() / CQ_UNIT_SIZE) as i64;
            let hit = data
                .chunks_exact(UNIT)
                .filter_map(decode_unit)
                .position(|u| is_real(&u) && u.0 >= cl_min);
            if let Some(i) = hit {
                return base + i as i64;
            }
        }
        self.max_offset()
    }

    /// Remove every unit whose CommitLog offset is ≥ `phy_offset` (the CommitLog was
    /// truncated there). Whole trailing files whose first unit is beyond are deleted; an empty
    /// queue ends up without files.
    pub fn truncate_dirty(&self, phy_offset: i64) -> Result<()> {
        let _w = self.writer.lock();
        let files = self.files.files();
        let Some(first) = files.first() else {
            return Ok(());
        };
        let mut cut = first.from_offset() / CQ_UNIT_SIZE;
        for f in files.iter().rev() {
            let data = Self::written(f);
            let kept = data
                .chunks_exact(UNIT)
                .rev()
                .filter_map(decode_unit)
                .skip_while(|u| !is_valid(u) || (!is_placeholder(u) && u.0 >= phy_offset))
                .count();
            if kept > 0 {
                cut = f.from_offset() / CQ_UNIT_SIZE + kept as u64;
                break;
            }
        }
        if cut == first.from_offset() / CQ_UNIT_SIZE {
            self.files.destroy()?;
            self.min_logic.store(0, Ordering::Release);
        } else {
            self.files.truncate_dirty(cut * CQ_UNIT_SIZE)?;
        }
        self.max_physic
            .store(self.scan_max_physic(), Ordering::Release);
        Ok(())
    }

    /// Set the min offset to the first unit whose CommitLog offset is ≥ `commitlog_min`
    /// (the max offset if none is).
    /// A min offset that per-topic retention raised ([`ConsumeQueue::expire_below`]) stays.
    pub fn correct_min_offset(&self, commitlog_min: i64) {
        let _w = self.writer.lock();
        self.min_logic
            .fetch_max(self.first_unit_at_or_above(commitlog_min), Ordering::AcqRel);
    }

    /// Delete head files whose last unit refers below `commitlog_min` (never the last file),
    /// then correct the min offset. Returns the number of files deleted.
    pub fn delete_expired(&self, commitlog_min: i64) -> Result<usize> {
        let _w = self.writer.lock();
        let deleted = self.files.delete_head_files(usize::MAX, |f| {
            let data = Self::written(f);
            data.len()
                .checked_sub(UNIT)
                .and_then(|p| data.get(p..))
                .and_then(decode_unit)
                .is_some_and(|u| is_valid(&u) && u.0 < commitlog_min)
        })?;
        // Never lower: per-topic retention may have raised it further.
        self.min_logic
            .fetch_max(self.first_unit_at_or_above(commitlog_min), Ordering::AcqRel);
        Ok(deleted)
    }

    /// Per-topic retention: nothing below logical offset `cut` is served any more (the min
    /// offset becomes `cut`, at most the max offset), and head files wholly below it are
    /// deleted (never the last). The CommitLog keeps the records. Returns how many offsets
    /// the min offset moved and how many files were deleted.
    pub fn expire_below(&self, cut: i64) -> Result<(i64, usize)> {
        let _w = self.writer.lock();
        let min = self.min_offset();
        let cut = cut.min(self.max_offset());
        if cut <= min {
            return Ok((0, 0));
        }
        self.min_logic.fetch_max(cut, Ordering::AcqRel);
        let end = cut as u64 * CQ_UNIT_SIZE;
        let files = self
            .files
            .delete_head_files(usize::MAX, |f| f.from_offset() + f.size() as u64 <= end)?;
        Ok((cut - min, files))
    }

    /// The CommitLog offset of the message at logical `index` (`None` below the min offset,
    /// at or past the max offset, or for a placeholder).
    pub fn physic_offset_at(&self, index: i64) -> Option<i64> {
        self.unit(index).filter(is_real).map(|u| u.0)
    }

    /// Flush dirty pages when at least `least_pages` accumulated (0 = all).
    pub fn flush(&self, least_pages: u64) -> Result<()> {
        self.files.flush(least_pages).map(|_| ())
    }

    /// Delete every file, the queue directory and, if now empty, the topic directory.
    pub fn destroy(&self) -> Result<()> {
        let _w = self.writer.lock();
        self.files.destroy()?;
        self.min_logic.store(0, Ordering::Release);
        self.max_physic.store(-1, Ordering::Release);
        if let Some(topic_dir) = self.files.dir().parent() {
            // Fails (and is ignored) while other queues of the topic remain.
            let _ = std::fs::remove_dir(topic_dir);
        }
        Ok(())
    }

    /// The logical offset of the first message stored at or after `timestamp` (ms), by
    /// binary search over `[min_offset, max_offset)`: `min_offset()` when every message is
    /// newer, `max_offset()` when none is. `store_time_of(cl_offset, size)` reads a record's
    /// store timestamp from the CommitLog; a record it cannot read (deleted head) counts as
    /// older than `timestamp`.
    pub fn offset_by_time(
        &self,
        timestamp: i64,
        store_time_of: &dyn Fn(i64, i32) -> Option<i64>,
    ) -> i64 {
        let mut lo = self.min_offset();
        let mut hi = self.max_offset();
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let newer = self
                .raw_unit(mid)
                .filter(is_real)
                .and_then(|u| store_time_of(u.0, u.1))
                .is_some_and(|t| t >= timestamp);
            if newer {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }
}

/// Sub-directories of `dir` (none if it does not exist).
fn list_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    match std::fs::read_dir(dir) {
        Ok(rd) => Ok(rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(StoreError::io(dir, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapped_file::OS_PAGE_SIZE;

    /// 10 units per file.
    const FS: u64 = 200;

    fn read_units_on_disk(path: &Path) -> Vec<CqUnit> {
        let bytes = std::fs::read(path).unwrap();
        bytes
            .chunks_exact(20)
            .map(|c| {
                (
                    i64::from_be_bytes(c[0..8].try_into().unwrap()),
                    i32::from_be_bytes(c[8..12].try_into().unwrap()),
                    i64::from_be_bytes(c[12..20].try_into().unwrap()),
                )
            })
            .collect()
    }

    fn qdir(root: &Path) -> PathBuf {
        root.join("TopicA").join("3")
    }

    /// Unit i refers to CommitLog offset 1000 + 100·i, size 100, tags i.
    fn put_n(cq: &ConsumeQueue, from: i64, n: i64) {
        for i in from..from + n {
            cq.put(1000 + 100 * i, 100, i, i).unwrap();
        }
    }

    #[test]
    fn unit_bytes_on_disk_and_roll_over() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::new(dir.path(), "TopicA", 3, FS);
        assert_eq!((cq.topic(), cq.queue_id()), ("TopicA", 3));
        assert_eq!((cq.min_offset(), cq.max_offset()), (0, 0));
        assert_eq!(cq.max_physic_offset(), -1);
        cq.put(0x0102, 0x0304, -2, 0).unwrap();
        put_n(&cq, 1, 11);
        assert_eq!(cq.max_offset(), 12);
        assert_eq!(cq.min_offset(), 0);
        assert_eq!(cq.max_physic_offset(), 1000 + 1100 + 100);
        cq.flush(0).unwrap();

        let f0 = qdir(dir.path()).join("00000000000000000000");
        let f1 = qdir(dir.path()).join("00000000000000000200");
        let raw = std::fs::read(&f0).unwrap();
        assert_eq!(raw.len(), 200);
        assert_eq!(
            &raw[..20],
            &[0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]
        );
        let units = read_units_on_disk(&f0);
        assert_eq!(units[1], (1100, 100, 1));
        assert_eq!(units[9], (1900, 100, 9));
        let units = read_units_on_disk(&f1);
        assert_eq!(std::fs::metadata(&f1).unwrap().len(), 200);
        assert_eq!(units[0], (2000, 100, 10));
        assert_eq!(units[1], (2100, 100, 11));
        assert_eq!(units[2], (0, 0, 0));

        // Reads never cross a file boundary.
        let s = cq.read_units(8, 800).unwrap();
        assert_eq!((s.start_offset(), s.len(), s.next_offset()), (8, 2, 10));
        let got: Vec<_> = s.iter().collect();
        assert_eq!(got, vec![(1800, 100, 8), (1900, 100, 9)]);
        let s = cq.read_units(10, 800).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(cq.read_units(10, 1).unwrap().len(), 1);
        assert!(cq.read_units(12, 10).is_none());
        assert!(cq.read_units(-1, 10).is_none());
        assert!(cq.read_units(3, 0).is_none());
        assert_eq!(cq.unit(11), Some((2100, 100, 11)));
        assert_eq!(cq.unit(12), None);
        assert_eq!(cq.unit(-5), None);
    }

    #[test]
    fn disk_blocks_are_reserved_ahead_in_proportion_to_what_the_file_holds() {
        let dir = tempfile::tempdir().unwrap();
        // 300,000 units of 20 bytes a file, as RocketMQ's default.
        let cq = ConsumeQueue::new(dir.path(), "T", 0, 6_000_000);
        if cq.alloc_chunk > OS_PAGE_SIZE {
            return; // tmpfs: whole files are reserved.
        }
        // Bytes reserved in the last file.
        let reserved = || {
            let f = cq.files.last_file().unwrap();
            let (mut lo, mut hi) = (0, f.size());
            while lo < hi {
                let mid = (lo + hi).div_ceil(2);
                if f.is_allocated(mid) {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            lo
        };
        // A queue with one unit holds a page.
        put_n(&cq, 0, 1);
        assert_eq!(reserved(), OS_PAGE_SIZE);
        // Each reservation is as large as what the file holds: a write past 100 KiB reserves
        // 100 KiB more...
        let mut n = 1;
        while n as usize * UNIT < 100 << 10 || (n as usize + 1) * UNIT <= reserved() {
            put_n(&cq, n, 1);
            n += 1;
        }
        let at = n as usize * UNIT;
        put_n(&cq, n, 1);
        assert!(
            reserved() >= 2 * at - OS_PAGE_SIZE,
            "{} at {at}",
            reserved()
        );
        assert!(
            reserved() <= 2 * at + OS_PAGE_SIZE,
            "{} at {at}",
            reserved()
        );
        // ...and never more than RESERVE_AHEAD_MAX.
        let m = (3 << 20) / UNIT as i64;
        put_n(&cq, n + 1, m);
        let wrote = (n + 1 + m) as usize * UNIT;
        assert!(reserved() >= wrote);
        assert!(reserved() <= wrote + RESERVE_AHEAD_MAX + OS_PAGE_SIZE);
    }

    #[test]
    fn rejects_bad_units() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::new(dir.path(), "T", 0, FS);
        assert!(cq.put(-1, 10, 0, 0).is_err());
        assert!(cq.put(0, 0, 0, 0).is_err());
        assert!(cq.put(0, PLACEHOLDER_SIZE, 0, 0).is_err());
        assert!(cq.put(10, 10, 0, -1).is_err());
        assert!(cq.put(10, 10, 0, i64::MAX).is_err());
        assert_eq!(cq.max_offset(), 0);
    }

    #[test]
    fn duplicates_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::new(dir.path(), "T", 0, FS);
        put_n(&cq, 0, 5);
        // Same units again (re-dispatch), and a lower queue offset with a new CL offset.
        put_n(&cq, 0, 5);
        cq.put(99_999, 10, 0, 2).unwrap();
        assert_eq!(cq.max_offset(), 5);
        assert_eq!(cq.unit(2), Some((1200, 100, 2)));
        // Already covered physically, even at a new queue offset.
        cq.put(1300, 100, 0, 5).unwrap();
        assert_eq!(cq.max_offset(), 5);
        put_n(&cq, 5, 1);
        assert_eq!(cq.max_offset(), 6);
    }

    #[test]
    fn placeholders_when_starting_above_zero() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::new(dir.path(), "T", 1, FS);
        cq.put(5000, 50, 7, 23).unwrap();
        cq.put(5050, 50, 8, 24).unwrap();
        assert_eq!(cq.min_offset(), 23);
        assert_eq!(cq.max_offset(), 25);
        assert_eq!(cq.max_physic_offset(), 5100);
        let path = dir.path().join("T/1/00000000000000000400");
        assert_eq!(cq.files.files().len(), 1);
        let units = read_units_on_disk(&path);
        assert_eq!(units[0], (0, i32::MAX, 0));
        assert_eq!(units[2], (0, i32::MAX, 0));
        assert_eq!(units[3], (5000, 50, 7));
        assert_eq!(units[4], (5050, 50, 8));
        assert_eq!(units[5], (0, 0, 0));
        assert_eq!(cq.unit(22), None, "placeholders are below the min offset");
        assert!(cq.read_units(20, 10).is_none());
        assert_eq!(cq.read_units(23, 10).unwrap().len(), 2);

        // Reload + recover keeps the min offset past the placeholders.
        drop(cq);
        let cq = ConsumeQueue::new(dir.path(), "T", 1, FS);
        cq.load().unwrap();
        cq.recover().unwrap();
        assert_eq!((cq.min_offset(), cq.max_offset()), (23, 25));
        assert_eq!(cq.max_physic_offset(), 5100);
    }

    #[test]
    fn gap_fill_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::new(dir.path(), "T", 0, FS);
        put_n(&cq, 0, 3);
        // Gap of 4 (< one file): placeholders at 3..7.
        cq.put(5000, 10, 0, 7).unwrap();
        assert_eq!(cq.max_offset(), 8);
        assert_eq!(cq.unit(4), Some((0, PLACEHOLDER_SIZE, 0)));
        assert_eq!(cq.unit(7), Some((5000, 10, 0)));
        // Gap crossing into the next file.
        cq.put(6000, 10, 0, 14).unwrap();
        assert_eq!(cq.max_offset(), 15);
        assert_eq!(cq.unit(14), Some((6000, 10, 0)));
        assert_eq!(cq.unit(10), Some((0, PLACEHOLDER_SIZE, 0)));
        // Too large a gap is refused.
        assert!(matches!(
            cq.put(7000, 10, 0, 100),
            Err(StoreError::Corrupt { .. })
        ));
        assert_eq!(cq.max_offset(), 15);
        // Reads show the placeholders inside the consumable range.
        let s = cq.read_units(0, 100).unwrap();
        assert_eq!(s.len(), 10);
        assert_eq!(s.iter().filter(is_placeholder).count(), 6);
    }

    #[test]
    fn recover_after_torn_last_unit() {
        let dir = tempfile::tempdir().unwrap();
        {
            let cq = ConsumeQueue::new(dir.path(), "TopicA", 3, FS);
            put_n(&cq, 0, 25);
            cq.flush(0).unwrap();
        }
        let last = qdir(dir.path()).join("00000000000000000400");
        let mut bytes = std::fs::read(&last).unwrap();
        // Unit 24 (the 5th of the 3rd file): torn, only the top half of its offset written.
        bytes[4 * 20..5 * 20].copy_from_slice(&encode_unit(1000 + 100 * 24, 100, 24));
        bytes[4 * 20 + 4..4 * 20 + 8].fill(0);
        std::fs::write(&last, &bytes).unwrap();

        let cq = ConsumeQueue::new(dir.path(), "TopicA", 3, FS);
        cq.load().unwrap();
        assert_eq!(cq.max_offset(), 30, "loaded files count as full");
        cq.recover().unwrap();
        assert_eq!(cq.max_offset(), 24);
        assert_eq!(cq.min_offset(), 0);
        assert_eq!(cq.max_physic_offset(), 1000 + 2300 + 100);
        assert_eq!(read_units_on_disk(&last)[4], (0, 0, 0), "torn unit zeroed");

        // Garbage (negative offset) in the middle of the last file.
        let mut bytes = std::fs::read(&last).unwrap();
        bytes[2 * 20..3 * 20].fill(0xff);
        std::fs::write(&last, &bytes).unwrap();
        let cq = ConsumeQueue::new(dir.path(), "TopicA", 3, FS);
        cq.load().unwrap();
        cq.recover().unwrap();
        assert_eq!(cq.max_offset(), 22);
        assert_eq!(cq.max_physic_offset(), 1000 + 2100 + 100);
        // Writing resumes at the recovered end.
        cq.put(1000 + 2200, 100, 22, 22).unwrap();
        assert_eq!(cq.unit(22), Some((3200, 100, 22)));

        // The whole last file invalid: it stays (empty), the max offset is its start.
        let mut bytes = std::fs::read(&last).unwrap();
        bytes.fill(0);
        std::fs::write(&last, &bytes).unwrap();
        let cq = ConsumeQueue::new(dir.path(), "TopicA", 3, FS);
        cq.load().unwrap();
        cq.recover().unwrap();
        assert_eq!(cq.max_offset(), 20);
        assert_eq!(cq.max_physic_offset(), 1000 + 1900 + 100);
    }

    #[test]
    fn unitless_queue_restarts_where_the_unit_goes() {
        let dir = tempfile::tempdir().unwrap();
        {
            let cq = ConsumeQueue::new(dir.path(), "T", 0, FS);
            cq.put(5000, 10, 0, 12).unwrap();
        }
        // A crash left the only file all zeros: it stays, empty, and keeps the max offset.
        let f = dir.path().join("T/0/00000000000000000200");
        std::fs::write(&f, [0u8; 200]).unwrap();
        let cq = ConsumeQueue::new(dir.path(), "T", 0, FS);
        cq.load().unwrap();
        cq.recover().unwrap();
        assert_eq!((cq.min_offset(), cq.max_offset()), (10, 10));
        assert_eq!(cq.max_physic_offset(), -1);
        // Within that file: placeholders up to the unit.
        cq.put(5000, 10, 0, 13).unwrap();
        assert_eq!((cq.min_offset(), cq.max_offset()), (13, 14));
        cq.truncate_dirty(0).unwrap();
        assert_eq!(cq.max_offset(), 13, "placeholders stay");

        let cq2 = ConsumeQueue::new(dir.path(), "U", 0, FS);
        cq2.put(100, 10, 0, 3).unwrap();
        let f0 = cq2.files.first_file().unwrap();
        assert_eq!(f0.from_offset(), 0);
        // Make the only file unit-less; a unit far beyond replaces it with the file holding it.
        f0.truncate_to(0).unwrap();
        cq2.put(9000, 10, 0, 1234).unwrap();
        assert_eq!((cq2.min_offset(), cq2.max_offset()), (1234, 1235));
        assert_eq!(cq2.files.files().len(), 1);
        assert!(!dir.path().join("U/0/00000000000000000000").exists());
        assert!(dir.path().join("U/0/00000000000000024600").exists());
    }

    #[test]
    fn load_rejects_long_files_and_extends_short_ones() {
        let dir = tempfile::tempdir().unwrap();
        let q = qdir(dir.path());
        std::fs::create_dir_all(&q).unwrap();
        std::fs::write(q.join("00000000000000000000"), vec![0u8; FS as usize + 1]).unwrap();
        let cq = ConsumeQueue::new(dir.path(), "TopicA", 3, FS);
        assert!(matches!(cq.load(), Err(StoreError::Corrupt { .. })));
        std::fs::write(q.join("00000000000000000000"), [0u8; 100]).unwrap();
        cq.load().unwrap();
        assert_eq!(cq.extended_files().len(), 1);
        cq.recover().unwrap();
        assert_eq!(cq.max_offset(), 0);
    }

    #[test]
    fn truncate_dirty_drops_tail_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::new(dir.path(), "TopicA", 3, FS);
        put_n(&cq, 0, 25);
        // Units at CL offsets ≥ 2250 go: unit 13 (2300) and later; 12 (2200) stays.
        cq.truncate_dirty(2250).unwrap();
        assert_eq!(cq.max_offset(), 13);
        assert_eq!(cq.max_physic_offset(), 2300);
        assert_eq!(cq.files.files().len(), 2);
        assert!(!qdir(dir.path()).join("00000000000000000400").exists());
        assert_eq!(cq.unit(13), None);
        // Dispatch resumes.
        cq.put(2300, 100, 0, 13).unwrap();
        assert_eq!(cq.max_offset(), 14);

        // Cut exactly at a file boundary: the next file is left empty.
        cq.truncate_dirty(2000).unwrap();
        assert_eq!(cq.max_offset(), 10);
        assert_eq!(cq.max_physic_offset(), 2000);

        // Everything: no files left.
        cq.truncate_dirty(0).unwrap();
        assert!(cq.files.is_empty());
        assert_eq!((cq.min_offset(), cq.max_offset()), (0, 0));
        assert_eq!(cq.max_physic_offset(), -1);
    }

    #[test]
    fn truncate_keeps_placeholders() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::new(dir.path(), "T", 0, FS);
        cq.put(5000, 10, 0, 4).unwrap();
        cq.put(5010, 10, 0, 5).unwrap();
        cq.truncate_dirty(5000).unwrap();
        assert_eq!((cq.min_offset(), cq.max_offset()), (4, 4));
        assert_eq!(cq.max_physic_offset(), -1);
        cq.put(5000, 10, 0, 4).unwrap();
        assert_eq!((cq.min_offset(), cq.max_offset()), (4, 5));
    }

    #[test]
    fn delete_expired_and_min_offset() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::new(dir.path(), "TopicA", 3, FS);
        put_n(&cq, 0, 25);
        // CommitLog now starts at 1950: file 0's last unit (1900) is below → deleted.
        assert_eq!(cq.delete_expired(1950).unwrap(), 1);
        assert!(!qdir(dir.path()).join("00000000000000000000").exists());
        assert_eq!(cq.min_offset(), 10);
        // CommitLog starts at 2450: file 1 stays (its last unit is 2900), min is unit 15.
        assert_eq!(cq.delete_expired(2450).unwrap(), 0);
        assert_eq!(cq.min_offset(), 15);
        assert_eq!(cq.unit(14), None);
        assert_eq!(cq.unit(15), Some((2500, 100, 15)));
        assert!(cq.read_units(14, 5).is_none());
        assert_eq!(cq.delete_expired(2950).unwrap(), 1);
        assert_eq!(cq.min_offset(), 20);
        // The last file is never deleted; nothing left to consume → min = max.
        assert_eq!(cq.delete_expired(1_000_000).unwrap(), 0);
        assert_eq!(cq.min_offset(), 25);
        assert_eq!(cq.max_offset(), 25);
        put_n(&cq, 25, 1);
        assert_eq!((cq.min_offset(), cq.max_offset()), (25, 26));

        // correct_min_offset on reload.
        drop(cq);
        let cq = ConsumeQueue::new(dir.path(), "TopicA", 3, FS);
        cq.load().unwrap();
        cq.recover().unwrap();
        assert_eq!(cq.min_offset(), 20);
        cq.correct_min_offset(3250);
        assert_eq!(cq.min_offset(), 23);
    }

    #[test]
    fn expire_below_raises_the_min_offset_and_deletes_whole_files() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::new(dir.path(), "Short", 0, FS);
        put_n(&cq, 0, 25);
        // Below the min offset: nothing to do.
        assert_eq!(cq.expire_below(0).unwrap(), (0, 0));
        // Within file 0: the min moves, no file goes.
        assert_eq!(cq.expire_below(4).unwrap(), (4, 0));
        assert_eq!(cq.min_offset(), 4);
        assert_eq!(cq.unit(3), None);
        assert_eq!(cq.physic_offset_at(4), Some(1400));
        assert!(qdir_of(dir.path(), "Short")
            .join("00000000000000000000")
            .exists());
        // Past file 0's end: file 0 is deleted, the min is 12.
        assert_eq!(cq.expire_below(12).unwrap(), (8, 1));
        assert!(!qdir_of(dir.path(), "Short")
            .join("00000000000000000000")
            .exists());
        assert_eq!(cq.min_offset(), 12);
        // CommitLog retention below the logical cut does not lower it.
        assert_eq!(cq.delete_expired(1500).unwrap(), 0);
        cq.correct_min_offset(0);
        assert_eq!(cq.min_offset(), 12);
        // Beyond the max: everything expired, the last file stays, min = max; the next
        // message is served.
        assert_eq!(cq.expire_below(99).unwrap(), (13, 1));
        assert_eq!((cq.min_offset(), cq.max_offset()), (25, 25));
        assert_eq!(cq.physic_offset_at(24), None);
        put_n(&cq, 25, 1);
        assert_eq!((cq.min_offset(), cq.max_offset()), (25, 26));
        assert_eq!(cq.physic_offset_at(25), Some(3500));
    }

    fn qdir_of(root: &Path, topic: &str) -> PathBuf {
        root.join(topic).join("0")
    }

    #[test]
    fn offset_by_time_binary_search() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::new(dir.path(), "T", 0, FS);
        put_n(&cq, 0, 25);
        // Store time of CL offset o: 10·o ms; unit i stored at 10_000 + 1000·i.
        let clock = |off: i64, _size: i32| Some(off * 10);
        assert_eq!(cq.offset_by_time(0, &clock), 0);
        assert_eq!(cq.offset_by_time(10_000, &clock), 0);
        assert_eq!(cq.offset_by_time(10_001, &clock), 1);
        assert_eq!(cq.offset_by_time(22_000, &clock), 12);
        assert_eq!(cq.offset_by_time(21_500, &clock), 12);
        assert_eq!(cq.offset_by_time(34_000, &clock), 24);
        assert_eq!(cq.offset_by_time(34_001, &clock), 25);
        assert_eq!(cq.offset_by_time(i64::MAX, &clock), 25);
        // Head of the CommitLog gone: unreadable records count as older.
        let partial = |off: i64, _size: i32| (off >= 2000).then_some(off * 10);
        assert_eq!(cq.offset_by_time(0, &partial), 10);
        cq.correct_min_offset(1500);
        assert_eq!(cq.offset_by_time(0, &clock), 5);
        let empty = ConsumeQueue::new(dir.path(), "E", 0, FS);
        assert_eq!(empty.offset_by_time(5, &clock), 0);
    }

    #[test]
    fn discover_and_destroy() {
        let dir = tempfile::tempdir().unwrap();
        for (t, q) in [("B", 1), ("A", 0), ("A", 2)] {
            let cq = ConsumeQueue::new(dir.path(), t, q, FS);
            put_n(&cq, 0, 3);
        }
        std::fs::create_dir_all(dir.path().join("A").join("notaqueue")).unwrap();
        std::fs::write(dir.path().join("stray"), b"x").unwrap();
        let found = ConsumeQueue::discover(dir.path(), FS).unwrap();
        let ids: Vec<_> = found
            .iter()
            .map(|c| (c.topic().to_string(), c.queue_id()))
            .collect();
        assert_eq!(ids, vec![("A".into(), 0), ("A".into(), 2), ("B".into(), 1)]);
        for cq in &found {
            cq.recover().unwrap();
            assert_eq!(cq.max_offset(), 3);
        }
        found[2].destroy().unwrap();
        assert!(!dir.path().join("B").exists());
        found[0].destroy().unwrap();
        assert!(dir.path().join("A").exists());
        assert_eq!(found[0].max_offset(), 0);
        assert!(ConsumeQueue::discover(&dir.path().join("missing"), FS)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn concurrent_reader_sees_whole_units() {
        let dir = tempfile::tempdir().unwrap();
        let cq = Arc::new(ConsumeQueue::new(dir.path(), "T", 0, 20 * 64));
        let reader = {
            let cq = cq.clone();
            std::thread::spawn(move || {
                let mut next = 0i64;
                while next < 2000 {
                    if let Some(s) = cq.read_units(next, 800) {
                        for (i, u) in s.iter().enumerate() {
                            let idx = s.start_offset() + i as i64;
                            assert_eq!(u, (1000 + 100 * idx, 100, idx));
                        }
                        next = s.next_offset();
                    } else {
                        std::thread::yield_now();
                    }
                }
            })
        };
        put_n(&cq, 0, 2000);
        reader.join().unwrap();
    }
}
