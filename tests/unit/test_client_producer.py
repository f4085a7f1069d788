"""Producer without sockets: validation, compression, batches, header fields, retries, fault strategy."""

from __future__ import annotations

import asyncio
import zlib
from typing import Any

import pytest
from rmq.client.errors import (
    MessageIllegalError,
    MQBrokerError,
    MQClientError,
    RequestTimeoutError,
    TopicNotExistError,
    broker_error,
)
from rmq.client.message import Message, MessageExt, MessageQueue, parse_properties
from rmq.client.producer import (
    LocalTransactionState,
    Producer,
    SelectMessageQueueByHash,
    SendResult,
    SendStatus,
    TransactionProducer,
)
from rmq.client.producer.fault import LatencyFaultTolerance, MQFaultStrategy
from rmq.client.producer.producer import validate_message
from rmq.client.producer.selector import java_hash_code
from rmq.client.route import TopicPublishInfo, publish_info
from rmq.common.route import BrokerData, QueueData, TopicRouteData
from rmq.remoting import RemotingConnectError, RemotingTimeoutError

# --- validation ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("msg", "match"),
    [
        (Message("", b"x"), "blank"),
        (Message("bad topic!", b"x"), "illegal characters"),
        (Message("x" * 128, b"x"), "longer than"),
        (Message("SCHEDULE_TOPIC_XXXX", b"x"), "forbidden"),
        (Message("T", b""), "length is zero"),
        (Message("T", b"x" * (4 * 1024 * 1024 + 1)), "over max value"),
    ],
)
def test_validate_message_rejects(msg: Message, match: str) -> None:
    with pytest.raises(MessageIllegalError, match=match) as info:
        validate_message(msg)
    assert info.value.response_code == 13
    assert isinstance(info.value, ValueError)


def test_validate_message_accepts_limits() -> None:
    validate_message(Message("%RETRY%g|x-y_z", b"x" * (4 * 1024 * 1024)))


# --- a producer wired to a fake instance --------------------------------------------------------------------


def route(*brokers: tuple[str, int]) -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData(name, n, n, 6) for name, n in brokers],
        broker_datas=[BrokerData("c", name, {0: f"10.0.0.{i}:10911"}) for i, (name, _) in enumerate(brokers)],
    )


class FakeAPI:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.failures: dict[str, list[BaseException]] = {}
        self.fail_next: BaseException | None = None

    async def end_transaction(self, addr: str, **kw: Any) -> None:
        self.calls.append({"addr": addr, "end_transaction": True, **kw})

    async def send_message(self, addr: str, broker_name: str, **kw: Any) -> SendResult | None:
        self.calls.append({"addr": addr, "broker_name": broker_name, **kw})
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc
        pending = self.failures.get(broker_name)
        if pending:
            raise pending.pop(0)
        if kw["oneway"]:
            return None
        return SendResult(
            SendStatus.SEND_OK,
            kw["uniq_id"],
            "0A00000100002A9F0000000000001234",
            MessageQueue(kw["topic"], broker_name, kw["queue_id"]),
            7,
        )


class FakeInstance:
    def __init__(self, topic_route: TopicRouteData) -> None:
        self.api = FakeAPI()
        self.route = topic_route
        self.broker_addr_table = {bd.broker_name: dict(bd.broker_addrs) for bd in topic_route.broker_datas}
        self.client_id = "10.0.0.99@1"

    def find_broker_addr_in_publish(self, name: str) -> str | None:
        return self.broker_addr_table.get(name, {}).get(0)

    async def master_addr(self, mq: MessageQueue) -> str:
        addr = self.find_broker_addr_in_publish(mq.broker_name)
        assert addr is not None
        return addr

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        return asyncio.get_running_loop().create_task(coro)


def make_producer(
    topic_route: TopicRouteData, topic: str = "T", cls: type[Producer] = Producer, **kw: Any
) -> tuple[Producer, FakeInstance]:
    producer = cls("pg", namesrv_addr="127.0.0.1:1", **kw)
    instance = FakeInstance(topic_route)
    producer._instance = instance  # type: ignore[assignment]
    producer._running = True
    producer.update_publish_info(topic, publish_info(topic, topic_route))
    return producer, instance


