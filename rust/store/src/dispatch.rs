//! The dispatch ("reput") service: tails the CommitLog and builds the ConsumeQueues and the
//! IndexFile from it (RocketMQ's ReputMessageService with its CommitLogDispatchers).
//!
//! Only NOT_TYPE and COMMIT_TYPE records enter a ConsumeQueue; ROLLBACK records are not
//! indexed. Re-dispatching a range (after recovery) is harmless: the ConsumeQueue ignores
//! units below its max offset and the index skips offsets below its end offset.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

use crate::commitlog::{next_valid_record, CommitLog};
use crate::consume_queue::ConsumeQueue;
use crate::error::{Result, StoreError};
use crate::index::IndexService;
use crate::message::{self, property, sysflag, Record, BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE};
use crate::service::{Notifier, Service, Signal};

/// Pause between dispatch rounds while records keep arriving (RocketMQ's reput service
/// sleeps 1 ms too). Fewer, larger rounds cost fewer wake-ups, which on two cores compete
/// with the network thread and the clients; an idle dispatcher is woken at once.
const BUSY_POLL: Duration = Duration::from_millis(1);

/// Every ConsumeQueue of the store, by topic and queue id.
pub struct QueueTable {
    root: PathBuf,
    file_size: u64,
    queues: RwLock<HashMap<String, HashMap<i32, Arc<ConsumeQueue>>>>,
    /// Bumped when queues leave the table, so [`DispatchScratch`] drops what it kept of them.
    removals: AtomicU64,
}

impl QueueTable {
    pub fn new(root: PathBuf, file_size: u64) -> QueueTable {
        QueueTable {
            root,
            file_size,
            queues: RwLock::new(HashMap::new()),
            removals: AtomicU64::new(0),
        }
    }

    /// Load the queues found on disk.
    pub fn load(&self) -> Result<()> {
        let found = ConsumeQueue::discover(&self.root, self.file_size)?;
        let mut map = self.queues.write();
        self.removals.fetch_add(1, Ordering::AcqRel); // a queue loaded again replaces the one kept
        for cq in found {
            map.entry(cq.topic().to_string())
                .or_default()
                .insert(cq.queue_id(), Arc::new(cq));
        }
        Ok(())
    }

    pub fn get(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        self.queues.read().get(topic)?.get(&queue_id).cloned()
    }

    pub fn get_or_create(&self, topic: &str, queue_id: i32) -> Arc<ConsumeQueue> {
        if let Some(q) = self.get(topic, queue_id) {
            return q;
        }
        let mut map = self.queues.write();
        map.entry(topic.to_string())
            .or_default()
            .entry(queue_id)
            .or_insert_with(|| {
                Arc::new(ConsumeQueue::new(
                    &self.root,
                    topic,
                    queue_id,
                    self.file_size,
                ))
            })
            .clone()
    }

    pub fn all(&self) -> Vec<Arc<ConsumeQueue>> {
        self.queues
            .read()
            .values()
            .flat_map(|m| m.values().cloned())
            .collect()
    }

    pub fn topics(&self) -> Vec<String> {
        self.queues.read().keys().cloned().collect()
    }

    /// Queues of one topic.
    pub fn topic_queues(&self, topic: &str) -> Vec<Arc<ConsumeQueue>> {
        self.queues
            .read()
            .get(topic)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether any queue of `topic` is in the table.
    pub fn has_topic(&self, topic: &str) -> bool {
        self.queues.read().contains_key(topic)
    }

    /// Remove one queue from the table and return it; a topic left without queues leaves the
    /// table too.
    pub fn remove_queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        let mut map = self.queues.write();
        self.removals.fetch_add(1, Ordering::AcqRel);
        let queues = map.get_mut(topic)?;
        let q = queues.remove(&queue_id);
        if queues.is_empty() {
            map.remove(topic);
        }
        q
    }

    /// Remove a topic's queues from the table and return them.
    pub fn remove_topic(&self, topic: &str) -> Vec<Arc<ConsumeQueue>> {
        let mut map = self.queues.write();
        self.removals.fetch_add(1, Ordering::AcqRel);
        map.remove(topic)
            .map(|m| m.into_values().collect())
            .unwrap_or_default()
    }
}

