"""Master/slave replication with real brokers on loopback (`python -m rmq.broker`, both rmq): the slave's
CommitLog and ConsumeQueues are byte-identical to the master's; an empty slave catches up; a slave killed
mid-transfer resumes without gap or duplicate; a slave refuses sends; SYNC_MASTER answers SEND_OK with a
slave, SLAVE_NOT_AVAILABLE without one and FLUSH_SLAVE_TIMEOUT when the slave stops acknowledging.

`RMQ_HA_CATCHUP_MIB` sets how much the master holds for the catch-up tests (default 128; the issue's
figure is 1024).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import create_request
from rmq.store import MessageStore, decode_records

from tests.brokerproc import BrokerProcess, start_broker
from tests.fastsend import FastSendProbe, delta, fast_send_stats

TOPIC = "Replicated"
QUEUES = 4
CATCHUP_MIB = int(os.environ.get("RMQ_HA_CATCHUP_MIB", "128"))


def send_request(i: int, qid: int, size: int = 1000, topic: str = TOPIC):
    body = (b"msg-%08d-" % i) * (size // 13 + 1)
    fields = {"a": "PG", "b": topic, "c": "TBW102", "d": str(QUEUES), "e": str(qid), "f": "0"}
    fields.update({"g": "1", "h": "0", "i": f"KEYS\x01k{i}\x02TAGS\x01t{i % 3}", "j": "0", "k": "false"})
    return create_request(RequestCode.SEND_MESSAGE_V2, fields, body[:size])


async def runtime(client: RemotingClient, addr: str) -> dict[str, str]:
    resp = await client.invoke(addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 5000)
    assert resp.code == ResponseCode.SUCCESS
    return json.loads(bytes(resp.body))["table"]


async def commitlog_max(client: RemotingClient, addr: str) -> int:
    return int((await runtime(client, addr))["commitLogMaxOffset"])


async def wait_caught_up(client: RemotingClient, master: BrokerProcess, slave: BrokerProcess, timeout=120.0):
    """Poll the slave's CommitLog end until it reaches the master's, and its dispatch until its
    ConsumeQueues and index hold all of it (cross-process conditions)."""
    target = await commitlog_max(client, master.broker_addr)
    deadline = time.monotonic() + timeout
    while (got := await commitlog_max(client, slave.broker_addr)) < target:
        assert time.monotonic() < deadline, f"slave at {got} of {target} after {timeout} s:\n" + "".join(
            slave.log[-20:]
        )
        await asyncio.sleep(0.02)
    assert got == target
    while (behind := int((await runtime(client, slave.broker_addr))["dispatchBehindBytes"])) > 0:
        assert time.monotonic() < deadline, f"slave dispatch {behind} bytes behind after {timeout} s"
        await asyncio.sleep(0.02)
    return target


async def pull_queue(client: RemotingClient, addr: str, qid: int) -> list[tuple]:
    """Every message of a queue of TOPIC, pulled (with its CRC checked)."""
    out: list[tuple] = []
    offset = 0
    deadline = time.monotonic() + 30
    while True:
        fields = {
            "consumerGroup": "CG",
            "topic": TOPIC,
            "queueId": str(qid),
            "queueOffset": str(offset),
            "maxMsgNums": "32",
            "sysFlag": "4",
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": "*",
            "subVersion": "0",
        }
        resp = await client.invoke(addr, create_request(RequestCode.PULL_MESSAGE, fields), 5000)
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:  # a slave before its first copy of the topics
            assert time.monotonic() < deadline, resp.remark
            await asyncio.sleep(0.05)
            continue
        if resp.code != ResponseCode.SUCCESS:
            return out
        out.extend(decode_records(resp.body, check_crc=True))
        offset = int(resp.ext_fields["nextBeginOffset"])


async def logged(proc: BrokerProcess, *words: str, timeout: float = 10.0) -> str:
    """The first line of the broker's log holding all `words` (waiting for its stderr to arrive)."""
    deadline = time.monotonic() + timeout
    while True:
        for line in list(proc.log):
            if all(w in line for w in words):
                return line
        assert time.monotonic() < deadline, f"no log line with {words}:\n" + "".join(proc.log[-20:])
        await asyncio.sleep(0.02)


