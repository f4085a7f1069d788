//! One fixed-size, memory-mapped segment file.
//!
//! Layout: a file of exactly `file_size` bytes named by the 20-digit, zero-padded decimal
//! byte offset of its first byte in the whole queue (`00000000001073741824`). Bytes below
//! `wrote_position` are data; the rest is zeros (new files are created sparse with
//! `set_len`, so unwritten pages read as zero).
//!
//! Concurrency: one appender writes past `wrote_position` and then publishes the new
//! position with release ordering; readers only read below the position they loaded with
//! acquire ordering, so they never see a half-written record. A `MappedFile` lives in an
//! `Arc`: a reader holding one keeps the mapping valid even if the file is deleted.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use memmap2::MmapMut;

use crate::error::{IoContext, Result, StoreError};

/// OS page size used for dirty-page accounting (RocketMQ's `OS_PAGE_SIZE`).
pub const OS_PAGE_SIZE: usize = 4096;

/// A run of zero bytes longer than any record (4 MiB body + 64 KiB of headers and properties,
/// rounded up): past it, a segment holds no more written data.
pub const ZERO_RUN_END: usize = 4 * 1024 * 1024 + 128 * 1024;

/// Bytes per `MADV_WILLNEED` call when the device's readahead size is unknown (the usual
/// default of `read_ahead_kb`); see [`willneed_chunk`].
pub const WILLNEED_CHUNK: usize = 128 * 1024;

/// Bytes per `MADV_WILLNEED` call for files in `dir`: the kernel reads at most the device's
/// readahead size (`max(read_ahead_kb, io_pages)`) per call and drops the rest of a longer
/// range, so a range is advised in calls of `read_ahead_kb` of the device holding `dir`
/// (from sysfs), between 128 KiB and 8 MiB; [`WILLNEED_CHUNK`] when it cannot be found.
pub fn willneed_chunk(dir: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(dir) else {
        return WILLNEED_CHUNK;
    };
    let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
    let candidates = [
        format!("/sys/class/bdi/{major}:{minor}/read_ahead_kb"),
        format!("/sys/dev/block/{major}:{minor}/queue/read_ahead_kb"),
        // A partition: its disk's queue.
        format!("/sys/dev/block/{major}:{minor}/../queue/read_ahead_kb"),
    ];
    candidates
        .iter()
        .find_map(|p| {
            std::fs::read_to_string(p)
                .ok()?
                .trim()
                .parse::<usize>()
                .ok()
        })
        .filter(|&kb| kb > 0)
        .map(|kb| (kb * 1024).clamp(WILLNEED_CHUNK, 8 << 20))
        .unwrap_or(WILLNEED_CHUNK)
}

/// Suffix of a file being created; such leftovers of a crash are removed at load.
pub const CREATING_SUFFIX: &str = ".creating";

/// Create `path` with exactly `size` bytes, atomically: the file is sized under a temporary
/// name and renamed into place, so a crash never leaves a short file under the real name.
pub fn create_sized_file(path: &Path, size: u64) -> Result<File> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(CREATING_SUFFIX);
    let tmp = PathBuf::from(tmp);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .at(&tmp)?;
    if let Err(e) = file.set_len(size).at(&tmp) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(StoreError::io(path, e));
    }
    Ok(file)
}

