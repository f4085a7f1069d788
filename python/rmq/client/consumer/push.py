"""The asyncio push consumer (``DefaultMQPushConsumer`` / ``DefaultMQPushConsumerImpl`` semantics).

::

    consumer = PushConsumer("my-group", namesrv_addr="127.0.0.1:9876")
    consumer.subscribe("TopicA", "TagA || TagB")
    consumer.register_message_listener(on_messages)   # or register_message_listener_orderly(...)
    await consumer.start()
    ...
    await consumer.shutdown()

Each queue this client is allocated gets a pull task: it long-polls the broker (PULL_MESSAGE, batch
``pull_batch_size``, hold 15 s), hands the messages to the consume service and pulls again at once. It
backs off 50 ms while the queue holds more than ``pull_threshold_for_queue`` messages or
``pull_threshold_size_for_queue`` MiB (or, concurrently, spans more than ``consume_concurrently_max_span``
offsets), 3 s after an error. Offsets are committed to the broker every 5 s (CLUSTERING) or to a local file
(BROADCASTING) and once more at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from rmq.client.consumer.base import ConsumerBase
from rmq.client.consumer.consume_concurrently import ConsumeConcurrentlyService
from rmq.client.consumer.consume_orderly import ConsumeOrderlyService
from rmq.client.consumer.consume_service import ConsumeService
from rmq.client.consumer.listener import MessageListenerConcurrently, MessageListenerOrderly
from rmq.client.consumer.offset_store import ReadOffsetType
from rmq.client.consumer.process_queue import ProcessQueue
from rmq.client.consumer.puller import Puller
from rmq.client.errors import MQClientError, NoRouteError
from rmq.client.heartbeat import ConsumeType, MessageModel, MessageSelector
from rmq.client.message import Message, MessageExt, MessageQueue
from rmq.client.results import PullStatus
from rmq.common.codes import MessageConst, PullSysFlag
from rmq.common.topic import retry_topic
from rmq.remoting import RemotingError

__all__ = ["PushConsumer"]

log = logging.getLogger(__name__)

BROKER_SUSPEND_MAX_TIME_MS = 15_000
CONSUMER_TIMEOUT_MS_WHEN_SUSPEND = 30_000
PULL_TIME_DELAY_MS_WHEN_EXCEPTION = 3_000
PULL_TIME_DELAY_MS_WHEN_FLOW_CONTROL = 50
PULL_TIME_DELAY_MS_WHEN_SUSPEND = 1_000
OFFSET_ILLEGAL_FIX_DELAY_MS = 10_000
UNLOCK_DELAY_MS = 20_000


class _PullRequest:
    __slots__ = ("mq", "next_offset", "pq", "previously_locked")

    def __init__(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        self.mq = mq
        self.pq = pq
        self.next_offset = next_offset
        self.previously_locked = False


class PushConsumer(ConsumerBase):
    consume_type = ConsumeType.CONSUME_PASSIVELY

    def __init__(
        self,
        group: str,
        *,
        consume_thread_max: int = 20,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        pull_interval_ms: int = 0,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100,
        pull_threshold_for_topic: int = -1,
        pull_threshold_size_for_topic: int = -1,
        consume_concurrently_max_span: int = 2000,
        max_reconsume_times: int = -1,
        suspend_current_queue_time_ms: int = 1000,
        post_subscription_when_pull: bool = False,
        await_termination_ms: int = 5000,
        **kwargs: Any,
    ) -> None:
        """``kwargs``: the shared options of :class:`ConsumerBase` (``namesrv_addr``, ``message_model``,
        ``consume_from_where``, ``consume_timestamp``, ``allocate_strategy``, ``instance_name``, ...)."""
        super().__init__(group, **kwargs)
        self.consume_thread_max = consume_thread_max
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.pull_batch_size = pull_batch_size
        self.pull_interval_ms = pull_interval_ms
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.pull_threshold_for_topic = pull_threshold_for_topic
        self.pull_threshold_size_for_topic = pull_threshold_size_for_topic
        self.consume_concurrently_max_span = consume_concurrently_max_span
        self.max_reconsume_times = max_reconsume_times
        """-1: 16 for concurrent listeners, unlimited (Integer.MAX_VALUE) for orderly ones."""
        self.suspend_current_queue_time_ms = suspend_current_queue_time_ms
        self.post_subscription_when_pull = post_subscription_when_pull
        self.await_termination_ms = await_termination_ms
        self.paused = False
        self._listener: Callable[..., Any] | None = None
        self._orderly = False
        self._service: ConsumeService | None = None
        self._puller: Puller | None = None
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._start_timestamp = 0
        self._flow_control_times = 0

    # --- configuration --------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Subscribe to ``topic`` with a tag expression (``"*"``, ``"A || B"``) or a MessageSelector."""
        self.subscriptions[topic] = self._subscription(topic, expression)
        if self._running:
            self.spawn(self._subscription_changed(topic))

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)

    async def _subscription_changed(self, topic: str) -> None:
        await self.instance.update_topic_route(topic)
        await self.instance.send_heartbeat_to_all_brokers()

    def register_message_listener(self, listener: MessageListenerConcurrently) -> None:
        """Consume concurrently: ``listener(msgs, context) -> ConsumeConcurrentlyStatus``."""
        self._listener = listener
        self._orderly = False

    def register_message_listener_orderly(self, listener: MessageListenerOrderly) -> None:
        """Consume each queue in order: ``listener(msgs, ConsumeOrderlyContext) -> ConsumeOrderlyStatus``."""
        self._listener = listener
        self._orderly = True

    @property
    def consume_orderly(self) -> bool:
        return self._orderly

    def reconsume_limit(self, orderly: bool = False) -> int:
        """How often a message is delivered again before it goes to the DLQ (``getMaxReconsumeTimes``)."""
        if self.max_reconsume_times == -1:
            return 2**31 - 1 if orderly else 16
        return self.max_reconsume_times

    def _check_config(self) -> None:
        if self._listener is None:
            raise MQClientError("messageListener is null; register a listener before start()")
        if not 1 <= self.pull_batch_size <= 1024:
            raise MQClientError("pullBatchSize Out of range [1, 1024]")
        if not 1 <= self.consume_message_batch_max_size <= 1024:
            raise MQClientError("consumeMessageBatchMaxSize Out of range [1, 1024]")
        if not 1 <= self.consume_thread_max <= 1000:
            raise MQClientError("consumeThreadMax Out of range [1, 1000]")
        if not 1 <= self.pull_threshold_for_queue <= 65535:
            raise MQClientError("pullThresholdForQueue Out of range [1, 65535]")

    # --- lifecycle ------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._running:
            return
        self._check_config()
        if self.message_model is MessageModel.CLUSTERING:
            rt = retry_topic(self.group)
            self.subscriptions.setdefault(rt, self._subscription(rt, "*"))
        instance = self._attach()
        self._puller = Puller(instance, self.group)
        assert self._listener is not None
        service_cls = ConsumeOrderlyService if self._orderly else ConsumeConcurrentlyService
        self._service = service_cls(self, self._listener, self.consume_thread_max)
        self._running = True
        self._start_timestamp = int(time.time() * 1000)
        try:
            self._service.start()
            instance.start()
            await self._after_start()
        except BaseException:
            await self.shutdown()
            raise
        log.info(
            "push consumer %s started (%s, orderly=%s)", self.group, self.message_model.name, self._orderly
        )

    async def shutdown(self) -> None:
        if not self._running or self._stopping:
            return
        self._stopping = True
        async with self.rebalance.mutex:  # let a running rebalance finish; no new one starts
            pass
        for task in list(self._pull_tasks.values()):
            task.cancel()
        if self._pull_tasks:
            await asyncio.wait(list(self._pull_tasks.values()))
        self._pull_tasks.clear()
        if self._service is not None:
            await self._service.shutdown(self.await_termination_ms)
        await self._cancel_background()
        await self.persist_consumer_offset(oneway=False)
        self._running = False
        self._stopping = False
        instance = self._instance
        assert instance is not None
        await instance.unregister_consumer(self.group)
        if self._rebalance is not None:
            self._rebalance.drop_all()
        log.info("push consumer %s shut down", self.group)

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def suspend(self) -> None:
        """Stop pulling (and rebalancing) until :meth:`resume`."""
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        if self._running:
            self.instance.rebalance_immediately()

    # --- ConsumerMember -------------------------------------------------------------------------------

    async def do_rebalance(self) -> None:
        if not self.paused and self._running and not self._stopping:
            await self.rebalance.do_rebalance(self._orderly)

    def running_info(self) -> dict[str, Any]:
        info = super().running_info()
        info["properties"].update(
            {
                "PROP_CONSUMEORDERLY": str(self._orderly).lower(),
                "PROP_THREADPOOL_CORE_SIZE": str(self.consume_thread_max),
            }
        )
        return info

    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: drop the queues, store the offsets, let rebalance re-create them."""
        self.spawn(self._reset_offset(topic, offsets))

    async def _reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        self.suspend()
        try:
            table = self.rebalance.process_queue_table
            for mq, pq in list(table.items()):
                if mq.topic == topic and mq in offsets:
                    pq.dropped = True
                    pq.clear()
            await asyncio.sleep(1)
            for mq in list(table):
                if mq.topic == topic and mq in offsets:
                    self.offset_store.update_offset(mq, offsets[mq], False)
                    await self.offset_store.persist(mq, oneway=False)
                    await self.rebalance.remove_process_queue(mq)
        finally:
            self.resume()

    # --- RebalanceHooks -------------------------------------------------------------------------------

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        store = self.offset_store
        await store.persist(mq)
        store.remove_offset(mq)
        task = self._pull_tasks.pop(mq, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        if self._orderly and self.message_model is MessageModel.CLUSTERING:
            try:
                await asyncio.wait_for(pq.consume_lock.acquire(), 1.0)
            except TimeoutError:
                pq.try_unlock_times += 1
                log.warning("[WRONG]mq is consuming, so can not unlock it, %s", mq)
                return False
            try:
                if pq.has_temp_message():
                    self.spawn(self._unlock_later(mq))
                else:
                    await self.rebalance.unlock(mq, oneway=True)
            finally:
                pq.consume_lock.release()
        return True

    async def _unlock_later(self, mq: MessageQueue) -> None:
        await asyncio.sleep(UNLOCK_DELAY_MS / 1000)
        await self.rebalance.unlock(mq, oneway=True)

    def dispatch_pull_requests(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None:
        if self._stopping:
            return
        loop = asyncio.get_running_loop()
        for mq, pq, offset in requests:
            old = self._pull_tasks.get(mq)
            if old is not None:
                old.cancel()
            self._pull_tasks[mq] = loop.create_task(self._pull_loop(_PullRequest(mq, pq, offset)))

    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        sub = self.subscriptions.get(topic)
        if sub is not None:
            sub.sub_version = int(time.time() * 1000)
        count = len(self.rebalance.process_queue_table)
        if count:
            if self.pull_threshold_for_topic != -1:
                self.pull_threshold_for_queue = max(1, self.pull_threshold_for_topic // count)
            if self.pull_threshold_size_for_topic != -1:
                self.pull_threshold_size_for_queue = max(1, self.pull_threshold_size_for_topic // count)
        await self.instance.send_heartbeat_to_all_brokers()

    # --- pulling --------------------------------------------------------------------------------------

    async def _pull_loop(self, request: _PullRequest) -> None:
        pq = request.pq
        try:
            while self._running and not self._stopping and not pq.dropped:
                delay_ms = await self._pull_once(request)
                if delay_ms > 0:
                    await asyncio.sleep(delay_ms / 1000)
        finally:
            if self._pull_tasks.get(request.mq) is asyncio.current_task():
                del self._pull_tasks[request.mq]

    def _flow_controlled(self, what: str, mq: MessageQueue) -> int:
        self._flow_control_times += 1
        if self._flow_control_times % 1000 == 0:
            log.warning("the cached message %s exceeds the threshold, so do flow control, mq=%s", what, mq)
        return PULL_TIME_DELAY_MS_WHEN_FLOW_CONTROL

    async def _pull_once(self, request: _PullRequest) -> int:
        """One PULL_MESSAGE for ``request``; returns how long to wait before the next one (ms)."""
        pq, mq = request.pq, request.mq
        pq.last_pull_timestamp = int(time.time() * 1000)
        if self.paused:
            return PULL_TIME_DELAY_MS_WHEN_SUSPEND
        if pq.msg_count > self.pull_threshold_for_queue:
            return self._flow_controlled("count", mq)
        if pq.msg_size > self.pull_threshold_size_for_queue * 1024 * 1024:
            return self._flow_controlled("size", mq)
        if not self._orderly:
            if pq.max_span > self.consume_concurrently_max_span:
                return self._flow_controlled("span", mq)
        elif pq.locked:
            if not request.previously_locked:
                try:
                    request.next_offset = await self.compute_pull_from_where(mq)
                except (RemotingError, MQClientError) as exc:
                    log.warning("computing the pull offset of %s failed: %s", mq, exc)
                    return PULL_TIME_DELAY_MS_WHEN_EXCEPTION
                request.previously_locked = True
        else:
            return PULL_TIME_DELAY_MS_WHEN_EXCEPTION
        sub = self.subscriptions.get(mq.topic)
        if sub is None:
            return PULL_TIME_DELAY_MS_WHEN_EXCEPTION
        commit_offset = 0
        if self.message_model is MessageModel.CLUSTERING:
            commit_offset = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
        sub_expression = (
            sub.sub_string if self.post_subscription_when_pull and not sub.class_filter_mode else None
        )
        sys_flag = PullSysFlag.build(
            commit_offset > 0, True, sub_expression is not None, sub.class_filter_mode
        )
        puller = self._puller
        assert puller is not None
        try:
            result = await puller.pull(
                mq,
                sub_expression=sub_expression,
                expression_type=sub.expression_type,
                sub_version=sub.sub_version,
                offset=request.next_offset,
                max_nums=self.pull_batch_size,
                sys_flag=sys_flag,
                commit_offset=max(commit_offset, 0),
                suspend_timeout_ms=BROKER_SUSPEND_MAX_TIME_MS,
                timeout_ms=CONSUMER_TIMEOUT_MS_WHEN_SUSPEND,
            )
        except (RemotingError, MQClientError) as exc:
            if self._running:
                log.warning("pull of %s from offset %d failed: %s", mq, request.next_offset, exc)
            return PULL_TIME_DELAY_MS_WHEN_EXCEPTION
        if pq.dropped:
            return 0
        status = result.status
        if status is PullStatus.FOUND:
            request.next_offset = result.next_begin_offset
            msgs = puller.messages(mq, result, sub)
            if not msgs:
                return 0
            service = self._service
            assert service is not None
            service.submit_consume_request(msgs, pq, mq, pq.put_messages(msgs))
            return self.pull_interval_ms
        if status is PullStatus.NO_NEW_MSG or status is PullStatus.NO_MATCHED_MSG:
            request.next_offset = result.next_begin_offset
            if pq.msg_count == 0:  # correctTagsOffset
                self.offset_store.update_offset(mq, request.next_offset, True)
            return 0
        # OFFSET_ILLEGAL
        log.warning(
            "the pull request offset illegal, %s offset %d -> %d",
            mq,
            request.next_offset,
            result.next_begin_offset,
        )
        request.next_offset = result.next_begin_offset
        pq.dropped = True
        self.spawn(self._fix_offset_later(mq, request.next_offset))
        return 0

    async def _fix_offset_later(self, mq: MessageQueue, offset: int) -> None:
        await asyncio.sleep(OFFSET_ILLEGAL_FIX_DELAY_MS / 1000)
        self.offset_store.update_offset(mq, offset, False)
        await self.offset_store.persist(mq)
        await self.rebalance.remove_process_queue(mq)

    # --- ConsumerInternals (used by the consume services) ---------------------------------------------

    def reset_retry_topic(self, msgs: list[MessageExt]) -> None:
        group_topic = retry_topic(self.group)
        for msg in msgs:
            if msg.topic == group_topic:
                original = msg.get_property(MessageConst.RETRY_TOPIC)
                if original:
                    msg.topic = original

    async def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None) -> None:
        """CONSUMER_SEND_MSG_BACK to the broker; if that fails, send a retry message ourselves."""
        instance = self.instance
        try:
            addr = instance.find_broker_addr_in_publish(broker_name) if broker_name else msg.store_host
            if addr is None:
                raise NoRouteError(f"The broker[{broker_name}] not exist", 10003)
            await instance.api.consumer_send_msg_back(
                addr, msg, self.group, delay_level, self.reconsume_limit(), 5000
            )
        except (RemotingError, MQClientError) as exc:
            log.warning(
                "sendMessageBack of %s to %s failed (%s); re-sending to the retry topic",
                msg.msg_id,
                broker_name,
                exc,
            )
            await self.send_to_retry_topic(msg, msg.reconsume_times + 1)

    async def send_to_retry_topic(self, msg: MessageExt, reconsume_times: int) -> None:
        """A new message to ``%RETRY%<group>`` carrying the original's body and properties."""
        props = dict(msg.properties)
        props.setdefault(MessageConst.ORIGIN_MESSAGE_ID, msg.msg_id)
        props[MessageConst.RETRY_TOPIC] = msg.topic
        props[MessageConst.RECONSUME_TIME] = str(reconsume_times)
        props[MessageConst.MAX_RECONSUME_TIMES] = str(self.reconsume_limit(self._orderly))
        props.pop(MessageConst.TRANSACTION_PREPARED, None)
        props[MessageConst.DELAY_TIME_LEVEL] = str(3 + msg.reconsume_times)
        new = Message(retry_topic(self.group), msg.body, flag=msg.flag, properties=props)
        producer = await self.instance.inner_producer()
        await producer.send(new)