def log_bytes(store: Path, start: int, end: int) -> bytes:
    """The CommitLog bytes [start, end) of a store, across its files."""
    files = sorted((store / "commitlog").iterdir())
    out = bytearray()
    for f in files:
        base = int(f.name)
        size = f.stat().st_size
        lo, hi = max(start, base), min(end, base + size)
        if lo < hi:
            with open(f, "rb") as fh:
                fh.seek(lo - base)
                out += fh.read(hi - lo)
    return bytes(out)


def queue_files(store: Path) -> dict[str, bytes]:
    out = {}
    for f in sorted((store / "consumequeue").rglob("*")):
        if f.is_file():
            out[str(f.relative_to(store))] = f.read_bytes().rstrip(b"\0")
    return out


def start_pair_slave(tmp_path: Path, master: BrokerProcess, *props: str) -> BrokerProcess:
    return start_broker(
        tmp_path / "s",
        "brokerRole=SLAVE",
        "brokerId=1",
        *props,
        namesrv=master.namesrv_addr,
    )


async def test_everything_sent_to_the_master_is_on_the_slave_byte_for_byte(tmp_path):
    small = ("mappedFileSizeCommitLog=1048576", "mappedFileSizeConsumeQueue=6000")
    master = await asyncio.to_thread(start_broker, tmp_path / "m", *small)
    client = RemotingClient()
    # The topic exists before the slave starts: a slave copies its master's topics when it learns of
    # the master, then every 10 s (as RocketMQ 4.9's slave).
    create = {"topic": TOPIC, "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES), "perm": "6"}
    r = await client.invoke(
        master.broker_addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, create), 5000
    )
    assert r.code == ResponseCode.SUCCESS
    slave = await asyncio.to_thread(start_pair_slave, tmp_path, master, *small)
    try:
        sem = asyncio.Semaphore(32)

        async def one(i: int) -> None:
            async with sem:
                r = await client.invoke(master.broker_addr, send_request(i, i % QUEUES, 500 + i % 1500), 5000)
                assert r.code == ResponseCode.SUCCESS, r.remark

        await asyncio.gather(*(one(i) for i in range(4000)))  # ~5 MiB: several files, blanks included
        end = await wait_caught_up(client, master, slave)
        assert end > 4 * 1048576
        # The slave serves pulls and refuses sends, as RocketMQ's slave does.
        for qid in range(QUEUES):
            q = {"topic": TOPIC, "queueId": str(qid)}
            rm = await client.invoke(master.broker_addr, create_request(RequestCode.GET_MAX_OFFSET, q), 5000)
            rs = await client.invoke(slave.broker_addr, create_request(RequestCode.GET_MAX_OFFSET, q), 5000)
            assert rs.ext_fields["offset"] == rm.ext_fields["offset"] == "1000"
        # The slave copied the master's topics and serves pulls of them.
        await logged(slave, "copied", "topics from master")
        pulled = await pull_queue(client, slave.broker_addr, 0)
        assert len(pulled) == 1000 and pulled == await pull_queue(client, master.broker_addr, 0)
        r = await client.invoke(slave.broker_addr, send_request(0, 0), 5000)
        assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "messages are put to the slave" in (r.remark or "")
        assert "WARNING" in await logged(slave, "sends refused (SERVICE_NOT_AVAILABLE)")
        create = {"topic": "New", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}
        r = await client.invoke(
            slave.broker_addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, create), 5000
        )
        assert r.code == ResponseCode.SYSTEM_ERROR and "from master broker" in (r.remark or "")
        assert "WARNING" in await logged(slave, "request 17 from", "refused")
    finally:
        await client.close()
        slave.stop()
        master.stop()
    assert log_bytes(tmp_path / "s", 0, end) == log_bytes(tmp_path / "m", 0, end)
    cq_master, cq_slave = queue_files(tmp_path / "m"), queue_files(tmp_path / "s")
    assert len(cq_master) >= QUEUES and cq_slave == cq_master


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_slave_ahead_of_its_master_is_reported_not_diverged(tmp_path):
    ha = free_port()
    master = await asyncio.to_thread(start_broker, tmp_path / "m", f"haListenPort={ha}")
    slave_props = ("brokerRole=SLAVE", "brokerId=1", f"haMasterAddress=127.0.0.1:{ha}")
    slave = await asyncio.to_thread(start_broker, tmp_path / "s", *slave_props)
    client = RemotingClient()
    try:
        for i in range(100):
            r = await client.invoke(master.broker_addr, send_request(i, i % QUEUES), 5000)
            assert r.code == ResponseCode.SUCCESS
        end = await wait_caught_up(client, master, slave)
        master.stop()
        # The master comes back having lost its log (an unclean restart on another disk, say).
        master = await asyncio.to_thread(start_broker, tmp_path / "m2", f"haListenPort={ha}")
        line = await logged(master, "reports CommitLog offset", "beyond this master's max offset")
        assert "WARNING" in line and f"offset {end}," in line and "max offset 0" in line
        r = await client.invoke(master.broker_addr, send_request(1000, 0), 5000)
        assert r.code == ResponseCode.SUCCESS
        # The slave keeps its log: when it connects again, it is refused again, nothing appended to it.
        new_end = await commitlog_max(client, master.broker_addr)
        await logged(master, f"offset {end}, beyond this master's max offset {new_end}:")
        assert await commitlog_max(client, slave.broker_addr) == end
        # The master's log grows past the slave's end with other messages: the slave's tail still is
        # not this master's, so it stays refused (not streamed to from its offset, diverged).
        i = 2000
        while await commitlog_max(client, master.broker_addr) <= end:
            r = await client.invoke(master.broker_addr, send_request(i, i % QUEUES), 5000)
            assert r.code == ResponseCode.SUCCESS
            i += 1
        line = await logged(master, f"reports CommitLog offset {end}, beyond the", "it diverged", timeout=20)
        assert "WARNING" in line and "held when it started" in line
        assert await commitlog_max(client, slave.broker_addr) == end
        # Restarted, the master holds more than the slave's end from the start: it remembers the slave
        # it refused, and refuses it still.
        master.stop()
        master = await asyncio.to_thread(start_broker, tmp_path / "m2", f"haListenPort={ha}")
        line = await logged(master, f"reports CommitLog offset {end}, where a slave ahead", timeout=20)
        assert "WARNING" in line and "haDivergedSlaves.json" in line
        assert await commitlog_max(client, slave.broker_addr) == end
    finally:
        await client.close()
        slave.stop()
        master.stop()