async def test_send_header_fields_uniq_key_and_result() -> None:
    producer, instance = make_producer(route(("a", 4)))
    msg = Message("T", b"hello", tags="TagA", keys="k1", flag=9)
    result = await producer.send(msg)
    call = instance.api.calls[0]
    props = parse_properties(call["properties"])
    assert props["TAGS"] == "TagA" and props["KEYS"] == "k1" and props["WAIT"] == "true"
    assert len(props["UNIQ_KEY"]) == 32
    assert msg.uniq_id == props["UNIQ_KEY"] == result.msg_id
    assert call["producer_group"] == "pg" and call["flag"] == 9 and call["sys_flag"] == 0
    assert call["body"] == b"hello" and call["batch"] is False
    assert call["default_topic"] == "TBW102" and call["default_topic_queue_nums"] == 4
    assert call["timeout_ms"] <= 3000 and call["addr"] == "10.0.0.0:10911"
    assert result.send_status is SendStatus.SEND_OK and result.offset_msg_id.endswith("1234")


async def test_compression_at_4_kib_with_zlib_sysflag() -> None:
    producer, instance = make_producer(route(("a", 4)))
    small, big = b"s" * 4095, b"b" * 4096
    await producer.send(Message("T", small))
    await producer.send(Message("T", big))
    assert instance.api.calls[0]["sys_flag"] == 0 and instance.api.calls[0]["body"] == small
    assert instance.api.calls[1]["sys_flag"] == 0x301
    assert zlib.decompress(instance.api.calls[1]["body"]) == big


async def test_batch_send_body_ids_and_rules() -> None:
    producer, instance = make_producer(route(("a", 4)))
    msgs = [Message("T", b"1"), Message("T", b"2", tags="x")]
    result = await producer.send(msgs)
    call = instance.api.calls[0]
    assert call["batch"] is True and call["sys_flag"] == 0
    assert parse_properties(call["properties"]) == {"WAIT": "true"}
    ids = [m.uniq_id for m in msgs]
    assert all(ids) and result.msg_id == ",".join(ids)  # type: ignore[arg-type]
    assert b"\x00\x00\x00\x00" in call["body"]
    with pytest.raises(MessageIllegalError, match="same"):
        await producer.send([Message("T", b"1"), Message("U", b"2")])
    with pytest.raises(MessageIllegalError, match="TimeDelayLevel"):
        await producer.send([Message("T", b"1", delay_time_level=2)])
    with pytest.raises(MessageIllegalError, match="Retry"):
        await producer.send([Message("%RETRY%g", b"1")])
    with pytest.raises(MessageIllegalError, match="zero"):
        await producer.send([Message("T", b"1"), Message("T", b"")])


async def test_retry_goes_to_another_broker_and_fault_item_is_recorded() -> None:
    producer, instance = make_producer(route(("a", 2), ("b", 2)), send_latency_fault_enable=True)
    failed_first: list[str] = []
    for _ in range(10):
        instance.api.calls.clear()
        producer.fault_strategy.fault_tolerance.items.clear()
        instance.api.fail_next = RemotingConnectError("down")  # whichever broker comes first
        result = await producer.send(Message("T", b"x"))
        brokers = [c["broker_name"] for c in instance.api.calls]
        assert len(brokers) == 2 and brokers[0] != brokers[1]
        assert result.message_queue.broker_name == brokers[1]
        failed_first.append(brokers[0])
        item = producer.fault_strategy.fault_tolerance.items[brokers[0]]
        assert not item.is_available(producer.fault_strategy.fault_tolerance.clock())
    assert set(failed_first) <= {"a", "b"}


async def test_retry_budget_and_final_errors() -> None:
    producer, instance = make_producer(route(("a", 1)))
    instance.api.failures = {"a": [RemotingTimeoutError("t")] * 3}
    with pytest.raises(RequestTimeoutError, match=r"Send \[3\] times"):
        await producer.send(Message("T", b"x"))
    assert len(instance.api.calls) == 3

    instance.api.calls.clear()
    instance.api.failures = {"a": [broker_error(17, "no topic", "x")] * 3}
    with pytest.raises(TopicNotExistError):
        await producer.send(Message("T", b"x"))
    assert len(instance.api.calls) == 3  # 17 is retried

    instance.api.calls.clear()
    instance.api.failures = {"a": [broker_error(13, "too big", "x")]}
    with pytest.raises(MQBrokerError) as info:
        await producer.send(Message("T", b"x"))
    assert info.value.code == 13 and len(instance.api.calls) == 1  # 13 is not

    instance.api.calls.clear()
    instance.api.failures = {"a": [RemotingConnectError("down")] * 3}
    with pytest.raises(MQClientError) as cinfo:
        await producer.send(Message("T", b"x"))
    assert cinfo.value.response_code == 10001


