"""The network source when a group's master dies: a broker group of a master and its slave (real
processes on a standalone name server); a stream reading with small micro-batches goes on from the slave
once the master is SIGKILLed (nothing lost or doubled), and a batch read afterwards is served by the slave,
as are the JVM network reader's batch read and stream."""

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

        out, ckpt = tmp_path / "out", tmp_path / "ckpt"
        q = (
            spark.readStream.format("rocketmq")
            .option("nameServer", cluster.ns)
            .option("topics", TOPIC)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", 8)
            .option("pullTimeoutMs", 3000)
            .load()
            .select("body", "broker_name", "queue_id", "queue_offset")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ckpt))
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        try:
            wait_for(lambda: sum(p["numInputRows"] for p in q.recentProgress) >= 8, timeout=120)
            master.kill()
            wait_for(lambda: sum(p["numInputRows"] for p in q.recentProgress) >= 60, timeout=180)
            time.sleep(1)  # a few more triggers: nothing more may arrive
            assert q.exception() is None
        finally:
            q.stop()
        got = [bytes(r.body) for r in spark.read.parquet(str(out)).collect()]
        assert hashes(got) == hashes([m.body for m in sent])

        df = spark.read.format("rocketmq").option("nameServer", cluster.ns).option("topics", TOPIC).load()
        rows = df.select("body", "broker_name").collect()
        assert hashes([bytes(r.body) for r in rows]) == hashes([m.body for m in sent])

        # The JVM network reader plans and pulls from the slave too: a batch read, and a stream to the end.
        jvm = rmq.spark.load(spark, nameServer=cluster.ns, topics=TOPIC, pullTimeoutMs=3000, columns="body")
        assert hashes([bytes(r.body) for r in jvm.collect()]) == hashes([m.body for m in sent])
        jvm_out, jvm_ckpt = tmp_path / "jvm-out", tmp_path / "jvm-ckpt"
        js = (
            rmq.spark.read_stream(spark, nameServer=cluster.ns, topics=TOPIC, startingOffsets="earliest")
            .select("body")
            .writeStream.format("parquet")
            .option("path", str(jvm_out))
            .option("checkpointLocation", str(jvm_ckpt))
            .trigger(availableNow=True)
            .start()
        )
        js.awaitTermination()
        got = [bytes(r.body) for r in spark.read.parquet(str(jvm_out)).collect()]
        assert hashes(got) == hashes([m.body for m in sent])
    finally:
        cluster.stop()