def fill_store(root: Path, mib: int, file_size: int) -> int:
    """Write `mib` MiB of messages into a store directory (before its broker starts)."""
    store = MessageStore({"storePathRootDir": str(root), "mappedFileSizeCommitLog": file_size})
    body = bytes(range(256)) * 256  # 64 KiB
    for i in range(mib * 16):
        store.put(TOPIC, i % QUEUES, body, f"KEYS\x01k{i}".encode())
    end = store.commitlog_max_offset()
    store.shutdown()
    return end


async def test_an_empty_slave_catches_up_and_a_killed_one_resumes(tmp_path):
    # The whole log in one file: an empty slave starts at the master's last file (as RocketMQ's).
    file_size = 1 << (CATCHUP_MIB * 2 - 1).bit_length() << 20
    end = await asyncio.to_thread(fill_store, tmp_path / "m", CATCHUP_MIB, file_size)
    props = (f"mappedFileSizeCommitLog={file_size}",)
    master = await asyncio.to_thread(start_broker, tmp_path / "m", *props)
    client = RemotingClient()
    slave = None
    try:
        # First run: kill -9 the slave mid-transfer.
        slave = await asyncio.to_thread(start_pair_slave, tmp_path, master, *props)
        while (got := await commitlog_max(client, slave.broker_addr)) < end // 4:
            await asyncio.sleep(0.005)
        slave.kill()
        assert got < end, "the transfer finished before the kill; raise RMQ_HA_CATCHUP_MIB"
        # Second run: resumes from where its recovered log ends, without gap or duplicate.
        slave = await asyncio.to_thread(start_pair_slave, tmp_path, master, *props)
        while (first := await commitlog_max(client, slave.broker_addr)) <= got:
            await asyncio.sleep(0.005)
        started = time.monotonic()
        await wait_caught_up(client, master, slave)
        took = time.monotonic() - started
        rate = (end - first) / took / 2**20
        print(f"\ncatch-up after restart: {rate:.0f} MiB/s ({end - first} bytes in {took:.2f} s)")
        await logged(slave, "requesting the CommitLog from offset")
    finally:
        await client.close()
        if slave is not None:
            slave.stop()
        master.stop()
    assert log_bytes(tmp_path / "s", 0, end) == log_bytes(tmp_path / "m", 0, end)
    assert queue_files(tmp_path / "s") == queue_files(tmp_path / "m")


