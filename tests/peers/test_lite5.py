"""Lite topics (RocketMQ 5.x) with the official Java client's LitePushConsumer (rocketmq-client-java 5.2.0,
unchanged): one scenario against rmq's broker (its own gRPC endpoint) and against Apache RocketMQ 5.5.0,
results compared.

Apache 5.5.0 serves lite consumption only from a proxy in "cluster" mode (its local mode answers
SyncLiteSubscription and every lite receive with INTERNAL_SERVER_ERROR: apache/rocketmq issue 10478), and its
broker keeps lite topics only with ``enableLmq`` and ``enableMultiDispatch`` on: the Apache side is the
session's 5.5.0 broker (started with both) behind a second, cluster-mode proxy. Each side gets a LITE parent
topic and a group bound to it (attribute ``lite.bind.topic``), made on its broker as mqadmin makes them.

The scenario (tests/peers/java/grpc5/rmqgrpc5/LiteDriver.java): messages sent with lite topics before any
consumer; a LitePushConsumer subscribing some lite topics gets each from its first message, in send order,
and nothing of the others; a lite topic subscribed later comes from its first message too, one subscribed
with OffsetOption.MAX_OFFSET only with what is sent after; after unsubscribeLite nothing more of that topic;
bad lite topic names are refused on subscribe and on send. Around it, rmq's 4.x consumer reads the parent
topic (each lite message is stored there too, as on Apache).

Left out of the comparison: Apache's proxy also shows the message's ``INNER_MULTI_DISPATCH`` property (the LMQ
name) among its user properties, a leak of a broker property rmq does not repeat.

The official Python client (5.1.2, unchanged) too: its LitePushConsumer in a like scenario on both sides
(tests/proxy/client5.py ``lite``: la and lb subscribed come from their first message, lc later too, nothing
of la after unsubscribing it, bad names fail), and its LiteSimpleConsumer on rmq (Apache 5.5.0's proxy
serves no LITE_SIMPLE_CONSUMER: it receives as a plain SimpleConsumer). The Python client hands a batch to
its listener threads at once, so its deliveries per lite topic are compared sorted (the Java client's FIFO
consume service shows the order). Its lite topics have one-letter names: client 5.1.2's ``subscribe_lite``
sends the name's letters, the name itself reaching the server with the client's 30-second sync of its set.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from rmq.proxy.pb import d, s
from rmq.proxy.v2 import service_pb2_grpc

from tests.peers.apache import compile_drivers, run_driver
from tests.peers.apache5 import ClusterProxy
from tests.peers.conftest import Peers, Peers5
from tests.peers.grpc5 import Side, apache_side, await_dlq, pull, rmq_side, same
from tests.proxy.client5run import run_client5

GRPC5_SRC = Path(__file__).resolve().parent / "java" / "grpc5"


def _run_side(side: Side, peers: Peers, classes: Path) -> dict[str, Any]:
    topic = side.topic("J5lite", "LITE")
    # Orderly: the client's FIFO consume service hands each lite topic's messages to the listener in order.
    group = side.group("G5lite", orderly=True, attributes={"lite.bind.topic": topic})
    result = run_driver(
        peers.libs,
        classes,
        peers.home / f"java5-lite-{side.label}",
        "lite",
        limit=300,
        main="rmqgrpc5.LiteDriver",
        jars=peers.libs.client5,
        endpoints=side.endpoints,
        topic=topic,
        group=group,
    )
    # Every lite message is in the parent topic too: a 4.x consumer of it reads them all.
    bodies = {f"a-{i}" for i in range(4)} | {f"b-{i}" for i in range(4)} | {f"c-{i}" for i in range(3)}
    bodies |= {"d-0", "d-1"}
    stored = pull(side.namesrv, topic, len(bodies), bodies=bodies)
    result["parent4x"] = sorted({m.body.decode() for m in stored})
    result["lite4x"] = sorted({(m.body.decode(), m.get_property("__LITE_TOPIC")) for m in stored})
    return result


@pytest.fixture(scope="module")
def lite5(peers: Peers, peers5: Peers5, cluster_proxy: ClusterProxy) -> dict[str, dict[str, Any]]:
    classes = compile_drivers(peers.libs, GRPC5_SRC, peers.libs.client5)
    apache = apache_side(peers5)
    sides = (
        rmq_side(peers),
        Side("apache", cluster_proxy.endpoints, apache.namesrv, apache.broker_addr, True),
    )
    with ThreadPoolExecutor(len(sides)) as pool:
        futures = {s.label: pool.submit(_run_side, s, peers, classes) for s in sides}
        return {label: f.result() for label, f in futures.items()}


def test_subscribed_lite_topics_come_from_their_first_message_in_order(
    lite5: dict[str, dict[str, Any]],
) -> None:
    """la and lb, subscribed after la's first messages were sent, come whole and in send order; lc (not
    subscribed yet) does not come."""
    assert same(lite5, "step2") == {
        "la": ["a-0#1", "a-1#1", "a-2#1"],
        "lb": ["b-0#1", "b-1#1", "b-2#1"],
    }


def test_later_subscription_and_offset_option(lite5: dict[str, dict[str, Any]]) -> None:
    """lc subscribed later comes from its first message; ld subscribed at MAX_OFFSET only with what came
    after."""
    step3 = same(lite5, "step3")
    assert step3["lc"] == ["c-0#1", "c-1#1", "c-2#1"]
    assert step3["ld"] == ["d-1#1"]


def test_unsubscribed_lite_topic_stops(lite5: dict[str, dict[str, Any]]) -> None:
    step4 = same(lite5, "step4")
    assert step4["la"] == ["a-0#1", "a-1#1", "a-2#1"]
    assert step4["lb"] == ["b-0#1", "b-1#1", "b-2#1", "b-3#1"]
    assert same(lite5, "liteTopicSet") == ["lb", "lc", "ld"]


def test_messages_show_their_lite_topic_and_parent(lite5: dict[str, dict[str, Any]]) -> None:
    assert same(lite5, "mismatches") == []
    assert same(lite5, "shown") == {"topic": "parent", "group": ""}


def test_bad_lite_topic_names_refused(lite5: dict[str, dict[str, Any]]) -> None:
    assert same(lite5, "badSubscribe") != "none"
    assert same(lite5, "badSend") != "none"


def test_lite_messages_stored_in_the_parent_topic(lite5: dict[str, dict[str, Any]]) -> None:
    """4.x <-> 5.x: the parent topic holds every lite message with its lite topic (``__LITE_TOPIC``)."""
    assert len(same(lite5, "parent4x")) == 13
    assert ("a-3", "la") in same(lite5, "lite4x")


def _run_python(side: Side) -> dict[str, Any]:
    topic = side.topic("P5lite", "LITE")
    group = side.group("G5plite", orderly=True, attributes={"lite.bind.topic": topic})
    result = run_client5("lite", timeout=300, endpoints=side.endpoints, topic=topic, group=group)
    return {k: {t: sorted(v) for t, v in r.items()} if k.startswith("step") else r for k, r in result.items()}


@pytest.fixture(scope="module")
def lite5py(peers: Peers, peers5: Peers5, cluster_proxy: ClusterProxy) -> dict[str, dict[str, Any]]:
    apache = apache_side(peers5)
    sides = (
        rmq_side(peers),
        Side("apache", cluster_proxy.endpoints, apache.namesrv, apache.broker_addr, True),
    )
    with ThreadPoolExecutor(len(sides)) as pool:
        futures = {s.label: pool.submit(_run_python, s) for s in sides}
        return {label: f.result() for label, f in futures.items()}


def test_python_lite_push_consumer_as_on_apache(lite5py: dict[str, dict[str, Any]]) -> None:
    assert same(lite5py, "step2") == {"a": ["a-0#1", "a-1#1", "a-2#1"], "b": ["b-0#1", "b-1#1"]}
    assert same(lite5py, "step3")["c"] == ["c-0#1", "c-1#1"]
    step4 = same(lite5py, "step4")
    assert step4["a"] == ["a-0#1", "a-1#1", "a-2#1"]
    assert step4["b"] == ["b-0#1", "b-1#1", "b-2#1"]


def test_python_bad_lite_topic_names(lite5py: dict[str, dict[str, Any]]) -> None:
    assert same(lite5py, "badSubscribe") != "none"
    assert same(lite5py, "badSend") != "none"


def test_python_lite_simple_consumer_on_rmq(peers: Peers) -> None:
    """rmq serves the Python client's LiteSimpleConsumer as a lite consumer: its subscribed lite topic's
    messages, in order, each once (acked), nothing of the other."""
    side = rmq_side(peers)
    topic = side.topic("P5lites", "LITE")
    group = side.group("G5lites", attributes={"lite.bind.topic": topic})
    result = run_client5("lite_simple", timeout=180, endpoints=side.endpoints, topic=topic, group=group)
    assert result == {"received": ["s:s-0", "s:s-1", "s:s-2"], "again": []}


def test_lite_message_not_acked_comes_again_then_dead_letter(peers: Peers) -> None:
    """rmq: a lite message not acked comes again from the same place once its invisible time (2 s) is over,
    its attempt counted up, in order with the one after it; after the group's retryMaxTimes (1) + 1 attempts
    both go to %DLQ%<group> instead of to the client."""
    side = rmq_side(peers)
    topic = side.topic("P5liter", "LITE")
    group = side.group("G5liter", retry_max_times=1, attributes={"lite.bind.topic": topic})
    result = run_client5(
        "lite_retry", timeout=180, endpoints=side.endpoints, topic=topic, group=group, deadline=20
    )
    assert result["deliveries"] == ["r-0#1", "r-1#1", "r-0#2", "r-1#2"]
    assert await_dlq(side.broker_addr, group, 2) == 2


def test_standalone_endpoint_before_apache_broker_refuses_lite_receive(peers5: Peers5) -> None:
    """``python -m rmq.proxy`` in front of Apache's broker takes a lite subscription (the group's bind topic
    read from that broker) but cannot pop lite topics there (Apache's broker keeps lite subscriptions itself
    and serves them with its own POP_LITE_MESSAGE): a receive is refused, saying so."""
    apache = apache_side(peers5)
    topic = apache.topic("P5lsa", "LITE")
    group = apache.group("G5lsa", attributes={"lite.bind.topic": topic})
    meta = (("x-mq-client-id", f"lite-standalone-{uuid.uuid4().hex[:6]}"),)
    with grpc.insecure_channel(peers5.rmq_proxy_endpoints) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        sync = s.SyncLiteSubscriptionRequest(
            action=d.LiteSubscriptionAction.PARTIAL_ADD,
            topic=d.Resource(name=topic),
            group=d.Resource(name=group),
            lite_topic_set=["x"],
        )
        assert stub.SyncLiteSubscription(sync, metadata=meta, timeout=30).status.code == d.Code.OK
        request = s.ReceiveMessageRequest(
            group=d.Resource(name=group),
            message_queue=d.MessageQueue(
                topic=d.Resource(name=topic), id=-1, broker=d.Broker(name="broker-a")
            ),
            batch_size=16,
        )
        request.long_polling_timeout.seconds = 1
        answers = list(stub.ReceiveMessage(request, metadata=meta, timeout=30))
    (st,) = [a.status for a in answers if a.HasField("status")]
    assert st.code == d.Code.INTERNAL_SERVER_ERROR
    assert "the broker does not serve lite consumers (an rmq broker with enableLmq does)" in st.message
