//! The Remoting response codes the network thread answers with (RocketMQ's `ResponseCode`).

/// SUCCESS.
pub const SUCCESS: i32 = 0;
/// The flush did not cover the record within the flush timeout (SYNC_FLUSH).
pub const FLUSH_DISK_TIMEOUT: i32 = 10;
/// SYNC_MASTER: no slave connected, or it lags `haSlaveFallbehindMax` or more.
pub const SLAVE_NOT_AVAILABLE: i32 = 11;
/// SYNC_MASTER: no slave acknowledged the record within `slaveTimeout`.
pub const FLUSH_SLAVE_TIMEOUT: i32 = 12;
