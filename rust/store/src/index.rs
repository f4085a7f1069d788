//! IndexFile and IndexService: a hash index from message keys to CommitLog offsets.
//!
//! Files `<root>/index/<yyyyMMddHHmmssSSS>` (local creation time, [`INDEX_FILE_NAME_LEN`]
//! digits; a taken or older name is bumped by 1 ms so names sort in creation order), each
//! exactly [`index_file_size`]`(slots, entries)` bytes, all integers big-endian:
//!
//! Header, [`INDEX_HEADER_SIZE`] bytes:
//!
//! | offset | size | field |
//! |---|---|---|
//! | [`HEADER_POS_BEGIN_TIMESTAMP`] = 0 | 8 | beginTimestamp: store time of entry 1 |
//! | [`HEADER_POS_END_TIMESTAMP`] = 8 | 8 | endTimestamp: store time of the newest entry |
//! | [`HEADER_POS_BEGIN_PHY_OFFSET`] = 16 | 8 | beginPhyOffset |
//! | [`HEADER_POS_END_PHY_OFFSET`] = 24 | 8 | endPhyOffset |
//! | [`HEADER_POS_HASH_SLOT_COUNT`] = 32 | 4 | hashSlotCount: slots in use |
//! | [`HEADER_POS_INDEX_COUNT`] = 36 | 4 | indexCount: next entry number (starts at 1) |
//!
//! Then `slots` hash slots of [`HASH_SLOT_SIZE`] bytes (i32: number of the newest entry of the
//! bucket, [`INVALID_INDEX`] = empty), then `entries` entries of [`INDEX_ENTRY_SIZE`] bytes,
//! entry n at `40 + slots × 4 + n × 20` (entry 0 is never used):
//!
//! | offset | size | field |
//! |---|---|---|
//! | [`ENTRY_POS_KEY_HASH`] = 0 | 4 | keyHash = abs(String.hashCode(key)), 0 on overflow |
//! | [`ENTRY_POS_PHY_OFFSET`] = 4 | 8 | CommitLog offset |
//! | [`ENTRY_POS_TIME_DIFF`] = 12 | 4 | (storeTimestamp − beginTimestamp) / 1000, clamped to [0, i32::MAX] |
//! | [`ENTRY_POS_PREV_INDEX`] = 16 | 4 | previous entry of the bucket (0 = end of chain) |
//!
//! A full file (indexCount = `entries`) is followed by a new one seeded with its end offset
//! and timestamp. Lookups walk a bucket's chain newest first; every link must point to an
//! older entry, so a damaged file cannot make a walk loop. Keys share buckets and even hashes:
//! callers re-check the real key of every record returned.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use chrono::{Local, NaiveDateTime, TimeDelta};
use memmap2::MmapMut;
use parking_lot::{Mutex, RwLock};

use crate::error::{IoContext, Result, StoreError};
use crate::message::java_string_hash;

/// Header size.
pub const INDEX_HEADER_SIZE: usize = 40;
/// Size of one hash slot.
pub const HASH_SLOT_SIZE: usize = 4;
/// Size of one index entry.
pub const INDEX_ENTRY_SIZE: usize = 20;
/// Disk blocks reserved ahead of the entry writer at a time.
const ENTRY_ALLOCATE_CHUNK: usize = 1 << 20;
pub const HEADER_POS_BEGIN_TIMESTAMP: usize = 0;
pub const HEADER_POS_END_TIMESTAMP: usize = 8;
pub const HEADER_POS_BEGIN_PHY_OFFSET: usize = 16;
pub const HEADER_POS_END_PHY_OFFSET: usize = 24;
pub const HEADER_POS_HASH_SLOT_COUNT: usize = 32;
pub const HEADER_POS_INDEX_COUNT: usize = 36;
pub const ENTRY_POS_KEY_HASH: usize = 0;
pub const ENTRY_POS_PHY_OFFSET: usize = 4;
pub const ENTRY_POS_TIME_DIFF: usize = 12;
pub const ENTRY_POS_PREV_INDEX: usize = 16;
/// Slot value / link meaning "none".
pub const INVALID_INDEX: i32 = 0;
/// Length of an IndexFile name.
pub const INDEX_FILE_NAME_LEN: usize = 17;
/// chrono format of an IndexFile name (`yyyyMMddHHmmssSSS`).
pub const INDEX_FILE_NAME_FORMAT: &str = "%Y%m%d%H%M%S%3f";

/// Size of an IndexFile with `slot_num` slots and `index_num` entries.
pub fn index_file_size(slot_num: u32, index_num: u32) -> u64 {
    INDEX_HEADER_SIZE as u64
        + slot_num as u64 * HASH_SLOT_SIZE as u64
        + index_num as u64 * INDEX_ENTRY_SIZE as u64
}

/// RocketMQ's `indexKeyHashMethod`: `abs(String.hashCode(key))`, 0 when that overflows.
pub fn index_key_hash(key: &str) -> i32 {
    slot_hash(java_string_hash(key))
}

/// The index hash of the key `topic#key`, without building that string.
pub fn topic_key_hash(topic: &str, key: &str) -> i32 {
    topic_key_hash_after(topic_prefix_hash(topic), key)
}

/// The Java hash of `topic#`, for [`topic_key_hash_after`] (one per record, not per key).
pub fn topic_prefix_hash(topic: &str) -> i32 {
    crate::message::java_string_hash_on(java_string_hash(topic), "#")
}

/// [`topic_key_hash`] from the topic's [`topic_prefix_hash`].
pub fn topic_key_hash_after(prefix: i32, key: &str) -> i32 {
    slot_hash(crate::message::java_string_hash_on(prefix, key))
}

fn slot_hash(h: i32) -> i32 {
    if h == i32::MIN {
        0
    } else {
        h.abs()
    }
}

