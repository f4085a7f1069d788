//! Retention and housekeeping (RocketMQ's CleanCommitLogService, CleanConsumeQueueService
//! and FlushConsumeQueueService), run by one background service:
//!
//! * every `flushIntervalConsumeQueue` ms: flush ConsumeQueues and the index, update the
//!   checkpoint's logics/index timestamps;
//! * every `cleanResourceInterval` ms: measure disk use (writes are refused above
//!   `diskSpaceWarningLevelRatio`); delete CommitLog files older than `fileReservedTime`
//!   hours at the `deleteWhen` hour, or at any hour while the disk is above
//!   `diskMaxUsedSpaceRatio`; the oldest files whether expired or not only while it is above
//!   `diskSpaceCleanForciblyRatio` or `diskSpaceWarningLevelRatio` (see [`cleaning`]); then
//!   ConsumeQueue and index files wholly below the CommitLog's new minimum offset. Files not
//!   yet dispatched are never deleted.
//!
//! Per-topic retention (the topic attribute `retention.hours`, a [`TopicRetention`] table the
//! broker fills from its topic configs), every `cleanResourceInterval` ms whatever the hour:
//!
//! * a topic's messages older than its own time stop being served: its ConsumeQueues' min
//!   offsets move past them, and their files wholly below that are deleted
//!   ([`expire_topics`]); the CommitLog keeps the records;
//! * CommitLog files are still deleted whole: a file older than `fileReservedTime` is kept
//!   while a topic with a longer time still has a message in it that its time covers
//!   ([`needed_from`]), except in a forced round (a nearly full disk).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Timelike;

use crate::checkpoint::StoreCheckpoint;
use crate::commitlog::CommitLog;
use crate::config::StoreConfig;
use crate::dispatch::{DispatchProgress, QueueTable};
use crate::error::{Result, StoreError};
use crate::index::IndexService;
use crate::service::{Service, Signal};

fn is_delete_hour(spec: &str) -> bool {
    let hour = chrono::Local::now().hour();
    spec.split(';')
        .filter_map(|h| h.trim().parse::<u32>().ok())
        .any(|h| h == hour)
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Per-topic retention: topic → how long its messages are served, in ms (topics without an
/// entry: as long as the CommitLog holds them).
pub type TopicRetention = parking_lot::RwLock<HashMap<String, u64>>;

/// What [`expire_topics`] did to one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicExpiry {
    pub topic: String,
    pub reserved_ms: u64,
    /// Queues whose min offset moved.
    pub queues: usize,
    /// Queue offsets no longer served (messages, and any placeholders among them).
    pub offsets: i64,
    /// ConsumeQueue files deleted.
    pub files: usize,
}

/// Move the min offset of every queue of every topic in `table` past its messages stored
/// before `now - reserved` (ms), deleting ConsumeQueue files wholly below it. Topics with
/// nothing to expire are left out of the answer.
pub fn expire_topics(
    commitlog: &CommitLog,
    queues: &QueueTable,
    table: &HashMap<String, u64>,
    now: u64,
) -> Result<Vec<TopicExpiry>> {
    let mut topics: Vec<(&String, &u64)> = table.iter().collect();
    topics.sort();
    let mut out = Vec::new();
    for (topic, &reserved_ms) in topics {
        let before = now.saturating_sub(reserved_ms) as i64;
        let mut e = TopicExpiry {
            topic: topic.clone(),
            reserved_ms,
            queues: 0,
            offsets: 0,
            files: 0,
        };
        for q in queues.topic_queues(topic) {
            let cut =
                q.offset_by_time(before, &|off, size| commitlog.store_timestamp_at(off, size));
            let (moved, files) = q.expire_below(cut)?;
            if moved > 0 {
                e.queues += 1;
                e.offsets += moved;
                e.files += files;
            }
        }
        if e.queues > 0 {
            out.push(e);
        }
    }
    Ok(out)
}

/// [`expire_topics`] now with the current table, each topic's expiry journaled.
pub fn expire_now(
    commitlog: &CommitLog,
    queues: &QueueTable,
    retention: &TopicRetention,
    journal: &crate::journal::Journal,
) -> Result<Vec<TopicExpiry>> {
    let table = retention.read().clone();
    if table.is_empty() {
        return Ok(Vec::new());
    }
    let done = expire_topics(commitlog, queues, &table, now_ms())?;
    for e in &done {
        journal.info("topic-retention", describe_expiry(e));
    }
    Ok(done)
}

/// The lowest CommitLog offset that a topic whose time in `table` is longer than
/// `reserved_ms` still needs at `now` (its oldest message stored since `now - its time`),
/// with that topic and its time; `None` when no such topic needs anything.
pub fn needed_from(
    queues: &QueueTable,
    commitlog: &CommitLog,
    table: &HashMap<String, u64>,
    reserved_ms: u64,
    now: u64,
) -> Option<(i64, String, u64)> {
    let mut need: Option<(i64, String, u64)> = None;
    for (topic, &ms) in table.iter().filter(|(_, &ms)| ms > reserved_ms) {
        let before = now.saturating_sub(ms) as i64;
        for q in queues.topic_queues(topic) {
            let cut =
                q.offset_by_time(before, &|off, size| commitlog.store_timestamp_at(off, size));
            let Some(off) = q.physic_offset_at(cut) else {
                continue;
            };
            if need.as_ref().is_none_or(|(n, _, _)| off < *n) {
                need = Some((off, topic.clone(), ms));
            }
        }
    }
    need
}

/// What [`delete_expired`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// CommitLog files deleted.
    pub deleted: usize,
    /// CommitLog files older than the reserved time kept for a topic with a longer one.
    pub kept: usize,
}

