"""The failover of tests/integration/test_failover_cluster.py under Apache's Java client 4.9.8: a two-group
cluster of rmq brokers (SYNC_MASTER + SLAVE each, an rmq name server) loses broker-a's master to SIGKILL
while a Java producer sends and a Java push consumer holds broker-a messages it has not consumed; the
driver (``rmqpeer.FailoverDriver``) and this test take turns through marker files."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import create_request

from tests.broker.test_replication import wait_caught_up
from tests.integration.test_client_failover import start_namesrv
from tests.integration.test_failover_cluster import (
    QUEUES,
    Group,
    committed,
    queue_ends,
    slave_connected,
    until,
)
from tests.peers.apache import compile_drivers, peer_libs, run_driver

TOPIC = "FailoverTopic"  # the one test_failover_cluster's helpers read
GROUP = "cg_failover"


async def marker(path: Path, timeout: float = 90.0) -> None:
    """Wait for the driver's marker file (written by another process)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"the driver never wrote {path.name}"
        await asyncio.sleep(0.05)


async def test_java_clients_ride_out_a_master_kill(tmp_path: Path) -> None:
    libs = await asyncio.to_thread(peer_libs)
    classes = await asyncio.to_thread(compile_drivers, libs)
    namesrv = await asyncio.to_thread(start_namesrv, tmp_path)
    client = RemotingClient()
    groups: list[Group] = []
    marks = tmp_path / "marks"
    marks.mkdir()
    try:
        groups = [
            await asyncio.to_thread(Group, tmp_path, name, namesrv.addr) for name in ("broker-a", "broker-b")
        ]
        a = groups[0]
        create = {"topic": TOPIC, "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES), "perm": "6"}
        for g in groups:
            req = create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, create)
            assert (await client.invoke(g.master.broker_addr, req, 5000)).code == ResponseCode.SUCCESS
        for g in groups:
            await asyncio.to_thread(g.start_slave)
        for g in groups:
            await slave_connected(client, g)

        driver = asyncio.create_task(
            asyncio.to_thread(
                run_driver,
                libs,
                classes,
                tmp_path / "driver",
                "failover",
                main="rmqpeer.FailoverDriver",
                namesrv=namesrv.addr,
                topic=TOPIC,
                group=GROUP,
                dir=marks,
                timeout=90,
            )
        )
        await marker(marks / "suspended")
        await asyncio.to_thread(a.master.kill)
        (marks / "killed").touch()
        await marker(marks / "drained")
        assert a.slave is not None
        ends = await queue_ends(client, a.slave.broker_addr)

        async def slave_has_commits() -> bool:
            return await committed(client, a.slave.broker_addr, GROUP) == ends

        await until("the Java consumer's offsets committed to broker-a's slave", slave_has_commits)

        a.master = await asyncio.to_thread(a.start_master)
        await slave_connected(client, a)
        await wait_caught_up(client, a.master, a.slave)
        (marks / "restarted").touch()
        result = await driver
        # The one send that may fail is the one in flight when the master died: Java 4.9.8's
        # NettyRemotingClient fails a channel's pending requests only when it closes the channel
        # itself (failFast in its close handler; a peer's close reaches channelInactive, which it does
        # not handle), so that send waits out sendMsgTimeout and ends "sendDefaultImpl call timeout",
        # unacknowledged; the driver then sees the kill marker and records killedAt as the next seq.
        failed = result["failed"]
        in_flight, timeout = f"jfo-{result['killedAt'] - 1}: ", "sendDefaultImpl call timeout"
        assert all(f.startswith(in_flight) and f.endswith(timeout) for f in failed), failed
        assert result["pendingA"] > 0
        assert result["afterKillLast100"] == ["broker-b"] * 100
        # every acknowledged message received; the unacknowledged one may have been stored too
        assert result["acked"] <= result["received"] <= result["acked"] + len(result["failed"])
        ends = await queue_ends(client, a.master.broker_addr)

        async def master_has_commits() -> bool:
            return await committed(client, a.master.broker_addr, GROUP) == ends

        await until("broker-a's master taking the Java consumer's offsets", master_has_commits)
        print({k: v for k, v in result.items() if k != "afterKillLast100"})
    finally:
        await client.close()
        for g in groups:
            g.stop()
        namesrv.stop()
