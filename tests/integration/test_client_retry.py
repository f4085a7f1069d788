"""Consumer retry and dead letters with rmq's PushConsumer against ``python -m rmq.broker`` (REMOTING.md
§7.4, §7.6).

A failed message (RECONSUME_LATER, an exception or ``None``) is sent back with delay level 0, so the
broker re-delivers it through ``%RETRY%<group>`` after level 3 + reconsumeTimes; the broker here has
levels 3, 4, 5 = 1 s, 2 s, 3 s. After ``max_reconsume_times`` retries the message goes to
``%DLQ%<group>``, which any consumer can subscribe to. Clustering consumers subscribe to their retry
topic by themselves; broadcasting consumers drop failed messages.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from rmq.client import ConsumeConcurrentlyStatus, Message, MessageExt, MessageModel, Producer
from rmq.common.codes import MessageConst

from tests.brokerproc import BrokerProcess, start_broker
from tests.integration.semantics_helpers import Collector, config, push_consumer, unique

LEVELS = "1s 1s 1s 2s 3s " + " ".join(["1s"] * 13)
RETRY_DELAYS_S = {1: 1.0, 2: 2.0, 3: 3.0}  # reconsume times -> delay before that delivery (level 2 + n)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_broker(tmp_path_factory.mktemp("retry") / "store", f"messageDelayLevel={LEVELS}")
    yield b
    b.stop()


@pytest.fixture
async def producer(broker: BrokerProcess) -> AsyncIterator[Producer]:
    group = unique("pg")
    async with Producer(group, client_config=config(broker, group)) as p:
        yield p


def failing(n: int) -> Any:
    """Fail the first ``n`` deliveries of each message (``n`` < 0: always), in three different ways."""
    seen: dict[str, int] = {}

    def answer(msg: MessageExt) -> ConsumeConcurrentlyStatus | None:
        k = seen[msg.msg_id] = seen.get(msg.msg_id, 0) + 1
        if n >= 0 and k > n:
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        if k % 3 == 2:
            raise RuntimeError("listener failure")
        return None if k % 3 == 0 else ConsumeConcurrentlyStatus.RECONSUME_LATER

    return answer


async def test_failed_deliveries_come_back_with_the_documented_delays(
    broker: BrokerProcess, producer: Producer
) -> None:
    topic, group = unique("RT"), unique("cg")
    await producer.send(Message(topic, b"warm"))
    fail_3 = failing(3)
    collector = Collector(
        lambda m: fail_3(m) if m.body == b"job" else ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    )
    consumer = await push_consumer(broker, group, topic, collector)
    try:
        assert f"%RETRY%{group}" in consumer.subscriptions, "clustering: the retry topic is subscribed"
        await collector.wait_for(1, 20)
        result = await producer.send(Message(topic, b"job", keys="job-1"))
        got = await collector.wait_until(lambda msgs: len([m for m in msgs if m.body == b"job"]) >= 4, 20)
        await asyncio.sleep(1.0)  # succeeded on the 4th delivery: no 5th
        got = collector.msgs
    finally:
        await consumer.shutdown()
    jobs = [(at, m) for at, m in collector.received if m.body == b"job"]
    assert len(got) == 5 and len(jobs) == 4
    assert [m.reconsume_times for _, m in jobs] == [0, 1, 2, 3]
    for (prev_at, _), (at, m) in pairwise(jobs):
        delay = RETRY_DELAYS_S[m.reconsume_times]
        # Not before its level's delay (how much later depends on the machine's load: not asserted).
        assert at - prev_at >= delay, (m.reconsume_times, at - prev_at)
        assert at - prev_at <= delay + 1.5, (m.reconsume_times, at - prev_at)
        assert m.topic == topic, "restored from RETRY_TOPIC"
        assert m.get_property(MessageConst.RETRY_TOPIC) == topic
        assert m.msg_id == result.msg_id and m.keys == "job-1"
        assert m.get_property(MessageConst.ORIGIN_MESSAGE_ID) in (result.msg_id, result.offset_msg_id)


async def test_exhausted_retries_go_to_the_dlq(broker: BrokerProcess, producer: Producer) -> None:
    topic, group = unique("DT"), unique("cg")
    await producer.send(Message(topic, b"warm"))
    always = failing(-1)
    collector = Collector(
        lambda m: always(m) if m.body == b"doomed" else ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    )
    consumer = await push_consumer(broker, group, topic, collector, max_reconsume_times=2)
    dead = Collector()
    dlq_consumer = None
    try:
        await collector.wait_for(1, 20)
        result = await producer.send(Message(topic, b"doomed"))
        await collector.wait_until(lambda msgs: len(msgs) >= 4, 20)
        dlq_consumer = await push_consumer(broker, unique("dlq_reader"), f"%DLQ%{group}", dead)
        await dead.wait_for(1, 20)
        await asyncio.sleep(1.5)
    finally:
        if dlq_consumer is not None:
            await dlq_consumer.shutdown()
        await consumer.shutdown()
    doomed = [m for m in collector.msgs if m.body == b"doomed"]
    assert [m.reconsume_times for m in doomed] == [0, 1, 2], "max_reconsume_times=2 retries, no more"
    [letter] = dead.msgs
    assert letter.topic == f"%DLQ%{group}" and letter.body == b"doomed"
    assert letter.msg_id == result.msg_id and letter.reconsume_times == 3
    assert letter.get_property(MessageConst.RETRY_TOPIC) == topic


async def test_broadcasting_does_not_retry(broker: BrokerProcess, producer: Producer, tmp_path: Path) -> None:
    topic, group = unique("BT"), unique("cg")
    await producer.send(Message(topic, b"warm"))
    collector = Collector(lambda m: ConsumeConcurrentlyStatus.RECONSUME_LATER)
    consumer = await push_consumer(
        broker,
        group,
        topic,
        collector,
        message_model=MessageModel.BROADCASTING,
        offset_store_dir=tmp_path,
    )
    try:
        assert list(consumer.subscriptions) == [topic], "no retry topic"
        await collector.wait_for(1, 20)
        await producer.send(Message(topic, b"dropped"))
        await collector.wait_for(2, 20)
        await asyncio.sleep(RETRY_DELAYS_S[1] + 1.5)  # a retry would be back by now
    finally:
        await consumer.shutdown()
    assert [m.body for m in collector.msgs] == [b"warm", b"dropped"]
    assert all(m.reconsume_times == 0 for m in collector.msgs)
