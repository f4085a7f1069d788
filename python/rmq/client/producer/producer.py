"""The asyncio producer (``DefaultMQProducer`` / ``DefaultMQProducerImpl`` semantics).

::

    producer = Producer("my-group", namesrv_addr="127.0.0.1:9876")
    await producer.start()
    result = await producer.send(Message("TopicA", b"hello", tags="TagA", keys="order-1"))
    fut = producer.send_async(Message("TopicA", b"x"), callback=print)      # pipelined on one connection
    await producer.send([Message("TopicA", b"1"), Message("TopicA", b"2")])  # one batch
    await producer.send(msg, selector=SelectMessageQueueByHash(), arg=order_id)   # orderly by key
    await producer.shutdown()

Every send validates the message first (topic rules, body not empty and at most ``max_message_size``),
gives it a ``UNIQ_KEY`` and compresses bodies of ``compress_msg_body_over_howmuch`` bytes or more (zlib,
sysFlag ``COMPRESSED | ZLIB``). A plain synchronous ``send`` tries ``1 + retry_times_when_send_failed``
times, each time on a queue of another broker when there is one, within one ``send_msg_timeout_ms``
budget; broker errors outside ``retry_response_codes`` are raised at once. ``send_async`` retries
transport failures ``retry_times_when_send_async_failed`` times. Sends to a chosen queue or through a
selector are not retried.

Running producers also look messages up: ``view_message``, ``query_message``,
``query_message_by_unique_key``, ``view_message_by_unique_key`` (:mod:`rmq.client.admin`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from enum import Enum
from typing import Any, Final

from rmq.client.admin import MessageQueryMixin
from rmq.client.config import ClientConfig
from rmq.client.errors import (
    ClientErrorCode,
    ClientStateError,
    MessageIllegalError,
    MQBrokerError,
    MQClientError,
    NoRouteError,
    RequestTimeoutError,
)
from rmq.client.instance import ClientInstance, get_instance
from rmq.client.message import (
    Message,
    MessageExt,
    MessageQueue,
    encode_batch,
    encode_properties,
)
from rmq.client.producer.fault import MQFaultStrategy
from rmq.client.producer.selector import MessageQueueSelector
from rmq.client.results import SendResult, SendStatus
from rmq.client.route import TopicPublishInfo
from rmq.client.uniq_id import create_uniq_id
from rmq.common.codes import AUTO_CREATE_TOPIC_KEY_TOPIC, MessageConst, MessageSysFlag, ResponseCode
from rmq.common.topic import check_group, check_topic, is_not_allowed_send_topic, is_retry_topic
from rmq.remoting import RemotingConnectError, RemotingError, RemotingTimeoutError

__all__ = ["DEFAULT_RETRY_RESPONSE_CODES", "MAX_MESSAGE_SIZE", "EncodedBatch", "Producer", "validate_message"]

log = logging.getLogger(__name__)

MAX_MESSAGE_SIZE: Final = 4 * 1024 * 1024
DEFAULT_RETRY_RESPONSE_CODES: Final = frozenset(
    int(c)
    for c in (
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    )
)
_UNIQ_KEY: Final = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX
_COMPRESSED_ZLIB: Final = MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB

SendCallback = Callable[[SendResult], object]


class CommunicationMode(Enum):
    SYNC = "sync"
    ASYNC = "async"
    ONEWAY = "oneway"


ExceptionCallback = Callable[[BaseException], object]


def validate_message(msg: Message, max_message_size: int = MAX_MESSAGE_SIZE) -> None:
    """``Validators.checkMessage``: topic name and permission, body present, not empty, not too large."""
    if msg is None:
        raise MessageIllegalError("the message is null")
    err = check_topic(msg.topic)
    if err is not None:
        raise MessageIllegalError(err)
    if is_not_allowed_send_topic(msg.topic):
        raise MessageIllegalError(f"Sending message to topic[{msg.topic}] is forbidden.")
    if msg.body is None:
        raise MessageIllegalError("the message body is null")
    if len(msg.body) == 0:
        raise MessageIllegalError("the message body length is zero")
    if len(msg.body) > max_message_size:
        raise MessageIllegalError(f"the message body size over max value, MAX: {max_message_size}")


class EncodedBatch(Message):
    """``MessageBatch``: messages of one topic already encoded as one SEND_BATCH_MESSAGE body (REMOTING.md
    §4.5), each with its ``UNIQ_KEY``; `uniq_ids` joins them with ``,`` (the send result's ``msg_id``).
    ``Producer.send`` takes one as it is (a batch of columnar rows is built this way, without a
    :class:`Message` per row); the caller answers for the body's messages being valid."""

    __slots__ = ("uniq_ids",)

    def __init__(self, topic: str, body: bytes, uniq_ids: str, wait_store_msg_ok: bool = True) -> None:
        super().__init__(topic, body, wait_store_msg_ok=wait_store_msg_ok)
        self.uniq_ids = uniq_ids


class _Batch(EncodedBatch):
    """A batch made by ``Producer.batch`` from messages, which it keeps."""

    __slots__ = ("messages",)

    def __init__(self, messages: list[Message], body: bytes, wait_store_msg_ok: bool) -> None:
        uniq_ids = ",".join(m.properties[_UNIQ_KEY] for m in messages)
        super().__init__(messages[0].topic, body, uniq_ids, wait_store_msg_ok=wait_store_msg_ok)
        self.messages = messages


def _now_ms() -> int:
    return int(time.time() * 1000)


class Producer(MessageQueryMixin):
    def __init__(
        self,
        group: str,
        *,
        namesrv_addr: str | None = None,
        instance_name: str | None = None,
        client_config: ClientConfig | None = None,
        send_msg_timeout_ms: int = 3000,
        compress_msg_body_over_howmuch: int = 4096,
        compress_level: int = 5,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        retry_another_broker_when_not_store_ok: bool = False,
        max_message_size: int = MAX_MESSAGE_SIZE,
        send_latency_fault_enable: bool = False,
        default_topic_queue_nums: int = 4,
        create_topic_key: str = AUTO_CREATE_TOPIC_KEY_TOPIC,
        retry_response_codes: Iterable[int] = DEFAULT_RETRY_RESPONSE_CODES,
    ) -> None:
        self.group = group
        self.client_config = ClientConfig.resolve(client_config, namesrv_addr, instance_name)
        self.send_msg_timeout_ms = send_msg_timeout_ms
        self.compress_msg_body_over_howmuch = compress_msg_body_over_howmuch
        self.compress_level = compress_level
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.max_message_size = max_message_size
        self.default_topic_queue_nums = default_topic_queue_nums
        self.create_topic_key = create_topic_key
        self.retry_response_codes = frozenset(int(c) for c in retry_response_codes)
        self.fault_strategy = MQFaultStrategy(send_latency_fault_enable)
        self._publish: dict[str, TopicPublishInfo] = {}
        self._instance: ClientInstance | None = None
        self._running = False

    # --- lifecycle --------------------------------------------------------------------------------------

    @property
    def send_latency_fault_enable(self) -> bool:
        return self.fault_strategy.send_latency_fault_enable

    @send_latency_fault_enable.setter
    def send_latency_fault_enable(self, value: bool) -> None:
        self.fault_strategy.send_latency_fault_enable = value

    @property
    def instance(self) -> ClientInstance:
        self.make_sure_state_ok()
        assert self._instance is not None
        return self._instance

    @property
    def client_id(self) -> str:
        return self.instance.client_id

    def make_sure_state_ok(self) -> None:
        """Raise :class:`ClientStateError` unless the producer is running."""
        if self._instance is None or not self._running:
            raise ClientStateError(f"The producer {self.group} is not running; call start() first")

    async def start(self) -> None:
        if self._running:
            return
        err = check_group(self.group)
        if err is not None:
            raise MQClientError(err)
        instance = get_instance(self.client_config)
        instance.register_producer(self)
        self._instance = instance
        self._running = True
        self._publish.setdefault(self.create_topic_key, TopicPublishInfo())
        instance.start()
        instance.spawn(instance.send_heartbeat_to_all_brokers())

    async def shutdown(self) -> None:
        if not self._running:
            return
        self._running = False
        instance = self._instance
        assert instance is not None
        await instance.unregister_producer(self.group)

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # --- ProducerMember ---------------------------------------------------------------------------------

    def publish_topics(self) -> Iterable[str]:
        return list(self._publish)

    def is_publish_topic_need_update(self, topic: str) -> bool:
        info = self._publish.get(topic)
        return info is None or not info.ok()

    def update_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        self._publish[topic] = info

    def check_transaction_state(self, addr: str, msg: MessageExt, header: Any) -> None:
        log.warning("producer %s got CHECK_TRANSACTION_STATE but is not transactional", self.group)

    # --- routes -----------------------------------------------------------------------------------------

    async def find_publish_info(self, topic: str) -> TopicPublishInfo:
        """``tryToFindTopicPublishInfo``: the cached route, else the name server's, else TBW102's."""
        info = self._publish.get(topic)
        if info is None or not info.ok():
            self._publish.setdefault(topic, TopicPublishInfo())
            await self.instance.update_topic_route(topic)
            info = self._publish[topic]
        if info.have_route or info.ok():
            return info
        await self.instance.update_topic_route(
            topic, default_topic=self.create_topic_key, default_queue_nums=self.default_topic_queue_nums
        )
        return self._publish[topic]

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        info = await self.find_publish_info(topic)
        return list(info.queues)

    # --- sending ----------------------------------------------------------------------------------------

    async def send(
        self,
        msg: Message | Sequence[Message],
        *,
        mq: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        """Send and await the broker's answer.

        ``msg`` may be a list of messages of one topic: they go as one batch. With ``mq`` the message goes to
        that queue, with ``selector`` to ``selector(queues, msg, arg)``; neither is retried.
        """
        result = await self._send(msg, mq, selector, arg, timeout_ms, CommunicationMode.SYNC)
        assert result is not None
        return result

    def send_async(
        self,
        msg: Message | Sequence[Message],
        callback: SendCallback | None = None,
        on_exception: ExceptionCallback | None = None,
        *,
        mq: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout_ms: int | None = None,
    ) -> asyncio.Future[SendResult]:
        """Start a send and return at once; the returned future (and ``callback``) get the result.

        Many sends may be outstanding; they share one connection per broker.
        """
        self.make_sure_state_ok()  # a stopped producer raises here, not in the returned future
        task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(
            self._send(msg, mq, selector, arg, timeout_ms, CommunicationMode.ASYNC)
        )
        if callback is not None or on_exception is not None:

            def done(t: asyncio.Task[Any]) -> None:
                if t.cancelled():
                    return
                exc = t.exception()
                try:
                    if exc is not None:
                        if on_exception is not None:
                            on_exception(exc)
                        else:
                            log.warning("async send failed: %s", exc)
                    elif callback is not None:
                        callback(t.result())
                except Exception:
                    log.exception("send callback failed")

            task.add_done_callback(done)
        return task

    async def send_oneway(
        self,
        msg: Message | Sequence[Message],
        *,
        mq: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        """Send without waiting for (or getting) an answer."""
        await self._send(msg, mq, selector, arg, None, CommunicationMode.ONEWAY)

    async def _send(
        self,
        msg: Message | Sequence[Message],
        mq: MessageQueue | None,
        selector: MessageQueueSelector | None,
        arg: Any,
        timeout_ms: int | None,
        mode: CommunicationMode,
    ) -> SendResult | None:
        begin = _now_ms()
        self.make_sure_state_ok()
        timeout = self.send_msg_timeout_ms if timeout_ms is None else timeout_ms
        message = self.batch(msg) if not isinstance(msg, Message) else msg
        validate_message(message, self.max_message_size)
        if mq is not None:
            if mq.topic != message.topic:
                raise MQClientError("message's topic not equal mq's topic")
            return await self._send_kernel(message, mq, mode, timeout - (_now_ms() - begin))
        if selector is not None:
            info = await self.find_publish_info(message.topic)
            if not info.ok():
                raise NoRouteError(f"No route info for this topic, {message.topic}")
            try:
                chosen = selector(list(info.queues), message, arg)
            except Exception as exc:
                raise MQClientError(f"select message queue threw exception: {exc}") from exc
            if chosen is None:
                raise MQClientError("select message queue return null.")
            cost = _now_ms() - begin
            if timeout < cost:
                raise RequestTimeoutError("sendSelectImpl call timeout")
            return await self._send_kernel(message, chosen, mode, timeout - cost)
        return await self._send_default(message, mode, timeout, begin)

    def batch(self, msgs: Sequence[Message]) -> _Batch:
        """``MessageBatch.generateFromList`` + per-message checks and ids, then the encoded body."""
        messages = list(msgs)
        if not messages:
            raise MessageIllegalError("the batch is empty")
        first = messages[0]
        for m in messages:
            if m.delay_time_level > 0:
                raise MessageIllegalError("TimeDelayLevel is not supported for batching")
            if m.is_timer_message:
                raise MessageIllegalError("Timer messages are not supported for batching")
            if is_retry_topic(m.topic):
                raise MessageIllegalError("Retry Group is not supported for batching")
            if m.topic != first.topic:
                raise MessageIllegalError("The topic of the messages in one batch should be the same")
            if m.wait_store_msg_ok != first.wait_store_msg_ok:
                raise MessageIllegalError("The waitStoreMsgOK of the messages in one batch should the same")
            validate_message(m, self.max_message_size)
            if _UNIQ_KEY not in m.properties:
                m.properties[_UNIQ_KEY] = create_uniq_id()
        return _Batch(messages, encode_batch(messages), first.wait_store_msg_ok)

    async def _send_default(
        self, msg: Message, mode: CommunicationMode, timeout: int, begin: int
    ) -> SendResult | None:
        info = await self.find_publish_info(msg.topic)
        if not info.ok():
            raise NoRouteError(f"No route info of this topic: {msg.topic}")
        if mode is CommunicationMode.SYNC:
            times_total = 1 + self.retry_times_when_send_failed
        elif mode is CommunicationMode.ASYNC:
            times_total = 1 + self.retry_times_when_send_async_failed
        else:
            times_total = 1
        mq: MessageQueue | None = None
        exception: BaseException | None = None
        result: SendResult | None = None
        brokers_sent: list[str] = []
        strategy = self.fault_strategy
        for _ in range(times_total):
            mq = strategy.select_one_message_queue(info, None if mq is None else mq.broker_name)
            brokers_sent.append(mq.broker_name)
            start = _now_ms()
            cost = start - begin
            if timeout < cost:
                raise RequestTimeoutError("sendDefaultImpl call timeout") from exception
            try:
                result = await self._send_kernel(msg, mq, mode, timeout - cost)
            except (RemotingError, MQClientError) as exc:
                strategy.update_fault_item(mq.broker_name, _now_ms() - start, True)
                exception = exc
                if isinstance(exc, MQBrokerError):
                    if mode is CommunicationMode.ASYNC or exc.code not in self.retry_response_codes:
                        raise
                continue
            strategy.update_fault_item(mq.broker_name, _now_ms() - start, False)
            if (
                result is not None
                and result.send_status is not SendStatus.SEND_OK
                and self.retry_another_broker_when_not_store_ok
            ):
                continue
            return result
        if result is not None:
            return result
        info_text = (
            f"Send [{len(brokers_sent)}] times, still failed, cost [{_now_ms() - begin}]ms, "
            f"Topic: {msg.topic}, BrokersSent: {brokers_sent}: {exception}"
        )
        if isinstance(exception, MQBrokerError):
            raise exception
        if isinstance(exception, RemotingTimeoutError):
            raise RequestTimeoutError(info_text, ClientErrorCode.ACCESS_BROKER_TIMEOUT) from exception
        code = (
            ClientErrorCode.CONNECT_BROKER_EXCEPTION if isinstance(exception, RemotingConnectError) else None
        )
        if isinstance(exception, MQClientError) and exception.response_code is not None:
            code = exception.response_code
        raise MQClientError(info_text, code) from exception

    async def _send_kernel(
        self, msg: Message, mq: MessageQueue, mode: CommunicationMode, timeout: int
    ) -> SendResult | None:
        instance = self.instance
        addr = instance.find_broker_addr_in_publish(mq.broker_name)
        if addr is None:
            await self.find_publish_info(mq.topic)
            addr = instance.find_broker_addr_in_publish(mq.broker_name)
        if addr is None:
            raise NoRouteError(
                f"The broker[{mq.broker_name}] not exist", ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION
            )
        props = msg.properties
        body = msg.body
        sys_flag = 0
        is_batch = isinstance(msg, EncodedBatch)
        if isinstance(msg, EncodedBatch):
            uniq_id = msg.uniq_ids
        else:
            uniq_id = props.get(_UNIQ_KEY) or ""
            if not uniq_id:
                uniq_id = props[_UNIQ_KEY] = create_uniq_id()
            if len(body) >= self.compress_msg_body_over_howmuch:
                body = zlib.compress(body, self.compress_level)
                sys_flag |= _COMPRESSED_ZLIB
        if props.get(MessageConst.TRANSACTION_PREPARED) == "true":
            sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
        reconsume_times = 0
        max_reconsume_times: int | None = None
        if is_retry_topic(msg.topic):
            if (rt := props.get(MessageConst.RECONSUME_TIME)) is not None:
                reconsume_times = int(rt)
            if (mrt := props.get(MessageConst.MAX_RECONSUME_TIMES)) is not None:
                max_reconsume_times = int(mrt)
        return await instance.api.send_message(
            addr,
            mq.broker_name,
            producer_group=self.group,
            topic=msg.topic,
            queue_id=mq.queue_id,
            sys_flag=sys_flag,
            born_timestamp=_now_ms(),
            flag=msg.flag,
            properties=encode_properties(props),
            body=body,
            uniq_id=uniq_id,
            reconsume_times=reconsume_times,
            max_reconsume_times=max_reconsume_times,
            batch=is_batch,
            default_topic=self.create_topic_key,
            default_topic_queue_nums=self.default_topic_queue_nums,
            timeout_ms=max(timeout, 1),
            oneway=mode is CommunicationMode.ONEWAY,
        )
