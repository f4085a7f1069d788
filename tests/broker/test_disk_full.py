"""A real broker on a small tmpfs that fills up: sends are refused with SERVICE_NOT_AVAILABLE and a
remark naming the disk before the broker can die of it, reads go on, the condition is logged once
and again when it clears, sends succeed again once space is freed (no restart), and a restart on
the full disk starts and serves reads. Needs root to mount the tmpfs; skipped otherwise."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import create_request

from tests.broker.test_damaged_store import runtime_info
from tests.broker.test_kill_cycles import pull_all
from tests.brokerproc import start_broker

TOPIC = "Durable"  # the topic pull_all reads
QUEUES = 4
PROPS = (
    # Retention runs once at start; its space-driven deletions are seen at the restart.
    "cleanResourceInterval=3600000",
    "mappedFileSizeCommitLog=4194304",
    "mappedFileSizeConsumeQueue=60000",
    "maxHashSlotNum=5000",
    "maxIndexNum=20000",
)


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def send_request(i: int) -> tuple[bytes, object]:
    body = (b"%08d" % i) * 128  # 1 KiB
    fields = {"a": "PG", "b": TOPIC, "c": "TBW102", "d": str(QUEUES), "e": str(i % QUEUES), "f": "0"}
    fields.update({"g": "1", "h": "0", "i": f"KEYS\x01k{i}", "j": "0", "k": "false", "m": "false"})
    return body, create_request(RequestCode.SEND_MESSAGE_V2, fields, body)


async def send_until_refused(addr: str, start: int, acked: set[int], limit: int = 60_000) -> object:
    """Send one by one until the broker refuses; returns the refusal."""
    client = RemotingClient()
    try:
        for i in range(start, start + limit):
            _, req = send_request(i)
            resp = await client.invoke(addr, req, 10_000)
            if resp.code != ResponseCode.SUCCESS:
                return resp
            acked.add(i)
    finally:
        await client.close()
    raise AssertionError(f"{limit} sends were all accepted on a 40 MiB disk")


async def served(addr: str) -> set[int]:
    client = RemotingClient()
    out: set[int] = set()
    try:
        for qid in range(QUEUES):
            q = {"topic": TOPIC, "queueId": str(qid)}
            r = await client.invoke(addr, create_request(RequestCode.GET_MIN_OFFSET, q), 5000)
            assert r.code == ResponseCode.SUCCESS, r.remark
            for rec in await pull_all(client, addr, qid, int(r.ext_fields["offset"])):
                out.add(int(rec[12][:8]))
    finally:
        await client.close()
    return out


async def served_all(addr: str, want: set[int], timeout: float = 30.0) -> None:
    """Wait until the broker serves exactly `want` (the dispatcher may still be catching up)."""
    deadline = time.monotonic() + timeout
    while (got := await served(addr)) != want:
        assert time.monotonic() < deadline, f"served {len(got)}, want {len(want)}; extra {got - want}"
        await asyncio.sleep(0.2)


def fill(path: Path) -> None:
    """Take every byte left on the filesystem of `path`."""
    with open(path, "wb") as f:
        chunk = b"\0" * (1 << 20)
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError:
            pass
    size = path.stat().st_size
    while True:  # the last partial MiB
        try:
            with open(path, "ab") as f:
                f.write(b"\0" * 4096)
        except OSError:
            break
    assert path.stat().st_size >= size


async def test_full_disk_refuses_sends_keeps_reads_and_recovers(small_disk):
    store = small_disk / "store"
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\1" * (8 << 20))
    b = await asyncio.to_thread(start_broker, store, *PROPS)
    acked: set[int] = set()
    try:
        refusal = await send_until_refused(b.broker_addr, 0, acked)
        assert refusal.code == ResponseCode.SERVICE_NOT_AVAILABLE, (refusal.code, refusal.remark)
        assert "disk" in (refusal.remark or ""), refusal.remark
        assert b.proc.poll() is None, "the broker died"
        assert len(acked) > 1000
        # Consumers keep reading everything acknowledged.
        await served_all(b.broker_addr, acked)
        # Freed space: sends succeed again, without a restart.
        ballast.unlink()
        client = RemotingClient()
        deadline = time.monotonic() + 30
        i = max(acked) + 1
        while True:
            _, req = send_request(i)
            resp = await client.invoke(b.broker_addr, req, 10_000)
            if resp.code == ResponseCode.SUCCESS:
                acked.add(i)
                break
            assert time.monotonic() < deadline, f"still refused after space was freed: {resp.remark}"
            await asyncio.sleep(0.2)
        await client.close()
        # Full again, then every byte taken: the broker is stopped and restarted on that disk.
        await send_until_refused(b.broker_addr, i + 1, acked)
        await served_all(b.broker_addr, acked)
    finally:
        b.stop()
    log = "".join(b.log)
    assert log.count("store disk-full") == 2, log[-4000:]
    assert log.count("store disk-ok") == 1, log[-4000:]
    await asyncio.to_thread(fill, small_disk / "ballast2")
    b = await asyncio.to_thread(start_broker, store, *PROPS)
    try:
        # As RocketMQ does above diskSpaceCleanForciblyRatio, retention (which runs at start)
        # deletes the oldest files, expired or not, and says so; once it has, everything after
        # them is served.
        deadline = time.monotonic() + 30
        while True:
            info = await runtime_info(b.broker_addr)
            repairs = [v for k, v in info.items() if k.startswith("storeRepair0")]
            if any("retention" in r and "diskSpaceCleanForciblyRatio" in r for r in repairs):
                break
            assert time.monotonic() < deadline, repairs
            await asyncio.sleep(0.2)
        now = await served(b.broker_addr)
        assert now and now == {i for i in acked if i >= min(now)}, (len(now), len(acked))
    finally:
        b.stop()
