"""Latency fault tolerance (``CL/latency/MQFaultStrategy.java``, ``LatencyFaultToleranceImpl.java``).

With ``send_latency_fault_enable`` every send reports its broker and latency; a broker whose send took
``>= latency_max[i]`` ms is avoided for ``not_available_duration[i]`` ms (a failed send counts as 30 s of
latency, i.e. 10 minutes of isolation with the defaults). Queue selection then prefers queues of available
brokers, round robin; when every broker is backed off it picks one of the better half of the fault items.

Without it, selection is plain round robin that avoids the broker of the previous failed attempt.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from rmq.client.message import MessageQueue
from rmq.client.route import TopicPublishInfo

__all__ = ["FaultItem", "LatencyFaultTolerance", "MQFaultStrategy"]

LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION = (0, 0, 30000, 60000, 120000, 180000, 600000)
ISOLATION_LATENCY_MS = 30000


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(slots=True)
class FaultItem:
    name: str
    current_latency: int
    start_timestamp: int
    """The broker is available again from this clock value on."""

    def is_available(self, now_ms: int) -> bool:
        return now_ms - self.start_timestamp >= 0

    def sort_key(self, now_ms: int) -> tuple[bool, int, int]:
        # FaultItem.compareTo: available first, then lower latency, then earlier recovery.
        return (not self.is_available(now_ms), self.current_latency, self.start_timestamp)


class LatencyFaultTolerance:
    def __init__(self, clock: Callable[[], int] = _now_ms) -> None:
        self.clock = clock
        self.items: dict[str, FaultItem] = {}
        self._which_item_worst = random.randrange(1 << 16)

    def update(self, name: str, current_latency: int, not_available_duration: int) -> None:
        start = self.clock() + not_available_duration
        item = self.items.get(name)
        if item is None:
            self.items[name] = FaultItem(name, current_latency, start)
        else:
            item.current_latency = current_latency
            item.start_timestamp = start

    def is_available(self, name: str) -> bool:
        item = self.items.get(name)
        return item is None or item.is_available(self.clock())

    def remove(self, name: str) -> None:
        self.items.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        """A broker from the better half (shuffled, then sorted like ``FaultItem.compareTo``)."""
        items = list(self.items.values())
        if not items:
            return None
        random.shuffle(items)
        now = self.clock()
        items.sort(key=lambda it: it.sort_key(now))
        half = len(items) // 2
        if half <= 0:
            return items[0].name
        self._which_item_worst = (self._which_item_worst + 1) & 0x7FFFFFFF
        return items[self._which_item_worst % half].name


class MQFaultStrategy:
    def __init__(
        self,
        send_latency_fault_enable: bool = False,
        *,
        latency_max: tuple[int, ...] = LATENCY_MAX,
        not_available_duration: tuple[int, ...] = NOT_AVAILABLE_DURATION,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.send_latency_fault_enable = send_latency_fault_enable
        self.latency_max = latency_max
        self.not_available_duration = not_available_duration
        self.fault_tolerance = LatencyFaultTolerance(clock)

    def compute_not_available_duration(self, current_latency: int) -> int:
        for i in range(len(self.latency_max) - 1, -1, -1):
            if current_latency >= self.latency_max[i]:
                return self.not_available_duration[i]
        return 0

    def update_fault_item(self, broker_name: str, current_latency: int, isolation: bool) -> None:
        if self.send_latency_fault_enable:
            duration = self.compute_not_available_duration(
                ISOLATION_LATENCY_MS if isolation else current_latency
            )
            self.fault_tolerance.update(broker_name, current_latency, duration)

    def select_one_message_queue(self, info: TopicPublishInfo, last_broker_name: str | None) -> MessageQueue:
        if not self.send_latency_fault_enable:
            return info.select_one(last_broker_name)
        queues = info.queues
        n = len(queues)
        index = info.next_index()
        for _ in range(n):
            mq = queues[index % n]
            index += 1
            if self.fault_tolerance.is_available(mq.broker_name):
                return mq
        not_best = self.fault_tolerance.pick_one_at_least()
        if not_best is not None:
            write_queue_nums = info.write_queue_nums(not_best)
            if write_queue_nums > 0:
                # Java mutates the selected queue in place (a known race); a fresh queue says the same.
                mq = info.select_one()
                return MessageQueue(mq.topic, not_best, info.next_index() % write_queue_nums)
            self.fault_tolerance.remove(not_best)
        return info.select_one()
