//! The CommitLog: every message of every topic, appended in arrival order.
//!
//! Files: `<storePathCommitLog>/<20-digit start offset>`, each `mappedFileSizeCommitLog`
//! bytes (1 GiB by default). Records ([`crate::message`] layout) are written back to back and
//! never span files: when a record of length L does not fit (`L + 8 > remaining`), an 8-byte
//! end-of-file blank (`remaining` as i32, then [`BLANK_MAGIC_CODE`]) is written and the
//! record goes to offset 0 of the next file.
//!
//! One appender at a time (a mutex) assigns the per topic-queue logical offset, the physical
//! offset and the store timestamp; CRC and sizes are computed before taking the lock.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::error::{Result, StoreError};
use crate::mapped_file::MappedFile;
use crate::mapped_file_queue::MappedFileQueue;
use crate::message::{
    self, body_crc, record_len, sysflag, MessageRef, Placement, Record, BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH, MESSAGE_MAGIC_CODE,
};
use crate::readahead::ReadAhead;
use crate::service::{Service, Signal};

mod replica;

/// Where a message landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendResult {
    pub physical_offset: i64,
    pub size: i32,
    pub queue_offset: i64,
    pub store_timestamp: i64,
}

impl AppendResult {
    /// One past the record's last byte: the offset a flush must reach for it to be durable.
    pub fn end_offset(&self) -> i64 {
        self.physical_offset + self.size as i64
    }
}

/// A byte range of the CommitLog pinned by its file.
#[derive(Clone)]
pub struct LogSlice {
    file: Arc<MappedFile>,
    pos: usize,
    len: usize,
}

impl LogSlice {
    pub fn bytes(&self) -> &[u8] {
        // The range was checked against the wrote position when the slice was made and
        // data below it never changes (only recovery truncates, before serving).
        self.file.slice(self.pos, self.len).unwrap_or(&[])
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The hasher of maps looked up on every append (keys are topics the broker serves).
type FastHash = foldhash::fast::RandomState;

#[derive(Default)]
struct PutState {
    /// Next logical offset per topic and queue (looked up twice per append: a fast hash, not
    /// std's SipHash).
    queue_offsets: HashMap<String, HashMap<i32, i64, FastHash>, FastHash>,
    last_store_ts: i64,
    /// Replicated bytes of a record not yet complete ([`CommitLog::append_raw`]), held in
    /// memory so the files only ever hold whole records, and the log offset they start at.
    raw_pending: Vec<u8>,
    raw_pending_at: i64,
    /// Records encoded for one `write(2)` ([`CommitLog::set_write_appends`]).
    encoded: Vec<u8>,
    /// Appends whose write is deferred ([`CommitLog::put_deferred`]): their records,
    /// the file and position they go to, and the newest store timestamp among them.
    deferred: Vec<u8>,
    deferred_at: Option<(Arc<MappedFile>, usize)>,
    deferred_ts: i64,
}

/// Outcome of a recovery scan.
#[derive(Debug, Clone, Default)]
pub struct ScanResult {
    /// First byte after the last valid record (where the log continues).
    pub end_offset: i64,
    /// Bytes scanned.
    pub bytes: u64,
    /// Valid records seen.
    pub records: u64,
    /// Damaged byte ranges `[from, to)` that valid records follow (skipped, in order).
    pub damaged: Vec<(i64, i64)>,
}

/// What a scan finds at a position.
enum At<'a> {
    /// A valid message record.
    Record(Record<'a>),
    /// The end-of-file blank.
    Blank,
    Invalid,
}

fn record_at_pos(data: &[u8], pos: usize, base: i64, check_crc: bool) -> At<'_> {
    let (Some(total), Some(magic)) = (
        message::read_i32(data, pos),
        message::read_i32(data, pos + 4),
    ) else {
        return At::Invalid;
    };
    if magic == BLANK_MAGIC_CODE {
        return At::Blank;
    }
    if magic != MESSAGE_MAGIC_CODE || total <= 0 {
        return At::Invalid;
    }
    match message::decode(&data[pos..], check_crc) {
        Ok(rec) if rec.physical_offset == base + pos as i64 => At::Record(rec),
        _ => At::Invalid,
    }
}

/// The first position at or after `from` in a file's bytes (`data`, the file starting at log
/// offset `base`) where a valid record starts, if any: the magic code, sizes that add up, the
/// CRC when `check_crc`, and a PHYSICALOFFSET field equal to the position — which stray bytes
/// practically never match. A run of zeros longer than any record ends the search (nothing
/// was written past it).
pub fn next_valid_record(data: &[u8], from: usize, base: i64, check_crc: bool) -> Option<usize> {
    let magic = MESSAGE_MAGIC_CODE.to_be_bytes();
    let mut zeros = 0usize;
    let mut q = from;
    while q + 8 <= data.len() {
        if data[q] == 0 {
            zeros += 1;
            if zeros > crate::mapped_file::ZERO_RUN_END {
                return None;
            }
        } else {
            zeros = 0;
        }
        if data[q + 4..q + 8] == magic {
            if let At::Record(_) = record_at_pos(data, q, base, check_crc) {
                return Some(q);
            }
        }
        q += 1;
    }
    None
}

/// The CommitLog.
/// Clears [`CommitLog::put_lock_held_ms`]'s clock when an append lets go of the put lock.
struct PutLockClock<'a>(&'a AtomicI64);

impl Drop for PutLockClock<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

pub struct CommitLog {
    mfq: MappedFileQueue,
    put: Mutex<PutState>,
    store_host: SocketAddr,
    max_message_size: u64,
    /// Signalled after every append (the dispatcher waits on it).
    appended: Arc<Signal>,
    /// Store timestamp of the last appended record.
    last_store_ts: AtomicI64,
    /// When the appender took the put lock (ms), 0 while nobody holds it: RocketMQ's
    /// `pageCacheLockTimeMills` ("page cache busy") is how long the current append has held it.
    put_locked_since: AtomicI64,
    /// Pages are faulted in ahead of the appender up to here...
    populated: AtomicI64,
    /// ...and the appender wakes the populating thread when it passes this offset.
    populate_at: AtomicI64,
    populate_signal: Arc<Signal>,
    /// Append with `write(2)`, see [`CommitLog::set_write_appends`].
    write_appends: AtomicBool,
    /// SYNC_FLUSH: write zeros to disk ahead of the appender, see [`CommitLog::set_zeros_ahead`].
    zeros_ahead: AtomicBool,
    /// Zeros ahead: log offset from which the populating thread is writing zeros right now
    /// (`i64::MAX` while it is not), and the log offset the latest append ends at. Each side
    /// publishes its own before reading the other's, so they never write the same bytes (see
    /// [`CommitLog::zeros_ahead`]).
    zeroing_from: AtomicI64,
    append_end: AtomicI64,
    /// Damaged ranges recovery skipped (see [`CommitLog::scan_from`]).
    damaged: RwLock<Vec<(i64, i64)>>,
    /// Disk blocks reserved ahead of the appender at a time (a whole segment where reading a
    /// hole takes space, see [`crate::disk::holes_take_space`]).
    reserve_chunk: usize,
    /// Forward readers followed for read-ahead (see [`CommitLog::read_ahead`]).
    readahead: ReadAhead,
    /// Bytes advised for read-ahead so far.
    read_ahead_bytes: AtomicU64,
    read_ahead_on: AtomicBool,
    /// Bytes per MADV_WILLNEED call (see [`crate::mapped_file::willneed_chunk`]).
    willneed_chunk: usize,
}

/// Pages of a read-ahead window looked up (`mincore`) to tell a cached window from a cold one.
const READ_AHEAD_SAMPLES: usize = 8;

/// How far ahead of the appender disk blocks are reserved (see [`crate::disk`]).
const RESERVE_AHEAD: u64 = 16 << 20;

