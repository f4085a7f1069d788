"""Failover of a two-group cluster as RocketMQ 4.x clients see it, with rmq's Python client.

Set-up: a standalone name server (``python -m rmq.namesrv``); broker groups ``broker-a`` and ``broker-b``,
each a SYNC_MASTER (fixed ports, so it can come back where it was) and a SLAVE (brokerId 1), all rmq;
a topic with 4 queues on each group, created on the masters before the slaves start (a slave copies its
master's topics). One producer sends one message after the other (sync, default 2 retries); one push
consumer (clustering) records every message it receives.

1. Both groups take messages and the consumer receives some; then the consumer is suspended, so broker-a
   holds messages nobody has consumed yet, and broker-a's master gets SIGKILL while the producer sends.
2. The producer keeps sending: every send succeeds (SEND_OK; an attempt on the dead master fails over
   within the send) and every send made once the route no longer lists broker-a's master lands on
   broker-b. The consumer resumes and receives every acknowledged message, broker-a's from its slave
   (the master is dead), committing its offsets to the slave meanwhile.
3. broker-a's master restarts on its store: its slave reconnects and catches up, the producer sends to
   both groups again, the consumer receives those too, and the master takes the consumer's offsets
   (its committed offsets reach the end of each of its queues) and serves its pulls again; the slave's
   copy of the offsets becomes the master's at its next copy (every 10 s).

Nothing acknowledged is lost; duplicates are only redeliveries (each message is received at least once;
the count is printed).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from rmq.client import (
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SendStatus,
)
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import create_request

from tests.broker.test_replication import free_port, runtime, send_request, wait_caught_up
from tests.brokerproc import BrokerProcess, start_broker
from tests.integration.test_client_failover import NameServerProcess, start_namesrv

CLUSTER = "HACluster"
TOPIC = "FailoverTopic"
GROUP = "cg_failover"
QUEUES = 4
TIMEOUT_S = 30.0


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[NameServerProcess]:
    ns = start_namesrv(tmp_path)
    yield ns
    ns.stop()


class Group:
    """One broker group: a SYNC_MASTER on fixed ports and its slave."""

    def __init__(self, tmp: Path, name: str, namesrv: str) -> None:
        self.tmp, self.name, self.namesrv = tmp, name, namesrv
        self.port, self.ha_port = free_port(), free_port()
        self.master = self.start_master()
        self.slave: BrokerProcess | None = None

    def _props(self) -> list[str]:
        return [f"brokerName={self.name}", f"brokerClusterName={CLUSTER}", "registerNameServerPeriod=10000"]

    def start_master(self) -> BrokerProcess:
        return start_broker(
            self.tmp / f"{self.name}-m",
            *self._props(),
            "brokerRole=SYNC_MASTER",
            f"listenPort={self.port}",
            f"haListenPort={self.ha_port}",
            namesrv=self.namesrv,
        )

    def start_slave(self) -> None:
        self.slave = start_broker(
            self.tmp / f"{self.name}-s",
            *self._props(),
            "brokerRole=SLAVE",
            "brokerId=1",
            namesrv=self.namesrv,
        )

    def stop(self) -> None:
        for b in (self.slave, self.master):
            if b is not None:
                b.stop()


async def until(what: str, check, timeout: float = TIMEOUT_S) -> None:  # type: ignore[no-untyped-def]
    """Poll a cross-process condition."""
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def slave_connected(client: RemotingClient, group: Group) -> None:
    """Wait until the SYNC_MASTER answers a send SEND_OK (SLAVE_NOT_AVAILABLE until its slave is there)."""

    async def probe() -> bool:
        resp = await client.invoke(group.master.broker_addr, send_request(0, 0, 100, topic=TOPIC), 5000)
        return resp.code == ResponseCode.SUCCESS

    await until(f"{group.name}'s slave", probe)


async def committed(client: RemotingClient, addr: str, group: str = GROUP) -> dict[int, int]:
    """The offsets `group` committed on TOPIC at the broker `addr`."""
    resp = await client.invoke(addr, create_request(RequestCode.GET_ALL_CONSUMER_OFFSET, {}), 5000)
    assert resp.code == ResponseCode.SUCCESS
    table = json.loads(bytes(resp.body))["offsetTable"].get(f"{TOPIC}@{group}", {})
    return {int(q): o for q, o in table.items()}


async def queue_ends(client: RemotingClient, addr: str) -> dict[int, int]:
    out = {}
    for qid in range(QUEUES):
        req = create_request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": str(qid)})
        resp = await client.invoke(addr, req, 5000)
        out[qid] = int(resp.ext_fields["offset"])
    return out


class Run:
    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.acked: dict[str, str] = {}  # key -> broker name
        self.failed: list[str] = []
        self.received: Counter[str] = Counter()
        self.received_from: dict[str, str] = {}
        self.lock = threading.Lock()
        self.seq = 0

    async def send(self, n: int) -> list[str]:
        """Send `n` messages one after the other; returns the brokers that took them."""
        brokers = []
        for _ in range(n):
            key = f"fo-{self.seq}"
            self.seq += 1
            try:
                result = await self.producer.send(Message(TOPIC, key.encode(), keys=key))
            except Exception as e:
                self.failed.append(f"{key}: {type(e).__name__}: {e}")
                continue
            if result.send_status is not SendStatus.SEND_OK:
                self.failed.append(f"{key}: {result.send_status}")
                continue
            self.acked[key] = result.message_queue.broker_name
            brokers.append(result.message_queue.broker_name)
        return brokers

    def listener(self, msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        with self.lock:
            for m in msgs:
                if m.keys and m.keys.startswith("fo-"):
                    self.received[m.keys] += 1
                    self.received_from[m.keys] = m.broker_name or ""
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def missing(self) -> set[str]:
        with self.lock:
            return set(self.acked) - set(self.received)


async def test_kill_a_master_consumers_drain_its_slave_and_the_group_heals(tmp_path, namesrv):
    client = RemotingClient()
    groups = [
        await asyncio.to_thread(Group, tmp_path, name, namesrv.addr) for name in ("broker-a", "broker-b")
    ]
    a = groups[0]
    cfg = dict(poll_name_server_interval_ms=500, persist_consumer_offset_interval_ms=500)
    producer = Producer("pg_failover", client_config=ClientConfig(namesrv.addr, instance_name="fo-p", **cfg))
    consumer = PushConsumer(
        GROUP,
        client_config=ClientConfig(namesrv.addr, instance_name="fo-c", rebalance_interval_ms=1000, **cfg),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    try:
        create = {"topic": TOPIC, "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES), "perm": "6"}
        for g in groups:
            resp = await client.invoke(
                g.master.broker_addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, create), 5000
            )
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        for g in groups:
            await asyncio.to_thread(g.start_slave)
        for g in groups:
            await slave_connected(client, g)

        run = Run(producer)
        await producer.start()
        consumer.subscribe(TOPIC, "*")
        consumer.register_message_listener(run.listener)
        await consumer.start()

        # 1. both groups take messages; the consumer receives some, then is suspended.
        assert set(await run.send(80)) == {"broker-a", "broker-b"}
        await until("the first messages consumed", lambda: _async(len(run.received) > 0))
        consumer.suspend()
        await run.send(80)
        assert a.slave is not None
        await wait_caught_up(client, a.master, a.slave)  # SYNC_MASTER: already, but the dispatch too
        pending_a = {k for k, broker in run.acked.items() if broker == "broker-a"} - set(run.received)
        assert pending_a, "broker-a should hold messages not consumed yet"

        # 2. kill broker-a's master while the producer sends.
        sending = asyncio.create_task(run.send(300))
        await asyncio.sleep(0)  # the first send is under way
        await asyncio.to_thread(a.master.kill)
        killed_at = run.seq
        brokers_after = await sending
        assert run.failed == [], run.failed[:5]
        assert brokers_after[-100:] == ["broker-b"] * 100  # the route no longer lists broker-a's master
        consumer.resume()
        await until("broker-a's messages drained from its slave", lambda: _async(not run.missing()))
        assert pending_a <= set(run.received)
        a_queues_end = await queue_ends(client, a.slave.broker_addr)

        async def slave_has_commits() -> bool:
            return await committed(client, a.slave.broker_addr) == a_queues_end

        await until("the consumer's offsets committed to broker-a's slave", slave_has_commits)

        # 3. the master comes back on its store: the group heals.
        a.master = await asyncio.to_thread(a.start_master)
        await slave_connected(client, a)
        await wait_caught_up(client, a.master, a.slave)
        await until("the producer sending to broker-a again", lambda: _broker_a_back(run))
        await until("everything consumed after the heal", lambda: _async(not run.missing()))
        ends = await queue_ends(client, a.master.broker_addr)

        async def master_has_commits() -> bool:
            return await committed(client, a.master.broker_addr) == ends

        await until("broker-a's master taking the consumer's offsets", master_has_commits)

        # The slave's own copy (what the consumer committed to it) is replaced by the master's at its next
        # copy (every 10 s): the slave never received the consumer's commits made after the heal.
        async def slave_copied_the_masters() -> bool:
            return await committed(client, a.slave.broker_addr) == ends

        await until("broker-a's slave copying the master's offsets", slave_copied_the_masters, timeout=25.0)

        # The consumer moves back: the restarted master serves its pulls (its count starts at its restart).
        # Until the consumer's route refresh and the slave's pull suggestion bring it back, it may still
        # read new messages from the slave; each check sends a few more for it to pull.
        async def master_serves_pulls() -> bool:
            if int((await runtime(client, a.master.broker_addr))["msgGetTotalTodayNow"]) > 0:
                return True
            await run.send(4)
            return False

        await until("the consumer pulling from broker-a's restarted master", master_serves_pulls)
        duplicates = sum(n - 1 for n in run.received.values())
        print(
            f"acked {len(run.acked)} (killed after send {killed_at}), received {len(run.received)} distinct, "
            f"{duplicates} redelivered"
        )
    finally:
        await consumer.shutdown()
        await producer.shutdown()
        await client.close()
        for g in groups:
            g.stop()


async def _async(value: bool) -> bool:
    return value


async def _broker_a_back(run: Run) -> bool:
    return "broker-a" in await run.send(8)
