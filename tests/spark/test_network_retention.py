"""failOnDataLoss in the network source: a broker whose retention deleted the first messages of a queue
(64 KiB CommitLog files, fileReservedTime=0, DELETE_EXPIRED_COMMITLOG), read from offset 0 by a batch
and by a stream: an error naming topic, broker, queue and offsets, or (false) the rest read and the gap
skipped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from rmq.client import Message
from rmq.client.sync import Producer
from rmq.common.codes import RequestCode

from tests.spark.helpers import wait_for
from tests.spark.netcluster import Cluster, call, start_cluster

TOPIC = "NetRetained"
N = 300


@pytest.fixture(scope="module")
def retained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, int]]:
    c = start_cluster(
        tmp_path_factory.mktemp("netret"),
        ["broker-r"],
        "mappedFileSizeCommitLog=65536",
        "fileReservedTime=0",
        "deleteWhen=99",
        "cleanResourceInterval=20",
        "deleteCommitLogFilesInterval=0",
    )
    try:
        c.create(TOPIC, queues=1)
        addr = c.brokers["broker-r"].broker_addr
        with Producer("pg_ret", namesrv_addr=c.ns) as p:
            for i in range(N):
                assert p.send(Message(TOPIC, b"%04d" % i + b"x" * 1000)).ok
        call(addr, RequestCode.DELETE_EXPIRED_COMMITLOG, {})

        def min_offset() -> int:
            return int(call(addr, RequestCode.GET_MIN_OFFSET, {"topic": TOPIC, "queueId": "0"})["offset"])

        wait_for(lambda: min_offset() > 0, timeout=30)
        yield c, min_offset()
    finally:
        c.stop()


FROM_ZERO = json.dumps({TOPIC: {"broker-r": {"0": 0}}})


def test_batch_fails_or_skips(spark: SparkSession, retained: tuple[Cluster, int]) -> None:
    cluster, lowest = retained

    def read(fail: str) -> list[int]:
        df = (
            spark.read.format("rocketmq")
            .option("nameServer", cluster.ns)
            .option("topics", TOPIC)
            .option("startingOffsets", FROM_ZERO)
            .option("failOnDataLoss", fail)
            .load()
        )
        return sorted(r.queue_offset for r in df.select("queue_offset").collect())

    with pytest.raises(Exception) as e:
        read("true")
    text = str(e.value)
    assert f"topic {TOPIC} broker broker-r queue 0: offsets [0, {lowest})" in text
    assert "failOnDataLoss=false" in text
    assert read("false") == list(range(lowest, N))


def test_stream_fails_or_skips(spark: SparkSession, retained: tuple[Cluster, int], tmp_path: Path) -> None:
    cluster, lowest = retained

    def run(fail: str, name: str) -> tuple[list[int], BaseException | None]:
        out, ckpt = tmp_path / f"{name}-out", tmp_path / f"{name}-ckpt"
        q = (
            spark.readStream.format("rocketmq")
            .option("nameServer", cluster.ns)
            .option("topics", TOPIC)
            .option("startingOffsets", FROM_ZERO)
            .option("failOnDataLoss", fail)
            .load()
            .select("queue_offset")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        try:
            q.awaitTermination(180)
        except Exception as exc:
            return [], exc
        return sorted(r.queue_offset for r in spark.read.parquet(str(out)).collect()), None

    rows, exc = run("true", "fail")
    assert exc is not None and f"offsets [0, {lowest})" in str(exc) and TOPIC in str(exc)
    rows, exc = run("false", "skip")
    assert exc is None and rows == list(range(lowest, N))
