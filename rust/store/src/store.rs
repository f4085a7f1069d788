//! The composition root: opens the directory, recovers, starts the services and offers the
//! store's operations. Rules live in the parts; this file only wires and sequences them.
//!
//! Directory: `commitlog/`, `consumequeue/<topic>/<queueId>/`, `index/`, `checkpoint`,
//! `abort` (present while running), `lock` (flock held while open). The first five may be moved
//! elsewhere (`storePathCommitLog`, `storePathConsumeQueue`, `storePathIndex`, `storeCheckpoint`,
//! `abortFile`), as in RocketMQ.

use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::checkpoint::StoreCheckpoint;
use crate::commitlog::{AppendResult, CommitLog};
use crate::config::{parse_delay_levels, StoreConfig};
use crate::disk::DiskGuard;
use crate::dispatch::{self, DispatchProgress, Dispatchers, QueueTable};
use crate::error::{IoContext, Result, StoreError};
use crate::filter_bitmap::FilterBitmaps;
use crate::flush::{FlushService, FlushSettings, FlushWatermark};
use crate::index::IndexService;
use crate::journal::Journal;
use crate::message::{self, property, MessageRef};
use crate::read::{GetMessageStatus, GetRequest, GetResult, SqlFilter};
use crate::retention;
use crate::service::{Service, Signal};

/// How long a topic deletion waits for the messages appended before it to be dispatched.
const DELETE_TOPIC_WAIT: Duration = Duration::from_secs(10);
/// The most a topic deletion holds appends off for while the dispatch catches up.
const DELETE_TOPIC_HOLD: Duration = Duration::from_secs(1);
/// The dispatch backlog (bytes) below which a topic deletion holds appends off.
const DELETE_TOPIC_SMALL_BACKLOG: i64 = 1 << 20;

/// How the last run ended, as found at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastShutdown {
    Clean,
    Crashed,
}

/// Figures from the last open.
#[derive(Debug, Clone, Copy)]
pub struct RecoveryReport {
    pub last_shutdown: LastShutdown,
    pub scanned_bytes: u64,
    pub scanned_records: u64,
    pub commitlog_end: i64,
    pub scan_seconds: f64,
}

/// Messages found by key.
#[derive(Debug, Clone, Default)]
pub struct QueryResult {
    pub records: Vec<Vec<u8>>,
    pub index_last_update_timestamp: i64,
    pub index_last_update_phyoffset: i64,
}

/// Running counters.
#[derive(Debug, Default)]
pub struct StoreStats {
    pub put_messages: AtomicU64,
    pub put_bytes: AtomicU64,
    pub get_messages: AtomicU64,
}

/// The message store.
pub struct MessageStore {
    config: StoreConfig,
    root: PathBuf,
    commitlog: Arc<CommitLog>,
    queues: Arc<QueueTable>,
    filters: Arc<FilterBitmaps>,
    index: Option<Arc<IndexService>>,
    checkpoint: Arc<StoreCheckpoint>,
    flush: Mutex<Option<FlushService>>,
    watermark: Arc<FlushWatermark>,
    progress: Arc<DispatchProgress>,
    reput: Mutex<Option<Service>>,
    /// Retention rounds left that delete expired files at any hour (a manual request).
    manual_deletes: Arc<std::sync::atomic::AtomicU32>,
    /// Per-topic retention times (the topic attribute `retention.hours`).
    retention: Arc<retention::TopicRetention>,
    /// Faults in CommitLog pages ahead of the appender.
    populate: Mutex<Option<Service>>,
    background: Mutex<Option<Service>>,
    disk: Arc<DiskGuard>,
    shut_down: AtomicBool,
    /// A slave's store takes replicated CommitLog bytes only ([`MessageStore::set_slave`]).
    slave: AtomicBool,
    report: RecoveryReport,
    /// Every recovery step, repair and refusal, for the broker's log and runtime info.
    journal: Arc<Journal>,
    /// Failed attempts to write the appends kept back ([`MessageStore::write_deferred`])
    /// since the last that succeeded.
    deferred_write_failures: AtomicU64,
    stats: StoreStats,
    /// The flock on `<root>/lock`, released at shutdown.
    lock: Mutex<Option<File>>,
}

fn lock_dir(root: &Path) -> Result<File> {
    std::fs::create_dir_all(root).at(root)?;
    let path = root.join("lock");
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .at(&path)?;
    // SAFETY: flock on a descriptor we own.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(StoreError::Locked(root.to_path_buf()));
    }
    Ok(f)
}

/// Journal what CommitLog recovery found: how the last run ended, what was scanned, each
/// damaged range skipped, a torn tail cut off and files found short.
fn report_commitlog_recovery(
    journal: &Journal,
    commitlog: &CommitLog,
    scan: &crate::commitlog::ScanResult,
    end: i64,
    torn: usize,
    crashed: bool,
) {
    journal.info(
        "recovery",
        format!(
            "{} shutdown; scanned {} records ({} bytes) of the CommitLog, which ends at offset {end}",
            if crashed { "unclean" } else { "clean" },
            scan.records,
            scan.bytes
        ),
    );
    for (path, len) in commitlog.queue().extended_files() {
        journal.warn(
            "short-file",
            format!(
                "CommitLog file {} was {len} bytes, shorter than the segment size {}: \
                 extended, its last {} bytes treated as unwritten",
                path.display(),
                commitlog.queue().file_size(),
                commitlog.queue().file_size() - len
            ),
        );
    }
    for &(from, to) in &scan.damaged {
        journal.warn(
            "commitlog-damage",
            format!(
                "CommitLog bytes [{from}, {to}) ({} bytes) hold no valid record: skipped, the \
                 intact records after them are kept",
                to - from
            ),
        );
    }
    if torn > 0 {
        journal.warn(
            "torn-tail",
            format!(
                "CommitLog ends at offset {end}: up to {torn} bytes of an incomplete record \
                 after it were discarded"
            ),
        );
    }
}

