"""Awaiting store watermarks from asyncio without blocking the loop."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable

from rmq._store import FlushTimeoutError, MessageStore


class OffsetWaiters:
    """Futures waiting for a monotonically growing offset to reach a target.

    `fd` becomes readable when the offset may have advanced; `drain` resets it; `current`
    reads the offset. All futures at or below the new offset resolve in one wake-up.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        fd: int,
        drain: Callable[[], int],
        current: Callable[[], int],
    ) -> None:
        self._loop = loop
        self._fd = fd
        self._drain = drain
        self._current = current
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._watching = False
        self._listeners: list[Callable[[], object]] = []

    def watch(self) -> None:
        """Watch the fd (until nothing waits any more). A listener calls this when it starts waiting;
        a wake-up that happened before is not lost: the fd stays readable until drained."""
        if not self._watching:
            self._loop.add_reader(self._fd, self._on_ready)
            self._watching = True

    def _on_ready(self) -> None:
        self._drain()
        self._resolve()
        waiting = False
        for cb in self._listeners:
            if cb():
                waiting = True
        if not waiting and not self._heap and self._watching:
            # Nothing waits: stop waking the loop for every flush or dispatch round.
            self._loop.remove_reader(self._fd)
            self._watching = False

    def add_listener(self, callback: Callable[[], bool]) -> None:
        """Call `callback` on wake-ups; it returns whether it still waits for the offset to advance.
        The fd is watched while a future or a listener waits (see :meth:`watch`)."""
        self._listeners.append(callback)
        self.watch()

    def _resolve(self) -> None:
        now = self._current()
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, _, fut = heapq.heappop(heap)
            if not fut.done():
                fut.set_result(None)

    def future(self, offset: int) -> asyncio.Future[None]:
        """A future resolved once the offset reaches `offset`."""
        fut: asyncio.Future[None] = self._loop.create_future()
        if self._current() >= offset:
            fut.set_result(None)
            return fut
        heapq.heappush(self._heap, (offset, next(self._seq), fut))
        self.watch()
        return fut

    async def wait(self, offset: int, timeout: float | None) -> bool:
        """Wait until the offset reaches `offset`; False on timeout."""
        fut = self.future(offset)
        if fut.done():
            return True
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self._listeners.clear()
        if self._watching:
            self._loop.remove_reader(self._fd)
            self._watching = False
        for _, _, fut in self._heap:
            if not fut.done():
                fut.cancel()
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._heap)


class AsyncStore:
    """A `MessageStore` bound to an event loop.

    `await wait_flushed(offset)` returns once the CommitLog is durable up to `offset`
    (raising `FlushTimeoutError` after `timeout` seconds); `await wait_dispatched(offset)`
    once records below `offset` are readable through their ConsumeQueues.
    """

    def __init__(self, store: MessageStore, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.store = store
        self._loop = loop or asyncio.get_running_loop()
        self.flushed = OffsetWaiters(
            self._loop,
            store.flush_notify_fd(),
            store.drain_flush_notifications,
            store.flushed_offset,
        )
        self.dispatched = OffsetWaiters(
            self._loop,
            store.dispatch_notify_fd(),
            store.drain_dispatch_notifications,
            store.dispatched_offset,
        )

    async def wait_flushed(self, offset: int, timeout: float = 5.0) -> None:
        if not await self.flushed.wait(offset, timeout):
            raise FlushTimeoutError(f"flush to offset {offset} not done within {timeout:.3f} s")

    async def wait_dispatched(self, offset: int, timeout: float | None = None) -> bool:
        return await self.dispatched.wait(offset, timeout)

    def close(self) -> None:
        self.flushed.close()
        self.dispatched.close()