/// What one dispatch round keeps between records: the queues it looked up (a round meets the
/// same few again and again, as producers send to each queue of a topic in turn), so a record
/// costs no table lookup (a lock and two string-keyed hash lookups); and a buffer for the
/// record's index hashes.
#[derive(Default)]
pub struct DispatchScratch {
    queues: Vec<Arc<ConsumeQueue>>,
    /// [`QueueTable`]'s removals when `queues` was last emptied.
    removals: u64,
    hashes: Vec<i32>,
}

impl DispatchScratch {
    /// Kept at most: past this the oldest half is forgotten.
    const QUEUES: usize = 64;

    /// The queue, borrowed from what is kept (no reference count taken per record).
    fn queue(&mut self, table: &QueueTable, topic: &str, queue_id: i32) -> &Arc<ConsumeQueue> {
        let removals = table.removals.load(Ordering::Acquire);
        if removals != self.removals {
            self.queues.clear();
            self.removals = removals;
        }
        let found = self
            .queues
            .iter()
            .position(|q| q.queue_id() == queue_id && q.topic() == topic);
        let at = match found {
            Some(at) => at,
            None => {
                let q = table.get_or_create(topic, queue_id);
                if self.queues.len() >= Self::QUEUES {
                    self.queues.drain(..Self::QUEUES / 2);
                }
                self.queues.push(q);
                self.queues.len() - 1
            }
        };
        &self.queues[at]
    }
}

/// What the dispatcher derives from one record.
#[derive(Debug, Clone)]
pub struct DispatchRequest<'a> {
    pub topic: &'a str,
    pub queue_id: i32,
    pub commitlog_offset: i64,
    pub size: i32,
    pub tags_code: i64,
    pub store_timestamp: i64,
    pub queue_offset: i64,
    pub sys_flag: i32,
    pub keys: Option<&'a str>,
    pub uniq_key: Option<&'a str>,
    /// The record's `INNER_MULTI_DISPATCH`: the LMQs it also goes to.
    pub multi_dispatch: Option<&'a str>,
}

/// Build the dispatch request of a record. For `SCHEDULE_TOPIC_XXXX` the tags code is the
/// delivery time (store time + the delay of the record's level, clamped to the table).
pub fn dispatch_request<'a>(rec: &Record<'a>, delay_levels: &[u64]) -> DispatchRequest<'a> {
    // One pass over the properties for the three this needs (later duplicates win).
    let (mut tags, mut keys, mut uniq_key, mut multi_dispatch) = (None, None, None, None);
    for (k, v) in message::properties_iter(rec.properties) {
        match k {
            property::TAGS => tags = Some(v),
            property::KEYS => keys = Some(v),
            property::UNIQ_KEY => uniq_key = Some(v),
            property::INNER_MULTI_DISPATCH => multi_dispatch = Some(v),
            _ => {}
        }
    }
    let mut tags_code = tags.map_or(0, |t| message::java_string_hash(t) as i64);
    if rec.topic == message::SCHEDULE_TOPIC && !delay_levels.is_empty() {
        let level = message::property(rec.properties, property::DELAY)
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(1)
            .clamp(1, delay_levels.len() as i64);
        tags_code = rec.store_timestamp + delay_levels[(level - 1) as usize] as i64;
    }
    DispatchRequest {
        topic: rec.topic,
        queue_id: rec.queue_id,
        commitlog_offset: rec.physical_offset,
        size: rec.total_size,
        tags_code,
        store_timestamp: rec.store_timestamp,
        queue_offset: rec.queue_offset,
        sys_flag: rec.sys_flag,
        keys,
        uniq_key,
        multi_dispatch,
    }
}