impl MessageStore {
    /// Open (creating if needed) and recover the store, then start its services. Returns
    /// once every record in the CommitLog is in the ConsumeQueues and the index.
    pub fn open(config: StoreConfig) -> Result<MessageStore> {
        config.validate()?;
        let root = config.store_path_root_dir.clone();
        let lock = lock_dir(&root)?;
        let delay_levels = parse_delay_levels(&config.message_delay_level)?;
        let abort_path = config.abort_path();
        let crashed = abort_path.exists();
        let journal = Arc::new(Journal::open(&root.join("repairs"), crashed));
        let disk = DiskGuard::new(
            config.commit_log_dir(),
            config.disk_space_warning_level_ratio,
            journal.clone(),
        );
        disk.refresh();

        let checkpoint = Arc::new(StoreCheckpoint::open(&config.checkpoint_path())?);
        let commitlog = Arc::new(CommitLog::new(
            config.commit_log_dir(),
            config.mapped_file_size_commit_log,
            config.store_host,
            config.max_message_size,
            config.warm_mapped_file_enable,
        ));
        // The manifest of the last run says which queues exist and vouches for the segment
        // size, so a short single CommitLog file is a truncated one, not a misconfiguration.
        let manifest = crate::rebuild::Manifest::read(&root);
        commitlog.queue().set_allow_short_last(
            manifest.commitlog_file_size == Some(config.mapped_file_size_commit_log),
        );
        commitlog.load()?;
        // Appends with write(2) (see CommitLog::set_write_appends), with SYNC_FLUSH over
        // blocks written ahead (CommitLog::set_zeros_ahead).
        commitlog.set_write_appends(true);
        commitlog
            .set_zeros_ahead(config.flush_disk_type == crate::config::FlushDiskType::SyncFlush);
        let queues = Arc::new(QueueTable::new(
            config.consume_queue_dir(),
            config.mapped_file_size_consume_queue,
        ));
        queues.load()?;
        let index = if config.message_index_enable {
            let idx = Arc::new(IndexService::new(
                &config.index_dir(),
                config.max_hash_slot_num,
                config.max_index_num,
            ));
            idx.load(!crashed, checkpoint.index_msg_timestamp())?;
            Some(idx)
        } else {
            None
        };
        for cq in queues.all() {
            cq.recover()?;
            for (path, len) in cq.extended_files() {
                journal.warn(
                    "short-file",
                    format!(
                        "ConsumeQueue file {} was {len} bytes, shorter than {}: extended, its \
                         missing units are dispatched again",
                        path.display(),
                        cq.file_size()
                    ),
                );
            }
        }

        // CommitLog recovery: find where the valid log ends.
        let started = std::time::Instant::now();
        let files = commitlog.queue().files();
        let start_file = if crashed {
            // Walk back to a file whose first record is older than what the checkpoint
            // says was flushed everywhere; everything after it is re-validated and
            // re-dispatched.
            let mut limit = checkpoint.min_timestamp();
            if config.message_index_safe {
                limit = limit.min(checkpoint.min_timestamp_index());
            }
            let mut chosen = 0usize;
            for i in (0..files.len()).rev() {
                if let Some(ts) = commitlog.first_record_timestamp(i) {
                    if ts <= limit {
                        chosen = i;
                        break;
                    }
                }
            }
            chosen
        } else {
            files.len().saturating_sub(3)
        };
        let scan = commitlog.scan_from(start_file, config.check_crc_on_recover, |_, _| {});
        let end = if files.is_empty() { 0 } else { scan.end_offset };
        let torn = commitlog.stale_bytes_after(end);
        commitlog.truncate_to(end)?;
        let scan_seconds = started.elapsed().as_secs_f64();
        report_commitlog_recovery(&journal, &commitlog, &scan, end, torn, crashed);
        commitlog.set_damaged(scan.damaged.clone());

        // ConsumeQueues must not point at or past the end, nor into or past damage: what
        // follows the first damaged range is dispatched again (skipping the damage).
        let first_damage = scan.damaged.first().map(|d| d.0);
        let cq_end = first_damage.map_or(end, |d| d.min(end));
        let mut dropped = (0usize, 0i64);
        for cq in queues.all() {
            let before = cq.max_offset();
            cq.truncate_dirty(cq_end)?;
            if cq.max_offset() < before {
                dropped.0 += 1;
                dropped.1 += before - cq.max_offset();
            }
        }
        if dropped.0 > 0 {
            journal.warn(
                "consumequeue-truncate",
                format!(
                    "{} units of {} ConsumeQueues pointed at or past CommitLog offset {cq_end}: \
                     dropped (what the log still holds there is dispatched again)",
                    dropped.1, dropped.0
                ),
            );
        }
        let cl_min = commitlog.min_offset();
        for cq in queues.all() {
            cq.correct_min_offset(cl_min);
        }

        // Resume dispatching where the ConsumeQueues end (or earlier after a crash, damage,
        // or a missing, short or inconsistent ConsumeQueue or index).
        let mut reput_from = queues
            .all()
            .iter()
            .map(|q| q.max_physic_offset())
            .max()
            .unwrap_or(cl_min);
        if crashed {
            let first_of_scan = files
                .get(start_file)
                .map(|f| f.from_offset() as i64)
                .unwrap_or(cl_min);
            reput_from = reput_from.min(first_of_scan);
        }
        if let Some(d) = first_damage {
            reput_from = reput_from.min(d);
        }
        let rebuild = crate::rebuild::plan(&manifest, &commitlog, &queues, index.as_deref(), end);
        rebuild.report(&journal);
        if let Some(from) = rebuild.from {
            reput_from = reput_from.min(from);
        }
        reput_from = reput_from.clamp(cl_min, end.max(cl_min));
        commitlog.set_queue_offsets(
            queues
                .all()
                .iter()
                .map(|q| (q.topic().to_string(), q.queue_id(), q.max_offset())),
        );

        let progress =
            DispatchProgress::new(reput_from).map_err(|e| StoreError::io("eventfd", e))?;
        let filters = Arc::new(FilterBitmaps::default());
        let dispatchers = Arc::new(Dispatchers {
            queues: queues.clone(),
            filters: filters.clone(),
            index: index.clone(),
            delay_levels,
            disk: disk.clone(),
            multi_dispatch: config.enable_lmq && config.enable_multi_dispatch,
        });
        // Rebuild what is missing before serving.
        dispatch::dispatch_range(&commitlog, &dispatchers, &progress, reput_from);
        // The queue offsets may have grown from re-dispatch.
        commitlog.set_queue_offsets(
            queues
                .all()
                .iter()
                .map(|q| (q.topic().to_string(), q.queue_id(), q.max_offset())),
        );

        let manifest = crate::rebuild::write_manifest(&root, &commitlog, &queues, index.as_deref());
        if let Err(e) = manifest {
            journal.warn(
                "manifest",
                format!("could not write {}: {e}", crate::rebuild::MANIFEST),
            );
        }
        let abort_dir_ok = match abort_path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => std::fs::create_dir_all(dir),
            _ => Ok(()),
        };
        if let Err(e) = abort_dir_ok.and_then(|()| std::fs::write(&abort_path, b"")) {
            // Serving reads beats refusing to start; a crash in this run then looks clean,
            // which the queue manifest and the tail scan still cover.
            journal.warn(
                "abort-marker",
                format!("could not create {}: {e}", abort_path.display()),
            );
        }

