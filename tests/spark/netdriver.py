"""A Spark driver process for tests/spark/test_network_local_cluster.py: a ``local-cluster[2,1,1024]``
session (two executor JVMs, each with its Python workers) reading a cluster over the network.

``python -m tests.spark.netdriver batch NS TOPIC OUT``: a batch read written as parquet to OUT.
``python -m tests.spark.netdriver stream NS TOPIC OUT CKPT``: a stream (8 offsets per trigger) that runs
until it is killed, printing ``BATCH <rows>`` per micro-batch with rows.
``python -m tests.spark.netdriver available NS TOPIC OUT CKPT``: the same query, Trigger.AvailableNow.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import rmq.spark
from pyspark.sql import SparkSession


def session() -> SparkSession:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .appName("rmq-network-local-cluster")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        # The executors' Python imports rmq from where this process did (the installed wheel in CI),
        # never from the source tree, which has no native module on a clean checkout.
        .config("spark.executorEnv.PYTHONPATH", str(Path(rmq.__file__).resolve().parents[1]))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    rmq.spark.register(spark)
    return spark


def main(mode: str, ns: str, topic: str, out: str, ckpt: str | None = None) -> None:
    spark = session()
    if mode == "batch":
        df = spark.read.format("rocketmq").option("nameServer", ns).option("topics", topic).load()
        df.select("body", "broker_name").write.parquet(out)
        print("DONE", flush=True)
        return
    stream = (
        spark.readStream.format("rocketmq")
        .option("nameServer", ns)
        .option("topics", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 8)
        .load()
        .select("body", "broker_name")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", ckpt)
    )
    if mode == "available":
        stream.trigger(availableNow=True).start().awaitTermination()
        print("DONE", flush=True)
        return
    q = stream.trigger(processingTime="500 milliseconds").start()
    seen = 0
    while True:
        for p in q.recentProgress[seen:]:
            if p["numInputRows"]:
                print("BATCH", p["numInputRows"], flush=True)
        seen = len(q.recentProgress)
        time.sleep(0.2)


if __name__ == "__main__":
    main(*sys.argv[1:])
