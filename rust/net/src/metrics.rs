//! What the SEND fast path stored, per topic, and how long it and the PULL fast path took to answer, for the broker's
//! Prometheus metrics (RocketMQ 5.x's `rocketmq_messages_in_total`,
//! `rocketmq_throughput_in_total`, `rocketmq_message_size`, `rocketmq_rpc_latency`).
//!
//! The network thread counts with relaxed atomics as it stores (a few additions per message, no
//! lock: each vetted topic's route holds its [`TopicIn`]); the broker reads a [`MetricsSnapshot`]
//! when it is scraped. Python-path sends are counted by the Python side; the two add up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the message size histogram in bytes (RocketMQ 5.x's buckets: 1 KiB, 4 KiB,
/// 512 KiB, 1 MiB, 2 MiB, 4 MiB), then one bucket for the larger ones.
pub const SIZE_BOUNDS: [u64; 6] = [1 << 10, 4 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20];
/// Upper bounds of the latency histogram in milliseconds (RocketMQ 5.x's `rocketmq_rpc_latency`
/// buckets: 1, 3, 5, 10, 100 ms, 1 s, 3 s), then one bucket for the slower ones.
pub const LATENCY_BOUNDS_MS: [u64; 7] = [1, 3, 5, 10, 100, 1000, 3000];

/// Request codes the fast path answers, in [`MetricsSnapshot::latency`] order.
const CODES: [i32; 5] = [
    crate::header::SEND_MESSAGE,
    crate::header::SEND_MESSAGE_V2,
    crate::header::SEND_BATCH_MESSAGE,
    crate::codes::PULL_MESSAGE,
    crate::codes::LITE_PULL_MESSAGE,
];
/// Response codes it answers with: SUCCESS, FLUSH_DISK_TIMEOUT.
const RESPONSES: [i32; 2] = [crate::codes::SUCCESS, crate::codes::FLUSH_DISK_TIMEOUT];
/// Pull codes whose held answers (long polling) are timed apart, and their responses: FOUND,
/// PULL_NOT_FOUND.
const HELD_CODES: [i32; 2] = [crate::codes::PULL_MESSAGE, crate::codes::LITE_PULL_MESSAGE];
const HELD_RESPONSES: [i32; 2] = [crate::codes::SUCCESS, 19];

/// Add `n` to a counter only the network thread writes (anyone may read it): a plain load and
/// store, not a locked read-modify-write, which costs several times more per send. With one
/// writer no increment is lost, and a reader sees each counter's latest value as before.
#[inline]
pub(crate) fn bump(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

fn bucket(bounds: &[u64], v: u64) -> usize {
    bounds.iter().position(|b| v <= *b).unwrap_or(bounds.len())
}

/// Messages one topic received through the fast path.
#[derive(Default, Debug)]
pub struct TopicIn {
    messages: AtomicU64,
    bytes: AtomicU64,
    sizes: [AtomicU64; SIZE_BOUNDS.len() + 1],
}

impl TopicIn {
    /// Count one stored message of `size` bytes (its CommitLog record). One thread only writes
    /// these counts (the network thread owning them: they are bumped without locked updates).
    pub fn add(&self, size: u64) {
        bump(&self.messages, 1);
        bump(&self.bytes, size);
        bump(&self.sizes[bucket(&SIZE_BOUNDS, size)], 1);
    }

    fn snapshot(&self, topic: &str, message_type: &'static str) -> TopicInSnapshot {
        TopicInSnapshot {
            topic: topic.to_string(),
            message_type,
            messages: self.messages.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            sizes: std::array::from_fn(|i| self.sizes[i].load(Ordering::Relaxed)),
        }
    }
}

/// A copy of one topic's [`TopicIn`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInSnapshot {
    pub topic: String,
    /// RocketMQ 5.x's `message_type` label: `normal`, or `transaction` (half messages).
    pub message_type: &'static str,
    pub messages: u64,
    /// Sum of the stored records' sizes.
    pub bytes: u64,
    /// Messages per size bucket ([`SIZE_BOUNDS`], then larger), not cumulative.
    pub sizes: [u64; SIZE_BOUNDS.len() + 1],
}

#[derive(Default, Debug)]
struct Histogram {
    buckets: [AtomicU64; LATENCY_BOUNDS_MS.len() + 1],
    sum_us: AtomicU64,
}

impl Histogram {
    fn add(&self, took: Duration) {
        let us = took.as_micros().min(u64::MAX as u128) as u64;
        // A bound of n ms holds the answers that took at most n ms.
        bump(
            &self.buckets[bucket(&LATENCY_BOUNDS_MS, us.div_ceil(1000))],
            1,
        );
        bump(&self.sum_us, us);
    }

    fn snapshot(&self, code: i32, response: i32, long_polling: bool) -> Option<LatencySnapshot> {
        let buckets: [u64; LATENCY_BOUNDS_MS.len() + 1] =
            std::array::from_fn(|i| self.buckets[i].load(Ordering::Relaxed));
        buckets.iter().any(|n| *n > 0).then(|| LatencySnapshot {
            code,
            response,
            long_polling,
            buckets,
            sum_us: self.sum_us.load(Ordering::Relaxed),
        })
    }
}

