//! What the SEND fast path took and what it left to the Python path, and why.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why a send request went to the Python path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decline {
    /// The header is not read as the Python path reads it (a field missing, of another type or
    /// given twice, a malformed binary header).
    Header,
    /// The topic is not vetted (unknown, not yet sent to, a retry topic, not writable, ...).
    Topic,
    /// The queue id is beyond the topic's queues.
    QueueId,
    /// The body is empty or larger than `maxMessageSize`.
    Body,
    /// A delay level, a timer or a transactional half message.
    Special,
    /// The stored properties would exceed their limit.
    Properties,
    /// A malformed batch body, or a compressed one that does not inflate within the limit.
    Batch,
    /// The store refused the put (disk full, shut down, ...).
    Store,
    /// The request arrived behind a send the Python path is still handling on its connection.
    Queued,
    /// ACL on: the fast path cannot vouch for its signature and permission ([`crate::acl`]);
    /// the Python validator answers it.
    Acl,
    /// RocketMQ's fast failure (`brokerFastFailureEnable`): the request waited longer than
    /// `waitTimeMillsInSendQueue` since it was read, or an append has held the CommitLog's put
    /// lock longer than `osPageCacheBusyTimeOutMills`; the Python path answers it SYSTEM_BUSY.
    Busy,
}

impl Decline {
    pub const ALL: [Decline; 11] = [
        Decline::Header,
        Decline::Topic,
        Decline::QueueId,
        Decline::Body,
        Decline::Special,
        Decline::Properties,
        Decline::Batch,
        Decline::Store,
        Decline::Queued,
        Decline::Acl,
        Decline::Busy,
    ];

    /// The reason's name in the counters.
    pub fn name(self) -> &'static str {
        match self {
            Decline::Header => "header",
            Decline::Topic => "topic",
            Decline::QueueId => "queue_id",
            Decline::Body => "body",
            Decline::Special => "special",
            Decline::Properties => "properties",
            Decline::Batch => "batch",
            Decline::Store => "store",
            Decline::Queued => "queued",
            Decline::Acl => "acl",
            Decline::Busy => "busy",
        }
    }
}

/// A snapshot of [`Counters`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Send requests answered by the fast path (a batch counts once).
    pub taken: u64,
    /// Messages it stored.
    pub messages: u64,
    /// Send requests it left to the Python path, per reason (every reason listed).
    pub declined: Vec<(&'static str, u64)>,
}

impl Stats {
    pub fn declined_total(&self) -> u64 {
        self.declined.iter().map(|(_, n)| n).sum()
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    taken: AtomicU64,
    messages: AtomicU64,
    declined: [AtomicU64; Decline::ALL.len()],
    batch_uniq_keys_dropped: AtomicU64,
}

impl Counters {
    pub(crate) fn taken(&self, messages: usize) {
        crate::metrics::bump(&self.taken, 1);
        crate::metrics::bump(&self.messages, messages as u64);
    }

    pub(crate) fn declined(&self, why: Decline) {
        self.declined[why as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn batch_uniq_key_dropped(&self) {
        self.batch_uniq_keys_dropped.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn batch_uniq_keys_dropped(&self) -> u64 {
        self.batch_uniq_keys_dropped.load(Ordering::Relaxed)
    }

    pub(crate) fn messages(&self) -> u64 {
        self.messages.load(Ordering::Relaxed)
    }

    pub(crate) fn snapshot(&self) -> Stats {
        Stats {
            taken: self.taken.load(Ordering::Relaxed),
            messages: self.messages(),
            declined: Decline::ALL
                .iter()
                .map(|d| (d.name(), self.declined[*d as usize].load(Ordering::Relaxed)))
                .collect(),
        }
    }
}
