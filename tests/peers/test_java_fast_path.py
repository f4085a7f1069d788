"""The Java client 4.9.8's sends take rmq's SEND fast path (the broker's network thread answers them without
Python): sync, async and oneway SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE, each checked by the broker's
fastSend counters, then pulled back intact. So do the Java client 5.5.0's batches and sends
(``tests/peers/java/src5/rmqpeer5/Client5.java``): ROCKETMQ binary headers, answered in kind, and a
UNIQ_KEY of the batch's own, dropped so each message keeps its own. Only rmq runs here (no Apache peer)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync
from rmq.store import decode_records

from tests.brokerproc import BrokerProcess, start_broker
from tests.fastsend import assert_taken, delta, fast_send_stats
from tests.peers.apache import DRIVER_JVM, REPO, PeerLibs, compile_drivers, peer_libs, run_driver
from tests.peers.conftest import unique
from tests.peers.test_java_client import N, expected


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> tuple[PeerLibs, Path]:
    libs = peer_libs()
    return libs, compile_drivers(libs)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_broker(
        tmp_path_factory.mktemp("store"), "diskSpaceWarningLevelRatio=99", "diskMaxUsedSpaceRatio=95"
    )
    try:
        yield b
    finally:
        assert b.stop() == 0, "broker exited uncleanly:\n" + "".join(b.log[-40:])


def vet(broker: BrokerProcess, topic: str) -> None:
    """One send through Python creates the topic and lets the fast path take the next ones."""
    f = {
        "a": "PG",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": "0",
        "g": str(int(time.time() * 1000)),
    }
    f |= {"h": "0", "i": "", "j": "0", "k": "false", "m": "false"}
    r = invoke_sync(broker.broker_addr, create_request(RequestCode.SEND_MESSAGE_V2, f, b"warm"), 5000)
    assert r.code == 0, r.remark


@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "batch"])
def test_java_sends_take_the_fast_path(
    java: tuple[PeerLibs, Path], broker: BrokerProcess, tmp_path: Path, mode: str
) -> None:
    libs, classes = java
    topic, group = unique(f"JFast{mode}"), unique("JFastG")
    vet(broker, topic)
    before = fast_send_stats(broker.broker_addr)
    sent = run_driver(
        libs,
        classes,
        tmp_path,
        "send",
        namesrv=broker.namesrv_addr,
        topic=topic,
        group=group,
        count=N,
        mode=mode,
    )
    assert sent["errors"] == [], sent
    requests = 1 if mode == "batch" else N
    # Oneway sends have no answer: the JVM may be gone before the broker has read its last ones.
    deadline = time.monotonic() + 10
    while (d := delta(before, fast_send_stats(broker.broker_addr)))["taken"] + d["declined"] < requests:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert_taken(d, requests, N)
    got = run_driver(
        libs, classes, tmp_path, "pull", namesrv=broker.namesrv_addr, topic=topic, group=group, expect=N + 1
    )
    msgs = sorted((m for m in got["messages"] if m["body"] != "warm"), key=lambda m: m["body"])
    assert msgs == expected(topic)


def test_java_transaction_half_messages_take_the_fast_path(
    java: tuple[PeerLibs, Path], broker: BrokerProcess, tmp_path: Path
) -> None:
    """The Java TransactionProducer's half messages: the broker's first is parked by the Python path (it
    creates RMQ_SYS_TRANS_HALF_TOPIC), the others by the network thread; commits, rollbacks and check-backs
    come out as in ``test_java_client``'s run against both brokers."""
    libs, classes = java
    topic, group = unique("JFastTx"), unique("JFastTxG")
    vet(broker, topic)
    before = fast_send_stats(broker.broker_addr)
    got = run_driver(
        libs, classes, tmp_path, "transaction", namesrv=broker.namesrv_addr, topic=topic, group=group, count=9
    )
    d = delta(before, fast_send_stats(broker.broker_addr))
    assert d["taken"] + d["declined"] == 9, d
    assert d["Special"] == 1 and d["declined"] == d["Special"] + d["Queued"], d
    assert d["taken"] >= 7, d
    assert got["states"] == {"SEND_OK/COMMIT_MESSAGE": 3, "SEND_OK/ROLLBACK_MESSAGE": 3, "SEND_OK/UNKNOW": 3}
    assert got["checked"] == ["2", "5", "8"]
    # The committed ones (and vet()'s message, which has no seq).
    assert [m.get("seq") for m in got["messages"] if m["body"] != "warm"] == ["0", "2", "3", "5", "6", "8"]