/// Whether a record of `topic` goes to the LMQs it names: not one in a retry or dead-letter
/// topic, a system topic or the delay topic (a message sent back, or waiting for its time, is
/// dispatched into its LMQs when it is stored under its own topic again), as RocketMQ decides.
pub fn topic_allows_lmq(topic: &str) -> bool {
    !(topic.starts_with("%RETRY%")
        || topic.starts_with("%DLQ%")
        || topic.starts_with("rmq_sys_")
        || topic.starts_with("RMQ_SYS_")
        || topic == message::SCHEDULE_TOPIC)
}

/// The consumers of dispatch requests.
pub struct Dispatchers {
    pub queues: Arc<QueueTable>,
    pub filters: Arc<crate::filter_bitmap::FilterBitmaps>,
    pub index: Option<Arc<IndexService>>,
    pub delay_levels: Vec<u64>,
    /// Told when a queue or the index finds no space (writes are then refused).
    pub disk: Arc<crate::disk::DiskGuard>,
    /// `enableLmq` and `enableMultiDispatch`: records naming LMQs go to their queues too.
    pub multi_dispatch: bool,
}

impl Dispatchers {
    /// Put the record in queue 0 of each LMQ it names (`%LMQ%` topics; other names are skipped),
    /// at the end of that queue: dispatch runs in CommitLog order, so an LMQ's offsets follow
    /// its records' order, and a record already there (re-dispatch after recovery) is ignored by
    /// [`ConsumeQueue::put`](crate::consume_queue::ConsumeQueue::put).
    fn dispatch_lmq(
        &self,
        req: &DispatchRequest<'_>,
        lmqs: &str,
        scratch: &mut DispatchScratch,
    ) -> Result<()> {
        for lmq in lmqs.split(',').map(str::trim) {
            if !lmq.starts_with(message::LMQ_PREFIX) || lmq.len() == message::LMQ_PREFIX.len() {
                continue;
            }
            let q = scratch.queue(&self.queues, lmq, 0);
            q.put(
                req.commitlog_offset,
                req.size,
                req.tags_code,
                q.max_offset(),
            )?;
        }
        Ok(())
    }

    /// Apply one record to the ConsumeQueue and the index.
    pub fn dispatch(&self, rec: &Record<'_>, scratch: &mut DispatchScratch) -> Result<()> {
        let req = dispatch_request(rec, &self.delay_levels);
        let tran = sysflag::transaction_type(req.sys_flag);
        if tran == sysflag::TRANSACTION_NOT_TYPE || tran == sysflag::TRANSACTION_COMMIT_TYPE {
            scratch.queue(&self.queues, req.topic, req.queue_id).put(
                req.commitlog_offset,
                req.size,
                req.tags_code,
                req.queue_offset,
            )?;
            if self.filters.has_topic(req.topic) {
                self.filters
                    .on_dispatch(req.topic, req.queue_id, req.queue_offset, rec.properties);
            }
            if self.multi_dispatch && topic_allows_lmq(req.topic) {
                if let Some(lmqs) = req.multi_dispatch {
                    self.dispatch_lmq(&req, lmqs, scratch)?;
                }
            }
        }
        if let Some(index) = &self.index {
            // A record indexed already (dispatched again after a crash) is skipped by
            // `put_hashes`.
            if tran != sysflag::TRANSACTION_ROLLBACK_TYPE {
                let hashes = &mut scratch.hashes;
                hashes.clear();
                if req.uniq_key.is_some() || req.keys.is_some() {
                    let prefix = crate::index::topic_prefix_hash(req.topic);
                    if let Some(u) = req.uniq_key {
                        hashes.push(crate::index::topic_key_hash_after(prefix, u));
                    }
                    if let Some(ks) = req.keys {
                        for k in ks.split(' ').filter(|k| !k.is_empty()) {
                            hashes.push(crate::index::topic_key_hash_after(prefix, k));
                        }
                    }
                }
                if !hashes.is_empty() {
                    index.put_hashes(hashes, req.commitlog_offset, req.store_timestamp)?;
                }
            }
        }
        Ok(())
    }
}

/// Progress of dispatching, shared with readers that wait for it.
pub struct DispatchProgress {
    dispatched: AtomicI64,
    last_store_ts: AtomicI64,
    signal: Arc<Signal>,
    notifier: Notifier,
    /// The same, for the network thread (its long-polling pulls): each reader drains its own.
    net_notifier: Notifier,
}

