//! Thin pyo3 binding of `rmq-store`, built by maturin as `rmq._store`.
//!
//! Every call follows one shape: convert the Python arguments to owned or borrowed Rust
//! values, release the GIL for the store work, convert the result back, and map a
//! `StoreError` to its exception class in [`to_py_err`].

mod batch_rows;
mod filter;
mod net;
mod reader;

use std::net::SocketAddr;
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use rmq_store::commitlog::AppendResult;
use rmq_store::message::{self, MessageRef};
use rmq_store::{GetRequest, SqlFilter, StoreConfig, StoreError, TagFilter};

/// Every Rust allocation of the extension (the network thread's and the gRPC front's buffers,
/// headers and maps, made and freed per request) goes to mimalloc; Python's objects keep Python's
/// allocator.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

create_exception!(
    _store,
    StoreErrorBase,
    PyException,
    "Base class of store errors."
);
create_exception!(
    _store,
    StoreIOError,
    StoreErrorBase,
    "An I/O error in the store."
);
create_exception!(
    _store,
    CorruptStoreError,
    StoreErrorBase,
    "A store file is damaged."
);
create_exception!(
    _store,
    MessageIllegalError,
    StoreErrorBase,
    "The message cannot be stored."
);
create_exception!(
    _store,
    DiskFullError,
    StoreErrorBase,
    "Writes are refused: disk full."
);
create_exception!(
    _store,
    FlushTimeoutError,
    StoreErrorBase,
    "A flush did not finish in time."
);
create_exception!(
    _store,
    StoreShutDownError,
    StoreErrorBase,
    "The store is shut down."
);
create_exception!(
    _store,
    StoreConfigError,
    StoreErrorBase,
    "Invalid store configuration."
);
create_exception!(
    _store,
    StoreNotFoundError,
    StoreErrorBase,
    "The item does not exist."
);
create_exception!(
    _store,
    StoreLockedError,
    StoreErrorBase,
    "Another process holds the store."
);

create_exception!(
    _store,
    SlaveStoreError,
    StoreErrorBase,
    "Puts are refused: the store is a slave's."
);
create_exception!(
    _store,
    StoreBusyError,
    StoreErrorBase,
    "The store did not catch up in time; nothing changed."
);
create_exception!(
    _store,
    ReplicaOffsetError,
    StoreErrorBase,
    "Replicated CommitLog bytes offered elsewhere than where the log ends."
);

/// The one mapping point from Rust errors to Python exceptions.
fn to_py_err(e: StoreError) -> PyErr {
    let msg = e.to_string();
    match e {
        StoreError::Io { .. } => StoreIOError::new_err(msg),
        StoreError::Corrupt { .. } => CorruptStoreError::new_err(msg),
        StoreError::MessageIllegal(_) => MessageIllegalError::new_err(msg),
        StoreError::DiskFull { .. } | StoreError::NoSpace { .. } => DiskFullError::new_err(msg),
        StoreError::FlushTimeout(_) => FlushTimeoutError::new_err(msg),
        StoreError::ShutDown => StoreShutDownError::new_err(msg),
        StoreError::Config(_) => StoreConfigError::new_err(msg),
        StoreError::NotFound(_) => StoreNotFoundError::new_err(msg),
        StoreError::Locked(_) => StoreLockedError::new_err(msg),
        StoreError::Slave => SlaveStoreError::new_err(msg),
        StoreError::ReplicaOffset { .. } => ReplicaOffsetError::new_err(msg),
        StoreError::Busy(_) => StoreBusyError::new_err(msg),
    }
}

fn parse_addr(s: &str) -> PyResult<SocketAddr> {
    s.parse()
        .map_err(|_| MessageIllegalError::new_err(format!("{s:?} is not an ip:port address")))
}

type PutTuple = (String, i64, i64, i32, i64);

