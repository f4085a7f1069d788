"""The admin requests mqadmin needs beyond the basics, against a real ``python -m rmq.broker`` on loopback,
with rmq's own client as the online consumer: INVOKE_BROKER_TO_RESET_OFFSET (222),
INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223), GET_CONSUMER_RUNNING_INFO (307), CLONE_GROUP_OFFSET (314),
VIEW_BROKER_STATS_DATA (315) and UPDATE_BROKER_CONFIG's refusals -- their answers and their bad-input
paths (unknown topic or group, no consumer online, a header missing)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from rmq.client import (
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    Producer,
    PushConsumer,
)
from rmq.common import fastjson
from rmq.common.codes import LanguageCode, RequestCode, ResponseCode
from rmq.remoting import create_request
from rmq.remoting.client import RemotingClient

from tests.brokerproc import BrokerProcess, start_broker

COUNT = 8


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory.mktemp("broker"))
    yield proc
    proc.stop()


_n = iter(range(1_000_000))


def unique(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{next(_n)}"


class Seen:
    """How many messages the consumer's listener got; awaitable."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.count = 0
        self.changed = asyncio.Condition()

    def record(self, n: int) -> None:
        self.count += n
        self.loop.create_task(self._notify())

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def wait_for(self, n: int, timeout: float = 30.0) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: self.count >= n), timeout)


@dataclass
class Online:
    """A topic with COUNT messages and a consumer group of rmq's push consumer that consumed them all."""

    topic: str
    group: str
    consumer: PushConsumer
    client: RemotingClient
    addr: str
    seen: Seen

    async def call(self, code: int, fields: dict[str, str], body: bytes | None = None) -> Any:
        return await self.client.invoke(self.addr, create_request(code, fields, body), 10_000)

    async def committed(self, group: str | None = None) -> list[str | None]:
        out = []
        for q in range(4):
            fields = {"consumerGroup": group or self.group, "topic": self.topic, "queueId": str(q)}
            r = await self.call(RequestCode.QUERY_CONSUMER_OFFSET, fields)
            out.append(r.ext_fields.get("offset") if r.code == ResponseCode.SUCCESS else None)
        return out


@pytest.fixture
async def online(broker: BrokerProcess) -> AsyncIterator[Online]:
    topic, group = unique("T"), unique("G")
    cfg = ClientConfig(
        namesrv_addr=broker.namesrv_addr, instance_name=unique("i"), rebalance_interval_ms=1000
    )
    producer = Producer(unique("P"), client_config=cfg)
    await producer.start()
    for i in range(COUNT):
        await producer.send(Message(topic, f"m{i}".encode(), keys=[f"k{i}"]))
    await producer.shutdown()
    seen = Seen(asyncio.get_running_loop())

    def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        seen.loop.call_soon_threadsafe(seen.record, len(msgs))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group,
        client_config=cfg,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    await consumer.start()
    client = RemotingClient()
    on = Online(topic, group, consumer, client, broker.broker_addr, seen)
    try:
        await seen.wait_for(COUNT)
        # The listener returns before the consumer advances its offsets: commit until the broker has them
        # all (bounded), so every test starts from a group with an offset on each queue.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while True:
            await consumer.persist_consumer_offset(oneway=False)
            if sum(int(o or 0) for o in await on.committed()) == COUNT or loop.time() > deadline:
                break
            await asyncio.sleep(0.05)
        yield on
    finally:
        await consumer.shutdown()
        await client.close()


@pytest.mark.parametrize("language", [LanguageCode.JAVA, LanguageCode.CPP])
async def test_reset_offset_online_consumer_moves_back(online: Online, language: int) -> None:
    """The consumers get the table as RESET_CONSUMER_CLIENT_OFFSET, in the C++ body form when a C++ admin
    asked (what Apache's broker does); rmq's client reads both."""
    assert sum(int(o or 0) for o in await online.committed()) == COUNT
    fields = {"topic": online.topic, "group": online.group, "timestamp": "0", "isForce": "true"}
    request = create_request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields, language=language)
    r = await online.client.invoke(online.addr, request, 10_000)
    assert r.code == ResponseCode.SUCCESS, r.remark
    table = fastjson.loads(r.body)["offsetTable"]
    assert {k.as_dict()["queueId"]: v for k, v in table.items()} == {0: 0, 1: 0, 2: 0, 3: 0}
    # The consumer got the reset (220) and consumes everything again.
    await online.seen.wait_for(2 * COUNT)


async def test_reset_offset_refusals(online: Online) -> None:
    base = {"topic": online.topic, "group": online.group, "timestamp": "0", "isForce": "true"}
    cases = [
        (
            dict(base, topic="NoSuchTopic"),
            ResponseCode.SYSTEM_ERROR,
            "no topic in this broker. topic=NoSuchTopic",
        ),
        (
            dict(base, group="NoSuchGroup"),
            ResponseCode.SYSTEM_ERROR,
            "The consumer group <NoSuchGroup> not exist",
        ),
        ({k: v for k, v in base.items() if k != "topic"}, ResponseCode.SYSTEM_ERROR, "topic"),
        (dict(base, timestamp="yesterday"), ResponseCode.SYSTEM_ERROR, "timestamp"),
    ]
    for fields, code, remark in cases:
        r = await online.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
        assert (r.code, remark in (r.remark or "")) == (code, True), (fields, r.remark)


