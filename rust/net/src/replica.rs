//! SYNC_MASTER on the fast path: what the network thread knows of the slave (the queues of
//! answers waiting for a slave's acknowledgement and for the flush are [`crate::held`]).
//!
//! The HA master (Python) reports every higher offset a slave acknowledged
//! ([`Replication::set_acked`], one call per ack report, never per message) and whether a slave
//! is connected ([`Replication::set_connected`], when it changes). A send the fast path stored
//! is then answered as the Python path answers it (`ReplicaResponder`, `_replicate`): SEND_OK
//! once a slave acknowledged its record's end (and, with SYNC_FLUSH, the flush covers it),
//! FLUSH_SLAVE_TIMEOUT when no slave did within `slaveTimeout`, SLAVE_NOT_AVAILABLE at once
//! when no slave is connected or it lags `haSlaveFallbehindMax` or more. The refusals are
//! counted for the Python side to warn about ([`Replication::take_report`]).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// The longest `slaveTimeout` honoured (a century: longer ones wait as long).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// What ended a held answer's wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Everything it waited for happened: its answer (SEND_OK, or SLAVE_NOT_AVAILABLE once
    /// flushed).
    Done,
    /// The flush did not cover it within the flush timeout: FLUSH_DISK_TIMEOUT.
    FlushTimeout,
    /// No slave acknowledged it within `slaveTimeout`: FLUSH_SLAVE_TIMEOUT.
    SlaveTimeout,
}

/// The slave's state as the HA master reported it, and the SYNC_MASTER settings.
#[derive(Debug)]
pub struct Replication {
    /// The highest offset a slave acknowledged (`push2SlaveMaxOffset`).
    acked: AtomicI64,
    connected: AtomicBool,
    /// `haSlaveFallbehindMax`.
    fallbehind_max: i64,
    /// `slaveTimeout`.
    timeout: Duration,
    timeouts: AtomicU64,
    no_slave: AtomicU64,
    lagging: AtomicU64,
    /// The last lagging refusal: the record's end and what the slave had acknowledged.
    lag_end: AtomicI64,
    lag_acked: AtomicI64,
}

/// SYNC_MASTER answers the fast path gave other than SEND_OK since the last report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaReport {
    /// FLUSH_SLAVE_TIMEOUT answers.
    pub timeouts: u64,
    /// SLAVE_NOT_AVAILABLE answers with no slave connected.
    pub no_slave: u64,
    /// SLAVE_NOT_AVAILABLE answers with the slave lagging.
    pub lagging: u64,
    /// The last lagging one's record end and the offset the slave had acknowledged then.
    pub lag_end: i64,
    pub lag_acked: i64,
}

impl Replication {
    /// Count an answer held for a slave that acknowledged nothing within `slaveTimeout`.
    pub fn note_timeout(&self) {
        self.timeouts.fetch_add(1, Ordering::Relaxed);
    }

    /// `timeout` is capped at [`MAX_TIMEOUT`] (deadlines stay representable).
    pub fn new(fallbehind_max: i64, timeout: Duration) -> Replication {
        Replication {
            acked: AtomicI64::new(0),
            connected: AtomicBool::new(false),
            fallbehind_max,
            timeout: timeout.min(MAX_TIMEOUT),
            timeouts: AtomicU64::new(0),
            no_slave: AtomicU64::new(0),
            lagging: AtomicU64::new(0),
            lag_end: AtomicI64::new(0),
            lag_acked: AtomicI64::new(0),
        }
    }

    /// A slave acknowledged the CommitLog up to `offset` (a lower offset than known is ignored).
    pub fn set_acked(&self, offset: i64) {
        self.acked.fetch_max(offset, Ordering::AcqRel);
    }

    pub fn acked(&self) -> i64 {
        self.acked.load(Ordering::Acquire)
    }

    /// Whether a slave is connected.
    pub fn set_connected(&self, connected: bool) {
        self.connected.store(connected, Ordering::Release);
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether a send whose record ends at `end` waits for a slave (a slave is connected and
    /// lags less than `haSlaveFallbehindMax`, as the HA master's `is_slave_ok`); if not, the
    /// refusal is counted.
    pub(crate) fn admit(&self, end: i64) -> bool {
        let acked = self.acked();
        if !self.connected.load(Ordering::Acquire) {
            self.no_slave.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        if end - acked >= self.fallbehind_max {
            self.lag_end.store(end, Ordering::Relaxed);
            self.lag_acked.store(acked, Ordering::Relaxed);
            self.lagging.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// The refusals since the last call (counted from zero again).
    pub fn take_report(&self) -> ReplicaReport {
        ReplicaReport {
            timeouts: self.timeouts.swap(0, Ordering::Relaxed),
            no_slave: self.no_slave.swap(0, Ordering::Relaxed),
            lagging: self.lagging.swap(0, Ordering::Relaxed),
            lag_end: self.lag_end.load(Ordering::Relaxed),
            lag_acked: self.lag_acked.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slave_is_admitted_only_when_connected_and_keeping_up() {
        let r = Replication::new(100, Duration::from_secs(1));
        assert!(!r.admit(10));
        r.set_connected(true);
        assert!(r.admit(99));
        assert!(!r.admit(100));
        r.set_acked(50);
        assert!(r.admit(149));
        let report = r.take_report();
        assert_eq!((report.no_slave, report.lagging), (1, 1));
        assert_eq!((report.lag_end, report.lag_acked), (100, 0));
        let long = Replication::new(1, Duration::MAX);
        assert_eq!(long.timeout(), MAX_TIMEOUT);
    }
}
