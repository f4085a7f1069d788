"""SYNC_FLUSH acknowledgements: a send's response is held until the group commit covering its
record completes. Held responses wait in one queue in append order; each flush notification from
the store releases every response at or below the new durable offset in one pass, and a response
still held after `syncFlushTimeout` is answered FLUSH_DISK_TIMEOUT (a send-back: SYSTEM_ERROR with the
status as the remark, as RocketMQ answers a send-back whose put is not PUT_OK). No future, task or timer
per message."""

from __future__ import annotations

import asyncio
import time
from collections import deque

from rmq.common.codes import ResponseCode
from rmq.remoting.command import RemotingCommand
from rmq.remoting.context import RequestContext
from rmq.store import AsyncStore

__all__ = ["FlushResponder", "timed_out"]


def timed_out(
    response: RemotingCommand, status: ResponseCode, status_remark: bool, remark: str | None
) -> None:
    """Turn a held answer into its timeout: the status's own code (a send), or with `status_remark`
    SYSTEM_ERROR with the status's name as the remark (a send-back, as RocketMQ answers one whose put is
    not PUT_OK)."""
    if status_remark:
        response.code, response.remark = ResponseCode.SYSTEM_ERROR, status.name
    else:
        response.code, response.remark = status, remark


class FlushResponder:
    def __init__(self, astore: AsyncStore, timeout_s: float) -> None:
        self._store = astore.store
        self._loop = asyncio.get_running_loop()
        self._timeout_s = timeout_s
        self._held: deque[tuple[int, float, RequestContext, RemotingCommand, bool]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._waiters = astore.flushed
        astore.flushed.add_listener(self.release)

    def __len__(self) -> int:
        return len(self._held)

    def hold(
        self, end_offset: int, ctx: RequestContext, response: RemotingCommand, status_remark: bool = False
    ) -> None:
        """Send `response` once the CommitLog is durable up to `end_offset`; on timeout answer
        FLUSH_DISK_TIMEOUT, or with `status_remark` SYSTEM_ERROR with remark ``FLUSH_DISK_TIMEOUT``."""
        self._held.append((end_offset, time.monotonic() + self._timeout_s, ctx, response, status_remark))
        if self._timer is None:
            self._timer = self._loop.call_later(self._timeout_s, self._expire)
        if self._store.flushed_offset() >= end_offset:
            self.release()
        else:
            self._waiters.watch()

    def release(self) -> bool:
        """Send the answers whose records are durable; returns whether any are still held."""
        held = self._held
        if not held:
            return False
        flushed = self._store.flushed_offset()
        while held and held[0][0] <= flushed:
            _, _, ctx, response, _ = held.popleft()
            ctx.send_response(response)
        return bool(held)

    def _expire(self) -> None:
        self._timer = None
        self.release()
        now = time.monotonic()
        held = self._held
        while held and held[0][1] <= now:
            _, _, ctx, response, status_remark = held.popleft()
            timed_out(response, ResponseCode.FLUSH_DISK_TIMEOUT, status_remark, "flush to disk timed out")
            ctx.send_response(response)
        if held:
            self._timer = self._loop.call_later(max(held[0][1] - now, 0.001), self._expire)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._held.clear()