        let cp = checkpoint.clone();
        let flush = FlushService::start(
            commitlog.clone(),
            FlushSettings {
                mode: config.flush_disk_type,
                interval: Duration::from_millis(config.flush_interval_commit_log),
                least_pages: config.flush_commit_log_least_pages,
                thorough_interval: Duration::from_millis(config.flush_commit_log_thorough_interval),
            },
            Box::new(move |ts| {
                if ts > 0 {
                    cp.set_physic_msg_timestamp(ts);
                }
            }),
        )?;
        let watermark = flush.watermark().clone();
        let reput = dispatch::start(commitlog.clone(), dispatchers, progress.clone())?;
        let populate = crate::commitlog::start_populating(commitlog.clone())
            .map_err(|e| StoreError::io("populate thread", e))?;

        let manual_deletes = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let topic_retention = Arc::new(retention::TopicRetention::default());
        let background = retention::start(retention::Background {
            config: config.clone(),
            commitlog: commitlog.clone(),
            queues: queues.clone(),
            index: index.clone(),
            checkpoint: checkpoint.clone(),
            progress: progress.clone(),
            disk: disk.clone(),
            journal: journal.clone(),
            signal: Signal::new(),
            manual_deletes: manual_deletes.clone(),
            retention: topic_retention.clone(),
            last_kept: Mutex::new(None),
        })?;