/// Delete expired CommitLog files (older than `reserved_ms`, or any but the newest when
/// `force`), then ConsumeQueue and index files below the new minimum. Unless `force`, a
/// file ending past `keep_from` (see [`needed_from`]) is kept, and the files after it.
#[allow(clippy::too_many_arguments)]
pub fn delete_expired(
    config: &StoreConfig,
    commitlog: &CommitLog,
    queues: &QueueTable,
    index: Option<&IndexService>,
    progress: &DispatchProgress,
    reserved_ms: u64,
    force: bool,
    keep_from: i64,
) -> Result<Swept> {
    let now = now_ms();
    let dispatched = progress.dispatched();
    let mut swept = Swept::default();
    // One file at a time, `deleteCommitLogFilesInterval` apart, as RocketMQ paces it: a burst of
    // unmaps and page-cache releases (a forced round can free tens of GiB) held the appender's page
    // faults behind the process's mapping lock and took the broker's CPU for seconds.
    let batch = 1usize;
    let expired = |f: &crate::mapped_file::MappedFile| {
        let end = f.from_offset() as i64 + f.size() as i64;
        let old = f.last_modified_ms().saturating_add(reserved_ms) <= now;
        end <= dispatched && (force || old)
    };
    let kept = |f: &crate::mapped_file::MappedFile| {
        !force && f.from_offset() as i64 + f.size() as i64 > keep_from
    };
    loop {
        let n = commitlog
            .queue()
            .delete_head_files(batch, |f| expired(f) && !kept(f))?;
        swept.deleted += n;
        if n < batch {
            break;
        }
        if config.delete_commit_log_files_interval > 0 {
            std::thread::sleep(Duration::from_millis(
                config.delete_commit_log_files_interval.min(1000),
            ));
        }
    }
    // The files retention would have deleted but for a longer topic time (never the last).
    let files = commitlog.queue().files();
    swept.kept = files
        .iter()
        .take(files.len().saturating_sub(1))
        .take_while(|f| expired(f))
        .count();
    let min = commitlog.min_offset();
    for q in queues.all() {
        q.delete_expired(min)?;
    }
    if let Some(i) = index {
        i.delete_expired(min)?;
    }
    Ok(swept)
}

/// Everything the background service works on.
pub struct Background {
    pub config: StoreConfig,
    pub commitlog: Arc<CommitLog>,
    pub queues: Arc<QueueTable>,
    pub index: Option<Arc<IndexService>>,
    pub checkpoint: Arc<StoreCheckpoint>,
    pub progress: Arc<DispatchProgress>,
    pub disk: Arc<crate::disk::DiskGuard>,
    pub journal: Arc<crate::journal::Journal>,
    pub signal: Arc<Signal>,
    /// Rounds left that delete expired files whatever the hour (a manual request).
    pub manual_deletes: Arc<AtomicU32>,
    /// Per-topic retention times.
    pub retention: Arc<TopicRetention>,
    /// The last "kept for a longer topic time" line (topic, files), so that it is logged
    /// when it changes rather than every round.
    pub last_kept: parking_lot::Mutex<Option<(String, usize)>>,
}

