//! RecordFilter: what a stored record must satisfy to become a row.
//!
//! Built from the reader's options and the predicates Spark pushes down; every condition is
//! ANDed. Ranges are half-open `[lo, hi)`; `None` sets mean "any". Rows are also classified
//! here (system topic, transaction half message, visibility) so the columns and the filter
//! agree on one definition.

use rmq_store::message::{property, sysflag, Record};

/// The transaction half-message topic (REMOTING.md §7.7).
pub const TRANS_HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Property marking a transactional message (`"true"`).
pub const PROPERTY_TRANSACTION_PREPARED: &str = "TRAN_MSG";
/// `TopicValidator.SYSTEM_TOPIC_SET` of RocketMQ 4.9.8.
pub const SYSTEM_TOPICS: &[&str] = &[
    "TBW102",
    "SCHEDULE_TOPIC_XXXX",
    "BenchmarkTest",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
];
/// Prefix of system topics (`TopicValidator.SYSTEM_TOPIC_PREFIX`), e.g. `rmq_sys_wheel_timer`.
pub const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";

/// True for RocketMQ's system topics.
pub fn is_system_topic(topic: &str) -> bool {
    topic.starts_with(SYSTEM_TOPIC_PREFIX) || SYSTEM_TOPICS.contains(&topic)
}

/// True for a transaction half message: parked in the half topic with `TRAN_MSG=true` (how
/// 4.x brokers store it), or carrying the PREPARED transaction type in its sysflag.
pub fn is_transaction_prepared(rec: &Record<'_>) -> bool {
    let t = sysflag::transaction_type(rec.sys_flag);
    t == sysflag::TRANSACTION_PREPARED_TYPE
        || (rec.topic == TRANS_HALF_TOPIC
            && property(rec.properties, PROPERTY_TRANSACTION_PREPARED) == Some("true"))
}

/// The classification of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Class {
    pub system_topic: bool,
    pub prepared: bool,
    /// What a consumer of a user topic can receive: not a half message, not a rolled-back
    /// record, not in a system topic (committed transactional messages are visible).
    pub visible: bool,
}

/// Classify a record.
pub fn classify(rec: &Record<'_>) -> Class {
    let system_topic = is_system_topic(rec.topic);
    let prepared = is_transaction_prepared(rec);
    let rolled_back = sysflag::transaction_type(rec.sys_flag) == sysflag::TRANSACTION_ROLLBACK_TYPE;
    Class {
        system_topic,
        prepared,
        visible: !system_topic && !prepared && !rolled_back,
    }
}

/// A half-open `[lo, hi)` range of i64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub lo: i64,
    pub hi: i64,
}

impl Range {
    pub const ALL: Range = Range {
        lo: i64::MIN,
        hi: i64::MAX,
    };
    pub fn new(lo: i64, hi: i64) -> Range {
        Range { lo, hi }
    }
    #[inline]
    pub fn contains(&self, v: i64) -> bool {
        self.lo <= v && v < self.hi
    }
    pub fn is_empty(&self) -> bool {
        self.lo >= self.hi
    }
    pub fn intersect(&self, o: &Range) -> Range {
        Range {
            lo: self.lo.max(o.lo),
            hi: self.hi.min(o.hi),
        }
    }
}

/// Conditions on a record (all ANDed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordFilter {
    /// Allowed topics (sorted); `None` = any.
    pub topics: Option<Vec<String>>,
    /// Allowed queue ids (sorted); `None` = any.
    pub queue_ids: Option<Vec<i32>>,
    pub queue_offset: Range,
    pub commitlog_offset: Range,
    /// Store timestamp, ms.
    pub store_time: Range,
    /// Born timestamp, ms.
    pub born_time: Range,
    /// Allowed TAGS values (sorted); `None` = any (a record without a tag never matches a set).
    pub tags: Option<Vec<String>>,
    pub system_topic: Option<bool>,
    pub prepared: Option<bool>,
    pub visible: Option<bool>,
}

impl Default for RecordFilter {
    fn default() -> Self {
        RecordFilter {
            topics: None,
            queue_ids: None,
            queue_offset: Range::ALL,
            commitlog_offset: Range::ALL,
            store_time: Range::ALL,
            born_time: Range::ALL,
            tags: None,
            system_topic: None,
            prepared: None,
            visible: None,
        }
    }
}

impl RecordFilter {
    /// Normalise sets (sorted, deduplicated) so lookups can binary-search.
    pub fn normalized(mut self) -> RecordFilter {
        for s in [&mut self.topics, &mut self.tags].into_iter().flatten() {
            s.sort();
            s.dedup();
        }
        if let Some(q) = &mut self.queue_ids {
            q.sort_unstable();
            q.dedup();
        }
        self
    }

