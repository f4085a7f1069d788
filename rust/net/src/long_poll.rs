//! Long polling on the network thread (RocketMQ's PullRequestHoldService): the pulls the PULL
//! fast path holds ([`crate::pull::HeldPull`]) wait here per (topic, queue) until the queue's
//! max offset passes theirs (the store's dispatch notifier wakes the thread) or their suspend
//! time is over; then the event loop ([`crate::server`]) runs each again and answers it, or
//! hands its frame to the Python path.

use std::collections::HashMap;
use std::time::Instant;

use crate::pull::HeldPull;

/// One held pull: its connection and its frame (for the Python path, should it answer).
#[derive(Debug)]
pub struct Waiting {
    pub conn: u64,
    pub pull: HeldPull,
    pub frame: Vec<u8>,
}

/// The held pulls by (topic, queue).
#[derive(Debug, Default)]
pub struct HeldPulls {
    by_queue: HashMap<(String, i32), Vec<Waiting>>,
    count: usize,
    /// The earliest deadline, or earlier (recomputed when due pulls leave).
    next: Option<Instant>,
}

impl HeldPulls {
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn push(&mut self, conn: u64, pull: HeldPull, frame: Vec<u8>) {
        self.next = Some(self.next.map_or(pull.deadline, |n| n.min(pull.deadline)));
        self.count += 1;
        self.by_queue
            .entry((pull.topic.clone(), pull.queue_id))
            .or_default()
            .push(Waiting { conn, pull, frame });
    }

    /// When the next suspend time is over (the event loop's poll timeout).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.next
    }

    /// Take the pulls whose queue grew past their offset (`max_offset(topic, queue)`), whose
    /// suspend time is over at `now`, or whose connection is gone (`gone(conn)`), oldest first
    /// per queue.
    pub fn take_due(
        &mut self,
        now: Instant,
        mut max_offset: impl FnMut(&str, i32) -> i64,
        mut gone: impl FnMut(u64) -> bool,
    ) -> Vec<Waiting> {
        let mut due = Vec::new();
        if self.count == 0 {
            return due;
        }
        self.by_queue.retain(|(topic, queue), list| {
            let max = max_offset(topic, *queue);
            let (ready, rest): (Vec<Waiting>, Vec<Waiting>) = std::mem::take(list)
                .into_iter()
                .partition(|w| max > w.pull.offset || w.pull.deadline <= now || gone(w.conn));
            due.extend(ready);
            *list = rest;
            !list.is_empty()
        });
        self.count -= due.len();
        self.next = self
            .by_queue
            .values()
            .flatten()
            .map(|w| w.pull.deadline)
            .min();
        due
    }

    /// Forget every held pull (the thread stops).
    pub fn clear(&mut self) {
        self.by_queue.clear();
        self.count = 0;
        self.next = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn pull(topic: &str, queue: i32, offset: i64, deadline: Instant) -> HeldPull {
        HeldPull {
            topic: topic.into(),
            queue_id: queue,
            offset,
            deadline,
            started: deadline,
            header: String::new(),
        }
    }

    #[test]
    fn pulls_leave_when_their_queue_grows_their_time_is_over_or_their_connection_is_gone() {
        let now = Instant::now();
        let later = now + Duration::from_secs(10);
        let mut held = HeldPulls::default();
        held.push(1, pull("T", 0, 5, later), vec![1]);
        held.push(2, pull("T", 1, 5, later), vec![2]);
        held.push(3, pull("U", 0, 7, now + Duration::from_secs(3)), vec![3]);
        held.push(4, pull("U", 0, 7, later), vec![4]);
        assert_eq!(held.len(), 4);
        assert_eq!(held.next_deadline(), Some(now + Duration::from_secs(3)));

        // Nothing grew, nothing is due.
        let max = |_: &str, _: i32| 5;
        assert!(held.take_due(now, max, |_| false).is_empty());

        // Queue T/1 grew past 5.
        let grown = |t: &str, q: i32| if (t, q) == ("T", 1) { 6 } else { 5 };
        let due = held.take_due(now, grown, |_| false);
        assert_eq!(due.iter().map(|w| w.conn).collect::<Vec<_>>(), vec![2]);

        // Connection 4 went away; connection 3's time is over 3 s on.
        let due = held.take_due(now + Duration::from_secs(3), max, |c| c == 4);
        let mut conns: Vec<u64> = due.iter().map(|w| w.conn).collect();
        conns.sort();
        assert_eq!(conns, vec![3, 4]);
        assert_eq!(held.len(), 1);
        assert_eq!(held.next_deadline(), Some(later));
        held.clear();
        assert!(held.is_empty() && held.next_deadline().is_none());
    }
}
