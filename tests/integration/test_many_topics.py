"""Ten thousand topics on one broker (real broker process on loopback, network thread on).

Half are auto-created by sending to them, half by UPDATE_AND_CREATE_TOPIC. The test checks that they
all exist (also after a restart), that the broker's open file descriptors do not grow with the
queues it writes, and that a new topic's route reaches the name server soon after its creation.
It prints how long the creation took and the latency of a probe request made meanwhile (figures,
not assertions: the machine may be busy).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import orjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import RemotingCommand, create_request

from tests.brokerproc import BrokerProcess, start_broker

TOPICS = 10_000
WINDOW = 64


def send_request(topic: str, body: bytes) -> RemotingCommand:
    f = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0"}
    f.update({"i": "", "j": "0", "k": "false", "m": "false"})
    return create_request(RequestCode.SEND_MESSAGE_V2, f, body)


def create_topic_request(topic: str) -> RemotingCommand:
    f = {"topic": topic, "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}
    f.update({"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
    return create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, f)


def open_fds(b: BrokerProcess) -> int:
    return len(os.listdir(f"/proc/{b.proc.pid}/fd"))


async def all_topics(client: RemotingClient, addr: str) -> set[str]:
    r = await client.invoke(addr, create_request(RequestCode.GET_ALL_TOPIC_CONFIG), 30_000)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return set(orjson.loads(r.body)["topicConfigTable"])


async def consume_queue_files(store: Path, at_least: int, timeout: float) -> int:
    """How many consume-queue files the store holds, once there are `at_least` (polls until `timeout`)."""
    deadline = time.monotonic() + timeout
    while True:
        n = sum(len(files) for _, _, files in os.walk(store / "consumequeue"))
        if n >= at_least:
            return n
        assert time.monotonic() < deadline, f"only {n} consume-queue files after {timeout}s"
        await asyncio.sleep(0.1)


async def route_arrives(client: RemotingClient, namesrv: str, topic: str, timeout: float) -> float:
    """Seconds until the name server answers `topic`'s route (polls until `timeout`)."""
    start = time.monotonic()
    while True:
        req = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        r = await client.invoke(namesrv, req, 5000)
        if r.code == ResponseCode.SUCCESS:
            return time.monotonic() - start
        assert r.code == ResponseCode.TOPIC_NOT_EXIST, r.remark
        assert time.monotonic() - start < timeout, f"no route for {topic} after {timeout}s"
        await asyncio.sleep(0.02)


async def test_ten_thousand_topics(tmp_path):
    b = await asyncio.to_thread(start_broker, tmp_path / "s")
    client = RemotingClient()
    try:
        addr = b.broker_addr
        # A few queues written first, so the store's own files are open before the baseline count.
        for i in range(8):
            r = await client.invoke(addr, send_request(f"Warm{i}", b"x"), 5000)
            assert r.code == ResponseCode.SUCCESS, r.remark
        fds_before = open_fds(b)

        probes: list[float] = []
        done = asyncio.Event()

        async def probe() -> None:
            while not done.is_set():
                t = time.monotonic()
                r = await client.invoke(addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO), 30_000)
                assert r.code == ResponseCode.SUCCESS
                probes.append(time.monotonic() - t)
                await asyncio.sleep(0.05)

        async def create(i: int) -> None:
            topic = f"Many{i:05d}"
            req = send_request(topic, b"m") if i % 2 == 0 else create_topic_request(topic)
            r = await client.invoke(addr, req, 60_000)
            assert r.code == ResponseCode.SUCCESS, (topic, r.code, r.remark)

        async def worker(ids: range) -> None:
            for i in ids:
                await create(i)

        prober = asyncio.create_task(probe())
        start = time.monotonic()
        await asyncio.gather(*(worker(range(w, TOPICS, WINDOW)) for w in range(WINDOW)))
        elapsed = time.monotonic() - start
        # The dispatcher creates the consume-queue files behind the sends: wait until all exist
        # (still probing).
        cq_files = await consume_queue_files(tmp_path / "s", TOPICS // 2, 60.0)
        dispatched = time.monotonic() - start
        done.set()
        await prober
        fds_after = open_fds(b)
        probes.sort()
        print(
            f"\n{TOPICS} topics created in {elapsed:.1f}s ({TOPICS / elapsed:.0f}/s), their consume "
            f"queues in {dispatched:.1f}s; probe latency over {len(probes)} probes: "
            f"median {probes[len(probes) // 2] * 1000:.1f} ms, "
            f"max {probes[-1] * 1000:.1f} ms; open fds {fds_before} -> {fds_after} "
            f"with {cq_files} consume-queue files"
        )
        assert fds_after < fds_before + 32, (fds_before, fds_after)

        expected = {f"Many{i:05d}" for i in range(TOPICS)}
        assert expected <= await all_topics(client, addr)

        # A topic created now is routable on the name server shortly after.
        r = await client.invoke(addr, send_request("Fresh", b"f"), 5000)
        assert r.code == ResponseCode.SUCCESS
        waited = await route_arrives(client, b.namesrv_addr, "Fresh", 10.0)
        print(f"route of a new topic on the name server after {waited * 1000:.0f} ms")
        # ... and so is the last topic of the burst.
        await route_arrives(client, b.namesrv_addr, f"Many{TOPICS - 1:05d}", 10.0)
    finally:
        await client.close()
        b.stop()

    b = await asyncio.to_thread(start_broker, tmp_path / "s")
    client = RemotingClient()
    try:
        topics = await all_topics(client, b.broker_addr)
        assert expected | {"Fresh"} <= topics
        print(f"after a restart: {open_fds(b)} open fds")
    finally:
        await client.close()
        b.stop()