impl DispatchProgress {
    pub fn new(start: i64) -> std::io::Result<Arc<DispatchProgress>> {
        Ok(Arc::new(DispatchProgress {
            dispatched: AtomicI64::new(start),
            last_store_ts: AtomicI64::new(0),
            signal: Signal::new(),
            notifier: Notifier::new()?,
            net_notifier: Notifier::new()?,
        }))
    }
    /// Everything below this CommitLog offset is in the ConsumeQueues and the index.
    pub fn dispatched(&self) -> i64 {
        self.dispatched.load(Ordering::Acquire)
    }
    /// Store time of the newest dispatched record.
    pub fn last_store_timestamp(&self) -> i64 {
        self.last_store_ts.load(Ordering::Acquire)
    }
    /// Eventfd readable after each dispatch round.
    pub fn notify_fd(&self) -> i32 {
        self.notifier.fd()
    }
    pub fn drain_notifications(&self) -> u64 {
        self.notifier.drain()
    }
    /// Eventfd readable after each dispatch round, for the network thread.
    pub fn net_notify_fd(&self) -> i32 {
        self.net_notifier.fd()
    }
    pub fn drain_net_notifications(&self) -> u64 {
        self.net_notifier.drain()
    }
    /// Block until `offset` is dispatched or `timeout` passes.
    pub fn wait(&self, offset: i64, timeout: Duration) -> bool {
        self.signal
            .wait_until(timeout, || self.dispatched() >= offset)
    }
    fn publish(&self, offset: i64, ts: i64) {
        if ts > 0 {
            self.last_store_ts.fetch_max(ts, Ordering::AcqRel);
        }
        self.dispatched.store(offset, Ordering::Release);
        self.signal.notify();
        self.notifier.notify();
        self.net_notifier.notify();
    }
}

/// Whether the message record at `pos` runs past `wrote` in a file that is still being written
/// and could still hold it (a replicated log ends inside a record until the rest arrives).
fn incomplete(data: &[u8], pos: usize, wrote: usize, file_size: usize) -> bool {
    let total = message::read_i32(data, pos).unwrap_or(0);
    total > 0
        && wrote < file_size
        && pos + total as usize > wrote
        && pos + total as usize <= file_size
}

/// Dispatch every complete record in `[from, commitlog max)`; returns the new position.
pub fn dispatch_range(
    log: &CommitLog,
    dispatchers: &Dispatchers,
    progress: &DispatchProgress,
    mut from: i64,
) -> i64 {
    let files = log.queue();
    let mut scratch = DispatchScratch::default();
    loop {
        let max = log.max_offset();
        if from >= max {
            return from;
        }
        let Some(file) = files.find(from as u64) else {
            // Below the first file (deleted) or a gap: jump to the first file.
            let min = log.min_offset();
            if from < min {
                from = min;
                continue;
            }
            return from;
        };
        let base = file.from_offset() as i64;
        let wrote = file.wrote_position();
        let data = file.raw_from(0);
        let mut pos = (from - base) as usize;
        let mut last_ts = 0i64;
        let mut n = 0u32;
        // Ranges recovery found damaged: stepped over, never dispatched.
        let damaged = log.damaged_in(from, base + wrote as i64);
        let mut next_damage = damaged.iter().peekable();
        while pos + 8 <= wrote {
            let at = base + pos as i64;
            while next_damage.next_if(|d| d.1 <= at).is_some() {}
            if let Some(&&(d_from, d_to)) = next_damage.peek() {
                if d_from <= at {
                    pos = ((d_to - base) as usize).min(file.size());
                    continue;
                }
            }
            let magic = message::read_i32(data, pos + 4).unwrap_or(0);
            if magic == BLANK_MAGIC_CODE {
                pos = file.size();
                break;
            }
            if magic == MESSAGE_MAGIC_CODE && incomplete(data, pos, wrote, file.size()) {
                // A replicated log may end inside a record: the rest is on its way.
                break;
            }
            let rec = if magic == MESSAGE_MAGIC_CODE {
                message::decode(&data[pos..wrote], false).ok()
            } else {
                None
            };
            let Some(rec) = rec else {
                // Cannot happen below the wrote position of a healthy log (recovery lists
                // damage); step to the next valid record rather than stop or spin.
                pos = next_valid_record(&data[..wrote], pos + 1, base, false).unwrap_or(wrote);
                continue;
            };
            // A dispatcher failing for want of disk space or on an I/O error must not skip the
            // record: dispatching stops here and resumes at this record in the next round. A
            // record the queues refuse (a damaged queue offset) stays readable in the log.
            match dispatchers.dispatch(&rec, &mut scratch) {
                Err(StoreError::NoSpace { path, needed }) => {
                    dispatchers.disk.on_no_space(&path, needed);
                    progress.publish(at, last_ts);
                    return at;
                }
                Err(StoreError::Io { .. }) => {
                    progress.publish(at, last_ts);
                    return at;
                }
                _ => {}
            }
            last_ts = rec.store_timestamp;
            pos += rec.total_size as usize;
            n += 1;
            if n.is_multiple_of(256) {
                progress.publish(base + pos as i64, last_ts);
            }
        }
        if pos >= file.size() {
            from = base + file.size() as i64;
        } else {
            from = base + pos as i64;
        }
        progress.publish(from, last_ts);
        // Stopped inside this file: go on only if it grew meanwhile (the tail may be part of a
        // replicated record still being received).
        if pos < file.size() && file.wrote_position() == wrote {
            return from;
        }
    }
}