/// How long the fast path took to answer, per request code and response code.
#[derive(Default, Debug)]
pub struct Latency {
    by: [[Histogram; RESPONSES.len()]; CODES.len()],
    /// Held pulls' answers (from the pull's arrival: its wait included).
    held: [[Histogram; HELD_RESPONSES.len()]; HELD_CODES.len()],
}

impl Latency {
    /// Record one answer to `code` with `response` that took `took` (from the request being
    /// read to its answer being queued; a SYNC_FLUSH answer includes the wait for the flush).
    /// Called by one thread only, the network thread owning these histograms (they are bumped
    /// without locked updates).
    pub fn record(&self, code: i32, response: i32, took: Duration) {
        let (Some(c), Some(r)) = (
            CODES.iter().position(|x| *x == code),
            RESPONSES.iter().position(|x| *x == response),
        ) else {
            return;
        };
        self.by[c][r].add(took);
    }

    /// Record one answer to a pull the network thread held (long polling).
    pub fn record_held(&self, code: i32, response: i32, took: Duration) {
        let (Some(c), Some(r)) = (
            HELD_CODES.iter().position(|x| *x == code),
            HELD_RESPONSES.iter().position(|x| *x == response),
        ) else {
            return;
        };
        self.held[c][r].add(took);
    }

    fn snapshot(&self) -> Vec<LatencySnapshot> {
        let mut out = Vec::new();
        for (c, code) in CODES.iter().enumerate() {
            for (r, response) in RESPONSES.iter().enumerate() {
                out.extend(self.by[c][r].snapshot(*code, *response, false));
            }
        }
        for (c, code) in HELD_CODES.iter().enumerate() {
            for (r, response) in HELD_RESPONSES.iter().enumerate() {
                out.extend(self.held[c][r].snapshot(*code, *response, true));
            }
        }
        out
    }
}

/// A copy of one (request code, response code) latency histogram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencySnapshot {
    pub code: i32,
    pub response: i32,
    /// A held pull's answer (RocketMQ 5.x's `is_long_polling`).
    pub long_polling: bool,
    /// Answers per bucket ([`LATENCY_BOUNDS_MS`], then slower), not cumulative.
    pub buckets: [u64; LATENCY_BOUNDS_MS.len() + 1],
    pub sum_us: u64,
}

/// The fast path's figures at one moment: per topic (every topic it was ever allowed to take,
/// plain messages; and its half messages, once it took one) and per request code (only those
/// it answered).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricsSnapshot {
    pub topics: Vec<TopicInSnapshot>,
    pub latency: Vec<LatencySnapshot>,
}

/// A topic's counters: plain messages, transactional half messages.
pub(crate) type TopicCounters = (std::sync::Arc<TopicIn>, std::sync::Arc<TopicIn>);

pub(crate) fn snapshot<'a>(
    topics: impl Iterator<Item = (&'a String, &'a TopicCounters)>,
    latency: &Latency,
) -> MetricsSnapshot {
    let mut out = Vec::new();
    for (t, (plain, half)) in topics {
        out.push(plain.snapshot(t, "normal"));
        let h = half.snapshot(t, "transaction");
        if h.messages > 0 {
            out.push(h);
        }
    }
    MetricsSnapshot {
        topics: out,
        latency: latency.snapshot(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_fall_in_rocketmq_buckets() {
        let t = TopicIn::default();
        for size in [1, 1024, 1025, 4096, 600 << 10, 5 << 20] {
            t.add(size);
        }
        let s = t.snapshot("T", "normal");
        assert_eq!(s.messages, 6);
        assert_eq!(s.bytes, 1 + 1024 + 1025 + 4096 + (600 << 10) + (5 << 20));
        assert_eq!(s.sizes, [2, 2, 0, 1, 0, 0, 1]);
    }

    #[test]
    fn latency_per_code_and_response() {
        let l = Latency::default();
        l.record(310, 0, Duration::from_micros(400));
        l.record(310, 0, Duration::from_millis(2));
        l.record(320, 10, Duration::from_secs(5));
        l.record(12, 0, Duration::from_millis(1)); // not a fast-path code: ignored
        let s = l.snapshot();
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].code, s[0].response), (310, 0));
        assert_eq!(s[0].buckets, [1, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(s[0].sum_us, 2400);
        assert_eq!((s[1].code, s[1].response), (320, 10));
        assert_eq!(s[1].buckets, [0, 0, 0, 0, 0, 0, 0, 1]);
        assert!(!s[0].long_polling && !s[1].long_polling);

        // Held pulls' answers are timed apart (FOUND and PULL_NOT_FOUND).
        l.record_held(11, 19, Duration::from_secs(2));
        l.record_held(11, 0, Duration::from_millis(50));
        l.record_held(11, 21, Duration::from_millis(50)); // not an answer it gives: ignored
        let s = l.snapshot();
        assert_eq!(s.len(), 4);
        assert_eq!((s[2].code, s[2].response, s[2].long_polling), (11, 0, true));
        assert_eq!(s[2].buckets, [0, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(
            (s[3].code, s[3].response, s[3].long_polling),
            (11, 19, true)
        );
        assert_eq!(s[3].buckets, [0, 0, 0, 0, 0, 0, 1, 0]);
    }
}