impl Background {
    /// `index_end`: the newest IndexFile's endTimestamp the round before (kept by the caller).
    fn flush_logics(&self, thorough: bool, index_end: &mut i64) {
        let least = if thorough {
            0
        } else {
            self.config.flush_consume_queue_least_pages
        };
        let ts = self.progress.last_store_timestamp();
        let mut ok = true;
        for q in self.queues.all() {
            ok &= q.flush(least).is_ok();
        }
        if ok && ts > 0 {
            self.checkpoint.set_logics_msg_timestamp(ts);
        }
        // Full IndexFiles are synced every round (RocketMQ syncs an IndexFile once it is
        // full); the one being written only once it has stopped growing for a round, and on
        // thorough rounds. While it grows a sync buys nothing: after a crash a file that ends
        // past the checkpoint is rebuilt anyway, and it always does while entries arrive. And
        // it costs: each entry dirties a random page of the slot table, so a sync every second
        // wrote most of it back every second, and the dispatch thread then took a write fault
        // on each page again (about 2 us of broker CPU per send at 10,000 sends/s).
        if let Some(i) = &self.index {
            let end = i.end_timestamp();
            let settled = end == std::mem::replace(index_end, end);
            let flushed = if thorough || settled {
                i.flush()
            } else {
                i.flush_full()
            };
            if let Ok(its) = flushed {
                if its > self.checkpoint.index_msg_timestamp() {
                    self.checkpoint.set_index_msg_timestamp(its);
                }
            }
        }
        let _ = self.checkpoint.flush();
        if thorough {
            let _ = crate::rebuild::write_manifest(
                &self.config.store_path_root_dir,
                &self.commitlog,
                &self.queues,
                self.index.as_deref(),
            );
        }
    }

    fn clean(&self) {
        // Per-topic retention, every round.
        if let Err(e) = expire_now(
            &self.commitlog,
            &self.queues,
            &self.retention,
            &self.journal,
        ) {
            self.journal.warn(
                "topic-retention",
                format!("expiring messages by topic retention failed: {e}"),
            );
        }
        let dir = self.config.commit_log_dir();
        self.disk.refresh();
        let used = crate::disk::disk_used_percent(&dir).unwrap_or(0.0);
        let logics =
            crate::disk::disk_used_percent(&self.config.consume_queue_dir()).unwrap_or(0.0);
        let manual = self
            .manual_deletes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok();
        let due = manual || is_delete_hour(&self.config.delete_when);
        let Some(why) = cleaning(&self.config, used, logics, due) else {
            return;
        };
        let used = used.max(logics);
        let force = why == Cleaning::Forced;
        let reserved = self.config.file_reserved_time.saturating_mul(3_600_000);
        let before = self.commitlog.min_offset();
        let table = self.retention.read().clone();
        let need = needed_from(&self.queues, &self.commitlog, &table, reserved, now_ms());
        let keep_from = need.as_ref().map_or(i64::MAX, |(off, _, _)| *off);
        let swept = delete_expired(
            &self.config,
            &self.commitlog,
            &self.queues,
            self.index.as_deref(),
            &self.progress,
            reserved,
            force,
            keep_from,
        );
        let after = self.commitlog.min_offset();
        let hours = self.config.file_reserved_time;
        if let (Ok(s), Some((off, topic, ms))) = (&swept, &need) {
            self.log_kept(s.kept, topic, *ms, *off, hours, force && after > *off);
        }
        let deleted = swept.map(|s| s.deleted);
        let which = if force {
            format!("whether older than {hours} hours or not")
        } else {
            format!("older than {hours} hours")
        };
        // What made a round delete at any hour: the disk (a warning), else the hour or a request.
        let cause = match why {
            Cleaning::Forced => Some(format!(
                "above diskSpaceCleanForciblyRatio {}% (or diskSpaceWarningLevelRatio {}%)",
                self.config.disk_space_clean_forcibly_ratio,
                self.config.disk_space_warning_level_ratio
            )),
            Cleaning::SpaceLow => Some(format!(
                "above diskMaxUsedSpaceRatio {}%",
                self.config.disk_max_used_space_ratio
            )),
            Cleaning::Hour => None,
        };
        match (deleted, cause) {
            (Ok(n), None) if n > 0 => self.journal.info(
                "retention",
                format!("deleted {n} CommitLog files {which}, bytes [{before}, {after})"),
            ),
            (Ok(n), Some(cause)) if n > 0 => self.journal.warn(
                "retention",
                format!(
                    "the disk of {} is {used:.1}% used, {cause}: deleted {n} CommitLog files \
                     {which}, bytes [{before}, {after}), and the queue and index files below them",
                    dir.display()
                ),
            ),
            (Err(e), _) => self
                .journal
                .warn("retention", format!("deleting expired files failed: {e}")),
            _ => {}
        }
    }
}

