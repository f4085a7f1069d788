//! Disk space: how full the store's filesystem is, block reservation for the files the store
//! writes through memory maps, and the guard that refuses writes while space is short.
//!
//! A write through a shared mapping into a page the filesystem cannot back kills the process
//! with SIGBUS; a write system call would just fail. So every mapped file reserves its blocks
//! before the store writes into them ([`reserve_blocks`], `fallocate`): a CommitLog segment
//! 16 MiB ahead of the appender, ConsumeQueue files a page at a time, an index file's slots
//! when it is created and its entries 1 MiB ahead (whole files where reading a hole takes
//! space, see [`holes_take_space`]), so the store holds little more than it wrote. A
//! reservation that fails with ENOSPC becomes [`StoreError::NoSpace`], and the [`DiskGuard`]
//! refuses writes until that much space is available again. Independently, writes are refused
//! while the filesystem is fuller than `diskSpaceWarningLevelRatio` (RocketMQ's rule).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Result, StoreError};
use crate::journal::Journal;

/// `path`, or its nearest existing ancestor, as a C string.
fn existing(path: &Path) -> Option<CString> {
    let mut p = path;
    while !p.exists() {
        p = p.parent()?;
    }
    CString::new(p.as_os_str().as_bytes()).ok()
}

fn statvfs(path: &Path) -> Option<libc::statvfs> {
    let c = existing(path)?;
    // SAFETY: statvfs fills the zeroed struct for a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st)
}

/// Percentage of the filesystem holding `path` that is in use, as `df` and RocketMQ count it:
/// used blocks over used plus available ones (blocks reserved for the superuser count as
/// neither, so a filesystem with large reservations is not seen as fuller than it is).
#[allow(clippy::unnecessary_cast)] // the statvfs field types differ between platforms
pub fn disk_used_percent(path: &Path) -> Option<f64> {
    let st = statvfs(path)?;
    used_percent(st.f_blocks as u64, st.f_bfree as u64, st.f_bavail as u64)
}

/// Whether merely reading a never-written page of a file on the filesystem of `path` takes
/// space (tmpfs and ramfs back every touched page with memory, so on a full one even a read of
/// a hole dies of SIGBUS). Files there are reserved whole, so they have no holes.
pub fn holes_take_space(path: &Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let Some(c) = existing(path) else {
        return false;
    };
    // SAFETY: statfs fills the zeroed struct for a valid C string.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    matches!(st.f_type as i64, TMPFS_MAGIC | RAMFS_MAGIC)
}

