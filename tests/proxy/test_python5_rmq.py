"""The official RocketMQ 5.x Python client (5.1.2, unchanged) against rmq's gRPC endpoint.

One rmq broker (``python -m rmq.broker``: the endpoint runs in the broker's process, grpcServerPort) for the
module; the client runs in a child Python. What the 5.x producer sends is read back with rmq's 4.x client,
so the test also shows the 5.x -> 4.x direction and what each 5.x field becomes in the store.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import grpc
import pytest
from rmq.client.heartbeat import ConsumeFromWhere
from rmq.client.message import Message, MessageExt, MessageQueue
from rmq.client.sync import LitePullConsumer, Producer
from rmq.proxy.messages import SHARDING_KEY, TIMER_DELIVER_MS
from rmq.proxy.pb import d, s
from rmq.proxy.v2 import service_pb2_grpc

from tests.brokerproc import BrokerProcess, start_broker
from tests.proxy.client5run import run_client5


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    store = tmp_path_factory.mktemp("grpc") / "store"
    b = start_broker(store, "transactionTimeOut=1000", "transactionCheckInterval=1000")
    try:
        yield b
    finally:
        b.stop()


def endpoints(b: BrokerProcess) -> str:
    return f"127.0.0.1:{b.ready['grpc']}"


def new_topic(b: BrokerProcess) -> str:
    topic = f"T5_{uuid.uuid4().hex[:8]}"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmq.admin",
            "updateTopic",
            "-n",
            b.namesrv_addr,
            "-c",
            "DefaultCluster",
            "-t",
            topic,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return topic


def pull_all(b: BrokerProcess, topic: str, count: int, deadline_s: float = 30) -> list[MessageExt]:
    """``count`` messages of ``topic`` read with rmq's 4.x lite pull consumer."""
    consumer = LitePullConsumer(
        f"G4_{uuid.uuid4().hex[:8]}",
        namesrv_addr=b.namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic, "*")
    consumer.start()
    got: list[MessageExt] = []
    try:
        end = time.monotonic() + deadline_s
        while len(got) < count and time.monotonic() < end:
            got.extend(consumer.poll(1000))
    finally:
        consumer.shutdown()
    return got


def test_send_normal_fifo_and_delay_read_back_by_a_4x_consumer(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    messages = [
        {"body": "plain", "tag": "TagA", "keys": ["k1", "k2"], "props": {"color": "red"}},
        {"body": "fifo-1", "group": "order-7"},
        {"body": "fifo-2", "group": "order-7"},
        {"body": "later", "delay_s": 2},
    ]
    sent = run_client5("send", endpoints=endpoints(broker), topic=topic, messages=messages)["sent"]
    assert [s["body"] for s in sent] == ["plain", "fifo-1", "fifo-2", "later"]
    ids = {s["body"]: s["message_id"] for s in sent}
    assert len(set(ids.values())) == 4

    got = {m.body.decode(): m for m in pull_all(broker, topic, 4)}
    assert sorted(got) == ["fifo-1", "fifo-2", "later", "plain"]
    plain = got["plain"]
    assert plain.tags == "TagA"
    assert plain.get_property("KEYS") in ("k1 k2", "k2 k1")
    assert plain.get_property("color") == "red"
    assert plain.msg_id == ids["plain"]  # the 5.x message id is the stored UNIQ_KEY
    # One message group, one queue: the FIFO messages share it, in order.
    f1, f2 = got["fifo-1"], got["fifo-2"]
    assert f1.get_property(SHARDING_KEY) == "order-7"
    assert (f1.queue_id, f1.queue_offset + 1) == (f2.queue_id, f2.queue_offset)
    # The delay: a timer message, delivered at (not before) the delivery time the client asked for.
    later = got["later"]
    deliver_ms = int(later.get_property(TIMER_DELIVER_MS) or 0)
    assert deliver_ms > 0
    assert later.store_timestamp >= deliver_ms - 1000  # stored when due (the timer works in seconds here)


def test_transaction_commit_rollback_and_check_back(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    result = run_client5(
        "transaction",
        endpoints=endpoints(broker),
        topic=topic,
        ended={"tx-commit": "commit", "tx-rollback": "rollback"},
        unresolved="tx-checked",
        check_verdict="commit",
        check_wait=60,
    )
    # The broker asked (CHECK_TRANSACTION_STATE), the proxy handed it to the producer over Telemetry.
    assert result["checked"] == ["tx-checked"]
    got = sorted(m.body.decode() for m in pull_all(broker, topic, 2))
    assert got == ["tx-checked", "tx-commit"]  # the rolled back one never shows


def test_unknown_topic_is_refused_with_its_name(broker: BrokerProcess) -> None:
    with pytest.raises(AssertionError, match="NoSuchTopic5"):
        run_client5(
            "send", endpoints=endpoints(broker), topic="NoSuchTopic5", messages=[{"body": "x"}], timeout=60
        )


def test_a_receive_reads_every_queue_of_the_broker_whatever_queue_it_names(broker: BrokerProcess) -> None:
    """5.x SimpleConsumers name the route's queues in turn; the endpoint pops the named broker's every queue
    (Apache's proxy pops its "acting" queue, id -1), so one ReceiveMessage naming queue 0 answers messages
    sitting in queues 2 and 5 (popping only queue 0 answered MESSAGE_NOT_FOUND after its long poll)."""
    topic, group = new_topic(broker), f"G5_{uuid.uuid4().hex[:8]}"
    with Producer("P5raw", namesrv_addr=broker.namesrv_addr) as producer:
        for q in (2, 5):
            producer.send(Message(topic, f"in-{q}".encode()), mq=MessageQueue(topic, "broker-a", q))
    request = s.ReceiveMessageRequest(
        group=d.Resource(name=group),
        message_queue=d.MessageQueue(topic=d.Resource(name=topic), id=0, broker=d.Broker(name="broker-a")),
        filter_expression=d.FilterExpression(type=d.FilterType.TAG, expression="*"),
        batch_size=16,
    )
    request.invisible_duration.seconds = 30
    request.long_polling_timeout.seconds = 1
    with grpc.insecure_channel(endpoints(broker)) as channel:
        answers = list(service_pb2_grpc.MessagingServiceStub(channel).ReceiveMessage(request, timeout=30))
    statuses = [a.status.code for a in answers if a.HasField("status")]
    assert statuses == [d.Code.OK], answers
    assert sorted(a.message.body.decode() for a in answers if a.HasField("message")) == ["in-2", "in-5"]
