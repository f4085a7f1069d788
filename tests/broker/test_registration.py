"""Name-server registration after topic changes: no change is lost while a registration is on the wire,
and a consumer's first heartbeat is answered once the name servers know its ``%RETRY%group`` topic (as
the Java broker registers synchronously there), so a client refreshing routes right after it finds it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from rmq.broker.config import BrokerConfig
from rmq.broker.registration import NameServerRegistration
from rmq.broker.topic_config import TopicConfigManager
from rmq.common.codes import NAMESPACE_ORDER_TOPIC_CONFIG, RequestCode, ResponseCode
from rmq.common.route import RegisterBrokerBody, TopicConfig, TopicRouteData
from rmq.remoting import create_request
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import RemotingCommand, create_response

from tests.brokerproc import BrokerProcess, start_broker


class HeldNameServer:
    """Stands in for the RemotingClient: records each registered topic set, holding the first answer."""

    def __init__(self) -> None:
        self.registered: list[set[str]] = []
        self.release = asyncio.Event()
        self.first_arrived = asyncio.Event()

    async def invoke(self, addr: str, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        body = RegisterBrokerBody.decode(bytes(request.body or b""))
        self.registered.append(set(body.topic_config_wrapper.topic_config_table))
        if len(self.registered) == 1:
            self.first_arrived.set()
            await self.release.wait()
        return create_response(request)


async def test_a_change_during_a_registration_is_registered_after_it(tmp_path: Path) -> None:
    config = BrokerConfig()
    config.namesrv_addr = "127.0.0.1:1"
    topics = TopicConfigManager(
        str(tmp_path), cluster_name="c", broker_name="b", auto_create_topic=False, default_queue_nums=4
    )
    ns = HeldNameServer()
    registration = NameServerRegistration(config, topics, ns)  # type: ignore[arg-type]
    topics.on_change = registration.register_soon

    topics.update(TopicConfig("First"))
    await ns.first_arrived.wait()  # its body is taken: "Second" cannot be in it
    topics.update(TopicConfig("Second"))
    topics.update(TopicConfig("Third"))  # coalesced with "Second"
    ns.release.set()
    await registration.settled()

    assert len(ns.registered) == 2
    assert "First" in ns.registered[0] and "Second" not in ns.registered[0]
    # The follow-up registration carries the changes made meanwhile (registrations after a change
    # are incremental, as RocketMQ's).
    assert {"Second", "Third"} <= ns.registered[1]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory.mktemp("regbroker"))
    yield proc
    proc.stop()


def heartbeat(group: str) -> RemotingCommand:
    sub = {"topic": "RegT", "subString": "*", "expressionType": "TAG", "subVersion": 1}
    consumer = {
        "groupName": group,
        "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
        "subscriptionDataSet": [sub],
    }
    body = json.dumps({"clientID": f"127.0.0.1@{group}", "consumerDataSet": [consumer]}).encode()
    return create_request(RequestCode.HEART_BEAT, {}, body)


async def test_first_heartbeats_are_answered_once_the_retry_topics_are_routed(broker: BrokerProcess) -> None:
    groups = [f"RegG{i}" for i in range(6)]
    async with RemotingClient() as client:
        # all at once: the later ones create their topics while the first registration is on the wire
        answers = await asyncio.gather(
            *(client.invoke(broker.broker_addr, heartbeat(g), 10000) for g in groups)
        )
        assert [a.code for a in answers] == [ResponseCode.SUCCESS] * len(groups)
        for g in groups:
            req = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": f"%RETRY%{g}"})
            resp = await client.invoke(broker.namesrv_addr, req, 5000)
            assert resp.code == ResponseCode.SUCCESS, (g, resp.remark)
            route = TopicRouteData.from_json(bytes(resp.body or b""))
            assert [b.master_addr() for b in route.broker_datas] == [broker.broker_addr]


async def test_topic_order_follows_the_name_servers_order_conf(broker: BrokerProcess) -> None:
    """A registration's answer carries the name server's ORDER_TOPIC_CONFIG: a topic named there becomes
    ``order`` at the broker, and stops being when the entry is deleted (RocketMQ's
    updateOrderTopicConfig), each change logged."""
    kv = {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG, "key": "RegOrdered"}

    async def order_of(client: RemotingClient, topic: str) -> bool:
        resp = await client.invoke(broker.broker_addr, create_request(RequestCode.GET_ALL_TOPIC_CONFIG), 5000)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        return bool(json.loads(bytes(resp.body or b"{}"))["topicConfigTable"][topic]["order"])

    async def create(client: RemotingClient, topic: str) -> None:
        fields = {"topic": topic, "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}
        req = create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        assert (await client.invoke(broker.broker_addr, req, 5000)).code == ResponseCode.SUCCESS

    async def wait_order(client: RemotingClient, topic: str, want: bool) -> None:
        for _ in range(100):
            if await order_of(client, topic) == want:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"{topic}: order stayed {not want}")

    async with RemotingClient() as client:
        await create(client, "RegOrdered")
        assert not await order_of(client, "RegOrdered")
        put = create_request(RequestCode.PUT_KV_CONFIG, {**kv, "value": "broker-a:4"})
        assert (await client.invoke(broker.namesrv_addr, put, 5000)).code == ResponseCode.SUCCESS
        await create(client, "RegOrderTrigger1")  # a topic change registers at once; the answer has the conf
        await wait_order(client, "RegOrdered", True)
        assert not await order_of(client, "RegOrderTrigger1")
        delete = create_request(RequestCode.DELETE_KV_CONFIG, kv)
        assert (await client.invoke(broker.namesrv_addr, delete, 5000)).code == ResponseCode.SUCCESS
        await create(client, "RegOrderTrigger2")
        await wait_order(client, "RegOrdered", False)
    assert any("topic RegOrdered: order=True" in line for line in broker.log), broker.log[-20:]
