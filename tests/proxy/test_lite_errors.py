"""Lite topics on rmq's gRPC endpoint: what a bad request gets (raw MessagingService calls, as a 5.x client
would make them, against a real broker; each refusal carries Apache's code and says what is wrong), and a
lite consumer's state across kill -9 of the broker (the official Python client's LiteSimpleConsumer)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from rmq.common.codes import RequestCode, ResponseCode
from rmq.proxy.pb import d, s
from rmq.proxy.v2 import service_pb2_grpc
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.brokerproc import BrokerProcess, start_broker
from tests.peers.apache5 import create_group, create_topic, wait_for_route
from tests.proxy.client5run import run_client5


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_broker(tmp_path_factory.mktemp("lite") / "store")
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="module")
def stub(broker: BrokerProcess) -> Iterator[service_pb2_grpc.MessagingServiceStub]:
    with grpc.insecure_channel(f"127.0.0.1:{broker.ready['grpc']}") as channel:
        yield service_pb2_grpc.MessagingServiceStub(channel)


CLIENT = (("x-mq-client-id", "lite-errors-test"),)


def _names(broker: BrokerProcess, lite: bool = False, **attrs: str) -> tuple[str, str]:
    """A new LITE topic and a new group (bound to it when ``lite``, with ``attrs`` besides)."""
    topic, group = f"LP_{uuid.uuid4().hex[:8]}", f"LG_{uuid.uuid4().hex[:8]}"
    create_topic(broker.broker_addr, topic, "LITE")
    wait_for_route(broker.namesrv_addr, topic)
    if lite:
        attrs["lite.bind.topic"] = topic
    create_group(broker.broker_addr, group, attributes=attrs or None)
    return topic, group


def _sync(
    stub: service_pb2_grpc.MessagingServiceStub,
    topic: str,
    group: str,
    names: list[str],
    action: int = d.LiteSubscriptionAction.PARTIAL_ADD,
) -> d.Status:
    request = s.SyncLiteSubscriptionRequest(
        action=action, topic=d.Resource(name=topic), group=d.Resource(name=group), lite_topic_set=names
    )
    return stub.SyncLiteSubscription(request, metadata=CLIENT, timeout=30).status


def test_lite_subscription_refusals(
    broker: BrokerProcess, stub: service_pb2_grpc.MessagingServiceStub
) -> None:
    topic, regular = _names(broker)
    st = _sync(stub, topic, regular, ["a"])
    assert (st.code, st.message) == (
        d.Code.ILLEGAL_CONSUMER_GROUP,
        f"regular group cannot use LITE mode: {regular}",
    )
    st = _sync(stub, topic, "NoSuchGroup", ["a"])
    assert (st.code, st.message) == (d.Code.ILLEGAL_CONSUMER_GROUP, "group not found: NoSuchGroup")
    other, lite = _names(broker, **{"lite.bind.topic": topic, "lite.sub.client.quota": "2"})
    st = _sync(stub, other, lite, ["a"])
    assert st.code == d.Code.ILLEGAL_TOPIC
    assert st.message == f"lite group {lite} is expected to bind topic {topic}, but actual is {other}"
    for bad, says in (
        ("bad name", "characters other than"),
        ("x" * 65, "longer than 64 bytes"),
        (" ", "blank"),
    ):
        st = _sync(stub, topic, lite, [bad])
        assert st.code == d.Code.ILLEGAL_LITE_TOPIC and says in st.message, st
    assert _sync(stub, topic, lite, ["a", "b"]).code == d.Code.OK
    st = _sync(stub, topic, lite, ["c"])
    assert st.code == d.Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED and "over its quota of 2" in st.message
    # Removing, and replacing the whole set, within the quota.
    assert _sync(stub, topic, lite, ["a"], d.LiteSubscriptionAction.PARTIAL_REMOVE).code == d.Code.OK
    assert _sync(stub, topic, lite, ["b", "c"], d.LiteSubscriptionAction.COMPLETE_ADD).code == d.Code.OK
    assert _sync(stub, topic, lite, [], d.LiteSubscriptionAction.COMPLETE_REMOVE).code == d.Code.OK


def test_lite_send_refusals_and_storage(
    broker: BrokerProcess, stub: service_pb2_grpc.MessagingServiceStub
) -> None:
    """A bad lite topic name is refused on send; a good one is stored in the parent topic and in its LMQ."""
    topic, _ = _names(broker)

    def send(lite: str, body: bytes) -> s.SendMessageResponse:
        sp = d.SystemProperties(message_id=uuid.uuid4().hex, lite_topic=lite)
        msg = d.Message(topic=d.Resource(name=topic), system_properties=sp, body=body)
        return stub.SendMessage(s.SendMessageRequest(messages=[msg]), metadata=CLIENT, timeout=30)

    bad = send("a/b", b"x")
    assert bad.status.code == d.Code.ILLEGAL_LITE_TOPIC and "characters other than" in bad.status.message
    for i in range(3):
        assert send("order-42", f"m{i}".encode()).status.code == d.Code.OK
    request = create_request(RequestCode.GET_MAX_OFFSET, {"topic": f"%LMQ%${topic}$order-42", "queueId": "0"})
    end = time.monotonic() + 10  # dispatch runs behind the sends' answers
    while (offset := invoke_sync(broker.broker_addr, request, 5000).ext_fields["offset"]) != "3":
        assert time.monotonic() < end, offset
        time.sleep(0.05)


def test_group_attributes_kept_and_checked(broker: BrokerProcess) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP keeps 5.x's group attributes (``+key`` sets, ``-key`` removes) and
    refuses a key 5.5.0 does not know, saying which."""
    group = f"AG_{uuid.uuid4().hex[:8]}"
    create_group(broker.broker_addr, group, attributes={"lite.bind.topic": "P"})
    body = {"groupName": group, "attributes": {"+nope": "1"}}
    request = create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, json.dumps(body).encode())
    response = invoke_sync(broker.broker_addr, request, 5000)
    assert response.code == ResponseCode.SYSTEM_ERROR and "unsupported group attribute 'nope'" in (
        response.remark or ""
    )
    response = invoke_sync(
        broker.broker_addr, create_request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG), 5000
    )
    assert json.loads(response.body)["subscriptionGroupTable"][group]["attributes"] == {
        "lite.bind.topic": "P"
    }


def test_lite_state_survives_kill_9(tmp_path: Path) -> None:
    """kill -9 of the broker between a lite consumer's acks: after the restart (same store) the lite topic's
    messages not acked come again, in order, and none acked does (its LMQ rebuilt from the CommitLog as
    needed, the group's LMQ offset where the orderly acks left it)."""
    store = tmp_path / "store"
    b = start_broker(store)
    try:
        topic, group = _names(b, lite=True)
        first = run_client5(
            "lite_take",
            endpoints=f"127.0.0.1:{b.ready['grpc']}",
            topic=topic,
            group=group,
            send=["k0", "k1", "k2", "k3"],
            want=2,
            ack=2,
            invisible_s=3,
        )
        assert first["received"][:2] == ["k0#1", "k1#1"], first
    finally:
        b.kill()
    b = start_broker(store)
    try:
        wait_for_route(b.namesrv_addr, topic)
        second = run_client5(
            "lite_take", endpoints=f"127.0.0.1:{b.ready['grpc']}", topic=topic, group=group, want=2, settle=5
        )
        assert [r.split("#")[0] for r in second["received"]] == ["k2", "k3"], second
    finally:
        b.stop()