fn rd_i32(b: &[u8], pos: usize) -> Option<i32> {
    Some(i32::from_be_bytes(
        b.get(pos..pos.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn rd_i64(b: &[u8], pos: usize) -> Option<i64> {
    Some(i64::from_be_bytes(
        b.get(pos..pos.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// Copy `v` to `pos`; false (and nothing written) if it does not fit.
fn wr(b: &mut [u8], pos: usize, v: &[u8]) -> bool {
    match pos.checked_add(v.len()).and_then(|end| b.get_mut(pos..end)) {
        Some(dst) => {
            dst.copy_from_slice(v);
            true
        }
        None => false,
    }
}

/// The 40-byte IndexFile header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexHeader {
    pub begin_timestamp: i64,
    pub end_timestamp: i64,
    pub begin_phy_offset: i64,
    pub end_phy_offset: i64,
    pub hash_slot_count: i32,
    pub index_count: i32,
}

impl IndexHeader {
    /// Decode the header at the start of `b`; `None` if `b` is shorter than 40 bytes.
    pub fn decode(b: &[u8]) -> Option<IndexHeader> {
        Some(IndexHeader {
            begin_timestamp: rd_i64(b, HEADER_POS_BEGIN_TIMESTAMP)?,
            end_timestamp: rd_i64(b, HEADER_POS_END_TIMESTAMP)?,
            begin_phy_offset: rd_i64(b, HEADER_POS_BEGIN_PHY_OFFSET)?,
            end_phy_offset: rd_i64(b, HEADER_POS_END_PHY_OFFSET)?,
            hash_slot_count: rd_i32(b, HEADER_POS_HASH_SLOT_COUNT)?,
            index_count: rd_i32(b, HEADER_POS_INDEX_COUNT)?,
        })
    }

    /// The 40 header bytes.
    pub fn encode(&self) -> [u8; INDEX_HEADER_SIZE] {
        let mut b = [0u8; INDEX_HEADER_SIZE];
        wr(
            &mut b,
            HEADER_POS_BEGIN_TIMESTAMP,
            &self.begin_timestamp.to_be_bytes(),
        );
        wr(
            &mut b,
            HEADER_POS_END_TIMESTAMP,
            &self.end_timestamp.to_be_bytes(),
        );
        wr(
            &mut b,
            HEADER_POS_BEGIN_PHY_OFFSET,
            &self.begin_phy_offset.to_be_bytes(),
        );
        wr(
            &mut b,
            HEADER_POS_END_PHY_OFFSET,
            &self.end_phy_offset.to_be_bytes(),
        );
        wr(
            &mut b,
            HEADER_POS_HASH_SLOT_COUNT,
            &self.hash_slot_count.to_be_bytes(),
        );
        wr(
            &mut b,
            HEADER_POS_INDEX_COUNT,
            &self.index_count.to_be_bytes(),
        );
        b
    }

    /// Does `[begin_timestamp, end_timestamp]` overlap `[begin, end]`?
    pub fn time_overlaps(&self, begin: i64, end: i64) -> bool {
        begin <= self.end_timestamp && end >= self.begin_timestamp
    }
}

/// One IndexFile. Puts (one writer) take the map's write lock, queries its read lock.
struct IndexFile {
    path: PathBuf,
    name: String,
    file: File,
    slot_num: u32,
    index_num: u32,
    map: RwLock<MmapMut>,
    dirty: AtomicBool,
    deleted: AtomicBool,
    /// Bytes `[0, allocated)` have disk blocks reserved (see [`IndexFile::reserve_next_entry`]).
    allocated: AtomicUsize,
}

impl IndexFile {
    fn create(
        dir: &Path,
        name: &str,
        slot_num: u32,
        index_num: u32,
        seed_phy_offset: i64,
        seed_timestamp: i64,
    ) -> Result<IndexFile> {
        std::fs::create_dir_all(dir).at(dir)?;
        let path = dir.join(name);
        if path.exists() {
            return Err(StoreError::corrupt(
                "index file",
                format!("{} exists already", path.display()),
            ));
        }
        let size = index_file_size(slot_num, index_num);
        let file = crate::mapped_file::create_sized_file(&path, size)?;
        // The slots are written at random: reserve them (and the header) now; entries are
        // reserved as they are appended (see crate::disk).
        let slots_end = INDEX_HEADER_SIZE + slot_num as usize * HASH_SLOT_SIZE;
        if let Err(e) = crate::disk::reserve_blocks(&path, 0, slots_end) {
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        let made = Self::map(path.clone(), file, slot_num, index_num);
        let f = match made {
            Ok(f) => f,
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        };
        f.allocated.store(slots_end, Ordering::Release);
        let header = IndexHeader {
            begin_timestamp: seed_timestamp,
            end_timestamp: seed_timestamp,
            begin_phy_offset: seed_phy_offset,
            end_phy_offset: seed_phy_offset,
            hash_slot_count: 0,
            index_count: 1,
        };
        wr(&mut f.map.write(), 0, &header.encode());
        f.dirty.store(true, Ordering::Release);
        Ok(f)
    }

    fn open(path: &Path, slot_num: u32, index_num: u32) -> Result<IndexFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .at(path)?;
        let len = file.metadata().at(path)?.len();
        let want = index_file_size(slot_num, index_num);
        if len != want {
            return Err(StoreError::corrupt(
                "index file size",
                format!(
                    "{} is {len} bytes; {slot_num} slots and {index_num} entries need {want}",
                    path.display()
                ),
            ));
        }
        Self::map(path.to_path_buf(), file, slot_num, index_num)
    }

    fn map(path: PathBuf, file: File, slot_num: u32, index_num: u32) -> Result<IndexFile> {
        // SAFETY: the file is opened read-write and has its final size; only this store (which
        // holds the lock file) modifies it, and all access goes through the RwLock.
        let map = unsafe { MmapMut::map_mut(&file) }.at(&path)?;
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        Ok(IndexFile {
            path,
            name,
            file,
            slot_num,
            index_num,
            map: RwLock::new(map),
            dirty: AtomicBool::new(false),
            deleted: AtomicBool::new(false),
            allocated: AtomicUsize::new(0),
        })
    }

    fn header(&self) -> IndexHeader {
        IndexHeader::decode(&self.map.read()).unwrap_or_default()
    }

    /// indexCount as usable: at least 1, at most the entry capacity.
    fn count_of(&self, h: &IndexHeader) -> i32 {
        h.index_count.clamp(1, self.index_num as i32)
    }

    fn is_full(&self) -> bool {
        self.header().index_count >= self.index_num as i32
    }

    fn slot_pos(&self, key_hash: i32) -> usize {
        INDEX_HEADER_SIZE + (key_hash.unsigned_abs() % self.slot_num) as usize * HASH_SLOT_SIZE
    }

    fn entry_pos(&self, n: i32) -> usize {
        INDEX_HEADER_SIZE
            + self.slot_num as usize * HASH_SLOT_SIZE
            + n.max(0) as usize * INDEX_ENTRY_SIZE
    }

    /// Reserve disk blocks for the next entry (and, for a file an earlier run wrote, the slots
    /// before it), [`ENTRY_ALLOCATE_CHUNK`] at a time, so writing it cannot hit a full disk.
    fn reserve_next_entry(&self, h: &IndexHeader) -> Result<()> {
        let n = h.index_count.max(1);
        let end = self.entry_pos(n) + INDEX_ENTRY_SIZE;
        let have = self.allocated.load(Ordering::Acquire);
        if end <= have {
            return Ok(());
        }
        let size = index_file_size(self.slot_num, self.index_num) as usize;
        let to = (end + ENTRY_ALLOCATE_CHUNK).min(size);
        crate::disk::reserve_blocks(&self.path, have, to)?;
        self.allocated.fetch_max(to, Ordering::AcqRel);
        Ok(())
    }

    /// Add an entry; false when the file is full. `h` is this file's header as the writer
    /// last wrote it (see [`Cursor`]), updated and written with the entry.
    fn put(
        &self,
        h: &mut IndexHeader,
        key_hash: i32,
        phy_offset: i64,
        store_timestamp: i64,
    ) -> bool {
        let mut map = self.map.write();
        let n = h.index_count.max(1);
        if n >= self.index_num as i32 {
            return false;
        }
        let slot_pos = self.slot_pos(key_hash);
        let mut prev = rd_i32(&map, slot_pos).unwrap_or(INVALID_INDEX);
        if prev <= INVALID_INDEX || prev >= n {
            prev = INVALID_INDEX;
        }
        let begin_timestamp = if n <= 1 {
            store_timestamp
        } else {
            h.begin_timestamp
        };
        let diff = if begin_timestamp <= 0 {
            0
        } else {
            (store_timestamp.saturating_sub(begin_timestamp) / 1000).clamp(0, i32::MAX as i64)
                as i32
        };
        let mut entry = [0u8; INDEX_ENTRY_SIZE];
        wr(&mut entry, ENTRY_POS_KEY_HASH, &key_hash.to_be_bytes());
        wr(&mut entry, ENTRY_POS_PHY_OFFSET, &phy_offset.to_be_bytes());
        wr(&mut entry, ENTRY_POS_TIME_DIFF, &diff.to_be_bytes());
        wr(&mut entry, ENTRY_POS_PREV_INDEX, &prev.to_be_bytes());
        let entry_pos = self.entry_pos(n);
        if !wr(&mut map, entry_pos, &entry) || !wr(&mut map, slot_pos, &n.to_be_bytes()) {
            return false;
        }
        let mut next = *h;
        if n <= 1 {
            next.begin_timestamp = begin_timestamp;
            next.begin_phy_offset = phy_offset;
        }
        if prev == INVALID_INDEX {
            next.hash_slot_count = next.hash_slot_count.saturating_add(1);
        }
        next.index_count = n + 1;
        next.end_phy_offset = phy_offset;
        next.end_timestamp = store_timestamp;
        if !wr(&mut map, 0, &next.encode()) {
            return false;
        }
        *h = next;
        drop(map);
        self.dirty.store(true, Ordering::Release);
        true
    }

    /// Append to `out` the offsets of entries with `key_hash` stored within `[begin, end]`,
    /// newest first, until `out` holds `max_num`.
    fn select(&self, key_hash: i32, max_num: usize, begin: i64, end: i64, out: &mut Vec<i64>) {
        let map = self.map.read();
        let Some(h) = IndexHeader::decode(&map) else {
            return;
        };
        let count = self.count_of(&h);
        let mut next = rd_i32(&map, self.slot_pos(key_hash)).unwrap_or(INVALID_INDEX);
        // Every link points to an older entry, so the chain has at most `count` entries.
        for _ in 0..count {
            if out.len() >= max_num || next <= INVALID_INDEX || next >= count {
                break;
            }
            let pos = self.entry_pos(next);
            let (Some(hash), Some(phy), Some(diff), Some(prev)) = (
                rd_i32(&map, pos + ENTRY_POS_KEY_HASH),
                rd_i64(&map, pos + ENTRY_POS_PHY_OFFSET),
                rd_i32(&map, pos + ENTRY_POS_TIME_DIFF),
                rd_i32(&map, pos + ENTRY_POS_PREV_INDEX),
            ) else {
                break;
            };
            if diff < 0 {
                break;
            }
            let time = h.begin_timestamp.saturating_add(diff as i64 * 1000);
            if hash == key_hash && time >= begin && time <= end {
                out.push(phy);
            }
            if time < begin || prev >= next {
                break;
            }
            next = prev;
        }
    }

    /// Write dirty pages back (`fdatasync`: on Linux it covers pages dirtied through the
    /// shared mapping, and needs no lock on the map).
    fn flush(&self) -> Result<()> {
        if self.dirty.swap(false, Ordering::AcqRel) && !self.deleted.load(Ordering::Acquire) {
            if let Err(e) = self.file.sync_data() {
                self.dirty.store(true, Ordering::Release);
                return Err(StoreError::io(&self.path, e));
            }
        }
        Ok(())
    }

    fn destroy(&self) -> Result<()> {
        if !self.deleted.swap(true, Ordering::AcqRel) {
            match std::fs::remove_file(&self.path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io(&self.path, e)),
            }
        }
        Ok(())
    }
}

/// Result of [`IndexService::query`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryResult {
    /// CommitLog offsets of candidate records, newest first; their keys must be re-checked.
    pub phy_offsets: Vec<i64>,
    /// endTimestamp of the newest IndexFile.
    pub index_last_update_timestamp: i64,
    /// endPhyOffset of the newest IndexFile.
    pub index_last_update_phyoffset: i64,
}

/// The IndexFiles of a store, oldest first. One writer (the dispatcher; expiry and loading take
/// the same lock), any number of concurrent queries.
pub struct IndexService {
    dir: PathBuf,
    slot_num: u32,
    index_num: u32,
    files: RwLock<Vec<Arc<IndexFile>>>,
    /// The writer's lock, and what it knows of the file it appends to (`None`: look it up).
    writer: Mutex<Option<Cursor>>,
}

/// The file the writer appends to, with its header as last written and the offset of the last
/// record indexed, so a put neither reads headers nor looks through the files. Only the writer
/// changes a header; loading, expiry and destruction forget the cursor.
struct Cursor {
    file: Arc<IndexFile>,
    header: IndexHeader,
    last_indexed: Option<i64>,
}

impl std::fmt::Debug for IndexService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexService")
            .field("dir", &self.dir)
            .field("files", &self.files.read().len())
            .finish()
    }
}

impl IndexService {
    /// The index in `dir` (`<root>/index`). `slot_num` is raised to at least 1 and `index_num`
    /// kept within `2..=i32::MAX` (`StoreConfig::validate` rejects other values beforehand).
    pub fn new(dir: &Path, slot_num: u32, index_num: u32) -> IndexService {
        IndexService {
            dir: dir.to_path_buf(),
            slot_num: slot_num.max(1),
            index_num: index_num.clamp(2, i32::MAX as u32),
            files: RwLock::new(Vec::new()),
            writer: Mutex::new(None),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Size of one IndexFile.
    pub fn file_size(&self) -> u64 {
        index_file_size(self.slot_num, self.index_num)
    }

    /// Number of IndexFiles.
    pub fn file_count(&self) -> usize {
        self.files.read().len()
    }

    /// Map the IndexFiles in the directory (names of 17 digits; other entries are ignored).
    /// A file of the wrong size is an error. After an abnormal exit (`!last_exit_ok`), files
    /// whose endTimestamp is after `index_checkpoint_ts` are deleted: re-dispatch rebuilds them.
    pub fn load(&self, last_exit_ok: bool, index_checkpoint_ts: i64) -> Result<()> {
        let mut w = self.writer.lock();
        *w = None;
        let mut paths: Vec<PathBuf> = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .filter(|p| {
                    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        n.len() == INDEX_FILE_NAME_LEN && n.bytes().all(|b| b.is_ascii_digit())
                    })
                })
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(StoreError::io(&self.dir, e)),
        };
        paths.sort();
        crate::mapped_file::remove_creating_leftovers(&self.dir);
        let mut files = Vec::with_capacity(paths.len());
        for p in paths {
            let f = match IndexFile::open(&p, self.slot_num, self.index_num) {
                Ok(f) => f,
                // After a crash a damaged IndexFile is dropped: the index is rebuilt from the
                // CommitLog for what re-dispatch covers. After a clean exit it is an error.
                Err(StoreError::Corrupt { .. }) if !last_exit_ok => {
                    std::fs::remove_file(&p).at(&p)?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if !last_exit_ok && f.header().end_timestamp > index_checkpoint_ts {
                f.destroy()?;
                continue;
            }
            files.push(Arc::new(f));
        }
        *self.files.write() = files;
        Ok(())
    }

    /// Index one key (already in `topic#key` form) of the record at `phy_offset`. Records below
    /// [`IndexService::end_phy_offset`] are already indexed (re-dispatch) and are skipped, as
    /// are empty keys. A full file is followed by a new one; a put never fails for lack of room.
    pub fn put_key(&self, key: &str, phy_offset: i64, store_timestamp: i64) -> Result<()> {
        self.put_keys(&[key], phy_offset, store_timestamp)
    }

    /// Index all keys of one record (see [`IndexService::put_key`]).
    pub fn put_keys<S: AsRef<str>>(
        &self,
        keys: &[S],
        phy_offset: i64,
        store_timestamp: i64,
    ) -> Result<()> {
        let hashes: Vec<i32> = keys
            .iter()
            .map(|k| k.as_ref())
            .filter(|k| !k.is_empty())
            .map(index_key_hash)
            .collect();
        self.put_hashes(&hashes, phy_offset, store_timestamp)
    }

    /// [`IndexService::put_keys`] with the keys' hashes ([`index_key_hash`], [`topic_key_hash`]).
    pub fn put_hashes(&self, hashes: &[i32], phy_offset: i64, store_timestamp: i64) -> Result<()> {
        let mut w = self.writer.lock();
        let cursor = match &mut *w {
            Some(c) => c,
            empty => empty.insert(self.cursor()?),
        };
        // A record is indexed in one call, all its keys: one at or below the last record
        // indexed is one dispatched again after a crash, already in the index (RocketMQ
        // skips only those below, so the last record's keys came back twice from queries).
        if cursor.last_indexed.is_some_and(|end| phy_offset <= end) {
            return Ok(());
        }
        for &hash in hashes {
            if cursor.header.index_count >= self.index_num as i32 {
                self.roll_cursor(cursor)?;
            }
            cursor.file.reserve_next_entry(&cursor.header)?;
            if !cursor
                .file
                .put(&mut cursor.header, hash, phy_offset, store_timestamp)
            {
                // Full (or damaged beyond use): continue in a fresh file.
                self.roll_cursor(cursor)?;
                cursor.file.reserve_next_entry(&cursor.header)?;
                if !cursor
                    .file
                    .put(&mut cursor.header, hash, phy_offset, store_timestamp)
                {
                    return Err(StoreError::corrupt(
                        "index file",
                        format!("{} refused an entry when new", cursor.file.path.display()),
                    ));
                }
            }
            cursor.last_indexed = Some(phy_offset);
        }
        Ok(())
    }

    /// The writer's cursor, from the files: the newest if it has room, else a new one.
    /// Caller holds the writer lock.
    fn cursor(&self) -> Result<Cursor> {
        let last_indexed = self.last_indexed();
        let last = self.files.read().last().cloned();
        let file = match last {
            Some(f) if !f.is_full() => f,
            other => self.roll(other.as_ref())?,
        };
        Ok(Cursor {
            header: file.header(),
            file,
            last_indexed,
        })
    }

    /// Move the cursor to a new file after its own. Caller holds the writer lock.
    fn roll_cursor(&self, cursor: &mut Cursor) -> Result<()> {
        let file = self.roll(Some(&cursor.file))?;
        cursor.header = file.header();
        cursor.file = file;
        Ok(())
    }

    /// Create a file after `last`, seeded with its end offset and timestamp.
    fn roll(&self, last: Option<&Arc<IndexFile>>) -> Result<Arc<IndexFile>> {
        let (seed_phy, seed_ts) = last
            .map(|f| {
                let h = f.header();
                (h.end_phy_offset, h.end_timestamp)
            })
            .unwrap_or((0, 0));
        let name = self.next_name(last.map(|f| f.name.as_str()));
        let f = Arc::new(IndexFile::create(
            &self.dir,
            &name,
            self.slot_num,
            self.index_num,
            seed_phy,
            seed_ts,
        )?);
        self.files.write().push(f.clone());
        Ok(f)
    }

    /// Now as `yyyyMMddHHmmssSSS`, moved past `last` and past any existing file name.
    fn next_name(&self, last: Option<&str>) -> String {
        let fmt = |t: NaiveDateTime| t.format(INDEX_FILE_NAME_FORMAT).to_string();
        let one_ms = TimeDelta::milliseconds(1);
        let mut t = Local::now().naive_local();
        if let Some(last) = last {
            if fmt(t).as_str() <= last {
                match NaiveDateTime::parse_from_str(last, INDEX_FILE_NAME_FORMAT) {
                    Ok(lt) => t = lt.checked_add_signed(one_ms).unwrap_or(lt),
                    Err(_) => {
                        // Not a date: keep the order with a plain numeric successor.
                        let n = last.parse::<u64>().unwrap_or(0).saturating_add(1);
                        return format!("{n:017}");
                    }
                }
            }
        }
        for _ in 0..10_000 {
            let name = fmt(t);
            if !self.dir.join(&name).exists() {
                return name;
            }
            t = t.checked_add_signed(one_ms).unwrap_or(t);
        }
        fmt(t)
    }

    /// Offsets of records indexed under `key` (`topic#key`) and stored within `[begin, end]`
    /// (ms), at most `max_num`, newest first. Files are searched newest first and only while
    /// their time range overlaps. Stored times have second granularity (beginTimestamp +
    /// timeDiff × 1000). Callers re-check each record's key.
    pub fn query(&self, key: &str, max_num: usize, begin: i64, end: i64) -> QueryResult {
        let files = self.files.read().clone();
        let mut res = QueryResult::default();
        if let Some(last) = files.last() {
            let h = last.header();
            res.index_last_update_timestamp = h.end_timestamp;
            res.index_last_update_phyoffset = h.end_phy_offset;
        }
        if max_num == 0 {
            return res;
        }
        let hash = index_key_hash(key);
        for f in files.iter().rev() {
            let h = f.header();
            if h.time_overlaps(begin, end) {
                f.select(hash, max_num, begin, end, &mut res.phy_offsets);
            }
            if h.begin_timestamp < begin || res.phy_offsets.len() >= max_num {
                break;
            }
        }
        res
    }

    /// endPhyOffset of the newest file (0 without files): records below it are indexed.
    /// The CommitLog offset of the last record indexed, None while nothing is.
    fn last_indexed(&self) -> Option<i64> {
        let files = self.files.read();
        files
            .iter()
            .rev()
            .map(|f| f.header())
            .find(|h| h.index_count > 1)
            .map(|h| h.end_phy_offset)
    }

    pub fn end_phy_offset(&self) -> i64 {
        self.files
            .read()
            .last()
            .map(|f| f.header().end_phy_offset)
            .unwrap_or(0)
    }

    /// endTimestamp of the newest file (0 without files).
    pub fn end_timestamp(&self) -> i64 {
        self.files
            .read()
            .last()
            .map(|f| f.header().end_timestamp)
            .unwrap_or(0)
    }

    /// Delete the oldest files whose endPhyOffset is below `commitlog_min`, stopping at the
    /// first that is not; the newest file is never deleted. Returns how many were deleted.
    pub fn delete_expired(&self, commitlog_min: i64) -> Result<usize> {
        let mut w = self.writer.lock();
        *w = None;
        let doomed: Vec<Arc<IndexFile>> = {
            let files = self.files.read();
            let candidates = files.len().saturating_sub(1);
            files
                .iter()
                .take(candidates)
                .take_while(|f| f.header().end_phy_offset < commitlog_min)
                .cloned()
                .collect()
        };
        if doomed.is_empty() {
            return Ok(0);
        }
        self.files
            .write()
            .retain(|f| !doomed.iter().any(|d| Arc::ptr_eq(d, f)));
        for f in &doomed {
            f.destroy()?;
        }
        Ok(doomed.len())
    }

    /// Sync every file written since the last flush. Returns the newest file's endTimestamp as
    /// read before syncing (everything up to it is on disk), for the checkpoint's
    /// indexMsgTimestamp; 0 without files.
    pub fn flush(&self) -> Result<i64> {
        let files = self.files.read().clone();
        Self::sync(&files)
    }

    /// Sync the full IndexFiles (all but the one being written); returns the endTimestamp of
    /// the newest of them (everything up to it is on disk), 0 when no file is full yet.
    pub fn flush_full(&self) -> Result<i64> {
        let files = self.files.read().clone();
        Self::sync(files.split_last().map_or(&[][..], |(_, full)| full))
    }

    /// Sync `files`; the last one's endTimestamp as read before syncing, 0 without files.
    fn sync(files: &[Arc<IndexFile>]) -> Result<i64> {
        let end_ts = files.last().map(|f| f.header().end_timestamp).unwrap_or(0);
        for f in files {
            f.flush()?;
        }
        Ok(end_ts)
    }

    /// Delete every IndexFile.
    pub fn destroy(&self) -> Result<()> {
        let mut w = self.writer.lock();
        *w = None;
        let files = std::mem::take(&mut *self.files.write());
        for f in &files {
            f.destroy()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_key_hash_is_the_hash_of_the_joined_key() {
        for (t, k) in [
            ("T", "k"),
            ("Topic", ""),
            ("主题", "kéy😀"),
            ("%RETRY%G", "a b"),
        ] {
            assert_eq!(topic_key_hash(t, k), index_key_hash(&format!("{t}#{k}")));
        }
    }

    const T0: i64 = 1_700_000_000_000;

    fn file_paths(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    }

    fn be_i32(b: &[u8], p: usize) -> i32 {
        i32::from_be_bytes(b[p..p + 4].try_into().unwrap())
    }
    fn be_i64(b: &[u8], p: usize) -> i64 {
        i64::from_be_bytes(b[p..p + 8].try_into().unwrap())
    }

    #[test]
    fn key_hash() {
        assert_eq!(index_key_hash("TagA"), 2_598_919);
        assert_eq!(index_key_hash("Aa"), index_key_hash("BB"));
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(index_key_hash("polygenelubricants"), 0);
        for k in [
            "T#k",
            "hello world",
            "TopicTest#ORDER-20240101-000123",
            "é😀",
        ] {
            let h = java_string_hash(k);
            assert_eq!(index_key_hash(k), h.abs(), "{k}");
        }
    }

    #[test]
    fn bytes_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let svc = IndexService::new(dir.path(), 7, 10);
        assert_eq!(svc.file_size(), 40 + 28 + 200);
        svc.put_key("T#k1", 1000, T0).unwrap();
        svc.put_key("T#k2", 2000, T0 + 2500).unwrap();
        svc.put_key("T#k1", 3000, T0 + 7000).unwrap();
        assert_eq!(svc.flush().unwrap(), T0 + 7000);
        let paths = file_paths(dir.path());
        assert_eq!(paths.len(), 1);
        let name = paths[0].file_name().unwrap().to_str().unwrap();
        assert_eq!(name.len(), 17);
        assert!(name.bytes().all(|b| b.is_ascii_digit()));
        let b = std::fs::read(&paths[0]).unwrap();
        assert_eq!(b.len(), 268);

        // Header.
        assert_eq!(be_i64(&b, 0), T0);
        assert_eq!(be_i64(&b, 8), T0 + 7000);
        assert_eq!(be_i64(&b, 16), 1000);
        assert_eq!(be_i64(&b, 24), 3000);
        let h1 = index_key_hash("T#k1");
        let h2 = index_key_hash("T#k2");
        let s1 = (h1 % 7) as usize;
        let s2 = (h2 % 7) as usize;
        assert_eq!(be_i32(&b, 32), if s1 == s2 { 1 } else { 2 });
        assert_eq!(be_i32(&b, 36), 4);
        // Slots.
        assert_eq!(be_i32(&b, 40 + s1 * 4), 3);
        if s1 != s2 {
            assert_eq!(be_i32(&b, 40 + s2 * 4), 2);
        }
        // Entries at 40 + 28 + n·20; entry 0 unused.
        let e = |n: usize| 68 + n * 20;
        assert!(b[e(0)..e(1)].iter().all(|&x| x == 0));
        assert_eq!(be_i32(&b, e(1)), h1);
        assert_eq!(be_i64(&b, e(1) + 4), 1000);
        assert_eq!(be_i32(&b, e(1) + 12), 0);
        assert_eq!(be_i32(&b, e(1) + 16), 0);
        assert_eq!(be_i32(&b, e(2)), h2);
        assert_eq!(be_i64(&b, e(2) + 4), 2000);
        assert_eq!(be_i32(&b, e(2) + 12), 2);
        assert_eq!(be_i32(&b, e(2) + 16), if s1 == s2 { 1 } else { 0 });
        assert_eq!(be_i32(&b, e(3)), h1);
        assert_eq!(be_i64(&b, e(3) + 4), 3000);
        assert_eq!(be_i32(&b, e(3) + 12), 7);
        assert_eq!(be_i32(&b, e(3) + 16), if s1 == s2 { 2 } else { 1 });

        let r = svc.query("T#k1", 10, 0, i64::MAX);
        assert_eq!(r.phy_offsets, vec![3000, 1000]);
        assert_eq!(r.index_last_update_timestamp, T0 + 7000);
        assert_eq!(r.index_last_update_phyoffset, 3000);
        assert_eq!(svc.query("T#k1", 1, 0, i64::MAX).phy_offsets, vec![3000]);
        assert!(svc.query("T#k1", 0, 0, i64::MAX).phy_offsets.is_empty());
        assert!(svc.query("T#nope", 10, 0, i64::MAX).phy_offsets.is_empty());
    }

    #[test]
    fn collisions() {
        let dir = tempfile::tempdir().unwrap();
        let svc = IndexService::new(dir.path(), 1, 100);
        for i in 0..20 {
            svc.put_key(&format!("T#key{i}"), i * 10, T0 + i).unwrap();
        }
        // Equal Java hashes: "Aa" and "BB".
        svc.put_key("Aa", 500, T0 + 100).unwrap();
        svc.put_key("BB", 600, T0 + 100).unwrap();
        for i in 0..20 {
            let r = svc.query(&format!("T#key{i}"), 10, 0, i64::MAX);
            assert_eq!(r.phy_offsets, vec![i * 10], "key{i}");
        }
        let r = svc.query("Aa", 10, 0, i64::MAX);
        assert_eq!(r.phy_offsets, vec![600, 500]);
        let r = svc.query("BB", 10, 0, i64::MAX);
        assert_eq!(r.phy_offsets, vec![600, 500]);
        // Multiple keys of one record.
        svc.put_keys(&["T#a".to_string(), "T#b".to_string()], 700, T0 + 200)
            .unwrap();
        assert_eq!(svc.query("T#b", 10, 0, i64::MAX).phy_offsets, vec![700]);
        assert_eq!(svc.query("T#a", 10, 0, i64::MAX).phy_offsets, vec![700]);
        // The same record dispatched again (recovery after a crash): not indexed twice.
        svc.put_keys(&["T#a".to_string(), "T#b".to_string()], 700, T0 + 200)
            .unwrap();
        assert_eq!(svc.query("T#a", 10, 0, i64::MAX).phy_offsets, vec![700]);
        let header = svc.files.read()[0].header();
        assert_eq!(header.hash_slot_count, 1);
        assert_eq!(header.index_count, 25);
    }

    #[test]
    fn roll_over_and_query_across_files() {
        let dir = tempfile::tempdir().unwrap();
        let svc = IndexService::new(dir.path(), 3, 4);
        for i in 0..7i64 {
            svc.put_key("T#same", 100 * i, T0 + 1000 * i).unwrap();
        }
        assert_eq!(svc.file_count(), 3, "3 entries per file");
        let names: Vec<String> = file_paths(dir.path())
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        assert_eq!(names.len(), 3);
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
        let headers: Vec<IndexHeader> = svc.files.read().iter().map(|f| f.header()).collect();
        assert_eq!(headers[0].index_count, 4);
        assert_eq!(headers[1].begin_phy_offset, 300);
        assert_eq!(headers[1].begin_timestamp, T0 + 3000);
        assert_eq!(headers[2].index_count, 2);
        assert_eq!(headers[2].end_phy_offset, 600);
        assert_eq!(svc.end_phy_offset(), 600);
        assert_eq!(svc.end_timestamp(), T0 + 6000);

        let r = svc.query("T#same", 100, 0, i64::MAX);
        assert_eq!(r.phy_offsets, vec![600, 500, 400, 300, 200, 100, 0]);
        let r = svc.query("T#same", 4, 0, i64::MAX);
        assert_eq!(r.phy_offsets, vec![600, 500, 400, 300]);
        // Time range [T0+1500, T0+4000]: entries 2, 3, 4.
        let r = svc.query("T#same", 100, T0 + 1500, T0 + 4000);
        assert_eq!(r.phy_offsets, vec![400, 300, 200]);
        // A file created when the previous one is full gets the previous end as seed.
        let seeded = IndexService::new(&dir.path().join("seeded"), 3, 2);
        seeded.put_key("T#x", 10, T0).unwrap();
        seeded.put_key("T#y", 20, T0 + 5000).unwrap();
        let h = seeded.files.read()[1].header();
        assert_eq!(h.begin_timestamp, T0 + 5000);
        assert_eq!(h.index_count, 2);
    }

    #[test]
    fn seed_header_of_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = IndexFile::create(dir.path(), "20240101000000000", 3, 4, 777, T0).unwrap();
        assert_eq!(
            f.header(),
            IndexHeader {
                begin_timestamp: T0,
                end_timestamp: T0,
                begin_phy_offset: 777,
                end_phy_offset: 777,
                hash_slot_count: 0,
                index_count: 1
            }
        );
        assert!(IndexFile::create(dir.path(), "20240101000000000", 3, 4, 0, 0).is_err());
    }

    #[test]
    fn time_range_filtering() {
        let dir = tempfile::tempdir().unwrap();
        let svc = IndexService::new(dir.path(), 11, 100);
        // Second granularity: T0+5500 is stored as T0+5000.
        svc.put_key("T#k", 1, T0).unwrap();
        svc.put_key("T#k", 2, T0 + 5500).unwrap();
        svc.put_key("T#k", 3, T0 + 10_000).unwrap();
        let q = |b, e| svc.query("T#k", 10, b, e).phy_offsets;
        assert_eq!(q(T0, T0 + 10_000), vec![3, 2, 1]);
        assert_eq!(q(T0 + 1, T0 + 9_999), vec![2]);
        assert_eq!(q(T0 + 5001, T0 + 9_999), Vec::<i64>::new());
        assert_eq!(q(T0 + 10_001, i64::MAX), Vec::<i64>::new());
        assert_eq!(q(0, T0 - 1), Vec::<i64>::new());
    }

    #[test]
    fn flush_full_syncs_the_full_files_and_reports_the_newest_full_end() {
        let dir = tempfile::tempdir().unwrap();
        let svc = IndexService::new(dir.path(), 5, 3);
        assert_eq!(svc.flush_full().unwrap(), 0, "no file yet");
        svc.put_key("T#k0", 0, T0).unwrap();
        assert_eq!(
            svc.flush_full().unwrap(),
            0,
            "the only file is being written"
        );
        // Files of two entries each: they end at T0+1000, T0+3000, and the third is written.
        for i in 1..5i64 {
            svc.put_key(&format!("T#k{i}"), 100 * i, T0 + 1000 * i)
                .unwrap();
        }
        assert_eq!(svc.file_count(), 3);
        let files = svc.files.read().clone();
        assert_eq!(svc.flush_full().unwrap(), T0 + 3000);
        assert!(!files[0].dirty.load(Ordering::Acquire));
        assert!(!files[1].dirty.load(Ordering::Acquire));
        assert!(
            files[2].dirty.load(Ordering::Acquire),
            "the file being written is left to the thorough flush"
        );
        assert_eq!(svc.flush().unwrap(), T0 + 4000);
        assert!(!files[2].dirty.load(Ordering::Acquire));
    }

    #[test]
    fn reload_and_abnormal_deletion() {
        let dir = tempfile::tempdir().unwrap();
        {
            let svc = IndexService::new(dir.path(), 5, 3);
            for i in 0..6i64 {
                svc.put_key(&format!("T#k{i}"), 100 * i, T0 + 1000 * i)
                    .unwrap();
            }
            assert_eq!(svc.file_count(), 3);
            svc.flush().unwrap();
        }
        std::fs::write(dir.path().join("README"), b"not an index file").unwrap();
        let svc = IndexService::new(dir.path(), 5, 3);
        svc.load(true, 0).unwrap();
        assert_eq!(svc.file_count(), 3);
        assert_eq!(svc.end_phy_offset(), 500);
        for i in 0..6i64 {
            let r = svc.query(&format!("T#k{i}"), 10, 0, i64::MAX);
            assert_eq!(r.phy_offsets, vec![100 * i]);
        }
        // Keep indexing after a reload; re-dispatched records below the end are skipped.
        svc.put_key("T#k9", 400, T0 + 9000).unwrap();
        assert!(svc.query("T#k9", 10, 0, i64::MAX).phy_offsets.is_empty());
        svc.put_key("T#k9", 600, T0 + 9000).unwrap();
        assert_eq!(svc.query("T#k9", 10, 0, i64::MAX).phy_offsets, vec![600]);
        drop(svc);

        // Abnormal exit with the index checkpoint at T0+2500: files ending later are deleted.
        // Files end at T0+1000 (k0,k1), T0+3000 (k2,k3), T0+5000 (k4,k5), T0+9000 (k9).
        let svc = IndexService::new(dir.path(), 5, 3);
        svc.load(false, T0 + 2500).unwrap();
        assert_eq!(svc.file_count(), 1);
        assert_eq!(file_paths(dir.path()).len(), 2, "one index file + README");
        assert_eq!(svc.end_phy_offset(), 100);
        assert_eq!(svc.query("T#k1", 10, 0, i64::MAX).phy_offsets, vec![100]);
        assert!(svc.query("T#k2", 10, 0, i64::MAX).phy_offsets.is_empty());
        // The rebuild continues in a new file seeded with the kept file's end.
        svc.put_key("T#k2", 200, T0 + 2000).unwrap();
        assert_eq!(svc.file_count(), 2);
        assert_eq!(svc.query("T#k2", 10, 0, i64::MAX).phy_offsets, vec![200]);
    }

    #[test]
    fn load_rejects_wrong_size() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("20240101000000000"), [0u8; 10]).unwrap();
        let svc = IndexService::new(dir.path(), 5, 3);
        assert!(matches!(svc.load(true, 0), Err(StoreError::Corrupt { .. })));
        let missing = IndexService::new(&dir.path().join("none"), 5, 3);
        missing.load(true, 0).unwrap();
        assert_eq!(missing.file_count(), 0);
        assert_eq!(missing.end_phy_offset(), 0);
        assert_eq!(missing.flush().unwrap(), 0);
        assert_eq!(missing.query("x", 10, 0, i64::MAX), QueryResult::default());
    }

    #[test]
    fn delete_expired_keeps_newest() {
        let dir = tempfile::tempdir().unwrap();
        let svc = IndexService::new(dir.path(), 5, 3);
        for i in 0..7i64 {
            svc.put_key(&format!("T#k{i}"), 100 * i, T0 + 1000 * i)
                .unwrap();
        }
        // Files end at 100, 300, 500, 600.
        assert_eq!(svc.file_count(), 4);
        assert_eq!(svc.delete_expired(100).unwrap(), 0);
        assert_eq!(svc.delete_expired(301).unwrap(), 2);
        assert_eq!(svc.file_count(), 2);
        assert_eq!(file_paths(dir.path()).len(), 2);
        assert_eq!(svc.delete_expired(i64::MAX).unwrap(), 1);
        assert_eq!(svc.file_count(), 1);
        assert_eq!(svc.query("T#k6", 10, 0, i64::MAX).phy_offsets, vec![600]);
        svc.destroy().unwrap();
        assert_eq!(svc.file_count(), 0);
        assert!(file_paths(dir.path()).is_empty());
    }

    #[test]
    fn corrupted_slots_and_links_do_not_panic_or_loop() {
        let dir = tempfile::tempdir().unwrap();
        let svc = IndexService::new(dir.path(), 1, 10);
        for i in 1..=5i64 {
            svc.put_key(&format!("T#k{i}"), i, T0).unwrap();
        }
        svc.flush().unwrap();
        let f = svc.files.read()[0].clone();
        let entry = |n: usize| 40 + 4 + n * 20;
        {
            let mut m = f.map.write();
            // Entry 4 links forward to 5, and 2 to itself: both end the walk.
            wr(&mut m, entry(4) + ENTRY_POS_PREV_INDEX, &5i32.to_be_bytes());
            wr(&mut m, entry(2) + ENTRY_POS_PREV_INDEX, &2i32.to_be_bytes());
        }
        assert_eq!(svc.query("T#k5", 10, 0, i64::MAX).phy_offsets, vec![5]);
        assert!(svc.query("T#k3", 10, 0, i64::MAX).phy_offsets.is_empty());
        {
            let mut m = f.map.write();
            // Negative time diff ends the walk too.
            wr(&mut m, entry(4) + ENTRY_POS_PREV_INDEX, &3i32.to_be_bytes());
            wr(
                &mut m,
                entry(4) + ENTRY_POS_TIME_DIFF,
                &(-1i32).to_be_bytes(),
            );
        }
        assert_eq!(svc.query("T#k5", 10, 0, i64::MAX).phy_offsets, vec![5]);
        {
            let mut m = f.map.write();
            wr(&mut m, entry(4) + ENTRY_POS_TIME_DIFF, &0i32.to_be_bytes());
            // Slot beyond the entries, then negative.
            wr(&mut m, 40, &i32::MAX.to_be_bytes());
        }
        assert!(svc.query("T#k5", 10, 0, i64::MAX).phy_offsets.is_empty());
        // A put treats the bad slot as empty and starts a new chain.
        svc.put_key("T#k6", 6, T0).unwrap();
        assert_eq!(svc.query("T#k6", 10, 0, i64::MAX).phy_offsets, vec![6]);
        {
            let mut m = f.map.write();
            wr(&mut m, 40, &(-7i32).to_be_bytes());
        }
        assert!(svc.query("T#k6", 10, 0, i64::MAX).phy_offsets.is_empty());
        // Header indexCount damaged: huge, then negative.
        {
            let mut m = f.map.write();
            wr(&mut m, 40, &6i32.to_be_bytes());
            wr(&mut m, HEADER_POS_INDEX_COUNT, &i32::MAX.to_be_bytes());
        }
        let r = svc.query("T#k3", 10, 0, i64::MAX);
        assert!(r.phy_offsets.len() <= 10);
        // Found full by its header when loaded: the next put goes to a new file. (While it
        // runs the writer keeps the header it wrote: only it writes there.)
        svc.load(true, 0).unwrap();
        svc.put_key("T#k7", 7, T0).unwrap();
        assert_eq!(svc.file_count(), 2);
        {
            let mut m = f.map.write();
            wr(&mut m, HEADER_POS_INDEX_COUNT, &(-3i32).to_be_bytes());
        }
        assert!(svc.query("T#k6", 10, 0, i64::MAX).phy_offsets.is_empty());
        assert_eq!(svc.query("T#k7", 10, 0, i64::MAX).phy_offsets, vec![7]);
    }
}