impl Background {
    /// Log files kept for a longer topic time when what is kept changes; `forced`: a forced
    /// round deleted files that topic still needed.
    fn log_kept(&self, kept: usize, topic: &str, ms: u64, off: i64, hours: u64, forced: bool) {
        let mut last = self.last_kept.lock();
        let now = (topic.to_string(), kept);
        if forced {
            self.journal.warn(
                "topic-retention",
                format!(
                    "a forced round (the disk is nearly full) deleted CommitLog files up to \
                     offset {} that topic {topic} (retention.hours={}) still needed from offset \
                     {off}",
                    self.commitlog.min_offset(),
                    hours_text(ms)
                ),
            );
        } else if kept > 0 && last.as_ref() != Some(&now) {
            self.journal.info(
                "topic-retention",
                format!(
                    "kept {kept} CommitLog files older than fileReservedTime {hours} hours \
                     (from offset {}): topic {topic} (retention.hours={}) needs its messages \
                     from offset {off}",
                    self.commitlog.min_offset(),
                    hours_text(ms)
                ),
            );
        }
        *last = if kept > 0 && !forced { Some(now) } else { None };
    }
}

/// Hours as written in the attribute (`0.5`, `168`).
pub fn hours_text(ms: u64) -> String {
    let h = ms as f64 / 3_600_000.0;
    format!("{}", (h * 1e6).round() / 1e6)
}

/// The log line of one topic's expiry.
pub fn describe_expiry(e: &TopicExpiry) -> String {
    format!(
        "topic {} (retention.hours={}): {} messages of {} queues stored more than that ago \
         no longer served; {} ConsumeQueue files deleted",
        e.topic,
        hours_text(e.reserved_ms),
        e.offsets,
        e.queues,
        e.files
    )
}

/// Retention rounds that delete expired files at any hour after a manual request
/// ([`crate::store::MessageStore::delete_files_manually`]; RocketMQ's
/// `MAX_MANUAL_DELETE_FILE_TIMES`).
pub const MANUAL_DELETE_ROUNDS: u32 = 20;

/// Why a retention round deletes CommitLog files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleaning {
    /// The `deleteWhen` hour, or a manual request: files older than `fileReservedTime`.
    Hour,
    /// The disk is above `diskMaxUsedSpaceRatio`: files older than `fileReservedTime`, at any
    /// hour.
    SpaceLow,
    /// The disk is above `diskSpaceCleanForciblyRatio` or `diskSpaceWarningLevelRatio` (and
    /// `cleanFileForciblyEnable`): the oldest files, expired or not.
    Forced,
}

/// RocketMQ's rule (CleanCommitLogService): whether a round deletes files, and which, with the
/// CommitLog's disk `physic` and the ConsumeQueues' disk `logics` percent full, and `due` at
/// the `deleteWhen` hour or after a manual request. A round deletes when due or while a disk is
/// above `diskMaxUsedSpaceRatio` (75 % by default, read within 10..=95); it deletes unexpired
/// files only while a disk is also above `diskSpaceCleanForciblyRatio` (85 %) or
/// `diskSpaceWarningLevelRatio` (90 %).
pub fn cleaning(config: &StoreConfig, physic: f64, logics: f64, due: bool) -> Option<Cleaning> {
    // RocketMQ reads diskMaxUsedSpaceRatio within 10..=95 whatever is configured.
    let ratio = config.disk_max_used_space_ratio.clamp(10, 95) as f64;
    let nearly_full = |used: f64| {
        used > config.disk_space_clean_forcibly_ratio as f64
            || used > config.disk_space_warning_level_ratio as f64
    };
    // The CommitLog's disk first; the ConsumeQueues' only when that one is below the ratio.
    let (space_low, clean_now) = if physic > ratio {
        (true, nearly_full(physic))
    } else {
        (logics > ratio, nearly_full(physic) || nearly_full(logics))
    };
    if !space_low && !due {
        return None;
    }
    Some(if clean_now && config.clean_file_forcibly_enable {
        Cleaning::Forced
    } else if space_low {
        Cleaning::SpaceLow
    } else {
        Cleaning::Hour
    })
}