    /// True when no record can match (an empty set or range).
    pub fn is_unsatisfiable(&self) -> bool {
        self.topics.as_ref().is_some_and(|t| t.is_empty())
            || self.queue_ids.as_ref().is_some_and(|q| q.is_empty())
            || self.tags.as_ref().is_some_and(|t| t.is_empty())
            || [
                self.queue_offset,
                self.commitlog_offset,
                self.store_time,
                self.born_time,
            ]
            .iter()
            .any(Range::is_empty)
    }

    /// True if the topic may match (used before reading a queue).
    pub fn topic_allowed(&self, topic: &str) -> bool {
        self.topics
            .as_ref()
            .is_none_or(|t| t.binary_search_by(|x| x.as_str().cmp(topic)).is_ok())
            && self
                .system_topic
                .is_none_or(|s| s == is_system_topic(topic))
    }

    /// True if the queue id may match.
    pub fn queue_allowed(&self, queue_id: i32) -> bool {
        self.queue_ids
            .as_ref()
            .is_none_or(|q| q.binary_search(&queue_id).is_ok())
    }

    /// Does `rec` (at CommitLog offset `offset`) match? Returns its classification if so.
    #[inline]
    pub fn matches(&self, offset: i64, rec: &Record<'_>) -> Option<Class> {
        if !self.commitlog_offset.contains(offset)
            || !self.store_time.contains(rec.store_timestamp)
            || !self.born_time.contains(rec.born_timestamp)
            || !self.queue_offset.contains(rec.queue_offset)
            || !self.queue_allowed(rec.queue_id)
            || !self.topic_allowed(rec.topic)
        {
            return None;
        }
        if let Some(tags) = &self.tags {
            let tag = property(rec.properties, rmq_store::message::property::TAGS)?;
            tags.binary_search_by(|x| x.as_str().cmp(tag)).ok()?;
        }
        let class = classify(rec);
        if self.prepared.is_some_and(|p| p != class.prepared)
            || self.visible.is_some_and(|v| v != class.visible)
        {
            return None;
        }
        Some(class)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmq_store::message::decode;

    fn rec_bytes(topic: &str, props: &str, sys_flag: i32) -> Vec<u8> {
        let mut b = crate::testutil::record_bytes(topic, 1, 5, 0, b"x", props, 100);
        b[36..40].copy_from_slice(&sys_flag.to_be_bytes());
        b
    }

    #[test]
    fn classification() {
        let half = rec_bytes(
            TRANS_HALF_TOPIC,
            "TRAN_MSG\u{1}true\u{2}REAL_TOPIC\u{1}T",
            0,
        );
        let c = classify(&decode(&half, false).unwrap());
        assert_eq!((c.system_topic, c.prepared, c.visible), (true, true, false));
        let commit = rec_bytes("T", "TRAN_MSG\u{1}true", sysflag::TRANSACTION_COMMIT_TYPE);
        let c = classify(&decode(&commit, false).unwrap());
        assert_eq!(
            (c.system_topic, c.prepared, c.visible),
            (false, false, true)
        );
        let rb = rec_bytes("T", "", sysflag::TRANSACTION_ROLLBACK_TYPE);
        assert!(!classify(&decode(&rb, false).unwrap()).visible);
        let prep = rec_bytes("T", "", sysflag::TRANSACTION_PREPARED_TYPE);
        assert!(classify(&decode(&prep, false).unwrap()).prepared);
        assert!(is_system_topic("rmq_sys_wheel_timer"));
        assert!(!is_system_topic("%RETRY%g"));
    }

    #[test]
    fn conditions_and() {
        let b = rec_bytes("T", "TAGS\u{1}a", 0);
        let r = decode(&b, false).unwrap();
        let all = RecordFilter::default();
        assert!(all.matches(0, &r).is_some());
        let f = RecordFilter {
            topics: Some(vec!["U".into(), "T".into()]),
            queue_ids: Some(vec![1]),
            tags: Some(vec!["a".into()]),
            queue_offset: Range::new(5, 6),
            visible: Some(true),
            ..Default::default()
        }
        .normalized();
        assert!(f.matches(0, &r).is_some());
        assert!(f.matches(0, &r).is_some());
        for g in [
            RecordFilter {
                tags: Some(vec!["b".into()]),
                ..f.clone()
            },
            RecordFilter {
                queue_offset: Range::new(6, 9),
                ..f.clone()
            },
            RecordFilter {
                commitlog_offset: Range::new(1, 9),
                ..f.clone()
            },
            RecordFilter {
                system_topic: Some(true),
                ..f.clone()
            },
        ] {
            assert!(g.matches(0, &r).is_none());
        }
        assert!(RecordFilter {
            topics: Some(vec![]),
            ..Default::default()
        }
        .is_unsatisfiable());
    }
}
