"""Helpers of the sink tests: topics made on a real broker, and a real consumer that reads a topic back."""

from __future__ import annotations

import hashlib
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from rmq.client.message import MessageExt
from rmq.client.sync import Admin, LitePullConsumer
from rmq.common.route import TopicConfig


class Cluster(Protocol):
    """A name server and a broker (an rmq ``BrokerProcess`` or an Apache peer)."""

    @property
    def namesrv_addr(self) -> str: ...
    @property
    def broker_addr(self) -> str: ...


def create_topic(broker: Cluster, topic: str, queues: int = 4) -> None:
    with Admin(namesrv_addr=broker.namesrv_addr) as admin:
        admin.create_topic(broker.broker_addr, TopicConfig(topic, queues, queues))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # the broker registers the topic with the name server
            try:
                admin.topic_route(topic)
                return
            except Exception:
                time.sleep(0.2)
    raise AssertionError(f"topic {topic} has no route")


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


@dataclass
class ReadBack:
    messages: list[MessageExt] = field(default_factory=list)

    @property
    def bodies(self) -> Counter[str]:
        return Counter(digest(m.body) for m in self.messages)


def consume(namesrv: str, topic: str, expect: int, timeout: float = 60.0, quiet_s: float = 2.0) -> ReadBack:
    """Every message of `topic` from the start of each queue, read by a real consumer: polls until
    `expect` messages came, then on until nothing more comes for `quiet_s` (so extras show up too)."""
    out = ReadBack()
    group = f"sink_check_{uuid.uuid4().hex[:8]}"
    consumer = LitePullConsumer(group, namesrv_addr=namesrv, auto_commit=False)
    consumer.start()
    try:
        queues = consumer.fetch_message_queues(topic)
        consumer.assign(queues)
        for mq in queues:
            consumer.seek(mq, 0)
        deadline = time.monotonic() + timeout
        while len(out.messages) < expect and time.monotonic() < deadline:
            out.messages += consumer.poll(500)
        while True:
            more = consumer.poll(int(quiet_s * 1000))
            if not more:
                break
            out.messages += more
    finally:
        consumer.shutdown()
    return out