/// Bytes available to the store on the filesystem holding `path`.
#[allow(clippy::unnecessary_cast)] // the statvfs field types differ between platforms
pub fn available_bytes(path: &Path) -> Option<u64> {
    let st = statvfs(path)?;
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Used share of a filesystem from its block counts (total, free, available to users).
fn used_percent(blocks: u64, free: u64, available: u64) -> Option<f64> {
    let used = blocks.saturating_sub(free);
    let entire = used + available;
    if entire == 0 {
        return None;
    }
    Some((used as f64 / entire as f64 * 100.0).clamp(0.0, 100.0))
}

/// Space kept free for the ConsumeQueues and the index when the CommitLog takes a new segment
/// (they grow with what is appended to it): a sixteenth of a segment, within 1 and 64 MiB.
pub fn headroom(segment_size: u64) -> u64 {
    (segment_size / 16).clamp(1 << 20, 64 << 20)
}

/// Fault injection for tests: while set, every reservation fails as on a full disk.
static REFUSE_SPACE: AtomicBool = AtomicBool::new(false);

/// Make every block reservation fail with ENOSPC (tests of the full-disk path), or stop.
pub fn inject_no_space(refuse: bool) {
    REFUSE_SPACE.store(refuse, Ordering::SeqCst);
}

/// Reserve disk blocks for bytes `[from, to)` of the file at `path`, so writes through a
/// mapping there cannot fail. A filesystem that cannot reserve (no `fallocate`) is left as
/// it is: its writes stay as safe as they were.
pub fn reserve_blocks(path: &Path, from: usize, to: usize) -> Result<()> {
    if to <= from {
        return Ok(());
    }
    let needed = (to - from) as u64;
    if REFUSE_SPACE.load(Ordering::SeqCst) {
        return Err(StoreError::NoSpace {
            path: path.to_path_buf(),
            needed,
        });
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| StoreError::io(path, e))?;
    // SAFETY: fallocate on a descriptor we own, within off_t range (files are < 2^63 bytes).
    let rc = unsafe {
        libc::fallocate(
            f.as_raw_fd(),
            0,
            from as libc::off_t,
            (to - from) as libc::off_t,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => Err(StoreError::NoSpace {
            path: path.to_path_buf(),
            needed,
        }),
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(()),
        _ => Err(StoreError::io(path, err)),
    }
}

#[derive(Default)]
struct GuardState {
    /// Used percent above the warning ratio, as last measured.
    over_ratio: Option<f64>,
    /// A reservation that failed: the file and the bytes it needed.
    no_space: Option<(PathBuf, u64)>,
    /// The space a failed reservation needed seems back: writes are let through, and the
    /// first that succeeds confirms it (journaled then, so a disk that only looks free does
    /// not fill the journal with refusals and recoveries).
    probing: Option<(PathBuf, u64)>,
}

/// Refuses writes while the disk is short of space, and journals each change (once when the
/// condition starts, once when it clears).
pub struct DiskGuard {
    dir: PathBuf,
    warning_ratio: u32,
    journal: Arc<Journal>,
    refusing: AtomicBool,
    probing: AtomicBool,
    state: Mutex<GuardState>,
}

impl DiskGuard {
    /// A guard for the filesystem holding `dir` (the CommitLog directory).
    pub fn new(dir: PathBuf, warning_ratio: u32, journal: Arc<Journal>) -> Arc<DiskGuard> {
        Arc::new(DiskGuard {
            dir,
            warning_ratio,
            journal,
            refusing: AtomicBool::new(false),
            probing: AtomicBool::new(false),
            state: Mutex::new(GuardState::default()),
        })
    }

    /// Whether writes are refused now.
    pub fn is_full(&self) -> bool {
        self.refusing.load(Ordering::Acquire)
    }

    fn publish(&self, st: &GuardState) {
        self.refusing.store(
            st.over_ratio.is_some() || st.no_space.is_some(),
            Ordering::Release,
        );
        self.probing.store(st.probing.is_some(), Ordering::Release);
    }

    /// A reservation failed: refuse writes until `needed` bytes are available again.
    pub fn on_no_space(&self, path: &Path, needed: u64) {
        let mut st = self.state.lock();
        let quiet = self.is_full() || st.probing.take().is_some();
        if !quiet {
            let avail = available_bytes(&self.dir).unwrap_or(0);
            self.journal.warn(
                "disk-full",
                format!(
                    "no space left on the disk of {}: {needed} bytes for {} could not be \
                     reserved ({avail} bytes available); writes are refused until space is \
                     freed, reads go on",
                    self.dir.display(),
                    path.display()
                ),
            );
        }
        st.no_space = Some((path.to_path_buf(), needed));
        self.publish(&st);
    }

    /// Measure the filesystem again: the used ratio against the warning level, and whether
    /// the space a failed reservation needed is there now. The start of refusals is journaled
    /// once, whatever the reasons, and so is their end.
    pub fn refresh(&self) {
        let used = disk_used_percent(&self.dir);
        let avail = available_bytes(&self.dir);
        let mut st = self.state.lock();
        let was = self.is_full();
        if let Some(used) = used {
            st.over_ratio = (used > self.warning_ratio as f64).then_some(used);
        }
        if let (Some((_, needed)), Some(avail)) = (&st.no_space, avail) {
            if avail >= *needed {
                st.probing = st.no_space.take();
            }
        }
        self.publish(&st);
        let now = self.is_full();
        let shown = used.map_or(String::new(), |u| format!(" is {u:.1}% used"));
        if !was && now && st.no_space.is_none() && st.probing.take().is_none() {
            self.journal.warn(
                "disk-full",
                format!(
                    "the disk of {}{shown}, above diskSpaceWarningLevelRatio {}%: writes are \
                     refused until it is below, reads go on",
                    self.dir.display(),
                    self.warning_ratio
                ),
            );
        } else if was && !now && st.probing.is_none() {
            self.journal.info(
                "disk-ok",
                format!(
                    "the disk of {}{shown}, below {}% again: writes accepted",
                    self.dir.display(),
                    self.warning_ratio
                ),
            );
        }
        self.publish(&st);
    }

    /// A write succeeded: if it was the first since space seemed back, journal the recovery.
    pub fn on_write_ok(&self) {
        if !self.probing.load(Ordering::Acquire) {
            return;
        }
        let mut st = self.state.lock();
        if let Some((path, needed)) = st.probing.take() {
            let avail = available_bytes(&self.dir).unwrap_or(0);
            self.journal.info(
                "disk-ok",
                format!(
                    "space is back on the disk of {} ({avail} bytes available, {needed} were \
                     needed for {}): writes accepted again",
                    self.dir.display(),
                    path.display()
                ),
            );
        }
        self.publish(&st);
    }

    /// `Ok` when writes may go ahead; otherwise the error to answer with. While refusing,
    /// each call measures again, so writes resume as soon as space is back.
    pub fn check(&self) -> Result<()> {
        if !self.is_full() {
            return Ok(());
        }
        self.refresh();
        let st = self.state.lock();
        if let Some((path, needed)) = &st.no_space {
            return Err(StoreError::NoSpace {
                path: path.clone(),
                needed: *needed,
            });
        }
        if let Some(used) = st.over_ratio {
            return Err(StoreError::DiskFull {
                dir: self.dir.clone(),
                used_percent: used,
                limit_percent: self.warning_ratio,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn used_share_leaves_reserved_blocks_out() {
        // A filesystem of 252 units with 32 used, 220 free of which 60 are available to users
        // (160 reserved): 35% used, as df says, not 76%.
        let p = used_percent(252, 220, 60).unwrap();
        assert!((p - 32.0 / 92.0 * 100.0).abs() < 1e-9, "{p}");
        assert_eq!(used_percent(100, 100, 100), Some(0.0));
        assert_eq!(used_percent(100, 0, 0), Some(100.0));
        assert_eq!(used_percent(0, 0, 0), None);
        let here = disk_used_percent(Path::new("/")).unwrap();
        assert!((0.0..=100.0).contains(&here));
        assert!(available_bytes(Path::new("/")).is_some());
    }

    #[test]
    fn guard_refuses_until_space_is_back_and_journals_both() {
        let d = tempfile::tempdir().unwrap();
        let journal = Arc::new(Journal::in_memory());
        let g = DiskGuard::new(d.path().to_path_buf(), 100, journal.clone());
        assert!(g.check().is_ok());
        // More than any disk has: refused, journaled once however often it happens.
        g.on_no_space(&d.path().join("f"), u64::MAX);
        g.on_no_space(&d.path().join("f"), u64::MAX);
        assert!(matches!(g.check(), Err(StoreError::NoSpace { .. })));
        assert!(g.is_full());
        // Then a reservation this disk can hold: the next check lets writes through again,
        // and the first that succeeds is journaled.
        g.on_no_space(&d.path().join("f"), 1);
        assert!(g.check().is_ok());
        assert!(!g.is_full());
        // A write that fails again is refused quietly (the disk only looked free).
        g.on_no_space(&d.path().join("f"), 1);
        assert!(g.check().is_ok());
        g.on_write_ok();
        g.on_write_ok();
        let kinds: Vec<String> = journal.all().into_iter().map(|e| e.kind).collect();
        assert_eq!(kinds, vec!["disk-full", "disk-ok"]);
    }

    #[test]
    fn reservation_allocates_blocks() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(1 << 20).unwrap();
        reserve_blocks(&p, 0, 1 << 20).unwrap();
        use std::os::unix::fs::MetadataExt;
        // Allocated (where the filesystem supports it; tmpfs and ext4 do).
        assert!(std::fs::metadata(&p).unwrap().blocks() * 512 >= 1 << 20);
        // (Injected refusals are tested in tests/disk_full.rs, a process of their own.)
    }
}
