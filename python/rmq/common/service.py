"""The one asyncio service base: a named periodic task (RocketMQ's ``ServiceThread`` for the event loop).

``PeriodicTask(name, interval_s, tick)`` runs ``tick()`` (a plain function or a coroutine function) every
``interval_s`` seconds after an optional initial delay. ``wakeup()`` runs the next tick now; ``stop()``
cancels the wait, optionally runs one final tick (a drain) and returns when the task has ended. A tick that
raises is logged and the schedule continues.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable

__all__ = ["PeriodicTask"]

log = logging.getLogger(__name__)


class PeriodicTask:
    def __init__(
        self,
        name: str,
        interval_s: float,
        tick: Callable[[], Awaitable[object] | object],
        *,
        initial_delay_s: float | None = None,
        final_tick: bool = False,
    ) -> None:
        self.name = name
        self.interval_s = interval_s
        self.initial_delay_s = interval_s if initial_delay_s is None else initial_delay_s
        self.final_tick = final_tick
        self._tick = tick
        self._wakeup = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if self._task is not None:
            raise RuntimeError(f"{self.name} already started")
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def wakeup(self) -> None:
        """Run the next tick without waiting for the rest of the interval."""
        self._wakeup.set()

    async def stop(self) -> None:
        task = self._task
        if task is None or task.done():
            return
        self._stopping = True
        self._wakeup.set()
        try:
            await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise

    async def _wait(self, delay: float) -> None:
        if delay > 0 and not self._wakeup.is_set():
            try:
                await asyncio.wait_for(self._wakeup.wait(), delay)
            except TimeoutError:
                pass
        self._wakeup.clear()

    async def run_once(self) -> None:
        try:
            result = self._tick()
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: tick failed", self.name)

    async def _run(self) -> None:
        await self._wait(self.initial_delay_s)
        while not self._stopping:
            await self.run_once()
            await self._wait(self.interval_s)
        if self.final_tick:
            await self.run_once()