fn put_tuple(store: &rmq_store::MessageStore, r: &AppendResult) -> PutTuple {
    (
        message::offset_msg_id_hex(&store.config().store_host, r.physical_offset),
        r.queue_offset,
        r.physical_offset,
        r.size,
        r.store_timestamp,
    )
}

/// The message store. Opening recovers the directory and starts the flush, dispatch and
/// housekeeping threads; `shutdown()` stops them cleanly.
#[pyclass(frozen, module = "rmq._store")]
struct MessageStore {
    inner: std::sync::Arc<rmq_store::MessageStore>,
}

/// One topic's expiry as Python sees it: (topic, reserved ms, queues, offsets hidden, files).
type TopicExpiryRow = (String, u64, usize, i64, usize);

#[pymethods]
impl MessageStore {
    /// Open the store with RocketMQ-named properties (`storePathRootDir`, `flushDiskType`,
    /// `mappedFileSizeCommitLog`, ...). Values are strings or numbers.
    #[new]
    #[pyo3(signature = (config = None))]
    fn new(py: Python<'_>, config: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut cfg = StoreConfig::default();
        if let Some(d) = config {
            for (k, v) in d.iter() {
                let key: String = k.extract()?;
                let val: String = v.str()?.extract()?;
                let val = if val == "True" || val == "False" {
                    val.to_lowercase()
                } else {
                    val
                };
                cfg.set(&key, &val).map_err(to_py_err)?;
            }
        }
        let inner = py
            .detach(|| rmq_store::MessageStore::open(cfg))
            .map_err(to_py_err)?;
        Ok(MessageStore {
            inner: std::sync::Arc::new(inner),
        })
    }