/// Start the background service.
pub fn start(bg: Background) -> Result<Service> {
    let signal = bg.signal.clone();
    Service::spawn("rmq-housekeeping", signal, move |ctx| {
        let flush_every = Duration::from_millis(bg.config.flush_interval_consume_queue.max(10));
        let thorough_every =
            Duration::from_millis(bg.config.flush_consume_queue_thorough_interval.max(10));
        let clean_every = Duration::from_millis(bg.config.clean_resource_interval.max(10));
        let mut last_thorough = Instant::now();
        let mut last_clean = Instant::now() - clean_every;
        let mut index_end = 0;
        while !ctx.stopped() {
            if last_clean.elapsed() >= clean_every {
                bg.clean();
                last_clean = Instant::now();
            }
            let thorough = last_thorough.elapsed() >= thorough_every;
            if thorough {
                last_thorough = Instant::now();
            }
            bg.flush_logics(thorough, &mut index_end);
            let seen = ctx.signal().generation();
            ctx.wait(seen, flush_every);
        }
        bg.flush_logics(true, &mut index_end);
    })
    .map_err(|e| StoreError::io("housekeeping thread", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unexpired_files_go_only_when_the_disk_is_nearly_full() {
        let c = StoreConfig::default();
        assert_eq!(
            (
                c.disk_max_used_space_ratio,
                c.disk_space_clean_forcibly_ratio
            ),
            (75, 85)
        );
        let one = |c: &StoreConfig, used: f64, due: bool| cleaning(c, used, used, due);
        assert_eq!(one(&c, 50.0, false), None);
        assert_eq!(one(&c, 50.0, true), Some(Cleaning::Hour));
        // Above diskMaxUsedSpaceRatio: expired files only, at any hour.
        assert_eq!(one(&c, 80.0, false), Some(Cleaning::SpaceLow));
        assert_eq!(one(&c, 80.0, true), Some(Cleaning::SpaceLow));
        // Above diskSpaceCleanForciblyRatio, and above diskSpaceWarningLevelRatio.
        assert_eq!(one(&c, 86.0, false), Some(Cleaning::Forced));
        assert_eq!(one(&c, 95.0, false), Some(Cleaning::Forced));
        let off = StoreConfig {
            clean_file_forcibly_enable: false,
            ..c.clone()
        };
        assert_eq!(one(&off, 95.0, false), Some(Cleaning::SpaceLow));
        // A round runs only when due or above diskMaxUsedSpaceRatio, as in RocketMQ: with that
        // ratio at 95, a disk at 88 % deletes nothing until the hour, and then forcibly.
        let high = StoreConfig {
            disk_max_used_space_ratio: 95,
            ..c.clone()
        };
        assert_eq!(one(&high, 88.0, false), None);
        assert_eq!(one(&high, 88.0, true), Some(Cleaning::Forced));
        // The ratio is read within 10..=95, as RocketMQ's getter does.
        let over = StoreConfig {
            disk_max_used_space_ratio: 100,
            ..c.clone()
        };
        assert_eq!(one(&over, 96.0, false), Some(Cleaning::Forced));
        let under = StoreConfig {
            disk_max_used_space_ratio: 1,
            ..c.clone()
        };
        assert_eq!(one(&under, 5.0, false), None);
        assert_eq!(one(&under, 11.0, false), Some(Cleaning::SpaceLow));
        // A warning level below the forcible ratio forces too.
        let low_warn = StoreConfig {
            disk_space_warning_level_ratio: 80,
            ..c.clone()
        };
        assert_eq!(one(&low_warn, 82.0, false), Some(Cleaning::Forced));
        // ConsumeQueues on another disk: that disk counts when the CommitLog's is below the
        // ratio, and only then.
        assert_eq!(cleaning(&c, 50.0, 80.0, false), Some(Cleaning::SpaceLow));
        assert_eq!(cleaning(&c, 50.0, 88.0, false), Some(Cleaning::Forced));
        assert_eq!(cleaning(&c, 80.0, 88.0, false), Some(Cleaning::SpaceLow));
        assert_eq!(cleaning(&c, 88.0, 50.0, false), Some(Cleaning::Forced));
    }
}
