"""Orderly consumption across a consumer restart (``python -m rmq.broker``).

A producer sends numbered sequences for several sharding keys through ``SelectMessageQueueByHash`` (one key,
one queue) while an orderly push consumer consumes them; mid-stream the consumer shuts down and a new one
(another client instance, so it must win the broker's queue locks the first one held) takes over the group.
The listener is slower than the producer, so the restart happens with messages sent and pulled but not yet
consumed.

Per key, the first consumer sees 0, 1, 2, ... without gaps, and the second continues at the first sequence
number not yet committed: it may repeat a tail of what the first one saw -- an exact redelivery, in order --
but never skips one, never goes backwards otherwise, and reaches the last. Nothing is lost; per queue, queue
offsets only grow within each consumer's run. The first consumer delivers nothing once its shutdown returned.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from rmq.client import (
    ClientConfig,
    ConsumeFromWhere,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SelectMessageQueueByHash,
)

from tests.brokerproc import BrokerProcess, start_broker

KEYS = [f"order-{i}" for i in range(10)]
PER_KEY = 40
TOTAL = len(KEYS) * PER_KEY
RESTART_AFTER = TOTAL // 3  # the first consumer stops once it consumed this many
TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory.mktemp("orderly-store"))
    yield proc
    proc.stop()


@dataclass(frozen=True)
class Delivery:
    run: int  # 1: the first consumer, 2: its successor
    key: str
    seq: int
    queue_id: int
    queue_offset: int
    at: float


class Recorder:
    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self._lock = threading.Lock()

    def listener(self, run: int) -> Callable[[list[MessageExt], ConsumeOrderlyContext], ConsumeOrderlyStatus]:
        def on_messages(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
            for m in msgs:
                key, seq = m.get_property("okey"), m.get_property("seq")
                if key is None or seq is None:
                    continue  # the message that created the topic
                with self._lock:
                    self.deliveries.append(
                        Delivery(run, key, int(seq), m.queue_id, m.queue_offset, time.monotonic())
                    )
            time.sleep(0.02 * len(msgs))  # slower than the producer: a backlog is queued at the restart
            return ConsumeOrderlyStatus.SUCCESS

        return on_messages

    def count(self) -> int:
        with self._lock:
            return len(self.deliveries)

    def distinct(self) -> int:
        with self._lock:
            return len({(d.key, d.seq) for d in self.deliveries})


async def start_consumer(
    broker: BrokerProcess, group: str, topic: str, instance: str, listener: object
) -> PushConsumer:
    consumer = PushConsumer(
        group,
        client_config=ClientConfig(
            namesrv_addr=broker.namesrv_addr, instance_name=instance, rebalance_interval_ms=2000
        ),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        consume_message_batch_max_size=3,
    )
    consumer.subscribe(topic, "*")
    consumer.register_message_listener_orderly(listener)  # type: ignore[arg-type]
    await consumer.start()
    return consumer


async def produce(producer: Producer, topic: str, sent: list[tuple[str, int, int]]) -> None:
    selector = SelectMessageQueueByHash()
    for seq in range(PER_KEY):
        for key in KEYS:
            msg = Message(topic, f"{key}:{seq}".encode(), keys=key)
            msg.put_user_property("okey", key)
            msg.put_user_property("seq", str(seq))
            result = await producer.send(msg, selector=selector, arg=key)
            assert result.ok
            sent.append((key, seq, result.message_queue.queue_id))
        await asyncio.sleep(0.03)


async def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def test_orderly_per_key_order_across_consumer_restart(broker: BrokerProcess) -> None:
    run = f"{os.getpid()}_{time.monotonic_ns() % 10**9}"
    topic, group = f"Orderly_{run}", f"CG_ORDERLY_{run}"
    producer = Producer(f"PG_ORDERLY_{run}", namesrv_addr=broker.namesrv_addr, instance_name="ord-producer")
    await producer.start()
    rec = Recorder()
    sent: list[tuple[str, int, int]] = []
    consumers: list[PushConsumer] = []
    producing: asyncio.Task[None] | None = None
    try:
        await producer.send(Message(topic, b"create"))  # the topic exists before the consumer starts
        consumers.append(await start_consumer(broker, group, topic, f"ord-1-{run}", rec.listener(1)))
        producing = asyncio.create_task(produce(producer, topic, sent))

        await wait_until(lambda: rec.count() >= RESTART_AFTER, TIMEOUT_S, "the first consumer")
        backlog = sum(pq.msg_count for pq in consumers[0].rebalance.process_queue_table.values())
        still_producing = not producing.done()
        await consumers[0].shutdown()
        stopped_at = time.monotonic()
        consumers.append(await start_consumer(broker, group, topic, f"ord-2-{run}", rec.listener(2)))

        await asyncio.wait_for(producing, TIMEOUT_S)
        await wait_until(lambda: rec.distinct() >= TOTAL, TIMEOUT_S, "every message")
        await asyncio.sleep(0.5)  # stray redeliveries would show up now
    finally:
        if producing is not None and not producing.done():
            producing.cancel()
        for c in consumers:
            await c.shutdown()
        await producer.shutdown()

    deliveries = list(rec.deliveries)
    assert len(sent) == TOTAL
    late = [d for d in deliveries if d.run == 1 and d.at > stopped_at]
    assert not late, f"the stopped consumer still delivered {late[:5]}"
    first_run = [d for d in deliveries if d.run == 1]
    second_run = [d for d in deliveries if d.run == 2]
    assert first_run and second_run
    assert backlog > 0 or still_producing, "the restart did not happen mid-stream"

    # One key, one queue: the one the selector chose for every send of that key.
    queue_of = {}
    for key, _, qid in sent:
        assert queue_of.setdefault(key, qid) == qid
    assert len(set(queue_of.values())) > 1  # the keys are spread over several queues
    for d in deliveries:
        assert d.queue_id == queue_of[d.key]

    redelivered = 0
    for key in KEYS:
        one = [d.seq for d in first_run if d.key == key]
        two = [d.seq for d in second_run if d.key == key]
        assert one == list(range(len(one))), f"{key}: first consumer saw {one}"
        assert two, f"{key}: the second consumer got nothing"
        start = two[0]
        assert start <= len(one), (
            f"{key}: gap after the restart: first run ended at {len(one) - 1}, then {start}"
        )
        assert two == list(range(start, PER_KEY)), f"{key}: second consumer saw {two}"
        redelivered += len(one) - start
    # Queue offsets only move forward within a run (delivery order is queue order).
    for run_deliveries in (first_run, second_run):
        per_queue: dict[int, list[int]] = defaultdict(list)
        for d in run_deliveries:
            per_queue[d.queue_id].append(d.queue_offset)
        for qid, offsets in per_queue.items():
            assert offsets == sorted(set(offsets)), f"queue {qid} offsets out of order: {offsets}"
    assert redelivered == len(deliveries) - TOTAL
