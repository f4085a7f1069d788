"""Orderly POP (FIFO groups): which batch of a queue is in flight, as RocketMQ 5.x's
ConsumerOrderInfoManager keeps it.

A queue's next batch is not popped while a message of the previous one is un-acked and still invisible
(a pop with the same ``attemptId`` is the client retrying the same request and is not blocked). The
consumer offset stays at the batch's first un-acked message: an ack moves it past the acked prefix, and
when the invisible time passes the same messages are popped again, each with how many times it was
popped before (``orderCountInfo``, which clients show as the reconsume times)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rmq.broker.pop.wire import offset_info, retry_mark

__all__ = ["OrderInfo", "OrderInfoTable"]


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class OrderInfo:
    attempt_id: str | None
    pop_time: int
    invisible_time: int
    offsets: list[int]
    acked: set[int] = field(default_factory=set)
    counts: dict[int, int] = field(default_factory=dict)
    """How many times each offset was popped before this batch (absent: never)."""
    visible_at: dict[int, int] = field(default_factory=dict)
    """Per offset, the visible time a CHANGE_MESSAGE_INVISIBLETIME set (else pop time + invisible time)."""

    def blocks(self, attempt_id: str | None, now: int) -> bool:
        if not self.offsets:
            return False
        if self.attempt_id is not None and self.attempt_id == attempt_id:
            return False
        default = self.pop_time + self.invisible_time
        return any(now < self.visible_at.get(o, default) for o in self.offsets if o not in self.acked)

    def next_offset(self) -> int:
        for o in self.offsets:
            if o not in self.acked:
                return o
        return self.offsets[-1] + 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.attempt_id,
            "pt": self.pop_time,
            "it": self.invisible_time,
            "o": self.offsets,
            "ak": sorted(self.acked),
            "cm": {str(k): v for k, v in self.counts.items()},
            "vt": {str(k): v for k, v in self.visible_at.items()},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OrderInfo:
        return cls(
            d.get("a"),
            int(d["pt"]),
            int(d["it"]),
            [int(x) for x in d.get("o") or []],
            {int(x) for x in d.get("ak") or []},
            {int(k): int(v) for k, v in (d.get("cm") or {}).items()},
            {int(k): int(v) for k, v in (d.get("vt") or {}).items()},
        )


class OrderInfoTable:
    """In-flight orderly batches by (topic, group, queue)."""

    def __init__(self) -> None:
        self.table: dict[tuple[str, str, int], OrderInfo] = {}

    def check_block(self, attempt_id: str | None, topic: str, group: str, queue_id: int) -> bool:
        info = self.table.get((topic, group, queue_id))
        return info is not None and info.blocks(attempt_id, _now_ms())

    def update(
        self,
        attempt_id: str | None,
        topic: str,
        group: str,
        queue_id: int,
        pop_time: int,
        invisible_time: int,
        offsets: list[int],
    ) -> list[str]:
        """Record a popped batch; returns its orderCountInfo entries (per offset popped before, then the
        queue's least count)."""
        key = (topic, group, queue_id)
        prev = self.table.get(key)
        info = OrderInfo(attempt_id, pop_time, invisible_time, list(offsets))
        if prev is not None:
            if attempt_id is not None and prev.attempt_id == attempt_id:
                info.counts = dict(prev.counts)
            else:
                before = set(prev.offsets)
                info.counts = {o: prev.counts.get(o, 0) + 1 for o in offsets if o in before}
        self.table[key] = info
        mark = retry_mark(topic)
        out = [f"{mark} qo{queue_id}%{o} {n}" for o, n in info.counts.items()]
        least = min(info.counts.values()) if info.counts else 0
        if len(info.counts) != len(offsets):
            least = 0
        out.append(offset_info(topic, queue_id, str(least)))
        return out

    def commit_and_next(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int) -> int:
        """An ack of ``offset`` of the batch popped at ``pop_time``: the queue's next offset to commit,
        -1 when the offset is not in the batch, -2 when the batch is another pop's."""
        info = self.table.get((topic, group, queue_id))
        if info is None:
            return offset + 1
        if not info.offsets:
            return -1
        if info.pop_time != pop_time:
            return -2
        if offset not in info.offsets:
            return -1
        info.acked.add(offset)
        return info.next_offset()

    def change_visible(
        self, topic: str, group: str, queue_id: int, offset: int, pop_time: int, visible_at: int
    ) -> None:
        info = self.table.get((topic, group, queue_id))
        if info is not None and info.pop_time == pop_time:
            info.visible_at[offset] = visible_at

    def unblocked_between(self, since: int, now: int) -> set[str]:
        """Topics with a queue whose in-flight batch became visible again in (since, now]."""
        out = set()
        for (topic, _group, _q), info in self.table.items():
            default = info.pop_time + info.invisible_time
            for o in info.offsets:
                if o not in info.acked and since < info.visible_at.get(o, default) <= now:
                    out.add(topic)
                    break
        return out

    def clear(self, topic: str, group: str, queue_id: int) -> None:
        self.table.pop((topic, group, queue_id), None)

    def to_list(self) -> list[dict[str, Any]]:
        return [{"t": t, "g": g, "q": q, "i": i.to_dict()} for (t, g, q), i in self.table.items()]

    def load_list(self, items: list[dict[str, Any]]) -> None:
        for d in items:
            self.table[(str(d["t"]), str(d["g"]), int(d["q"]))] = OrderInfo.from_dict(d["i"])
