//! rmq-store: a RocketMQ 4.x compatible message store.
//!
//! Layering (dependencies point down): [`mapped_file`] ← [`mapped_file_queue`] ←
//! {[`commitlog`], [`consume_queue`], [`index`]}; [`store`] composes them with the flush,
//! dispatch, recovery and retention services. Nothing here knows about Python.

pub mod config;
pub mod error;
pub mod mapped_file;
pub mod mapped_file_queue;
pub mod message;

pub use config::{FlushDiskType, StoreConfig};
pub use error::{Result, StoreError};
pub mod batch_rows;
pub mod checkpoint;
pub mod commitlog;
pub mod consume_queue;
pub mod disk;
pub mod dispatch;
pub mod filter_bitmap;
pub mod flush;
pub mod index;
pub mod journal;
pub mod read;
pub mod readahead;
pub mod rebuild;
pub mod retention;
pub mod service;
pub mod store;

pub use read::{GetMessageStatus, GetRequest, GetResult, SqlFilter, TagFilter};
pub use store::MessageStore;