CLIENT5_SRC = Path(__file__).resolve().parent / "java" / "src5" / "rmqpeer5" / "Client5.java"


@pytest.fixture(scope="module")
def java5() -> tuple[Path, Path]:
    """The Java client 5.5.0's jars (``scripts/peers example-5.5.0``, fetched on first use) and Client5
    compiled against them (cached by source)."""
    proc = subprocess.run(
        [str(REPO / "scripts" / "peers"), "example-5.5.0"], capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, f"scripts/peers example-5.5.0 failed:\n{proc.stderr[-3000:]}"
    libs = Path(proc.stdout.split()[-1])
    digest = hashlib.sha256(CLIENT5_SRC.read_bytes()).hexdigest()[:16]
    out = libs.parent / "client5" / digest
    if not (out / "complete").exists():
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        javac = subprocess.run(
            ["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(out), "-cp", f"{libs}/*", str(CLIENT5_SRC)],
            capture_output=True,
            text=True,
        )
        assert javac.returncode == 0, javac.stderr[-3000:]
        (out / "complete").touch()
    return libs, out


def client5(java5: tuple[Path, Path], home: Path, **args: object) -> dict:
    libs, classes = java5
    argv = ["java", *DRIVER_JVM, f"-Duser.home={home}", f"-Drocketmq.client.logRoot={home / 'logs'}"]
    argv += ["-cp", f"{classes}:{libs}/*", "rmqpeer5.Client5", *(f"{k}={v}" for k, v in args.items())]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, f"Client5 printed no result (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1])


def stored_at(broker: BrokerProcess, topic: str, queue_id: int, offset: int, n: int) -> list[tuple]:
    """The ``n`` records of ``topic`` from ``offset`` on one queue."""
    fields = {
        "consumerGroup": "J5Reader",
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": str(n),
        "sysFlag": "4",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "0",
    }
    deadline = time.monotonic() + 10
    while True:
        r = invoke_sync(broker.broker_addr, create_request(RequestCode.PULL_MESSAGE, fields), 5000)
        recs = decode_records(r.body) if r.code == ResponseCode.SUCCESS else []
        if len(recs) >= n or time.monotonic() > deadline:
            return recs[:n]
        time.sleep(0.05)


def test_java5_batches_and_sends_take_the_fast_path(
    java5: tuple[Path, Path], broker: BrokerProcess, tmp_path: Path
) -> None:
    topic, group = unique("J5Fast"), unique("J5FastG")
    vet(broker, topic)
    singles, batches, size = 4, 4, 16
    before = fast_send_stats(broker.broker_addr)
    out = client5(
        java5,
        tmp_path,
        namesrv=broker.namesrv_addr,
        topic=topic,
        group=group,
        singles=singles,
        batches=batches,
        size=size,
    )
    assert "error" not in out, out
    sends = out["sends"]
    assert [s["status"] for s in sends] == ["SEND_OK"] * (singles + batches), sends
    d = delta(before, fast_send_stats(broker.broker_addr))
    assert_taken(d, singles + batches, singles + batches * size)
    # Every batch the network thread took had a UNIQ_KEY of its own, dropped (Python drops the others').
    assert d["uniq_dropped"] >= batches - d["Queued"] and d["uniq_dropped"] <= batches, d
    # What the client was answered (binary headers) names what is stored: each message under its own id.
    for s in sends:
        ids, offset_ids = s["msgId"].split(","), s["offsetMsgId"].split(",")
        recs = stored_at(broker, topic, s["queueId"], s["queueOffset"], len(ids))
        n = sends.index(s)
        assert [r[12] for r in recs] == (
            [f"s{n}".encode()] if n < singles else [f"b{n - singles}-{i}".encode() for i in range(size)]
        ), s
        assert s["kind"] == ("single" if n < singles else "batch")
        props = [dict(kv.split("\x01", 1) for kv in r[13].split("\x02") if "\x01" in kv) for r in recs]
        assert [p["UNIQ_KEY"] for p in props] == ids, (s, props)
        assert len(set(ids)) == len(ids)
        assert [r[0] for r in recs] == [topic] * len(ids)
        assert [p.get("CLUSTER") for p in props] == ["DefaultCluster"] * len(ids)
        assert len(offset_ids) == len(ids)
