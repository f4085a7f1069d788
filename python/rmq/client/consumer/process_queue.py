"""ProcessQueue: the pulled, not yet committed messages of one queue (``CL/impl/consumer/ProcessQueue.java``).

Messages are kept by queue offset. The committable offset of a queue is the smallest offset still held
(or ``queue_offset_max + 1`` once everything is consumed), so a message consumed out of order never lets the
offset pass one that is still being consumed. Orderly consumption moves taken messages into a "consuming"
map until :meth:`commit` (success) or :meth:`make_message_to_consume_again` (retry later).

Offsets arrive in increasing order pull after pull, so the map is a dict plus a deque of offsets in order;
stale deque entries (already removed) are skipped lazily, which makes first/last lookups amortised O(1).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterable
from typing import Final

from rmq.client.message import MessageExt
from rmq.common.codes import MessageConst

__all__ = ["PULL_MAX_IDLE_TIME_MS", "REBALANCE_LOCK_MAX_LIVE_TIME_MS", "ProcessQueue"]

REBALANCE_LOCK_MAX_LIVE_TIME_MS: Final = 30_000
"""A client treats its broker lock as stale after 30 s without renewal (broker side: 60 s)."""
PULL_MAX_IDLE_TIME_MS: Final = 120_000


def _now_ms() -> int:
    return int(time.time() * 1000)


class ProcessQueue:
    __slots__ = (
        "_consuming",
        "_msgs",
        "_order",
        "consume_lock",
        "consuming",
        "dropped",
        "last_consume_timestamp",
        "last_lock_timestamp",
        "last_pull_timestamp",
        "locked",
        "msg_acc_cnt",
        "msg_count",
        "msg_size",
        "queue_offset_max",
        "try_unlock_times",
    )

    def __init__(self) -> None:
        self._msgs: dict[int, MessageExt] = {}
        self._order: deque[int] = deque()
        self._consuming: dict[int, MessageExt] = {}
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        self.dropped = False
        now = _now_ms()
        self.last_pull_timestamp = now
        self.last_consume_timestamp = now
        self.locked = False
        self.last_lock_timestamp = now
        self.consuming = False
        """Orderly: a consume task is (or is about to be) working on this queue."""
        self.msg_acc_cnt = 0
        self.try_unlock_times = 0
        self.consume_lock = asyncio.Lock()
        """Orderly: held while the listener runs; a rebalance releases the broker lock only between calls."""

    # --- state ------------------------------------------------------------------------------------------

    def is_lock_expired(self) -> bool:
        return _now_ms() - self.last_lock_timestamp > REBALANCE_LOCK_MAX_LIVE_TIME_MS

    def is_pull_expired(self) -> bool:
        return _now_ms() - self.last_pull_timestamp > PULL_MAX_IDLE_TIME_MS

    def _first_key(self) -> int | None:
        order, msgs = self._order, self._msgs
        while order and order[0] not in msgs:
            order.popleft()
        return order[0] if order else None

    def _last_key(self) -> int | None:
        order, msgs = self._order, self._msgs
        while order and order[-1] not in msgs:
            order.pop()
        return order[-1] if order else None

    @property
    def max_span(self) -> int:
        """Offset distance between the first and the last held message (0 when empty)."""
        first = self._first_key()
        if first is None:
            return 0
        last = self._last_key()
        assert last is not None
        return last - first

    def has_temp_message(self) -> bool:
        return bool(self._msgs)

    def contains_message(self, msg: MessageExt) -> bool:
        return msg.queue_offset in self._msgs

    def __len__(self) -> int:
        return len(self._msgs)

    # --- pull side --------------------------------------------------------------------------------------

    def put_messages(self, msgs: Iterable[MessageExt]) -> bool:
        """Add pulled messages; ``True`` if an orderly consume task should be started for this queue."""
        msgs_map, order = self._msgs, self._order
        added = 0
        size = 0
        last: MessageExt | None = None
        for msg in msgs:
            offset = msg.queue_offset
            if offset in msgs_map:
                continue
            if order and offset < order[-1]:
                msgs_map[offset] = msg
                self._order = order = deque(sorted(msgs_map))
            else:
                msgs_map[offset] = msg
                order.append(offset)
            added += 1
            size += len(msg.body)
            self.queue_offset_max = offset
            last = msg
        self.msg_count += added
        self.msg_size += size
        dispatch = False
        if msgs_map and not self.consuming:
            dispatch = True
            self.consuming = True
        if last is not None:
            max_offset = last.get_property(MessageConst.MAX_OFFSET)
            if max_offset:
                acc = int(max_offset) - last.queue_offset
                if acc > 0:
                    self.msg_acc_cnt = acc
        return dispatch

    # --- concurrent consumption -------------------------------------------------------------------------

    def remove_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Forget consumed messages; the offset to commit now, or -1 if nothing is held."""
        self.last_consume_timestamp = _now_ms()
        msgs_map = self._msgs
        if not msgs_map:
            return -1
        result = self.queue_offset_max + 1
        removed = 0
        for msg in msgs:
            prev = msgs_map.pop(msg.queue_offset, None)
            if prev is not None:
                removed += 1
                self.msg_size -= len(prev.body)
        self.msg_count -= removed
        first = self._first_key()
        if first is not None:
            result = first
        return result

    # --- orderly consumption ----------------------------------------------------------------------------

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Move up to ``batch_size`` of the lowest offsets into the consuming map."""
        self.last_consume_timestamp = _now_ms()
        result: list[MessageExt] = []
        order, msgs_map, consuming = self._order, self._msgs, self._consuming
        while len(result) < batch_size and order:
            offset = order.popleft()
            msg = msgs_map.pop(offset, None)
            if msg is None:
                continue
            consuming[offset] = msg
            result.append(msg)
        if not result:
            self.consuming = False
        return result

    def commit(self) -> int:
        """Orderly success: drop the consuming messages; the offset after the last one (-1 if none)."""
        consuming = self._consuming
        if not consuming:
            return -1
        offset = max(consuming)
        self.msg_count -= len(consuming)
        self.msg_size -= sum(len(m.body) for m in consuming.values())
        consuming.clear()
        return offset + 1

    def rollback(self) -> None:
        """Put every consuming message back in front."""
        self._put_back(list(self._consuming.values()))
        self._consuming.clear()

    def make_message_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        back = [m for m in msgs if self._consuming.pop(m.queue_offset, None) is not None]
        self._put_back(back)

    def _put_back(self, msgs: list[MessageExt]) -> None:
        if not msgs:
            return
        for m in msgs:
            self._msgs[m.queue_offset] = m
        offsets = sorted(m.queue_offset for m in msgs)
        first = self._first_key()
        if first is None or offsets[-1] < first:
            self._order.extendleft(reversed(offsets))
        else:
            self._order = deque(sorted(self._msgs))

    def clear(self) -> None:
        self._msgs.clear()
        self._order.clear()
        self._consuming.clear()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0

    def info(self) -> dict[str, object]:
        """``ProcessQueueInfo`` for GET_CONSUMER_RUNNING_INFO."""
        first = self._first_key()
        last = self._last_key()
        return {
            "cachedMsgCount": self.msg_count,
            "cachedMsgMinOffset": first if first is not None else 0,
            "cachedMsgMaxOffset": last if last is not None else 0,
            "cachedMsgSizeInMiB": self.msg_size // (1024 * 1024),
            "droped": self.dropped,
            "lastConsumeTimestamp": self.last_consume_timestamp,
            "lastLockTimestamp": self.last_lock_timestamp,
            "lastPullTimestamp": self.last_pull_timestamp,
            "locked": self.locked,
            "tryUnlockTimes": self.try_unlock_times,
            "transactionMsgCount": len(self._consuming),
            "transactionMsgMinOffset": min(self._consuming) if self._consuming else 0,
            "transactionMsgMaxOffset": max(self._consuming) if self._consuming else 0,
        }
