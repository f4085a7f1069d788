//! Store configuration, under RocketMQ's own property names (`MessageStoreConfig`).
//!
//! [`StoreConfig::set`] takes a property by its RocketMQ name and a string value, so a
//! `broker.conf` or `-p key=value` option can be applied as is; unknown names and bad
//! values are reported as [`StoreError::Config`].

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::error::{Result, StoreError};

/// One ConsumeQueue unit: commitlog offset (8) + size (4) + tags code (8).
pub const CQ_UNIT_SIZE: u64 = 20;

/// How the CommitLog reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushDiskType {
    /// A background service flushes periodically; appends return at once.
    AsyncFlush,
    /// Group commit: an append is acknowledged once a flush covers it.
    SyncFlush,
}

impl std::str::FromStr for FlushDiskType {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "ASYNC_FLUSH" => Ok(FlushDiskType::AsyncFlush),
            "SYNC_FLUSH" => Ok(FlushDiskType::SyncFlush),
            other => Err(StoreError::Config(format!(
                "flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH, got {other:?}"
            ))),
        }
    }
}

/// Everything the store can be configured with. Defaults are RocketMQ 4.9's.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// `storePathRootDir`: root of the store (`$HOME/store` by default).
    pub store_path_root_dir: PathBuf,
    /// `storePathCommitLog`: CommitLog directory (default `<root>/commitlog`).
    pub store_path_commit_log: Option<PathBuf>,
    /// `storePathConsumeQueue`: ConsumeQueue directory (default `<root>/consumequeue`).
    pub store_path_consume_queue: Option<PathBuf>,
    /// `storePathIndex`: IndexFile directory (default `<root>/index`).
    pub store_path_index: Option<PathBuf>,
    /// `storeCheckpoint`: the checkpoint file (default `<root>/checkpoint`).
    pub store_checkpoint: Option<PathBuf>,
    /// `abortFile`: the file that marks an unclean shutdown (default `<root>/abort`).
    pub abort_file: Option<PathBuf>,
    /// `mappedFileSizeCommitLog`: size of one CommitLog file (1 GiB).
    pub mapped_file_size_commit_log: u64,
    /// `mappedFileSizeConsumeQueue`: size of one ConsumeQueue file (300,000 units).
    pub mapped_file_size_consume_queue: u64,
    /// `flushDiskType`.
    pub flush_disk_type: FlushDiskType,
    /// `flushIntervalCommitLog` (ms) for ASYNC_FLUSH.
    pub flush_interval_commit_log: u64,
    /// `flushCommitLogLeastPages`: dirty pages needed before a periodic flush.
    pub flush_commit_log_least_pages: u64,
    /// `flushCommitLogThoroughInterval` (ms): flush everything at least this often.
    pub flush_commit_log_thorough_interval: u64,
    /// `syncFlushTimeout` (ms): how long a SYNC_FLUSH append waits for its flush.
    pub sync_flush_timeout: u64,
    /// `flushIntervalConsumeQueue` (ms).
    pub flush_interval_consume_queue: u64,
    /// `flushConsumeQueueLeastPages`.
    pub flush_consume_queue_least_pages: u64,
    /// `flushConsumeQueueThoroughInterval` (ms).
    pub flush_consume_queue_thorough_interval: u64,
    /// `maxMessageSize`: largest body accepted (4 MiB).
    pub max_message_size: u64,
    /// `maxHashSlotNum`: IndexFile hash slots.
    pub max_hash_slot_num: u32,
    /// `maxIndexNum`: IndexFile entries.
    pub max_index_num: u32,
    /// `messageIndexEnable`: build the IndexFile.
    pub message_index_enable: bool,
    /// `messageIndexSafe`: abnormal recovery also respects the index checkpoint.
    pub message_index_safe: bool,
    /// `checkCRCOnRecover`.
    pub check_crc_on_recover: bool,
    /// `fileReservedTime` (hours) before a CommitLog file may be deleted.
    pub file_reserved_time: u64,
    /// `deleteWhen`: hours of the day (`"04"`, or `"04;16"`) when expired files are deleted.
    pub delete_when: String,
    /// `diskMaxUsedSpaceRatio` (percent): above it, expired files are deleted at any hour, not
    /// only at `deleteWhen`.
    pub disk_max_used_space_ratio: u32,
    /// `diskSpaceCleanForciblyRatio` (percent; RocketMQ's system property
    /// `rocketmq.broker.diskSpaceCleanForciblyRatio`): above it, or above
    /// `diskSpaceWarningLevelRatio`, the oldest files are deleted whether expired or not, when
    /// `cleanFileForciblyEnable` is on.
    pub disk_space_clean_forcibly_ratio: u32,
    /// `cleanFileForciblyEnable`: whether a disk above `diskSpaceCleanForciblyRatio` has
    /// unexpired files deleted.
    pub clean_file_forcibly_enable: bool,
    /// `diskSpaceWarningLevelRatio` (percent): above it, writes are refused.
    pub disk_space_warning_level_ratio: u32,
    /// `cleanResourceInterval` (ms) between retention checks.
    pub clean_resource_interval: u64,
    /// `deleteCommitLogFilesInterval` (ms) pause between two file deletions.
    pub delete_commit_log_files_interval: u64,
    /// `maxTransferBytesOnMessageInMemory`: byte limit of one read.
    pub max_transfer_bytes_on_message_in_memory: u64,
    /// `maxTransferCountOnMessageInMemory`: message limit of one read.
    pub max_transfer_count_on_message_in_memory: u32,
    /// `messageDelayLevel`: delay of each level, used for SCHEDULE_TOPIC_XXXX tag codes.
    pub message_delay_level: String,
    /// `warmMapedFileEnable`: pre-touch every page of a new CommitLog file.
    pub warm_mapped_file_enable: bool,
    /// `enableLmq`: light message queues (`%LMQ%` topics, queue 0) exist.
    pub enable_lmq: bool,
    /// `enableMultiDispatch`: a record whose `INNER_MULTI_DISPATCH` property names LMQs is also
    /// put in each of their ConsumeQueues (when `enableLmq` is on too). RocketMQ's default for
    /// both is off; rmq's is on, so lite topics (RocketMQ 5.x) work on a default broker.
    pub enable_multi_dispatch: bool,
    /// `brokerIP1:listenPort`, written as the store host of every record.
    pub store_host: SocketAddr,
}

