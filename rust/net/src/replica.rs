//! SYNC_MASTER on the fast path: what the network thread knows of the slave, and the queues of
//! answers waiting for a slave's acknowledgement and for the flush.
//!
//! The HA master (Python) reports every higher offset a slave acknowledged
//! ([`Replication::set_acked`], one call per ack report, never per message) and whether a slave
//! is connected ([`Replication::set_connected`], when it changes). A send the fast path stored
//! is then answered as the Python path answers it (`ReplicaResponder`, `_replicate`): SEND_OK
//! once a slave acknowledged its record's end (and, with SYNC_FLUSH, the flush covers it),
//! FLUSH_SLAVE_TIMEOUT when no slave did within `slaveTimeout`, SLAVE_NOT_AVAILABLE at once
//! when no slave is connected or it lags `haSlaveFallbehindMax` or more. The refusals are
//! counted for the Python side to warn about ([`Replication::take_report`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::send::{FastSend, Held};

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

/// Where released answers go: the output buffer of a connection.
pub trait Replies {
    fn buffer(&mut self, conn: u64) -> Option<&mut Vec<u8>>;
}

struct Waiting {
    held: Held,
    conn: u64,
    deadline: Instant,
}

/// The network thread's held answers: those waiting for a slave's acknowledgement (in append
/// order, so ends and deadlines both ascend) and those waiting for the flush. Each is released
/// as a prefix, like a group commit.
#[derive(Default)]
pub struct Waiters {
    replica: VecDeque<Waiting>,
    flush: VecDeque<Waiting>,
}

impl Waiters {
    pub fn is_empty(&self) -> bool {
        self.replica.is_empty() && self.flush.is_empty()
    }

    pub fn clear(&mut self) {
        self.replica.clear();
        self.flush.clear();
    }

    /// Hold an answer of `conn`: for a slave first when it waits for one, else for the flush.
    pub fn push(&mut self, held: Held, conn: u64, now: Instant, fast: &FastSend, flush: Duration) {
        match fast.replication().filter(|_| held.replica) {
            Some(r) => self.replica.push_back(Waiting {
                held,
                conn,
                deadline: now + r.timeout(),
            }),
            None => self.flush.push_back(Waiting {
                held,
                conn,
                deadline: now + flush,
            }),
        }
    }

    /// When the poller must wake up at the latest to answer a timed-out wait.
    pub fn next_deadline(&self) -> Option<Instant> {
        let a = self.replica.front().map(|w| w.deadline);
        let b = self.flush.front().map(|w| w.deadline);
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Answer what may be answered now: `out.buffer(conn)` is where an answer to `conn` is
    /// appended (None: the connection is gone). An answer a slave acknowledged that still
    /// waits for the flush moves to the flush queue (its flush timeout starting now, as the
    /// Python path hands it to its flush responder).
    pub fn release(
        &mut self,
        fast: &FastSend,
        now: Instant,
        flush_timeout: Duration,
        out: &mut impl Replies,
    ) {
        if let Some(r) = fast.replication() {
            let acked = r.acked();
            let mut flushed = None;
            while let Some(w) = self.replica.front() {
                let done = w.held.end <= acked;
                if !done && w.deadline > now {
                    break;
                }
                let mut w = self.replica.pop_front().expect("front exists");
                if !done {
                    r.timeouts.fetch_add(1, Ordering::Relaxed);
                    if let Some(o) = out.buffer(w.conn) {
                        fast.held_reply(&w.held, Release::SlaveTimeout, o);
                    }
                    continue;
                }
                let flushed = *flushed.get_or_insert_with(|| fast.store().flushed_offset());
                if w.held.flush && flushed < w.held.end {
                    w.held.replica = false;
                    w.deadline = now + flush_timeout;
                    self.flush.push_back(w);
                } else if let Some(o) = out.buffer(w.conn) {
                    fast.held_reply(&w.held, Release::Done, o);
                }
            }
        }
        if self.flush.is_empty() {
            return;
        }
        let flushed = fast.store().flushed_offset();
        // Mostly in append order: release the durable prefix (one that entered later with a
        // higher end only delays those behind it until it is durable or times out).
        while let Some(w) = self.flush.front() {
            let timed_out = w.held.end > flushed;
            if timed_out && w.deadline > now {
                break;
            }
            let w = self.flush.pop_front().expect("front exists");
            if let Some(o) = out.buffer(w.conn) {
                let how = if timed_out {
                    Release::FlushTimeout
                } else {
                    Release::Done
                };
                fast.held_reply(&w.held, how, o);
            }
        }
    }
}
