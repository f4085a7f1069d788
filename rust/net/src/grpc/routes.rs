//! What the gRPC port's own calls (SendMessage, ReceiveMessage, AckMessage) need from their owner,
//! the Python endpoint: the writable queues and the masters of each topic it has looked up, the
//! consumers' settings, the property names a 5.x user property may not take and those a consumer
//! is not shown, and whether the port may serve calls at all (not when the endpoint checks ACL
//! signatures). What it did is counted here too, with the latency of its answers in 5.x's
//! `rocketmq_rpc_latency` buckets; messages it found due for the dead-letter queue wait here for
//! the endpoint.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

/// Bucket bounds in milliseconds of `rocketmq_rpc_latency` (python/rmq/remoting/latency.py); a
/// row has one count per bound, one for the slower answers, and the sum in milliseconds.
pub const LATENCY_BOUNDS_MS: [f64; 7] = [1.0, 3.0, 5.0, 10.0, 100.0, 1000.0, 3000.0];

/// One writable queue of a topic: its broker group, its id and the group master's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteQueue {
    pub broker_name: String,
    pub queue_id: i32,
    pub addr: String,
}

/// A topic's writable queues, taken in turn.
#[derive(Debug)]
pub struct TopicQueues {
    queues: Vec<WriteQueue>,
    cursor: AtomicU32,
}

impl TopicQueues {
    /// The next queue, round robin (as the endpoint's own `select_queue` does without a group).
    pub fn next(&self) -> &WriteQueue {
        let n = self.cursor.fetch_add(1, Ordering::Relaxed).wrapping_add(1) & 0x7FFF_FFFF;
        &self.queues[n as usize % self.queues.len()]
    }
}

/// What the endpoint knows of a consumer, by its client id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientFacts {
    /// Its group consumes orderly (POP in order).
    pub fifo: bool,
    /// Deliveries of one message before the dead-letter queue (0: not told).
    pub max_attempts: i32,
    /// A lite consumer (its receives stay the endpoint's).
    pub lite: bool,
}

/// A message a receive found delivered `max_attempts` times already: not delivered, left for the
/// endpoint to forward to the dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub group: String,
    pub topic: String,
    pub receipt_handle: String,
    pub message_id: String,
}

/// Calls of one kind the port answered itself and passed on.
#[derive(Default)]
pub struct Counts {
    pub served: AtomicU64,
    pub passed_on: AtomicU64,
}

/// The calls the port serves itself and what it counted.
#[derive(Default)]
pub struct FastSends {
    enabled: AtomicBool,
    topics: RwLock<HashMap<String, Arc<TopicQueues>>>,
    masters: RwLock<HashMap<String, Arc<HashMap<String, String>>>>,
    clients: RwLock<HashMap<String, ClientFacts>>,
    system_names: RwLock<HashSet<String>>,
    hidden_names: RwLock<HashSet<String>>,
    dead_letters: Mutex<Vec<DeadLetter>>,
    /// SendMessage calls answered by the port itself.
    pub served: AtomicU64,
    /// SendMessage calls passed on to the upstream server (something the port does not serve).
    pub passed_on: AtomicU64,
    pub receives: Counts,
    pub acks: Counts,
    latency: Mutex<HashMap<(&'static str, String), [f64; LATENCY_BOUNDS_MS.len() + 2]>>,
}

impl FastSends {
    /// Serve sends from now on (`true`), with `system_names` the user property names refused;
    /// or pass every send on (`false`).
    pub fn enable(&self, on: bool, system_names: impl IntoIterator<Item = String>) {
        *self.system_names.write() = system_names.into_iter().collect();
        self.enabled.store(on, Ordering::Release);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    pub fn is_system_name(&self, name: &str) -> bool {
        self.system_names.read().contains(name)
    }

    /// The property names a consumer is not shown among a message's user properties.
    pub fn set_hidden_names(&self, names: impl IntoIterator<Item = String>) {
        *self.hidden_names.write() = names.into_iter().collect();
    }

    pub fn hidden_names(&self) -> parking_lot::RwLockReadGuard<'_, HashSet<String>> {
        self.hidden_names.read()
    }

    /// The masters of `topic`'s broker groups, by broker name (empty: forgotten).
    pub fn set_masters(&self, topic: &str, masters: HashMap<String, String>) {
        let mut all = self.masters.write();
        if masters.is_empty() {
            all.remove(topic);
        } else {
            all.insert(topic.to_string(), Arc::new(masters));
        }
    }

