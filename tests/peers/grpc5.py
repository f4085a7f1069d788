"""What the tests of the official 5.x clients (Python, Java, Node.js) share: the two sides they compare (rmq's
broker with its own gRPC endpoint, Apache RocketMQ 5.x's proxy with its broker), topics and groups made on
either, and the 4.x reads of what the 5.x clients stored.

Apache's proxy checks a message's 5.x type against the topic's ``message.type`` and serves no consumer of a
group its broker does not have; rmq's topics accept every type. Each side gets its topics and groups the same
way (UPDATE_AND_CREATE_TOPIC / UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on its broker), the type only on Apache.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from rmq.client.heartbeat import ConsumeFromWhere
from rmq.client.message import Message, MessageExt
from rmq.client.sync import LitePullConsumer, Producer
from rmq.common.codes import RequestCode, ResponseCode
from rmq.proxy.messages import SHARDING_KEY, TIMER_DELIVER_MS
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.peers.apache5 import create_group, create_topic, wait_for_route
from tests.peers.conftest import Peers, Peers5


def name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Side:
    """One server side of a comparison: where 5.x clients connect and where its broker is."""

    label: str
    endpoints: str
    namesrv: str
    broker_addr: str
    typed: bool
    """Topics need their 5.x message type (Apache)."""

    def topic(self, prefix: str, message_type: str = "NORMAL") -> str:
        topic = name(prefix)
        create_topic(self.broker_addr, topic, message_type if self.typed else None)
        wait_for_route(self.namesrv, topic)
        return topic

    def group(
        self,
        prefix: str,
        retry_max_times: int = 16,
        orderly: bool = False,
        attributes: dict[str, str] | None = None,
    ) -> str:
        group = name(prefix)
        create_group(self.broker_addr, group, retry_max_times, orderly, attributes)
        return group


def rmq_side(peers: Peers) -> Side:
    """rmq's broker, serving gRPC itself (``grpcServerPort``)."""
    rmq = peers.rmq
    return Side("rmq", f"127.0.0.1:{rmq.ready['grpc']}", rmq.namesrv_addr, rmq.broker_addr, typed=False)


def apache_side(peers5: Peers5) -> Side:
    """Apache RocketMQ 5.x: its proxy in local mode, with its broker inside."""
    a = peers5.apache
    return Side("apache", a.endpoints, a.namesrv_addr, a.broker_addr, typed=True)


def pull(
    namesrv: str, topic: str, count: int, deadline_s: float = 30, bodies: set[str] | None = None
) -> list[MessageExt]:
    """``count`` records of ``topic`` read by rmq's 4.x consumer (or, with ``bodies``, until each of those
    bodies was read)."""
    consumer = LitePullConsumer(
        name("G4"), namesrv_addr=namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(topic, "*")
    consumer.start()
    got: list[MessageExt] = []
    try:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            got.extend(consumer.poll(1000))
            if bodies is not None and bodies <= {m.body.decode() for m in got}:
                break
            if bodies is None and len(got) >= count:
                break
    finally:
        consumer.shutdown()
    return got


def record(m: MessageExt) -> dict[str, Any]:
    """What a stored 5.x message is, with the server's own choices (ids, offsets, times) left out."""
    return {
        "body": m.body.decode(),
        "tags": m.tags,
        "keys": sorted((m.get_property("KEYS") or "").split()),
        "color": m.get_property("color"),
        "group": m.get_property(SHARDING_KEY),
        "timer": m.get_property(TIMER_DELIVER_MS) is not None,
        "pgroup_is_topic": m.get_property("PGROUP") == m.topic,
    }


def plain_record(body: str, tags: str, keys: list[str], color: str) -> dict[str, Any]:
    """:func:`record` of a plain 5.x message (no message group, no delivery time) sent with this tag, keys and
    ``color`` property."""
    return {
        "body": body,
        "tags": tags,
        "keys": keys,
        "color": color,
        "group": None,
        "timer": False,
        "pgroup_is_topic": True,
    }


def same(results: dict[str, dict[str, Any]], key: str) -> Any:
    """``results[side][key]``, the same on rmq and Apache (else the assertion shows both)."""
    rmq, apache = results["rmq"][key], results["apache"][key]
    assert rmq == apache, f"{key}: rmq {rmq} != apache {apache}"
    return rmq


def dlq_count(broker_addr: str, group: str) -> int:
    """Messages in the group's dead-letter queue (its one queue's max offset; 0 when it does not exist)."""
    request = create_request(RequestCode.GET_MAX_OFFSET, {"topic": f"%DLQ%{group}", "queueId": "0"})
    response = invoke_sync(broker_addr, request, 5000)
    if response.code != ResponseCode.SUCCESS:
        return 0
    return int(response.ext_fields.get("offset", "0"))


def await_dlq(broker_addr: str, group: str, count: int, deadline_s: float = 30) -> int:
    """The DLQ count once it reaches ``count`` (a client's forward may land after it closed), or at the
    deadline."""
    end = time.monotonic() + deadline_s
    while (got := dlq_count(broker_addr, group)) < count and time.monotonic() < end:
        time.sleep(0.5)
    return got


CROSS_4X = ["cross-4x-0", "cross-4x-1"]
"""Bodies a 4.x client sends for the 5.x clients to receive (tag Tag4, key k4, property origin=4x)."""


def send_4x(side: Side, topic: str, bodies: list[str] = CROSS_4X) -> None:
    """Send ``bodies`` to ``topic`` with rmq's 4.x producer (Remoting, through the side's name server)."""
    producer = Producer(name("P4"), namesrv_addr=side.namesrv)
    producer.start()
    try:
        for body in bodies:
            msg = Message(topic, body.encode(), tags="Tag4", keys=["k4"], properties={"origin": "4x"})
            producer.send(msg)
    finally:
        producer.shutdown()
