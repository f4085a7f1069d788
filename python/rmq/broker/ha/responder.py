"""SYNC_MASTER answers: a send's response is held until a slave acknowledged the CommitLog up to its
record (a group commit of slave acks, like :class:`rmq.broker.flush_responder.FlushResponder` for
flushes). Held responses wait in append order; each ack releases every response at or below it in one
pass; one still held after `slaveTimeout` is answered FLUSH_SLAVE_TIMEOUT (RocketMQ's GroupTransferService;
a send-back: SYSTEM_ERROR with the status as the remark, as RocketMQ answers a send-back whose put is not
PUT_OK).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from rmq.broker.flush_responder import timed_out
from rmq.common.codes import ResponseCode
from rmq.remoting.command import RemotingCommand
from rmq.remoting.context import RequestContext

__all__ = ["FastPathReplicaWarnings", "ReplicaResponder"]

log = logging.getLogger(__name__)

# (end offset, ctx, response, status_remark): see ReplicaResponder.hold.
Answer = Callable[[int, RequestContext, RemotingCommand, bool], None]


class _NetReport(Protocol):
    def take_replica_report(self) -> tuple[int, int, int, int, int] | None: ...


class ReplicaResponder:
    def __init__(self, acked: Callable[[], int], timeout_s: float, answer: Answer) -> None:
        """`acked()` is the highest offset a slave acknowledged; `answer(end, ctx, response, status_remark)`
        sends a released response (or hands it on, e.g. to wait for the flush as well)."""
        self._acked = acked
        self._timeout_s = timeout_s
        self._answer = answer
        self._loop = asyncio.get_running_loop()
        self._held: deque[tuple[int, float, RequestContext, RemotingCommand, bool]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self.timeouts = 0

    def __len__(self) -> int:
        return len(self._held)

    def hold(
        self, end_offset: int, ctx: RequestContext, response: RemotingCommand, status_remark: bool = False
    ) -> None:
        """Answer `response` once a slave acknowledged the CommitLog up to `end_offset`; on timeout answer
        FLUSH_SLAVE_TIMEOUT, or with `status_remark` SYSTEM_ERROR with remark ``FLUSH_SLAVE_TIMEOUT``."""
        if self._acked() >= end_offset:
            self._answer(end_offset, ctx, response, status_remark)
            return
        self._held.append((end_offset, time.monotonic() + self._timeout_s, ctx, response, status_remark))
        if self._timer is None:
            self._timer = self._loop.call_later(self._timeout_s, self._expire)

    def release(self, _acked: int = 0) -> None:
        """Answer every held response a slave acknowledged (called on every higher ack)."""
        held = self._held
        acked = self._acked()
        while held and held[0][0] <= acked:
            end, _, ctx, response, status_remark = held.popleft()
            self._answer(end, ctx, response, status_remark)

    def _expire(self) -> None:
        self._timer = None
        self.release()
        now = time.monotonic()
        held = self._held
        expired = 0
        while held and held[0][1] <= now:
            _, _, ctx, response, status_remark = held.popleft()
            timed_out(response, ResponseCode.FLUSH_SLAVE_TIMEOUT, status_remark, response.remark)
            ctx.send_response(response)
            expired += 1
        if expired:
            self.timeouts += expired
            log.warning(
                "SYNC_MASTER: %d sends or send-backs timed out (FLUSH_SLAVE_TIMEOUT): no slave acknowledged "
                "their records within %.0f ms (slaveTimeout); a slave acknowledged up to offset %d",
                expired,
                self._timeout_s * 1000,
                self._acked(),
            )
        if held:
            self._timer = self._loop.call_later(max(held[0][1] - now, 0.001), self._expire)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._held.clear()


class FastPathReplicaWarnings:
    """The network thread's SYNC_MASTER refusals (``NetServer.take_replica_report``), warned about as the
    Python path warns about its own: read every second, one warning per kind with how many."""

    def __init__(self, net: _NetReport, timeout_s: float, fallbehind_max: int) -> None:
        self._net = net
        self._timeout_s = timeout_s
        self._fallbehind_max = fallbehind_max

    def tick(self) -> None:
        report = self._net.take_replica_report()
        if report is None:
            return
        timeouts, no_slave, lagging, lag_end, lag_acked = report
        if timeouts:
            log.warning(
                "SYNC_MASTER: %d sends answered FLUSH_SLAVE_TIMEOUT by the network thread: no slave "
                "acknowledged their records within %.0f ms (slaveTimeout)",
                timeouts,
                self._timeout_s * 1000,
            )
        if no_slave:
            log.warning(
                "SYNC_MASTER: %d sends answered SLAVE_NOT_AVAILABLE by the network thread (stored, not "
                "replicated yet): no slave is connected",
                no_slave,
            )
        if lagging:
            log.warning(
                "SYNC_MASTER: %d sends answered SLAVE_NOT_AVAILABLE by the network thread (stored, not "
                "replicated yet): the slave acknowledged offset %d, %d bytes behind the last of them "
                "(haSlaveFallbehindMax %d)",
                lagging,
                lag_acked,
                lag_end - lag_acked,
                self._fallbehind_max,
            )
