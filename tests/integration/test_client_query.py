"""Message lookup through rmq's client (``view_message``, ``query_message``, ``*_by_unique_key``) against
``python -m rmq.broker`` after a broker restart (SIGTERM or SIGKILL, same store and ports): by offset
message id, by key, by key and time range, by unique key (REMOTING.md §3.4, §5)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from rmq._store import decode_offset_msg_id, offset_msg_id
from rmq.client import Message, MQBrokerError, NoMessageError, Producer, SendResult
from rmq.client import sync as rmq_sync

from tests.brokerproc import BrokerProcess
from tests.integration.semantics_helpers import config, restart, start, unique


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[list[BrokerProcess]]:
    holder = [await start(tmp_path / "store")]
    yield holder
    await asyncio.to_thread(holder[0].stop)


def now_ms() -> int:
    return int(time.time() * 1000)


async def until_indexed(producer: Producer, topic: str, key: str, n: int) -> None:
    """The index is built after the store answers the send (asynchronously, as in RocketMQ)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            if len((await producer.query_message(topic, key)).messages) >= n:
                return
        except NoMessageError:
            pass
        assert time.monotonic() < deadline, f"{key} not indexed"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("kill", [False, True], ids=["stop", "kill"])
async def test_lookups_after_a_broker_restart(broker: list[BrokerProcess], kill: bool) -> None:
    b = broker[0]
    topic, other_topic, group = unique("Q"), unique("Q2"), unique("pg")
    sent: dict[bytes, SendResult] = {}
    async with Producer(group, client_config=config(b, group)) as producer:

        async def send(body: bytes, keys: str, to: str = topic) -> None:
            sent[body] = await producer.send(Message(to, body, keys=keys))

        a_begin = now_ms()
        for i in range(3):
            await send(b"a%d" % i, "order-1")
        await send(b"a-multi", "extra order-1")
        await send(b"a-other-key", "order-2")
        await send(b"a-other-topic", "order-1", other_topic)
        a_end = now_ms() + 1
        await asyncio.sleep(2.1)  # the index keeps store times in whole seconds
        b_begin = now_ms()
        await send(b"b0", "order-1")
        await send(b"b1", "order-1 other")
        await until_indexed(producer, topic, "order-1", 6)
    broker[0] = b = await restart(b, kill=kill)

    group = unique("pg")
    async with Producer(group, client_config=config(b, group)) as producer:
        # By offset message id: the broker address and commitlog offset are in the id.
        for body, result in sent.items():
            msg = await producer.view_message(result.offset_msg_id)
            assert (msg.body, msg.msg_id, msg.topic) == (body, result.msg_id, result.message_queue.topic)
            assert msg.commit_log_offset == decode_offset_msg_id(result.offset_msg_id)[1]
            assert (msg.queue_id, msg.queue_offset) == (result.message_queue.queue_id, result.queue_offset)
            assert msg.offset_msg_id == result.offset_msg_id

        async def bodies(key: str, *args: int) -> list[bytes]:
            return sorted(m.body for m in (await producer.query_message(topic, key, *args)).messages)

        # By key: only this topic, only messages whose KEYS contain the key.
        everything = sorted([b"a0", b"a1", b"a2", b"a-multi", b"b0", b"b1"])
        assert await bodies("order-1") == everything
        assert await bodies("order-2") == [b"a-other-key"]
        assert await bodies("other") == [b"b1"]
        # By key and time range.
        assert await bodies("order-1", 32, a_begin - 1000, b_begin - 1000) == everything[:4]
        assert await bodies("order-1", 32, a_end, 2**63 - 1) == [b"b0", b"b1"]
        assert len(await bodies("order-1", 2)) == 2
        with pytest.raises(NoMessageError, match="no message"):
            await producer.query_message(topic, "order-1", 32, 0, a_begin - 5000)
        with pytest.raises(NoMessageError):
            await producer.query_message(topic, "no-such-key")
        # By unique key (the client message id of the send result).
        for body, result in sent.items():
            found = await producer.query_message_by_unique_key(result.message_queue.topic, result.msg_id)
            assert [m.body for m in found.messages] == [body]
            assert (
                await producer.view_message_by_unique_key(result.message_queue.topic, result.msg_id)
            ).body == body
        by_either = await producer.view_message(sent[b"b0"].msg_id, topic=topic)  # not an offset id
        assert by_either.body == b"b0"
        with pytest.raises(NoMessageError):
            await producer.view_message(sent[b"b0"].msg_id)  # no topic to look the UNIQ_KEY up in
        with pytest.raises(MQBrokerError) as info:
            await producer.view_message(offset_msg_id(b.broker_addr, 1 << 40))  # nothing stored there
        assert info.value.code == 1

    # The blocking facade answers the same.
    def with_sync_producer() -> tuple[bytes, list[bytes]]:
        sync_group = unique("spg")
        with rmq_sync.Producer(sync_group, client_config=config(b, sync_group)) as p:
            viewed = p.view_message(sent[b"a0"].offset_msg_id).body
            return viewed, sorted(m.body for m in p.query_message(topic, "order-2").messages)

    assert await asyncio.to_thread(with_sync_producer) == (b"a0", [b"a-other-key"])
