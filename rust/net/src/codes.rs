//! The Remoting response codes the network thread answers with (RocketMQ's `ResponseCode`), the
//! request codes its pull and end-transaction paths take, and the system topics it writes to.

/// SUCCESS.
pub const SUCCESS: i32 = 0;
/// The flush did not cover the record within the flush timeout (SYNC_FLUSH).
pub const FLUSH_DISK_TIMEOUT: i32 = 10;
/// SYNC_MASTER: no slave connected, or it lags `haSlaveFallbehindMax` or more.
pub const SLAVE_NOT_AVAILABLE: i32 = 11;
/// SYNC_MASTER: no slave acknowledged the record within `slaveTimeout`.
pub const FLUSH_SLAVE_TIMEOUT: i32 = 12;

/// PULL_MESSAGE.
pub const PULL_MESSAGE: i32 = 11;
/// LITE_PULL_MESSAGE: the 5.x clients' code for a lite pull (the same request and answer).
pub const LITE_PULL_MESSAGE: i32 = 361;
/// END_TRANSACTION.
pub const END_TRANSACTION: i32 = 37;

/// Where a transactional half message waits for its producer's decision.
pub const TRANS_HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Where the decisions of half messages are recorded.
pub const TRANS_OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
