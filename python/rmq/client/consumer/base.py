"""What push and lite pull consumers share: configuration, subscriptions, offsets, the instance plumbing.

:meth:`ConsumerBase.compute_pull_from_where` is ``RebalancePushImpl.computePullFromWhereWithException``:
a stored offset wins; a queue the group never consumed starts at the max offset (LAST_OFFSET and its
variants; retry topics at 0), at 0 (FIRST_OFFSET) or at the offset of ``consume_timestamp``
(TIMESTAMP; retry topics at the max offset). A broker that cannot be asked (-2) raises, so the queue is
retried at the next rebalance instead of starting at a guess.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from rmq.client.admin import MessageQueryMixin
from rmq.client.config import ClientConfig
from rmq.client.consumer.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from rmq.client.consumer.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from rmq.client.consumer.process_queue import ProcessQueue
from rmq.client.consumer.rebalance import RebalanceImpl
from rmq.client.errors import ClientStateError, MQBrokerError, MQClientError, broker_error
from rmq.client.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    ExpressionType,
    MessageModel,
    MessageSelector,
    SubscriptionData,
    build_subscription,
)
from rmq.client.instance import ClientInstance, get_instance
from rmq.client.message import MessageQueue
from rmq.common.codes import ResponseCode
from rmq.common.topic import check_group, check_topic, is_retry_topic

__all__ = ["ConsumerBase"]

log = logging.getLogger(__name__)

CF = ConsumeFromWhere


def _half_an_hour_ago() -> str:
    return datetime.fromtimestamp(time.time() - 1800).strftime("%Y%m%d%H%M%S")


class ConsumerBase(MessageQueryMixin):
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY

    def __init__(
        self,
        group: str,
        *,
        namesrv_addr: str | None = None,
        instance_name: str | None = None,
        client_config: ClientConfig | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: str | None = None,
        allocate_strategy: AllocateMessageQueueStrategy | None = None,
        offset_store_dir: str | Path | None = None,
        unit_mode: bool = False,
    ) -> None:
        self.group = group
        self.client_config = ClientConfig.resolve(client_config, namesrv_addr, instance_name)
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp = consume_timestamp or _half_an_hour_ago()
        """``yyyyMMddHHmmss`` (local time) for CONSUME_FROM_TIMESTAMP; default: 30 minutes before creation."""
        self.allocate_strategy: AllocateMessageQueueStrategy = (
            allocate_strategy or AllocateMessageQueueAveragely()
        )
        self.offset_store_dir = offset_store_dir
        self.unit_mode = unit_mode
        self.subscriptions: dict[str, SubscriptionData] = {}
        self._instance: ClientInstance | None = None
        self._offset_store: OffsetStore | None = None
        self._rebalance: RebalanceImpl | None = None
        self._running = False
        self._stopping = False
        self._background: set[asyncio.Task[Any]] = set()

    # --- state --------------------------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._running

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None or not self._running:
            raise ClientStateError(f"The consumer {self.group} is not running; call start() first")
        return self._instance

    @property
    def offset_store(self) -> OffsetStore:
        if self._offset_store is None:
            raise ClientStateError(f"The consumer {self.group} is not started")
        return self._offset_store

    @property
    def rebalance(self) -> RebalanceImpl:
        if self._rebalance is None:
            raise ClientStateError(f"The consumer {self.group} is not started")
        return self._rebalance

    @property
    def client_id(self) -> str:
        return self.instance.client_id

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """A background task of this consumer, cancelled at shutdown."""
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _cancel_background(self) -> None:
        tasks = [t for t in self._background if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks)

    # --- subscriptions ------------------------------------------------------------------------------------

    def _subscription(self, topic: str, expression: str | MessageSelector | None) -> SubscriptionData:
        err = check_topic(topic)
        if err is not None:
            raise MQClientError(err)
        if isinstance(expression, MessageSelector):
            return build_subscription(topic, expression.expression, expression.expression_type)
        return build_subscription(topic, expression, ExpressionType.TAG)

    def _check_group(self) -> None:
        err = check_group(self.group)
        if err is not None:
            raise MQClientError(err)
        if self.group == "DEFAULT_CONSUMER":
            raise MQClientError("consumerGroup can not equal DEFAULT_CONSUMER, please specify another one.")

    # --- startup pieces -----------------------------------------------------------------------------------

    def _attach(self) -> ClientInstance:
        """Get the instance, build the offset store and the rebalancer (``start()`` of both consumers)."""
        self._check_group()
        instance = get_instance(self.client_config)
        if self.message_model is MessageModel.BROADCASTING:
            store: OffsetStore = LocalFileOffsetStore(instance.client_id, self.group, self.offset_store_dir)
        else:
            store = RemoteBrokerOffsetStore(instance, self.group)
        store.load()
        self._offset_store = store
        rebalance = RebalanceImpl(instance, self.group, self.message_model, self.allocate_strategy, self)
        rebalance.subscription_inner = self.subscriptions
        self._rebalance = rebalance
        instance.register_consumer(self)
        self._instance = instance
        return instance

    async def _after_start(self) -> None:
        instance = self.instance
        for topic in list(self.subscriptions):
            await instance.update_topic_route(topic)
        await self._check_client_in_broker()
        await instance.send_heartbeat_to_all_brokers()
        instance.rebalance_immediately()

    async def _check_client_in_broker(self) -> None:
        """CHECK_CLIENT_CONFIG for each non-TAG subscription, on one broker of its topic.

        A malformed expression raises :class:`SubscriptionParseFailedError` (23) with the broker's reason;
        any other refusal (e.g. ``enablePropertyFilter=false``) Java's generic :class:`MQClientError`."""
        instance = self.instance
        for sub in list(self.subscriptions.values()):
            if sub.expression_type == ExpressionType.TAG:
                continue
            addr = instance.find_broker_addr_by_topic(sub.topic)
            if addr is None:
                continue
            try:
                await instance.api.check_client_config(
                    addr, self.group, instance.client_id, sub, instance.timeout_ms
                )
            except MQBrokerError as exc:
                if exc.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED:  # a malformed expression
                    raise broker_error(
                        exc.code,
                        f"{sub.expression_type} subscription of topic {sub.topic} rejected: {exc.remark}",
                        exc.addr,
                    ) from exc
                raise MQClientError(
                    f"Check client in broker error, maybe because you use {sub.expression_type} to filter "
                    "message, "
                    f"but server has not been upgraded to support! {exc}",
                    exc.response_code,
                ) from exc

    # --- ConsumerMember -----------------------------------------------------------------------------------

    def subscribed_topics(self) -> Iterable[str]:
        return list(self.subscriptions)

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        return topic in self.subscriptions and topic not in self.rebalance.topic_subscribe_info

    def update_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        if topic in self.subscriptions and self._rebalance is not None:
            self._rebalance.topic_subscribe_info[topic] = set(mqs)

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            self.group,
            self.consume_type,
            self.message_model,
            self.consume_from_where,
            list(self.subscriptions.values()),
            self.unit_mode,
        )

    def allocated_queues(self) -> set[MessageQueue]:
        return set(self.rebalance.process_queue_table)

    async def persist_consumer_offset(self, *, oneway: bool = True) -> None:
        if self._running and self._offset_store is not None:
            await self._offset_store.persist_all(self.allocated_queues(), oneway=oneway)

    def consume_status(self, topic: str) -> dict[MessageQueue, int]:
        return self.offset_store.clone_offset_table(topic)

    def running_info(self) -> dict[str, Any]:
        from rmq.common.fastjson import ObjectKey

        return {
            "properties": {
                "PROP_CONSUME_TYPE": self.consume_type.name,
                "PROP_CONSUMER_START_TIMESTAMP": str(getattr(self, "_start_timestamp", 0)),
            },
            "subscriptionSet": [s.to_dict() for s in self.subscriptions.values()],
            "mqTable": {
                ObjectKey.from_mapping(mq.to_dict()): pq.info()
                for mq, pq in list(self.rebalance.process_queue_table.items())
            },
            "statusTable": {},
            "jstack": "",
        }

    # --- what each consumer kind decides (ConsumerMember / RebalanceHooks) --------------------------------

    async def do_rebalance(self) -> None:
        raise NotImplementedError

    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        raise NotImplementedError

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        raise NotImplementedError

    def dispatch_pull_requests(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None:
        raise NotImplementedError

    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None:
        raise NotImplementedError

    # --- RebalanceHooks (shared part) ---------------------------------------------------------------------

    def remove_dirty_offset(self, mq: MessageQueue) -> None:
        self.offset_store.remove_offset(mq)

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        last = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
        if last >= 0:
            return last
        if last != -1:
            raise MQClientError(f"cannot read the offset of {mq} from the broker")
        where = self.consume_from_where
        if where is CF.CONSUME_FROM_FIRST_OFFSET:
            return 0
        if where is CF.CONSUME_FROM_TIMESTAMP:
            if is_retry_topic(mq.topic):
                return await self.max_offset(mq)
            ts = datetime.strptime(self.consume_timestamp, "%Y%m%d%H%M%S")
            return await self.search_offset(mq, int(ts.timestamp() * 1000))
        if is_retry_topic(mq.topic):
            return 0
        return await self.max_offset(mq)

    # --- admin queries ------------------------------------------------------------------------------------

    async def max_offset(self, mq: MessageQueue) -> int:
        instance = self.instance
        return await instance.api.get_max_offset(await instance.master_addr(mq), mq, instance.timeout_ms)

    async def min_offset(self, mq: MessageQueue) -> int:
        instance = self.instance
        return await instance.api.get_min_offset(await instance.master_addr(mq), mq, instance.timeout_ms)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        instance = self.instance
        return await instance.api.search_offset(
            await instance.master_addr(mq), mq, timestamp_ms, instance.timeout_ms
        )

    async def fetch_subscribe_message_queues(self, topic: str) -> set[MessageQueue]:
        return await self.instance.fetch_subscribe_message_queues(topic)
