"""SYNC_FLUSH: SIGKILL the broker while producers send; every acknowledged message survives the
restart and a consumer resumes from its committed offset (20 kill cycles)."""

from __future__ import annotations

import asyncio
import random
import zlib

from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import create_request
from rmq.remoting.errors import RemotingError
from rmq.store import decode_records

from tests.brokerproc import start_broker

TOPIC = "Durable"
QUEUES = 4


def send_request(i: int, qid: int) -> tuple[bytes, object]:
    body = b"msg-%08d-" % i + bytes(random.Random(i).randbytes(64 + i % 300))
    fields = {"a": "PG", "b": TOPIC, "c": "TBW102", "d": str(QUEUES), "e": str(qid), "f": "0"}
    fields.update({"g": "1", "h": "0", "i": f"KEYS\x01k{i}", "j": "0", "k": "false", "m": "false"})
    return body, create_request(RequestCode.SEND_MESSAGE_V2, fields, body)


async def produce_until_killed(addr: str, start: int, acked: dict, stop: asyncio.Event) -> int:
    client = RemotingClient()
    i = start
    sem = asyncio.Semaphore(16)

    async def one(n: int) -> None:
        qid = n % QUEUES
        body, req = send_request(n, qid)
        try:
            resp = await client.invoke(addr, req, 5000)
        except (RemotingError, OSError):
            return
        finally:
            sem.release()
        if resp.code == ResponseCode.SUCCESS:
            acked[(qid, int(resp.ext_fields["queueOffset"]))] = zlib.crc32(body)

    tasks = []
    while not stop.is_set():
        await sem.acquire()
        tasks.append(asyncio.create_task(one(i)))
        i += 1
    await asyncio.gather(*tasks, return_exceptions=True)
    await client.close()
    return i


async def pull_all(client: RemotingClient, addr: str, qid: int, offset: int) -> list[tuple]:
    out = []
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
        if resp.code != ResponseCode.SUCCESS:
            return out
        recs = decode_records(resp.body, check_crc=True)
        out.extend(recs)
        offset = int(resp.ext_fields["nextBeginOffset"])


async def test_sync_flush_survives_sigkill_cycles(tmp_path):
    rng = random.Random(7)
    store = tmp_path / "store"
    acked: dict[tuple[int, int], int] = {}
    committed: dict[int, int] = {}
    next_i = 0
    props = ("flushDiskType=SYNC_FLUSH", "mappedFileSizeCommitLog=1048576", "mappedFileSizeConsumeQueue=6000")
    for cycle in range(20):
        b = await asyncio.to_thread(start_broker, store, *props)
        try:
            client = RemotingClient()
            # The consumer resumes from what it committed before the last kill.
            for qid, off in committed.items():
                q = {"consumerGroup": "CG", "topic": TOPIC, "queueId": str(qid)}
                r = await client.invoke(
                    b.broker_addr, create_request(RequestCode.QUERY_CONSUMER_OFFSET, q), 5000
                )
                assert r.code == 0 and int(r.ext_fields["offset"]) == off, (cycle, qid)
            # Everything acknowledged so far is there, intact, with no holes.
            for qid in range(QUEUES):
                recs = await pull_all(client, b.broker_addr, qid, 0)
                assert [r[2] for r in recs] == list(range(len(recs))), f"cycle {cycle}: hole in queue {qid}"
                by_off = {r[2]: zlib.crc32(r[12]) for r in recs}
                for (q, off), crc in acked.items():
                    if q == qid:
                        assert by_off.get(off) == crc, f"cycle {cycle}: acked {q}/{off} lost or damaged"
                # Commit part of the queue; the commit is acknowledged, so it must survive.
                upto = len(recs) // 2
                c = {"consumerGroup": "CG", "topic": TOPIC, "queueId": str(qid), "commitOffset": str(upto)}
                r = await client.invoke(
                    b.broker_addr, create_request(RequestCode.UPDATE_CONSUMER_OFFSET, c), 5000
                )
                assert r.code == 0
                committed[qid] = upto
            await client.close()
            stop = asyncio.Event()
            producer = asyncio.create_task(produce_until_killed(b.broker_addr, next_i, acked, stop))
            await asyncio.sleep(rng.uniform(0.05, 0.4))
            b.kill()
            stop.set()
            next_i = await producer
        finally:
            b.kill()
    assert len(acked) > 200
