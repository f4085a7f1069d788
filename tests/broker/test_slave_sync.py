"""What a slave copies from its master besides the CommitLog (RocketMQ's SlaveSynchronize: requests 21, 43,
45, 201), and the pull answers' ``suggestWhichBrokerId`` (RocketMQ's PullMessageProcessor), with real
brokers on loopback (`python -m rmq.broker`, both rmq)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from rmq.broker.consumer_offset import ConsumerOffsetManager
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import create_request

from tests.broker.test_replication import (
    QUEUES,
    TOPIC,
    send_request,
    start_pair_slave,
    wait_caught_up,
)
from tests.brokerproc import start_broker

GROUP = "SyncedGroup"


async def ok(
    client: RemotingClient, addr: str, code: int, fields: dict | None = None, body: bytes | None = None
):
    resp = await client.invoke(addr, create_request(code, fields or {}, body), 5000)
    assert resp.code == ResponseCode.SUCCESS, (code, resp.code, resp.remark)
    return resp


async def table(client: RemotingClient, addr: str, code: int) -> dict:
    return json.loads(bytes((await ok(client, addr, code)).body))


async def commit(client: RemotingClient, addr: str, qid: int, offset: int, group: str = GROUP) -> None:
    fields = {"consumerGroup": group, "topic": TOPIC, "queueId": str(qid), "commitOffset": str(offset)}
    await ok(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET, fields)


async def pull(client: RemotingClient, addr: str, qid: int, offset: int, commit_offset: int = 0):
    """A pull with a subscription, committing `commit_offset` (flags 4 | 1)."""
    fields = {
        "consumerGroup": GROUP,
        "topic": TOPIC,
        "queueId": str(qid),
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": "5",
        "commitOffset": str(commit_offset),
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "0",
    }
    return await client.invoke(addr, create_request(RequestCode.PULL_MESSAGE, fields), 5000)


async def until_equal(
    client: RemotingClient, master: str, slave: str, code: int, timeout: float = 30.0
) -> dict:
    """Poll the slave's answer to `code` until it equals the master's (a cross-process condition)."""
    want = await table(client, master, code)
    deadline = time.monotonic() + timeout
    while (got := await table(client, slave, code)) != want:
        assert time.monotonic() < deadline, f"request {code}: slave has {got}, master {want}"
        await asyncio.sleep(0.05)
    return got


async def test_a_slave_copies_groups_offsets_and_delay_offsets_and_keeps_offsets_where_they_are(tmp_path):
    master = await asyncio.to_thread(start_broker, tmp_path / "m")
    slave = None
    client = RemotingClient()
    try:
        m = master.broker_addr
        create = {"topic": TOPIC, "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES), "perm": "6"}
        await ok(client, m, RequestCode.UPDATE_AND_CREATE_TOPIC, create)
        group = {"groupName": GROUP, "retryMaxTimes": 3, "whichBrokerWhenConsumeSlowly": 1}
        await ok(client, m, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(group).encode())
        for i in range(8):
            resp = await client.invoke(m, send_request(i, i % QUEUES), 5000)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        for qid in range(QUEUES):
            await commit(client, m, qid, 1 + qid % 2)
        # A delayed message (level 1, 1 s) moves the master's delay offset of level 1 once delivered.
        delayed = send_request(100, 0)
        delayed.ext_fields["i"] += "\x02DELAY\x011"
        assert (await client.invoke(m, delayed, 5000)).code == ResponseCode.SUCCESS
        deadline = time.monotonic() + 30
        while (await table(client, m, RequestCode.GET_ALL_DELAY_OFFSET))["offsetTable"].get("1") != 1:
            assert time.monotonic() < deadline, "the delayed message was not delivered"
            await asyncio.sleep(0.05)

        slave = await asyncio.to_thread(start_pair_slave, tmp_path, master)
        s = slave.broker_addr
        offsets = await until_equal(client, m, s, RequestCode.GET_ALL_CONSUMER_OFFSET)
        assert offsets["offsetTable"][f"{TOPIC}@{GROUP}"] == {"0": 1, "1": 2, "2": 1, "3": 2}
        delay = await until_equal(client, m, s, RequestCode.GET_ALL_DELAY_OFFSET)
        assert delay["offsetTable"]["1"] == 1
        groups = await until_equal(client, m, s, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        assert groups["subscriptionGroupTable"][GROUP]["retryMaxTimes"] == 3
        assert (tmp_path / "s" / "config" / "delayOffset.json").exists()  # persisted as the master's

        # Offsets are committed where the consumer sends them: a commit to the slave (its master away)
        # stays on the slave until the next copy; a pull's piggybacked commit is not taken by a slave.
        await wait_caught_up(client, master, slave)
        await commit(client, s, 0, 5)
        resp = await pull(client, s, 1, 0, commit_offset=7)
        assert resp.code == ResponseCode.SUCCESS
        offsets = (await table(client, s, RequestCode.GET_ALL_CONSUMER_OFFSET))["offsetTable"]
        assert offsets[f"{TOPIC}@{GROUP}"] == {"0": 5, "1": 2, "2": 1, "3": 2}
        # The slave's pull answers suggest the master (slaveReadEnable is off), and a slave does not move
        # a consumer's offset it cannot serve (it may lag): retry, at the group's broker.
        assert resp.ext_fields["suggestWhichBrokerId"] == "0"
        resp = await pull(client, s, 1, 1000)
        assert (resp.code, resp.ext_fields["suggestWhichBrokerId"]) == (
            ResponseCode.PULL_RETRY_IMMEDIATELY,
            "0",
        )
        resp = await pull(client, m, 1, 1000)
        assert resp.code == ResponseCode.PULL_OFFSET_MOVED
    finally:
        await client.close()
        if slave is not None:
            slave.stop()
        master.stop()


def test_a_masters_offsets_replace_the_slaves_and_the_slaves_own_stay(tmp_path: Path) -> None:
    """The copy's rule (RocketMQ's putAll): each topic@group the master has replaces the slave's."""
    offsets = ConsumerOffsetManager(str(tmp_path))
    offsets.commit("G", "T", 0, 9)  # committed on the slave while the master was away
    offsets.commit("Other", "T", 0, 4)  # a group only the slave has seen
    taken = offsets.take_all({"T@G": {"0": 7, "1": 3}})
    assert taken == 1
    assert offsets.offsets_of("G", "T") == {0: 7, 1: 3}
    assert offsets.offsets_of("Other", "T") == {0: 4}


