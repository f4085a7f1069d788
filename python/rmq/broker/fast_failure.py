"""RocketMQ's fast failure (``brokerFastFailureEnable``, on by default): back-pressure on sends.

A send that waited in the broker longer than ``waitTimeMillsInSendQueue`` (200 ms) between being read off
its socket and being handled, or that meets an append holding the CommitLog's put lock longer than
``osPageCacheBusyTimeOutMills`` (1000 ms: the page cache or the disk is stuck), is answered SYSTEM_BUSY (2)
at once with the remark Apache's broker gives, and not stored: the client hears "broker busy" at once instead
of waiting for a timeout (the Java producer 4.9 throws MQBrokerException code 2, which it does not retry).

The network thread's fast path leaves such sends to the Python path (declined ``busy``), so every refusal
is answered, counted (``rocketmq_send_busy_refusals_total``) and logged here, at most every few seconds with
how many and how long they waited.
"""

from __future__ import annotations

import logging
import time
from typing import Final

from rmq.broker.config import BrokerConfig
from rmq.common.codes import ResponseCode
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.context import RequestContext

__all__ = ["PAGE_CACHE_BUSY", "QUEUE_WAIT", "FastFailure", "page_cache_remark", "queue_remark"]

log = logging.getLogger(__name__)

QUEUE_WAIT: Final = "queue_wait"
"""Reason label: the send waited longer than ``waitTimeMillsInSendQueue``."""
PAGE_CACHE_BUSY: Final = "page_cache_busy"
"""Reason label: an append held the put lock longer than ``osPageCacheBusyTimeOutMills``."""

_WARN_INTERVAL_S: Final = 5.0
_BUSY: Final = int(ResponseCode.SYSTEM_BUSY)


def queue_remark(waited_ms: int, queued: int) -> str:
    """Apache's remark for a send that waited too long in its send queue (``BrokerFastFailure``)."""
    return (
        "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
        f"period in queue: {waited_ms}ms, size of queue: {queued}"
    )


def page_cache_remark() -> str:
    """Apache's remark for a send refused while the page cache is busy (``OS_PAGECACHE_BUSY``)."""
    return "[PC_SYNCHRONIZED]broker busy, start flow control for a while"


class FastFailure:
    """The checks a send goes through, the refusals' counts (per reason, for the metrics) and their log."""

    def __init__(self, cfg: BrokerConfig) -> None:
        self.enabled = cfg.broker_fast_failure_enable
        self.wait_ms = cfg.wait_time_mills_in_send_queue
        self._wait_s = self.wait_ms / 1000
        self.page_cache_busy_ms = cfg.os_page_cache_busy_time_out_mills
        self.refused: dict[str, int] = {QUEUE_WAIT: 0, PAGE_CACHE_BUSY: 0}
        """Sends refused SYSTEM_BUSY since start, per reason."""
        # Since the last warning: refusals per reason, the longest wait (ms) and the longest queue behind.
        self._recent = {QUEUE_WAIT: 0, PAGE_CACHE_BUSY: 0}
        self._longest_wait_ms = 0
        self._longest_queue = 0
        self._longest_lock_ms = 0
        self._warned_at = 0.0

    def fast_send_limits(self) -> tuple[int, int] | None:
        """What the network thread's fast path is given: ``(waitTimeMillsInSendQueue,
        osPageCacheBusyTimeOutMills)``, or None when ``brokerFastFailureEnable=false``."""
        return (self.wait_ms, self.page_cache_busy_ms) if self.enabled else None

    def waited_too_long(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """SYSTEM_BUSY for a send handled ``waitTimeMillsInSendQueue`` or more after it was read; None: on."""
        if not self.enabled:
            return None
        waited = time.monotonic() - ctx.received_at
        if waited < self._wait_s:
            return None
        waited_ms = int(waited * 1000)
        queued = ctx.waiting
        self._longest_wait_ms = max(self._longest_wait_ms, waited_ms)
        self._longest_queue = max(self._longest_queue, queued)
        self._count(QUEUE_WAIT)
        return create_response(request, _BUSY, queue_remark(waited_ms, queued))

    def page_cache_busy(self, request: RemotingCommand, lock_held_ms: int) -> RemotingCommand | None:
        """SYSTEM_BUSY when an append has held the put lock for longer than ``osPageCacheBusyTimeOutMills``
        (``lock_held_ms``: the store's ``put_lock_held_ms()``); None: go on."""
        if not self.enabled or lock_held_ms <= self.page_cache_busy_ms:
            return None
        self._longest_lock_ms = max(self._longest_lock_ms, lock_held_ms)
        self._count(PAGE_CACHE_BUSY)
        return create_response(request, _BUSY, page_cache_remark())

    def _count(self, reason: str) -> None:
        self.refused[reason] += 1
        self._recent[reason] += 1
        now = time.monotonic()
        if now - self._warned_at < _WARN_INTERVAL_S:
            return
        waits, locks = self._recent[QUEUE_WAIT], self._recent[PAGE_CACHE_BUSY]
        parts = []
        if waits:
            parts.append(
                f"{waits} waited {self.wait_ms} ms (waitTimeMillsInSendQueue) or more since read (longest "
                f"{self._longest_wait_ms} ms, up to {self._longest_queue} more queued behind on a connection)"
            )
        if locks:
            parts.append(
                f"{locks} met the CommitLog's put lock held longer than {self.page_cache_busy_ms} ms "
                f"(osPageCacheBusyTimeOutMills; longest {self._longest_lock_ms} ms)"
            )
        log.warning(
            "broker busy: %d sends refused SYSTEM_BUSY, not stored (%s)%s",
            waits + locks,
            "; ".join(parts),
            f" in the last {now - self._warned_at:.0f} s" if self._warned_at else "",
        )
        self._warned_at = now
        self._recent = {QUEUE_WAIT: 0, PAGE_CACHE_BUSY: 0}
        self._longest_wait_ms = self._longest_queue = self._longest_lock_ms = 0
