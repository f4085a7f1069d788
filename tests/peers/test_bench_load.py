"""The Java load program of ``benches/apache_bench.py`` (``rmqpeer.BenchLoad``) counts what it says: a
backlog of exactly ``count`` messages, drained whole by the push and the lite pull consumer, and a windowed
produce run that reports its sends and latencies. Against rmq only (the bench runs it against both); no
figure is asserted, only counts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rmq.common.codes import RequestCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.brokerproc import BrokerProcess, start_broker
from tests.peers.apache import PeerLibs, compile_drivers, peer_libs, run_driver

TOPIC = "BenchLoadTopic"
COUNT = 600


@pytest.fixture(scope="module")
def java() -> tuple[PeerLibs, Path]:
    libs = peer_libs()
    return libs, compile_drivers(libs)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_broker(tmp_path_factory.mktemp("store"), "diskMaxUsedSpaceRatio=95")
    fields = {
        "topic": TOPIC,
        "defaultTopic": "TBW102",
        "readQueueNums": "4",
        "writeQueueNums": "4",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    resp = invoke_sync(b.broker_addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), 5000)
    assert resp.code == 0, resp.remark
    try:
        yield b
    finally:
        assert b.stop() == 0, "broker exited uncleanly:\n" + "".join(b.log[-40:])


def bench_load(java: tuple[PeerLibs, Path], home: Path, mode: str, **args: object) -> dict:
    libs, classes = java
    return run_driver(libs, classes, home, mode, main="rmqpeer.BenchLoad", **args)


def test_a_backlog_of_count_messages_is_drained_whole_by_both_consumers(
    java: tuple[PeerLibs, Path], broker: BrokerProcess, tmp_path: Path
) -> None:
    ns = broker.namesrv_addr
    out = bench_load(java, tmp_path, "produce", namesrv=ns, topic=TOPIC, threads=8, producers=2, count=COUNT)
    assert out["failed"] == 0, out
    assert out["sent_ok"] == COUNT
    # ...and each producer instance sent one message before its threads started (routes, connections).
    stored = sum(
        int(
            invoke_sync(
                broker.broker_addr,
                create_request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": str(q)}),
            ).ext_fields["offset"]
        )
        for q in range(4)
    )
    assert stored == COUNT + 2
    for kind in ("push", "lite"):
        got = bench_load(
            java,
            tmp_path,
            "consume",
            namesrv=ns,
            topic=TOPIC,
            group=f"bl_{kind}",
            count=stored,
            kind=kind,
            warm=1,
        )
        assert got["finished"] is True, got
        assert got["msgs"] == stored, got
        # The measured drain came after a whole unmeasured one, by another group.
        assert got["warm_msgs"] == [stored], got


def test_a_windowed_produce_run_reports_its_sends_and_latencies(
    java: tuple[PeerLibs, Path], broker: BrokerProcess, tmp_path: Path
) -> None:
    out = bench_load(
        java, tmp_path, "produce", namesrv=broker.namesrv_addr, topic=TOPIC, threads=4, warmup=0.5, duration=1
    )
    assert out["failed"] == 0, out
    assert out["statuses"].keys() == {"SEND_OK"}
    assert 0 < out["msgs"] <= out["sent_ok"]
    assert 0 < out["p50_us"] <= out["p99_us"]
