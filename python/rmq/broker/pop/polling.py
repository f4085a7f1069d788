"""Long polling of POP_MESSAGE (RocketMQ 5.x's PopLongPollingService, on rmq's dispatch wake-ups).

A pop that found nothing and asked for a ``pollTime`` is held until its queues grow (a message for its
topic, its retry topic, or an ack that unblocks an orderly queue) or until ``bornTime + pollTime``;
then it is run again and answered on the original request."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from rmq.remoting.command import RemotingCommand
from rmq.remoting.context import RequestContext

__all__ = ["HeldPop", "PopHoldService"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class HeldPop:
    ctx: RequestContext
    request: RemotingCommand
    topics: list[str]
    """The topics whose queues may satisfy it (the topic and the group's retry topic)."""
    signature: int
    """The sum of those queues' max offsets when it was held: it runs again once that changes."""
    started: float
    timer: asyncio.TimerHandle | None = None


class PopHoldService:
    """``signature(topics)`` sums the topics' max offsets; ``execute(held, expired)`` runs a held pop
    again and answers it (``expired``: its poll time is over, answer whatever it finds)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        signature: Callable[[list[str]], int],
        execute: Callable[[HeldPop, bool], None],
        max_held: int = 100_000,
    ) -> None:
        self._loop = loop
        self._signature = signature
        self._execute = execute
        self.max_held = max_held
        self._held: list[HeldPop] = []
        self.watch: Callable[[], None] = lambda: None
        self.full = 0
        """Pops answered POLLING_FULL because ``max_held`` pops were held."""

    def __len__(self) -> int:
        return len(self._held)

    def is_full(self) -> bool:
        return len(self._held) >= self.max_held

    def hold(self, held: HeldPop, timeout_ms: int) -> None:
        self._held.append(held)
        held.timer = self._loop.call_later(max(timeout_ms, 0) / 1000, self._expire, held)
        self.watch()

    def _take(self, held: HeldPop) -> bool:
        try:
            self._held.remove(held)
        except ValueError:
            return False
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None
        return True

    def _expire(self, held: HeldPop) -> None:
        if self._take(held) and not held.ctx.is_closed:
            self._execute(held, True)

    def on_dispatch(self) -> bool:
        """New records were dispatched: run the pops whose queues grew. Returns whether pops are held."""
        if not self._held:
            return False
        signatures: dict[tuple[str, ...], int] = {}  # one look per topic set, however many pops wait on it
        for held in list(self._held):
            if held.ctx.is_closed:
                self._take(held)
                continue
            key = tuple(held.topics)
            now = signatures.get(key)
            if now is None:
                now = signatures[key] = self._signature(held.topics)
            if now != held.signature and self._take(held):
                self._execute(held, False)
        return bool(self._held)

    def notify(self, topic: str) -> None:
        """``topic`` may have become poppable without growing (an orderly queue unblocked, a pop left
        messages behind). The pops run from the loop, not from the caller (a pop that notifies)."""
        for held in list(self._held):
            if topic in held.topics and self._take(held) and not held.ctx.is_closed:
                self._loop.call_soon(self._execute, held, False)

    def close(self) -> None:
        for held in self._held:
            if held.timer is not None:
                held.timer.cancel()
        self._held.clear()