async def test_async_send_callbacks_and_oneway() -> None:
    producer, instance = make_producer(route(("a", 4)))
    got: list[SendResult] = []
    fut = producer.send_async(Message("T", b"x"), callback=got.append)
    result = await fut
    assert got == [result]
    errors: list[BaseException] = []
    instance.api.failures = {"a": [broker_error(16, "no perm", "x")]}
    fut = producer.send_async(Message("T", b"x"), on_exception=errors.append)
    with pytest.raises(MQBrokerError):
        await fut
    assert len(errors) == 1 and len(instance.api.calls) == 2  # broker errors are not retried asynchronously
    assert await producer.send_oneway(Message("T", b"x")) is None
    assert instance.api.calls[-1]["oneway"] is True


async def test_send_to_queue_and_selector() -> None:
    producer, _ = make_producer(route(("a", 4), ("b", 4)))
    mq = MessageQueue("T", "b", 3)
    result = await producer.send(Message("T", b"x"), mq=mq)
    assert result.message_queue == mq
    with pytest.raises(MQClientError, match="topic not equal"):
        await producer.send(Message("U", b"x"), mq=mq)
    selector = SelectMessageQueueByHash()
    queues = producer._publish["T"].queues
    for key in ("order-1", "order-2", 12345, -7):
        result = await producer.send(Message("T", b"x"), selector=selector, arg=key)
        assert result.message_queue == queues[abs(java_hash_code(key)) % len(queues)]


def test_java_hash_codes() -> None:
    assert java_hash_code("hello") == 99162322
    assert java_hash_code(5) == 5
    assert java_hash_code(2**40) == (2**40 >> 32) ^ 0  # Long.hashCode
    assert java_hash_code(True) == 1231


# --- routes and fault strategy ------------------------------------------------------------------------------


def test_publish_info_from_route() -> None:
    r = route(("b", 2), ("a", 3))
    r.queue_datas.append(QueueData("ro", 4, 4, 4))  # read-only: no publish queues
    r.broker_datas.append(BrokerData("c", "ro", {0: "x:1"}))
    r.queue_datas.append(QueueData("noMaster", 2, 2, 6))
    r.broker_datas.append(BrokerData("c", "noMaster", {1: "slave:1"}))
    info = publish_info("T", r)
    assert [(q.broker_name, q.queue_id) for q in info.queues] == [
        ("a", 0),
        ("a", 1),
        ("a", 2),
        ("b", 0),
        ("b", 1),
    ]
    r.order_topic_conf = "b:2;a:1"
    ordered = publish_info("T", r)
    assert ordered.order_topic and [(q.broker_name, q.queue_id) for q in ordered.queues] == [
        ("b", 0),
        ("b", 1),
        ("a", 0),
    ]


def test_not_available_duration_table() -> None:
    s = MQFaultStrategy(True)
    cases = {0: 0, 49: 0, 50: 0, 99: 0, 100: 0, 549: 0, 550: 30000, 999: 30000, 1000: 60000, 2000: 120000}
    cases |= {3000: 180000, 14999: 180000, 15000: 600000, 30000: 600000}
    for latency, duration in cases.items():
        assert s.compute_not_available_duration(latency) == duration, latency


def test_fault_tolerance_avoids_backed_off_broker() -> None:
    now = [1_000_000]
    s = MQFaultStrategy(True, clock=lambda: now[0])
    info = TopicPublishInfo([MessageQueue("T", "a", 0), MessageQueue("T", "a", 1), MessageQueue("T", "b", 0)])
    s.update_fault_item("a", 600, False)  # 30 s off
    picks = {s.select_one_message_queue(info, None).broker_name for _ in range(20)}
    assert picks == {"b"}
    now[0] += 30_000
    picks = {s.select_one_message_queue(info, None).broker_name for _ in range(20)}
    assert picks == {"a", "b"}
    s.update_fault_item("b", 10, True)  # isolation: 10 min
    s.update_fault_item("a", 10, True)
    mq = s.select_one_message_queue(info, None)  # everyone is off: one of the better half, never fails
    assert mq.broker_name in {"a", "b"}
    disabled = MQFaultStrategy(False)
    disabled.update_fault_item("a", 100_000, True)
    assert not disabled.fault_tolerance.items


