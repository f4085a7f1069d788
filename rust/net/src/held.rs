//! The network thread's held answers: sends it stored that may be answered only once a slave
//! acknowledged their records (SYNC_MASTER, [`crate::replica`]) and, with SYNC_FLUSH, once the
//! flush covers them. [`Waiters`] keeps them in two queues and answers each as a prefix, like a
//! group commit; the event loop ([`crate::server`]) gives it the connections' output buffers.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::replica::Release;
use crate::send::{FastSend, Held};

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
    /// How many answers wait, for the slave or the flush.
    pub fn len(&self) -> usize {
        self.replica.len() + self.flush.len()
    }

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
                    r.note_timeout();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes::{FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE};
    use crate::replica::Replication;
    use crate::send::FastSendConfig;
    use rmq_store::{MessageStore, StoreConfig};
    use std::collections::HashMap;
    use std::sync::Arc;

    /// Offsets far beyond anything stored or flushed.
    const FAR: i64 = 1 << 40;

    #[derive(Default)]
    struct Out(HashMap<u64, Vec<u8>>);

    impl Replies for Out {
        fn buffer(&mut self, conn: u64) -> Option<&mut Vec<u8>> {
            Some(self.0.entry(conn).or_default())
        }
    }

    impl Out {
        /// `(code, opaque, remark)` of the answers to `conn`, taken.
        fn take(&mut self, conn: u64) -> Vec<(i64, i64, String)> {
            let mut data = self.0.remove(&conn).unwrap_or_default();
            let mut out = Vec::new();
            while !data.is_empty() {
                let len = i32::from_be_bytes(data[..4].try_into().unwrap()) as usize;
                let hlen = (u32::from_be_bytes(data[4..8].try_into().unwrap()) & 0xFFFFFF) as usize;
                let h: serde_json::Value = serde_json::from_slice(&data[8..8 + hlen]).unwrap();
                let remark = h["remark"].as_str().unwrap_or("").to_string();
                out.push((
                    h["code"].as_i64().unwrap(),
                    h["opaque"].as_i64().unwrap(),
                    remark,
                ));
                data.drain(..4 + len);
            }
            out
        }
    }

    fn held(end: i64, replica: bool, flush: bool, response: i32, opaque: i32) -> Held {
        Held {
            end,
            replica,
            flush,
            response,
            opaque,
            ext: crate::send::AnswerExt::Json("{\"msgId\":\"x\"}".into()),
            code: 310,
            started: Instant::now(),
        }
    }

    #[test]
    fn answers_wait_for_the_slave_then_the_flush_each_with_its_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = StoreConfig::default();
        cfg.set("storePathRootDir", dir.path().to_str().unwrap())
            .unwrap();
        let store = Arc::new(MessageStore::open(cfg).unwrap());
        let slave_timeout = Duration::from_secs(3600);
        let flush_timeout = Duration::from_secs(10);
        let fast = FastSend::new(
            store.clone(),
            FastSendConfig {
                cluster_name: "C".into(),
                region_id: "R".into(),
                trace_on: false,
                max_body: 1024,
                version: 409,
            },
        )
        .sync_master(Replication::new(1 << 20, slave_timeout));
        let r = fast.replication().unwrap();
        let mut w = Waiters::default();
        let mut out = Out::default();
        let t0 = Instant::now();

        // Waits for the slave, then for the flush (its flush timeout starting at the ack).
        w.push(held(FAR, true, true, 0, 1), 7, t0, &fast, flush_timeout);
        // Waits for a slave that never acknowledges it.
        w.push(
            held(FAR + 1, true, false, 0, 2),
            8,
            t0,
            &fast,
            flush_timeout,
        );
        // SLAVE_NOT_AVAILABLE waiting for a flush that covers it already.
        w.push(
            held(0, false, true, SLAVE_NOT_AVAILABLE, 3),
            9,
            t0,
            &fast,
            flush_timeout,
        );
        assert_eq!(w.next_deadline(), Some(t0 + flush_timeout));
        w.release(&fast, t0, flush_timeout, &mut out);
        assert_eq!(
            out.take(9),
            vec![(SLAVE_NOT_AVAILABLE as i64, 3, String::new())]
        );
        assert!(out.0.is_empty(), "nothing acknowledged yet");
        assert_eq!(w.next_deadline(), Some(t0 + slave_timeout));

        let t1 = t0 + Duration::from_secs(1);
        r.set_acked(FAR);
        r.set_acked(FAR - 5); // a lower report changes nothing
        assert_eq!(r.acked(), FAR);
        w.release(&fast, t1, flush_timeout, &mut out);
        assert!(out.0.is_empty(), "acknowledged, not flushed");
        assert_eq!(w.next_deadline(), Some(t1 + flush_timeout));
        w.release(&fast, t1 + flush_timeout, flush_timeout, &mut out);
        let remark = "flush to disk timed out".to_string();
        assert_eq!(out.take(7), vec![(FLUSH_DISK_TIMEOUT as i64, 1, remark)]);

        w.release(&fast, t0 + slave_timeout, flush_timeout, &mut out);
        assert_eq!(
            out.take(8),
            vec![(FLUSH_SLAVE_TIMEOUT as i64, 2, String::new())]
        );
        assert!(w.is_empty());
        assert_eq!(r.take_report().timeouts, 1);
        assert_eq!(r.take_report().timeouts, 0, "counted from zero again");
        store.shutdown().unwrap();
    }
}