/// Remove `*.creating` leftovers in `dir`.
pub fn remove_creating_leftovers(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().ends_with(CREATING_SUFFIX) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// Render a starting offset as RocketMQ's 20-digit file name.
pub fn offset_to_file_name(offset: u64) -> String {
    format!("{offset:020}")
}

/// A memory-mapped segment. It holds no file descriptor: the mapping alone keeps the pages
/// reachable (and `msync` works on it), so a broker with many queues does not run out of fds.
/// The one exception is a CommitLog segment appended with `write(2)`
/// ([`MappedFile::write_through`]): it keeps a descriptor while it is being written.
pub struct MappedFile {
    path: PathBuf,
    from_offset: u64,
    size: usize,
    map: MmapMut,
    base: *mut u8,
    wrote: AtomicUsize,
    flushed: AtomicUsize,
    /// Store timestamp (ms) of the last record written into this file.
    last_store_ts: AtomicU64,
    deleted: AtomicBool,
    /// Bytes `[0, allocated)` have disk blocks reserved ([`MappedFile::ensure_allocated`]).
    allocated: AtomicUsize,
    /// The descriptor [`MappedFile::write_through`] writes with, opened on first use.
    fd: parking_lot::Mutex<Option<File>>,
}

// SAFETY: `base` points into `map`, which lives as long as `self`. Writes happen only through
// `write_at`, whose callers (a single appender per queue, or exclusive recovery) never write
// a byte range a reader may be reading: readers stay below the published `wrote` position.
unsafe impl Send for MappedFile {}
unsafe impl Sync for MappedFile {}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("path", &self.path)
            .field("from_offset", &self.from_offset)
            .field("wrote", &self.wrote_position())
            .finish()
    }
}

impl MappedFile {
    /// Create (or open, if it exists with the right size) the segment starting at `from_offset`.
    pub fn create(dir: &Path, from_offset: u64, size: usize) -> Result<MappedFile> {
        std::fs::create_dir_all(dir).at(dir)?;
        let path = dir.join(offset_to_file_name(from_offset));
        let file = match std::fs::metadata(&path) {
            Ok(m) if m.len() == size as u64 => OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .at(&path)?,
            _ => create_sized_file(&path, size as u64)?,
        };
        Self::map(path, file, from_offset, size)
    }

