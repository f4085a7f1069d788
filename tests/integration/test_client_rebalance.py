"""Rebalance of a clustering group while a producer sends continuously (``python -m rmq.broker``).

Three push consumers A, B, C (one client instance each: distinct ``instance_name``) share an 8-queue topic;
a producer sends one message every few milliseconds. B stops, later D joins. Checked:

* every acknowledged message is consumed at least once, and nothing unacknowledged shows up;
* duplicates only around a rebalance: a message delivered twice sits on a queue that changed its owner at
  one of the two membership changes, was sent shortly before that change or before the group settled
  again, and was delivered at most twice; a queue's messages go only to the consumers that owned it;
* after every change the allocation settles to exactly AllocateMessageQueueAveragely (REMOTING.md §7.9),
  computed here from the sorted client ids the broker reports and the sorted queues of the route -- in
  particular the final one of A, C and D.

Only deliveries up to the end of the last phase are judged. Stopping the consumers afterwards is two more
membership changes (A leaves, then C), and the survivors take over queues no phase gave them -- with the
offset the broker has, which may lag: a client commits its offsets periodically only from 10 s after it
started (Java's ``persistConsumerOffset`` has the same initial delay), before that only with each pull's
``commitOffset`` (the offset before the batch just pulled) and oneway when it drops a queue, and a new owner
may read the offset before that oneway commit arrived. Seen against the Apache broker: once A stopped, D
computed its share from [C, D], took queue 4 from C at offset 41 and consumed its last message again, a
second after C had: at-least-once, as RocketMQ promises. Those late deliveries are only checked to be
messages consumed before.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import threading
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass

import pytest
from rmq.client import (
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PushConsumer,
    SendResult,
)
from rmq.client.producer.producer import DEFAULT_RETRY_RESPONSE_CODES
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.brokerproc import BrokerProcess, start_broker

QUEUES = 8
SEND_INTERVAL_S = 0.01
PHASE_S = 1.5  # producing time between two membership changes, once the group settled
SETTLE_TIMEOUT_S = 30.0
PERSIST_INTERVAL_MS = 1000
DUP_WINDOW_BEFORE_S = PERSIST_INTERVAL_MS / 1000 + 2.0
"""How long before a membership change a message may have been sent and still come back: offsets reach
the broker with every pull (the offset before the batch just pulled), every second once a client has run
10 s, and oneway when a queue is dropped, so a new owner that reads a queue's offset before the old
owner's drop-time commit arrived re-reads at most the last batch or about a second's worth of messages."""
DUP_WINDOW_AFTER_S = 2.0
MIN_SENT_PER_PHASE = 40
"""A phase lasts PHASE_S and until this many more messages were acknowledged: a loaded machine sends slower,
and the test needs its 100 messages whatever the rate."""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory.mktemp("rebalance-store"))
    yield proc
    proc.stop()


def averagely(mq_all: Sequence[MessageQueue], cid_all: Sequence[str], cid: str) -> set[MessageQueue]:
    """AllocateMessageQueueAveragely (REMOTING.md §7.9), written from the spec, not from rmq.client."""
    mqs, cids = sorted(mq_all), sorted(cid_all)
    if cid not in cids:
        return set()
    n, k, i = len(mqs), len(cids), cids.index(cid)
    r = n % k
    if n <= k:
        size = 1
    elif r > 0 and i < r:
        size = n // k + 1
    else:
        size = n // k
    start = i * size if r > 0 and i < r else i * size + r
    return {mqs[(start + j) % n] for j in range(min(size, n - start))}


@dataclass(frozen=True)
class Delivery:
    consumer: str
    seq: int
    queue_id: int
    at: float


@dataclass
class Sent:
    seq: int
    queue_id: int
    at: float
    result: SendResult


class Group:
    """The consumers of the group under test, each recording what it consumed."""

    def __init__(self, broker: BrokerProcess, topic: str, group: str, run: str) -> None:
        self.broker, self.topic, self.group, self.run = broker, topic, group, run
        self.consumers: dict[str, PushConsumer] = {}
        self.deliveries: list[Delivery] = []
        self._lock = threading.Lock()

    def _listener(self, name: str) -> Callable[[list[MessageExt], object], ConsumeConcurrentlyStatus]:
        def listener(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
            now = time.monotonic()
            with self._lock:
                for m in msgs:
                    seq = m.get_property("seq")
                    if seq is not None:
                        self.deliveries.append(Delivery(name, int(seq), m.queue_id, now))
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        return listener

    async def start(self, name: str) -> PushConsumer:
        cfg = ClientConfig(
            namesrv_addr=self.broker.namesrv_addr,
            instance_name=f"rb-{name}-{self.run}",  # client ids sort like the names: A < B < C < D
            rebalance_interval_ms=2000,
            persist_consumer_offset_interval_ms=PERSIST_INTERVAL_MS,
        )
        consumer = PushConsumer(
            self.group, client_config=cfg, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        )
        consumer.subscribe(self.topic, "*")
        consumer.register_message_listener(self._listener(name))
        await consumer.start()
        self.consumers[name] = consumer
        return consumer

    async def stop(self, name: str) -> None:
        await self.consumers.pop(name).shutdown()

    def allocation(self) -> dict[str, set[MessageQueue]]:
        return {
            name: {mq for mq in c.allocated_queues() if mq.topic == self.topic}
            for name, c in self.consumers.items()
        }

    async def broker_client_ids(self) -> list[str]:
        req = create_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": self.group})
        resp = await asyncio.to_thread(invoke_sync, self.broker.broker_addr, req, 3000)
        assert resp.code == 0, resp.remark
        return sorted(json.loads(resp.body or b"{}").get("consumerIdList", []))

    def expected(self, mq_all: Sequence[MessageQueue]) -> dict[str, set[MessageQueue]]:
        cids = {name: c.client_id for name, c in self.consumers.items()}
        return {name: averagely(mq_all, list(cids.values()), cid) for name, cid in cids.items()}

    async def settle(self, mq_all: Sequence[MessageQueue]) -> dict[str, set[MessageQueue]]:
        """Wait until the broker lists exactly the running consumers and each holds its averagely share."""
        want_ids = sorted(c.client_id for c in self.consumers.values())
        expected = self.expected(mq_all)
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        ids: list[str] = []
        while time.monotonic() < deadline:
            ids = await self.broker_client_ids()
            if ids == want_ids and self.allocation() == expected:
                return expected
            await asyncio.sleep(0.1)
        pytest.fail(
            f"the group never settled: broker lists {ids}, want {want_ids}; "
            f"allocation {show(self.allocation())}, want {show(expected)}"
        )

    async def shutdown(self) -> None:
        for name in list(self.consumers):
            await self.stop(name)


def show(alloc: dict[str, set[MessageQueue]]) -> dict[str, list[int]]:
    return {name: sorted(mq.queue_id for mq in mqs) for name, mqs in sorted(alloc.items())}


def owners(alloc: dict[str, set[MessageQueue]]) -> dict[int, str]:
    return {mq.queue_id: name for name, mqs in alloc.items() for mq in mqs}


@pytest.fixture
async def producer(broker: BrokerProcess) -> AsyncIterator[Producer]:
    p = Producer(
        f"pg_rebalance_{os.getpid()}",
        namesrv_addr=broker.namesrv_addr,
        instance_name="rb-producer",
        default_topic_queue_nums=QUEUES,  # auto-created from TBW102, which has 8 queues
        # A loaded machine may delay a send past the broker's queue wait (the Apache broker's 200 ms):
        # it refuses it unprocessed (SYSTEM_BUSY, [TIMEOUT_CLEAN_QUEUE]), so sending again duplicates nothing.
        retry_response_codes=DEFAULT_RETRY_RESPONSE_CODES | {int(ResponseCode.SYSTEM_BUSY)},
    )
    await p.start()
    yield p
    await p.shutdown()


async def produce(producer: Producer, topic: str, run: str, sent: list[Sent], stop: asyncio.Event) -> None:
    seq = 0
    while not stop.is_set():
        msg = Message(topic, f"{run}:{seq}".encode(), tags="TagA", keys=f"{run}-{seq}")
        msg.put_user_property("seq", str(seq))
        result = await producer.send(msg)  # a failure (past the retries) fails the test
        assert result.ok, result
        sent.append(Sent(seq, result.message_queue.queue_id, time.monotonic(), result))
        seq += 1
        await asyncio.sleep(SEND_INTERVAL_S)


async def phase(sent: list[Sent], producing: asyncio.Task[None]) -> None:
    """Produce for PHASE_S, and until MIN_SENT_PER_PHASE more messages were acknowledged (bounded)."""
    start = len(sent)
    await asyncio.sleep(PHASE_S)
    deadline = time.monotonic() + 30
    while len(sent) < start + MIN_SENT_PER_PHASE:
        assert not producing.done(), producing
        assert time.monotonic() < deadline, f"only {len(sent) - start} messages sent in a phase"
        await asyncio.sleep(0.05)


async def test_rebalance_stop_one_add_one_while_producing(broker: BrokerProcess, producer: Producer) -> None:
    run = f"{os.getpid()}_{time.monotonic_ns() % 10**9}"
    topic, group = f"Rebalance_{run}", f"CG_REBALANCE_{run}"
    create = Message(topic, b"create")
    await producer.send(create)
    mq_all = sorted(await producer.fetch_publish_message_queues(topic))
    assert len(mq_all) == QUEUES and len({mq.broker_name for mq in mq_all}) == 1

    g = Group(broker, topic, group, run)
    sent: list[Sent] = []
    stop_producing = asyncio.Event()
    producing: asyncio.Task[None] | None = None
    phases: list[dict[str, set[MessageQueue]]] = []
    windows: list[tuple[float, float]] = []  # (membership change, group settled again)
    try:
        for name in ("A", "B", "C"):
            await g.start(name)
        phases.append(await g.settle(mq_all))
        assert show(phases[0]) == {"A": [0, 1, 2], "B": [3, 4, 5], "C": [6, 7]}  # §7.9's example

        producing = asyncio.create_task(produce(producer, topic, run, sent, stop_producing))
        await phase(sent, producing)

        changed_at = time.monotonic()
        await g.stop("B")
        phases.append(await g.settle(mq_all))
        windows.append((changed_at, time.monotonic()))
        assert show(phases[1]) == {"A": [0, 1, 2, 3], "C": [4, 5, 6, 7]}
        await phase(sent, producing)

        changed_at = time.monotonic()
        await g.start("D")
        phases.append(await g.settle(mq_all))
        windows.append((changed_at, time.monotonic()))
        assert show(phases[2]) == {"A": [0, 1, 2], "C": [3, 4, 5], "D": [6, 7]}
        await phase(sent, producing)

        stop_producing.set()
        await asyncio.wait_for(producing, 30)
        acked = {s.seq for s in sent}
        deadline = time.monotonic() + 30
        while {d.seq for d in g.deliveries} < acked and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # late duplicates would show up now

        # The final allocation, once more against the broker's view of the group.
        final_ids = await g.broker_client_ids()
        assert final_ids == sorted(g.consumers[n].client_id for n in ("A", "C", "D"))
        for name, consumer in g.consumers.items():
            want = averagely(mq_all, final_ids, consumer.client_id)
            assert {mq for mq in consumer.allocated_queues() if mq.topic == topic} == want, name
        observed = len(g.deliveries)  # judged below; the stops in ``finally`` are changes of their own
    finally:
        stop_producing.set()
        if producing is not None and not producing.done():
            producing.cancel()
        await g.shutdown()

    deliveries = g.deliveries[:observed]
    consumed = Counter(d.seq for d in deliveries)
    acked = {s.seq for s in sent}
    assert len(sent) >= 100, f"only {len(sent)} messages sent"
    missing = sorted(acked - set(consumed))
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged messages never consumed: {missing[:20]}"
    assert set(consumed) <= acked
    late = g.deliveries[observed:]  # while the group shut down: only messages already consumed
    assert {d.seq for d in late} <= set(consumed), [d for d in late if d.seq not in consumed]

    by_seq = {s.seq: s for s in sent}
    for d in deliveries:
        assert d.queue_id == by_seq[d.seq].queue_id
    # Who may consume a queue: its owners over the phases (A alone consumed queues 0-2 throughout).
    allowed: dict[int, set[str]] = defaultdict(set)
    for alloc in phases:
        for qid, name in owners(alloc).items():
            allowed[qid].add(name)
    for d in deliveries:
        assert d.consumer in allowed[d.queue_id], f"{d} consumed by a consumer that never owned queue"

    # Duplicates only around a rebalance, only from queues whose owner changed there.
    changed = [
        {qid for qid in range(QUEUES) if owners(before).get(qid) != owners(after).get(qid)}
        for before, after in itertools.pairwise(phases)
    ]
    assert changed == [{3, 4, 5}, {3, 6, 7}]
    dups = {seq: n for seq, n in consumed.items() if n > 1}
    for seq, n in dups.items():
        s = by_seq[seq]
        around = [
            i
            for i, (t_change, t_settled) in enumerate(windows)
            if s.queue_id in changed[i]
            and t_change - DUP_WINDOW_BEFORE_S <= s.at <= t_settled + DUP_WINDOW_AFTER_S
        ]
        when = ", ".join(f"{t0 - s.at:+.2f}s..{t1 - s.at:+.2f}s" for t0, t1 in windows)
        assert around, (
            f"seq {seq} (queue {s.queue_id}) was delivered {n} times away from any rebalance "
            f"(changes, relative to its send: {when})"
        )
        assert n <= 1 + len(around), f"seq {seq} delivered {n} times"
    assert len(dups) <= len(sent) // 10, f"{len(dups)} duplicates of {len(sent)} messages"
