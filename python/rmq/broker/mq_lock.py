"""RebalanceLockManager: which client holds each queue of a group for orderly consumption
(LOCK_BATCH_MQ / UNLOCK_BATCH_MQ); a lock not renewed for `lock_max_live_ms` (60 s) expires."""

from __future__ import annotations

import time

__all__ = ["MQ", "RebalanceLockManager"]

MQ = tuple[str, str, int]
"""(topic, brokerName, queueId)"""


class RebalanceLockManager:
    def __init__(self, lock_max_live_ms: int = 60_000) -> None:
        self.lock_max_live_ms = lock_max_live_ms
        self.table: dict[str, dict[MQ, tuple[str, float]]] = {}

    def _now(self) -> float:
        return time.monotonic() * 1000

    def try_lock_batch(self, group: str, mqs: list[MQ], client_id: str) -> list[MQ]:
        locks = self.table.setdefault(group, {})
        now = self._now()
        ok = []
        for mq in mqs:
            holder = locks.get(mq)
            if holder is None or holder[0] == client_id or now - holder[1] > self.lock_max_live_ms:
                locks[mq] = (client_id, now)
                ok.append(mq)
        return ok

    def unlock_batch(self, group: str, mqs: list[MQ], client_id: str) -> None:
        locks = self.table.get(group)
        if not locks:
            return
        for mq in mqs:
            holder = locks.get(mq)
            if holder is not None and holder[0] == client_id:
                del locks[mq]