    /// Open an existing segment of `size` bytes. With `extend_short`, a shorter file (a last
    /// file cut short by a copy or a full disk) is extended with zeros, so its missing tail
    /// reads as unwritten, and its former length is returned; otherwise, and for a longer
    /// file, a size other than `size` is refused.
    pub fn open(path: &Path, size: usize, extend_short: bool) -> Result<(MappedFile, Option<u64>)> {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| StoreError::corrupt("file name", path.display().to_string()))?;
        if name.len() != 20 || !name.bytes().all(|b| b.is_ascii_digit()) {
            return Err(StoreError::corrupt(
                "file name",
                format!("{} is not a 20-digit offset", path.display()),
            ));
        }
        let from_offset: u64 = name
            .parse()
            .map_err(|_| StoreError::corrupt("file name", path.display().to_string()))?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .at(path)?;
        let len = file.metadata().at(path)?.len();
        if len > size as u64 || (len < size as u64 && !extend_short) {
            return Err(StoreError::corrupt(
                "segment size",
                format!(
                    "{} is {len} bytes, the configured size is {size}",
                    path.display()
                ),
            ));
        }
        let short = (len < size as u64).then_some(len);
        if short.is_some() {
            file.set_len(size as u64).at(path)?;
        }
        Ok((
            Self::map(path.to_path_buf(), file, from_offset, size)?,
            short,
        ))
    }

    /// Map `file` and close it: the mapping outlives the descriptor.
    fn map(path: PathBuf, file: File, from_offset: u64, size: usize) -> Result<MappedFile> {
        // SAFETY: the file is opened read-write and sized; other processes must not truncate
        // it underneath us (the store's lock file keeps other brokers away).
        let mut map = unsafe { MmapMut::map_mut(&file) }.at(&path)?;
        drop(file);
        let base = map.as_mut_ptr();
        Ok(MappedFile {
            path,
            from_offset,
            size,
            map,
            base,
            wrote: AtomicUsize::new(0),
            flushed: AtomicUsize::new(0),
            last_store_ts: AtomicU64::new(0),
            deleted: AtomicBool::new(false),
            allocated: AtomicUsize::new(0),
            fd: parking_lot::Mutex::new(None),
        })
    }

    /// Ask for small page-cache folios where this file is still to be appended to.
    ///
    /// Without readahead a write fault caches just the page it touches. With it, the kernel
    /// may cache a large folio (up to megabytes) whose dirty state is tracked as one: every
    /// append after a flush re-dirties the whole folio and the next `msync` writes all of it
    /// again, so SYNC_FLUSH would write hundreds of kilobytes per group commit of a few.
    pub fn advise_appending(&self) {
        let from = self.wrote_position() / OS_PAGE_SIZE * OS_PAGE_SIZE;
        if from < self.size {
            let _ = self
                .map
                .advise_range(memmap2::Advice::Random, from, self.size - from);
        }
    }

    /// Fault in `[from, to)` for writing ahead of the appender, in one call instead of one
    /// page fault per page in the appender's path. Only ever above the wrote position; the
    /// pages keep their bytes (zeros). Quietly does nothing on kernels before 5.14.
    pub fn populate_for_write(&self, from: usize, to: usize) {
        let from = from.div_ceil(OS_PAGE_SIZE) * OS_PAGE_SIZE;
        let to = to.min(self.size);
        if to <= from {
            return;
        }
        // A call holds the process's mmap lock for reading throughout: in pieces, a mapping
        // change (a new ConsumeQueue file, say) waits for the piece in progress at most.
        const PIECE: usize = 1 << 20;
        let mut at = from;
        while at < to {
            let len = (to - at).min(PIECE);
            // SAFETY: the range lies inside this mapping; MADV_POPULATE_WRITE only faults
            // pages in (as a write would) and never changes their contents.
            unsafe {
                libc::madvise(self.base.add(at).cast(), len, libc::MADV_POPULATE_WRITE);
            }
            at += len;
        }
    }

    /// Start reading `[from, from + len)` into the page cache without waiting for it
    /// (`MADV_WILLNEED`; see [`crate::readahead`]). Clipped to the file; pages already cached
    /// cost a lookup each.
    /// `chunk`: bytes per call, see [`willneed_chunk`].
    pub fn advise_willneed(&self, from: usize, len: usize, chunk: usize) {
        let start = from / OS_PAGE_SIZE * OS_PAGE_SIZE;
        let end = from.saturating_add(len).min(self.size);
        if end <= start {
            return;
        }
        // One call per chunk: the kernel reads at most the device's readahead size per
        // MADV_WILLNEED and silently drops the rest of a longer range.
        let mut at = start;
        while at < end {
            let len = chunk.max(OS_PAGE_SIZE).min(end - at);
            // SAFETY: the range lies inside this mapping; MADV_WILLNEED only schedules reads
            // of the file into the page cache and changes no contents.
            unsafe {
                libc::madvise(self.base.add(at).cast(), len, libc::MADV_WILLNEED);
            }
            at += len;
        }
    }

    /// Whether the page holding `pos` is in the page cache (`mincore`; false when unknown).
    pub fn is_resident(&self, pos: usize) -> bool {
        if pos >= self.size {
            return false;
        }
        let page = pos / OS_PAGE_SIZE * OS_PAGE_SIZE;
        let mut vec = 0u8;
        // SAFETY: one page inside this mapping; mincore writes one byte into `vec`.
        let rc = unsafe { libc::mincore(self.base.add(page).cast(), OS_PAGE_SIZE, &mut vec) };
        rc == 0 && vec & 1 == 1
    }

    /// Write this file's dirty pages, unmap its pages from this process and drop them from
    /// the page cache (see [`crate::commitlog::CommitLog::evict_page_cache`]).
    pub fn evict_page_cache(&self) -> Result<()> {
        self.map.flush().at(&self.path)?;
        // SAFETY: MADV_DONTNEED on a shared file mapping only drops this process's page-table
        // entries; the data stays in the file and is faulted back in on the next access.
        unsafe {
            libc::madvise(self.base.cast(), self.size, libc::MADV_DONTNEED);
        }
        let file = File::open(&self.path).at(&self.path)?;
        // SAFETY: a plain advisory call on a descriptor we own.
        let rc = unsafe {
            libc::posix_fadvise(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
                0,
                libc::POSIX_FADV_DONTNEED,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc)).at(&self.path);
        }
        Ok(())
    }

    /// Back to normal readahead once the file is full (it is only read from then on).
    pub fn advise_full(&self) {
        let _ = self.map.advise(memmap2::Advice::Normal);
    }

    /// Touch every page so that appends do not page-fault (RocketMQ's warm-up).
    pub fn warm(&self) {
        let _ = self.map.advise(memmap2::Advice::WillNeed);
        let start = self.wrote_position();
        let mut pos = start.div_ceil(OS_PAGE_SIZE) * OS_PAGE_SIZE;
        while pos < self.size {
            // SAFETY: pos < size and this region is above the wrote position: no reader looks
            // at it and the appender has not reached it. Writing the zero it already holds.
            unsafe { std::ptr::write_volatile(self.base.add(pos), 0) };
            pos += OS_PAGE_SIZE;
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn from_offset(&self) -> u64 {
        self.from_offset
    }
    pub fn size(&self) -> usize {
        self.size
    }
    pub fn wrote_position(&self) -> usize {
        self.wrote.load(Ordering::Acquire)
    }
    pub fn flushed_position(&self) -> usize {
        self.flushed.load(Ordering::Acquire)
    }
    pub fn set_wrote_position(&self, pos: usize) {
        self.wrote.store(pos.min(self.size), Ordering::Release);
    }
    pub fn set_flushed_position(&self, pos: usize) {
        self.flushed.store(pos.min(self.size), Ordering::Release);
    }
    pub fn remaining(&self) -> usize {
        self.size - self.wrote_position()
    }
    pub fn is_full(&self) -> bool {
        self.wrote_position() >= self.size
    }
    pub fn last_store_timestamp(&self) -> u64 {
        self.last_store_ts.load(Ordering::Acquire)
    }
    pub fn set_last_store_timestamp(&self, ts: u64) {
        self.last_store_ts.store(ts, Ordering::Release);
    }

    /// Whether the bytes below `end` have disk blocks reserved. Reserve them (at least
    /// `chunk` more at a time) with [`MappedFile::ensure_allocated`] before writing there
    /// through the mapping, which would otherwise die of SIGBUS on a full disk (see
    /// [`crate::disk`]).
    pub fn is_allocated(&self, end: usize) -> bool {
        end <= self.allocated.load(Ordering::Acquire)
    }

    /// Reserve disk blocks up to `end` (see [`MappedFile::is_allocated`]).
    pub fn ensure_allocated(&self, end: usize, chunk: usize) -> Result<()> {
        let have = self.allocated.load(Ordering::Acquire);
        if end <= have {
            return Ok(());
        }
        let from = have / OS_PAGE_SIZE * OS_PAGE_SIZE;
        let to = (end.max(from + chunk).div_ceil(OS_PAGE_SIZE) * OS_PAGE_SIZE).min(self.size);
        crate::disk::reserve_blocks(&self.path, from, to)?;
        self.allocated.fetch_max(to, Ordering::AcqRel);
        Ok(())
    }

    /// A write of `len` bytes at `pos` must end inside the segment.
    fn check_write(&self, pos: usize, len: usize) -> Result<()> {
        if pos.checked_add(len).is_none_or(|end| end > self.size) {
            return Err(StoreError::corrupt(
                "write",
                format!(
                    "{len} bytes at {pos} overflow segment {} of {} bytes",
                    self.path.display(),
                    self.size
                ),
            ));
        }
        Ok(())
    }

    /// Write `data` at `pos` with `pwrite(2)` instead of through the mapping, without publishing
    /// it; same contract as [`MappedFile::write_at`]. The bytes land in the same page-cache
    /// pages the mapping shows, so readers see them as they see mapped writes. What it saves:
    /// the mapping never holds these pages writable, so the appender takes no page faults and
    /// writing the pages back write-protects nothing (no TLB shootdowns). Opens the file on
    /// first use and keeps the descriptor until [`MappedFile::close_fd`].
    pub fn write_through(&self, pos: usize, data: &[u8]) -> Result<()> {
        use std::os::unix::fs::FileExt;
        self.check_write(pos, data.len())?;
        let mut fd = self.fd.lock();
        if fd.is_none() {
            *fd = Some(
                OpenOptions::new()
                    .write(true)
                    .open(&self.path)
                    .at(&self.path)?,
            );
        }
        let file = fd.as_ref().expect("opened above");
        file.write_all_at(data, pos as u64).at(&self.path)
    }

    /// Close the descriptor [`MappedFile::write_through`] opened (a segment written to its end).
    pub fn close_fd(&self) {
        self.fd.lock().take();
    }

    /// Whether a descriptor is open for [`MappedFile::write_through`].
    #[cfg(test)]
    pub fn has_fd(&self) -> bool {
        self.fd.lock().is_some()
    }

    /// Copy `data` to `pos` without publishing it. Only the single appender of the owning
    /// queue (or recovery, which has exclusive access) may call this.
    pub fn write_at(&self, pos: usize, data: &[u8]) -> Result<()> {
        self.check_write(pos, data.len())?;
        // SAFETY: bounds checked above; no reader reads at or above the published position.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(pos), data.len()) };
        Ok(())
    }

    /// A mutable view of `len` bytes at `pos`, for encoding in place.
    ///
    /// # Safety
    /// Same contract as [`MappedFile::write_at`]: only the single appender, above the
    /// published position, and the slice must not outlive the call that fills it.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut(&self, pos: usize, len: usize) -> Option<&mut [u8]> {
        if pos.checked_add(len)? > self.size {
            return None;
        }
        Some(unsafe { std::slice::from_raw_parts_mut(self.base.add(pos), len) })
    }

    /// Append `data` at the wrote position and publish it. Returns the position written, or
    /// `None` when it does not fit.
    pub fn append(&self, data: &[u8]) -> Option<usize> {
        let pos = self.wrote_position();
        if pos + data.len() > self.size {
            return None;
        }
        self.write_at(pos, data).ok()?;
        self.set_wrote_position(pos + data.len());
        Some(pos)
    }

    /// Bytes `[pos, pos+len)`, if they are below the wrote position.
    pub fn slice(&self, pos: usize, len: usize) -> Option<&[u8]> {
        let end = pos.checked_add(len)?;
        if end > self.wrote_position() {
            return None;
        }
        Some(&self.map[pos..end])
    }

    /// Bytes `[pos, size)` regardless of the wrote position (for recovery scans).
    pub fn raw_from(&self, pos: usize) -> &[u8] {
        &self.map[pos.min(self.size)..]
    }

    /// Flush dirty pages if at least `least_pages` of them accumulated (0 = always).
    /// Returns the flushed position afterwards.
    pub fn flush(&self, least_pages: u64) -> Result<usize> {
        let wrote = self.wrote_position();
        let flushed = self.flushed_position();
        if wrote <= flushed {
            return Ok(flushed);
        }
        if least_pages > 0 {
            let dirty = (wrote / OS_PAGE_SIZE).saturating_sub(flushed / OS_PAGE_SIZE);
            if (dirty as u64) < least_pages && !(self.is_full()) {
                return Ok(flushed);
            }
        }
        let start = flushed / OS_PAGE_SIZE * OS_PAGE_SIZE;
        self.unmap_written(start, wrote);
        self.map.flush_range(start, wrote - start).at(&self.path)?;
        self.set_flushed_position(wrote);
        Ok(wrote)
    }

    /// Drop this process's page-table entries for the pages holding `[from, to)`, bytes the
    /// appender has written (`to` at most the wrote position; the page it is still filling is
    /// included): they stay in the page cache, a dirty page stays dirty, and the next access
    /// maps it again (from the page cache, `fault_around_bytes` at a time; the appender's next
    /// write to its page takes the fault that write-protecting it would have cost). Done
    /// before writing them back: writeback write-protects every page still mapped writable,
    /// each with its own TLB shootdown (an interrupt to every other CPU running this process,
    /// which waits for them); unmapped first, the whole range costs one.
    pub fn unmap_written(&self, from: usize, to: usize) {
        let from = from / OS_PAGE_SIZE * OS_PAGE_SIZE;
        let to = to.div_ceil(OS_PAGE_SIZE) * OS_PAGE_SIZE;
        let to = to.min(self.size);
        if to <= from {
            return;
        }
        // SAFETY: whole pages inside this mapping. MADV_DONTNEED on a shared file mapping
        // only drops this process's page-table entries (moving their dirty bits to the page
        // cache); the data stays in the file and in the cache, and a later read or write of
        // the range faults it back in unchanged. The appender may be writing the last page
        // meanwhile: a store racing the unmapping lands in the same page-cache page, which is
        // marked dirty before madvise returns (after the TLB shootdown), so the writeback
        // that follows covers it; a later store faults and dirties the page again.
        unsafe {
            libc::madvise(self.base.add(from).cast(), to - from, libc::MADV_DONTNEED);
        }
    }

    /// `msync` the bytes `[from, to)` of this file (from rounded down to a page) without
    /// moving the flushed position: group commit flushes ranges concurrently and raises the
    /// position itself once every range below it is durable.
    pub fn sync_range(&self, from: usize, to: usize) -> Result<()> {
        let to = to.min(self.size);
        if to <= from {
            return Ok(());
        }
        let start = from / OS_PAGE_SIZE * OS_PAGE_SIZE;
        self.map.flush_range(start, to - start).at(&self.path)
    }

    /// Raise the flushed position to `pos` (never lowers it).
    pub fn raise_flushed_position(&self, pos: usize) {
        self.flushed.fetch_max(pos.min(self.size), Ordering::AcqRel);
    }

    /// Zero `[pos, wrote)` and move the wrote/flushed positions back to `pos` (recovery).
    pub fn truncate_to(&self, pos: usize) -> Result<()> {
        let pos = pos.min(self.size);
        let wrote = self.wrote_position().max(pos);
        // Zero the torn tail, so a later scan never mistakes stale bytes for records.
        let end = self.size.min(wrote.max(pos));
        if end > pos {
            let zeros = vec![0u8; end - pos];
            self.write_at(pos, &zeros)?;
            self.map.flush_range(pos, end - pos).at(&self.path)?;
        }
        self.set_wrote_position(pos);
        self.set_flushed_position(pos);
        Ok(())
    }

    /// Zero the stale bytes from `pos` on (recovery of a torn tail whose extent is unknown).
    ///
    /// Written data is a contiguous prefix, so stale bytes end where a run of zeros longer than
    /// any record begins ([`ZERO_RUN_END`]); the scan stops there instead of reading the whole
    /// (mostly sparse) file.
    pub fn zero_tail(&self, pos: usize) -> Result<()> {
        let pos = pos.min(self.size);
        let dirty_end = self.stale_end(pos);
        if dirty_end > pos {
            let zeros = vec![0u8; dirty_end - pos];
            self.write_at(pos, &zeros)?;
            self.map.flush_range(pos, dirty_end - pos).at(&self.path)?;
        }
        Ok(())
    }

    /// End of the non-zero bytes from `pos` on, up to the first run of zeros longer than any
    /// record ([`ZERO_RUN_END`]), page-granular; `pos` when there are none.
    pub fn stale_end(&self, pos: usize) -> usize {
        let pos = pos.min(self.size);
        let mut p = pos;
        let mut dirty_end = pos;
        while p < self.size && p - dirty_end <= ZERO_RUN_END {
            let n = OS_PAGE_SIZE.min(self.size - p);
            if self.map[p..p + n].iter().any(|&b| b != 0) {
                dirty_end = p + n;
            }
            p += n;
        }
        dirty_end
    }

    /// Last-modified time of the file, as ms since the epoch.
    pub fn last_modified_ms(&self) -> u64 {
        std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }

    /// Remove the file from disk. Readers holding the `Arc` keep a valid mapping.
    pub fn destroy(&self) -> Result<()> {
        if !self.deleted.swap(true, Ordering::AcqRel) {
            match std::fs::remove_file(&self.path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io(&self.path, e)),
            }
        }
        Ok(())
    }

    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_append_slice_flush() {
        let dir = tempfile::tempdir().unwrap();
        let mf = MappedFile::create(dir.path(), 8192, 8192).unwrap();
        assert_eq!(
            mf.path().file_name().unwrap().to_str().unwrap(),
            "00000000000000008192"
        );
        assert_eq!(mf.append(b"hello"), Some(0));
        assert_eq!(mf.append(b"world"), Some(5));
        assert_eq!(mf.slice(0, 10).unwrap(), b"helloworld");
        assert!(mf.slice(5, 6).is_none());
        assert_eq!(mf.flush(0).unwrap(), 10);
        assert!(mf.append(&vec![1u8; 8192]).is_none());
        mf.truncate_to(5).unwrap();
        assert_eq!(mf.wrote_position(), 5);
        assert_eq!(&mf.raw_from(0)[..10], b"hello\0\0\0\0\0");
    }

    #[test]
    fn flush_unmaps_written_pages_and_keeps_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let mf = MappedFile::create(dir.path(), 0, 64 << 10).unwrap();
        let first: Vec<u8> = (0..3 * OS_PAGE_SIZE + 100)
            .map(|i| (i % 251) as u8)
            .collect();
        mf.append(&first).unwrap();
        // four pages unmapped, the appender's partial fourth among them
        assert_eq!(mf.flush(0).unwrap(), first.len());
        assert_eq!(mf.slice(0, first.len()).unwrap(), &first[..]);
        let second = vec![0xabu8; 2 * OS_PAGE_SIZE];
        mf.append(&second).unwrap();
        let end = first.len() + second.len();
        assert_eq!(mf.flush(0).unwrap(), end);
        mf.unmap_written(0, end); // again: idempotent
        let on_disk = std::fs::read(mf.path()).unwrap();
        assert_eq!(&on_disk[..first.len()], &first[..]);
        assert_eq!(&on_disk[first.len()..end], &second[..]);
        assert_eq!(&mf.raw_from(0)[..end], &on_disk[..end]);
    }

    #[test]
    fn zero_tail_clears_stale_bytes_up_to_a_long_zero_run() {
        let dir = tempfile::tempdir().unwrap();
        let size = 16 << 20;
        let mf = MappedFile::create(dir.path(), 0, size).unwrap();
        mf.write_at(1000, &[9u8; 5000]).unwrap();
        mf.write_at(2 << 20, &[7u8; 10]).unwrap(); // stale data after a zero gap
        mf.zero_tail(500).unwrap();
        assert!(mf.raw_from(0).iter().all(|&b| b == 0));
        // Bytes beyond a run of zeros longer than any record are not looked at.
        mf.write_at(15 << 20, &[1u8; 4]).unwrap();
        mf.zero_tail(0).unwrap();
        assert_eq!(&mf.raw_from(15 << 20)[..4], &[1, 1, 1, 1]);
    }

    #[test]
    fn holds_no_file_descriptor_once_mapped() {
        let dir = tempfile::tempdir().unwrap();
        let created = MappedFile::create(dir.path(), 0, 8192).unwrap();
        created.append(b"kept").unwrap();
        created.flush(0).unwrap();
        let (opened, _) = MappedFile::open(created.path(), 8192, false).unwrap();
        let open_paths: Vec<PathBuf> = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .collect();
        assert!(!open_paths.iter().any(|p| p.starts_with(dir.path())));
        assert_eq!(&opened.raw_from(0)[..4], b"kept");
        assert!(created.last_modified_ms() > 0);
    }

    #[test]
    fn open_checks_name_and_size() {
        let dir = tempfile::tempdir().unwrap();
        let mf = MappedFile::create(dir.path(), 0, 4096).unwrap();
        let p = mf.path().to_path_buf();
        drop(mf);
        assert_eq!(MappedFile::open(&p, 4096, false).unwrap().1, None);
        for extend in [false, true] {
            assert!(matches!(
                MappedFile::open(&p, 2048, extend),
                Err(StoreError::Corrupt { .. })
            ));
        }
        assert!(matches!(
            MappedFile::open(&p, 8192, false),
            Err(StoreError::Corrupt { .. })
        ));
        // A short file is extended when asked; its former length is reported.
        let (mf, short) = MappedFile::open(&p, 8192, true).unwrap();
        assert_eq!(short, Some(4096));
        assert_eq!(mf.raw_from(0).len(), 8192);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 8192);
        let bad = dir.path().join("notanumber");
        std::fs::write(&bad, b"x").unwrap();
        assert!(MappedFile::open(&bad, 1, true).is_err());
    }
}