impl Default for StoreConfig {
    fn default() -> Self {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."));
        StoreConfig {
            store_path_root_dir: home.join("store"),
            store_path_commit_log: None,
            store_path_consume_queue: None,
            store_path_index: None,
            store_checkpoint: None,
            abort_file: None,
            mapped_file_size_commit_log: 1024 * 1024 * 1024,
            mapped_file_size_consume_queue: 300_000 * CQ_UNIT_SIZE,
            flush_disk_type: FlushDiskType::AsyncFlush,
            flush_interval_commit_log: 500,
            flush_commit_log_least_pages: 4,
            flush_commit_log_thorough_interval: 10_000,
            sync_flush_timeout: 5_000,
            flush_interval_consume_queue: 1_000,
            flush_consume_queue_least_pages: 2,
            flush_consume_queue_thorough_interval: 60_000,
            max_message_size: 4 * 1024 * 1024,
            max_hash_slot_num: 5_000_000,
            max_index_num: 20_000_000,
            message_index_enable: true,
            message_index_safe: false,
            check_crc_on_recover: true,
            file_reserved_time: 72,
            delete_when: "04".to_string(),
            disk_max_used_space_ratio: 75,
            disk_space_clean_forcibly_ratio: 85,
            clean_file_forcibly_enable: true,
            disk_space_warning_level_ratio: 90,
            clean_resource_interval: 10_000,
            delete_commit_log_files_interval: 100,
            max_transfer_bytes_on_message_in_memory: 256 * 1024,
            max_transfer_count_on_message_in_memory: 32,
            message_delay_level: "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
                .to_string(),
            warm_mapped_file_enable: false,
            enable_lmq: true,
            enable_multi_dispatch: true,
            store_host: "127.0.0.1:10911".parse().expect("valid literal"),
        }
    }
}

