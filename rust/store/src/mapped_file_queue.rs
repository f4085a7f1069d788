//! An ordered sequence of equally sized [`MappedFile`]s forming one logical byte space.
//!
//! Directory layout: `<dir>/<20-digit start offset>`, every file exactly `file_size` bytes,
//! file n+1 starting where file n ends. The queue hands out the file to append to (rolling
//! to a new one when the last is full), finds the file holding an offset, tracks the
//! flushed watermark, truncates a dirty tail and deletes expired head files.
//!
//! The next file is pre-created (and, optionally, pre-touched) on a background thread as
//! soon as a file is taken into use, like RocketMQ's AllocateMappedFileService, so rolling
//! over does not stall the appender.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Mutex, RwLock};

use crate::error::{IoContext, Result, StoreError};
use crate::mapped_file::{MappedFile, ZERO_RUN_END};

type Pending = (u64, JoinHandle<Result<MappedFile>>);

/// A segmented, memory-mapped byte log.
pub struct MappedFileQueue {
    dir: PathBuf,
    file_size: usize,
    files: RwLock<Vec<Arc<MappedFile>>>,
    flushed_where: AtomicU64,
    preallocate: bool,
    warm: bool,
    next: Mutex<Option<Pending>>,
    /// Files found shorter than `file_size` at load and extended, with their former length.
    extended: Mutex<Vec<(PathBuf, u64)>>,
    /// Whether a short last file is extended even when it is the only file.
    allow_short_last: AtomicBool,
}

impl std::fmt::Debug for MappedFileQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFileQueue")
            .field("dir", &self.dir)
            .field("files", &self.files.read().len())
            .finish()
    }
}

