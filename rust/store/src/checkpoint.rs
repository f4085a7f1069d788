//! StoreCheckpoint: the store timestamps recovery starts from.
//!
//! File `<storePathRootDir>/checkpoint`, exactly [`CHECKPOINT_FILE_SIZE`] bytes, big-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0  | 8 | physicMsgTimestamp: store time of the last flushed CommitLog record |
//! | 8  | 8 | logicsMsgTimestamp: store time of the last flushed ConsumeQueue entry |
//! | 16 | 8 | indexMsgTimestamp: end timestamp of the last flushed IndexFile |
//! | 24 | 4072 | zero |
//!
//! The values live in atomics; [`StoreCheckpoint::flush`] rewrites the whole page with
//! `pwrite` and `fdatasync` (RocketMQ maps the page; the bytes on disk are the same). A file
//! of any other length (a crash while creating it, a foreign file) reads as all zeros and is
//! rewritten at the right size by the next flush.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};

use parking_lot::Mutex;

use crate::error::{IoContext, Result};

/// Size of the checkpoint file (one OS page).
pub const CHECKPOINT_FILE_SIZE: usize = 4096;
/// Byte position of physicMsgTimestamp.
pub const POS_PHYSIC_MSG_TIMESTAMP: usize = 0;
/// Byte position of logicsMsgTimestamp.
pub const POS_LOGICS_MSG_TIMESTAMP: usize = 8;
/// Byte position of indexMsgTimestamp.
pub const POS_INDEX_MSG_TIMESTAMP: usize = 16;
/// Safety margin subtracted from the checkpoint before abnormal recovery picks a start file.
pub const RECOVERY_MARGIN_MS: i64 = 3000;

/// The checkpoint file and its three timestamps (ms since the epoch).
#[derive(Debug)]
pub struct StoreCheckpoint {
    path: PathBuf,
    file: File,
    physic: AtomicI64,
    logics: AtomicI64,
    index: AtomicI64,
    flush_lock: Mutex<()>,
}

fn read_i64(buf: &[u8], pos: usize) -> i64 {
    buf.get(pos..pos + 8)
        .and_then(|b| b.try_into().ok())
        .map(i64::from_be_bytes)
        .unwrap_or(0)
}

