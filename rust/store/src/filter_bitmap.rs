//! Per-message SQL92 filter bitmaps (the role of RocketMQ's ConsumeQueueExt bit maps).
//!
//! For each topic with registered SQL92 subscriptions (key `group#topic`), the dispatcher
//! evaluates every registered expression once per message and keeps the resulting bloom
//! bitmap beside the message's ConsumeQueue unit. A pull then rejects most non-matching
//! messages by testing a few bits, without reading the CommitLog record; messages the bloom
//! passes are evaluated exactly.
//!
//! The bitmaps live in memory only (a bounded ring per queue, [`MAX_BITMAPS_PER_QUEUE`]
//! entries): after a restart, or for messages dispatched before a subscription was
//! registered, a pull simply evaluates the expression on the record.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use parking_lot::RwLock;
use rmq_filter::{BloomFilter, FilterSet, Sql92Filter};

/// Bitmaps kept per queue before the oldest are dropped.
pub const MAX_BITMAPS_PER_QUEUE: usize = 1 << 20;

struct Ring {
    /// Queue offset of the first bitmap held.
    first: i64,
    width: usize,
    data: VecDeque<u8>,
}

impl Ring {
    fn len(&self) -> i64 {
        (self.data.len() / self.width.max(1)) as i64
    }
}

struct TopicFilters {
    set: FilterSet,
    /// CommitLog offset from which each key's bits are present.
    since: HashMap<String, i64>,
    queues: HashMap<i32, Ring>,
}

/// The bitmaps of every topic with SQL92 subscriptions.
#[derive(Default)]
pub struct FilterBitmaps {
    topics: RwLock<HashMap<String, TopicFilters>>,
    /// Fast path for the dispatcher: no topic has filters.
    any: std::sync::atomic::AtomicBool,
}

impl FilterBitmaps {
    /// Register (or replace) the filter `key` of `topic`; its bits are computed for messages
    /// dispatched from `dispatched_offset` on.
    pub fn register(
        &self,
        topic: &str,
        key: &str,
        filter: Arc<Sql92Filter>,
        dispatched_offset: i64,
    ) {
        let mut topics = self.topics.write();
        let tf = topics
            .entry(topic.to_string())
            .or_insert_with(|| TopicFilters {
                set: FilterSet::new(BloomFilter::default()),
                since: HashMap::new(),
                queues: HashMap::new(),
            });
        let replaced = tf
            .set
            .get(key)
            .map(|e| e.filter.expression() != filter.expression())
            .unwrap_or(true);
        tf.set.insert(key.to_string(), filter);
        if replaced {
            tf.since.insert(key.to_string(), dispatched_offset);
        }
        self.any.store(true, std::sync::atomic::Ordering::Release);
    }

    pub fn unregister(&self, topic: &str, key: &str) {
        let mut topics = self.topics.write();
        if let Some(tf) = topics.get_mut(topic) {
            tf.set.remove(key);
            tf.since.remove(key);
            if tf.set.is_empty() {
                topics.remove(topic);
            }
        }
        self.any
            .store(!topics.is_empty(), std::sync::atomic::Ordering::Release);
    }

    /// Whether `topic` has registered filters (checked by the dispatcher per record).
    pub fn has_topic(&self, topic: &str) -> bool {
        self.any.load(std::sync::atomic::Ordering::Acquire)
            && self.topics.read().contains_key(topic)
    }

    /// Compute and keep the bitmap of a dispatched message.
    pub fn on_dispatch(&self, topic: &str, queue_id: i32, queue_offset: i64, properties: &str) {
        let mut topics = self.topics.write();
        let Some(tf) = topics.get_mut(topic) else {
            return;
        };
        let bitmap = tf.set.compute_bitmap(properties);
        let width = bitmap.len();
        if width == 0 {
            return;
        }
        let ring = tf.queues.entry(queue_id).or_insert_with(|| Ring {
            first: queue_offset,
            width,
            data: VecDeque::new(),
        });
        if ring.width != width || queue_offset != ring.first + ring.len() {
            // The shape changed or the offsets are not contiguous (re-dispatch): start over.
            ring.first = queue_offset;
            ring.width = width;
            ring.data.clear();
        }
        ring.data.extend(bitmap);
        if ring.data.len() > MAX_BITMAPS_PER_QUEUE * width {
            ring.data.drain(..width);
            ring.first += 1;
        }
    }

    /// False only when the bitmap proves the message at (`queue_offset`, `commitlog_offset`)
    /// does not match filter `key`; true when it may match or nothing is known.
    pub fn may_match(
        &self,
        topic: &str,
        key: &str,
        queue_id: i32,
        queue_offset: i64,
        commitlog_offset: i64,
    ) -> bool {
        let topics = self.topics.read();
        let Some(tf) = topics.get(topic) else {
            return true;
        };
        match tf.since.get(key) {
            Some(&since) if commitlog_offset >= since => {}
            _ => return true,
        }
        let Some(entry) = tf.set.get(key) else {
            return true;
        };
        let Some(ring) = tf.queues.get(&queue_id) else {
            return true;
        };
        if queue_offset < ring.first || queue_offset >= ring.first + ring.len() {
            return true;
        }
        let start = ((queue_offset - ring.first) as usize) * ring.width;
        let mut bitmap = [0u8; 64];
        let w = ring.width.min(64);
        for (i, b) in bitmap.iter_mut().take(w).enumerate() {
            *b = ring.data[start + i];
        }
        entry.positions.may_match(&bitmap[..w])
    }

    pub fn remove_topic(&self, topic: &str) {
        self.topics.write().remove(topic);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmaps_reject_non_matching_and_defer_unknown() {
        let fb = FilterBitmaps::default();
        let f = Arc::new(Sql92Filter::compile("a > 5 AND b = 'x'").unwrap());
        fb.register("T", "G#T", f, 100);
        assert!(fb.has_topic("T") && !fb.has_topic("U"));
        fb.on_dispatch("T", 0, 0, "a\u{1}9\u{2}b\u{1}x");
        fb.on_dispatch("T", 0, 1, "a\u{1}1\u{2}b\u{1}x");
        assert!(fb.may_match("T", "G#T", 0, 0, 100));
        assert!(!fb.may_match("T", "G#T", 0, 1, 200));
        // Before registration, other keys, other queues, unknown offsets: no verdict.
        assert!(fb.may_match("T", "G#T", 0, 1, 50));
        assert!(fb.may_match("T", "H#T", 0, 1, 200));
        assert!(fb.may_match("T", "G#T", 3, 1, 200));
        assert!(fb.may_match("T", "G#T", 0, 7, 200));
        fb.unregister("T", "G#T");
        assert!(!fb.has_topic("T"));
    }
}