impl MappedFileQueue {
    /// A queue over `dir` (created when the first file is). `preallocate` creates the next
    /// file in the background; `warm` also touches its pages.
    pub fn new(dir: impl Into<PathBuf>, file_size: u64, preallocate: bool, warm: bool) -> Self {
        MappedFileQueue {
            dir: dir.into(),
            file_size: file_size as usize,
            files: RwLock::new(Vec::new()),
            flushed_where: AtomicU64::new(0),
            preallocate,
            warm,
            next: Mutex::new(None),
            extended: Mutex::new(Vec::new()),
            allow_short_last: AtomicBool::new(true),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn file_size(&self) -> u64 {
        self.file_size as u64
    }

    /// Map every file in the directory. Positions are set to "full"; recovery then moves the
    /// positions of the tail back to the last valid byte.
    pub fn load(&self) -> Result<()> {
        crate::mapped_file::remove_creating_leftovers(&self.dir);
        self.extended.lock().clear();
        let mut paths: Vec<PathBuf> = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(StoreError::io(&self.dir, e)),
        };
        // Not a segment (e.g. a temp file a crash left behind): ignored.
        paths.retain(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit())
        });
        paths.sort();
        let mut files = Vec::with_capacity(paths.len());
        let mut expected: Option<u64> = None;
        let last = paths.len().saturating_sub(1);
        let allow_short_last = self.allow_short_last.load(Ordering::Acquire);
        for (i, p) in paths.into_iter().enumerate() {
            // Only the last file may be short, and only where the segment size is known to
            // be right (an earlier file has it, or the owner vouches for it): a short single
            // file is as likely a store written with a smaller size.
            let extend = i == last && (i > 0 || allow_short_last);
            let (mf, short) = MappedFile::open(&p, self.file_size, extend)?;
            if let Some(len) = short {
                self.extended.lock().push((p.clone(), len));
            }
            if let Some(exp) = expected {
                if mf.from_offset() != exp {
                    return Err(StoreError::corrupt(
                        "segment sequence",
                        format!(
                            "{} starts at {} but the previous file ends at {exp}",
                            p.display(),
                            mf.from_offset()
                        ),
                    ));
                }
            }
            if !mf.from_offset().is_multiple_of(self.file_size as u64) {
                return Err(StoreError::corrupt(
                    "segment name",
                    format!(
                        "{} does not start at a multiple of {}",
                        p.display(),
                        self.file_size
                    ),
                ));
            }
            expected = Some(mf.from_offset() + self.file_size as u64);
            mf.set_wrote_position(self.file_size);
            mf.set_flushed_position(self.file_size);
            files.push(Arc::new(mf));
        }
        let flushed = files
            .last()
            .map(|f| f.from_offset() + self.file_size as u64)
            .unwrap_or(0);
        self.flushed_where.store(flushed, Ordering::Release);
        *self.files.write() = files;
        Ok(())
    }

    /// Whether [`MappedFileQueue::load`] extends a short file that is the only one (default:
    /// yes). A short last file after full ones is always extended.
    pub fn set_allow_short_last(&self, allow: bool) {
        self.allow_short_last.store(allow, Ordering::Release);
    }

    /// Files the last [`MappedFileQueue::load`] found short and extended (path, former length).
    pub fn extended_files(&self) -> Vec<(PathBuf, u64)> {
        self.extended.lock().clone()
    }

    /// A snapshot of the files, oldest first.
    pub fn files(&self) -> Vec<Arc<MappedFile>> {
        self.files.read().clone()
    }

    pub fn is_empty(&self) -> bool {
        self.files.read().is_empty()
    }

    pub fn first_file(&self) -> Option<Arc<MappedFile>> {
        self.files.read().first().cloned()
    }

    pub fn last_file(&self) -> Option<Arc<MappedFile>> {
        self.files.read().last().cloned()
    }

    /// `f` on the last file under the read lock, taking no reference count (for a path run
    /// per record); None when there is no file. `f` must not look at this queue's files again
    /// (a second read lock waits behind a waiting writer: a deadlock), and while it runs, files
    /// are neither added nor removed.
    pub fn with_last_file<R>(&self, f: impl FnOnce(&MappedFile) -> R) -> Option<R> {
        self.files.read().last().map(|last| f(last))
    }

    /// The file to append to: the last one if it has room, else a new one. When the queue is
    /// empty the new file starts at `start_offset` rounded down to a file boundary.
    pub fn last_or_create(&self, start_offset: u64) -> Result<Arc<MappedFile>> {
        let from = {
            let files = self.files.read();
            match files.last() {
                Some(last) if !last.is_full() => return Ok(last.clone()),
                Some(last) => {
                    last.advise_full();
                    last.from_offset() + self.file_size as u64
                }
                None => start_offset - start_offset % self.file_size as u64,
            }
        };
        let mf = Arc::new(self.take_or_create(from)?);
        {
            let mut files = self.files.write();
            if let Some(last) = files.last() {
                if last.from_offset() >= from {
                    return Ok(last.clone());
                }
            }
            files.push(mf.clone());
        }
        self.spawn_next(from + self.file_size as u64);
        Ok(mf)
    }

    fn take_or_create(&self, from: u64) -> Result<MappedFile> {
        let pending = self.next.lock().take();
        if let Some((off, handle)) = pending {
            if let Ok(Ok(mf)) = handle.join() {
                if off == from {
                    return Ok(mf);
                }
                // Preallocated for another offset (after a truncation): discard it.
                let _ = mf.destroy();
            }
        }
        let mf = MappedFile::create(&self.dir, from, self.file_size)?;
        mf.advise_appending();
        if self.warm {
            mf.warm();
        }
        Ok(mf)
    }

    fn spawn_next(&self, from: u64) {
        if !self.preallocate {
            return;
        }
        let dir = self.dir.clone();
        let size = self.file_size;
        let warm = self.warm;
        let handle = std::thread::Builder::new()
            .name("rmq-allocate".into())
            .spawn(move || {
                let mf = MappedFile::create(&dir, from, size)?;
                mf.advise_appending();
                if warm {
                    mf.warm();
                }
                Ok(mf)
            });
        if let Ok(h) = handle {
            *self.next.lock() = Some((from, h));
        }
    }

    /// Remove the last file if nothing was written to it (a new segment the disk could not
    /// back), and the preallocated next one.
    pub fn discard_last_if_empty(&self) {
        self.discard_preallocated();
        let mut files = self.files.write();
        if files.last().is_some_and(|f| f.wrote_position() == 0) {
            if let Some(f) = files.pop() {
                let _ = f.destroy();
            }
        }
    }

    /// Drop a preallocated next file, if any (shutdown, truncation).
    pub fn discard_preallocated(&self) {
        if let Some((_, h)) = self.next.lock().take() {
            if let Ok(Ok(mf)) = h.join() {
                let _ = mf.destroy();
            }
        }
    }

    /// The file holding byte `offset`.
    pub fn find(&self, offset: u64) -> Option<Arc<MappedFile>> {
        let files = self.files.read();
        let first = files.first()?;
        if offset < first.from_offset() {
            return None;
        }
        let idx = ((offset - first.from_offset()) / self.file_size as u64) as usize;
        let f = files.get(idx)?;
        if offset >= f.from_offset() && offset < f.from_offset() + self.file_size as u64 {
            Some(f.clone())
        } else {
            files
                .iter()
                .find(|f| {
                    offset >= f.from_offset() && offset < f.from_offset() + self.file_size as u64
                })
                .cloned()
        }
    }

    /// First byte offset held (the first file's start), 0 when empty.
    pub fn min_offset(&self) -> u64 {
        self.first_file().map(|f| f.from_offset()).unwrap_or(0)
    }

    /// One past the last written byte.
    pub fn max_offset(&self) -> u64 {
        self.last_file()
            .map(|f| f.from_offset() + f.wrote_position() as u64)
            .unwrap_or(0)
    }

    /// Everything below this offset is on disk.
    pub fn flushed_where(&self) -> u64 {
        self.flushed_where.load(Ordering::Acquire)
    }

    pub fn set_flushed_where(&self, offset: u64) {
        self.flushed_where.store(offset, Ordering::Release);
    }

    /// `msync` the bytes `[from, to)` across files, leaving the flushed watermark alone
    /// (see [`MappedFileQueue::raise_flushed`]). Everything below `to` must be written. With
    /// `unmap`, the pages holding the range are unmapped first ([`MappedFile::unmap_written`]):
    /// worth it when they were written through the mapping.
    pub fn sync_range(&self, from: u64, to: u64, unmap: bool) -> Result<()> {
        let mut at = from;
        while at < to {
            let Some(f) = self.find(at) else {
                // Below the first file (deleted by retention): nothing left to flush there.
                let first = self.min_offset();
                if at < first && !self.is_empty() {
                    at = first;
                    continue;
                }
                return Ok(());
            };
            let base = f.from_offset();
            let end = (to - base).min(f.size() as u64) as usize;
            if unmap {
                f.unmap_written((at - base) as usize, end);
            }
            f.sync_range((at - base) as usize, end)?;
            at = base + f.size() as u64;
        }
        Ok(())
    }

    /// Record that everything below `to` is durable: raises the watermark and the flushed
    /// positions of the files below it (never lowers either).
    pub fn raise_flushed(&self, to: u64) {
        let was = self.flushed_where.fetch_max(to, Ordering::AcqRel);
        if to <= was {
            return;
        }
        for f in self.files.read().iter() {
            let base = f.from_offset();
            if base >= to {
                break;
            }
            if base + f.size() as u64 > was {
                f.raise_flushed_position((to - base).min(f.size() as u64) as usize);
            }
        }
    }

    /// Flush the file holding the flushed watermark (and any full files after it) when at
    /// least `least_pages` are dirty (0 = whatever is dirty). Returns the new watermark.
    pub fn flush(&self, least_pages: u64) -> Result<u64> {
        loop {
            let wher = self.flushed_where();
            let f = match self.find(wher) {
                Some(f) => f,
                None => {
                    // Watermark at the very end of the last file, or below the first file.
                    let first = self.min_offset();
                    if wher < first && !self.is_empty() {
                        self.set_flushed_where(first);
                        continue;
                    }
                    return Ok(wher);
                }
            };
            let pos = f.flush(least_pages)?;
            let new = f.from_offset() + pos as u64;
            if new > wher {
                self.set_flushed_where(new);
            }
            // A full file is done: move on to the next one in the same call.
            if pos >= f.size() && new > wher {
                continue;
            }
            return Ok(self.flushed_where());
        }
    }

    /// Remove everything at and above `offset`: later files are deleted, the file holding
    /// `offset` is zeroed from there.
    pub fn truncate_dirty(&self, offset: u64) -> Result<()> {
        self.discard_preallocated();
        let mut files = self.files.write();
        let mut keep = Vec::with_capacity(files.len());
        for f in files.drain(..) {
            let end = f.from_offset() + self.file_size as u64;
            if end <= offset {
                keep.push(f);
            } else if f.from_offset() <= offset && offset < end {
                let pos = (offset - f.from_offset()) as usize;
                match stored_end(f.path(), pos as u64) {
                    // Past the filesystem's last data extent the file is a hole (zeros): clear
                    // only the stored bytes after `pos`, without reading megabytes of holes
                    // (each read of a hole allocates a zeroed page; a restart with thousands of
                    // consume queues spent minutes on it).
                    Some(stored) if stored as usize <= pos + ZERO_RUN_END => {
                        f.set_wrote_position((stored as usize).max(pos));
                        f.truncate_to(pos)?;
                    }
                    _ => {
                        f.zero_tail(pos)?;
                        f.set_wrote_position(pos);
                        f.set_flushed_position(pos);
                    }
                }
                f.advise_appending();
                keep.push(f);
            } else {
                f.destroy()?;
            }
        }
        *files = keep;
        drop(files);
        if self.flushed_where() > offset {
            self.set_flushed_where(offset);
        }
        Ok(())
    }

    /// Delete head files for which `expired` returns true, oldest first, stopping at the
    /// first that is not; the last file is never deleted. Returns how many were deleted.
    pub fn delete_head_files<F>(&self, max: usize, mut expired: F) -> Result<usize>
    where
        F: FnMut(&MappedFile) -> bool,
    {
        let candidates: Vec<Arc<MappedFile>> = {
            let files = self.files.read();
            let n = files.len().saturating_sub(1);
            files.iter().take(n).cloned().collect()
        };
        let mut doomed = Vec::new();
        for f in candidates {
            if doomed.len() >= max || !expired(&f) {
                break;
            }
            doomed.push(f);
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        {
            let mut files = self.files.write();
            files.retain(|f| !doomed.iter().any(|d| Arc::ptr_eq(d, f)));
        }
        for f in &doomed {
            f.destroy()?;
        }
        Ok(doomed.len())
    }

    /// Delete every file and the directory (a topic deletion).
    pub fn destroy(&self) -> Result<()> {
        self.discard_preallocated();
        let mut files = self.files.write();
        for f in files.drain(..) {
            f.destroy()?;
        }
        self.set_flushed_where(0);
        match std::fs::remove_dir(&self.dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            // Not empty (a stray file): leave the directory.
            Err(_) => Ok(()),
        }
    }

    /// Make sure the directory exists (used before the first file is created).
    pub fn ensure_dir(&self) -> Result<()> {
        std::fs::create_dir_all(&self.dir).at(&self.dir)
    }
}

