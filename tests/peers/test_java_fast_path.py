"""The Java client 4.9.8's sends take rmq's SEND fast path (the broker's network thread answers them without
Python): sync, async and oneway SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE, each checked by the broker's
fastSend counters, then pulled back intact. Only rmq runs here (no Apache peer)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rmq.common.codes import RequestCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.brokerproc import BrokerProcess, start_broker
from tests.fastsend import assert_taken, delta, fast_send_stats
from tests.peers.apache import PeerLibs, compile_drivers, peer_libs, run_driver
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
