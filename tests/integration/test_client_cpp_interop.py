"""rmq.client and the official C++ client (PyPI ``rocketmq==0.4.4``) exchange messages both ways.

* rmq's producers (the asyncio ``Producer`` and the ``rmq.client.sync`` facade, single and batch sends)
  -> the C++ ``PullConsumer`` and ``PushConsumer``;
* the C++ producer -> rmq's ``PushConsumer`` (asyncio) and ``LitePullConsumer`` (sync facade).

Every message must arrive exactly once, with its body (unicode; one in seven above the 4 KiB compression
threshold, so the sender compresses it and the receiver inflates it), tags, several keys, user properties
(non-ASCII values, and a non-ASCII name where the receiver can list properties), its message id
(``UNIQ_KEY``) and the queue / queue offset / commit log offset its send result announced.

The C++ clients run in child processes through ``cpp_driver.py`` (see ``test_cpp_client.py``). The C++
wrapper passes bodies as C strings, so no body contains a NUL byte.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SendResult,
)
from rmq.client import sync as rmq_sync
from rmq.common.codes import RequestCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.brokerproc import BrokerProcess, start_broker

pytest.importorskip("rocketmq.client")

from tests.integration.test_cpp_client import CppProducer, Driver

N = 42  # messages per direction
BIG = "x" * 5000  # >= 4 KiB: compressed by both producers
COMPRESSED_FLAG = 0x1
NON_ASCII_NAME = "ключ"  # a property name only rmq's consumers can list (the C++ wrapper reads by name)

Spec = dict[str, Any]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory.mktemp("interop-store"))
    try:
        yield proc
    finally:
        rc = proc.stop()
        assert rc == 0, "broker exited uncleanly:\n" + "".join(proc.log[-40:])


@pytest.fixture(scope="module")
def homes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("interop-home")


def make_specs(topic: str, run: str, n: int = N) -> list[Spec]:
    """``n`` messages with unique seq, unicode bodies (every 7th one big), three keys, tags cycled."""
    tags = ["TagA", "TagB", None]
    out = []
    for i in range(n):
        body = f"{topic}|{i}|héllo wörld ✓ 世界"
        if i % 7 == 3:
            body += BIG
        spec: Spec = {
            "topic": topic,
            "body": body,
            "keys": f"key-{run}-{i} alt-{i} common-{run}",
            "props": {"seq": str(i), "run": run, "extra": f"v={i};ü 世界 ✓"},
        }
        if tags[i % 3]:
            spec["tags"] = tags[i % 3]
        out.append(spec)
    return out


def rmq_message(spec: Spec) -> Message:
    msg = Message(spec["topic"], spec["body"].encode(), tags=spec.get("tags"), keys=spec["keys"].split())
    for name, value in spec["props"].items():
        msg.put_user_property(name, value)
    return msg


def wait_route(broker: BrokerProcess, topic: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    req = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    while invoke_sync(broker.namesrv_addr, req, 3000).code != 0:
        assert time.monotonic() < deadline, f"topic {topic} never got a route"
        time.sleep(0.1)
        req = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


def commit_log_offset(offset_msg_id: str) -> int:
    """The commit log offset inside an IPv4 offset message id (host 4 + port 4 + offset 8 bytes, hex)."""
    assert len(offset_msg_id) == 32, offset_msg_id
    return int(offset_msg_id[16:], 16)


# --- rmq producers -> C++ consumers ----------------------------------------------------------------------


async def send_with_async_producer(namesrv: str, group: str, specs: list[Spec]) -> list[SendResult]:
    async with Producer(group, namesrv_addr=namesrv, instance_name=f"{group}-async") as producer:
        results = [await producer.send(rmq_message(s)) for s in specs[:-4]]
        batch = await producer.send([rmq_message(s) for s in specs[-4:]])  # no big body in a batch
    assert all(r.ok for r in results) and batch.ok
    # A batch answers one result: comma-joined ids, the queue, and the offset of its first message.
    ids, offset_ids = batch.msg_id.split(","), batch.offset_msg_id.split(",")
    assert len(ids) == len(offset_ids) == 4
    for j, (mid, oid) in enumerate(zip(ids, offset_ids, strict=True)):
        results.append(
            SendResult(
                send_status=batch.send_status,
                msg_id=mid,
                offset_msg_id=oid,
                message_queue=batch.message_queue,
                queue_offset=batch.queue_offset + j,
            )
        )
    return results


def send_with_sync_producer(namesrv: str, group: str, specs: list[Spec]) -> list[SendResult]:
    with rmq_sync.Producer(group, namesrv_addr=namesrv) as producer:
        half = len(specs) // 2
        results = [producer.send(rmq_message(s)) for s in specs[:half]]
        futures = [producer.send_async(rmq_message(s)) for s in specs[half:]]
        results += [f.result(30) for f in futures]
    assert all(r.ok for r in results)
    return results


def check_cpp_received(name: str, specs: list[Spec], results: list[SendResult], got: list[Spec]) -> None:
    seqs = Counter(m["props"].get("seq") for m in got)
    missing = sorted({s["props"]["seq"] for s in specs} - set(seqs), key=int)
    assert not missing, f"{name}: lost {len(missing)} of {len(specs)}: seqs {missing[:20]}"
    dups = [s for s, c in seqs.items() if c > 1]
    assert not dups and len(got) == len(specs), f"{name}: delivered twice: {dups[:20]}"
    by_seq = {m["props"]["seq"]: m for m in got}
    for spec, result in zip(specs, results, strict=True):
        seq = spec["props"]["seq"]
        m = by_seq[seq]
        where = f"{name} seq {seq}"
        assert m["topic"] == spec["topic"], where
        assert m["body"] == spec["body"], f"{where}: body {m['body'][:60]!r}"
        assert (m["tags"] or None) == spec.get("tags"), where
        assert m["keys"] == spec["keys"], where
        assert m["props"]["run"] == spec["props"]["run"], where
        assert m["props"]["extra"] == spec["props"]["extra"], where
        assert m["props"]["UNIQ_KEY"] == result.msg_id == m["msg_id"], where
        assert m["queue_id"] == result.message_queue.queue_id, where
        assert m["queue_offset"] == result.queue_offset, where
        assert m["commit_log_offset"] == commit_log_offset(result.offset_msg_id), where
        assert m["reconsume_times"] == 0, where


def test_rmq_producers_to_cpp_pull_and_push_consumers(broker: BrokerProcess, homes: Path) -> None:
    run = uuid.uuid4().hex[:8]
    topic = f"RmqToCpp_{run}"
    specs = make_specs(topic, run)
    half = len(specs) // 2
    results = asyncio.run(send_with_async_producer(broker.namesrv_addr, f"PG_ASYNC_{run}", specs[:half]))
    results += send_with_sync_producer(broker.namesrv_addr, f"PG_SYNC_{run}", specs[half:])
    assert len({r.msg_id for r in results}) == len(specs)
    assert len({r.message_queue.queue_id for r in results}) == 4  # spread over the topic's queues
    wait_route(broker, topic)

    common = ["--namesrv", broker.namesrv_addr, "--topic", topic, "--expect", str(len(specs))]
    pull = Driver(
        "cpp pull", ["pull", *common, "--group", f"CG_PULL_{run}", "--timeout", "60"], homes / f"pull-{run}"
    )
    push = Driver(
        "cpp push",
        ["consume-push", *common, "--group", f"CG_PUSH_{run}", "--timeout", "60"],
        homes / f"push-{run}",
    )
    try:
        pull.wait_event("done", 90)
        push.wait_event("stopped", 90)
        assert pull.close() == 0, pull.describe()
        assert push.close() == 0, push.describe()
    finally:
        pull.close()
        push.close()
    check_cpp_received("C++ PullConsumer", specs, results, pull.messages())
    check_cpp_received("C++ PushConsumer", specs, results, push.messages())


# --- C++ producer -> rmq consumers -----------------------------------------------------------------------


def check_rmq_received(
    name: str, specs: list[Spec], results: list[dict[str, Any]], got: list[MessageExt]
) -> None:
    seqs = Counter(m.get_property("seq") for m in got)
    missing = sorted({s["props"]["seq"] for s in specs} - set(seqs), key=int)
    assert not missing, f"{name}: lost {len(missing)} of {len(specs)}: seqs {missing[:20]}"
    dups = [s for s, c in seqs.items() if c > 1]
    assert not dups and len(got) == len(specs), f"{name}: delivered twice: {dups[:20]}"
    by_seq = {m.get_property("seq"): m for m in got}
    for spec, result in zip(specs, results, strict=True):
        seq = spec["props"]["seq"]
        m = by_seq[seq]
        where = f"{name} seq {seq}"
        assert m.topic == spec["topic"], where
        assert m.body == spec["body"].encode(), f"{where}: body {m.body[:60]!r}"
        assert bool(m.sys_flag & COMPRESSED_FLAG) == (len(spec["body"].encode()) >= 4096), where
        assert m.tags == spec.get("tags"), where
        assert m.keys == spec["keys"] and m.key_list == spec["keys"].split(), where
        for prop, value in spec["props"].items():
            assert m.properties.get(prop) == value, f"{where}: property {prop}: {m.properties.get(prop)!r}"
        assert m.msg_id == m.uniq_id == result["msg_id"], where
        assert m.queue_offset == result["offset"], where
        assert len(m.offset_msg_id) == 32 and int(m.offset_msg_id[16:], 16) == m.commit_log_offset, where
        assert m.reconsume_times == 0, where


def sync_lite_pull_all(
    namesrv: str, group: str, topic: str, n: int, timeout: float = 30.0
) -> list[MessageExt]:
    consumer = rmq_sync.LitePullConsumer(
        group, namesrv_addr=namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(topic, "*")
    got: list[MessageExt] = []
    with consumer:
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            got += consumer.poll(500)
        got += consumer.poll(300)  # anything beyond n shows up as a duplicate
    return got


async def test_cpp_producer_to_rmq_push_and_lite_pull_consumers(broker: BrokerProcess, homes: Path) -> None:
    run = uuid.uuid4().hex[:8]
    topic = f"CppToRmq_{run}"
    specs = make_specs(topic, run)
    for spec in specs:
        spec["props"][NON_ASCII_NAME] = f"значение {spec['props']['seq']}"
    producer = await asyncio.to_thread(CppProducer, broker.namesrv_addr, f"PG_CPP_{run}", homes / "producer")
    try:
        results = await asyncio.to_thread(producer.send_ok, "sync", specs)
    finally:
        producer.write(json.dumps({"op": "quit"}))
        assert await asyncio.to_thread(producer.close) == 0, producer.describe()
    assert len({r["msg_id"] for r in results}) == len(specs)
    await asyncio.to_thread(wait_route, broker, topic)

    received: list[MessageExt] = []
    done = asyncio.Event()
    loop = asyncio.get_running_loop()

    def record(msgs: list[MessageExt]) -> None:
        received.extend(msgs)
        if len(received) >= len(specs):
            done.set()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        loop.call_soon_threadsafe(record, list(msgs))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    push = PushConsumer(
        f"CG_RMQ_PUSH_{run}",
        namesrv_addr=broker.namesrv_addr,
        instance_name=f"interop-push-{run}",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    push.subscribe(topic, "*")
    push.register_message_listener(listener)
    await push.start()
    try:
        pulled = await asyncio.to_thread(
            sync_lite_pull_all, broker.namesrv_addr, f"CG_RMQ_LITE_{run}", topic, len(specs)
        )
        await asyncio.wait_for(done.wait(), 30)
        await asyncio.sleep(0.3)  # duplicates would show up now
    finally:
        await push.shutdown()
    check_rmq_received("rmq PushConsumer", specs, results, received)
    check_rmq_received("rmq LitePullConsumer (sync)", specs, results, pulled)
