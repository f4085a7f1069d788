"""Messages delivered at an arbitrary time (beyond RocketMQ 4.x; RocketMQ 5.x timer messages).

A message carrying `TIMER_DELIVER_MS` (absolute epoch ms), `TIMER_DELAY_MS` or `TIMER_DELAY_SEC`
is parked in topic `rmq_sys_wheel_timer` (queue 0) with its real topic and queue and the resolved
delivery time `TIMER_OUT_MS` in its properties, then re-put to its real topic when due. Delivery
times may arrive in any order, so pending messages are kept in a heap by due time; progress is
persisted to `config/timerOffset.json` after every delivery as the lowest offset not yet
delivered plus the offsets delivered above it, so a restart neither loses nor repeats deliveries.
A delay above `timerMaxDelaySec` is refused.
"""

from __future__ import annotations

import heapq
import logging
import os
import time

from rmq.broker.persist import load_json, persist_json
from rmq.broker.records import StoredMessage, put_to_real_topic
from rmq.common.codes import MessageConst
from rmq.store import DiskFullError, MessageStore

__all__ = ["TIMER_TOPIC", "TimerError", "TimerService", "timer_deliver_ms"]

log = logging.getLogger(__name__)

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_KEYS = (TIMER_DELIVER_MS, TIMER_DELAY_MS, TIMER_DELAY_SEC)


class TimerError(ValueError):
    """A timer property that cannot be honoured."""


def timer_deliver_ms(props: dict[str, str], now_ms: int, max_delay_s: int) -> int | None:
    """The delivery time a message asks for, or None if it is not a timer message."""
    try:
        if TIMER_DELIVER_MS in props:
            at = int(props[TIMER_DELIVER_MS])
        elif TIMER_DELAY_MS in props:
            at = now_ms + int(props[TIMER_DELAY_MS])
        elif TIMER_DELAY_SEC in props:
            at = now_ms + int(props[TIMER_DELAY_SEC]) * 1000
        else:
            return None
    except ValueError:
        raise TimerError("timer properties must be whole numbers") from None
    if at - now_ms > max_delay_s * 1000:
        raise TimerError(f"delivery time is more than timerMaxDelaySec={max_delay_s} s away")
    return at


def park_timer(topic: str, queue_id: int, props: dict[str, str], deliver_ms: int) -> tuple[str, int]:
    props[MessageConst.REAL_TOPIC] = topic
    props[MessageConst.REAL_QUEUE_ID] = str(queue_id)
    props[TIMER_OUT_MS] = str(deliver_ms)
    return TIMER_TOPIC, 0


class TimerService:
    def __init__(self, store: MessageStore, config_dir: str) -> None:
        self.store = store
        self.path = os.path.join(config_dir, "timerOffset.json")
        self.low = 0
        """Every offset below this is delivered."""
        self.delivered: set[int] = set()
        """Offsets at or above `low` already delivered."""
        self.scan = 0
        self.heap: list[tuple[int, int]] = []
        self.delivered_count = 0

    def load(self) -> None:
        data = load_json(self.path) or {}
        self.low = int(data.get("low", 0))
        self.delivered = {int(x) for x in data.get("delivered", [])}
        self.scan = self.low

    def persist(self) -> None:
        persist_json(self.path, {"low": self.low, "delivered": sorted(self.delivered)})

    def _scan_new(self) -> None:
        for _ in range(64):
            status, nxt, _mn, _mx, buf, _n = self.store.get_message(TIMER_TOPIC, 0, self.scan, 64)
            if status == "FOUND":
                for m in StoredMessage.decode_all(buf):
                    if m.queue_offset in self.delivered:
                        continue
                    try:
                        due = int(m.properties.get(TIMER_OUT_MS, "0"))
                    except ValueError:
                        due = 0
                    heapq.heappush(self.heap, (due, m.queue_offset))
                self.scan = nxt
            elif status in ("OFFSET_TOO_SMALL", "NO_MATCHED_MESSAGE", "MESSAGE_WAS_REMOVING"):
                self.scan = nxt
            else:
                return

    def tick(self) -> None:
        self._scan_new()
        now = int(time.time() * 1000)
        changed = False
        while self.heap and self.heap[0][0] <= now:
            off = self.heap[0][1]
            status, _nxt, _mn, _mx, buf, _n = self.store.get_message(TIMER_TOPIC, 0, off, 1)
            if status == "FOUND":
                try:
                    self._deliver(StoredMessage.decode_one(buf))
                except DiskFullError:
                    break  # stays due; retried once there is space (the store logs the condition)
            heapq.heappop(self.heap)
            self.delivered.add(off)
            changed = True
        if changed:
            while self.low in self.delivered:
                self.delivered.discard(self.low)
                self.low += 1
            self.persist()

    def _deliver(self, m: StoredMessage) -> None:
        if put_to_real_topic(self.store, m):
            self.delivered_count += 1
        else:
            log.warning("timer message at %d has no REAL_TOPIC/REAL_QID; dropped", m.physical_offset)