fn parse_num<T: std::str::FromStr>(key: &str, value: &str) -> Result<T> {
    value
        .trim()
        .parse()
        .map_err(|_| StoreError::Config(format!("{key}: {value:?} is not a valid number")))
}

fn parse_bool(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(StoreError::Config(format!(
            "{key}: {value:?} is not true or false"
        ))),
    }
}

/// Parse RocketMQ's `messageDelayLevel` (`"1s 5s 10m 2h"`) into milliseconds per level.
pub fn parse_delay_levels(spec: &str) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for item in spec.split_whitespace() {
        let unit = item.chars().last().unwrap_or(' ');
        let num = &item[..item.len() - unit.len_utf8()];
        let factor = match unit {
            's' => 1_000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            _ => {
                return Err(StoreError::Config(format!(
                    "messageDelayLevel: {item:?} must end in s, m, h or d"
                )))
            }
        };
        let n: u64 = parse_num("messageDelayLevel", num)?;
        out.push(n * factor);
    }
    if out.is_empty() {
        return Err(StoreError::Config("messageDelayLevel is empty".into()));
    }
    Ok(out)
}

impl StoreConfig {
    /// A config rooted at `root` with all other values at their defaults.
    pub fn with_root(root: impl Into<PathBuf>) -> Self {
        StoreConfig {
            store_path_root_dir: root.into(),
            ..Default::default()
        }
    }