async def test_reset_offset_with_no_consumer_online(online: Online) -> None:
    """A group with offsets but no consumer connected: CONSUMER_NOT_ONLINE (mqadmin then commits itself)."""
    other = unique("Gclone")
    r = await online.call(
        RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": online.group, "destGroup": other, "topic": online.topic}
    )
    assert r.code == ResponseCode.SUCCESS
    assert await online.committed(other) == await online.committed()
    r = await online.call(
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        {"topic": online.topic, "group": other, "timestamp": "-1", "isForce": "false"},
    )
    assert r.code == ResponseCode.CONSUMER_NOT_ONLINE
    assert r.remark.startswith(f"Consumer not online, so can not reset offset, Group: {other}")


async def test_clone_group_offset_skips_unknown_topics(online: Online) -> None:
    other = unique("Gclone")
    r = await online.call(
        RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": online.group, "destGroup": other, "topic": "NoSuchTopic"}
    )
    assert r.code == ResponseCode.SUCCESS  # as Apache: skipped (and logged), not an error
    assert await online.committed(other) == ["0"] * 4  # nothing cloned: the queue start
    r = await online.call(RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": online.group})
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the custom field <destGroup> is null")


async def test_consumer_status_and_running_info(online: Online) -> None:
    client_id = online.consumer.client_id
    r = await online.call(
        RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": online.topic, "group": online.group}
    )
    assert r.code == ResponseCode.SUCCESS, r.remark
    table = fastjson.loads(r.body)["consumerTable"]
    assert list(table) == [client_id]
    assert sorted(k.as_dict()["queueId"] for k in table[client_id]) == [0, 1, 2, 3]
    r = await online.call(
        RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": online.group, "clientId": client_id}
    )
    assert r.code == ResponseCode.SUCCESS, r.remark
    info = fastjson.loads(r.body)
    assert sorted(sub["topic"] for sub in info["subscriptionSet"]) == [f"%RETRY%{online.group}", online.topic]
    assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"


async def test_consumer_status_and_running_info_refusals(online: Online) -> None:
    r = await online.call(
        RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": online.topic, "group": "NoSuchG"}
    )
    assert (r.code, r.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "No Any Consumer online in the consumer group: [NoSuchG]",
    )
    r = await online.call(
        RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": online.group, "clientId": "nobody"}
    )
    assert (r.code, r.remark) == (
        ResponseCode.SYSTEM_ERROR,
        f"The Consumer <{online.group}> <nobody> not online",
    )
    r = await online.call(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": online.group})
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the custom field <clientId> is null")


async def test_view_broker_stats_data(online: Online) -> None:
    async def stats(name: str, key: str) -> Any:
        return await online.call(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})

    r = await stats("TOPIC_PUT_NUMS", online.topic)
    assert r.code == ResponseCode.SUCCESS
    data = fastjson.loads(r.body)
    assert [data[w]["sum"] for w in ("statsMinute", "statsHour", "statsDay")] == [COUNT] * 3
    r = await stats("GROUP_GET_NUMS", f"{online.topic}@{online.group}")
    assert r.code == ResponseCode.SUCCESS
    assert fastjson.loads(r.body)["statsDay"]["sum"] == COUNT
    for name, key in (
        ("NO_SUCH", online.topic),
        ("TOPIC_PUT_NUMS", "NoSuchT"),
        ("GROUP_GET_NUMS", "T@nobody"),
    ):
        r = await stats(name, key)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
    # A deleted group's counts go with it.
    r = await online.call(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": online.group})
    assert r.code == ResponseCode.SUCCESS
    r = await stats("GROUP_GET_NUMS", f"{online.topic}@{online.group}")
    assert r.code == ResponseCode.SYSTEM_ERROR


async def test_update_broker_config_refusals_name_the_key(online: Online) -> None:
    body = b"noSuchKeyAtAll=1\nstorePathRootDir=/tmp/x\nsendMessageThreadPoolNums=4\ndefaultQueryMaxNum=40\n"
    r = await online.call(RequestCode.UPDATE_BROKER_CONFIG, {}, body)
    assert (r.code, r.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "unknown broker properties: noSuchKeyAtAll; not implemented by rmq: sendMessageThreadPoolNums; "
        "these properties cannot be changed at run time: storePathRootDir",
    )
    r = await online.call(RequestCode.GET_BROKER_CONFIG, {})
    assert b"defaultQueryMaxNum=32\n" in r.body  # nothing of a refused request applied


async def test_runtime_info_has_what_cluster_list_reads(online: Online) -> None:
    r = await online.call(RequestCode.GET_BROKER_RUNTIME_INFO, {})
    table = fastjson.loads(r.body)["table"]
    for key in ("putTps", "getTransferedTps", "getTotalTps"):
        assert len([float(x) for x in table[key].split()]) == 3, key
    for key in (
        "sendThreadPoolQueueSize",
        "pullThreadPoolQueueSize",
        "sendThreadPoolQueueHeadWaitTimeMills",
        "pullThreadPoolQueueHeadWaitTimeMills",
        "pageCacheLockTimeMills",
        "msgPutTotalTodayMorning",
        "msgGetTotalTodayMorning",
        "msgPutTotalYesterdayMorning",
        "msgGetTotalYesterdayMorning",
    ):
        assert int(table[key]) >= 0, key
    assert int(table["msgPutTotalTodayNow"]) >= COUNT and int(table["msgGetTotalTodayNow"]) >= COUNT
    assert 0 < float(table["commitLogDiskRatio"]) <= 1
