"""SYNC_MASTER + SYNC_FLUSH with a slave: kill -9 the master 20 times while 4 producers send; every
message answered SEND_OK is on the slave (and on the master after its recovery), and the slave's
CommitLog is byte-identical to the master's once it caught up (never ahead of it, never diverged).

Real processes on loopback: one name server (in this process), the slave (up throughout, learning the
master's HA address from the name server) and the master, restarted each cycle on the same store and
ports. The producers are 4 threads, each with its own connection and 4 sends in flight, sending raw
SEND_MESSAGE_V2 frames continuously, through the kills and restarts.

`RMQ_HA_KILL_CYCLES` sets the number of cycles (default 20, the issue's figure).
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
import zlib
from collections import Counter
from pathlib import Path

import pytest
from rmq.common.codes import RequestCode, ResponseCode
from rmq.namesrv.server import NameServer
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import create_request
from rmq.remoting.errors import RemotingError

from tests.broker.test_replication import (
    QUEUES,
    TOPIC,
    commitlog_max,
    free_port,
    log_bytes,
    logged,
    pull_queue,
    queue_files,
    wait_caught_up,
)
from tests.brokerproc import BrokerProcess, start_broker

CYCLES = int(os.environ.get("RMQ_HA_KILL_CYCLES", "20"))
PRODUCERS = 4
IN_FLIGHT = 4
SMALL = ("mappedFileSizeCommitLog=1048576", "mappedFileSizeConsumeQueue=6000")


class Producer(threading.Thread):
    """Sends continuously to the master's address until stopped; keeps every SEND_OK answer as
    (queueId, queueOffset) -> (body CRC, physical offset from the msgId) and counts the rest."""

    def __init__(self, pid: int, addr: str, stop: threading.Event) -> None:
        super().__init__(name=f"producer-{pid}", daemon=True)
        self.pid = pid
        self.addr = addr
        self.stop = stop
        self.acked: dict[tuple[int, int], tuple[int, int]] = {}
        self.outcomes: Counter[str] = Counter()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # reported by the test
            self.error = e

    async def _main(self) -> None:
        client = RemotingClient()
        try:
            await asyncio.gather(*(self._sender(client, lane) for lane in range(IN_FLIGHT)))
        finally:
            await client.close()

    async def _sender(self, client: RemotingClient, lane: int) -> None:
        seq = lane
        while not self.stop.is_set():
            seq += IN_FLIGHT
            qid = (self.pid + seq) % QUEUES
            body = b"p%d-%08d-" % (self.pid, seq) + random.Random(seq * 7 + self.pid).randbytes(
                40 + seq % 400
            )
            fields = {"a": "PG", "b": TOPIC, "c": "TBW102", "d": str(QUEUES), "e": str(qid), "f": "0"}
            fields.update({"g": "1", "h": "0", "i": f"KEYS\x01p{self.pid}-{seq}", "j": "0", "k": "false"})
            try:
                resp = await client.invoke(
                    self.addr, create_request(RequestCode.SEND_MESSAGE_V2, fields, body), 5000
                )
            except (RemotingError, OSError, TimeoutError) as e:
                # The master is down (refused, reset) or died holding the answer.
                self.outcomes[f"error:{e.__class__.__name__}"] += 1
                await asyncio.sleep(0.05)
                continue
            if resp.code == ResponseCode.SUCCESS:
                phys = int(resp.ext_fields["msgId"][16:32], 16)
                self.acked[(qid, int(resp.ext_fields["queueOffset"]))] = (zlib.crc32(body), phys)
                self.outcomes["SEND_OK"] += 1
                continue
            name = {
                ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
                ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
                ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
                ResponseCode.SERVICE_NOT_AVAILABLE: "SERVICE_NOT_AVAILABLE",
            }.get(resp.code, f"code:{resp.code}")
            self.outcomes[name] += 1
            # Not SEND_OK: the client would retry or back off; back off, so a master without its
            # slave is not flooded with messages it cannot replicate yet.
            await asyncio.sleep(0.2)


def acked_count(producers: list[Producer]) -> int:
    return sum(p.outcomes["SEND_OK"] for p in producers)


async def check_all_acked(client: RemotingClient, addr: str, acked: dict, who: str) -> int:
    """Pull every queue from `addr`; every acknowledged message is there, intact, at its offset."""
    found = 0
    for qid in range(QUEUES):
        recs = await pull_queue(client, addr, qid)
        assert [r[2] for r in recs] == list(range(len(recs))), f"{who}: hole in queue {qid}"
        by_off = {r[2]: (zlib.crc32(r[12]), r[3]) for r in recs}
        for (q, off), want in acked.items():
            if q == qid:
                got = by_off.get(off)
                assert got is not None, f"{who}: acknowledged message {q}/{off} (offset {want[1]}) lost"
                assert got == want, f"{who}: acknowledged message {q}/{off} differs: {got} != {want}"
                found += 1
    return found


async def test_sync_master_kill9_cycles_lose_no_acknowledged_message(tmp_path: Path):
    started = time.monotonic()
    rng = random.Random(15)
    ns = NameServer(kv_config_path=tmp_path / "kv.json")
    await ns.start("127.0.0.1", 0)
    ports = (f"listenPort={free_port()}", f"haListenPort={free_port()}")
    master_props = ("brokerRole=SYNC_MASTER", "flushDiskType=SYNC_FLUSH", *ports, *SMALL)

    def start_master() -> BrokerProcess:
        return start_broker(tmp_path / "m", *master_props, namesrv=ns.addr)

    master = await asyncio.to_thread(start_master)
    client = RemotingClient()
    create = {"topic": TOPIC, "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES), "perm": "6"}
    r = await client.invoke(
        master.broker_addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, create), 5000
    )
    assert r.code == ResponseCode.SUCCESS
    slave = await asyncio.to_thread(
        start_broker, tmp_path / "s", "brokerRole=SLAVE", "brokerId=1", *SMALL, namesrv=ns.addr
    )
    stop = threading.Event()
    producers = [Producer(pid, master.broker_addr, stop) for pid in range(PRODUCERS)]
    for p in producers:
        p.start()
    try:
        for cycle in range(CYCLES):
            if cycle > 0:
                slave_end = await commitlog_max(client, slave.broker_addr)
                master = await asyncio.to_thread(start_master)
                recovered = await logged(master, "opened after a crashed shutdown", "commitlog ends at")
                master_end = int(recovered.rsplit("commitlog ends at", 1)[1].split()[0])
                if slave_end > master_end:
                    # The slave holds what the recovered master lost: it is refused, loudly. After a
                    # kill -9 (the page cache survives) that means recovery dropped streamed records.
                    await logged(master, "reports CommitLog offset", "beyond this master's max offset")
                    pytest.fail(
                        f"cycle {cycle}: slave at {slave_end}, ahead of the recovered master at {master_end}"
                    )
            # The slave (reconnecting every 5 s, as RocketMQ's HAClient) is streamed to again.
            await logged(master, "HA: streaming the CommitLog to slave", timeout=30)
            # Sends are acknowledged again; then kill -9 the master at a random moment mid-send.
            before = acked_count(producers)
            deadline = time.monotonic() + 30
            while acked_count(producers) < before + 10:
                assert time.monotonic() < deadline, f"cycle {cycle}: no SEND_OK:\n" + "".join(
                    master.log[-20:]
                )
                assert all(p.is_alive() for p in producers), [p.error for p in producers]
                await asyncio.sleep(0.005)
            await asyncio.sleep(rng.uniform(0.0, 0.3))
            master.kill()
        stop.set()
        for p in producers:
            await asyncio.to_thread(p.join, 30)
            assert p.error is None and not p.is_alive(), p.error
        acked: dict[tuple[int, int], tuple[int, int]] = {}
        for p in producers:
            for k in p.acked:
                assert k not in acked, f"two SEND_OK answers for queue offset {k}"
            acked.update(p.acked)
        # The master recovers once more; the slave catches up with it.
        master = await asyncio.to_thread(start_master)
        end = await wait_caught_up(client, master, slave)
        on_slave = await check_all_acked(client, slave.broker_addr, acked, "slave")
        on_master = await check_all_acked(client, master.broker_addr, acked, "master")
    finally:
        stop.set()
        await client.close()
        master.stop()
        slave.stop()
        await ns.stop()
    # The slave never diverged: its CommitLog and ConsumeQueues equal the master's.
    assert log_bytes(tmp_path / "s", 0, end) == log_bytes(tmp_path / "m", 0, end)
    assert queue_files(tmp_path / "s") == queue_files(tmp_path / "m")
    outcomes = sum((p.outcomes for p in producers), Counter())
    others = dict(sorted((k, v) for k, v in outcomes.items() if k != "SEND_OK"))
    print(
        f"\n{CYCLES} master kill -9 cycles in {time.monotonic() - started:.0f} s: {len(acked)} SEND_OK, "
        f"{on_slave} on the slave, {on_master} on the master, lost {len(acked) - on_slave}; "
        f"CommitLog {end} bytes; other answers {others}; "
        "slave never ahead of the restarted master"
    )
    assert on_slave == on_master == len(acked) > CYCLES * 10
    # A restarting master answers what clients retry (SERVICE_NOT_AVAILABLE while its store recovers),
    # never REQUEST_CODE_NOT_SUPPORTED.
    assert set(others) <= {
        "SLAVE_NOT_AVAILABLE",
        "FLUSH_SLAVE_TIMEOUT",
        "SERVICE_NOT_AVAILABLE",
        "error:RemotingConnectError",
        "error:RemotingSendRequestError",
        "error:RemotingTimeoutError",
    }, others
