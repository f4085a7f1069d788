"""Mixed broker groups: an Apache RocketMQ 4.9.7 slave replicating from an rmq master, and an rmq slave
from an Apache master, over RocketMQ 4.x's HA protocol. Each slave learns its master's HA address from the
name server's answer to its registration (the master's name server: rmq's embedded one, Apache's), and
ends up with a CommitLog byte-identical to its master's. The rmq slave also copies the Apache master's
topics, subscription groups, consumer offsets and delay offsets (Apache's bodies, fastjson's integer map
keys included) and serves pulls of the replicated messages."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import create_request

from tests.broker.test_replication import QUEUES, TOPIC, log_bytes, pull_queue, send_request
from tests.brokerproc import start_broker
from tests.peers.apache import ApachePeer, start_apache, start_apache_broker

FILE_SIZE = 64 * 1024 * 1024  # the peer's mappedFileSizeCommitLog; master and slave must agree
MESSAGES = 600


async def send_all(client: RemotingClient, addr: str) -> None:
    for i in range(MESSAGES):
        resp = await client.invoke(addr, send_request(i, i % QUEUES), 5000)
        assert resp.code == ResponseCode.SUCCESS, resp.remark


async def commitlog_end(client: RemotingClient, addr: str) -> int:
    """GET_BROKER_RUNTIME_INFO's commitLogMaxOffset (-1 while an Apache broker's empty store cannot answer
    it: its runtime info fails with NoSuchElementException until it has a CommitLog file)."""
    resp = await client.invoke(addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 5000)
    if resp.code != ResponseCode.SUCCESS:
        return -1
    return int(json.loads(bytes(resp.body))["table"]["commitLogMaxOffset"])


async def queue_dispatched(client: RemotingClient, addr: str, timeout: float = 30.0) -> None:
    """Poll until queue 0 of TOPIC holds its share of the messages (a slave's dispatch runs behind its
    CommitLog)."""
    q = {"topic": TOPIC, "queueId": "0"}
    deadline = time.monotonic() + timeout
    while True:
        resp = await client.invoke(addr, create_request(RequestCode.GET_MAX_OFFSET, q), 5000)
        if resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == str(MESSAGES // QUEUES):
            return
        assert time.monotonic() < deadline, f"queue 0 at {addr} ends at {resp.ext_fields}"
        await asyncio.sleep(0.05)


async def caught_up(client: RemotingClient, master: str, slave: str, timeout: float = 60.0) -> int:
    """Poll the slave's CommitLog end until it is the master's (a cross-process condition)."""
    deadline = time.monotonic() + timeout
    # An Apache master's runtime info can fail for a moment too (-1): ask until it answers.
    while (target := await commitlog_end(client, master)) <= 0:
        assert time.monotonic() < deadline, "the master never answered its CommitLog end"
        await asyncio.sleep(0.05)
    while (got := await commitlog_end(client, slave)) < target:
        assert time.monotonic() < deadline, f"slave at {got} of {target}"
        await asyncio.sleep(0.05)
    assert got == target
    return target


async def test_an_apache_slave_replicates_an_rmq_master(tmp_path: Path) -> None:
    master = await asyncio.to_thread(start_broker, tmp_path / "m", f"mappedFileSizeCommitLog={FILE_SIZE}")
    client = RemotingClient()
    log: list[str] = []
    slave = None
    try:
        await send_all(client, master.broker_addr)
        home = tmp_path / "apache-slave"
        slave, slave_addr = await asyncio.to_thread(
            start_apache_broker, home, master.namesrv_addr, "brokerRole=SLAVE", "brokerId=1", log=log
        )
        end = await caught_up(client, master.broker_addr, slave_addr)
        assert end > MESSAGES * 1000
        assert log_bytes(home / "store", 0, end) == log_bytes(tmp_path / "m", 0, end)
        # ...and the Apache slave serves what it replicated (its ConsumeQueues were built from it).
        await queue_dispatched(client, slave_addr)
    finally:
        await client.close()
        if slave is not None:
            ApachePeer(slave, slave, "", "", tmp_path, log).stop()
        master.stop()


async def test_an_rmq_slave_replicates_an_apache_master_and_copies_its_configs(tmp_path: Path) -> None:
    peer = await asyncio.to_thread(start_apache, tmp_path / "apache")
    client = RemotingClient()
    slave = None
    try:
        await send_all(client, peer.broker_addr)
        fields = {"consumerGroup": "MixedGroup", "topic": TOPIC, "queueId": "1", "commitOffset": "42"}
        resp = await client.invoke(
            peer.broker_addr, create_request(RequestCode.UPDATE_CONSUMER_OFFSET, fields), 5000
        )
        assert resp.code == ResponseCode.SUCCESS
        slave = await asyncio.to_thread(
            start_broker,
            tmp_path / "s",
            "brokerRole=SLAVE",
            "brokerId=1",
            f"mappedFileSizeCommitLog={FILE_SIZE}",
            namesrv=peer.namesrv_addr,
        )
        end = await caught_up(client, peer.broker_addr, slave.broker_addr)
        assert log_bytes(tmp_path / "s", 0, end) == log_bytes(tmp_path / "apache" / "store", 0, end)

        async def answer(addr: str, code: int) -> dict:
            resp = await client.invoke(addr, create_request(code, {}), 5000)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            return fastjson.loads(bytes(resp.body))

        deadline = time.monotonic() + 30
        while "MixedGroup" not in json.dumps(
            (await answer(slave.broker_addr, RequestCode.GET_ALL_CONSUMER_OFFSET))["offsetTable"]
        ):
            assert time.monotonic() < deadline, "the slave did not copy the Apache master's offsets"
            await asyncio.sleep(0.1)
        offsets = (await answer(slave.broker_addr, RequestCode.GET_ALL_CONSUMER_OFFSET))["offsetTable"]
        assert offsets[f"{TOPIC}@MixedGroup"] == {"1": 42}
        apache_groups = await answer(peer.broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        # One sync round copies offsets, then delay offsets and groups: the groups may land a moment later.
        while True:
            groups = await answer(slave.broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            if set(groups["subscriptionGroupTable"]) == set(apache_groups["subscriptionGroupTable"]):
                break
            assert time.monotonic() < deadline, "the slave did not copy the Apache master's groups"
            await asyncio.sleep(0.1)
        delay = await answer(slave.broker_addr, RequestCode.GET_ALL_DELAY_OFFSET)
        apache_delay = await answer(peer.broker_addr, RequestCode.GET_ALL_DELAY_OFFSET)
        assert {int(k): v for k, v in delay["offsetTable"].items()} == {
            int(k): v for k, v in apache_delay["offsetTable"].items()
        }
        # The rmq slave serves the replicated messages (its dispatch built the ConsumeQueues).
        await queue_dispatched(client, slave.broker_addr)
        pulled = await pull_queue(client, slave.broker_addr, 0)
        assert len(pulled) == MESSAGES // QUEUES
    finally:
        await client.close()
        if slave is not None:
            slave.stop()
        peer.stop()
