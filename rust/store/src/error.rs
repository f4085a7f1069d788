//! The store's one error type. Every fallible store call returns [`StoreError`];
//! the Python binding maps each variant to one exception class.

use std::io;
use std::path::PathBuf;

/// Errors raised by the store. Nothing in the store panics on bad input or a damaged file:
/// such conditions come back as one of these.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An operating-system I/O failure, with the path it concerned.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A file's content does not have the expected layout.
    #[error("corrupt {what}: {detail}")]
    Corrupt { what: String, detail: String },
    /// A message that cannot be stored (too large, bad topic, ...).
    #[error("illegal message: {0}")]
    MessageIllegal(String),
    /// Disk usage is above the configured ratio; writes are refused until space is freed.
    #[error("disk full: the disk of {} is {used_percent:.1}% used, writes refused above {limit_percent}% (diskSpaceWarningLevelRatio)", dir.display())]
    DiskFull {
        dir: PathBuf,
        used_percent: f64,
        limit_percent: u32,
    },
    /// The filesystem could not reserve space for a file the store writes; writes are refused
    /// until the space is available.
    #[error("disk full: no space left on device for {path} ({needed} bytes could not be reserved); writes are refused until space is freed")]
    NoSpace { path: PathBuf, needed: u64 },
    /// A synchronous flush did not complete within the configured timeout.
    #[error("flush to disk timed out after {0} ms")]
    FlushTimeout(u64),
    /// The store has been shut down.
    #[error("the message store is shut down")]
    ShutDown,
    /// A configuration value is invalid.
    #[error("invalid store configuration: {0}")]
    Config(String),
    /// The requested item does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// Another process holds the store's lock file.
    #[error("store directory {0} is locked by another process")]
    Locked(PathBuf),
    /// An operation that waits for the store to catch up (dispatch) gave up; nothing changed.
    #[error("store busy: {0}")]
    Busy(String),
    /// The store is a slave's (brokerRole=SLAVE): messages are put to its master and reach it
    /// by replication only.
    #[error("messages are put to the master: this store is a slave's (brokerRole=SLAVE)")]
    Slave,
    /// Replicated CommitLog bytes were offered at an offset other than where the log ends (a
    /// slave appends only contiguously; a fresh one may start at a file boundary).
    #[error(
        "replicated CommitLog data at offset {offset} refused: the log ends at {log_end}{hint}"
    )]
    ReplicaOffset {
        offset: i64,
        log_end: i64,
        hint: &'static str,
    },
}

/// Result alias for store calls.
pub type Result<T> = std::result::Result<T, StoreError>;

impl StoreError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        StoreError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corrupt(what: impl Into<String>, detail: impl Into<String>) -> Self {
        StoreError::Corrupt {
            what: what.into(),
            detail: detail.into(),
        }
    }
}

/// Attach a path to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn at(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|e| StoreError::io(path, e))
    }
}