    /// The names [`StoreConfig::set`] accepts.
    pub const KEYS: &'static [&'static str] = &[
        "storePathRootDir",
        "storePathCommitLog",
        "storePathConsumeQueue",
        "storePathIndex",
        "storeCheckpoint",
        "abortFile",
        "mappedFileSizeCommitLog",
        "mappedFileSizeConsumeQueue",
        "flushDiskType",
        "flushIntervalCommitLog",
        "flushCommitLogLeastPages",
        "flushCommitLogThoroughInterval",
        "syncFlushTimeout",
        "flushIntervalConsumeQueue",
        "flushConsumeQueueLeastPages",
        "flushConsumeQueueThoroughInterval",
        "maxMessageSize",
        "maxHashSlotNum",
        "maxIndexNum",
        "messageIndexEnable",
        "messageIndexSafe",
        "checkCRCOnRecover",
        "fileReservedTime",
        "deleteWhen",
        "diskMaxUsedSpaceRatio",
        "diskSpaceWarningLevelRatio",
        "diskSpaceCleanForciblyRatio",
        "cleanFileForciblyEnable",
        "cleanResourceInterval",
        "deleteCommitLogFilesInterval",
        "maxTransferBytesOnMessageInMemory",
        "maxTransferCountOnMessageInMemory",
        "messageDelayLevel",
        "warmMapedFileEnable",
        "enableLmq",
        "enableMultiDispatch",
        "storeHost",
    ];

    /// Set one property by its RocketMQ name.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        match key {
            "storePathRootDir" => self.store_path_root_dir = PathBuf::from(value.trim()),
            "storePathCommitLog" => self.store_path_commit_log = Some(PathBuf::from(value.trim())),
            "storePathConsumeQueue" => {
                self.store_path_consume_queue = Some(PathBuf::from(value.trim()))
            }
            "storePathIndex" => self.store_path_index = Some(PathBuf::from(value.trim())),
            "storeCheckpoint" => self.store_checkpoint = Some(PathBuf::from(value.trim())),
            "abortFile" => self.abort_file = Some(PathBuf::from(value.trim())),
            "mappedFileSizeCommitLog" => self.mapped_file_size_commit_log = parse_num(key, value)?,
            "mappedFileSizeConsumeQueue" => {
                self.mapped_file_size_consume_queue = parse_num(key, value)?
            }
            "flushDiskType" => self.flush_disk_type = value.parse()?,
            "flushIntervalCommitLog" => self.flush_interval_commit_log = parse_num(key, value)?,
            "flushCommitLogLeastPages" => {
                self.flush_commit_log_least_pages = parse_num(key, value)?
            }
            "flushCommitLogThoroughInterval" => {
                self.flush_commit_log_thorough_interval = parse_num(key, value)?
            }
            "syncFlushTimeout" => self.sync_flush_timeout = parse_num(key, value)?,
            "flushIntervalConsumeQueue" => {
                self.flush_interval_consume_queue = parse_num(key, value)?
            }
            "flushConsumeQueueLeastPages" => {
                self.flush_consume_queue_least_pages = parse_num(key, value)?
            }
            "flushConsumeQueueThoroughInterval" => {
                self.flush_consume_queue_thorough_interval = parse_num(key, value)?
            }
            "maxMessageSize" => self.max_message_size = parse_num(key, value)?,
            "maxHashSlotNum" => self.max_hash_slot_num = parse_num(key, value)?,
            "maxIndexNum" => self.max_index_num = parse_num(key, value)?,
            "messageIndexEnable" => self.message_index_enable = parse_bool(key, value)?,
            "messageIndexSafe" => self.message_index_safe = parse_bool(key, value)?,
            "checkCRCOnRecover" => self.check_crc_on_recover = parse_bool(key, value)?,
            "fileReservedTime" => self.file_reserved_time = parse_num(key, value)?,
            "deleteWhen" => self.delete_when = value.trim().to_string(),
            "diskMaxUsedSpaceRatio" => self.disk_max_used_space_ratio = parse_num(key, value)?,
            "diskSpaceCleanForciblyRatio" => {
                self.disk_space_clean_forcibly_ratio = parse_num(key, value)?
            }
            "cleanFileForciblyEnable" => self.clean_file_forcibly_enable = parse_bool(key, value)?,
            "diskSpaceWarningLevelRatio" => {
                self.disk_space_warning_level_ratio = parse_num(key, value)?
            }
            "cleanResourceInterval" => self.clean_resource_interval = parse_num(key, value)?,
            "deleteCommitLogFilesInterval" => {
                self.delete_commit_log_files_interval = parse_num(key, value)?
            }
            "maxTransferBytesOnMessageInMemory" => {
                self.max_transfer_bytes_on_message_in_memory = parse_num(key, value)?
            }
            "maxTransferCountOnMessageInMemory" => {
                self.max_transfer_count_on_message_in_memory = parse_num(key, value)?
            }
            "messageDelayLevel" => {
                parse_delay_levels(value)?;
                self.message_delay_level = value.trim().to_string();
            }
            "warmMapedFileEnable" => self.warm_mapped_file_enable = parse_bool(key, value)?,
            "enableLmq" => self.enable_lmq = parse_bool(key, value)?,
            "enableMultiDispatch" => self.enable_multi_dispatch = parse_bool(key, value)?,
            "storeHost" => {
                self.store_host = value.trim().parse().map_err(|_| {
                    StoreError::Config(format!("storeHost: {value:?} is not ip:port"))
                })?
            }
            other => {
                return Err(StoreError::Config(format!(
                    "unknown store property {other:?}"
                )))
            }
        }
        Ok(())
    }

    /// Check cross-field constraints; called when the store opens.
    pub fn validate(&self) -> Result<()> {
        if self.mapped_file_size_commit_log < 4096 {
            return Err(StoreError::Config(
                "mappedFileSizeCommitLog must be at least 4096 bytes".into(),
            ));
        }
        if self.mapped_file_size_consume_queue < CQ_UNIT_SIZE
            || !self
                .mapped_file_size_consume_queue
                .is_multiple_of(CQ_UNIT_SIZE)
        {
            return Err(StoreError::Config(format!(
                "mappedFileSizeConsumeQueue must be a positive multiple of {CQ_UNIT_SIZE}"
            )));
        }
        if self.max_hash_slot_num == 0 || self.max_index_num < 2 {
            return Err(StoreError::Config(
                "maxHashSlotNum must be > 0 and maxIndexNum > 1".into(),
            ));
        }
        if self.disk_space_warning_level_ratio == 0 || self.disk_space_warning_level_ratio > 100 {
            return Err(StoreError::Config(
                "diskSpaceWarningLevelRatio must be within 1..=100".into(),
            ));
        }
        if self.disk_space_clean_forcibly_ratio == 0 || self.disk_space_clean_forcibly_ratio > 100 {
            return Err(StoreError::Config(
                "diskSpaceCleanForciblyRatio must be within 1..=100".into(),
            ));
        }
        parse_delay_levels(&self.message_delay_level)?;
        Ok(())
    }

    /// The CommitLog directory.
    pub fn commit_log_dir(&self) -> PathBuf {
        self.store_path_commit_log
            .clone()
            .unwrap_or_else(|| self.store_path_root_dir.join("commitlog"))
    }

    /// The ConsumeQueue root directory.
    pub fn consume_queue_dir(&self) -> PathBuf {
        self.store_path_consume_queue
            .clone()
            .unwrap_or_else(|| self.store_path_root_dir.join("consumequeue"))
    }

    /// The IndexFile directory.
    pub fn index_dir(&self) -> PathBuf {
        self.store_path_index
            .clone()
            .unwrap_or_else(|| self.store_path_root_dir.join("index"))
    }

    /// The checkpoint file.
    pub fn checkpoint_path(&self) -> PathBuf {
        self.store_checkpoint
            .clone()
            .unwrap_or_else(|| self.store_path_root_dir.join("checkpoint"))
    }

    /// The abort file, present while a store is open (its presence at open means a crash).
    pub fn abort_path(&self) -> PathBuf {
        self.abort_file
            .clone()
            .unwrap_or_else(|| self.store_path_root_dir.join("abort"))
    }

    /// Size of one IndexFile for the configured slot and entry counts.
    pub fn index_file_size(&self) -> u64 {
        40 + self.max_hash_slot_num as u64 * 4 + self.max_index_num as u64 * 20
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_known_and_reject_unknown() {
        let mut c = StoreConfig::default();
        c.set("flushDiskType", "SYNC_FLUSH").unwrap();
        assert_eq!(c.flush_disk_type, FlushDiskType::SyncFlush);
        c.set("mappedFileSizeCommitLog", "1048576").unwrap();
        assert_eq!(c.mapped_file_size_commit_log, 1 << 20);
        assert!(matches!(c.set("nope", "1"), Err(StoreError::Config(_))));
        assert!(matches!(
            c.set("maxMessageSize", "abc"),
            Err(StoreError::Config(_))
        ));
        assert!(c.set("flushDiskType", "SOMETIMES").is_err());
        for k in StoreConfig::KEYS {
            assert!(!k.is_empty());
        }
    }

    #[test]
    fn delay_levels() {
        let d = parse_delay_levels("1s 5s 1m 2h 1d").unwrap();
        assert_eq!(d, vec![1_000, 5_000, 60_000, 7_200_000, 86_400_000]);
        assert!(parse_delay_levels("5x").is_err());
        assert!(parse_delay_levels("").is_err());
        assert_eq!(
            parse_delay_levels(&StoreConfig::default().message_delay_level)
                .unwrap()
                .len(),
            18
        );
    }
}
