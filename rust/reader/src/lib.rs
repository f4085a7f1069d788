//! rmq-reader: a read-only, columnar view of a RocketMQ 4.x store directory.
//!
//! Analytics jobs (the PySpark data source in `rmq.spark`) read what a broker stored without
//! going through the broker. Everything here opens files read-only (`File::open` + a
//! read-only `mmap`), never takes the store's `lock`, never writes, and reads only up to a
//! *committed* position, so it is safe while a broker (rmq's or Apache RocketMQ 4.9's) is
//! appending to the same files.
//!
//! Layering (dependencies point down):
//!
//! ```text
//!   store        composition root: paths, committed end, planning entry points
//!   ├── plan     splits: CommitLog slices cut on record boundaries, ConsumeQueue ranges
//!   ├── decode   byte ranges / queue ranges of records -> Columns, with a RecordFilter
//!   │   ├── columns   the row schema; rows appended to Arrow-layout columns
//!   │   │   ├── buffers  values, offsets, validity bitmaps, maps (no per-value allocation)
//!   │   │   └── text  property ranges, host and message id text
//!   │   └── filter    what a row must satisfy (topics, queues, offset and time ranges)
//!   ├── commitlog     CommitLogView: segments, record steps, boundary search
//!   ├── queue         QueueView: read-only ConsumeQueue units
//!   └── segment       one file mapped read-only; directory listings
//! ```
//!
//! The record codec ([`rmq_store::message`]) and the on-disk constants are the store's own:
//! one definition of the format. Nothing here knows about Python.
//!
//! ## What "committed" means
//!
//! A record is readable when its magic code, TOTALSIZE (the fields add up), PHYSICALOFFSET
//! (equal to its position) and body CRC check out. Records are appended by one writer,
//! strictly in order, so a valid record followed by another valid record (or by the
//! end-of-file blank) is complete. The last valid record of the live head is trusted only
//! when the store is not running (no `abort` marker), or its ConsumeQueue unit exists (the
//! broker dispatches a record only after publishing it), or it is older than the checkpoint's
//! flushed timestamp. The first invalid or incomplete record ends the data.

pub mod buffers;
pub mod columns;
pub mod commitlog;
pub mod decode;
pub mod filter;
pub mod plan;
pub mod queue;
pub mod segment;
pub mod store;
pub mod text;

pub use columns::{Column, ColumnSet, Columns, Finished, Kind, COLUMNS};
pub use decode::{Batch, DecodeOptions};
pub use filter::RecordFilter;
pub use plan::{QueuePlan, QueueSplit, ScanSplit};
pub use store::StoreView;

use std::path::Path;

use rmq_store::StoreError;

/// Result alias: the reader reports the store's error type (one Python mapping point).
pub type Result<T> = std::result::Result<T, StoreError>;

pub(crate) fn io_err(path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub(crate) fn corrupt(what: &str, detail: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        what: what.to_string(),
        detail: detail.into(),
    }
}

#[cfg(test)]
pub(crate) mod testutil;
