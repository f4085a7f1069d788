"""SendMessage, ReceiveMessage and AckMessage answered by the gRPC port's Rust front: plain messages go from
the front straight to the broker over Remoting and land in the store exactly as the Python endpoint writes
them; receives pop from the broker and show the messages as the endpoint shows them; acks are batched.
Everything else (FIFO sends, refusals, a topic the front has no route of, a consumer it was not told of)
still goes to the endpoint, which answers as before.

One rmq broker; two endpoints in this process in front of it (:class:`rmq.proxy.ProxyThread`, TLS test mode
so the port is the front): one with the front's calls on (the default), one with them off. The same scenario
through each, with rmq's 4.x client or the official 5.x Python client, is compared.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from rmq.client.message import MessageExt
from rmq.proxy import ProxyConfig, ProxyThread
from rmq.proxy.pb import d, s
from rmq.proxy.v2 import service_pb2_grpc

from tests.brokerproc import BrokerProcess, start_broker
from tests.peers.apache5 import create_group
from tests.peers.grpc5 import await_dlq
from tests.proxy.client5run import run_client5
from tests.proxy.test_python5_rmq import new_topic, pull_all


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_broker(tmp_path_factory.mktemp("fast-send") / "store", "grpcServerPort=-1")
    try:
        yield b
    finally:
        assert b.stop() == 0, "".join(b.log[-40:])


@pytest.fixture(scope="module")
def endpoints(broker: BrokerProcess) -> Iterator[tuple[ProxyThread, ProxyThread]]:
    fast = ProxyThread(ProxyConfig([broker.namesrv_addr], "127.0.0.1", 0))
    slow = ProxyThread(ProxyConfig([broker.namesrv_addr], "127.0.0.1", 0, fast_send=False))
    fast.start()
    slow.start()
    try:
        yield fast, slow
    finally:
        fast.stop()
        slow.stop()


def message(topic: str, body: str, **kw: object) -> d.Message:
    sp = d.SystemProperties(
        message_id=kw.get("message_id") or uuid.uuid4().hex.upper(),  # type: ignore[arg-type]
        born_timestamp=Timestamp(seconds=1_700_000_000, nanos=250_000_000),
        born_host="10.1.2.3",
    )
    if kw.get("tag"):
        sp.tag = kw["tag"]  # type: ignore[assignment]
    sp.keys.extend(kw.get("keys") or ())  # type: ignore[arg-type]
    if kw.get("group"):
        sp.message_group = kw["group"]  # type: ignore[assignment]
    return d.Message(
        topic=d.Resource(name=topic),
        user_properties=kw.get("props") or {},  # type: ignore[arg-type]
        system_properties=sp,
        body=body.encode(),
    )


def send(proxy: ProxyThread, *messages: d.Message) -> s.SendMessageResponse:
    with grpc.insecure_channel(f"127.0.0.1:{proxy.port}") as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        return stub.SendMessage(s.SendMessageRequest(messages=messages), timeout=30)


def front_stats(proxy: ProxyThread) -> dict[str, int]:
    assert proxy.server is not None and proxy.server.front is not None
    return proxy.server.front.send_stats()


def stored(m: MessageExt) -> dict[str, str]:
    """What the store holds of a message, but the ids and where it went."""
    props = dict(m.properties)
    props.pop("UNIQ_KEY")
    return {**props, "body": m.body.decode(), "sys_flag": str(m.sys_flag), "flag": str(m.flag)}


def test_plain_sends_are_the_fronts_and_store_what_the_endpoint_stores(
    broker: BrokerProcess, endpoints: tuple[ProxyThread, ProxyThread]
) -> None:
    fast, slow = endpoints
    topic = new_topic(broker)
    before = front_stats(fast)
    # The first send of a topic is the endpoint's: it looks the topic up, and hands the front its queues.
    first = send(fast, message(topic, "first"))
    assert first.status.code == d.Code.OK, first.status
    after_first = front_stats(fast)
    assert after_first["passed_on"] == before["passed_on"] + 1
    assert after_first["topics"] >= 1

    kw = {"tag": "TagA", "keys": ["k1", "k2"], "props": {"color": "red", "size": "9"}}
    answers = [send(p, message(topic, f"same-{n}", **kw)) for n, p in (("fast", fast), ("slow", slow))]
    two = send(fast, message(topic, "two-a"), message(topic, "two-b"))
    many = [send(fast, message(topic, f"m{i}")) for i in range(20)]
    for a in (*answers, two, *many):
        assert a.status.code == d.Code.OK, a.status
        assert all(e.status.code == d.Code.OK and e.offset >= 0 for e in a.entries), a
    assert len(two.entries) == 2
    stats = front_stats(fast)
    assert stats["served"] == after_first["served"] + 22, stats  # same-fast, two, 20 x m
    assert front_stats(slow)["served"] == 0

    got = {m.body.decode(): m for m in pull_all(broker, topic, 25)}
    assert len(got) == 25, sorted(got)
    by_front, by_endpoint = stored(got["same-fast"]), stored(got["same-slow"])
    by_front["body"] = by_endpoint["body"]
    assert by_front == by_endpoint
    assert by_front["TAGS"] == "TagA" and by_front["KEYS"] == "k1 k2" and by_front["color"] == "red"
    assert by_front["__BORNHOST"] == "10.1.2.3" and by_front["BORN_TIMESTAMP"] == "1700000000250"
    # The 5.x message id is the stored UNIQ_KEY; each entry's offset is its queue offset.
    entry = answers[0].entries[0]
    assert got["same-fast"].msg_id == entry.message_id
    assert got["same-fast"].queue_offset == entry.offset
    # Round robin over the topic's queues (rmqadmin's default of 8), as the endpoint's own sends.
    assert len({got[f"m{i}"].queue_id for i in range(20)}) == 8

    # The front's answers are timed with the endpoint's (rocketmq_rpc_latency, SendMessage, ok).
    assert fast.server is not None
    rows = dict(fast.server.latency.rows())
    assert sum(rows[("SendMessage", "ok", False)][:-1]) >= stats["served"]


def test_what_the_front_does_not_serve_the_endpoint_answers(
    broker: BrokerProcess, endpoints: tuple[ProxyThread, ProxyThread]
) -> None:
    fast, _ = endpoints
    topic = new_topic(broker)
    assert send(fast, message(topic, "warm")).status.code == d.Code.OK
    before = front_stats(fast)
    fifo = send(fast, message(topic, "fifo", group="g1"))
    assert fifo.status.code == d.Code.OK, fifo.status
    reserved = send(fast, message(topic, "bad", props={"UNIQ_KEY": "x"}))
    assert reserved.status.code == d.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, reserved.status
    assert "property is used by system: UNIQ_KEY" in reserved.status.message
    bad_tag = send(fast, message(topic, "bad", tag="a|b"))
    assert bad_tag.status.code == d.Code.ILLEGAL_MESSAGE_TAG, bad_tag.status
    no_id = send(fast, message(topic, "bad", message_id=" "))
    assert no_id.status.code == d.Code.ILLEGAL_MESSAGE_ID, no_id.status
    missing = send(fast, message(f"Missing_{uuid.uuid4().hex[:8]}", "x"))
    assert missing.status.code == d.Code.TOPIC_NOT_FOUND, missing.status
    after = front_stats(fast)
    assert after["passed_on"] == before["passed_on"] + 5
    assert after["served"] == before["served"]
    got = pull_all(broker, topic, 2)
    assert sorted(m.body.decode() for m in got) == ["fifo", "warm"]
    assert [m.body for m in pull_all(broker, topic, 3, deadline_s=3)].count(b"bad") == 0


def _consume(proxy: ProxyThread, broker: BrokerProcess) -> dict[str, object]:
    """Send 20 messages (tags, keys, properties) and receive them with the 5.x SimpleConsumer through
    ``proxy``: receive, change the first one's invisible time, ack each."""
    topic = new_topic(broker)
    group = f"GF_{uuid.uuid4().hex[:8]}"
    create_group(broker.broker_addr, group)
    endpoints = f"127.0.0.1:{proxy.port}"
    messages = [
        {"body": f"b{i}", "tag": f"T{i % 3}", "keys": [f"k{i}"], "props": {"n": str(i)}} for i in range(20)
    ]
    run_client5("send", endpoints=endpoints, topic=topic, messages=messages)
    got = run_client5("consume", endpoints=endpoints, topic=topic, group=group, count=20, deadline=60)
    received = sorted(got["received"], key=lambda r: int(r["body"][1:]))
    # Nothing comes again: every ack held (a new receive after the invisible time would show them).
    again = run_client5("consume", endpoints=endpoints, topic=topic, group=group, count=1, deadline=8)
    return {"received": received, "changed": got["changed_invisible"], "again": again["received"]}


