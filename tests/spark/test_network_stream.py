"""spark.readStream with the network source against two broker groups (real processes): per-queue offsets
in the checkpoint, a query stopped and restarted reads exactly the rest, Trigger.AvailableNow,
maxOffsetsPerTrigger, minOffsetsPerTrigger, consumerGroup offsets committed to the brokers, lag in the
progress report."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery
from rmq.spark.network.stream import LAG_KEY

from tests.spark.helpers import wait_for
from tests.spark.netcluster import Cluster, consumer_offset, hashes, start_cluster

TOPIC = "NetStream"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("netstream"), ["broker-a", "broker-b"])
    try:
        yield c
    finally:
        c.stop()


def start(
    spark: SparkSession,
    cluster: Cluster,
    topic: str,
    out: Path,
    ckpt: Path,
    trigger: dict[str, Any],
    **opts: Any,
) -> StreamingQuery:
    r = spark.readStream.format("rocketmq").option("nameServer", cluster.ns).option("topics", topic)
    for k, v in opts.items():
        r = r.option(k, str(v))
    df = r.load().select("topic", "broker_name", "queue_id", "queue_offset", "body")
    return (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(**trigger)
        .start()
    )


def rows_in(q: StreamingQuery) -> int:
    return sum(p["numInputRows"] for p in q.recentProgress)


def bodies(spark: SparkSession, out: Path) -> list[bytes]:
    return [bytes(r.body) for r in spark.read.parquet(str(out)).select("body").collect()]


def test_stream_restarted_on_its_checkpoint_reads_exactly_the_rest(
    spark: SparkSession, cluster: Cluster, tmp_path: Path
) -> None:
    cluster.create(TOPIC)
    first = cluster.send(TOPIC, 40, "s1")
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    trig = {"processingTime": "300 milliseconds"}
    q = start(spark, cluster, TOPIC, out, ckpt, trig, startingOffsets="earliest", consumerGroup="cg_spark")
    try:
        wait_for(lambda: rows_in(q) >= 40, timeout=120)
        second = cluster.send(TOPIC, 30, "s2")  # while it runs
        wait_for(lambda: rows_in(q) >= 70, timeout=120)
        progress = [p for p in q.recentProgress if p["numInputRows"]]
        src = progress[-1]["sources"][0]
        end = json.loads(src["endOffset"])
        assert set(end[TOPIC]) == {"broker-a", "broker-b"} and len(end[TOPIC]["broker-a"]) == 4
        latest = json.loads(src["latestOffset"])
        assert set(latest[LAG_KEY]) == {"min", "avg", "max"} and latest[LAG_KEY]["max"] >= 0

        # consumerGroup: the brokers get each queue's end offset once the batch is done (at the next
        # trigger), so consumerProgress shows the query's lag.
        def committed() -> dict[str, dict[str, int]]:
            return {
                b: {
                    qid: consumer_offset(cluster.brokers[b].broker_addr, "cg_spark", TOPIC, b, int(qid))
                    for qid in qs
                }
                for b, qs in end[TOPIC].items()
            }

        wait_for(lambda: committed() == end[TOPIC], timeout=30)
    finally:
        q.stop()

    third = cluster.send(TOPIC, 25, "s3")  # while it is stopped
    q2 = start(spark, cluster, TOPIC, out, ckpt, {"availableNow": True})
    q2.awaitTermination(180)
    assert hashes(bodies(spark, out)) == hashes([m.body for m in first + second + third])
    assert max(hashes(bodies(spark, out)).values()) == 1


def test_available_now_with_max_offsets_per_trigger(
    spark: SparkSession, cluster: Cluster, tmp_path: Path
) -> None:
    topic = "NetCapped"
    cluster.create(topic)
    sent = cluster.send(topic, 50, "c")
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    q = start(spark, cluster, topic, out, ckpt, {"availableNow": True}, startingOffsets="earliest",
              maxOffsetsPerTrigger=12)  # fmt: skip
    q.awaitTermination(180)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 50 and max(sizes) <= 12 and len(sizes) >= 5
    assert hashes(bodies(spark, out)) == hashes([m.body for m in sent])


def test_min_offsets_per_trigger_waits(spark: SparkSession, cluster: Cluster, tmp_path: Path) -> None:
    topic = "NetMin"
    cluster.create(topic)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    q = start(spark, cluster, topic, out, ckpt, {"processingTime": "200 milliseconds"},
              startingOffsets="earliest", minOffsetsPerTrigger=20, maxTriggerDelay="1h")  # fmt: skip
    try:
        cluster.send(topic, 5, "few")
        wait_for(lambda: len(q.recentProgress) >= 5, timeout=120)
        assert rows_in(q) == 0  # 5 < 20 and the hour has not passed
        cluster.send(topic, 20, "more")
        wait_for(lambda: rows_in(q) >= 25, timeout=120)
    finally:
        q.stop()
    assert len(bodies(spark, out)) == 25