    /// The store property names `MessageStore(config)` accepts.
    #[staticmethod]
    fn config_keys() -> Vec<&'static str> {
        StoreConfig::KEYS.to_vec()
    }

    /// Append one message. Returns `(offset_msg_id, queue_offset, physical_offset, size,
    /// store_timestamp)`. Durability is separate: see `wait_flushed` / `flushed_offset`.
    #[pyo3(signature = (topic, queue_id, body, properties = b"".as_slice(), flag = 0, sys_flag = 0,
        born_timestamp = 0, born_host = "127.0.0.1:0", reconsume_times = 0,
        prepared_transaction_offset = 0))]
    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        py: Python<'_>,
        topic: &str,
        queue_id: i32,
        body: &[u8],
        properties: &[u8],
        flag: i32,
        sys_flag: i32,
        born_timestamp: i64,
        born_host: &str,
        reconsume_times: i32,
        prepared_transaction_offset: i64,
    ) -> PyResult<PutTuple> {
        let born_host = parse_addr(born_host)?;
        let msg = MessageRef {
            topic,
            queue_id,
            flag,
            sys_flag,
            born_timestamp,
            born_host,
            reconsume_times,
            prepared_transaction_offset,
            body,
            properties,
        };
        let store = &self.inner;
        let r = py.detach(|| store.put(&msg)).map_err(to_py_err)?;
        Ok(put_tuple(store, &r))
    }

    /// Append a batch body (RocketMQ's batch encoding: per message total, magic, crc,
    /// flag, body, properties) as consecutive records of one queue, appending
    /// `extra_properties` to each message's own. Returns one tuple per message, as `put`.
    #[pyo3(signature = (topic, queue_id, batch_body, extra_properties = b"".as_slice(),
        sys_flag = 0, born_timestamp = 0, born_host = "127.0.0.1:0", reconsume_times = 0))]
    #[allow(clippy::too_many_arguments)]
    fn put_batch(
        &self,
        py: Python<'_>,
        topic: &str,
        queue_id: i32,
        batch_body: &[u8],
        extra_properties: &[u8],
        sys_flag: i32,
        born_timestamp: i64,
        born_host: &str,
        reconsume_times: i32,
    ) -> PyResult<Vec<PutTuple>> {
        let born_host = parse_addr(born_host)?;
        let store = &self.inner;
        let results = py
            .detach(|| {
                let items = message::decode_batch_body(batch_body, extra_properties)?;
                let msgs: Vec<MessageRef<'_>> = items
                    .iter()
                    .map(|it| MessageRef {
                        topic,
                        queue_id,
                        flag: it.flag,
                        sys_flag,
                        born_timestamp,
                        born_host,
                        reconsume_times,
                        prepared_transaction_offset: 0,
                        body: it.body,
                        properties: &it.properties,
                    })
                    .collect();
                store.put_batch(&msgs)
            })
            .map_err(to_py_err)?;
        Ok(results.iter().map(|r| put_tuple(store, r)).collect())
    }

    /// Read up to `max_msgs` messages of a queue from `offset`. Returns `(status,
    /// next_begin_offset, min_offset, max_offset, records, count)`: `records` is the stored
    /// records back to back, exactly as a pull response body carries them.
    #[pyo3(signature = (topic, queue_id, offset, max_msgs = 32, tag_codes = None, max_bytes = 0,
        sql_filter = None, filter_key = None))]
    #[allow(clippy::too_many_arguments)]
    fn get_message<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msgs: u32,
        tag_codes: Option<Vec<i32>>,
        max_bytes: u64,
        sql_filter: Option<PyRef<'py, filter::PySql92Filter>>,
        filter_key: Option<&str>,
    ) -> (&'static str, i64, i64, i64, Bound<'py, PyBytes>, u32) {
        let filter = tag_codes.map(|codes| TagFilter { codes });
        let sql_owned = sql_filter.map(|f| f.inner().clone());
        let key = filter_key.unwrap_or("");
        let sql = sql_owned.as_deref().map(|f| SqlFilter { filter: f, key });
        let store = &self.inner;
        let r = py.detach(|| {
            store.get_message(&GetRequest {
                topic,
                queue_id,
                offset,
                max_msgs,
                max_bytes,
                filter: filter.as_ref(),
                sql,
            })
        });
        (
            r.status.name(),
            r.next_begin_offset,
            r.min_offset,
            r.max_offset,
            PyBytes::new(py, &r.buffer),
            r.message_count,
        )
    }

    /// Read up to `max_msgs` transaction op records of a queue from `offset`, for the transaction
    /// service: `(status, next_begin_offset, records read, [op queue offset, half offset, ...])`,
    /// one pair for each half queue offset a record's body decides.
    #[pyo3(signature = (topic, queue_id, offset, max_msgs = 256))]
    fn read_op_records(
        &self,
        py: Python<'_>,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msgs: u32,
    ) -> (&'static str, i64, usize, Vec<i64>) {
        let store = &self.inner;
        py.detach(|| {
            let r = store.get_message(&GetRequest {
                topic,
                queue_id,
                offset,
                max_msgs,
                max_bytes: 0,
                filter: None,
                sql: None,
            });
            let (n, pairs) = message::op_records(&r.buffer);
            let flat = pairs.into_iter().flat_map(|(q, h)| [q, h]).collect();
            (r.status.name(), r.next_begin_offset, n, flat)
        })
    }

    /// Register SQL92 subscription `key` (RocketMQ's `group#topic`) of `topic`: the dispatcher
    /// keeps bloom bits for it, so pulls with that key skip most non-matching messages.
    fn register_filter(&self, topic: &str, key: &str, filter: PyRef<'_, filter::PySql92Filter>) {
        self.inner
            .register_filter(topic, key, filter.inner().clone());
    }

    fn unregister_filter(&self, topic: &str, key: &str) {
        self.inner.unregister_filter(topic, key);
    }

    /// The record at a CommitLog offset, or None.
    fn lookup<'py>(&self, py: Python<'py>, offset: i64) -> Option<Bound<'py, PyBytes>> {
        let store = &self.inner;
        py.detach(|| store.lookup(offset))
            .map(|b| PyBytes::new(py, &b))
    }

    /// Messages of `topic` with KEYS containing `key` or UNIQ_KEY equal to it, stored in
    /// `[begin, end]` ms. Returns `(records, index_last_update_timestamp,
    /// index_last_update_phyoffset)`.
    fn query_by_key<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
    ) -> PyResult<(Bound<'py, PyList>, i64, i64)> {
        let store = &self.inner;
        let r = py.detach(|| store.query_by_key(topic, key, max_num, begin, end));
        let list = PyList::new(py, r.records.iter().map(|b| PyBytes::new(py, b)))?;
        Ok((
            list,
            r.index_last_update_timestamp,
            r.index_last_update_phyoffset,
        ))
    }

    fn min_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.inner.min_offset_in_queue(topic, queue_id)
    }
    fn max_offset(&self, topic: &str, queue_id: i32) -> i64 {
        self.inner.max_offset_in_queue(topic, queue_id)
    }
    fn offset_by_time(&self, py: Python<'_>, topic: &str, queue_id: i32, timestamp: i64) -> i64 {
        let store = &self.inner;
        py.detach(|| store.offset_by_time(topic, queue_id, timestamp))
    }
    fn earliest_message_time(&self, topic: &str, queue_id: i32) -> i64 {
        self.inner.earliest_message_time(topic, queue_id)
    }
    fn store_time_at(&self, topic: &str, queue_id: i32, offset: i64) -> Option<i64> {
        self.inner.store_time_at(topic, queue_id, offset)
    }
    fn earliest_store_time(&self) -> i64 {
        self.inner.earliest_store_time()
    }
    fn commitlog_min_offset(&self) -> i64 {
        self.inner.commitlog_min_offset()
    }
    /// Up to `max_len` raw CommitLog bytes from `offset`, not past the end of the file holding
    /// it (the master side of replication); None when nothing is there.
    fn read_commitlog<'py>(
        &self,
        py: Python<'py>,
        offset: i64,
        max_len: usize,
    ) -> Option<Bound<'py, PyBytes>> {
        let store = &self.inner;
        let data = py.detach(|| store.read_commitlog(offset, max_len))?;
        Some(PyBytes::new(py, &data))
    }

    /// Append replicated CommitLog bytes verbatim at `offset` (the slave side); returns the end
    /// of the log in its files (whole records only; a record's first part waits in memory).
    fn append_commitlog(&self, py: Python<'_>, offset: i64, data: &[u8]) -> PyResult<i64> {
        let store = &self.inner;
        py.detach(|| store.append_commitlog(offset, data))
            .map_err(to_py_err)
    }

    /// Make the store a slave's (puts refused with `SlaveStoreError`) or a master's again.
    fn set_slave(&self, slave: bool) {
        self.inner.set_slave(slave);
    }

    fn is_slave(&self) -> bool {
        self.inner.is_slave()
    }

    fn commitlog_max_offset(&self) -> i64 {
        self.inner.commitlog_max_offset()
    }
    /// Everything below this CommitLog offset is on disk.
    fn flushed_offset(&self) -> i64 {
        self.inner.flushed_offset()
    }
    /// Everything below this CommitLog offset is in the ConsumeQueues and the index.
    fn dispatched_offset(&self) -> i64 {
        self.inner.dispatched_offset()
    }
    /// Block (GIL released) until `offset` is durable; raises FlushTimeoutError.
    fn wait_flushed(&self, py: Python<'_>, offset: i64, timeout_ms: u64) -> PyResult<()> {
        let store = &self.inner;
        py.detach(|| store.wait_flushed(offset, Duration::from_millis(timeout_ms)))
            .map_err(to_py_err)
    }
    /// Block (GIL released) until `offset` is dispatched; returns whether it was in time.
    fn wait_dispatched(&self, py: Python<'_>, offset: i64, timeout_ms: u64) -> bool {
        let store = &self.inner;
        py.detach(|| store.wait_dispatched(offset, Duration::from_millis(timeout_ms)))
    }
    /// An eventfd that becomes readable when the flushed offset advances.
    fn flush_notify_fd(&self) -> i32 {
        self.inner.flush_notify_fd()
    }
    fn drain_flush_notifications(&self) -> u64 {
        self.inner.drain_flush_notifications()
    }
    /// An eventfd that becomes readable when new records have been dispatched.
    fn dispatch_notify_fd(&self) -> i32 {
        self.inner.dispatch_notify_fd()
    }
    fn drain_dispatch_notifications(&self) -> u64 {
        self.inner.drain_dispatch_notifications()
    }
    /// `(topic, queue_id)` of every ConsumeQueue.
    fn queues(&self) -> Vec<(String, i32)> {
        self.inner.queues()
    }
    fn delete_topic(&self, py: Python<'_>, topic: &str) -> PyResult<()> {
        let store = &self.inner;
        py.detach(|| store.delete_topic(topic)).map_err(to_py_err)
    }
    /// RocketMQ's `cleanUnusedTopic`: remove the ConsumeQueues of topics not in `keep`; returns
    /// the topics removed.
    fn clean_unused_topics(&self, py: Python<'_>, keep: Vec<String>) -> PyResult<Vec<String>> {
        let store = &self.inner;
        let keep: std::collections::HashSet<String> = keep.into_iter().collect();
        py.detach(|| store.clean_unused_topics(&keep))
            .map_err(to_py_err)
    }
    /// RocketMQ's `cleanExpiredConsumerQueue`: remove the ConsumeQueues whose messages all lie
    /// below the CommitLog's minimum offset; returns them.
    fn clean_expired_queues(&self, py: Python<'_>) -> PyResult<Vec<(String, i32)>> {
        let store = &self.inner;
        py.detach(|| store.clean_expired_queues())
            .map_err(to_py_err)
    }
    /// RocketMQ's `executeDeleteFilesManually`: the next 20 retention rounds delete expired
    /// CommitLog files at any hour.
    fn delete_files_manually(&self) {
        self.inner.delete_files_manually();
    }
    /// Run retention now; returns the number of CommitLog files deleted.
    #[pyo3(signature = (reserved_ms, force = false))]
    fn delete_expired_files(
        &self,
        py: Python<'_>,
        reserved_ms: u64,
        force: bool,
    ) -> PyResult<usize> {
        let store = &self.inner;
        py.detach(|| store.delete_expired_files(reserved_ms, force))
            .map_err(to_py_err)
    }
    /// Per-topic retention: `topic`'s messages are served for `reserved_ms` after they were
    /// stored (`None`: as long as the CommitLog keeps them).
    #[pyo3(signature = (topic, reserved_ms))]
    fn set_topic_retention(&self, topic: &str, reserved_ms: Option<u64>) {
        self.inner.set_topic_retention(topic, reserved_ms);
    }
    /// Replace every topic's retention time (topic → ms).
    fn replace_topic_retention(&self, table: std::collections::HashMap<String, u64>) {
        self.inner.replace_topic_retention(table);
    }
    /// The per-topic retention times, (topic, ms) sorted.
    fn topic_retention(&self) -> Vec<(String, u64)> {
        self.inner.topic_retention()
    }
    /// Apply per-topic retention now (each retention round does it first); returns
    /// (topic, reserved ms, queues, offsets no longer served, ConsumeQueue files deleted).
    fn expire_topics(&self, py: Python<'_>) -> PyResult<Vec<TopicExpiryRow>> {
        let store = &self.inner;
        let done = py.detach(|| store.expire_topics()).map_err(to_py_err)?;
        Ok(done
            .into_iter()
            .map(|e| (e.topic, e.reserved_ms, e.queues, e.offsets, e.files))
            .collect())
    }
    fn is_disk_full(&self) -> bool {
        self.inner.is_disk_full()
    }
    /// How long the append in progress has held the CommitLog's put lock, in ms (0: none):
    /// RocketMQ's `pageCacheLockTimeMills`.
    fn put_lock_held_ms(&self) -> i64 {
        self.inner.put_lock_held_ms()
    }
    /// Figures from opening: how the last run ended and what recovery scanned.
    fn recovery_report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = self.inner.recovery_report();
        let d = PyDict::new(py);
        d.set_item(
            "last_shutdown",
            match r.last_shutdown {
                rmq_store::store::LastShutdown::Clean => "clean",
                rmq_store::store::LastShutdown::Crashed => "crashed",
            },
        )?;
        d.set_item("scanned_bytes", r.scanned_bytes)?;
        d.set_item("scanned_records", r.scanned_records)?;
        d.set_item("commitlog_end", r.commitlog_end)?;
        d.set_item("scan_seconds", r.scan_seconds)?;
        Ok(d)
    }
    /// Every event of the repair journal: `(time_ms, level, kind, message)`, oldest first.
    fn journal(&self) -> Vec<(i64, &'static str, String, String)> {
        to_tuples(self.inner.journal().all())
    }
    /// Journal events recorded since the last call, for the broker's log.
    fn take_new_journal_events(&self) -> Vec<(i64, &'static str, String, String)> {
        to_tuples(self.inner.journal().take_new())
    }
    /// Running counters.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        use std::sync::atomic::Ordering::Relaxed;
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("put_messages", s.put_messages.load(Relaxed))?;
        d.set_item("put_bytes", s.put_bytes.load(Relaxed))?;
        d.set_item("get_messages", s.get_messages.load(Relaxed))?;
        Ok(d)
    }
    /// The `ip:port` written as the store host of every record.
    #[getter]
    fn store_host(&self) -> String {
        self.inner.config().store_host.to_string()
    }
    #[getter]
    fn root(&self) -> String {
        self.inner.root().display().to_string()
    }
    /// Flush everything, write the checkpoint, remove the abort marker, stop the threads.
    fn shutdown(&self, py: Python<'_>) -> PyResult<()> {
        let store = &self.inner;
        py.detach(|| store.shutdown()).map_err(to_py_err)
    }
    fn is_shut_down(&self) -> bool {
        self.inner.is_shut_down()
    }
}