impl Drop for MappedFileQueue {
    fn drop(&mut self) {
        if let Some((_, h)) = self.next.get_mut().take() {
            if let Ok(Ok(mf)) = h.join() {
                // An unused preallocated file is removed, so a restart does not treat an
                // all-zero file as part of the log.
                let _ = mf.destroy();
            }
        }
    }
}

/// End of the last data extent of the file at `path` at or after byte `from` (`from` itself when
/// only holes follow), from `lseek(SEEK_DATA / SEEK_HOLE)` on a descriptor opened for the call;
/// `None` when the filesystem cannot tell.
fn stored_end(path: &Path, from: u64) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).ok()?;
    let fd = file.as_raw_fd();
    let mut end = from;
    loop {
        // SAFETY: plain lseek calls on a descriptor this function owns.
        let data = unsafe { libc::lseek(fd, end as libc::off_t, libc::SEEK_DATA) };
        if data < 0 {
            let nothing_after = std::io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO);
            return nothing_after.then_some(end);
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        if hole <= data {
            return None;
        }
        end = hole as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_range_across_files_and_raise_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let q = MappedFileQueue::new(dir.path(), 4096, false, false);
        let f0 = q.last_or_create(0).unwrap();
        f0.append(&[3u8; 4096]).unwrap();
        let f1 = q.last_or_create(0).unwrap();
        f1.append(&[4u8; 1000]).unwrap();
        // Ranges in any order, crossing the file boundary; the watermark is separate.
        q.sync_range(3000, 5096, true).unwrap();
        q.sync_range(100, 3000, false).unwrap();
        assert_eq!(q.flushed_where(), 0);
        q.raise_flushed(4500);
        assert_eq!(q.flushed_where(), 4500);
        assert_eq!(f0.flushed_position(), 4096);
        assert_eq!(f1.flushed_position(), 404);
        // Never lowered.
        q.raise_flushed(4200);
        assert_eq!(q.flushed_where(), 4500);
        assert_eq!(f1.flushed_position(), 404);
        // The ordinary flush continues from there.
        assert_eq!(q.flush(0).unwrap(), 5096);
        assert_eq!(f1.flushed_position(), 1000);
        // Past the end or below the first file: nothing to do, no error.
        q.sync_range(5096, 9000, true).unwrap();
    }

    #[test]
    fn truncate_dirty_clears_stale_bytes_before_and_after_a_hole() {
        let dir = tempfile::tempdir().unwrap();
        let size: usize = 8 << 20;
        let q = MappedFileQueue::new(dir.path(), size as u64, false, false);
        let f = q.last_or_create(0).unwrap();
        f.append(&[1u8; 100]).unwrap();
        f.write_at(100, &[9u8; 50]).unwrap(); // a torn record right after the end
        f.write_at(3 << 20, &[7u8; 10]).unwrap(); // stale bytes after a hole
        f.sync_range(0, size).unwrap();
        assert!(stored_end(f.path(), 100).unwrap() >= (3 << 20) + 10);
        q.truncate_dirty(100).unwrap();
        assert!(f.raw_from(0)[..100].iter().all(|&b| b == 1));
        assert!(f.raw_from(100).iter().all(|&b| b == 0));
        assert_eq!((f.wrote_position(), f.flushed_position()), (100, 100));
    }

    #[test]
    fn roll_find_truncate_delete() {
        let dir = tempfile::tempdir().unwrap();
        let q = MappedFileQueue::new(dir.path(), 4096, true, false);
        let f0 = q.last_or_create(0).unwrap();
        assert_eq!(f0.from_offset(), 0);
        assert!(f0.append(&[7u8; 4096]).is_some());
        let f1 = q.last_or_create(0).unwrap();
        assert_eq!(f1.from_offset(), 4096);
        f1.append(&[1u8; 100]).unwrap();
        assert_eq!(q.max_offset(), 4196);
        assert_eq!(q.find(4100).unwrap().from_offset(), 4096);
        assert_eq!(q.find(10).unwrap().from_offset(), 0);
        assert!(q.find(9000).is_none());
        assert_eq!(q.flush(0).unwrap(), 4196);
        q.truncate_dirty(4000).unwrap();
        assert_eq!(q.files().len(), 1);
        assert_eq!(q.max_offset(), 4000);
        // Reload from disk.
        drop(q);
        let q = MappedFileQueue::new(dir.path(), 4096, false, false);
        q.load().unwrap();
        assert_eq!(q.files().len(), 1);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "preallocated file removed on truncate");
        let f = q.last_or_create(0).unwrap();
        assert_eq!(f.from_offset(), 4096, "loaded files count as full");
        assert_eq!(q.delete_head_files(10, |_| true).unwrap(), 1);
        assert_eq!(q.min_offset(), 4096);
    }
}
