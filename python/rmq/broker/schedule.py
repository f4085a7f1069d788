"""Delay levels (RocketMQ's ScheduleMessageService, REMOTING.md §7.5).

A message with property DELAY = n (n > 0, clamped to the number of levels) is stored in
SCHEDULE_TOPIC_XXXX, queue n-1, with REAL_TOPIC / REAL_QID added; the store gives its
ConsumeQueue unit the delivery time as tag code. Every 100 ms each level's queue is scanned from
its progress offset; due messages are re-put to their real topic and queue, and the progress is
persisted to `config/delayOffset.json` after every advance, so a restart neither loses nor
repeats deliveries.
"""

from __future__ import annotations

import logging
import os
import time

from rmq.broker.persist import load_json, persist_json
from rmq.broker.records import StoredMessage, put_to_real_topic
from rmq.common import codes
from rmq.common.codes import MessageConst
from rmq.store import DiskFullError, MessageStore

__all__ = ["DEFAULT_DELAY_LEVELS", "ScheduleService", "parse_delay_levels", "schedule_target"]

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}

log = logging.getLogger(__name__)


def parse_delay_levels(spec: str) -> list[int]:
    out = []
    for item in spec.split():
        unit = _UNITS.get(item[-1:])
        if unit is None or not item[:-1].isdigit():
            raise ValueError(f"messageDelayLevel: {item!r} is not a number followed by s, m, h or d")
        out.append(int(item[:-1]) * unit)
    if not out:
        raise ValueError("messageDelayLevel is empty")
    return out


def schedule_target(
    topic: str, queue_id: int, props: dict[str, str], level: int, max_level: int
) -> tuple[str, int, int]:
    """Park a message for delay `level`: returns (SCHEDULE_TOPIC_XXXX, queue, clamped level) and
    records the real destination in `props`."""
    level = max(1, min(level, max_level))
    props[MessageConst.DELAY_TIME_LEVEL] = str(level)
    props[MessageConst.REAL_TOPIC] = topic
    props[MessageConst.REAL_QUEUE_ID] = str(queue_id)
    return codes.SCHEDULE_TOPIC, level - 1, level


class ScheduleService:
    def __init__(self, store: MessageStore, config_dir: str, delay_levels: list[int]) -> None:
        self.store = store
        self.delays = delay_levels
        self.path = os.path.join(config_dir, "delayOffset.json")
        self.offsets: dict[int, int] = {}
        self.delivered = 0

    def load(self) -> None:
        data = load_json(self.path)
        if data:
            self.offsets = {int(k): int(v) for k, v in (data.get("offsetTable") or {}).items()}

    def persist(self) -> None:
        persist_json(self.path, self.to_dict())

    def to_dict(self) -> dict[str, dict[str, int]]:
        """``delayOffset.json``'s content, which GET_ALL_DELAY_OFFSET answers (level -> queue offset)."""
        return {"offsetTable": {str(k): v for k, v in sorted(self.offsets.items())}}

    def take_all(self, table: dict[str, int]) -> None:
        """Take a master's delay offsets (a slave's copy) and persist them, so a slave promoted by hand
        resumes its master's deliveries."""
        self.offsets = {int(k): int(v) for k, v in table.items()}
        self.persist()

    def tick(self) -> None:
        now = int(time.time() * 1000)
        changed = False
        for level in range(1, len(self.delays) + 1):
            changed |= self._deliver_level(level, now)
        if changed:
            self.persist()

    def _deliver_level(self, level: int, now: int) -> bool:
        qid = level - 1
        start = offset = self.offsets.get(level, 0)
        delay = self.delays[level - 1]
        for _ in range(64):  # bounded work per tick
            status, nxt, _mn, _mx, buf, _n = self.store.get_message(codes.SCHEDULE_TOPIC, qid, offset, 32)
            if status in ("OFFSET_TOO_SMALL", "NO_MATCHED_MESSAGE", "MESSAGE_WAS_REMOVING"):
                offset = nxt
                continue
            if status != "FOUND":
                break
            due_later = False
            for m in StoredMessage.decode_all(buf):
                if m.store_timestamp + delay > now:
                    due_later = True
                    break
                try:
                    self._deliver(m)
                except DiskFullError:
                    # Delivered up to here; the rest waits for space (the store logs the
                    # condition once).
                    due_later = True
                    break
                offset = m.queue_offset + 1
            if due_later:
                break
            offset = nxt
        if offset != start:
            self.offsets[level] = offset
            return True
        return False

    def _deliver(self, m: StoredMessage) -> None:
        if put_to_real_topic(self.store, m):
            self.delivered += 1
        else:
            log.warning("scheduled message at %d has no REAL_TOPIC/REAL_QID; dropped", m.physical_offset)
