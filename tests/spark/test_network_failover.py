"""The network source when a group's master dies: a broker group of a master and its slave (real
processes on a standalone name server); a stream reading with small micro-batches goes on from the slave
once the master is SIGKILLed (nothing lost or doubled), and a batch read afterwards is served by the slave."""

from __future__ import annotations

import time
from pathlib import Path

from pyspark.sql import SparkSession
from rmq.common.codes import RequestCode

from tests.brokerproc import start_broker
from tests.spark.helpers import wait_for
from tests.spark.netcluster import CLUSTER, Cluster, call, hashes, start_cluster

TOPIC = "NetHA"


def max_offsets(addr: str, queues: int = 4) -> list[int]:
    return [
        int(call(addr, RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": str(q)})["offset"])
        for q in range(queues)
    ]


def test_reads_go_on_from_the_slave_when_the_master_dies(spark: SparkSession, tmp_path: Path) -> None:
    cluster: Cluster = start_cluster(tmp_path, ["broker-a"])
    master = cluster.brokers["broker-a"]
    slave = None
    try:
        cluster.create(TOPIC)
        slave = start_broker(
            tmp_path / "broker-a-s",
            "brokerName=broker-a",
            f"brokerClusterName={CLUSTER}",
            "brokerRole=SLAVE",
            "brokerId=1",
            namesrv=cluster.ns,
        )
        sent = cluster.send(TOPIC, 60, "ha")
        slave_addr = slave.broker_addr
        wait_for(lambda: max_offsets(slave_addr) == max_offsets(master.broker_addr), timeout=60)

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
    finally:
        if slave is not None:
            slave.stop()
        cluster.stop()