/// Decode stored records laid back to back (a pull body) into tuples:
/// `(topic, queue_id, queue_offset, physical_offset, sys_flag, flag, born_timestamp,
/// born_host, store_timestamp, store_host, reconsume_times, prepared_transaction_offset,
/// body, properties, store_size, body_crc)`. Raises CorruptStoreError on a damaged record.
#[pyfunction]
#[pyo3(signature = (buffer, check_crc = false))]
fn decode_records<'py>(
    py: Python<'py>,
    buffer: &[u8],
    check_crc: bool,
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    let mut pos = 0usize;
    while pos < buffer.len() {
        let rec = message::decode(&buffer[pos..], check_crc).map_err(to_py_err)?;
        let fields: [Bound<'py, PyAny>; 16] = [
            rec.topic.into_pyobject(py)?.into_any(),
            rec.queue_id.into_pyobject(py)?.into_any(),
            rec.queue_offset.into_pyobject(py)?.into_any(),
            rec.physical_offset.into_pyobject(py)?.into_any(),
            rec.sys_flag.into_pyobject(py)?.into_any(),
            rec.flag.into_pyobject(py)?.into_any(),
            rec.born_timestamp.into_pyobject(py)?.into_any(),
            rec.born_host.to_string().into_pyobject(py)?.into_any(),
            rec.store_timestamp.into_pyobject(py)?.into_any(),
            rec.store_host.to_string().into_pyobject(py)?.into_any(),
            rec.reconsume_times.into_pyobject(py)?.into_any(),
            rec.prepared_transaction_offset
                .into_pyobject(py)?
                .into_any(),
            PyBytes::new(py, rec.body).into_any(),
            rec.properties.into_pyobject(py)?.into_any(),
            rec.total_size.into_pyobject(py)?.into_any(),
            rec.body_crc.into_pyobject(py)?.into_any(),
        ];
        list.append(PyTuple::new(py, fields)?)?;
        pos += rec.total_size as usize;
    }
    Ok(list)
}

