"""The periodic statistics line, as RocketMQ's stats log writes one: messages put and got per second
since the last line, the store's disk use, bytes not yet flushed or dispatched, and the clients."""

from __future__ import annotations

import logging
import time

from rmq.broker.disk import commitlog_disk_ratio
from rmq.broker.services import BrokerServices

log = logging.getLogger("rmq.stats")


class StatsLog:
    def __init__(self, services: BrokerServices) -> None:
        self.s = services
        self._last = self._sample()

    def _sample(self) -> tuple[float, int, int]:
        self.s.drain_pulls()
        return time.monotonic(), self.s.put_messages(), self.s.counters.get_messages

    def line(self) -> str:
        """The statistics since the previous call (or since start)."""
        s, store = self.s, self.s.store
        now, puts, gets = self._sample()
        then, puts_before, gets_before = self._last
        self._last = (now, puts, gets)
        elapsed = max(now - then, 1e-3)
        ratio = commitlog_disk_ratio(s.config)
        disk = "unknown" if ratio is None else f"{100 * ratio:.1f}%"
        full = " (FULL: writes refused)" if store.is_disk_full() else ""
        end = store.commitlog_max_offset()
        consumers = sum(len(g.channels) for g in s.consumers.groups.values())
        producers = sum(len(g) for g in s.producers.groups.values())
        return (
            f"put {(puts - puts_before) / elapsed:.1f} msg/s, get {(gets - gets_before) / elapsed:.1f} msg/s "
            f"(totals {puts} / {gets}); disk {disk} used{full}; "
            f"page cache busy {store.put_lock_held_ms()} ms, "
            f"commitlog end {end}, unflushed {end - store.flushed_offset()} B, "
            f"undispatched {end - store.dispatched_offset()} B; "
            f"{producers} producer and {consumers} consumer connections in "
            f"{len(s.producers.groups)} + {len(s.consumers.groups)} groups"
        )

    def tick(self) -> None:
        log.info("stats: %s", self.line())
