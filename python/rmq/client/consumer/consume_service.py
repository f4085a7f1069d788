"""The base of the two consume services: a bounded pool of consume workers fed by a queue.

``consume_thread_max`` worker tasks take consume requests in order. A listener written as ``async def`` is
awaited on the loop by the worker; a plain function runs in a thread pool of the same size, so a listener
may block without stalling pulls. Shutdown stops taking new requests, lets the running ones finish within
the grace period, then cancels what is left (their messages stay uncommitted and are delivered again).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol

from rmq.client.heartbeat import MessageModel
from rmq.client.message import MessageExt, MessageQueue

if TYPE_CHECKING:
    from rmq.client.consumer.offset_store import OffsetStore
    from rmq.client.consumer.process_queue import ProcessQueue
    from rmq.client.consumer.rebalance import RebalanceImpl

__all__ = ["ConsumeService", "ConsumerInternals"]

log = logging.getLogger(__name__)


class ConsumerInternals(Protocol):
    """What a consume service uses of its push consumer."""

    group: str
    message_model: MessageModel
    consume_message_batch_max_size: int
    suspend_current_queue_time_ms: int

    @property
    def offset_store(self) -> OffsetStore: ...
    @property
    def rebalance(self) -> RebalanceImpl: ...

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]: ...
    def reset_retry_topic(self, msgs: list[MessageExt]) -> None: ...
    def reconsume_limit(self, orderly: bool) -> int: ...
    async def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None) -> None: ...
    async def send_to_retry_topic(self, msg: MessageExt, reconsume_times: int) -> None: ...


def is_async_callable(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


class ConsumeService:
    def __init__(self, consumer: ConsumerInternals, listener: Callable[..., Any], thread_max: int) -> None:
        self.consumer = consumer
        self.listener = listener
        self.thread_max = max(1, thread_max)
        self._is_async = is_async_callable(listener)
        self._executor: ThreadPoolExecutor | None = None
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._workers: list[asyncio.Task[None]] = []
        self.stopped = False

    def start(self) -> None:
        if not self._is_async:
            self._executor = ThreadPoolExecutor(
                self.thread_max, thread_name_prefix=f"ConsumeMessageThread_{self.consumer.group}"
            )
        loop = asyncio.get_running_loop()
        self._workers = [
            loop.create_task(self._worker(), name=f"consume-{self.consumer.group}-{i}")
            for i in range(self.thread_max)
        ]

    async def shutdown(self, await_termination_ms: int) -> None:
        self.stopped = True
        while not self._queue.empty():
            self._queue.get_nowait()
            self._queue.task_done()
        for _ in self._workers:
            self._queue.put_nowait(None)
        if self._workers:
            _, pending = await asyncio.wait(self._workers, timeout=max(await_termination_ms, 0) / 1000)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    def _put(self, item: Any) -> None:
        if not self.stopped:
            self._queue.put_nowait(item)

    def put_later(self, item: Any, delay_ms: int) -> None:
        async def later() -> None:
            await asyncio.sleep(delay_ms / 1000)
            self._put(item)

        self.consumer.spawn(later())

    async def _worker(self) -> None:
        queue = self._queue
        while True:
            item = await queue.get()
            try:
                if item is None or self.stopped:
                    return
                await self.run(item)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("consume request of %s failed", self.consumer.group)
            finally:
                queue.task_done()

    async def join(self) -> None:
        """Wait until every submitted consume request has been handled (tests, draining)."""
        await self._queue.join()

    async def run(self, item: Any) -> None:
        raise NotImplementedError

    async def call_listener(self, msgs: list[MessageExt], ctx: Any) -> Any:
        """The listener's answer; an exception is logged and answered as ``None`` (= consume later)."""
        try:
            if self._is_async:
                return await self.listener(msgs, ctx)
            assert self._executor is not None
            result = await asyncio.get_running_loop().run_in_executor(
                self._executor, self.listener, msgs, ctx
            )
            if isinstance(result, Awaitable):
                result = await result
            return result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning(
                "consumeMessage exception, Group: %s Msgs: %d MQ: %s",
                self.consumer.group,
                len(msgs),
                getattr(ctx, "message_queue", None),
                exc_info=True,
            )
            return None

    def submit_consume_request(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch_to_consume: bool
    ) -> None:
        raise NotImplementedError

    def start_queue(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        """A process queue was created (orderly services lock queues as they come)."""