/// Check store properties (RocketMQ names) without opening anything; raises StoreConfigError.
#[pyfunction]
fn check_store_config(config: &Bound<'_, PyDict>) -> PyResult<()> {
    let mut cfg = StoreConfig::default();
    for (k, v) in config.iter() {
        let key: String = k.extract()?;
        let val: String = v.str()?.extract()?;
        cfg.set(&key, &val).map_err(to_py_err)?;
    }
    cfg.validate().map_err(to_py_err)
}

/// Java's `String.hashCode` (the ConsumeQueue tag code of a tag).
#[pyfunction]
fn java_string_hash(s: &str) -> i32 {
    message::java_string_hash(s)
}

/// The offset message id (uppercase hex) of a record at `offset` on `store_host`.
#[pyfunction]
fn offset_msg_id(store_host: &str, offset: i64) -> PyResult<String> {
    Ok(message::offset_msg_id_hex(&parse_addr(store_host)?, offset))
}

/// Split an offset message id into `("ip:port", commitlog offset)`.
#[pyfunction]
fn decode_offset_msg_id(msg_id: &str) -> PyResult<(String, i64)> {
    let (a, off) = message::decode_offset_msg_id(msg_id).map_err(to_py_err)?;
    Ok((a.to_string(), off))
}

/// Encode `(flag, body, properties)` triples as a batch body.
#[pyfunction]
fn encode_batch_body<'py>(
    py: Python<'py>,
    items: Vec<(i32, Vec<u8>, Vec<u8>)>,
) -> Bound<'py, PyBytes> {
    let refs: Vec<(i32, &[u8], &[u8])> = items
        .iter()
        .map(|(f, b, p)| (*f, b.as_slice(), p.as_slice()))
        .collect();
    PyBytes::new(py, &message::encode_batch_body(&refs))
}