async def test_sync_master_waits_for_the_slave(tmp_path):
    props = ("brokerRole=SYNC_MASTER", "slaveTimeout=1000", "haSlaveFallbehindMax=65536")
    master = await asyncio.to_thread(start_broker, tmp_path / "m", *props)
    client = RemotingClient()
    slave = None
    try:
        # No slave: stored, answered SLAVE_NOT_AVAILABLE (with the send's header, as RocketMQ answers).
        r = await client.invoke(master.broker_addr, send_request(0, 0), 5000)
        assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE
        assert r.ext_fields["queueOffset"] == "0" and r.ext_fields["msgId"]
        assert "WARNING" in await logged(master, "SLAVE_NOT_AVAILABLE", "no slave is connected")
        slave = await asyncio.to_thread(start_pair_slave, tmp_path, master)
        # Once the slave has connected, sends are answered when it acknowledged them.
        i = 1
        while (r := await client.invoke(master.broker_addr, send_request(i, 0), 5000)).code != 0:
            assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE
            i += 1
            await asyncio.sleep(0.05)
        for j in range(50):
            r = await client.invoke(master.broker_addr, send_request(i + 1 + j, j % QUEUES), 5000)
            assert r.code == ResponseCode.SUCCESS
        # A slave that stops acknowledging: FLUSH_SLAVE_TIMEOUT after slaveTimeout.
        slave.proc.send_signal(signal.SIGSTOP)
        r = await client.invoke(master.broker_addr, send_request(10_000, 1), 5000)
        assert r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT
        assert r.ext_fields["msgId"]
        assert "WARNING" in await logged(master, "FLUSH_SLAVE_TIMEOUT", "slaveTimeout")
        # ...and once it lags more than haSlaveFallbehindMax, SLAVE_NOT_AVAILABLE at once.
        sends = [client.invoke(master.broker_addr, send_request(20_000 + k, 2), 5000) for k in range(100)]
        codes = {r.code for r in await asyncio.gather(*sends)}
        assert codes == {ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE}
        assert "WARNING" in await logged(
            master, "SLAVE_NOT_AVAILABLE", "bytes behind", "haSlaveFallbehindMax"
        )
        # Resumed and caught up, the slave acknowledges again.
        slave.proc.send_signal(signal.SIGCONT)
        await wait_caught_up(client, master, slave)
        r = await client.invoke(master.broker_addr, send_request(10_001, 1), 5000)
        assert r.code == ResponseCode.SUCCESS
        end = await wait_caught_up(client, master, slave)
    finally:
        await client.close()
        if slave is not None:
            slave.proc.send_signal(signal.SIGCONT)
            slave.stop()
        master.stop()
    assert log_bytes(tmp_path / "s", 0, end) == log_bytes(tmp_path / "m", 0, end)


