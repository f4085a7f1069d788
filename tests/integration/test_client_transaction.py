"""Transactional messages against ``python -m rmq.broker``: commit, rollback, and a broker check."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import pytest
from rmq.client import (
    ClientConfig,
    LitePullConsumer,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    TransactionProducer,
)

from tests.brokerproc import BrokerProcess, start_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(
        tmp_path_factory.mktemp("txbroker"), "transactionCheckInterval=1000", "transactionTimeOut=1000"
    )
    yield proc
    proc.stop()


class Listener:
    def __init__(self) -> None:
        self.checks: list[MessageExt] = []

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return arg  # type: ignore[no-any-return]

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checks.append(msg)  # a plain function: runs in a worker thread
        return LocalTransactionState.COMMIT_MESSAGE


async def consume_all(broker: BrokerProcess, topic: str, expect: int, timeout: float = 20.0) -> list[bytes]:
    consumer = LitePullConsumer(f"tx_reader_{os.getpid()}_{topic}", namesrv_addr=broker.namesrv_addr)
    consumer.subscribe(topic)
    await consumer.start()
    got: list[bytes] = []
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline and len(got) < expect:
            got += [m.body for m in await consumer.poll(500)]
        got += [m.body for m in await consumer.poll(300)]
    finally:
        await consumer.shutdown()
    return sorted(got)


async def test_commit_rollback_and_check(broker: BrokerProcess) -> None:
    topic = f"TX_{os.getpid()}"
    async with Producer(f"warm_{os.getpid()}", namesrv_addr=broker.namesrv_addr) as warm:
        await warm.send(Message(topic, b"plain"))
    listener = Listener()
    producer = TransactionProducer(
        f"txg_{os.getpid()}", listener, client_config=ClientConfig(namesrv_addr=broker.namesrv_addr)
    )
    await producer.start()
    try:
        committed = await producer.send_message_in_transaction(
            Message(topic, b"commit"), LocalTransactionState.COMMIT_MESSAGE
        )
        await producer.send_message_in_transaction(
            Message(topic, b"rollback"), LocalTransactionState.ROLLBACK_MESSAGE
        )
        unknown = await producer.send_message_in_transaction(
            Message(topic, b"unknown"), LocalTransactionState.UNKNOW
        )
        assert committed.send_result.ok and unknown.local_transaction_state is LocalTransactionState.UNKNOW
        # The broker asks about the UNKNOW one; the listener commits it.
        for _ in range(300):
            if listener.checks:
                break
            await asyncio.sleep(0.05)
        assert [m.body for m in listener.checks][:1] == [b"unknown"]
        assert listener.checks[0].transaction_id == unknown.send_result.msg_id
        assert await consume_all(broker, topic, 3) == [b"commit", b"plain", b"unknown"]
    finally:
        await producer.shutdown()
