"""The network source when a group's master dies: a broker group of a master and its slave (real
processes on a standalone name server); a stream reading with small micro-batches goes on from the slave
once the master is SIGKILLed (nothing lost or doubled), through the Python network source and through the
JVM network reader side by side, and a batch read afterwards is served by the slave (both readers)."""

from __future__ import annotations

import time
from pathlib import Path

import rmq.spark
from pyspark.sql import SparkSession

from tests.spark.helpers import wait_for
from tests.spark.netcluster import CLUSTER, Cluster, hashes, start_cluster, start_slave

TOPIC = "NetHA"


def test_reads_go_on_from_the_slave_when_the_master_dies(spark: SparkSession, tmp_path: Path) -> None:
    cluster: Cluster = start_cluster(tmp_path, ["broker-a"])
    master = cluster.brokers["broker-a"]
    try:
        cluster.create(TOPIC)
        group = ("brokerName=broker-a", f"brokerClusterName={CLUSTER}")
        cluster.slaves["broker-a"] = start_slave(tmp_path / "broker-a-s", *group, namesrv=cluster.ns)
        sent = cluster.send(TOPIC, 60, "ha")
        cluster.wait_replicated(TOPIC)

        def stream(df, name: str):  # type: ignore[no-untyped-def]
            return (
                df.select("body", "broker_name", "queue_id", "queue_offset")
                .writeStream.format("parquet")
                .option("path", str(tmp_path / f"{name}-out"))
                .option("checkpointLocation", str(tmp_path / f"{name}-ckpt"))
                .trigger(processingTime="500 milliseconds")
                .start()
            )

        opts = {"startingOffsets": "earliest", "maxOffsetsPerTrigger": "8", "pullTimeoutMs": "3000"}
        python = spark.readStream.format("rocketmq").option("nameServer", cluster.ns).option("topics", TOPIC)
        queries = {
            "python": stream(python.options(**opts).load(), "python"),
            # The JVM network reader (rmq.spark.read_stream) beside it, on the same cluster.
            "jvm": stream(rmq.spark.read_stream(spark, nameServer=cluster.ns, topics=TOPIC, **opts), "jvm"),
        }

        def rows(q) -> int:  # type: ignore[no-untyped-def]
            return sum(p["numInputRows"] for p in q.recentProgress)

        try:
            wait_for(lambda: all(rows(q) >= 8 for q in queries.values()), timeout=120)
            assert all(rows(q) < 60 for q in queries.values()), "both streams still have rows to read"
            master.kill()
            wait_for(lambda: all(rows(q) >= 60 for q in queries.values()), timeout=180)
            time.sleep(1)  # a few more triggers: nothing more may arrive
            assert all(q.exception() is None for q in queries.values())
        finally:
            for q in queries.values():
                q.stop()
        for name in queries:
            got = [bytes(r.body) for r in spark.read.parquet(str(tmp_path / f"{name}-out")).collect()]
            assert hashes(got) == hashes([m.body for m in sent]), name

        df = spark.read.format("rocketmq").option("nameServer", cluster.ns).option("topics", TOPIC).load()
        rows_ = df.select("body", "broker_name").collect()
        assert hashes([bytes(r.body) for r in rows_]) == hashes([m.body for m in sent])
        # The JVM network reader plans and pulls from the slave too.
        jvm = rmq.spark.load(spark, nameServer=cluster.ns, topics=TOPIC, pullTimeoutMs=3000, columns="body")
        assert hashes([bytes(r.body) for r in jvm.collect()]) == hashes([m.body for m in sent])
    finally:
        cluster.stop()
