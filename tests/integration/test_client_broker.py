"""The asyncio client against a real ``python -m rmq.broker`` (with its embedded name server) on loopback."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rmq.client import (
    AllocateMessageQueueAveragely,
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    LitePullConsumer,
    Message,
    MessageExt,
    MessageIllegalError,
    MessageModel,
    NoRouteError,
    Producer,
    PushConsumer,
    SelectMessageQueueByHash,
    SendStatus,
)
from rmq.client.instance import get_instance
from rmq.common.codes import MessageConst

from tests.brokerproc import BrokerProcess, start_broker
from tests.fastsend import FastSendProbe


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory.mktemp("broker"))
    yield proc
    proc.stop()


_counter = iter(range(1_000_000))


def unique(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{next(_counter)}"


def config(broker: BrokerProcess, instance: str = "DEFAULT", **kw: Any) -> ClientConfig:
    return ClientConfig(
        namesrv_addr=broker.namesrv_addr,
        instance_name=instance,
        rebalance_interval_ms=kw.pop("rebalance_interval_ms", 2000),
        poll_name_server_interval_ms=kw.pop("poll_name_server_interval_ms", 2000),
        **kw,
    )


@pytest.fixture
async def producer(broker: BrokerProcess) -> AsyncIterator[Producer]:
    p = Producer(unique("pg"), client_config=config(broker))
    await p.start()
    yield p
    await p.shutdown()


class Collector:
    """A listener that records messages and wakes waiters when a count is reached."""

    def __init__(self, answer: Callable[[MessageExt], Any] | None = None) -> None:
        self.msgs: list[MessageExt] = []
        self.answer = answer
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.loop = asyncio.get_running_loop()

    def _notify(self) -> None:
        for n, fut in list(self._waiters):
            if len(self.msgs) >= n and not fut.done():
                fut.set_result(None)

    def __call__(self, msgs: list[MessageExt], ctx: Any) -> Any:  # runs in the consumer's thread pool
        self.loop.call_soon_threadsafe(self._record, list(msgs))
        if self.answer is not None:
            return self.answer(msgs[0])
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def _record(self, msgs: list[MessageExt]) -> None:
        self.msgs.extend(msgs)
        self._notify()

    async def wait_for(self, n: int, timeout: float = 30.0) -> list[MessageExt]:
        fut = self.loop.create_future()
        self._waiters.append((n, fut))
        self._notify()
        await asyncio.wait_for(fut, timeout)
        return self.msgs


async def push_consumer(
    broker: BrokerProcess,
    group: str,
    topic: str,
    listener: Any,
    *,
    expression: str = "*",
    instance: str = "DEFAULT",
    orderly: bool = False,
    **kw: Any,
) -> PushConsumer:
    kw.setdefault("consume_from_where", ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c = PushConsumer(group, client_config=config(broker, instance), **kw)
    c.subscribe(topic, expression)
    if orderly:
        c.register_message_listener_orderly(listener)
    else:
        c.register_message_listener(listener)
    await c.start()
    return c


# --- producer ------------------------------------------------------------------------------------------


async def test_send_sync_then_consume_every_field(broker: BrokerProcess, producer: Producer) -> None:
    topic = unique("T")
    big = os.urandom(1000) * 10  # 10 kB: compressed on the wire
    sent = []
    probe = await asyncio.to_thread(FastSendProbe, broker)
    for i in range(8):
        msg = Message(
            topic, big if i == 3 else f"m{i}".encode(), tags="TagA", keys=[f"k{i}", "common"], flag=i
        )
        msg.put_user_property("idx", str(i))
        sent.append(await producer.send(msg))
    # The broker's network thread answered all but the first (which created the topic).
    await asyncio.to_thread(probe.assert_taken, 8, 7, True)
    assert all(r.send_status is SendStatus.SEND_OK for r in sent)
    assert len({r.msg_id for r in sent}) == 8 and all(len(r.msg_id) == 32 for r in sent)
    assert all(len(r.offset_msg_id) == 32 for r in sent)
    collector = Collector()
    consumer = await push_consumer(broker, unique("cg"), topic, collector)
    try:
        got = await collector.wait_for(8)
    finally:
        await consumer.shutdown()
    by_idx = {int(m.properties["idx"]): m for m in got}
    assert sorted(by_idx) == list(range(8))
    for i, m in by_idx.items():
        result = sent[i]
        assert m.body == (big if i == 3 else f"m{i}".encode())
        assert m.tags == "TagA" and m.keys == f"k{i} common" and m.flag == i
        assert m.msg_id == result.msg_id and m.offset_msg_id == result.offset_msg_id
        assert (m.topic, m.queue_id, m.queue_offset) == (
            topic,
            result.message_queue.queue_id,
            result.queue_offset,
        )
        assert m.broker_name == result.message_queue.broker_name
        assert m.reconsume_times == 0 and m.born_timestamp <= m.store_timestamp + 1000
    assert by_idx[3].sys_flag & 0x1  # stored compressed, inflated by the consumer


async def test_send_async_pipelined_and_oneway(broker: BrokerProcess, producer: Producer) -> None:
    topic = unique("T")
    await producer.send(Message(topic, b"warm-up"))  # the route exists from here on
    probe = await asyncio.to_thread(FastSendProbe, broker)
    called: list[Any] = []
    futures = [producer.send_async(Message(topic, b"%d" % i), callback=called.append) for i in range(500)]
    results = await asyncio.gather(*futures)
    assert len(results) == 500 and all(r.ok for r in results)
    await asyncio.sleep(0)
    assert len(called) == 500
    instance = producer.instance
    assert len(instance.remoting.channels) <= 2  # one name server + one broker connection
    for i in range(20):
        await producer.send_oneway(Message(topic, b"oneway%d" % i))
    collector = Collector()
    # Read after the consumer has them all: by then the broker has every oneway send.
    consumer = await push_consumer(broker, unique("cg"), topic, collector)
    try:
        got = await collector.wait_for(521)
    finally:
        await consumer.shutdown()
    assert sum(m.body.startswith(b"oneway") for m in got) == 20
    await asyncio.to_thread(probe.assert_taken, 520, 520)


async def test_batch_send(broker: BrokerProcess, producer: Producer) -> None:
    topic = unique("T")
    msgs = [Message(topic, b"b%d" % i, keys=f"key{i}") for i in range(10)]
    result = await producer.send(msgs)
    ids = result.msg_id.split(",")
    assert ids == [m.uniq_id for m in msgs]
    assert len(result.offset_msg_id.split(",")) == 10
    collector = Collector()
    consumer = await push_consumer(broker, unique("cg"), topic, collector)
    try:
        got = await collector.wait_for(10)
    finally:
        await consumer.shutdown()
    got.sort(key=lambda m: m.queue_offset)
    assert {m.queue_id for m in got} == {result.message_queue.queue_id}
    assert [m.queue_offset for m in got] == list(range(result.queue_offset, result.queue_offset + 10))
    assert [m.body for m in got] == [m.body for m in msgs]
    assert [m.msg_id for m in got] == ids
    assert [m.keys for m in got] == [f"key{i}" for i in range(10)]


async def test_batches_after_the_first_take_the_fast_path(broker: BrokerProcess, producer: Producer) -> None:
    topic = unique("T")

    def batch(j: int) -> list[Message]:
        return [Message(topic, b"b%d-%d" % (j, i), keys=f"key{i}") for i in range(10)]

    batches = [batch(j) for j in range(4)]
    probe = await asyncio.to_thread(FastSendProbe, broker)
    results = [await producer.send(msgs) for msgs in batches]
    # The first batch created the topic through Python; the network thread stored the others, except those
    # that reached it behind a request Python was still handling (declined "Queued", which a loaded machine
    # can make all three): then more batches are sent, at most 20, until the network thread took one.
    while await asyncio.to_thread(probe.taken) == 0 and len(batches) < 24:
        batches.append(batch(len(batches)))
        results.append(await producer.send(batches[-1]))
    await asyncio.to_thread(probe.assert_taken, len(batches), 10 * (len(batches) - 1), True)
    collector = Collector()
    consumer = await push_consumer(broker, unique("cg"), topic, collector)
    try:
        got = await collector.wait_for(10 * len(batches))
    finally:
        await consumer.shutdown()
    by_id = {m.msg_id: m for m in got}
    for msgs, result in zip(batches, results, strict=True):
        stored = [by_id[m.uniq_id] for m in msgs]
        assert [m.body for m in stored] == [m.body for m in msgs]
        assert [m.keys for m in stored] == [f"key{i}" for i in range(10)]
        assert {m.queue_id for m in stored} == {result.message_queue.queue_id}
        assert [m.queue_offset for m in stored] == list(range(result.queue_offset, result.queue_offset + 10))


async def test_send_to_queue_and_by_sharding_key(producer: Producer) -> None:
    topic = unique("T")
    queues = await producer.fetch_publish_message_queues(topic)
    assert len(queues) == 4
    target = queues[2]
    r = await producer.send(Message(topic, b"x"), mq=target)
    assert r.message_queue == target
    selector = SelectMessageQueueByHash()
    seen: dict[str, set[int]] = {}
    for i in range(40):
        key = f"order-{i % 5}"
        r = await producer.send(Message(topic, b"x"), selector=selector, arg=key)
        seen.setdefault(key, set()).add(r.message_queue.queue_id)
    assert all(len(q) == 1 for q in seen.values())


async def test_validation_happens_before_the_wire(producer: Producer) -> None:
    with pytest.raises(MessageIllegalError):
        await producer.send(Message("bad topic", b"x"))
    with pytest.raises(MessageIllegalError):
        await producer.send(Message("T", b"x" * (4 * 1024 * 1024 + 1)))
    with pytest.raises(MessageIllegalError):
        await producer.send(Message("T", b""))


async def test_no_route_without_auto_create(tmp_path: Path) -> None:
    proc = start_broker(tmp_path, "autoCreateTopicEnable=false")
    try:
        p = Producer(unique("pg"), namesrv_addr=proc.namesrv_addr, instance_name="noroute")
        await p.start()
        try:
            with pytest.raises(NoRouteError, match="No route info"):
                await p.send(Message(unique("T"), b"x"))
        finally:
            await p.shutdown()
    finally:
        proc.stop()


# --- push consumer -------------------------------------------------------------------------------------


async def test_tag_filtering(broker: BrokerProcess, producer: Producer) -> None:
    topic = unique("T")
    for tag in ["A", "B", "C", "A", None, "B"]:
        await producer.send(Message(topic, f"{tag}".encode(), tags=tag))
    collector = Collector()
    consumer = await push_consumer(broker, unique("cg"), topic, collector, expression="A || B")
    try:
        await collector.wait_for(4)
        await asyncio.sleep(0.5)  # nothing else arrives
    finally:
        await consumer.shutdown()
    assert sorted(m.tags or "" for m in collector.msgs) == ["A", "A", "B", "B"]


async def test_clustering_rebalance_between_two_consumers(broker: BrokerProcess, producer: Producer) -> None:
    topic, group = unique("T"), unique("cg")
    await producer.send(Message(topic, b"create"))
    c1, c2 = Collector(), Collector()
    a = await push_consumer(broker, group, topic, c1, instance="A")
    # Delivery is at least once: a queue moving to another client while a consumed offset is only in
    # memory is delivered again. Commit first so the count below is exact.
    await c1.wait_for(1)
    # The listener has the message before the client moves its consumed offset past it.
    for _ in range(200):
        if sum(a.consume_status(topic).values()) >= 1:
            break
        await asyncio.sleep(0.01)
    assert sum(a.consume_status(topic).values()) >= 1
    await a.persist_consumer_offset(oneway=False)
    b = await push_consumer(broker, group, topic, c2, instance="B")
    try:
        ids = sorted([a.client_id, b.client_id])
        all_mqs = sorted(await a.fetch_subscribe_message_queues(topic))
        expected = {
            cid: set(AllocateMessageQueueAveragely().allocate(group, cid, all_mqs, ids)) for cid in ids
        }
        for _ in range(100):  # the notify-driven rebalance settles quickly
            if {q for q in a.allocated_queues() if q.topic == topic} == expected[a.client_id] and {
                q for q in b.allocated_queues() if q.topic == topic
            } == expected[b.client_id]:
                break
            await asyncio.sleep(0.1)
        assert {q for q in a.allocated_queues() if q.topic == topic} == expected[a.client_id]
        assert {q for q in b.allocated_queues() if q.topic == topic} == expected[b.client_id]
        for i in range(40):
            await producer.send(Message(topic, b"%d" % i))
        deadline = time.monotonic() + 30
        while len(c1.msgs) + len(c2.msgs) < 41 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert len(c1.msgs) + len(c2.msgs) == 41
        assert c1.msgs and c2.msgs
        # One leaves: the other takes every queue and gets the new messages.
        await b.shutdown()
        for _ in range(100):
            if {q for q in a.allocated_queues() if q.topic == topic} == set(all_mqs):
                break
            await asyncio.sleep(0.1)
        assert {q for q in a.allocated_queues() if q.topic == topic} == set(all_mqs)
        before = len(c1.msgs)
        for i in range(20):
            await producer.send(Message(topic, b"after%d" % i))
        await c1.wait_for(before + 20)
    finally:
        await a.shutdown()
        await b.shutdown()


async def test_broadcasting_every_consumer_gets_everything(
    broker: BrokerProcess, producer: Producer, tmp_path: Path
) -> None:
    topic, group = unique("T"), unique("cg")
    await producer.send(Message(topic, b"create"))
    c1, c2 = Collector(), Collector()
    common = {"message_model": MessageModel.BROADCASTING, "offset_store_dir": tmp_path}
    a = await push_consumer(broker, group, topic, c1, instance="A", **common)
    b = await push_consumer(broker, group, topic, c2, instance="B", **common)
    try:
        for i in range(10):
            await producer.send(Message(topic, b"%d" % i))
        await c1.wait_for(11)
        await c2.wait_for(11)
    finally:
        await a.shutdown()
        await b.shutdown()
    files = sorted(tmp_path.glob(f"*/{group}/offsets.json"))
    assert len(files) == 2
    assert all("offsetTable" in f.read_text() for f in files)


async def test_orderly_consumption_keeps_key_order(broker: BrokerProcess, producer: Producer) -> None:
    topic, group = unique("T"), unique("cg")
    selector = SelectMessageQueueByHash()
    for i in range(60):
        key = f"order-{i % 3}"
        await producer.send(Message(topic, f"{key}:{i}".encode()), selector=selector, arg=key)
    seen: list[tuple[str, int]] = []
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    active: set[int] = set()
    overlap: list[int] = []

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeOrderlyStatus:
        qid = ctx.message_queue.queue_id
        if qid in active:
            overlap.append(qid)
        active.add(qid)
        time.sleep(0.001)
        for m in msgs:
            key, i = m.body.decode().split(":")
            seen.append((key, int(i)))
        active.discard(qid)
        if len(seen) >= 60:
            loop.call_soon_threadsafe(done.set)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = await push_consumer(
        broker, group, topic, listener, orderly=True, consume_message_batch_max_size=2
    )
    try:
        await asyncio.wait_for(done.wait(), 30)
        assert all(pq.locked for pq in consumer.rebalance.process_queue_table.values())
    finally:
        await consumer.shutdown()
    assert not overlap  # one queue, one consume task at a time
    for key in ("order-0", "order-1", "order-2"):
        order = [i for k, i in seen if k == key]
        assert order == sorted(order) and len(order) == 20


async def test_reconsume_later_and_exceptions_are_redelivered(
    broker: BrokerProcess, producer: Producer
) -> None:
    topic, group = unique("T"), unique("cg")
    await producer.send(Message(topic, b"later"))
    await producer.send(Message(topic, b"raise"))
    attempts: dict[bytes, int] = {}

    def answer(msg: MessageExt) -> ConsumeConcurrentlyStatus:
        attempts[msg.body] = attempts.get(msg.body, 0) + 1
        if attempts[msg.body] == 1:
            if msg.body == b"raise":
                raise RuntimeError("boom")
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    collector = Collector(answer)
    consumer = await push_consumer(broker, group, topic, collector)
    try:
        got = await collector.wait_for(4, timeout=60)
    finally:
        await consumer.shutdown()
    retried = [m for m in got if m.reconsume_times > 0]
    assert sorted(m.body for m in retried) == [b"later", b"raise"]
    for m in retried:
        assert m.topic == topic  # restored from RETRY_TOPIC
        assert m.get_property(MessageConst.RETRY_TOPIC) == topic
        first = next(x for x in got if x.body == m.body and x.reconsume_times == 0)
        assert m.get_property(MessageConst.ORIGIN_MESSAGE_ID) in (first.msg_id, first.offset_msg_id)


async def test_offsets_are_committed_and_resumed(broker: BrokerProcess, producer: Producer) -> None:
    topic, group = unique("T"), unique("cg")
    for i in range(20):
        await producer.send(Message(topic, b"%d" % i))
    first = Collector()
    consumer = await push_consumer(broker, group, topic, first)
    await first.wait_for(20)
    await consumer.shutdown()  # persists the offsets (acknowledged)
    instance = get_instance(config(broker, "probe"))
    instance.start()
    try:
        await instance.update_topic_route(topic)
        mqs = await instance.fetch_subscribe_message_queues(topic)
        addr = instance.find_broker_addr_in_publish(next(iter(mqs)).broker_name)
        assert addr is not None
        total = 0
        for mq in mqs:
            total += await instance.api.query_consumer_offset(addr, group, mq)
        assert total == 20
    finally:
        await instance.shutdown()
    for i in range(5):
        await producer.send(Message(topic, b"new%d" % i))
    second = Collector()
    consumer = await push_consumer(broker, group, topic, second)
    try:
        await second.wait_for(5)
        await asyncio.sleep(0.5)
    finally:
        await consumer.shutdown()
    assert sorted(m.body for m in second.msgs) == [b"new%d" % i for i in range(5)]


async def test_search_offset_by_timestamp(broker: BrokerProcess, producer: Producer) -> None:
    topic = unique("T")
    mq = (await producer.fetch_publish_message_queues(topic))[0]
    for i in range(5):
        await producer.send(Message(topic, b"old%d" % i), mq=mq)
    await asyncio.sleep(0.05)
    stamp = int(time.time() * 1000)
    await asyncio.sleep(0.05)
    await producer.send(Message(topic, b"new"), mq=mq)
    consumer = LitePullConsumer(unique("lg"), client_config=config(broker))
    consumer.assign([mq])
    await consumer.start()
    try:
        # The broker answers offsets from its ConsumeQueue, which the store's dispatch thread fills after
        # the send was answered: wait until "new" is in it (bounded).
        deadline = time.monotonic() + 10
        while await consumer.max_offset(mq) < 6 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert await consumer.offset_for_timestamp(mq, stamp) == 5
        assert await consumer.offset_for_timestamp(mq, 0) == 0
        assert await consumer.max_offset(mq) == 6 and await consumer.min_offset(mq) == 0
    finally:
        await consumer.shutdown()


async def test_producer_and_consumer_share_one_instance(broker: BrokerProcess) -> None:
    cfg = config(broker, "shared")
    p = Producer(unique("pg"), client_config=cfg)
    await p.start()
    c = PushConsumer(unique("cg"), client_config=cfg)
    c.subscribe(unique("T"))
    c.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    await c.start()
    try:
        assert p.instance is c.instance
        assert p.client_id == c.client_id == f"{cfg.client_ip}@shared"
    finally:
        instance = p.instance
        await c.shutdown()
        assert not instance.is_shut_down  # the producer still uses it
        await p.shutdown()
        assert instance.is_shut_down


# --- lite pull consumer --------------------------------------------------------------------------------


async def poll_until(consumer: LitePullConsumer, n: int, timeout: float = 20.0) -> list[MessageExt]:
    got: list[MessageExt] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += await consumer.poll(500)
    return got


async def test_lite_pull_assign_seek_and_commit(broker: BrokerProcess, producer: Producer) -> None:
    topic, group = unique("T"), unique("lg")
    mq = (await producer.fetch_publish_message_queues(topic))[1]
    for i in range(30):
        await producer.send(Message(topic, b"%d" % i), mq=mq)
    consumer = LitePullConsumer(
        group,
        client_config=config(broker),
        auto_commit=False,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.assign([mq])
    await consumer.start()
    try:
        got = await poll_until(consumer, 30)
        assert [m.body for m in got] == [b"%d" % i for i in range(30)]
        assert await consumer.poll(200) == []
        await consumer.commit_sync()
        assert await consumer.committed(mq) == 30
        await consumer.seek(mq, 25)
        again = await poll_until(consumer, 5)
        assert [m.queue_offset for m in again] == [25, 26, 27, 28, 29]
        await consumer.commit_sync()
        assert await consumer.committed(mq) == 30
        await consumer.seek_to_begin(mq)
        assert (await consumer.poll(5000))[0].queue_offset == 0
        await consumer.commit_sync({mq: 7})
        assert await consumer.committed(mq) == 7
        with pytest.raises(Exception, match="Seek offset illegal"):
            await consumer.seek(mq, 31)
    finally:
        await consumer.shutdown()


async def test_lite_pull_subscribe_with_auto_commit(broker: BrokerProcess, producer: Producer) -> None:
    topic, group = unique("T"), unique("lg")
    for i in range(20):
        await producer.send(Message(topic, b"%d" % i, tags="X" if i % 2 else "Y"))
    consumer = LitePullConsumer(
        group,
        client_config=config(broker),
        auto_commit_interval_ms=100,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic, "X")
    await consumer.start()
    try:
        got = await poll_until(consumer, 10)
        assert sorted(int(m.body) for m in got) == list(range(1, 20, 2))
        await asyncio.sleep(0.15)
        await consumer.poll(100)  # the auto commit happens inside poll
        # The committed offset of a queue follows the last message poll returned from it; like Java's lite
        # pull, a queue that only had filtered messages commits nothing (the broker answers 0). The commits
        # are oneway requests: ask the broker until they have landed (bounded), polling meanwhile so the
        # auto commit runs again should one have been lost.
        expected = dict.fromkeys((mq.queue_id for mq in consumer.assignment()), 0)
        for m in got:
            expected[m.queue_id] = max(expected[m.queue_id], m.queue_offset + 1)
        deadline = time.monotonic() + 10
        while True:
            committed = {mq.queue_id: await consumer.committed(mq) for mq in consumer.assignment()}
            if committed == expected or time.monotonic() > deadline:
                break
            assert await consumer.poll(100) == []  # everything was consumed already
        assert committed == expected
    finally:
        await consumer.shutdown()


async def test_delay_level_holds_the_message_back(broker: BrokerProcess, producer: Producer) -> None:
    topic = unique("T")
    collector = Collector()
    await producer.send(Message(topic, b"create"))
    consumer = await push_consumer(broker, unique("cg"), topic, collector)
    try:
        await collector.wait_for(1)
        sent = time.time()
        result = await producer.send(Message(topic, b"delayed", delay_time_level=1))  # level 1 = 1 s
        assert result.ok
        got = await collector.wait_for(2, timeout=30)
        elapsed = time.time() - sent
    finally:
        await consumer.shutdown()
    delayed = got[1]
    assert delayed.body == b"delayed" and delayed.topic == topic
    assert elapsed >= 0.9
    assert delayed.get_property(MessageConst.REAL_TOPIC) == topic  # the broker parked it (§7.5)
