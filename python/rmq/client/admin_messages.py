"""The admin's direct reads and writes of messages: a queue's offsets, a pull of one queue from an offset
(no commit, no suspension: what ``printMsg``, ``queryMsgByOffset`` and ``consumeMessage`` read), one send.

A mixin of :class:`~rmq.client.admin_ext.Admin`, which provides the route lookups, the client instance and
the timeout.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Final

from rmq.client.errors import MQClientError
from rmq.client.message import Message, MessageExt, MessageQueue, decode_messages
from rmq.client.results import PullStatus, SendResult
from rmq.common.codes import MASTER_ID, PullSysFlag
from rmq.common.route import TopicRouteData

if TYPE_CHECKING:
    from rmq.client.config import ClientConfig
    from rmq.client.instance import ClientInstance
    from rmq.client.producer.producer import Producer

__all__ = ["DEFAULT_TOOLS_GROUP", "AdminNotFoundError", "MessageReadMixin"]

DEFAULT_TOOLS_GROUP: Final = "TOOLS_CONSUMER"


class AdminNotFoundError(MQClientError, LookupError):
    """What the admin asked for does not exist (a cluster, a broker name, a group's consume stats, a message
    at an offset)."""


class MessageReadMixin:
    config: ClientConfig
    timeout_ms: int

    @property
    def instance(self) -> ClientInstance:
        raise NotImplementedError

    async def topic_route(self, topic: str) -> TopicRouteData:
        raise NotImplementedError

    async def _route_masters(self, topic: str) -> list[tuple[str, str]]:
        raise NotImplementedError

    async def _broker_addr(self, topic: str, broker_name: str) -> str:
        for name, addr in await self._route_masters(topic):
            if name == broker_name:
                return addr
        raise AdminNotFoundError(f"broker {broker_name!r} serves no queue of topic {topic}")

    async def queues(self, topic: str) -> list[tuple[MessageQueue, str]]:
        """Every readable queue of ``topic`` with its master's address."""
        route = await self.topic_route(topic)
        addrs = {bd.broker_name: bd.broker_addrs.get(MASTER_ID) for bd in route.broker_datas}
        out = []
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            addr = addrs.get(qd.broker_name)
            if addr is not None:
                out += [(MessageQueue(topic, qd.broker_name, i), addr) for i in range(qd.read_queue_nums)]
        return out

    async def pull(
        self,
        topic: str,
        broker_name: str,
        queue_id: int,
        offset: int,
        max_nums: int = 32,
        *,
        group: str = DEFAULT_TOOLS_GROUP,
        subscription: str = "*",
    ) -> tuple[list[MessageExt], int]:
        """Messages of one queue from ``offset`` (PULL_MESSAGE, no commit, no suspension); the next offset."""
        addr = await self._broker_addr(topic, broker_name)
        mq = MessageQueue(topic, broker_name, queue_id)
        result = await self.instance.api.pull_message(
            addr,
            consumer_group=group,
            mq=mq,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=PullSysFlag.SUBSCRIPTION,
            commit_offset=0,
            suspend_timeout_ms=0,
            sub_version=0,
            subscription=subscription,
            timeout_ms=self.timeout_ms,
        )
        if result.status is not PullStatus.FOUND or not result.body:
            return [], result.next_begin_offset
        return decode_messages(result.body, broker_name), result.next_begin_offset

    async def min_max_offset(self, topic: str, broker_name: str, queue_id: int) -> tuple[int, int]:
        addr = await self._broker_addr(topic, broker_name)
        mq = MessageQueue(topic, broker_name, queue_id)
        api = self.instance.api
        return (
            await api.get_min_offset(addr, mq, self.timeout_ms),
            await api.get_max_offset(addr, mq, self.timeout_ms),
        )

    async def offset_by_time(self, topic: str, broker_name: str, queue_id: int, timestamp_ms: int) -> int:
        addr = await self._broker_addr(topic, broker_name)
        return await self.instance.api.search_offset(
            addr, MessageQueue(topic, broker_name, queue_id), timestamp_ms, self.timeout_ms
        )

    @contextlib.asynccontextmanager
    async def producer(self, group: str = "PID_RMQADMIN") -> AsyncIterator[Producer]:
        """A producer of ``group`` started for a few sends (the admin's own settings), shut down after."""
        from rmq.client.producer.producer import Producer

        producer = Producer(
            group, client_config=self.config.copy(instance_name=f"{self.config.instance_name}-p")
        )
        await producer.start()
        try:
            yield producer
        finally:
            await producer.shutdown()

    async def send_message(
        self,
        message: Message,
        *,
        broker_name: str | None = None,
        queue_id: int | None = None,
        group: str = "PID_RMQADMIN",
    ) -> SendResult:
        """One send by a producer started for it (to ``broker_name``/``queue_id`` if given)."""
        async with self.producer(group) as producer:
            mq = None
            if broker_name is not None or queue_id is not None:
                if broker_name is None or queue_id is None:
                    raise ValueError("a broker name and a queue id go together")
                mq = MessageQueue(message.topic, broker_name, queue_id)
            return await producer.send(message, mq=mq)