/// Start the dispatch service, resuming at `progress.dispatched()`.
pub fn start(
    log: Arc<CommitLog>,
    dispatchers: Arc<Dispatchers>,
    progress: Arc<DispatchProgress>,
) -> Result<Service> {
    let signal = log.appended_signal().clone();
    Service::spawn("rmq-reput", signal, move |ctx| {
        let mut from = progress.dispatched();
        loop {
            let seen = ctx.signal().generation();
            let before = from;
            from = dispatch_range(&log, &dispatchers, &progress, from);
            if ctx.stopped() {
                break;
            }
            if from != before {
                // Busy: poll again shortly. Appenders only signal an idle dispatcher (one that
                // waits on the signal), so under load a put costs no wake-up syscall.
                std::thread::sleep(BUSY_POLL);
            } else {
                ctx.wait(seen, Duration::from_millis(100));
            }
        }
        dispatch_range(&log, &dispatchers, &progress, from);
    })
    .map_err(|e| crate::error::StoreError::io("reput thread", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_keeps_the_queues_of_the_table_and_forgets_removed_ones() {
        let dir = tempfile::tempdir().unwrap();
        let table = QueueTable::new(dir.path().to_path_buf(), 6000);
        let mut scratch = DispatchScratch::default();
        let q = scratch.queue(&table, "T", 1).clone();
        assert!(Arc::ptr_eq(&q, &table.get("T", 1).unwrap()));
        assert!(Arc::ptr_eq(&q, scratch.queue(&table, "T", 1)));
        // Same queue id, other topic; same topic, other queue id: other queues.
        assert_eq!(scratch.queue(&table, "U", 1).topic(), "U");
        assert_eq!(scratch.queue(&table, "T", 2).queue_id(), 2);
        // More queues than it keeps: each still the table's own.
        for i in 0..3 * DispatchScratch::QUEUES as i32 {
            let q = scratch.queue(&table, "V", i);
            assert!(Arc::ptr_eq(q, &table.get("V", i).unwrap()));
        }
        assert!(scratch.queues.len() <= DispatchScratch::QUEUES);
        // A removed topic's queue is not used again: the next record gets the new one.
        let old = scratch.queue(&table, "T", 1).clone();
        table.remove_topic("T");
        let new = scratch.queue(&table, "T", 1).clone();
        assert!(!Arc::ptr_eq(&old, &new));
        assert!(Arc::ptr_eq(&new, &table.get("T", 1).unwrap()));
    }
}