    /// The master address of `broker` for `topic`.
    pub fn master(&self, topic: &str, broker: &str) -> Option<String> {
        self.masters.read().get(topic)?.get(broker).cloned()
    }

    /// The consumers the endpoint knows now (replacing those it told before).
    pub fn set_clients(&self, clients: HashMap<String, ClientFacts>) {
        *self.clients.write() = clients;
    }

    pub fn client(&self, client_id: &str) -> Option<ClientFacts> {
        self.clients.read().get(client_id).copied()
    }

    pub fn add_dead_letter(&self, d: DeadLetter) {
        self.dead_letters.lock().push(d);
    }

    /// The messages due for the dead-letter queue since the last call.
    pub fn take_dead_letters(&self) -> Vec<DeadLetter> {
        std::mem::take(&mut *self.dead_letters.lock())
    }

    /// The writable queues of `topic` (none: the topic's sends are passed on).
    pub fn set_topic(&self, topic: &str, queues: Vec<WriteQueue>) {
        let mut topics = self.topics.write();
        if queues.is_empty() {
            topics.remove(topic);
        } else {
            topics.insert(
                topic.to_string(),
                Arc::new(TopicQueues {
                    queues,
                    cursor: AtomicU32::new(0),
                }),
            );
        }
    }

    pub fn forget(&self, topic: &str) {
        self.topics.write().remove(topic);
        self.masters.write().remove(topic);
    }

    pub fn queues(&self, topic: &str) -> Option<Arc<TopicQueues>> {
        self.topics.read().get(topic).cloned()
    }

    /// How many topics have queues now.
    pub fn topics(&self) -> usize {
        self.topics.read().len()
    }

    /// One SendMessage answer with the status code named `code` (`ok`...) after `took`.
    pub fn record(&self, code: &str, took: Duration) {
        self.record_call("SendMessage", code, took);
    }

    /// One answer to `rpc` with the status code named `code` (`ok`, `topic_not_found`...) after
    /// `took`.
    pub fn record_call(&self, rpc: &'static str, code: &str, took: Duration) {
        let ms = took.as_secs_f64() * 1000.0;
        let bucket = LATENCY_BOUNDS_MS
            .iter()
            .position(|&b| ms <= b)
            .unwrap_or(LATENCY_BOUNDS_MS.len());
        let mut table = self.latency.lock();
        let row = table
            .entry((rpc, code.to_string()))
            .or_insert([0.0; LATENCY_BOUNDS_MS.len() + 2]);
        row[bucket] += 1.0;
        row[LATENCY_BOUNDS_MS.len() + 1] += ms;
    }

    /// Per RPC and status code: the count per bucket and the sum in milliseconds, since the
    /// start.
    pub fn latency_rows(&self) -> Vec<(&'static str, String, Vec<f64>)> {
        self.latency
            .lock()
            .iter()
            .map(|((rpc, code), v)| (*rpc, code.clone(), v.to_vec()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(id: i32) -> WriteQueue {
        WriteQueue {
            broker_name: "b".into(),
            queue_id: id,
            addr: "127.0.0.1:1".into(),
        }
    }

    #[test]
    fn queues_in_turn_and_latency_buckets() {
        let f = FastSends::default();
        assert!(!f.enabled());
        f.set_topic("T", vec![q(0), q(1), q(2)]);
        let t = f.queues("T").unwrap();
        let ids: Vec<i32> = (0..4).map(|_| t.next().queue_id).collect();
        assert_eq!(ids, vec![1, 2, 0, 1]);
        f.set_topic("T", vec![]);
        assert!(f.queues("T").is_none());
        f.record("ok", Duration::from_micros(500));
        f.record("ok", Duration::from_millis(7));
        f.record("ok", Duration::from_secs(5));
        let rows = f.latency_rows();
        assert_eq!(rows.len(), 1);
        let (rpc, code, row) = &rows[0];
        assert_eq!((*rpc, code.as_str()), ("SendMessage", "ok"));
        assert_eq!(&row[..8], &[1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
        assert!((row[8] - 5007.5).abs() < 1e-6);
        f.enable(true, ["TAGS".to_string()]);
        assert!(f.enabled() && f.is_system_name("TAGS") && !f.is_system_name("x"));
    }
}