def test_pick_one_at_least_prefers_available_then_low_latency() -> None:
    now = [0]
    lft = LatencyFaultTolerance(clock=lambda: now[0])
    lft.update("slow", 5000, 100)
    lft.update("fast", 10, 100)
    lft.update("worst", 9000, 100)
    lft.update("fine", 20, 0)  # available now
    picks = {lft.pick_one_at_least() for _ in range(10)}
    assert picks == {"fine", "fast"}  # the better half: available first, then by latency
    assert LatencyFaultTolerance().pick_one_at_least() is None


def test_select_one_avoids_last_broker_without_fault_tolerance() -> None:
    info = TopicPublishInfo([MessageQueue("T", "a", 0), MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)])
    for _ in range(20):
        assert info.select_one("b").broker_name == "a"
    only_a = TopicPublishInfo([MessageQueue("T", "a", 0)])
    assert only_a.select_one("a").broker_name == "a"  # nothing else: the same broker again


# --- transactions -------------------------------------------------------------------------------------------


class Listener:
    def __init__(self, answer: LocalTransactionState | Exception) -> None:
        self.answer = answer
        self.executed: list[tuple[Message, Any]] = []
        self.checked: list[MessageExt] = []

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        self.executed.append((msg, arg))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checked.append(msg)
        return LocalTransactionState.COMMIT_MESSAGE


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        (LocalTransactionState.COMMIT_MESSAGE, 8),
        (LocalTransactionState.ROLLBACK_MESSAGE, 12),
        (LocalTransactionState.UNKNOW, 0),
        (RuntimeError("db down"), 0),
    ],
)
async def test_transaction_half_message_then_end_transaction(answer: Any, code: int) -> None:
    listener = Listener(answer)

    def make(group: str, **kw: Any) -> TransactionProducer:
        return TransactionProducer(group, listener, **kw)

    producer, instance = make_producer(route(("a", 4)), cls=make)  # type: ignore[arg-type]
    msg = Message("T", b"x", delay_time_level=3)
    result = await producer.send_message_in_transaction(msg, arg="ctx")  # type: ignore[attr-defined]
    send, end = instance.api.calls
    props = parse_properties(send["properties"])
    assert props["TRAN_MSG"] == "true" and props["PGROUP"] == "pg" and "DELAY" not in props
    assert send["sys_flag"] & 0xC == 0x4  # TRANSACTION_PREPARED_TYPE
    assert listener.executed[0] == (msg, "ctx") and msg.transaction_id == msg.uniq_id
    assert end["commit_or_rollback"] == code and end["from_transaction_check"] is False
    assert end["commit_log_offset"] == 0x1234 and end["tran_state_table_offset"] == 7
    assert end["msg_id"] == msg.uniq_id and end["producer_group"] == "pg"
    assert (end["remark"] is not None) == isinstance(answer, Exception)
    expected = answer if isinstance(answer, LocalTransactionState) else LocalTransactionState.UNKNOW
    assert result.local_transaction_state is expected


async def test_transaction_check_answers_with_end_transaction() -> None:
    listener = Listener(LocalTransactionState.UNKNOW)

    def make(group: str, **kw: Any) -> TransactionProducer:
        return TransactionProducer(group, listener, **kw)

    producer, instance = make_producer(route(("a", 4)), cls=make)  # type: ignore[arg-type]
    msg = MessageExt("T", b"x", properties={"UNIQ_KEY": "ABC", "PGROUP": "pg", "TRAN_MSG": "true"})
    header = {"tranStateTableOffset": "3", "commitLogOffset": "99", "transactionId": "ABC", "msgId": "ABC"}
    producer.check_transaction_state("10.0.0.0:10911", msg, header)
    deadline = asyncio.get_running_loop().time() + 10  # the listener runs in a worker thread
    while not instance.api.calls and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    (end,) = instance.api.calls
    assert listener.checked == [msg] and msg.transaction_id == "ABC"
    assert end["addr"] == "10.0.0.0:10911" and end["commit_or_rollback"] == 8
    assert end["from_transaction_check"] is True
    assert (end["tran_state_table_offset"], end["commit_log_offset"]) == (3, 99)
    assert end["msg_id"] == "ABC" and end["transaction_id"] == "ABC"
