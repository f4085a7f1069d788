"""The synchronous facade (rmq.client.sync) against ``python -m rmq.broker``: no async code in the tests."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from rmq.client import (
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageQueue,
    MessageSelector,
    MQClientError,
    SendResult,
)
from rmq.client.sync import LitePullConsumer, Producer, PushConsumer
from rmq.common import fastjson
from rmq.common.codes import RequestCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.brokerproc import BrokerProcess, start_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory.mktemp("syncbroker"))
    yield proc
    proc.stop()


def name(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{time.monotonic_ns()}"


def test_sync_producer_and_push_consumer(broker: BrokerProcess) -> None:
    topic = name("T")
    with Producer(name("pg"), namesrv_addr=broker.namesrv_addr) as producer:
        assert producer.send_msg_timeout_ms == 3000  # configuration reads and writes go through
        producer.send_msg_timeout_ms = 5000
        assert producer.impl.send_msg_timeout_ms == 5000
        with pytest.raises(AttributeError, match="coroutine"):
            producer.find_publish_info  # noqa: B018
        first = producer.send(Message(topic, b"sync"))
        assert first.ok
        called: list[SendResult] = []
        futures = [
            producer.send_async(Message(topic, b"async%d" % i), callback=called.append) for i in range(50)
        ]
        assert all(f.result(10).ok for f in futures)
        producer.send_oneway(Message(topic, b"oneway"))
        batch = producer.send([Message(topic, b"batch1"), Message(topic, b"batch2")])
        assert len(batch.msg_id.split(",")) == 2
        assert len(producer.fetch_publish_message_queues(topic)) == 4

    received: list[MessageExt] = []
    threads: set[str] = set()
    done = threading.Event()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        threads.add(threading.current_thread().name)
        received.extend(msgs)
        if len(received) >= 54:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        name("cg"),
        client_config=ClientConfig(namesrv_addr=broker.namesrv_addr, instance_name="sync-push"),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        assert done.wait(30)
    finally:
        consumer.shutdown()
    assert len(received) == 54 and len(called) == 50
    assert all(t.startswith("ConsumeMessageThread_") for t in threads)


def test_sync_lite_pull_consumer(broker: BrokerProcess) -> None:
    topic = name("T")
    with Producer(name("pg"), namesrv_addr=broker.namesrv_addr) as producer:
        mq = producer.fetch_publish_message_queues(topic)[0]
        for i in range(12):
            producer.send(Message(topic, b"%d" % i), mq=mq)
    consumer = LitePullConsumer(name("lg"), namesrv_addr=broker.namesrv_addr, auto_commit=False)
    consumer.assign([mq])
    with consumer:
        got: list[MessageExt] = []
        deadline = time.monotonic() + 20
        while len(got) < 12 and time.monotonic() < deadline:
            got += consumer.poll(500)
        assert [m.body for m in got] == [b"%d" % i for i in range(12)]
        consumer.commit_sync()
        assert consumer.committed(mq) == 12
        consumer.seek(mq, 10)
        assert [m.queue_offset for m in consumer.poll(5000)] == [10, 11]
        assert MessageQueue(topic, mq.broker_name, 0) in consumer.fetch_message_queues(topic)


def test_sync_calls_from_the_loop_thread_are_refused(broker: BrokerProcess) -> None:
    errors: list[BaseException] = []
    with Producer(name("pg"), namesrv_addr=broker.namesrv_addr) as producer:
        topic = name("T")

        def callback(result: SendResult) -> None:
            try:
                producer.send(Message(topic, b"nested"))  # would deadlock: the loop thread is busy here
            except RuntimeError as exc:
                errors.append(exc)

        producer.send_async(Message(topic, b"x"), callback=callback).result(10)
        deadline = time.monotonic() + 5
        while not errors and time.monotonic() < deadline:
            time.sleep(0.01)
    assert errors and "event loop thread" in str(errors[0])


def broker_accepts_sql92(broker: BrokerProcess) -> bool:
    body = fastjson.dumps(
        {
            "clientId": "probe",
            "group": "probe",
            "subscriptionData": {"topic": "T", "subString": "a > 5", "expressionType": "SQL92"},
        }
    )
    response = invoke_sync(broker.broker_addr, create_request(RequestCode.CHECK_CLIENT_CONFIG, None, body))
    return response.code == 0


def test_sql92_subscription(broker: BrokerProcess) -> None:
    topic = name("T")
    with Producer(name("pg"), namesrv_addr=broker.namesrv_addr) as producer:
        for i in range(10):
            msg = Message(topic, b"%d" % i)
            msg.put_user_property("a", str(i))
            producer.send(msg)
    received: list[MessageExt] = []
    done = threading.Event()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        received.extend(msgs)
        if len(received) >= 4:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        name("cg"),
        namesrv_addr=broker.namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic, MessageSelector.by_sql("a > 5"))
    consumer.register_message_listener(listener)
    if not broker_accepts_sql92(broker):
        # The broker answers CHECK_CLIENT_CONFIG with 23: start() fails and leaves nothing running.
        with pytest.raises(MQClientError, match="SQL92"):
            consumer.start()
        assert not consumer.running
        return
    consumer.start()
    try:
        assert done.wait(30)
        time.sleep(0.3)
    finally:
        consumer.shutdown()
    assert sorted(int(m.body) for m in received) == [6, 7, 8, 9]


def test_sync_transaction_producer(broker: BrokerProcess) -> None:
    from rmq.client import LocalTransactionState
    from rmq.client.sync import TransactionProducer

    class Listener:
        def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE if arg else LocalTransactionState.ROLLBACK_MESSAGE

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            return LocalTransactionState.ROLLBACK_MESSAGE

    topic = name("T")
    with TransactionProducer(name("txg"), Listener(), namesrv_addr=broker.namesrv_addr) as producer:
        kept = producer.send_message_in_transaction(Message(topic, b"kept"), True)
        dropped = producer.send_message_in_transaction(Message(topic, b"dropped"), False)
    assert kept.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
    assert dropped.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
    consumer = LitePullConsumer(
        name("lg"),
        namesrv_addr=broker.namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic)
    with consumer:
        got: list[bytes] = []
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            got += [m.body for m in consumer.poll(500)]
        got += [m.body for m in consumer.poll(500)]
    assert got == [b"kept"]