fn to_tuples(
    events: Vec<rmq_store::journal::StoreEvent>,
) -> Vec<(i64, &'static str, String, String)> {
    events
        .into_iter()
        .map(|e| (e.time_ms, e.level.as_str(), e.kind, e.message))
        .collect()
}

#[pymodule]
fn _store(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<MessageStore>()?;
    batch_rows::register(m)?;
    filter::register(m)?;
    reader::register(m)?;
    net::register(m)?;
    m.add_function(wrap_pyfunction!(decode_records, m)?)?;
    m.add_function(wrap_pyfunction!(java_string_hash, m)?)?;
    m.add_function(wrap_pyfunction!(check_store_config, m)?)?;
    m.add_function(wrap_pyfunction!(offset_msg_id, m)?)?;
    m.add_function(wrap_pyfunction!(decode_offset_msg_id, m)?)?;
    m.add_function(wrap_pyfunction!(encode_batch_body, m)?)?;
    m.add("StoreError", py.get_type::<StoreErrorBase>())?;
    m.add("StoreIOError", py.get_type::<StoreIOError>())?;
    m.add("CorruptStoreError", py.get_type::<CorruptStoreError>())?;
    m.add("MessageIllegalError", py.get_type::<MessageIllegalError>())?;
    m.add("DiskFullError", py.get_type::<DiskFullError>())?;
    m.add("FlushTimeoutError", py.get_type::<FlushTimeoutError>())?;
    m.add("StoreShutDownError", py.get_type::<StoreShutDownError>())?;
    m.add("StoreConfigError", py.get_type::<StoreConfigError>())?;
    m.add("StoreNotFoundError", py.get_type::<StoreNotFoundError>())?;
    m.add("StoreLockedError", py.get_type::<StoreLockedError>())?;
    m.add("SlaveStoreError", py.get_type::<SlaveStoreError>())?;
    m.add("ReplicaOffsetError", py.get_type::<ReplicaOffsetError>())?;
    m.add("StoreBusyError", py.get_type::<StoreBusyError>())?;
    Ok(())
}
