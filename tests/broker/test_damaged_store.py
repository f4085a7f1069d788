"""A real broker on a damaged store: a flipped byte in the middle of the CommitLog, a deleted
ConsumeQueue and a truncated last CommitLog file. Every intact message is served exactly once,
nothing intact is overwritten, and each repair is logged at WARN and listed in the runtime info."""

from __future__ import annotations

import asyncio
import shutil
import struct
import time
import zlib
from pathlib import Path

import orjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import create_request

from tests.broker.test_kill_cycles import QUEUES, TOPIC, pull_all, send_request
from tests.brokerproc import start_broker

SEGMENT = 1 << 20
PROPS = (f"mappedFileSizeCommitLog={SEGMENT}", "mappedFileSizeConsumeQueue=6000")


async def send_all(addr: str, n: int) -> dict[int, tuple[int, int]]:
    """Send messages 0..n-1 (queue i % QUEUES); returns i -> (queue, queue offset)."""
    client = RemotingClient()
    placed: dict[int, tuple[int, int]] = {}
    sem = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with sem:
            _, req = send_request(i, i % QUEUES)
            resp = await client.invoke(addr, req, 10_000)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            placed[i] = (i % QUEUES, int(resp.ext_fields["queueOffset"]))

    await asyncio.gather(*(one(i) for i in range(n)))
    await client.close()
    return placed


async def served(addr: str) -> dict[int, list[tuple[int, int]]]:
    """Message number -> [(queue, crc of body)] for everything the broker serves."""
    client = RemotingClient()
    out: dict[int, list[tuple[int, int]]] = {}
    for qid in range(QUEUES):
        for rec in await pull_all(client, addr, qid, 0):
            body = rec[12]
            i = int(body[4:12])
            out.setdefault(i, []).append((qid, zlib.crc32(body)))
    await client.close()
    return out


def expected_crc(i: int) -> int:
    return zlib.crc32(send_request(i, i % QUEUES)[0])


async def runtime_info(addr: str) -> dict[str, str]:
    client = RemotingClient()
    resp = await client.invoke(addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 5000)
    await client.close()
    assert resp.code == ResponseCode.SUCCESS
    return orjson.loads(resp.body)["table"]


def record_offsets(commitlog: Path) -> list[int]:
    """Physical offsets of every record, walking the files by TOTALSIZE."""
    offsets = []
    for f in sorted(commitlog.iterdir()):
        base = int(f.name)
        data = f.read_bytes()
        pos = 0
        while pos + 8 <= len(data):
            size, magic = struct.unpack_from(">iI", data, pos)
            if magic != 0xDAA320A7 or size <= 0:
                break
            offsets.append(base + pos)
            pos += size
    return offsets


def assert_each_once(got: dict[int, list[tuple[int, int]]], want: set[int]) -> None:
    assert set(got) == want, f"missing {sorted(want - set(got))[:10]}, extra {sorted(set(got) - want)[:10]}"
    for i in want:
        assert got[i] == [(i % QUEUES, expected_crc(i))], f"message {i}: {got[i]}"


async def test_damage_a_deleted_queue_and_a_short_file_lose_nothing_intact(tmp_path):
    store = tmp_path / "store"
    n = 4999
    b = await asyncio.to_thread(start_broker, store, *PROPS)
    try:
        await send_all(b.broker_addr, n)
    finally:
        assert b.stop() == 0
    commitlog = store / "commitlog"
    offsets = record_offsets(commitlog)
    assert len(offsets) == n

    # 1. One flipped byte in the body of a record in the middle of the log (clean shutdown).
    victim = offsets[n // 2]
    f = commitlog / f"{victim // SEGMENT * SEGMENT:020d}"
    data = bytearray(f.read_bytes())
    data[victim % SEGMENT + 100] ^= 0x01
    f.write_bytes(data)
    b = await asyncio.to_thread(start_broker, store, *PROPS)
    try:
        got = await served(b.broker_addr)
        lost = {i for i in range(n) if i not in got}
        assert len(lost) == 1, lost
        assert_each_once(got, set(range(n)) - lost)
        info = await runtime_info(b.broker_addr)
        assert int(info["storeRepairCount"]) >= 1
        repairs = [v for k, v in info.items() if k.startswith("storeRepair0")]
        assert any("commitlog-damage" in r and f"[{victim}, " in r for r in repairs), repairs
        # New messages go after the intact ones: nothing old is overwritten.
        placed = await send_all(b.broker_addr, 8)
        assert all(off > 0 for _, off in placed.values())
        # The 8 new ones reuse numbers 0..7 (and bodies): those are served twice, once dispatched.
        deadline = time.monotonic() + 30
        while sum(map(len, (got := await served(b.broker_addr)).values())) < n - 1 + 8:
            assert time.monotonic() < deadline, "the new messages were not dispatched"
            await asyncio.sleep(0.1)
        assert len(got) == n - 1
        assert all(len(v) == (2 if i < 8 else 1) for i, v in got.items())
    finally:
        assert b.stop() == 0
    log = "".join(b.log)
    assert "WARNING" in log and "commitlog-damage" in log and str(victim) in log, log[-3000:]

    # 2. A deleted ConsumeQueue after a clean shutdown is rebuilt; its next offset continues.
    qdir = store / "consumequeue" / TOPIC / "1"
    units = sum(p.stat().st_size for p in qdir.iterdir())
    assert units > 0
    shutil.rmtree(qdir)
    b = await asyncio.to_thread(start_broker, store, *PROPS)
    try:
        got = await served(b.broker_addr)
        in_q1 = [i for i, v in got.items() if any(q == 1 for q, _ in v)]
        assert len(in_q1) >= (n - 1) // QUEUES
        _, req = send_request(10_001, 1)
        client = RemotingClient()
        resp = await client.invoke(b.broker_addr, req, 5000)
        await client.close()
        assert resp.code == ResponseCode.SUCCESS
        # After the 1,250 first sends and 2 of the 8 later ones.
        assert int(resp.ext_fields["queueOffset"]) == sum(1 for i in range(n) if i % QUEUES == 1) + 2
        info = await runtime_info(b.broker_addr)
        assert any("is missing" in v for k, v in info.items() if k.startswith("storeRepair0")), info
    finally:
        assert b.stop() == 0

    # 3. The last CommitLog file cut short (inside a record) is recovered with a warning.
    offsets = record_offsets(commitlog)
    last_file = sorted(commitlog.iterdir())[-1]
    cut_record = offsets[-5]
    assert cut_record // SEGMENT * SEGMENT == int(last_file.name)
    with open(last_file, "r+b") as fh:
        fh.truncate(cut_record % SEGMENT + 40)
    b = await asyncio.to_thread(start_broker, store, *PROPS)
    try:
        info = await runtime_info(b.broker_addr)
        repairs = [v for k, v in info.items() if k.startswith("storeRepair0")]
        assert any("short-file" in r for r in repairs), repairs
        assert any("torn-tail" in r for r in repairs), repairs
        assert int(info["commitLogMaxOffset"]) == cut_record
    finally:
        assert b.stop() == 0
    assert last_file.stat().st_size == SEGMENT
