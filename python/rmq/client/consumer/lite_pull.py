"""The asyncio lite pull consumer (``DefaultLitePullConsumer`` semantics).

::

    consumer = LitePullConsumer("my-group", namesrv_addr="127.0.0.1:9876")
    consumer.subscribe("TopicA", "*")             # rebalanced with the group, or:
    # consumer.assign([MessageQueue("TopicA", "broker-a", 0)])
    await consumer.start()
    while running:
        for msg in await consumer.poll(timeout_ms=1000):
            handle(msg)
    await consumer.shutdown()

Queues are pulled in the background (batch ``pull_batch_size`` = 10, long polling) into a cache that
:meth:`poll` drains, one pulled batch per call. Flow control: at most ``pull_threshold_for_all`` cached
messages in all, ``pull_threshold_for_queue`` / ``pull_threshold_size_for_queue`` MiB per queue.

Offsets: a message returned by :meth:`poll` counts as consumed. With ``auto_commit`` (default) the
consumed offsets are committed by the first ``poll`` after each ``auto_commit_interval_ms``; otherwise
call :meth:`commit_sync` (acknowledged by the broker) or :meth:`commit_async`. Every commit is also sent by
the instance's 5-second offset persistence and at shutdown. :meth:`seek` moves a queue's next pull (and
its committed position) to any offset between the queue's min and max.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rmq.client.consumer.base import ConsumerBase
from rmq.client.consumer.offset_store import ReadOffsetType
from rmq.client.consumer.process_queue import ProcessQueue
from rmq.client.consumer.puller import Puller
from rmq.client.errors import ClientStateError, MQClientError
from rmq.client.heartbeat import ConsumeType, MessageSelector, SubscriptionData, build_subscription
from rmq.client.message import MessageExt, MessageQueue
from rmq.client.results import PullStatus
from rmq.common.codes import PullSysFlag
from rmq.remoting import RemotingError

__all__ = ["LitePullConsumer"]

log = logging.getLogger(__name__)

BROKER_SUSPEND_MAX_TIME_MS = 20_000
PULL_TIME_DELAY_MS_WHEN_PAUSE = 1_000
PULL_TIME_DELAY_MS_WHEN_FLOW_CONTROL = 50


@dataclass(eq=False)
class _QueueState:
    pq: ProcessQueue = field(default_factory=ProcessQueue)
    pull_offset: int = -1
    consume_offset: int = -1
    seek_offset: int = -1
    paused: bool = False
    task: asyncio.Task[None] | None = None


@dataclass(slots=True)
class _ConsumeRequest:
    msgs: list[MessageExt]
    mq: MessageQueue
    pq: ProcessQueue


class LitePullConsumer(ConsumerBase):
    consume_type = ConsumeType.CONSUME_ACTIVELY

    def __init__(
        self,
        group: str,
        *,
        pull_batch_size: int = 10,
        pull_threshold_for_all: int = 10_000,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100,
        consume_max_span: int = 2000,
        poll_timeout_ms: int = 5000,
        auto_commit: bool = True,
        auto_commit_interval_ms: int = 5000,
        consumer_pull_timeout_ms: int = 30_000,
        pull_time_delay_ms_when_exception: int = 1000,
        **kwargs: Any,
    ) -> None:
        """``kwargs``: the shared options of :class:`ConsumerBase` (``namesrv_addr``, ``message_model``,
        ``consume_from_where``, ``allocate_strategy``, ...)."""
        super().__init__(group, **kwargs)
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_all = pull_threshold_for_all
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.consume_max_span = consume_max_span
        self.poll_timeout_ms = poll_timeout_ms
        self.auto_commit = auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.consumer_pull_timeout_ms = consumer_pull_timeout_ms
        self.pull_time_delay_ms_when_exception = pull_time_delay_ms_when_exception
        self._mode: str | None = None  # "subscribe" | "assign"
        self._assign_expressions: dict[str, SubscriptionData] = {}
        self._assigned: dict[MessageQueue, _QueueState] = {}
        self._cache: deque[_ConsumeRequest] = deque()
        self._cache_event = asyncio.Event()
        self._puller: Puller | None = None
        self._next_auto_commit = 0.0
        self._start_timestamp = 0

    # --- subscription / assignment --------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        if self._mode == "assign":
            raise MQClientError("Subscribe and assign are mutually exclusive.")
        self._mode = "subscribe"
        self.subscriptions[topic] = self._subscription(topic, expression)
        if self._running:
            self.spawn(self._subscription_changed(topic))

    async def _subscription_changed(self, topic: str) -> None:
        await self.instance.update_topic_route(topic)
        await self.instance.send_heartbeat_to_all_brokers()
        self.instance.rebalance_immediately()

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)
        for mq in [mq for mq in self._assigned if mq.topic == topic]:
            self._drop(mq)

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        """Consume exactly these queues (no rebalance)."""
        if self._mode == "subscribe":
            raise MQClientError("Subscribe and assign are mutually exclusive.")
        wanted = set(mqs)
        if not wanted:
            raise ValueError("Message queues can not be null or empty.")
        self._mode = "assign"
        for mq in [mq for mq in self._assigned if mq not in wanted]:
            self._drop(mq)
        for mq in wanted:
            if mq not in self._assigned:
                self._assigned[mq] = _QueueState()
                if self._running:
                    self._start_pull(mq)

    def set_sub_expression_for_assign(self, topic: str, expression: str | MessageSelector) -> None:
        """The filter used for assigned queues of ``topic`` (default ``*``)."""
        self._assign_expressions[topic] = self._subscription(topic, expression)

    def assignment(self) -> set[MessageQueue]:
        return set(self._assigned)

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            if (state := self._assigned.get(mq)) is not None:
                state.paused = True

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            if (state := self._assigned.get(mq)) is not None:
                state.paused = False

    # --- lifecycle ------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._running:
            return
        if not 1 <= self.pull_batch_size <= 1024:
            raise MQClientError("pullBatchSize Out of range [1, 1024]")
        instance = self._attach()
        self._puller = Puller(instance, self.group)
        self._running = True
        self._start_timestamp = int(time.time() * 1000)
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_ms / 1000
        try:
            instance.start()
            for mq in list(self._assigned):
                self._start_pull(mq)
            await self._after_start()
        except BaseException:
            await self.shutdown()
            raise

    async def shutdown(self) -> None:
        if not self._running or self._stopping:
            return
        self._stopping = True
        async with self.rebalance.mutex:  # let a running rebalance finish; no new one starts
            pass
        tasks = [s.task for s in self._assigned.values() if s.task is not None and not s.task.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks)
        await self._cancel_background()
        if self.auto_commit:
            self._commit_to_store()
        await self.persist_consumer_offset(oneway=False)
        self._running = False
        self._stopping = False
        instance = self._instance
        assert instance is not None
        await instance.unregister_consumer(self.group)
        if self._rebalance is not None:
            self._rebalance.drop_all()
        for state in self._assigned.values():
            state.pq.dropped = True
        self._cache.clear()

    async def __aenter__(self) -> LitePullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # --- polling --------------------------------------------------------------------------------------

    async def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        """The next pulled batch (empty after ``timeout_ms``, default ``poll_timeout_ms``)."""
        if not self._running:
            raise ClientStateError(f"The consumer {self.group} is not running")
        timeout = self.poll_timeout_ms if timeout_ms is None else timeout_ms
        if timeout < 0:
            raise ValueError("Timeout must not be negative")
        if self.auto_commit and time.monotonic() >= self._next_auto_commit:
            await self.commit_async()
            self._next_auto_commit = time.monotonic() + self.auto_commit_interval_ms / 1000
        deadline = time.monotonic() + timeout / 1000
        while True:
            while self._cache:
                request = self._cache.popleft()
                state = self._assigned.get(request.mq)
                if request.pq.dropped or state is None or state.pq is not request.pq:
                    continue
                offset = request.pq.remove_messages(request.msgs)
                state.consume_offset = offset
                return request.msgs
            self._cache_event.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            try:
                await asyncio.wait_for(self._cache_event.wait(), remaining)
            except TimeoutError:
                return []

    # --- offsets --------------------------------------------------------------------------------------

    def _commit_to_store(self, offsets: dict[MessageQueue, int] | None = None) -> list[MessageQueue]:
        store = self.offset_store
        committed = []
        if offsets is None:
            offsets = {mq: s.consume_offset for mq, s in self._assigned.items() if s.consume_offset != -1}
        for mq, offset in offsets.items():
            state = self._assigned.get(mq)
            if state is not None and not state.pq.dropped:
                store.update_offset(mq, offset, False)
                committed.append(mq)
        return committed

    async def commit_sync(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Commit the consumed offsets (or ``offsets``) and wait for the broker (or file) to take them."""
        mqs = self._commit_to_store(offsets)
        await self.offset_store.persist_all(mqs, oneway=False)

    async def commit_async(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Commit the consumed offsets (or ``offsets``) without waiting for the broker."""
        mqs = self._commit_to_store(offsets)
        self.spawn(self.offset_store.persist_all(mqs, oneway=True))

    async def committed(self, mq: MessageQueue) -> int:
        """The group's stored offset of ``mq`` (-1 if none)."""
        return await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        state = self._assigned.get(mq)
        if state is None:
            raise MQClientError(f"The message queue is not in assigned list, message queue: {mq}")
        lo, hi = await self.min_offset(mq), await self.max_offset(mq)
        if not lo <= offset <= hi:
            raise MQClientError(
                f"Seek offset illegal, seek offset = {offset}, min offset = {lo}, max offset = {hi}"
            )
        if state.task is not None:
            state.task.cancel()
            state.task = None
        state.pq.clear()
        self._cache = deque(r for r in self._cache if r.mq != mq)
        state.seek_offset = offset
        if self._running:
            self._start_pull(mq)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.max_offset(mq))

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return await self.search_offset(mq, timestamp_ms)

    async def fetch_message_queues(self, topic: str) -> set[MessageQueue]:
        return await self.fetch_subscribe_message_queues(topic)

    # --- ConsumerMember / RebalanceHooks --------------------------------------------------------------

    def allocated_queues(self) -> set[MessageQueue]:
        return set(self._assigned)

    async def do_rebalance(self) -> None:
        if self._running and not self._stopping and self._mode == "subscribe":
            await self.rebalance.do_rebalance(False)

    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        for mq, offset in offsets.items():
            state = self._assigned.get(mq)
            if mq.topic == topic and state is not None:
                state.pq.clear()
                self._cache = deque(r for r in self._cache if r.mq != mq)
                state.seek_offset = offset
                self._start_pull(mq)

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        await self.offset_store.persist(mq)
        self.offset_store.remove_offset(mq)
        self._drop(mq)
        return True

    def dispatch_pull_requests(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None:
        if self._stopping:
            return
        for mq, pq, offset in requests:
            self._drop(mq)
            self._assigned[mq] = _QueueState(pq, pull_offset=offset)
            self._start_pull(mq)

    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        sub = self.subscriptions.get(topic)
        if sub is not None:
            sub.sub_version = int(time.time() * 1000)

    # --- pulling --------------------------------------------------------------------------------------

    def _drop(self, mq: MessageQueue) -> None:
        state = self._assigned.pop(mq, None)
        if state is None:
            return
        state.pq.dropped = True
        if state.task is not None and state.task is not asyncio.current_task():
            state.task.cancel()

    def _start_pull(self, mq: MessageQueue) -> None:
        state = self._assigned[mq]
        if state.task is not None and not state.task.done():
            state.task.cancel()
        state.task = self.spawn(self._pull_loop(mq, state))

    def _subscription_for(self, topic: str) -> SubscriptionData:
        if self._mode == "subscribe":
            sub = self.subscriptions.get(topic)
            if sub is not None:
                return sub
        sub = self._assign_expressions.get(topic)
        return sub if sub is not None else build_subscription(topic, "*")

    async def _pull_loop(self, mq: MessageQueue, state: _QueueState) -> None:
        while (
            self._running and not self._stopping and not state.pq.dropped and self._assigned.get(mq) is state
        ):
            delay_ms = await self._pull_once(mq, state)
            if delay_ms > 0:
                await asyncio.sleep(delay_ms / 1000)

    async def _next_pull_offset(self, mq: MessageQueue, state: _QueueState) -> int:
        if state.seek_offset != -1:
            offset = state.seek_offset
            state.consume_offset = offset
            state.seek_offset = -1
            return offset
        if state.pull_offset == -1:
            state.pull_offset = await self.compute_pull_from_where(mq)
        return state.pull_offset

    async def _pull_once(self, mq: MessageQueue, state: _QueueState) -> int:
        pq = state.pq
        if state.paused:
            return PULL_TIME_DELAY_MS_WHEN_PAUSE
        pq.last_pull_timestamp = int(time.time() * 1000)
        if len(self._cache) * self.pull_batch_size > self.pull_threshold_for_all:
            return PULL_TIME_DELAY_MS_WHEN_FLOW_CONTROL
        if (
            pq.msg_count > self.pull_threshold_for_queue
            or pq.msg_size > self.pull_threshold_size_for_queue * 1024 * 1024
            or pq.max_span > self.consume_max_span
        ):
            return PULL_TIME_DELAY_MS_WHEN_FLOW_CONTROL
        sub = self._subscription_for(mq.topic)
        puller = self._puller
        assert puller is not None
        try:
            offset = await self._next_pull_offset(mq, state)
            result = await puller.pull(
                mq,
                sub_expression=sub.sub_string,
                expression_type=sub.expression_type,
                sub_version=sub.sub_version,
                offset=offset,
                max_nums=self.pull_batch_size,
                # Sent as PULL_MESSAGE (11) with the lite-pull bit, as the Java 4.9.8 client does: code 361
                # is 5.x only and Apache 4.9 brokers answer it "not supported" (tests/peers).
                sys_flag=PullSysFlag.build(False, True, True) | PullSysFlag.LITE_PULL_MESSAGE,
                commit_offset=0,
                suspend_timeout_ms=BROKER_SUSPEND_MAX_TIME_MS,
                timeout_ms=self.consumer_pull_timeout_ms,
            )
        except (RemotingError, MQClientError) as exc:
            log.warning("lite pull of %s failed: %s", mq, exc)
            return self.pull_time_delay_ms_when_exception
        if pq.dropped or self._assigned.get(mq) is not state:
            return 0
        if result.status is PullStatus.FOUND:
            msgs = puller.messages(mq, result, sub)
            if msgs and state.seek_offset == -1:
                pq.put_messages(msgs)
                self._cache.append(_ConsumeRequest(msgs, mq, pq))
                self._cache_event.set()
        elif result.status is PullStatus.OFFSET_ILLEGAL:
            log.warning(
                "the pull request offset illegal, %s offset %d -> %d", mq, offset, result.next_begin_offset
            )
        if state.seek_offset == -1:
            state.pull_offset = result.next_begin_offset
        return 0

    def running_info(self) -> dict[str, Any]:
        info = super().running_info()
        info["properties"]["PROP_CONSUME_TYPE"] = self.consume_type.name
        return info