/// How far ahead of the appender [`start_populating`] keeps pages faulted in...
const POPULATE_AHEAD: i64 = 8 << 20;
/// ...topping up when less than this is left.
const POPULATE_REFILL: i64 = 4 << 20;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl CommitLog {
    pub fn new(
        dir: impl Into<PathBuf>,
        file_size: u64,
        store_host: SocketAddr,
        max_message_size: u64,
        warm: bool,
    ) -> CommitLog {
        Self::with_preallocation(dir, file_size, store_host, max_message_size, warm, true)
    }

    /// As [`CommitLog::new`], choosing whether the next file is created ahead of need.
    pub fn with_preallocation(
        dir: impl Into<PathBuf>,
        file_size: u64,
        store_host: SocketAddr,
        max_message_size: u64,
        warm: bool,
        preallocate: bool,
    ) -> CommitLog {
        let dir = dir.into();
        // The directory may not exist yet: its nearest existing ancestor is on the same device
        // in all but unusual mount layouts.
        let willneed_chunk = crate::mapped_file::willneed_chunk(
            dir.ancestors().find(|d| d.exists()).unwrap_or(&dir),
        );
        CommitLog {
            reserve_chunk: if crate::disk::holes_take_space(&dir) {
                file_size as usize
            } else {
                (RESERVE_AHEAD as usize).min(file_size as usize)
            },
            mfq: MappedFileQueue::new(dir, file_size, preallocate, warm),
            put: Mutex::new(PutState::default()),
            store_host,
            max_message_size,
            appended: Signal::new(),
            last_store_ts: AtomicI64::new(0),
            put_locked_since: AtomicI64::new(0),
            populated: AtomicI64::new(0),
            populate_at: AtomicI64::new(0),
            populate_signal: Signal::new(),
            write_appends: AtomicBool::new(false),
            zeros_ahead: AtomicBool::new(false),
            zeroing_from: AtomicI64::new(i64::MAX),
            append_end: AtomicI64::new(0),
            damaged: RwLock::new(Vec::new()),
            readahead: ReadAhead::new(),
            read_ahead_bytes: AtomicU64::new(0),
            read_ahead_on: AtomicBool::new(true),
            willneed_chunk,
        }
    }

    /// A reader walking the log forward is at `offset`: start reading the next range of the
    /// log into the page cache ahead of it when it gets close to what was asked for before
    /// (see [`crate::readahead`]). Cheap when nothing is to be done; never waits for the disk.
    pub fn read_ahead(&self, offset: i64) {
        if offset < 0 || !self.read_ahead_on.load(Ordering::Relaxed) {
            return;
        }
        let end = self.max_offset().max(0) as u64;
        let Some((from, to)) = self.readahead.on_read(offset as u64, end) else {
            return;
        };
        let mut pos = from;
        while pos < to {
            let Some(file) = self.mfq.find(pos) else {
                break;
            };
            let base = file.from_offset();
            let stop = to.min(base + file.size() as u64);
            let (a, b) = ((pos - base) as usize, (stop - base) as usize);
            // Warm data (the usual case) costs a few one-page lookups, not a walk of the
            // whole window through the page cache; a window only partly cached is advised
            // (the kernel skips the pages it has).
            let cached = (0..READ_AHEAD_SAMPLES)
                .map(|i| a + (b - 1 - a) * i / (READ_AHEAD_SAMPLES - 1))
                .all(|p| file.is_resident(p));
            if !cached {
                file.advise_willneed(a, b - a, self.willneed_chunk);
                self.read_ahead_bytes
                    .fetch_add(stop - pos, Ordering::Relaxed);
            }
            pos = stop;
        }
    }

    /// Turn [`CommitLog::read_ahead`] on (the default) or off (to measure what it brings).
    pub fn set_read_ahead(&self, on: bool) {
        self.read_ahead_on.store(on, Ordering::Relaxed);
    }

    /// Write the log's dirty pages and drop its pages from the page cache, so the next reads
    /// come from the disk (benchmarks of cold reads; nothing in the store needs it).
    pub fn evict_page_cache(&self) -> Result<()> {
        for f in self.mfq.files() {
            f.evict_page_cache()?;
        }
        Ok(())
    }

    /// Bytes of the log advised for read-ahead since open.
    pub fn read_ahead_bytes(&self) -> u64 {
        self.read_ahead_bytes.load(Ordering::Relaxed)
    }

    /// After an append ending at `end`: wake the populating thread when the appender gets
    /// close to the end of what it faulted in (one wake-up every few MiB).
    fn appended_to(&self, end: i64) {
        self.appended.notify();
        if end >= self.populate_at.load(Ordering::Relaxed) {
            self.populate_signal.notify();
        }
    }

    /// Prepare the pages the next appends will write (see [`start_populating`]): with mapped
    /// appends fault them in; with zeros ahead write them to disk as zeros; with `write(2)`
    /// appends and no zeros ahead nothing.
    pub fn populate_ahead(&self) {
        let Some(file) = self.mfq.last_file() else {
            return;
        };
        let base = file.from_offset() as i64;
        let end = base + file.size() as i64;
        let wrote = base + file.wrote_position() as i64;
        let from = self.populated.load(Ordering::Acquire).max(wrote);
        let to = end.min(wrote + POPULATE_AHEAD);
        if to > from {
            let (a, b) = ((from - base) as usize, (to - base) as usize);
            if !self.write_appends() {
                file.populate_for_write(a, b);
            } else if self.zeros_ahead.load(Ordering::Acquire) {
                self.zeros_ahead(&file, a, b);
            }
        }
        self.populated.store(to.max(from), Ordering::Release);
        // At the end of a file, wake up again once the appender has moved to the next one.
        let at = if to >= end { end } else { to - POPULATE_REFILL };
        self.populate_at.store(at, Ordering::Release);
    }

    /// Zeros ahead: write zeros over the pages of `[a, b)` of `file` that the appender has
    /// not reached, and then to disk; only over blocks reserved for the log (reserving them as
    /// the appender would, under the put lock). Best effort: on an error (a full disk) the rest
    /// is left to the appender's own writes.
    ///
    /// The appender is not held up: a chunk at a time, this thread publishes where it is about
    /// to write (`zeroing_from`) and then reads where the appender's latest write ends
    /// (`append_end`), starting past it; the appender publishes its end before it reads
    /// `zeroing_from`, and waits if a chunk being zeroed lies below its end. With sequentially
    /// consistent order at least one of the two sees the other, so zeros never land on a
    /// record. The chunks are megabytes ahead of the appender, so it waits only if it catches up.
    fn zeros_ahead(&self, file: &MappedFile, a: usize, b: usize) {
        const CHUNK: usize = 256 << 10;
        static ZEROS: [u8; CHUNK] = [0u8; CHUNK];
        let page = crate::mapped_file::OS_PAGE_SIZE;
        let b = b.min(file.size());
        let first = a.div_ceil(page) * page;
        if first >= b {
            return;
        }
        {
            let _st = self.put.lock();
            if self.reserve(file, b).is_err() {
                return;
            }
        }
        let base = file.from_offset() as i64;
        let mut at = first;
        while at < b {
            let end = (at + CHUNK).min(b);
            self.zeroing_from.store(base + at as i64, Ordering::SeqCst);
            let appended = self.append_end.load(Ordering::SeqCst) - base;
            // The page the appender's latest write ends in, and every page below, are its own.
            let from = at.max((appended.max(0) as usize).div_ceil(page) * page);
            let failed = from < end && file.write_through(from, &ZEROS[..end - from]).is_err();
            self.zeroing_from.store(i64::MAX, Ordering::SeqCst);
            if failed {
                break;
            }
            at = end;
        }
        if at > first {
            let _ = file.sync_range(first, at);
        }
    }

    /// Appends written with `write(2)` ([`MappedFile::write_through`]) instead of through the
    /// mapping (off by default; the store turns it on). Readers still read through the
    /// mapping. A mapped append costs a page fault per page (to map it writable and mark it
    /// dirty), whether the appender takes it or a thread faulting pages in ahead does, and each
    /// `msync` then write-protects the pages it writes (a TLB shootdown each) or unmaps them
    /// first. `write(2)` fills the page cache without any of that, and the network thread
    /// writes all the sends of a poll round in one call ([`CommitLog::put_deferred`]): under
    /// Apache's BatchProducer the broker spent 1.1 µs of CPU per message with mapped appends
    /// (a quarter of it faulting pages in ahead) and 0.7 µs with this.
    pub fn set_write_appends(&self, on: bool) {
        self.write_appends.store(on, Ordering::Release);
    }

    /// SYNC_FLUSH, with `write(2)` appends: the populating thread writes zeros ahead of the
    /// appender and flushes them ([`CommitLog::zeros_ahead`]), so the blocks under them are
    /// written before the appender's data reaches them (RocketMQ's warmMapedFileEnable, a
    /// window at a time). A durable append's flush is then a plain overwrite: on ext4,
    /// flushing data into blocks reserved but never written also converts their extent and
    /// writes the inode synchronously, an extra disk write and more CPU per flush. Costs the
    /// window's bytes written twice, which only pays when every append is flushed at once.
    pub fn set_zeros_ahead(&self, on: bool) {
        self.zeros_ahead.store(on, Ordering::Release);
    }

    /// Whether appends are written with `write(2)` ([`CommitLog::set_write_appends`]).
    pub fn write_appends(&self) -> bool {
        self.write_appends.load(Ordering::Acquire)
    }

    /// Write `data` at `pos` of `file` as appends write (the put lock held): through the
    /// mapping, or with `write(2)` ([`CommitLog::set_write_appends`]); the descriptor is closed once the
    /// file is written to its end.
    fn write_bytes(&self, file: &MappedFile, pos: usize, data: &[u8]) -> Result<()> {
        if !self.write_appends() {
            return file.write_at(pos, data);
        }
        // Keep clear of zeros being written ahead (see `zeros_ahead`; `zeroing_from` is
        // i64::MAX without).
        let end = file.from_offset() as i64 + (pos + data.len()) as i64;
        self.append_end.store(end, Ordering::SeqCst);
        while self.zeroing_from.load(Ordering::SeqCst) < end {
            std::thread::yield_now();
        }
        file.write_through(pos, data)?;
        if pos + data.len() == file.size() {
            file.close_fd();
        }
        Ok(())
    }

    /// Mark `file` written to its end (it rolled over); closes a `write(2)` append's descriptor.
    fn mark_full(file: &MappedFile) {
        file.set_wrote_position(file.size());
        file.close_fd();
    }

    /// `msync` `[from, to)` of the log (the group commit); pages written through the mapping
    /// are unmapped first (see [`MappedFileQueue::sync_range`]).
    pub fn sync_range(&self, from: u64, to: u64) -> Result<()> {
        self.mfq.sync_range(from, to, !self.write_appends())
    }

    pub fn queue(&self) -> &MappedFileQueue {
        &self.mfq
    }
    pub fn store_host(&self) -> SocketAddr {
        self.store_host
    }
    pub fn appended_signal(&self) -> &Arc<Signal> {
        &self.appended
    }
    pub fn min_offset(&self) -> i64 {
        self.mfq.min_offset() as i64
    }
    /// One past the last appended byte.
    pub fn max_offset(&self) -> i64 {
        self.mfq.max_offset() as i64
    }
    pub fn flushed_offset(&self) -> i64 {
        self.mfq.flushed_where() as i64
    }
    pub fn last_store_timestamp(&self) -> i64 {
        self.last_store_ts.load(Ordering::Acquire)
    }

    /// How long the append in progress has held the put lock, in ms (0: no append in progress).
    /// A broker reports it as `pageCacheLockTimeMills`; a large value means appends are stuck
    /// (page cache or disk busy).
    pub fn put_lock_held_ms(&self) -> i64 {
        match self.put_locked_since.load(Ordering::Relaxed) {
            0 => 0,
            since => (now_ms() - since).max(0),
        }
    }

    /// Marks the put lock held until the returned guard drops.
    fn clock_put_lock(&self) -> PutLockClock<'_> {
        self.clock_put_lock_at(now_ms())
    }

    /// As [`CommitLog::clock_put_lock`], with the time an append read for its records (one
    /// clock read per append, not two).
    fn clock_put_lock_at(&self, now: i64) -> PutLockClock<'_> {
        self.put_locked_since.store(now, Ordering::Relaxed);
        PutLockClock(&self.put_locked_since)
    }

    /// Map the files on disk (positions are fixed by recovery).
    pub fn load(&self) -> Result<()> {
        self.mfq.load()
    }

    /// Set the next logical offset of every queue (after recovery, from the ConsumeQueues).
    pub fn set_queue_offsets(&self, offsets: impl IntoIterator<Item = (String, i32, i64)>) {
        let mut st = self.put.lock();
        st.queue_offsets.clear();
        for (topic, qid, off) in offsets {
            st.queue_offsets.entry(topic).or_default().insert(qid, off);
        }
    }

    /// Forget a topic's queue offsets (topic deletion), so its next message starts each queue
    /// again at 0, once every message appended so far is dispatched: with appends held off and
    /// the deferred appends written, `dispatched(end)` waits until the log's records up to `end`
    /// are in the ConsumeQueues (false: they are not, and nothing changes). `remove` then runs,
    /// appends still held off, to remove what the caller keeps of the topic. Returns whether
    /// it did. A message of the topic dispatched after its queues were removed would start a
    /// queue again at an offset the appender no longer counts from, and every later message of
    /// that queue would be ignored until the count caught up.
    pub fn remove_topic_once_dispatched(
        &self,
        topic: &str,
        dispatched: impl FnOnce(i64) -> bool,
        remove: impl FnOnce() -> Result<()>,
    ) -> Result<bool> {
        let mut st = self.put.lock();
        self.write_deferred_locked(&mut st)?;
        if !dispatched(self.max_offset()) {
            return Ok(false);
        }
        remove()?;
        st.queue_offsets.remove(topic);
        Ok(true)
    }

    /// Forget one queue's next queue offset, so its next message starts the queue again at 0
    /// (RocketMQ's `removeQueueFromTopicQueueTable`), if that offset is `next` (nothing was
    /// appended to the queue beyond what the caller saw); `remove` runs first, with appends held
    /// off, to remove what the caller keeps of the queue. Returns whether it did.
    pub fn remove_queue_if_next(
        &self,
        topic: &str,
        queue_id: i32,
        next: i64,
        remove: impl FnOnce() -> Result<()>,
    ) -> Result<bool> {
        let mut st = self.put.lock();
        let now = st
            .queue_offsets
            .get(topic)
            .and_then(|m| m.get(&queue_id))
            .copied()
            .unwrap_or(0);
        if now != next {
            return Ok(false);
        }
        remove()?;
        if let Some(q) = st.queue_offsets.get_mut(topic) {
            q.remove(&queue_id);
            if q.is_empty() {
                st.queue_offsets.remove(topic);
            }
        }
        Ok(true)
    }

    /// Next logical offset the appender will give (topic, queue).
    pub fn next_queue_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.put
            .lock()
            .queue_offsets
            .get(topic)
            .and_then(|m| m.get(&queue_id))
            .copied()
            .unwrap_or(0)
    }

    /// The file to write `len` bytes into, closing the current one with a blank if needed.
    fn file_for(&self, len: usize) -> Result<Arc<MappedFile>> {
        let file_size = self.mfq.file_size() as usize;
        if len + END_FILE_MIN_BLANK_LENGTH > file_size {
            return Err(StoreError::MessageIllegal(format!(
                "a record of {len} bytes does not fit a CommitLog file of {file_size} bytes"
            )));
        }
        let file = match self.mfq.last_file() {
            Some(f) if !f.is_full() => f,
            _ => self.start_segment()?,
        };
        if len + END_FILE_MIN_BLANK_LENGTH <= file.remaining() {
            self.reserve(&file, file.wrote_position() + len)?;
            return Ok(file);
        }
        self.check_headroom()?;
        let pos = file.wrote_position();
        let remaining = file.remaining();
        if remaining >= END_FILE_MIN_BLANK_LENGTH {
            let mut blank = [0u8; 8];
            blank[..4].copy_from_slice(&(remaining as i32).to_be_bytes());
            blank[4..].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
            self.write_bytes(&file, pos, &blank)?;
        }
        Self::mark_full(&file);
        self.start_segment()
    }

    /// The next segment is (or will be) reserved whole; refuse to start it unless the queues
    /// and the index built from it still find room on the disk.
    fn check_headroom(&self) -> Result<()> {
        let headroom = crate::disk::headroom(self.mfq.file_size());
        if crate::disk::available_bytes(self.mfq.dir()).is_some_and(|a| a < headroom) {
            return Err(StoreError::NoSpace {
                path: self.mfq.dir().to_path_buf(),
                needed: headroom,
            });
        }
        Ok(())
    }

    /// Take a new segment to append to, with its first chunk reserved. A segment whose
    /// reservation fails is removed again: an empty file the disk cannot back is a trap (on
    /// tmpfs even reading it needs space).
    fn start_segment(&self) -> Result<Arc<MappedFile>> {
        self.check_headroom()?;
        let next = self.mfq.last_or_create(0)?;
        if let Err(e) = next.ensure_allocated(1, self.reserve_chunk) {
            self.mfq.discard_last_if_empty();
            return Err(e);
        }
        Ok(next)
    }

    /// Reserve `file`'s blocks below `end` before appending there, a chunk ahead at a time,
    /// each time only while the queues and index still find room (one atomic load when
    /// already reserved).
    fn reserve(&self, file: &MappedFile, end: usize) -> Result<()> {
        if file.is_allocated(end) {
            return Ok(());
        }
        self.check_headroom()?;
        file.ensure_allocated(end, self.reserve_chunk)
    }

    fn next_offset(st: &mut PutState, topic: &str, queue_id: i32) -> i64 {
        match st.queue_offsets.get(topic) {
            Some(m) => m.get(&queue_id).copied().unwrap_or(0),
            None => 0,
        }
    }

    fn bump_offset(st: &mut PutState, topic: &str, queue_id: i32, by: i64) {
        match st.queue_offsets.get_mut(topic) {
            Some(m) => *m.entry(queue_id).or_insert(0) += by,
            None => {
                st.queue_offsets
                    .entry(topic.to_string())
                    .or_default()
                    .insert(queue_id, by);
            }
        }
    }

    fn consumes_queue_offset(sys_flag: i32) -> bool {
        let t = sysflag::transaction_type(sys_flag);
        t == sysflag::TRANSACTION_NOT_TYPE || t == sysflag::TRANSACTION_COMMIT_TYPE
    }

    /// Append one message.
    pub fn put(&self, msg: &MessageRef<'_>) -> Result<AppendResult> {
        self.put_with(msg, false)
    }

    /// Append one message; with `write(2)` appends its bytes are not written yet but kept with
    /// other deferred appends, to be written with them in one `write(2)` by
    /// [`CommitLog::write_deferred`] (or before any other append): until then readers, flushes
    /// and [`CommitLog::max_offset`] do not see it. With mapped appends, as [`CommitLog::put`].
    /// For a caller that appends several requests' messages and then answers them all, such
    /// as the network thread: it must write them before it answers.
    pub fn put_deferred(&self, msg: &MessageRef<'_>) -> Result<AppendResult> {
        self.put_with(msg, true)
    }

    fn put_with(&self, msg: &MessageRef<'_>, defer: bool) -> Result<AppendResult> {
        message::validate(msg, self.max_message_size)?;
        let crc = body_crc(msg.body);
        let len = record_len(
            msg.body.len(),
            msg.topic.len(),
            msg.properties.len(),
            &msg.born_host,
            &self.store_host,
        );
        let result = {
            let mut st = self.put.lock();
            let now = now_ms();
            let _clock = self.clock_put_lock_at(now);
            let ts = now.max(st.last_store_ts);
            st.last_store_ts = ts;
            let counts = Self::consumes_queue_offset(msg.sys_flag);
            let queue_offset = if counts {
                Self::next_offset(&mut st, msg.topic, msg.queue_id)
            } else {
                0
            };
            let by_write = self.write_appends();
            let defer = defer && by_write;
            let (file, pos) = self.place(&mut st, len, defer)?;
            let physical_offset = file.from_offset() as i64 + pos as i64;
            let at = Placement {
                queue_offset,
                physical_offset,
                store_timestamp: ts,
                store_host: self.store_host,
            };
            if defer {
                let buf = Self::defer_slot(&mut st, &file, pos, len, ts);
                message::encode_into(buf, msg, crc, &at);
            } else if by_write {
                let mut buf = std::mem::take(&mut st.encoded);
                buf.clear();
                buf.resize(len, 0);
                message::encode_into(&mut buf, msg, crc, &at);
                let wrote = self.write_bytes(&file, pos, &buf);
                st.encoded = buf;
                wrote?;
            } else {
                // SAFETY: we are the single appender (put lock held) and write above the
                // published position, which readers never pass.
                let buf = unsafe { file.slice_mut(pos, len) }
                    .ok_or_else(|| StoreError::corrupt("append", "record past end of file"))?;
                message::encode_into(buf, msg, crc, &at);
            }
            if !defer {
                file.set_last_store_timestamp(ts as u64);
                file.set_wrote_position(pos + len);
                self.last_store_ts.store(ts, Ordering::Release);
            }
            if counts {
                Self::bump_offset(&mut st, msg.topic, msg.queue_id, 1);
            }
            (
                AppendResult {
                    physical_offset,
                    size: len as i32,
                    queue_offset,
                    store_timestamp: ts,
                },
                defer,
            )
        };
        let (result, deferred) = result;
        if !deferred {
            self.appended_to(result.physical_offset + result.size as i64);
        }
        Ok(result)
    }

    /// Where an append of `len` bytes goes, the put lock held: after the deferred appends when
    /// this one is deferred too and fits in their file; otherwise they are written first and
    /// it goes where the log ends ([`CommitLog::file_for`]).
    fn place(
        &self,
        st: &mut PutState,
        len: usize,
        defer: bool,
    ) -> Result<(Arc<MappedFile>, usize)> {
        if let Some((file, start)) = st.deferred_at.clone() {
            let pos = start + st.deferred.len();
            if defer && pos + len + END_FILE_MIN_BLANK_LENGTH <= file.size() {
                self.reserve(&file, pos + len)?;
                return Ok((file, pos));
            }
            self.write_deferred_locked(st)?;
        }
        let file = self.file_for(len)?;
        let pos = file.wrote_position();
        Ok((file, pos))
    }

    /// Room for a deferred append of `len` bytes at `pos` of `file`, to encode it into.
    fn defer_slot<'a>(
        st: &'a mut PutState,
        file: &Arc<MappedFile>,
        pos: usize,
        len: usize,
        ts: i64,
    ) -> &'a mut [u8] {
        if st.deferred_at.is_none() {
            st.deferred_at = Some((file.clone(), pos));
        }
        st.deferred_ts = st.deferred_ts.max(ts);
        let from = st.deferred.len();
        st.deferred.resize(from + len, 0);
        &mut st.deferred[from..]
    }

    /// Write the deferred appends (the put lock held) and publish them; returns where the log
    /// ends then, if there were any. On an error they stay deferred, to be written by the next
    /// try: their queue offsets are taken, and nothing was published or answered for them.
    fn write_deferred_locked(&self, st: &mut PutState) -> Result<Option<i64>> {
        let Some((file, pos)) = st.deferred_at.clone() else {
            return Ok(None);
        };
        let bytes = std::mem::take(&mut st.deferred);
        let wrote = self.write_bytes(&file, pos, &bytes);
        let end = pos + bytes.len();
        st.deferred = bytes;
        wrote?;
        st.deferred.clear();
        st.deferred_at = None;
        file.set_last_store_timestamp(st.deferred_ts as u64);
        file.set_wrote_position(end);
        self.last_store_ts
            .fetch_max(st.deferred_ts, Ordering::AcqRel);
        let end = file.from_offset() as i64 + end as i64;
        self.appended_to(end);
        Ok(Some(end))
    }

    /// Bytes of deferred appends not written yet ([`CommitLog::put_deferred`]).
    pub fn deferred_bytes(&self) -> usize {
        self.put.lock().deferred.len()
    }

    /// Write the deferred appends ([`CommitLog::put_deferred`]) in one `write(2)` and publish
    /// them; returns where the log ends then, if there were any.
    pub fn write_deferred(&self) -> Result<Option<i64>> {
        if !self.write_appends() {
            return Ok(None); // nothing is ever deferred: no need for the lock
        }
        let mut st = self.put.lock();
        if st.deferred_at.is_none() {
            return Ok(None);
        }
        let _clock = self.clock_put_lock();
        self.write_deferred_locked(&mut st)
    }

    /// Append several messages of one topic and queue under one lock, with consecutive
    /// queue offsets, all in the same file.
    pub fn put_batch(&self, msgs: &[MessageRef<'_>]) -> Result<Vec<AppendResult>> {
        self.put_batch_with(msgs, false)
    }

    /// As [`CommitLog::put_batch`], the write deferred as by [`CommitLog::put_deferred`].
    pub fn put_batch_deferred(&self, msgs: &[MessageRef<'_>]) -> Result<Vec<AppendResult>> {
        self.put_batch_with(msgs, true)
    }

    fn put_batch_with(&self, msgs: &[MessageRef<'_>], defer: bool) -> Result<Vec<AppendResult>> {
        if msgs.is_empty() {
            return Err(StoreError::MessageIllegal("empty batch".into()));
        }
        let mut lens = Vec::with_capacity(msgs.len());
        let mut crcs = Vec::with_capacity(msgs.len());
        let mut total = 0usize;
        for m in msgs {
            message::validate(m, self.max_message_size)?;
            if m.topic != msgs[0].topic || m.queue_id != msgs[0].queue_id {
                return Err(StoreError::MessageIllegal(
                    "all messages of a batch must have one topic and queue".into(),
                ));
            }
            let l = record_len(
                m.body.len(),
                m.topic.len(),
                m.properties.len(),
                &m.born_host,
                &self.store_host,
            );
            lens.push(l);
            crcs.push(body_crc(m.body));
            total += l;
        }
        let mut out = Vec::with_capacity(msgs.len());
        let deferred = {
            let mut st = self.put.lock();
            let now = now_ms();
            let _clock = self.clock_put_lock_at(now);
            let ts = now.max(st.last_store_ts);
            st.last_store_ts = ts;
            let topic = msgs[0].topic;
            let qid = msgs[0].queue_id;
            let mut queue_offset = Self::next_offset(&mut st, topic, qid);
            let by_write = self.write_appends();
            let defer = defer && by_write;
            let (file, mut pos) = self.place(&mut st, total, defer)?;
            let start = pos;
            // `write(2)` appends encode the batch into one buffer for one write, or with the
            // deferred appends; mapped ones into the mapping.
            let mut encoded = (by_write && !defer).then(|| {
                let mut buf = std::mem::take(&mut st.encoded);
                buf.clear();
                buf.resize(total, 0);
                buf
            });
            let mut slot = if defer {
                Some(Self::defer_slot(&mut st, &file, start, total, ts))
            } else {
                encoded.as_deref_mut()
            };
            let mut counted = 0i64;
            for (i, m) in msgs.iter().enumerate() {
                let counts = Self::consumes_queue_offset(m.sys_flag);
                let physical_offset = file.from_offset() as i64 + pos as i64;
                let at = Placement {
                    queue_offset: if counts { queue_offset } else { 0 },
                    physical_offset,
                    store_timestamp: ts,
                    store_host: self.store_host,
                };
                let buf = match slot.as_deref_mut() {
                    Some(buf) => &mut buf[pos - start..pos - start + lens[i]],
                    // SAFETY: single appender, above the published position (see `put`).
                    None => unsafe { file.slice_mut(pos, lens[i]) }
                        .ok_or_else(|| StoreError::corrupt("append", "record past end of file"))?,
                };
                message::encode_into(buf, m, crcs[i], &at);
                out.push(AppendResult {
                    physical_offset,
                    size: lens[i] as i32,
                    queue_offset: at.queue_offset,
                    store_timestamp: ts,
                });
                pos += lens[i];
                if counts {
                    queue_offset += 1;
                    counted += 1;
                }
            }
            if let Some(buf) = encoded {
                let wrote = self.write_bytes(&file, start, &buf);
                st.encoded = buf;
                wrote?;
            }
            if !defer {
                file.set_last_store_timestamp(ts as u64);
                file.set_wrote_position(pos);
                self.last_store_ts.store(ts, Ordering::Release);
            }
            if counted > 0 {
                Self::bump_offset(&mut st, topic, qid, counted);
            }
            defer
        };
        if let Some(last) = out.last().filter(|_| !deferred) {
            self.appended_to(last.physical_offset + last.size as i64);
        }
        Ok(out)
    }

    /// `size` bytes at `offset`, if written and still present.
    pub fn slice(&self, offset: i64, size: usize) -> Option<LogSlice> {
        if offset < 0 {
            return None;
        }
        let file = self.mfq.find(offset as u64)?;
        let pos = (offset as u64 - file.from_offset()) as usize;
        file.slice(pos, size)?;
        Some(LogSlice {
            file,
            pos,
            len: size,
        })
    }

    /// The whole record starting at `offset` (size read from its TOTALSIZE field), verified
    /// to be a message record.
    pub fn record_at(&self, offset: i64) -> Option<LogSlice> {
        let head = self.slice(offset, 8)?;
        let total = message::read_i32(head.bytes(), 0)?;
        let magic = message::read_i32(head.bytes(), 4)?;
        if magic != MESSAGE_MAGIC_CODE || total < message::RECORD_FIXED_SIZE_V4 as i32 {
            return None;
        }
        self.slice(offset, total as usize)
    }

    /// Store timestamp of the record at `offset` with `size` bytes.
    pub fn store_timestamp_at(&self, offset: i64, size: i32) -> Option<i64> {
        if size < message::RECORD_FIXED_SIZE_V4 as i32 {
            return None;
        }
        let s = self.slice(offset, size as usize)?;
        let flag = message::read_i32(s.bytes(), message::POS_SYSFLAG)?;
        message::read_i64(s.bytes(), message::store_timestamp_pos(flag))
    }

    /// Walk the records from file index `start_file`, validating each; `visit` sees every
    /// valid record with its physical offset.
    ///
    /// An invalid record followed by valid ones (checked by [`next_valid_record`]: magic, sizes,
    /// CRC if asked, and the record's own PHYSICALOFFSET field) is damage in the middle of the
    /// log: its range is listed in [`ScanResult::damaged`] and the walk goes on after it. An
    /// invalid record with nothing valid after it, in this file or any later one, is the torn
    /// tail at the write position: the walk ends there.
    pub fn scan_from(
        &self,
        start_file: usize,
        check_crc: bool,
        mut visit: impl FnMut(&Record<'_>, i64),
    ) -> ScanResult {
        let files = self.mfq.files();
        let mut res = ScanResult {
            end_offset: files
                .get(start_file)
                .map(|f| f.from_offset() as i64)
                .unwrap_or_else(|| self.min_offset()),
            ..Default::default()
        };
        let later_data = |i: usize| {
            files[i + 1..].iter().any(|f| {
                next_valid_record(f.raw_from(0), 0, f.from_offset() as i64, check_crc).is_some()
            })
        };
        'files: for (i, f) in files.iter().enumerate().skip(start_file) {
            let data = f.raw_from(0);
            let base = f.from_offset() as i64;
            let mut pos = 0usize;
            while pos < data.len() {
                match record_at_pos(data, pos, base, check_crc) {
                    At::Record(rec) => {
                        visit(&rec, base + pos as i64);
                        let len = rec.total_size as usize;
                        pos += len;
                        res.bytes += len as u64;
                        res.records += 1;
                        res.end_offset = base + pos as i64;
                    }
                    At::Blank => {
                        // Rest of this file is padding; continue with the next one.
                        res.bytes += (data.len() - pos) as u64;
                        res.end_offset = base + data.len() as i64;
                        continue 'files;
                    }
                    At::Invalid => {
                        let resume = next_valid_record(data, pos + 1, base, check_crc);
                        let to = match resume {
                            Some(q) => q,
                            None if later_data(i) => data.len(),
                            None => {
                                res.end_offset = base + pos as i64;
                                break 'files;
                            }
                        };
                        res.damaged.push((base + pos as i64, base + to as i64));
                        res.bytes += (to - pos) as u64;
                        pos = to;
                        res.end_offset = base + pos as i64;
                    }
                }
            }
        }
        res
    }

    /// Ranges of the log recovery found damaged (skipped by dispatch and reads).
    pub fn set_damaged(&self, ranges: Vec<(i64, i64)>) {
        *self.damaged.write() = ranges;
    }

    /// The damaged ranges overlapping `[from, to)`, in order.
    pub fn damaged_in(&self, from: i64, to: i64) -> Vec<(i64, i64)> {
        let d = self.damaged.read();
        if d.is_empty() {
            return Vec::new();
        }
        d.iter()
            .filter(|r| r.0 < to && r.1 > from)
            .copied()
            .collect()
    }

    /// How many stale bytes follow `end` in its file (a torn record's), before truncation.
    pub fn stale_bytes_after(&self, end: i64) -> usize {
        let Some(f) = self.mfq.find(end.max(0) as u64) else {
            return 0;
        };
        let pos = (end as u64 - f.from_offset()) as usize;
        f.stale_end(pos) - pos
    }

    /// Make `end` the end of the log: positions of the last file set, later data removed.
    pub fn truncate_to(&self, end: i64) -> Result<()> {
        self.mfq.truncate_dirty(end.max(0) as u64)?;
        let files = self.mfq.files();
        for f in &files {
            let file_end = f.from_offset() as i64 + f.size() as i64;
            if file_end <= end {
                f.set_wrote_position(f.size());
                f.set_flushed_position(f.size());
            }
        }
        self.mfq.set_flushed_where(end.max(0) as u64);
        Ok(())
    }

    /// Store timestamp of the first record of file `index`, if it starts with a message.
    pub fn first_record_timestamp(&self, index: usize) -> Option<i64> {
        let files = self.mfq.files();
        let f = files.get(index)?;
        let data = f.raw_from(0);
        if message::read_i32(data, 4)? != MESSAGE_MAGIC_CODE {
            return None;
        }
        let flag = message::read_i32(data, message::POS_SYSFLAG)?;
        message::read_i64(data, message::store_timestamp_pos(flag))
    }

    /// Flush what is dirty (`least_pages` as in [`MappedFileQueue::flush`]); returns the
    /// flushed offset.
    pub fn flush(&self, least_pages: u64) -> Result<i64> {
        Ok(self.mfq.flush(least_pages)? as i64)
    }
}

/// Start the thread that prepares CommitLog pages ahead of the appender
/// ([`CommitLog::populate_ahead`]), if there is anything to prepare: with mapped appends it
/// faults pages in, with zeros ahead it writes zeros; `write(2)` appends without zeros ahead
/// need no thread (None).
///
/// With mapped appends the thread runs at the idle scheduling class (`SCHED_IDLE`): faulting
/// pages in is work no request waits for, and at normal priority its bursts (a few
/// milliseconds a window) took a core from the network thread and the clients, which showed
/// in the sends' tail latency. If it falls behind, appends fault their pages in themselves.
/// Zeros ahead keep normal priority: the thread takes the put lock to reserve blocks, and the
/// appender waits for a chunk of zeros it catches up with.
pub fn start_populating(log: Arc<CommitLog>) -> std::io::Result<Option<Service>> {
    let mapped = !log.write_appends();
    if !mapped && !log.zeros_ahead.load(Ordering::Acquire) {
        return Ok(None);
    }
    let signal = log.populate_signal.clone();
    Service::spawn("rmq-populate", signal, move |ctx| {
        if mapped {
            let p = libc::sched_param { sched_priority: 0 };
            // SAFETY: plain syscall on the calling thread; failure leaves normal priority.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &p) };
        }
        populate_loop(&log, ctx)
    })
    .map(Some)
}

fn populate_loop(log: &CommitLog, ctx: &crate::service::ServiceContext) {
    loop {
        let seen = ctx.signal().generation();
        log.populate_ahead();
        if ctx.stopped() {
            break;
        }
        ctx.wait(seen, std::time::Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg<'a>(topic: &'a str, qid: i32, body: &'a [u8], props: &'a [u8]) -> MessageRef<'a> {
        MessageRef {
            topic,
            queue_id: qid,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: "127.0.0.1:1000".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body,
            properties: props,
        }
    }

    fn log(dir: &std::path::Path, size: u64) -> CommitLog {
        CommitLog::new(
            dir,
            size,
            "127.0.0.1:10911".parse().unwrap(),
            4 << 20,
            false,
        )
    }

    /// What a store reopened on `dir` finds: every record, checked (CRC included), in order.
    fn records_after_reopen(dir: &std::path::Path, size: u64) -> Vec<(i64, Vec<u8>, i64)> {
        let again = log(dir, size);
        again.load().unwrap();
        let mut seen = Vec::new();
        let res = again.scan_from(0, true, |rec, at| {
            seen.push((at, rec.body.to_vec(), rec.queue_offset));
        });
        assert!(res.damaged.is_empty(), "{:?}", res.damaged);
        seen
    }

    #[test]
    fn write_appends_store_what_mapped_appends_store() {
        // Singles, batches and replicated bytes over 64 KiB files, so appends roll over files
        // (end-of-file blanks included), written with write(2) instead of through the mapping.
        let (dm, dd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let size = 64 * 1024;
        let mapped = log(dm.path(), size);
        let durable = log(dd.path(), size);
        durable.set_write_appends(true);
        let mut expect = Vec::new();
        for l in [&mapped, &durable] {
            l.load().unwrap();
            for i in 0..300u32 {
                let body = vec![(i % 251) as u8; 100 + (i as usize * 37) % 900];
                if i % 3 == 0 {
                    let second = vec![7u8; 50];
                    let rs = l
                        .put_batch(&[msg("B", 1, &body, b"k=v"), msg("B", 1, &second, b"")])
                        .unwrap();
                    if std::ptr::eq(l, &durable) {
                        expect.push((rs[0].physical_offset, body.clone(), rs[0].queue_offset));
                        expect.push((rs[1].physical_offset, second, rs[1].queue_offset));
                    }
                } else {
                    let r = l.put(&msg("T", 0, &body, b"")).unwrap();
                    if std::ptr::eq(l, &durable) {
                        expect.push((r.physical_offset, body, r.queue_offset));
                    }
                }
            }
            assert!(l.queue().files().len() >= 4);
        }
        assert_eq!(mapped.max_offset(), durable.max_offset(), "same layout");
        for (at, body, _) in &expect {
            let rec = durable.record_at(*at).unwrap();
            assert_eq!(message::decode(rec.bytes(), true).unwrap().body, &body[..]);
        }
        // Only the file being written keeps a descriptor.
        let files = durable.queue().files();
        assert!(files[..files.len() - 1].iter().all(|f| !f.has_fd()));
        assert!(files.last().unwrap().has_fd());
        assert!(mapped.queue().files().iter().all(|f| !f.has_fd()));
        // A slave appending the master's bytes with durable appends writes them the same way.
        let ds = tempfile::tempdir().unwrap();
        let slave = log(ds.path(), size);
        slave.set_write_appends(true);
        slave.load().unwrap();
        let mut at = 0i64;
        while at < durable.max_offset() {
            let f = durable.queue().find(at as u64).unwrap();
            let pos = (at as u64 - f.from_offset()) as usize;
            let n = (f.wrote_position() - pos).min(5000);
            at = slave.append_raw(at, f.slice(pos, n).unwrap()).unwrap();
        }
        drop((mapped, durable, slave));
        assert_eq!(records_after_reopen(dd.path(), size), expect);
        assert_eq!(records_after_reopen(ds.path(), size), expect);
        for (d, s) in [(dd.path(), ds.path())] {
            for e in std::fs::read_dir(d).unwrap() {
                let e = e.unwrap();
                assert_eq!(
                    std::fs::read(e.path()).unwrap(),
                    std::fs::read(s.join(e.file_name())).unwrap(),
                    "the slave's files are the master's"
                );
            }
        }
    }

    #[test]
    fn a_queue_is_forgotten_only_when_nothing_was_appended_past_what_the_caller_saw() {
        let d = tempfile::tempdir().unwrap();
        let l = log(d.path(), 64 * 1024);
        l.load().unwrap();
        for _ in 0..3 {
            l.put(&msg("T", 1, b"x", b"")).unwrap();
        }
        l.put(&msg("T", 2, b"x", b"")).unwrap();
        // The caller saw 2 messages of queue 1, but 3 were appended: kept, and `remove` not run.
        let mut ran = false;
        assert!(!l
            .remove_queue_if_next("T", 1, 2, || {
                ran = true;
                Ok(())
            })
            .unwrap());
        assert!(!ran);
        assert_eq!(l.next_queue_offset("T", 1), 3);
        // It saw all 3: removed; the queue starts again at 0, the topic's other queue does not.
        assert!(l
            .remove_queue_if_next("T", 1, 3, || {
                ran = true;
                Ok(())
            })
            .unwrap());
        assert!(ran);
        assert_eq!(l.next_queue_offset("T", 1), 0);
        assert_eq!(l.put(&msg("T", 1, b"x", b"")).unwrap().queue_offset, 0);
        assert_eq!(l.put(&msg("T", 2, b"x", b"")).unwrap().queue_offset, 1);
    }

    #[test]
    fn a_topic_is_forgotten_only_once_what_was_appended_is_dispatched() {
        let d = tempfile::tempdir().unwrap();
        let l = log(d.path(), 64 * 1024);
        l.load().unwrap();
        l.put(&msg("T", 1, b"x", b"")).unwrap();
        l.put(&msg("U", 1, b"x", b"")).unwrap();
        // Not dispatched yet: nothing changes and `remove` does not run.
        let mut ran = false;
        let mut asked = 0;
        assert!(!l
            .remove_topic_once_dispatched(
                "T",
                |end| {
                    asked = end;
                    false
                },
                || {
                    ran = true;
                    Ok(())
                }
            )
            .unwrap());
        assert!(!ran);
        assert_eq!(asked, l.max_offset(), "waits for the whole log");
        assert_eq!(l.next_queue_offset("T", 1), 1);
        // Dispatched: removed; the topic starts again at 0, the other topic does not.
        assert!(l
            .remove_topic_once_dispatched(
                "T",
                |_| true,
                || {
                    ran = true;
                    Ok(())
                }
            )
            .unwrap());
        assert!(ran);
        assert_eq!(l.put(&msg("T", 1, b"x", b"")).unwrap().queue_offset, 0);
        assert_eq!(l.put(&msg("U", 1, b"x", b"")).unwrap().queue_offset, 1);
    }

    #[test]
    fn deferred_appends_are_seen_once_written_in_order_with_the_others() {
        let d = tempfile::tempdir().unwrap();
        let size = 64 * 1024;
        let l = log(d.path(), size);
        l.set_write_appends(true);
        l.load().unwrap();
        let mut expect = Vec::new();
        let mut end = 0;
        // Kept back: not readable, not in the log's end, until written.
        for i in 0..5u8 {
            let body = vec![i + 1; 300];
            let r = l.put_deferred(&msg("T", 0, &body, b"")).unwrap();
            assert_eq!(l.max_offset(), 0);
            assert!(l.record_at(r.physical_offset).is_none());
            assert_eq!(r.physical_offset, end, "one after the other");
            end = r.physical_offset + r.size as i64;
            expect.push((r.physical_offset, body, r.queue_offset));
        }
        assert_eq!(l.write_deferred().unwrap(), Some(end));
        assert_eq!(l.max_offset(), end);
        assert_eq!(l.write_deferred().unwrap(), None, "nothing left");
        for (at, body, _) in &expect {
            let rec = l.record_at(*at).unwrap();
            assert_eq!(message::decode(rec.bytes(), true).unwrap().body, &body[..]);
        }
        // An append that is not deferred writes the deferred ones first, then itself after them;
        // batches defer as singles do; appends past a file's end roll over as usual. Queue
        // offsets count up per queue whichever way a message was appended.
        let mut next: HashMap<(&str, i32), i64> = HashMap::from([(("T", 0), 5)]);
        let mut take = |topic: &'static str, qid: i32| {
            let n = next.entry((topic, qid)).or_insert(0);
            *n += 1;
            *n - 1
        };
        for i in 0..400u32 {
            let body = vec![(i % 200) as u8 + 1; 150 + (i as usize * 29) % 700];
            let rs = match i % 4 {
                0 => vec![l.put(&msg("T", 1, &body, b"")).unwrap()],
                1 => l
                    .put_batch_deferred(&[msg("B", 0, &body, b"a=b"), msg("B", 0, &body, b"")])
                    .unwrap(),
                _ => vec![l.put_deferred(&msg("T", 1, &body, b"")).unwrap()],
            };
            let queue = if i % 4 == 1 { ("B", 0) } else { ("T", 1) };
            for r in rs {
                assert_eq!(r.queue_offset, take(queue.0, queue.1));
                assert!(
                    r.physical_offset >= expect.last().unwrap().0,
                    "in append order"
                );
                expect.push((r.physical_offset, body.clone(), r.queue_offset));
            }
            if i % 4 == 0 {
                // The plain append is readable at once, and so is everything before it.
                let (at, body, _) = &expect[expect.len() - 2];
                let rec = l.record_at(*at).unwrap();
                assert_eq!(message::decode(rec.bytes(), true).unwrap().body, &body[..]);
            }
        }
        assert!(l.queue().files().len() >= 4);
        l.write_deferred().unwrap();
        drop(l);
        assert_eq!(records_after_reopen(d.path(), size), expect);
        // Without durable appends nothing is kept back.
        let m = tempfile::tempdir().unwrap();
        let mapped = log(m.path(), size);
        mapped.load().unwrap();
        let r = mapped.put_deferred(&msg("T", 0, b"now", b"")).unwrap();
        assert!(mapped.record_at(r.physical_offset).is_some());
        assert_eq!(mapped.write_deferred().unwrap(), None);
    }

    #[test]
    fn zeros_written_ahead_never_land_on_appended_records() {
        // The populating thread writes zeros ahead of the appender while it appends (small
        // files and a populate call after every few appends, so the two meet often); every
        // record appended is intact afterwards.
        let d = tempfile::tempdir().unwrap();
        let size = 4 << 20;
        let l = Arc::new(log(d.path(), size));
        l.set_write_appends(true);
        l.set_zeros_ahead(true);
        l.load().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let populating = {
            let (l, stop) = (l.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rounds = 0u64;
                while !stop.load(Ordering::Acquire) {
                    // As the populating thread does when woken: from where it got to.
                    l.populated.store(0, Ordering::Release);
                    l.populate_ahead();
                    rounds += 1;
                }
                rounds
            })
        };
        let mut expect = Vec::new();
        for i in 0..20000u32 {
            let body = vec![(i % 250 + 1) as u8; 200 + (i as usize * 53) % 1500];
            let r = l.put(&msg("T", 0, &body, b"")).unwrap();
            expect.push((r.physical_offset, body, r.queue_offset));
        }
        stop.store(true, Ordering::Release);
        assert!(populating.join().unwrap() > 0);
        for (at, body, _) in &expect {
            let rec = l.record_at(*at).unwrap();
            assert_eq!(message::decode(rec.bytes(), true).unwrap().body, &body[..]);
        }
        drop(l);
        assert_eq!(records_after_reopen(d.path(), size), expect);
    }

    #[test]
    fn the_put_lock_clock_runs_only_while_an_append_holds_the_lock() {
        let d = tempfile::tempdir().unwrap();
        let log = log(d.path(), 64 * 1024);
        log.load().unwrap();
        assert_eq!(log.put_lock_held_ms(), 0);
        log.put(&msg("T", 0, b"x", b"")).unwrap();
        assert_eq!(log.put_lock_held_ms(), 0, "cleared when the append let go");
        {
            let _st = log.put.lock();
            let _clock = log.clock_put_lock();
            std::thread::sleep(std::time::Duration::from_millis(3));
            assert!(
                log.put_lock_held_ms() >= 1,
                "an append stuck in the lock shows"
            );
        }
        assert_eq!(log.put_lock_held_ms(), 0);
    }

    #[test]
    fn read_ahead_is_advised_across_files_and_reads_stay_intact() {
        let d = tempfile::tempdir().unwrap();
        let log = log(d.path(), 1 << 20);
        let mut put = Vec::new();
        // About 4 MiB over 1 MiB files: read-ahead windows cross file boundaries.
        for i in 0..4000u32 {
            let body = vec![(i % 251) as u8; 700 + (i % 300) as usize];
            put.push((log.put(&msg("T", 0, &body, b"")).unwrap(), body));
        }
        assert!(log.queue().files().len() >= 4);
        // Out of the page cache, as a backlog that memory pressure pushed out.
        log.evict_page_cache().unwrap();
        // A forward reader, as pulls draining the log: advise, then read each record.
        for (r, body) in &put {
            log.read_ahead(r.physical_offset);
            let rec = log.record_at(r.physical_offset).unwrap();
            let parsed = message::decode(rec.bytes(), true).unwrap();
            assert_eq!(parsed.body, &body[..]);
        }
        // Advice was issued for the cold data (windows the kernel's own read-around had
        // already brought in are skipped), never past the end of the data.
        let advised = log.read_ahead_bytes();
        let data = (log.max_offset() - log.min_offset()) as u64;
        assert!(
            advised >= crate::readahead::START_WINDOW,
            "{advised} of {data}"
        );
        assert!(advised <= data, "{advised} of {data}");
        // Out-of-range offsets are ignored.
        log.read_ahead(-1);
        log.read_ahead(log.max_offset() + (64 << 20));
    }

    #[test]
    fn populating_ahead_keeps_appends_intact() {
        let d = tempfile::tempdir().unwrap();
        let log = Arc::new(log(d.path(), 1 << 20));
        // Mapped appends (the log's default): faulted in ahead.
        let mut svc = start_populating(log.clone())
            .unwrap()
            .expect("mapped appends");
        let mut put = Vec::new();
        // Enough to roll over several 1 MiB files, each populated ahead while appending.
        for i in 0..4000u32 {
            let body = vec![(i % 251) as u8; 700 + (i % 300) as usize];
            put.push((log.put(&msg("T", 0, &body, b"")).unwrap(), body));
        }
        log.populate_ahead();
        assert!(log.populated.load(Ordering::Acquire) >= log.max_offset());
        for (r, body) in &put {
            let s = log.slice(r.physical_offset, r.size as usize).unwrap();
            let rec = crate::message::decode(s.bytes(), true).unwrap();
            assert_eq!(rec.body, &body[..]);
        }
        svc.shutdown();
    }

    #[test]
    fn offsets_and_records() {
        let d = tempfile::tempdir().unwrap();
        let cl = log(d.path(), 1 << 16);
        let a = cl.put(&msg("T", 0, b"one", b"")).unwrap();
        let b = cl.put(&msg("T", 0, b"two", b"")).unwrap();
        let c = cl.put(&msg("T", 1, b"three", b"")).unwrap();
        assert_eq!((a.queue_offset, b.queue_offset, c.queue_offset), (0, 1, 0));
        assert_eq!(a.physical_offset, 0);
        assert_eq!(b.physical_offset, a.size as i64);
        let r = cl.record_at(b.physical_offset).unwrap();
        let rec = message::decode(r.bytes(), true).unwrap();
        assert_eq!(rec.body, b"two");
        assert_eq!(rec.physical_offset, b.physical_offset);
        assert_eq!(
            cl.store_timestamp_at(b.physical_offset, b.size),
            Some(b.store_timestamp)
        );
        // Prepared messages take no queue offset.
        let mut p = msg("T", 0, b"half", b"");
        p.sys_flag = sysflag::TRANSACTION_PREPARED_TYPE;
        assert_eq!(cl.put(&p).unwrap().queue_offset, 0);
        assert_eq!(cl.next_queue_offset("T", 0), 2);
        let batch = [msg("T", 0, b"x", b""), msg("T", 0, b"y", b"")];
        let rs = cl.put_batch(&batch).unwrap();
        assert_eq!((rs[0].queue_offset, rs[1].queue_offset), (2, 3));
        assert!(cl
            .put_batch(&[msg("T", 0, b"x", b""), msg("U", 0, b"y", b"")])
            .is_err());
    }

    #[test]
    fn roll_writes_blank_record() {
        let d = tempfile::tempdir().unwrap();
        let file = 4096u64;
        let cl = log(d.path(), file);
        let body = vec![b'x'; 900];
        let mut results = Vec::new();
        for _ in 0..5 {
            results.push(cl.put(&msg("T", 0, &body, b"")).unwrap());
        }
        let size = results[0].size as usize; // 992
        assert_eq!(size, 91 + 900 + 1);
        // 4 records fit (3968 + 8 <= 4096), the fifth goes to the next file.
        assert_eq!(results[4].physical_offset, 4096);
        let raw = std::fs::read(d.path().join("00000000000000000000")).unwrap();
        let blank_at = 4 * size;
        assert_eq!(
            i32::from_be_bytes(raw[blank_at..blank_at + 4].try_into().unwrap()),
            (4096 - blank_at) as i32
        );
        assert_eq!(
            i32::from_be_bytes(raw[blank_at + 4..blank_at + 8].try_into().unwrap()),
            BLANK_MAGIC_CODE
        );
        assert!(d.path().join("00000000000000004096").exists());
        // A scan crosses the blank.
        let mut seen = Vec::new();
        let res = cl.scan_from(0, true, |r, off| seen.push((r.queue_offset, off)));
        assert_eq!(seen.len(), 5);
        assert_eq!(seen[4], (4, 4096));
        assert_eq!(res.end_offset, 4096 + size as i64);
        assert!(cl.put(&msg("T", 0, &vec![0u8; 5000], b"")).is_err());
    }

    #[test]
    fn scan_skips_damage_and_stops_at_a_torn_tail() {
        let d = tempfile::tempdir().unwrap();
        let cl = log(d.path(), 1 << 16);
        let mut ends = Vec::new();
        for i in 0..10u8 {
            ends.push(cl.put(&msg("T", 0, &[i; 100], b"")).unwrap());
        }
        cl.flush(0).unwrap();
        drop(cl);
        // Flip a body byte of the 8th record, and tear the 10th (its last 20 bytes zeroed).
        let path = d.path().join("00000000000000000000");
        let mut raw = std::fs::read(&path).unwrap();
        raw[ends[7].physical_offset as usize + 90] ^= 0x55;
        let tenth = ends[9].physical_offset as usize;
        raw[tenth + ends[9].size as usize - 20..tenth + ends[9].size as usize].fill(0);
        std::fs::write(&path, &raw).unwrap();
        let cl = log(d.path(), 1 << 16);
        cl.load().unwrap();
        let mut seen = Vec::new();
        let res = cl.scan_from(0, true, |r, _| seen.push(r.body[0]));
        assert_eq!(seen, vec![0, 1, 2, 3, 4, 5, 6, 8]);
        assert_eq!(
            res.damaged,
            vec![(ends[7].physical_offset, ends[8].physical_offset)]
        );
        assert_eq!(res.end_offset, ends[9].physical_offset);
        // Without the CRC check the flipped body byte goes unnoticed.
        assert!(cl.scan_from(0, false, |_, _| {}).damaged.is_empty());
        cl.truncate_to(res.end_offset).unwrap();
        assert_eq!(cl.max_offset(), ends[9].physical_offset);
        cl.set_queue_offsets([("T".to_string(), 0, 9)]);
        let r = cl.put(&msg("T", 0, b"new", b"")).unwrap();
        assert_eq!(r.physical_offset, ends[9].physical_offset);
        assert_eq!(r.queue_offset, 9);
    }

    #[test]
    fn next_valid_record_needs_the_records_own_offset() {
        let d = tempfile::tempdir().unwrap();
        let cl = log(d.path(), 1 << 16);
        let a = cl.put(&msg("T", 0, b"first", b"")).unwrap();
        let b = cl.put(&msg("T", 0, b"second", b"")).unwrap();
        let data = cl.queue().files()[0].raw_from(0).to_vec();
        assert_eq!(next_valid_record(&data, 0, 0, true), Some(0));
        assert_eq!(
            next_valid_record(&data, 1, 0, true),
            Some(b.physical_offset as usize)
        );
        // The same bytes seen at another log offset are not records.
        assert_eq!(next_valid_record(&data, 0, 1 << 16, true), None);
        // Past the last record only zeros follow.
        assert_eq!(
            next_valid_record(&data, (b.physical_offset + 1) as usize, 0, true),
            None
        );
        assert_eq!(a.physical_offset, 0);
    }
}