async def test_sync_master_send_back_waits_for_the_slave(tmp_path):
    """A consumer's send-back is its receipt for the message: on a SYNC_MASTER it is answered once a slave
    has the re-put message; with no slave, SYSTEM_ERROR SLAVE_NOT_AVAILABLE (the consumer then sends the
    message back itself); with a slave that stops acknowledging, SYSTEM_ERROR FLUSH_SLAVE_TIMEOUT."""
    props = ("brokerRole=SYNC_MASTER", "slaveTimeout=1000", "haSlaveFallbehindMax=65536")
    master = await asyncio.to_thread(start_broker, tmp_path / "m", *props)
    client = RemotingClient()
    slave = None

    def back(offset: int):
        # delayLevel -1: straight to the DLQ, so no scheduled re-put writes to the master meanwhile.
        fields = {"offset": str(offset), "group": "CG", "delayLevel": "-1"}
        return client.invoke(
            master.broker_addr, create_request(RequestCode.CONSUMER_SEND_MSG_BACK, fields), 5000
        )

    try:
        r = await client.invoke(master.broker_addr, send_request(0, 0), 5000)
        offset = int(r.ext_fields["msgId"][16:], 16)
        r = await back(offset)
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "SLAVE_NOT_AVAILABLE")
        assert "WARNING" in await logged(master, "send-backs answered SYSTEM_ERROR SLAVE_NOT_AVAILABLE")
        slave = await asyncio.to_thread(start_pair_slave, tmp_path, master)
        await wait_caught_up(client, master, slave)
        while (r := await back(offset)).code != ResponseCode.SUCCESS:
            assert r.remark == "SLAVE_NOT_AVAILABLE"
            await asyncio.sleep(0.05)
        for _ in range(5):
            r = await back(offset)
            assert r.code == ResponseCode.SUCCESS, r.remark
            # Answered once the slave acknowledged: its CommitLog already ends past the re-put record.
            assert await commitlog_max(client, slave.broker_addr) >= await commitlog_max(
                client, master.broker_addr
            )
        slave.proc.send_signal(signal.SIGSTOP)
        r = await back(offset)
        # As RocketMQ answers a send-back whose put is not PUT_OK: SYSTEM_ERROR, the status as the remark.
        assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "FLUSH_SLAVE_TIMEOUT")
    finally:
        await client.close()
        if slave is not None:
            slave.proc.send_signal(signal.SIGCONT)
            slave.stop()
        master.stop()