impl StoreCheckpoint {
    /// Open the checkpoint at `path`, creating it (and its directory) when missing.
    pub fn open(path: &Path) -> Result<StoreCheckpoint> {
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() {
                std::fs::create_dir_all(parent).at(parent)?;
            }
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .at(path)?;
        let len = file.metadata().at(path)?.len();
        let mut page = [0u8; POS_INDEX_MSG_TIMESTAMP + 8];
        if len == CHECKPOINT_FILE_SIZE as u64 {
            file.read_exact_at(&mut page, 0).at(path)?;
        } else if len == 0 {
            // Fresh file: give it its size now, so a crash before the first flush leaves a
            // well-formed (all zero) checkpoint.
            file.set_len(CHECKPOINT_FILE_SIZE as u64).at(path)?;
        }
        // Any other length: read as zeros; the next flush rewrites the page.
        Ok(StoreCheckpoint {
            path: path.to_path_buf(),
            file,
            physic: AtomicI64::new(read_i64(&page, POS_PHYSIC_MSG_TIMESTAMP)),
            logics: AtomicI64::new(read_i64(&page, POS_LOGICS_MSG_TIMESTAMP)),
            index: AtomicI64::new(read_i64(&page, POS_INDEX_MSG_TIMESTAMP)),
            flush_lock: Mutex::new(()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn physic_msg_timestamp(&self) -> i64 {
        self.physic.load(Ordering::Acquire)
    }
    pub fn set_physic_msg_timestamp(&self, ts: i64) {
        self.physic.store(ts, Ordering::Release);
    }
    pub fn logics_msg_timestamp(&self) -> i64 {
        self.logics.load(Ordering::Acquire)
    }
    pub fn set_logics_msg_timestamp(&self, ts: i64) {
        self.logics.store(ts, Ordering::Release);
    }
    pub fn index_msg_timestamp(&self) -> i64 {
        self.index.load(Ordering::Acquire)
    }
    pub fn set_index_msg_timestamp(&self, ts: i64) {
        self.index.store(ts, Ordering::Release);
    }

    /// `min(physic, logics) − 3000`, at least 0: abnormal recovery starts at the first
    /// CommitLog file whose first record is not newer than this.
    pub fn min_timestamp(&self) -> i64 {
        self.physic_msg_timestamp()
            .min(self.logics_msg_timestamp())
            .saturating_sub(RECOVERY_MARGIN_MS)
            .max(0)
    }

    /// [`StoreCheckpoint::min_timestamp`] also bounded by the index timestamp
    /// (`messageIndexSafe`).
    pub fn min_timestamp_index(&self) -> i64 {
        self.min_timestamp().min(self.index_msg_timestamp())
    }

    /// The page as it is written to disk.
    pub fn encode(&self) -> [u8; CHECKPOINT_FILE_SIZE] {
        let mut page = [0u8; CHECKPOINT_FILE_SIZE];
        for (pos, v) in [
            (POS_PHYSIC_MSG_TIMESTAMP, self.physic_msg_timestamp()),
            (POS_LOGICS_MSG_TIMESTAMP, self.logics_msg_timestamp()),
            (POS_INDEX_MSG_TIMESTAMP, self.index_msg_timestamp()),
        ] {
            page[pos..pos + 8].copy_from_slice(&v.to_be_bytes());
        }
        page
    }

    /// Write the three timestamps and sync them to disk.
    pub fn flush(&self) -> Result<()> {
        let _guard = self.flush_lock.lock();
        let page = self.encode();
        self.file.write_all_at(&page, 0).at(&self.path)?;
        let len = self.file.metadata().at(&self.path)?.len();
        if len != CHECKPOINT_FILE_SIZE as u64 {
            self.file
                .set_len(CHECKPOINT_FILE_SIZE as u64)
                .at(&self.path)?;
        }
        self.file.sync_data().at(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_layout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("checkpoint");
        let cp = StoreCheckpoint::open(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 4096);
        assert_eq!(cp.physic_msg_timestamp(), 0);
        assert_eq!(cp.min_timestamp(), 0);
        cp.set_physic_msg_timestamp(1_700_000_010_000);
        cp.set_logics_msg_timestamp(1_700_000_005_000);
        cp.set_index_msg_timestamp(1_700_000_001_000);
        cp.flush().unwrap();
        drop(cp);

        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), CHECKPOINT_FILE_SIZE);
        assert_eq!(
            i64::from_be_bytes(bytes[0..8].try_into().unwrap()),
            1_700_000_010_000
        );
        assert_eq!(
            i64::from_be_bytes(bytes[8..16].try_into().unwrap()),
            1_700_000_005_000
        );
        assert_eq!(
            i64::from_be_bytes(bytes[16..24].try_into().unwrap()),
            1_700_000_001_000
        );
        assert!(bytes[24..].iter().all(|&b| b == 0));

        let cp = StoreCheckpoint::open(&path).unwrap();
        assert_eq!(cp.physic_msg_timestamp(), 1_700_000_010_000);
        assert_eq!(cp.logics_msg_timestamp(), 1_700_000_005_000);
        assert_eq!(cp.index_msg_timestamp(), 1_700_000_001_000);
        assert_eq!(cp.min_timestamp(), 1_700_000_002_000);
        assert_eq!(cp.min_timestamp_index(), 1_700_000_001_000);
        cp.set_index_msg_timestamp(1_800_000_000_000);
        assert_eq!(cp.min_timestamp_index(), 1_700_000_002_000);
    }

    #[test]
    fn min_timestamp_is_clamped() {
        let dir = tempfile::tempdir().unwrap();
        let cp = StoreCheckpoint::open(&dir.path().join("checkpoint")).unwrap();
        cp.set_physic_msg_timestamp(1000);
        cp.set_logics_msg_timestamp(5000);
        assert_eq!(cp.min_timestamp(), 0);
        cp.set_physic_msg_timestamp(i64::MIN);
        assert_eq!(cp.min_timestamp(), 0);
    }

    #[test]
    fn wrong_size_reads_as_zeros_and_is_repaired() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint");
        std::fs::write(&path, [0xffu8; 100]).unwrap();
        let cp = StoreCheckpoint::open(&path).unwrap();
        assert_eq!(cp.physic_msg_timestamp(), 0);
        assert_eq!(cp.logics_msg_timestamp(), 0);
        assert_eq!(cp.index_msg_timestamp(), 0);
        cp.set_logics_msg_timestamp(42);
        cp.flush().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), CHECKPOINT_FILE_SIZE);
        assert_eq!(i64::from_be_bytes(bytes[8..16].try_into().unwrap()), 42);
        assert!(bytes[24..].iter().all(|&b| b == 0));

        // Too long: also zeros, then truncated to one page on flush.
        std::fs::write(&path, vec![1u8; 8192]).unwrap();
        let cp = StoreCheckpoint::open(&path).unwrap();
        assert_eq!(cp.physic_msg_timestamp(), 0);
        cp.flush().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 4096);
    }
}