async def test_pull_answers_suggest_the_slave_when_the_data_is_no_longer_in_memory(tmp_path):
    """accessMessageInMemoryMaxRatio is a percentage of the machine's RAM; 0 (a value Java's int takes)
    makes every record but none behind the CommitLog's end "not in memory"."""
    master = await asyncio.to_thread(start_broker, tmp_path / "m")
    client = RemotingClient()
    try:
        m = master.broker_addr
        create = {"topic": TOPIC, "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}
        await ok(client, m, RequestCode.UPDATE_AND_CREATE_TOPIC, create)
        group = {"groupName": GROUP, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 2}
        await ok(client, m, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(group).encode())
        for i in range(4):
            assert (await client.invoke(m, send_request(i, 0), 5000)).code == ResponseCode.SUCCESS

        async def dispatched() -> None:  # the ConsumeQueue holds the 4 messages (the dispatch is async)
            q = {"topic": TOPIC, "queueId": "0"}
            deadline = time.monotonic() + 30
            while (await ok(client, m, RequestCode.GET_MAX_OFFSET, q)).ext_fields["offset"] != "4":
                assert time.monotonic() < deadline, "the messages never reached the ConsumeQueue"
                await asyncio.sleep(0.02)

        await dispatched()

        async def suggested(props: str) -> str:
            await ok(client, m, RequestCode.UPDATE_BROKER_CONFIG, body=props.encode())
            resp = await pull(client, m, 0, 0)
            assert resp.code == ResponseCode.SUCCESS
            return resp.ext_fields["suggestWhichBrokerId"]

        assert await suggested("slaveReadEnable=false\naccessMessageInMemoryMaxRatio=0") == "0"
        assert await suggested("slaveReadEnable=true\naccessMessageInMemoryMaxRatio=0") == "2"
        assert await suggested("slaveReadEnable=true\naccessMessageInMemoryMaxRatio=40") == "0"
        resp = await client.invoke(
            m,
            create_request(RequestCode.UPDATE_BROKER_CONFIG, {}, b"accessMessageInMemoryMaxRatio=101"),
            5000,
        )
        assert resp.code == ResponseCode.SYSTEM_ERROR and "percentage" in resp.remark
    finally:
        await client.close()
        master.stop()


async def test_a_consumer_follows_the_suggestion_to_the_slave(tmp_path):
    """rmq's push consumer reads from the slave the master suggests (ratio 0: nothing is "in memory")."""
    from rmq.client import (
        ClientConfig,
        ConsumeConcurrentlyStatus,
        ConsumeFromWhere,
        Message,
        Producer,
        PushConsumer,
    )

    master = await asyncio.to_thread(
        start_broker, tmp_path / "m", "slaveReadEnable=true", "accessMessageInMemoryMaxRatio=0"
    )
    slave = None
    client = RemotingClient()
    received: set[str] = set()
    consumer = producer = None
    try:
        m = master.broker_addr
        create = {"topic": TOPIC, "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES), "perm": "6"}
        await ok(client, m, RequestCode.UPDATE_AND_CREATE_TOPIC, create)
        slave = await asyncio.to_thread(start_pair_slave, tmp_path, master)
        cfg = ClientConfig(master.namesrv_addr, instance_name="suggest", poll_name_server_interval_ms=500)
        producer = Producer("pg_suggest", client_config=cfg)
        await producer.start()
        keys: set[str] = set()

        async def send(n: int) -> None:
            for i in range(len(keys), len(keys) + n):
                keys.add(f"s-{i}")
                assert (await producer.send(Message(TOPIC, b"x", keys=f"s-{i}"))).ok

        async def consumed() -> None:
            deadline = time.monotonic() + 30
            while not keys <= received:
                assert time.monotonic() < deadline, f"{len(keys - received)} messages not consumed"
                await asyncio.sleep(0.05)

        await send(40)

        def listener(msgs, ctx):  # type: ignore[no-untyped-def]
            received.update(msg.keys for msg in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            GROUP, client_config=cfg, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        )
        consumer.subscribe(TOPIC, "*")
        consumer.register_message_listener(listener)
        await consumer.start()
        await consumed()  # the first pulls, from the master, answer "read from the slave" (brokerId 1)
        await send(40)
        await consumed()
        served = await table(client, slave.broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        assert int(served["table"]["msgGetTotalTodayNow"]) > 0  # the slave served the later ones
    finally:
        if consumer is not None:
            await consumer.shutdown()
        if producer is not None:
            await producer.shutdown()
        await client.close()
        if slave is not None:
            slave.stop()
        master.stop()