async def test_sync_master_sends_take_the_fast_path_and_still_wait_for_the_slave(tmp_path):
    """Once a topic is vetted, a SYNC_MASTER's sends are answered by the network thread (its counters),
    SEND_OK only once the slave acknowledged them: a stopped slave's sends time out FLUSH_SLAVE_TIMEOUT, then
    (lagging more than haSlaveFallbehindMax) SLAVE_NOT_AVAILABLE; with no slave connected SLAVE_NOT_AVAILABLE;
    each refusal warned about as the network thread's."""
    props = ("brokerRole=SYNC_MASTER", "slaveTimeout=1000", "haSlaveFallbehindMax=65536")
    master = await asyncio.to_thread(start_broker, tmp_path / "m", *props)
    client = RemotingClient()
    slave = None
    addr = master.broker_addr

    async def stats() -> dict[str, int]:
        return await asyncio.to_thread(fast_send_stats, addr)

    try:
        # The first send vets the topic (Python answers it: no slave yet).
        r = await client.invoke(addr, send_request(0, 0), 5000)
        assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE
        # ...the next ones are the network thread's, still SLAVE_NOT_AVAILABLE without a slave.
        before = await stats()
        r = await client.invoke(addr, send_request(1, 0), 5000)
        assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE and r.ext_fields["msgId"]
        assert delta(before, await stats())["taken"] == 1
        line = await logged(master, "SLAVE_NOT_AVAILABLE", "by the network thread", "no slave is connected")
        assert "WARNING" in line
        slave = await asyncio.to_thread(start_pair_slave, tmp_path, master)
        i = 2
        while (r := await client.invoke(addr, send_request(i, 0), 5000)).code != 0:
            assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE
            i += 1
            await asyncio.sleep(0.05)
        probe = await asyncio.to_thread(FastSendProbe, master)
        for j in range(50):
            r = await client.invoke(addr, send_request(i + 1 + j, j % QUEUES), 5000)
            assert r.code == ResponseCode.SUCCESS
        await asyncio.to_thread(probe.assert_taken, 50, 50)
        # Every SEND_OK was acknowledged by the slave first.
        assert await commitlog_max(client, slave.broker_addr) >= await commitlog_max(client, addr)
        # The slave stops acknowledging: FLUSH_SLAVE_TIMEOUT from the network thread after slaveTimeout.
        slave.proc.send_signal(signal.SIGSTOP)
        before = await stats()
        r = await client.invoke(addr, send_request(10_000, 1), 5000)
        assert r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT and r.ext_fields["msgId"]
        assert delta(before, await stats())["taken"] == 1
        line = await logged(master, "FLUSH_SLAVE_TIMEOUT", "by the network thread", "slaveTimeout")
        assert "WARNING" in line
        # ...and once it lags more than haSlaveFallbehindMax, SLAVE_NOT_AVAILABLE at once.
        before = await stats()
        sends = [client.invoke(addr, send_request(20_000 + k, 2), 5000) for k in range(100)]
        codes = {r.code for r in await asyncio.gather(*sends)}
        assert codes == {ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE}
        d = delta(before, await stats())
        assert d["taken"] + d["Queued"] == 100 and d["taken"] > 0, d
        line = await logged(master, "SLAVE_NOT_AVAILABLE", "by the network thread", "haSlaveFallbehindMax")
        assert "WARNING" in line and "bytes behind" in line
        # Resumed and caught up, the slave acknowledges again: SEND_OK from the network thread.
        slave.proc.send_signal(signal.SIGCONT)
        await wait_caught_up(client, master, slave)
        before = await stats()
        r = await client.invoke(addr, send_request(10_001, 1), 5000)
        assert r.code == ResponseCode.SUCCESS
        assert delta(before, await stats())["taken"] == 1
    finally:
        await client.close()
        if slave is not None:
            slave.proc.send_signal(signal.SIGCONT)
            slave.stop()
        master.stop()


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_rmq_producer_sees_the_sync_master_statuses(tmp_path, flush):
    """rmq's producer against a SYNC_MASTER (with SYNC_FLUSH too, the answer waits for both): without a
    slave SLAVE_NOT_AVAILABLE, and a transactional half message then rolls back without running the local
    transaction; with a slave SEND_OK."""
    from rmq.client import LocalTransactionState, Message
    from rmq.client.results import SendStatus
    from rmq.client.sync import Producer, TransactionProducer

    ran: list[bytes] = []

    class Listener:
        def execute_local_transaction(self, msg, arg):
            ran.append(msg.body)
            return LocalTransactionState.COMMIT_MESSAGE

        def check_local_transaction(self, msg):
            return LocalTransactionState.ROLLBACK_MESSAGE

    master = start_broker(tmp_path / "m", "brokerRole=SYNC_MASTER", f"flushDiskType={flush}")
    slave = None
    try:
        with TransactionProducer("TXG_ha", Listener(), namesrv_addr=master.namesrv_addr) as tx:
            t = tx.send_message_in_transaction(Message(TOPIC, b"half"), None)
        assert t.send_result.send_status == SendStatus.SLAVE_NOT_AVAILABLE
        assert t.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE and ran == []
        with Producer("PG_ha", namesrv_addr=master.namesrv_addr) as producer:
            r = producer.send(Message(TOPIC, b"no slave yet"))
            assert r.send_status == SendStatus.SLAVE_NOT_AVAILABLE
            slave = start_pair_slave(tmp_path, master)
            deadline = time.monotonic() + 30
            while (r := producer.send(Message(TOPIC, b"with a slave"))).send_status != SendStatus.SEND_OK:
                assert r.send_status == SendStatus.SLAVE_NOT_AVAILABLE and time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        if slave is not None:
            slave.stop()
        master.stop()