def test_receives_and_acks_are_the_fronts_and_show_what_the_endpoint_shows(
    broker: BrokerProcess, endpoints: tuple[ProxyThread, ProxyThread]
) -> None:
    fast, slow = endpoints
    before = front_stats(fast)
    by_front, by_endpoint = _consume(fast, broker), _consume(slow, broker)
    assert by_front == by_endpoint
    assert len(by_front["received"]) == 20  # type: ignore[arg-type]
    first = by_front["received"][0]  # type: ignore[index]
    assert (first["body"], first["tag"], first["keys"], first["attempt"], first["props"]) == (
        "b0",
        "T0",
        ["k0"],
        1,
        {"n": "0"},
    )
    assert by_front["again"] == []
    after = front_stats(fast)
    assert after["receive_served"] > before["receive_served"], after
    assert after["ack_served"] >= before["ack_served"] + 19, after  # the changed one's ack may be either's
    assert front_stats(slow)["receive_served"] == 0


def test_deliveries_past_the_groups_attempts_go_to_the_dead_letter_queue(
    broker: BrokerProcess, endpoints: tuple[ProxyThread, ProxyThread]
) -> None:
    """A PushConsumer failing one message always: it comes back with growing attempts, then the front holds
    it back and the endpoint forwards it to %DLQ%<group>, as its own receives do."""
    fast, _ = endpoints
    topic = new_topic(broker)
    group = f"GD_{uuid.uuid4().hex[:8]}"
    create_group(broker.broker_addr, group, retry_max_times=1)  # 2 attempts, then the DLQ
    endpoints_ = f"127.0.0.1:{fast.port}"
    run_client5("send", endpoints=endpoints_, topic=topic, messages=[{"body": "ok"}, {"body": "never"}])
    got = run_client5(
        "push",
        endpoints=endpoints_,
        topic=topic,
        group=group,
        bodies=["ok", "never"],
        fail_always=["never"],
        fail_once=[],
        max_attempts=2,
        settle=20,
        deadline=120,
        timeout=200,
    )
    assert sorted({tuple(x) for x in got["deliveries"]}) == [("never", 1), ("never", 2), ("ok", 1)]
    assert await_dlq(broker.broker_addr, group, 1) == 1
    assert front_stats(fast)["receive_served"] > 0
