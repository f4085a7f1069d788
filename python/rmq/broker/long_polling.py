"""Long polling (RocketMQ's PullRequestHoldService): a pull that finds nothing new is parked per
`topic@queueId` until a message for that queue is dispatched or its suspend time passes, then
re-executed once (without suspending again) and answered on the original request."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from rmq.remoting.command import RemotingCommand
from rmq.remoting.context import RequestContext

__all__ = ["HeldPull", "PullHoldService"]


@dataclass(eq=False)
class HeldPull:
    ctx: RequestContext
    request: RemotingCommand
    topic: str
    queue_id: int
    offset: int
    timer: asyncio.TimerHandle | None = None
    started: float = 0.0
    """``time.perf_counter()`` when the pull was held (its answer's latency is measured from there)."""


class PullHoldService:
    """`max_offset(topic, qid)` reads the queue's max offset; `execute(held)` re-runs the pull
    (not suspending) and sends its response."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        max_offset: Callable[[str, int], int],
        execute: Callable[[HeldPull], None],
    ) -> None:
        self._loop = loop
        self._max_offset = max_offset
        self._execute = execute
        self._held: dict[tuple[str, int], list[HeldPull]] = {}
        self.watch: Callable[[], None] = lambda: None
        """Start hearing about dispatches (``AsyncStore.dispatched.watch``): called when a pull is held."""

    def __len__(self) -> int:
        return sum(len(v) for v in self._held.values())

    def hold(self, held: HeldPull, timeout_ms: int) -> None:
        key = (held.topic, held.queue_id)
        self._held.setdefault(key, []).append(held)
        held.timer = self._loop.call_later(max(timeout_ms, 0) / 1000, self._expire, held)
        self.watch()

    def _expire(self, held: HeldPull) -> None:
        key = (held.topic, held.queue_id)
        lst = self._held.get(key)
        if lst is None or held not in lst:
            return
        lst.remove(held)
        if not lst:
            del self._held[key]
        self._run(held)

    def _run(self, held: HeldPull) -> None:
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None
        if not held.ctx.is_closed:
            self._execute(held)

    def on_dispatch(self) -> bool:
        """New records were dispatched: wake the pulls whose queue grew past their offset. Returns
        whether pulls are still held."""
        if not self._held:
            return False
        for key in list(self._held):
            lst = self._held.get(key)
            if not lst:
                continue
            max_off = self._max_offset(key[0], key[1])
            ready = [h for h in lst if max_off > h.offset or h.ctx.is_closed]
            if not ready:
                continue
            rest = [h for h in lst if h not in ready]
            if rest:
                self._held[key] = rest
            else:
                del self._held[key]
            for h in ready:
                self._run(h)
        return bool(self._held)

    def close(self) -> None:
        for lst in self._held.values():
            for h in lst:
                if h.timer is not None:
                    h.timer.cancel()
        self._held.clear()
