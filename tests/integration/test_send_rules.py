"""Run-time changes to who may send to a topic reach the network thread's send fast path at once.

A real broker (in this process, so the test can see how many sends the fast path took) with an
embedded name server, over loopback. A send vets the topic for the fast path; then each kind of change
(broker permission, topic permission, queue counts, deletion) is made and the next sends must get the
answers the Python send processor gives (RocketMQ's), and the fast path must take sends again once
the rules allow it. The same script runs against the asyncio server (no fast path): the answers must
be the same.
"""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
from rmq.broker.config import BrokerConfig
from rmq.broker.controller import BrokerController
from rmq.common.codes import RequestCode, ResponseCode
from rmq.namesrv.server import NameServer
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import RemotingCommand, create_request

NO_PERMISSION = ResponseCode.NO_PERMISSION
TOPIC_NOT_EXIST = ResponseCode.TOPIC_NOT_EXIST


def send_request(topic: str, qid: int) -> RemotingCommand:
    f = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": str(qid), "f": "0", "g": "0", "h": "0"}
    f.update({"i": "", "j": "0", "k": "false", "m": "false"})
    return create_request(RequestCode.SEND_MESSAGE_V2, f, b"body")


def topic_request(topic: str, queues: int, perm: int) -> RemotingCommand:
    f = {"topic": topic, "readQueueNums": str(queues), "writeQueueNums": str(queues), "perm": str(perm)}
    f.update({"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
    return create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, f)


def broker_config_request(text: str) -> RemotingCommand:
    return create_request(RequestCode.UPDATE_BROKER_CONFIG, {}, text.encode())


class Broker:
    def __init__(self, ctl: BrokerController, ns: NameServer, client: RemotingClient) -> None:
        self.ctl, self.ns, self.client = ctl, ns, client
        self.addr = ctl.config.broker_addr
        self.namesrv = f"127.0.0.1:{ns.port}"

    def fast_puts(self) -> int:
        fast = self.ctl.services.fast_send if self.ctl.services else None
        return fast.fast_puts() if fast is not None else 0

    async def ok(self, request: RemotingCommand) -> None:
        r = await self.client.invoke(self.addr, request, 5000)
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)

    async def send(self, topic: str, qid: int = 0) -> tuple[int, str]:
        r = await self.client.invoke(self.addr, send_request(topic, qid), 5000)
        return r.code, r.remark or ""

    async def route_perm(self, topic: str) -> int | None:
        r = await self.client.invoke(
            self.namesrv, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 5000
        )
        if r.code != ResponseCode.SUCCESS:
            return None
        return orjson.loads(r.body)["queueDatas"][0]["perm"]

    async def await_route_perm(self, topic: str, perm: int | None) -> None:
        deadline = time.monotonic() + 10
        while (got := await self.route_perm(topic)) != perm:
            assert time.monotonic() < deadline, f"name server has perm {got} for {topic}, not {perm}"
            await asyncio.sleep(0.02)


@pytest.fixture(params=[True, False], ids=["network-thread", "asyncio"])
async def broker(request, tmp_path):
    ns = NameServer()
    await ns.start("127.0.0.1", 0)
    cfg = BrokerConfig()
    props = {"storePathRootDir": str(tmp_path), "listenPort": "0", "brokerIP1": "127.0.0.1"}
    props.update({"autoCreateTopicEnable": "false", "namesrvAddr": f"127.0.0.1:{ns.port}"})
    cfg.update(props)
    cfg.network_thread = request.param
    ctl = BrokerController(cfg)
    await ctl.start("127.0.0.1")
    client = RemotingClient()
    yield Broker(ctl, ns, client)
    await client.close()
    await ctl.shutdown()
    await ns.stop()


async def vetted(b: Broker, topic: str, qid: int = 0) -> None:
    """Send twice: the first send goes through Python and vets `topic`, the second (on the network
    thread broker) is taken by the fast path."""
    assert await b.send(topic, qid) == (ResponseCode.SUCCESS, "")
    before = b.fast_puts()
    assert await b.send(topic, qid) == (ResponseCode.SUCCESS, "")
    if b.ctl.config.network_thread:
        assert b.fast_puts() == before + 1, "the fast path did not take a send to a vetted topic"


async def test_broker_permission_reaches_the_fast_path(broker):
    b = broker
    await b.ok(topic_request("T", 4, 6))
    await vetted(b, "T")
    await b.ok(broker_config_request("brokerPermission=4"))
    puts = b.fast_puts()
    for qid in (0, 1):
        assert await b.send("T", qid) == (NO_PERMISSION, "the broker[127.0.0.1] sending message is forbidden")
    assert b.fast_puts() == puts
    # The name servers announce the broker's permission as every topic's.
    await b.await_route_perm("T", 4)
    await b.ok(broker_config_request("brokerPermission=6"))
    await vetted(b, "T")
    await b.await_route_perm("T", 6)


async def test_topic_permission_reaches_the_fast_path(broker):
    b = broker
    await b.ok(topic_request("T", 4, 6))
    await vetted(b, "T")
    await b.ok(topic_request("T", 4, 4))  # read-only
    assert await b.send("T") == (NO_PERMISSION, "the topic[T] sending message is forbidden")
    await b.await_route_perm("T", 4)
    await b.ok(topic_request("T", 4, 6))
    await vetted(b, "T")


async def test_queue_counts_reach_the_fast_path(broker):
    b = broker
    await b.ok(topic_request("T", 4, 6))
    await vetted(b, "T", 3)
    await b.ok(topic_request("T", 2, 6))
    code, remark = await b.send("T", 3)
    assert (code, remark) == (
        ResponseCode.SYSTEM_ERROR,
        "request queueId[3] is illegal, T read/write queues 2/2",
    )
    await vetted(b, "T", 1)
    await b.ok(topic_request("T", 8, 6))
    await vetted(b, "T", 7)


async def test_deletion_reaches_the_fast_path(broker):
    b = broker
    await b.ok(topic_request("T", 4, 6))
    await b.ok(topic_request("Other", 4, 6))
    await vetted(b, "T")
    await vetted(b, "Other")
    await b.ok(create_request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "T"}))
    assert await b.send("T") == (TOPIC_NOT_EXIST, "topic[T] not exist, apply first please!")
    # A change to one topic leaves the others on the fast path.
    puts = b.fast_puts()
    assert await b.send("Other") == (ResponseCode.SUCCESS, "")
    if b.ctl.config.network_thread:
        assert b.fast_puts() == puts + 1
    await b.ok(topic_request("T", 4, 6))
    await vetted(b, "T")