        Ok(MessageStore {
            root,
            commitlog,
            queues,
            filters,
            index,
            checkpoint,
            flush: Mutex::new(Some(flush)),
            watermark,
            progress,
            reput: Mutex::new(Some(reput)),
            manual_deletes,
            retention: topic_retention,
            populate: Mutex::new(populate),
            background: Mutex::new(Some(background)),
            disk,
            shut_down: AtomicBool::new(false),
            slave: AtomicBool::new(false),
            report: RecoveryReport {
                last_shutdown: if crashed {
                    LastShutdown::Crashed
                } else {
                    LastShutdown::Clean
                },
                scanned_bytes: scan.bytes,
                scanned_records: scan.records,
                commitlog_end: end,
                scan_seconds,
            },
            stats: StoreStats::default(),
            journal,
            deferred_write_failures: AtomicU64::new(0),
            config,
            lock: Mutex::new(Some(lock)),
        })
    }

    /// The CommitLog (benchmarks and tools; the broker goes through the methods here).
    pub fn commitlog(&self) -> &CommitLog {
        &self.commitlog
    }
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }
    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn recovery_report(&self) -> RecoveryReport {
        self.report
    }
    /// The repair journal (see [`crate::journal`]).
    pub fn journal(&self) -> &Journal {
        &self.journal
    }
    pub fn stats(&self) -> &StoreStats {
        &self.stats
    }

    /// Make the store a slave's (puts refused with [`StoreError::Slave`], replicated appends
    /// taken) or a master's again.
    pub fn set_slave(&self, slave: bool) {
        self.slave.store(slave, Ordering::Release);
    }
    pub fn is_slave(&self) -> bool {
        self.slave.load(Ordering::Acquire)
    }

    /// Puts are refused on a slave's store, besides the refusals of [`Self::check_writable`].
    fn check_puttable(&self) -> Result<()> {
        if self.is_slave() {
            return Err(StoreError::Slave);
        }
        self.check_writable()
    }

    fn check_writable(&self) -> Result<()> {
        if self.shut_down.load(Ordering::Acquire) {
            return Err(StoreError::ShutDown);
        }
        self.disk.check()
    }

    /// A failed append for want of space starts refusing writes.
    fn note_error(&self, e: &StoreError) {
        if let StoreError::NoSpace { path, needed } = e {
            self.disk.on_no_space(path, *needed);
        }
    }

    fn after_put(&self, results: &[AppendResult], request_flush: bool) {
        if let Some(last) = results.last() {
            if request_flush
                && self.config.flush_disk_type == crate::config::FlushDiskType::SyncFlush
            {
                self.watermark.request(last.end_offset());
            }
        }
        self.stats
            .put_messages
            .fetch_add(results.len() as u64, Ordering::Relaxed);
        let bytes: i64 = results.iter().map(|r| r.size as i64).sum();
        self.stats
            .put_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Append one message. Under SYNC_FLUSH the flush is requested; wait for durability
    /// with [`MessageStore::wait_flushed`] (or watch [`MessageStore::flush_notify_fd`]).
    pub fn put(&self, msg: &MessageRef<'_>) -> Result<AppendResult> {
        self.put_then(msg, false)
    }

    /// Append one message without asking for its flush and without writing it yet
    /// ([`CommitLog::put_deferred`]): the caller writes what it appended so with
    /// [`MessageStore::write_deferred`], in one go, before it answers; then it makes it durable
    /// with [`MessageStore::flush_or_request`] (or [`MessageStore::request_flush`]).
    pub fn put_deferred(&self, msg: &MessageRef<'_>) -> Result<AppendResult> {
        self.put_then(msg, true)
    }

    fn put_then(&self, msg: &MessageRef<'_>, deferred: bool) -> Result<AppendResult> {
        self.check_puttable()?;
        let r = if deferred {
            self.commitlog.put_deferred(msg)
        } else {
            self.commitlog.put(msg)
        }
        .inspect_err(|e| self.note_error(e))?;
        self.disk.on_write_ok();
        self.after_put(std::slice::from_ref(&r), !deferred);
        Ok(r)
    }

    /// Write the appends [`MessageStore::put_deferred`] kept back; returns where the log ends
    /// then, if there were any.
    ///
    /// On an error (the disk failing: blocks are reserved beforehand) the appends stay kept
    /// back, unpublished, to be written by the next attempt or the next append; the first
    /// failure of a run is journaled, and the success that ends it.
    pub fn write_deferred(&self) -> Result<Option<i64>> {
        match self.commitlog.write_deferred() {
            Ok(end) => {
                let failed = self.deferred_write_failures.swap(0, Ordering::Relaxed);
                if failed > 0 {
                    self.journal.info(
                        "deferred-write",
                        format!(
                            "the appends kept back were written after {failed} failed attempts"
                        ),
                    );
                }
                Ok(end)
            }
            Err(e) => {
                self.note_error(&e);
                if self.deferred_write_failures.fetch_add(1, Ordering::Relaxed) == 0 {
                    self.journal.warn(
                        "deferred-write",
                        format!(
                            "writing {} bytes of appends kept back failed: {e}; they stay \
                             unwritten and unanswered until a write succeeds",
                            self.commitlog.deferred_bytes()
                        ),
                    );
                }
                Err(e)
            }
        }
    }

    /// Append several messages of one topic and queue atomically.
    pub fn put_batch(&self, msgs: &[MessageRef<'_>]) -> Result<Vec<AppendResult>> {
        self.put_batch_then(msgs, false)
    }

    /// As [`MessageStore::put_batch`], deferred as by [`MessageStore::put_deferred`].
    pub fn put_batch_deferred(&self, msgs: &[MessageRef<'_>]) -> Result<Vec<AppendResult>> {
        self.put_batch_then(msgs, true)
    }

    fn put_batch_then(&self, msgs: &[MessageRef<'_>], deferred: bool) -> Result<Vec<AppendResult>> {
        self.check_puttable()?;
        let r = if deferred {
            self.commitlog.put_batch_deferred(msgs)
        } else {
            self.commitlog.put_batch(msgs)
        }
        .inspect_err(|e| self.note_error(e))?;
        self.disk.on_write_ok();
        self.after_put(&r, !deferred);
        Ok(r)
    }

    /// Ask the group commit (SYNC_FLUSH) to make `offset` durable, without waiting.
    pub fn request_flush(&self, offset: i64) {
        if self.config.flush_disk_type == crate::config::FlushDiskType::SyncFlush {
            self.watermark.request(offset);
        }
    }

    /// Make `offset` durable under SYNC_FLUSH, on this thread when `inline` and no group
    /// commit is in flight (see [`crate::flush::FlushWatermark::flush_or_request`]); returns
    /// whether it is durable on return.
    pub fn flush_or_request(&self, offset: i64, inline: bool) -> bool {
        if self.config.flush_disk_type != crate::config::FlushDiskType::SyncFlush {
            return self.watermark.flushed() >= offset;
        }
        self.watermark.flush_or_request(offset, inline)
    }

    /// Up to `max_len` raw CommitLog bytes from `offset`, not past the end of its file (the
    /// master side of replication; see [`CommitLog::read_raw`]).
    pub fn read_commitlog(&self, offset: i64, max_len: usize) -> Option<Vec<u8>> {
        self.commitlog
            .read_raw(offset, max_len)
            .map(|s| s.bytes().to_vec())
    }

    /// Append replicated CommitLog bytes verbatim at `offset` (the slave side of replication;
    /// see [`CommitLog::append_raw`]); dispatch then builds the ConsumeQueues and the index from
    /// them as on the master. Returns the new end of the log.
    pub fn append_commitlog(&self, offset: i64, data: &[u8]) -> Result<i64> {
        self.check_writable()?;
        let end = self
            .commitlog
            .append_raw(offset, data)
            .inspect_err(|e| self.note_error(e))?;
        self.disk.on_write_ok();
        if self.config.flush_disk_type == crate::config::FlushDiskType::SyncFlush {
            self.watermark.request(end);
        }
        self.stats
            .put_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(end)
    }

    /// Block until `offset` is durable (SYNC_FLUSH requests the flush; ASYNC_FLUSH waits
    /// for the periodic one).
    pub fn wait_flushed(&self, offset: i64, timeout: Duration) -> Result<()> {
        self.watermark.wait(offset, timeout)
    }
    pub fn flushed_offset(&self) -> i64 {
        self.watermark.flushed()
    }
    pub fn flush_notify_fd(&self) -> i32 {
        self.watermark.notify_fd()
    }
    /// Run `listener` on the flush thread after every flush that advances the durable offset.
    pub fn on_flush(&self, listener: crate::flush::FlushListener) {
        self.watermark.add_listener(listener);
    }
    pub fn drain_flush_notifications(&self) -> u64 {
        self.watermark.drain_notifications()
    }
    /// Block until everything below `offset` is in the ConsumeQueues and the index.
    pub fn wait_dispatched(&self, offset: i64, timeout: Duration) -> bool {
        self.progress.wait(offset, timeout)
    }
    pub fn dispatched_offset(&self) -> i64 {
        self.progress.dispatched()
    }
    pub fn dispatch_notify_fd(&self) -> i32 {
        self.progress.notify_fd()
    }
    pub fn drain_dispatch_notifications(&self) -> u64 {
        self.progress.drain_notifications()
    }
    /// As [`MessageStore::dispatch_notify_fd`], a second one for the network thread.
    pub fn net_dispatch_notify_fd(&self) -> i32 {
        self.progress.net_notify_fd()
    }
    pub fn drain_net_dispatch_notifications(&self) -> u64 {
        self.progress.drain_net_notifications()
    }

    /// Read messages from a queue (the pull path).
    pub fn get_message(&self, req: &GetRequest<'_>) -> GetResult {
        let mut res = GetResult {
            status: GetMessageStatus::NoMatchedLogicQueue,
            next_begin_offset: 0,
            min_offset: 0,
            max_offset: 0,
            buffer: Vec::new(),
            message_count: 0,
            queue_offsets: Vec::new(),
        };
        let Some(cq) = self.queues.get(req.topic, req.queue_id) else {
            return res;
        };
        let min = cq.min_offset();
        let max = cq.max_offset();
        res.min_offset = min;
        res.max_offset = max;
        let offset = req.offset;
        if max == 0 {
            res.status = GetMessageStatus::NoMessageInQueue;
            return res;
        }
        if offset < min {
            res.status = GetMessageStatus::OffsetTooSmall;
            res.next_begin_offset = min;
            return res;
        }
        if offset == max {
            res.status = GetMessageStatus::OffsetOverflowOne;
            res.next_begin_offset = offset;
            return res;
        }
        if offset > max {
            // Apache RocketMQ 4.9 moves an offset past the end back to the end (older 4.x releases
            // sent it to 0 when the queue still starts at 0); the peer tests compare this.
            res.status = GetMessageStatus::OffsetOverflowBadly;
            res.next_begin_offset = max;
            return res;
        }
        let max_msgs = req.max_msgs.max(1);
        let max_bytes = if req.max_bytes == 0 {
            self.config.max_transfer_bytes_on_message_in_memory
        } else {
            req.max_bytes
        };
        let max_scan_units = (16000 / 20).max(max_msgs as usize);
        let cl_min = self.commitlog.min_offset();
        let mut scanned = 0usize;
        let mut status = GetMessageStatus::NoMatchedMessage;
        let mut next = offset;
        'outer: while scanned < max_scan_units && next < max {
            let Some(slice) = cq.read_units(next, max_scan_units - scanned) else {
                if res.message_count == 0 {
                    status = GetMessageStatus::OffsetFoundNull;
                }
                break;
            };
            let mut got_any = false;
            for (cl_off, size, tags) in slice.iter() {
                got_any = true;
                if res.message_count >= max_msgs
                    || (res.message_count > 0
                        && res.buffer.len() as u64 + size.max(0) as u64 > max_bytes)
                {
                    break 'outer;
                }
                scanned += 1;
                next += 1;
                if size <= 0 || size == i32::MAX {
                    continue; // placeholder unit
                }
                if cl_off < cl_min {
                    status = GetMessageStatus::MessageWasRemoving;
                    continue;
                }
                if let Some(f) = req.filter {
                    if !f.matches(tags) {
                        continue;
                    }
                }
                if let Some(sql) = &req.sql {
                    if !self
                        .filters
                        .may_match(req.topic, sql.key, req.queue_id, next - 1, cl_off)
                    {
                        continue;
                    }
                }
                if res.message_count == 0 && res.buffer.is_empty() {
                    // Once per pull: keep the log ahead of a reader draining a backlog in the
                    // page cache (see crate::readahead).
                    self.commitlog.read_ahead(cl_off);
                }
                match self.commitlog.slice(cl_off, size as usize) {
                    Some(s) if !sql_rejects(&req.sql, s.bytes()) => {
                        res.buffer.extend_from_slice(s.bytes());
                        res.queue_offsets.push(next - 1);
                        res.message_count += 1;
                    }
                    Some(_) => {}
                    None => status = GetMessageStatus::MessageWasRemoving,
                }
                if scanned >= max_scan_units {
                    break 'outer;
                }
            }
            if !got_any {
                break;
            }
        }
        if res.message_count > 0 {
            status = GetMessageStatus::Found;
            self.stats
                .get_messages
                .fetch_add(res.message_count as u64, Ordering::Relaxed);
        }
        res.status = status;
        res.next_begin_offset = next;
        res
    }

    /// Register the SQL92 subscription `key` (`group#topic`) of `topic`: from now on the
    /// dispatcher keeps bloom bits for it so pulls skip most non-matching messages.
    pub fn register_filter(&self, topic: &str, key: &str, filter: Arc<rmq_filter::Sql92Filter>) {
        // Bits are trusted only for messages appended after this point: those are dispatched
        // after the registration. The dispatched offset would be too low: a message the
        // dispatcher handles while this runs can already be past it without the new bits.
        self.filters
            .register(topic, key, filter, self.commitlog_max_offset());
    }

    pub fn unregister_filter(&self, topic: &str, key: &str) {
        self.filters.unregister(topic, key);
    }

    /// The record at a CommitLog offset.
    pub fn lookup(&self, commitlog_offset: i64) -> Option<Vec<u8>> {
        self.commitlog
            .record_at(commitlog_offset)
            .map(|s| s.bytes().to_vec())
    }

    /// Messages of `topic` whose KEYS contain `key` or whose UNIQ_KEY is `key`, stored
    /// within `[begin, end]` (ms), newest first.
    pub fn query_by_key(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
    ) -> QueryResult {
        let Some(index) = &self.index else {
            return QueryResult::default();
        };
        let full = format!("{topic}#{key}");
        let found = index.query(&full, max_num.max(1) * 4, begin, end);
        let mut out = QueryResult {
            records: Vec::new(),
            index_last_update_timestamp: found.index_last_update_timestamp,
            index_last_update_phyoffset: found.index_last_update_phyoffset,
        };
        for off in found.phy_offsets {
            if out.records.len() >= max_num {
                break;
            }
            let Some(s) = self.commitlog.record_at(off) else {
                continue;
            };
            let Ok(rec) = message::decode(s.bytes(), false) else {
                continue;
            };
            if rec.topic != topic {
                continue;
            }
            let uniq = message::property(rec.properties, property::UNIQ_KEY) == Some(key);
            let keyed = message::property(rec.properties, property::KEYS)
                .map(|ks| ks.split(' ').any(|k| k == key))
                .unwrap_or(false);
            if uniq || keyed {
                out.records.push(s.bytes().to_vec());
            }
        }
        out
    }

    pub fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.queues
            .get(topic, queue_id)
            .map(|q| q.min_offset())
            .unwrap_or(0)
    }

    pub fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.queues
            .get(topic, queue_id)
            .map(|q| q.max_offset())
            .unwrap_or(0)
    }

    /// First queue offset whose message was stored at or after `timestamp`.
    pub fn offset_by_time(&self, topic: &str, queue_id: i32, timestamp: i64) -> i64 {
        let Some(cq) = self.queues.get(topic, queue_id) else {
            return 0;
        };
        let log = &self.commitlog;
        cq.offset_by_time(timestamp, &|off, size| log.store_timestamp_at(off, size))
    }

    /// Store time of the record at queue offset `offset`.
    pub fn store_time_at(&self, topic: &str, queue_id: i32, offset: i64) -> Option<i64> {
        let cq = self.queues.get(topic, queue_id)?;
        let (off, size, _) = cq.unit(offset)?;
        self.commitlog.store_timestamp_at(off, size)
    }

    /// Store time of the oldest message still in a queue (`-1` if none).
    pub fn earliest_message_time(&self, topic: &str, queue_id: i32) -> i64 {
        let min = self.min_offset_in_queue(topic, queue_id);
        self.store_time_at(topic, queue_id, min).unwrap_or(-1)
    }

    /// Store time of the oldest record in the CommitLog (`-1` if empty).
    pub fn earliest_store_time(&self) -> i64 {
        let min = self.commitlog.min_offset();
        self.commitlog
            .record_at(min)
            .and_then(|s| {
                let b = s.bytes();
                let flag = message::read_i32(b, message::POS_SYSFLAG)?;
                message::read_i64(b, message::store_timestamp_pos(flag))
            })
            .unwrap_or(-1)
    }

    pub fn commitlog_min_offset(&self) -> i64 {
        self.commitlog.min_offset()
    }
    /// How long the append in progress has held the CommitLog's put lock, in ms (0: none);
    /// RocketMQ's `pageCacheLockTimeMills`.
    pub fn put_lock_held_ms(&self) -> i64 {
        self.commitlog.put_lock_held_ms()
    }
    pub fn commitlog_max_offset(&self) -> i64 {
        self.commitlog.max_offset()
    }

    /// Topics and queue ids that have a ConsumeQueue.
    pub fn queues(&self) -> Vec<(String, i32)> {
        self.queues
            .all()
            .iter()
            .map(|q| (q.topic().to_string(), q.queue_id()))
            .collect()
    }

    /// Remove a topic's ConsumeQueues (its records stay in the CommitLog until retention).
    ///
    /// Only once every message appended so far is in the ConsumeQueues, with appends held off
    /// meanwhile ([`CommitLog::remove_topic_once_dispatched`]). The dispatch's backlog is
    /// waited for first with appends going on, until what is left is small; appends are then
    /// held off for at most `DELETE_TOPIC_HOLD` while the rest is dispatched. Gives up with
    /// [`StoreError::Busy`], nothing removed, after `DELETE_TOPIC_WAIT` in all.
    pub fn delete_topic(&self, topic: &str) -> Result<()> {
        let started = std::time::Instant::now();
        let left = || DELETE_TOPIC_WAIT.saturating_sub(started.elapsed());
        loop {
            let end = self.commitlog.max_offset();
            if end - self.progress.dispatched() <= DELETE_TOPIC_SMALL_BACKLOG
                || !self.progress.wait(end, left())
            {
                break;
            }
        }
        let hold = left().min(DELETE_TOPIC_HOLD);
        let removed = self.commitlog.remove_topic_once_dispatched(
            topic,
            |end| self.progress.wait(end, hold),
            || {
                self.filters.remove_topic(topic);
                for q in self.queues.remove_topic(topic) {
                    q.destroy()?;
                }
                let _ = std::fs::remove_dir_all(self.config.consume_queue_dir().join(topic));
                Ok(())
            },
        )?;
        if !removed {
            return Err(StoreError::Busy(format!(
                "topic {topic} not deleted: the ConsumeQueues did not catch up with the \
                 CommitLog within {} ms (dispatched to offset {}, appended to {})",
                started.elapsed().as_millis(),
                self.progress.dispatched(),
                self.commitlog.max_offset()
            )));
        }
        // A deleted queue must not look missing (and be rebuilt) at the next start.
        self.write_manifest();
        Ok(())
    }

    /// RocketMQ's `cleanUnusedTopic`: remove the ConsumeQueues of every topic not in `keep`
    /// (the broker's topic configs), except `SCHEDULE_TOPIC_XXXX`, `RMQ_SYS_TRANS_OP_HALF_TOPIC`
    /// and LMQ topics, which have none. Returns the topics removed.
    pub fn clean_unused_topics(
        &self,
        keep: &std::collections::HashSet<String>,
    ) -> Result<Vec<String>> {
        let mut topics: Vec<String> = self
            .queues
            .all()
            .iter()
            .map(|q| q.topic().to_string())
            .filter(|t| {
                !keep.contains(t)
                    && t != message::SCHEDULE_TOPIC
                    && t != message::TRANS_OP_HALF_TOPIC
                    && !t.starts_with(message::LMQ_PREFIX)
            })
            .collect();
        topics.sort();
        topics.dedup();
        for t in &topics {
            self.delete_topic(t)?;
        }
        if !topics.is_empty() {
            self.journal.info(
                "clean-unused-topic",
                format!(
                    "removed the ConsumeQueues of {} topics without a topic config: {}",
                    topics.len(),
                    topics.join(", ")
                ),
            );
        }
        Ok(topics)
    }

    /// RocketMQ's `cleanExpiredConsumerQueue`: remove every ConsumeQueue (but
    /// `SCHEDULE_TOPIC_XXXX`'s) whose last message lies below the CommitLog's minimum offset,
    /// i.e. whose every message retention has deleted; its next message starts it again at
    /// queue offset 0. Returns the queues removed.
    pub fn clean_expired_queues(&self) -> Result<Vec<(String, i32)>> {
        let min = self.commitlog.min_offset();
        let mut removed = Vec::new();
        for q in self.queues.all() {
            let end = q.max_physic_offset();
            if q.topic() == message::SCHEDULE_TOPIC || end < 0 || end > min {
                continue;
            }
            let (topic, qid) = (q.topic().to_string(), q.queue_id());
            // With appends held off, and only if every message appended to the queue is in it:
            // a message appended meanwhile keeps the queue (and its offsets) as they are.
            let removed_it =
                self.commitlog
                    .remove_queue_if_next(&topic, qid, q.max_offset(), || {
                        match self.queues.remove_queue(&topic, qid) {
                            Some(q) => q.destroy(),
                            None => Ok(()),
                        }
                    })?;
            if !removed_it {
                continue;
            }
            if !self.queues.has_topic(&topic) {
                self.filters.remove_topic(&topic);
                let _ = std::fs::remove_dir_all(self.config.consume_queue_dir().join(&topic));
            }
            removed.push((topic, qid));
        }
        if !removed.is_empty() {
            self.write_manifest();
            let shown: Vec<String> = removed.iter().map(|(t, q)| format!("{t}-{q}")).collect();
            self.journal.info(
                "clean-expired-queue",
                format!(
                    "removed {} ConsumeQueues whose messages all lie below CommitLog offset {min}: {}",
                    removed.len(),
                    shown.join(", ")
                ),
            );
        }
        Ok(removed)
    }

    /// RocketMQ's `executeDeleteFilesManually` (mqadmin `deleteExpiredCommitLog`): the next 20
    /// retention rounds delete expired CommitLog files whatever the hour.
    pub fn delete_files_manually(&self) {
        self.manual_deletes
            .store(retention::MANUAL_DELETE_ROUNDS, Ordering::Release);
        self.journal.info(
            "retention",
            format!(
                "asked to delete expired files: the next {} retention rounds delete CommitLog \
                 files older than {} hours at any hour",
                retention::MANUAL_DELETE_ROUNDS,
                self.config.file_reserved_time
            ),
        );
    }

    /// Record which queues exist and how far they reach (see [`crate::rebuild`]).
    /// A failure (a full disk) is journaled: the next start then checks against an older
    /// manifest, which only lags.
    fn write_manifest(&self) {
        let written = crate::rebuild::write_manifest(
            &self.root,
            &self.commitlog,
            &self.queues,
            self.index.as_deref(),
        );
        if let Err(e) = written {
            self.journal.warn(
                "manifest",
                format!("could not write {}: {e}", crate::rebuild::MANIFEST),
            );
        }
    }

    /// Run retention now: delete CommitLog files older than `reserved_ms` (all but the
    /// newest when `force`), then ConsumeQueue and index files below the new minimum. Unless
    /// `force`, files a topic with a longer retention time still needs are kept.
    pub fn delete_expired_files(&self, reserved_ms: u64, force: bool) -> Result<usize> {
        let table = self.retention.read().clone();
        let now = retention::now_ms();
        let keep_from =
            retention::needed_from(&self.queues, &self.commitlog, &table, reserved_ms, now)
                .map_or(i64::MAX, |(off, _, _)| off);
        retention::delete_expired(
            &self.config,
            &self.commitlog,
            &self.queues,
            self.index.as_deref(),
            &self.progress,
            reserved_ms,
            force,
            keep_from,
        )
        .map(|s| s.deleted)
    }

    /// Per-topic retention: `topic`'s messages are served for `reserved_ms` after they were
    /// stored (`None`: as long as the CommitLog keeps them). Applied by the next retention
    /// round (every `cleanResourceInterval` ms) or [`MessageStore::expire_topics`].
    pub fn set_topic_retention(&self, topic: &str, reserved_ms: Option<u64>) {
        let mut t = self.retention.write();
        match reserved_ms {
            Some(ms) => t.insert(topic.to_string(), ms),
            None => t.remove(topic),
        };
    }

    /// Replace every topic's retention time.
    pub fn replace_topic_retention(&self, table: std::collections::HashMap<String, u64>) {
        *self.retention.write() = table;
    }

    /// The per-topic retention times (topic, ms), sorted.
    pub fn topic_retention(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = self
            .retention
            .read()
            .iter()
            .map(|(t, ms)| (t.clone(), *ms))
            .collect();
        v.sort();
        v
    }

    /// Apply per-topic retention now (what each retention round does first): the messages of
    /// each topic with a retention time that were stored longer ago stop being served.
    /// Journals and returns what moved.
    pub fn expire_topics(&self) -> Result<Vec<retention::TopicExpiry>> {
        retention::expire_now(
            &self.commitlog,
            &self.queues,
            &self.retention,
            &self.journal,
        )
    }

    /// Whether writes are currently refused for lack of disk space.
    pub fn is_disk_full(&self) -> bool {
        self.disk.is_full()
    }

    /// Stop the services, flush everything, write the checkpoint and remove `abort`.
    pub fn shutdown(&self) -> Result<()> {
        if self.shut_down.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if let Some(mut s) = self.background.lock().take() {
            s.shutdown();
        }
        // Appends a network thread kept back and never wrote (it writes them before it
        // answers, so none was acknowledged): written, as the page cache keeps written ones.
        let _ = self.write_deferred();
        if let Some(mut s) = self.reput.lock().take() {
            s.shutdown();
        }
        if let Some(mut s) = self.populate.lock().take() {
            s.shutdown();
        }
        if let Some(mut f) = self.flush.lock().take() {
            f.shutdown();
        }
        self.commitlog.flush(0)?;
        for q in self.queues.all() {
            q.flush(0)?;
        }
        let mut index_ts = 0;
        if let Some(i) = &self.index {
            index_ts = i.flush()?;
        }
        let last = self.commitlog.last_store_timestamp();
        if last > 0 {
            self.checkpoint.set_physic_msg_timestamp(last);
            let logics = self.progress.last_store_timestamp();
            if logics > 0 {
                self.checkpoint.set_logics_msg_timestamp(logics);
            }
        }
        if index_ts > 0 {
            self.checkpoint.set_index_msg_timestamp(index_ts);
        }
        self.checkpoint.flush()?;
        self.write_manifest();
        self.commitlog.queue().discard_preallocated();
        let abort = self.config.abort_path();
        let removed = match std::fs::remove_file(&abort) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io(abort, e)),
        };
        self.lock.lock().take();
        removed
    }

    pub fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::Acquire)
    }
}

/// Whether an SQL92 filter rejects the record (a record that cannot be decoded is rejected).
fn sql_rejects(sql: &Option<SqlFilter<'_>>, record: &[u8]) -> bool {
    match sql {
        None => false,
        Some(f) => match message::decode(record, false) {
            Ok(rec) => !f.filter.matches_properties(rec.properties),
            Err(_) => true,
        },
    }
}

impl Drop for MessageStore {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
