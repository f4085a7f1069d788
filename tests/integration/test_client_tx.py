"""Transactional messages with rmq's TransactionProducer against ``python -m rmq.broker`` (REMOTING.md §3.3,
§7.7): commit, rollback, unknown-then-checked, a lost second phase, a broker killed between the phases.

The listener keeps a "local transaction table" (plan per message body) and answers broker checks from
it, as an application would. Rolled-back messages must never be delivered; committed ones are stored
in the real topic exactly once.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from rmq.client import (
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    SendResult,
    TransactionProducer,
    TransactionSendResult,
)
from rmq.client.uniq_id import create_uniq_id
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

CHECK_MAX = 3
PROPS = (
    "transactionTimeOut=1000",
    "transactionCheckInterval=400",
    f"transactionCheckMax={CHECK_MAX}",
)

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[list[BrokerProcess]]:
    """A one-element list, so a test can put the restarted broker in it for the teardown."""
    holder = [await start(tmp_path / "store", *PROPS)]
    yield holder
    await asyncio.to_thread(holder[0].stop)


class Listener:
    """``plans[body]`` = (state returned by the local transaction, answers to successive checks).

    The local transaction of a body in ``hold`` waits for ``release`` before answering (the broker is
    killed meanwhile)."""

    def __init__(self, plans: dict[bytes, tuple[Any, list[LocalTransactionState]]]) -> None:
        self.plans = plans
        self.checks: list[bytes] = []
        self.lock = threading.Lock()
        self.hold: set[bytes] = set()
        self.held = asyncio.Event()
        self.release = asyncio.Event()
        self.waiting = 0

    async def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        first, _ = self.plans[msg.body]
        if msg.body in self.hold:
            self.waiting += 1
            if self.waiting == len(self.hold):
                self.held.set()
            await asyncio.wait_for(self.release.wait(), 30)
        if isinstance(first, Exception):
            raise first
        return first  # type: ignore[no-any-return]

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:  # a worker thread
        with self.lock:
            self.checks.append(msg.body)
            answers = self.plans[msg.body][1]
            n = self.checks.count(msg.body)
        return answers[min(n, len(answers)) - 1]


class LossyProducer(TransactionProducer):
    """Loses the second phase (END_TRANSACTION after the local transaction) of the bodies in ``lose``."""

    def __init__(self, group: str, listener: Listener, broker: BrokerProcess, lose: set[bytes]) -> None:
        super().__init__(group, listener, client_config=config(broker, group))
        self.lose = lose
        self.lost: list[bytes] = []
        self.bodies: dict[str, bytes] = {}

    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        uniq = create_uniq_id()
        msg.put_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uniq)  # kept by the send
        self.bodies[uniq] = msg.body
        return await super().send_message_in_transaction(msg, arg)

    async def end_transaction(
        self, result: SendResult, state: LocalTransactionState, local_exc: BaseException | None = None
    ) -> None:
        body = self.bodies.get(result.msg_id)
        if body in self.lose:
            self.lost.append(body)
            return
        await super().end_transaction(result, state, local_exc)


async def warm_topic(broker: BrokerProcess, topic: str) -> None:
    group = unique("warm")
    async with Producer(group, client_config=config(broker, group)) as producer:
        await producer.send(Message(topic, b"warm"))


async def test_commit_rollback_unknown_and_lost_second_phase(broker: list[BrokerProcess]) -> None:
    b = broker[0]
    topic = unique("TX")
    plans: dict[bytes, tuple[Any, list[LocalTransactionState]]] = {
        b"commit": (COMMIT, [COMMIT]),
        b"rollback": (ROLLBACK, [ROLLBACK]),
        b"unknown-then-commit": (UNKNOW, [UNKNOW, COMMIT]),
        b"unknown-then-rollback": (UNKNOW, [UNKNOW, ROLLBACK]),
        b"lost-commit": (COMMIT, [COMMIT]),
        b"lost-rollback": (ROLLBACK, [ROLLBACK]),
        b"local-exception": (RuntimeError("local failure"), [COMMIT]),
        b"unknown-forever": (UNKNOW, [UNKNOW]),
    }
    committed = {b"commit", b"unknown-then-commit", b"lost-commit", b"local-exception"}
    await warm_topic(b, topic)
    collector = Collector()
    consumer = await push_consumer(b, unique("cg"), topic, collector)
    listener = Listener(plans)
    producer = LossyProducer(unique("txg"), listener, b, {b"lost-commit", b"lost-rollback"})
    await producer.start()
    try:
        states = {}
        for body in plans:
            result = await producer.send_message_in_transaction(Message(topic, body))
            assert result.send_result.ok
            states[body] = result.local_transaction_state
        assert states[b"local-exception"] is UNKNOW and states[b"commit"] is COMMIT
        assert sorted(producer.lost) == [b"lost-commit", b"lost-rollback"]
        await collector.wait_until(lambda msgs: committed <= {m.body for m in msgs}, 20)
        # Let the broker give up on the undecided one (CHECK_MAX checks), and anything late arrive.
        await collector.wait_until(lambda _: listener.checks.count(b"unknown-forever") >= CHECK_MAX, 15)
        await asyncio.sleep(1.5)
    finally:
        await producer.shutdown()
        await consumer.shutdown()
    delivered = Counter(m.body for m in collector.msgs)
    assert delivered == Counter(committed | {b"warm"}), delivered  # each committed once, no rollback
    checked = set(listener.checks)
    assert checked >= {
        b"unknown-then-commit",
        b"unknown-then-rollback",
        b"lost-commit",
        b"lost-rollback",
        b"local-exception",
        b"unknown-forever",
    }
    assert not checked & {b"commit", b"rollback"}, "decided transactions are not checked"
    assert listener.checks.count(b"unknown-then-commit") == 2
    assert listener.checks.count(b"unknown-forever") == CHECK_MAX, "then discarded"
    for m in collector.msgs:
        if m.body != b"warm":
            assert m.topic == topic and m.transaction_id == m.msg_id, m
            assert m.sys_flag & 0xC == 0x8, "stored as TRANSACTION_COMMIT_TYPE"
    assert sorted(await read_all(b, topic, len(committed) + 1)) == sorted(committed | {b"warm"})


async def test_broker_killed_between_the_phases(broker: list[BrokerProcess]) -> None:
    b = broker[0]
    topic = unique("TXK")
    plans: dict[bytes, tuple[Any, list[LocalTransactionState]]] = {
        b"before-kill": (COMMIT, [COMMIT]),
        b"killed-commit": (COMMIT, [COMMIT]),
        b"killed-rollback": (ROLLBACK, [ROLLBACK]),
        b"killed-unknown": (UNKNOW, [COMMIT]),
    }
    await warm_topic(b, topic)
    listener = Listener(plans)
    group = unique("txg")
    producer = TransactionProducer(group, listener, client_config=config(b, group))
    await producer.start()
    try:
        first = await producer.send_message_in_transaction(Message(topic, b"before-kill"))
        assert first.local_transaction_state is COMMIT
        # The commit is applied (and its op message written) before the kill.
        uniq = first.send_result.msg_id
        for _ in range(100):
            try:
                await producer.view_message_by_unique_key(topic, uniq)
                break
            except Exception:
                await asyncio.sleep(0.1)
        # Half messages stored, local transactions running: the broker dies before END_TRANSACTION.
        listener.hold = {b"killed-commit", b"killed-rollback", b"killed-unknown"}
        sends = [
            asyncio.ensure_future(producer.send_message_in_transaction(Message(topic, body)))
            for body in sorted(listener.hold)
        ]
        await asyncio.wait_for(listener.held.wait(), 20)
        await asyncio.to_thread(b.kill)
        listener.release.set()
        results = await asyncio.wait_for(asyncio.gather(*sends), 20)  # END_TRANSACTION is lost
        assert [r.local_transaction_state for r in results] == [COMMIT, ROLLBACK, UNKNOW]
        broker[0] = b = await restart(b, *PROPS)
        # After the restart the broker checks the three undecided halves with the producer.
        deadline = asyncio.get_running_loop().time() + 30
        while not set(listener.hold) <= set(listener.checks):
            assert asyncio.get_running_loop().time() < deadline, listener.checks
            await asyncio.sleep(0.1)
        # Both commits are END_TRANSACTION oneway answers to the checks: wait for all four messages (a quiet
        # spell after the third must not end the read before the last commit landed).
        stored = await read_all(b, topic, 4, quiet_s=1.5)
    finally:
        await producer.shutdown()
    assert stored == sorted([b"before-kill", b"killed-commit", b"killed-unknown", b"warm"])
    assert b"before-kill" not in listener.checks, "a committed transaction is not checked again"
