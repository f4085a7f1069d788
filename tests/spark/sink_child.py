"""A streaming query writing to RocketMQ exactly-once, run as its own process (driver, JVM and Python
workers in one process group) so a test can SIGKILL all of it mid-batch and start it again.

``python -m tests.spark.sink_child NAMESRV TOPIC SRC_DIR CHECKPOINT STOP_FILE SLOW_S [OPTION=VALUE...]``:
reads JSON files ``{"body": ...}`` from SRC_DIR, two files per batch and one task per file; each row
whose body starts with ``slow`` takes SLOW_S seconds (a Python UDF), so a batch with a fast and a slow
file has the fast task's half messages stored while the slow task still runs; runs until STOP_FILE
exists, then stops the query and exits 0.

An OPTION is a sink option, but for these (tests/spark/netdriver.py's reads in the same session):
``spark.*``, a session setting (e.g. ``spark.master``); ``read.batch=NS,TOPIC,OUT[,NS,TOPIC,OUT...]``,
batch reads done first (then ``READS-DONE``); ``read.copy=NS,SRC,DST``, SRC copied to DST by the JVM
reader and sink (then ``COPY-DONE``); ``read.stream=NS,TOPIC,OUT,CKPT``, a stream started before
the sink query (which starts after the stream's first micro-batch with rows); ``read.available=NS,TOPIC,
OUT,CKPT``, the stream run with Trigger.AvailableNow once the sink query has stopped (after
``READ-RESTARTED``; ``READ-DONE`` when it ends). The streams print ``BATCH <rows>`` per micro-batch with rows.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    namesrv, topic, src, ck, stop_file, slow_s = argv[:6]
    extra = dict(a.split("=", 1) for a in argv[6:])
    conf = {k: extra.pop(k) for k in [k for k in extra if k.startswith("spark.")]}
    reads = {k[5:]: extra.pop(k).split(",") for k in [k for k in extra if k.startswith("read.")]}
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import rmq.spark
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from tests.spark.netdriver import Progress, batch_reads, copy_topic, read_stream

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("rmq-sink-child")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "768m")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.files.maxPartitionBytes", "1024")  # one task per file
    )
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    rmq.spark.register(spark)
    delay = float(slow_s)
    if "batch" in reads:
        batch_reads(spark, reads["batch"])
        print("READS-DONE", flush=True)
    if "copy" in reads:
        copy_topic(spark, reads["copy"])
        print("COPY-DONE", flush=True)
    reader = None
    if "stream" in reads:
        reader = Progress(read_stream(spark, *reads["stream"], available=False))
        while not reader.batches:
            if reader.query.awaitTermination(0.2):  # raises the stream's error, if it failed
                raise RuntimeError("the read stream ended")
            reader.report()

    @F.udf("string")
    def slow(body: str) -> str:
        if body.startswith("slow"):
            time.sleep(delay)
        return body

    stream = spark.readStream.schema("body string").option("maxFilesPerTrigger", 2).json(src)
    w = (
        stream.select(slow("body").alias("body"))
        .writeStream.format("rocketmq")
        .option("nameServer", namesrv)
        .option("topic", topic)
        .option("deliveryGuarantee", "exactly_once")
        .option("checkpointLocation", ck)
    )
    for k, v in extra.items():
        w = w.option(k, v)
    query = w.trigger(processingTime="500 milliseconds").start()
    print("CHILD-STARTED", flush=True)
    while not Path(stop_file).exists():
        if not query.isActive:
            print(f"CHILD-QUERY-DIED {query.exception()}", flush=True)
            return 1
        if reader is not None:
            reader.report()
        time.sleep(0.2)
    query.stop()
    if "available" in reads:
        print("READ-RESTARTED", flush=True)
        reader = Progress(read_stream(spark, *reads["available"], available=True))
        while not reader.query.awaitTermination(0.2):  # raises the stream's error, if it failed
            reader.report()
        reader.report()
        print("READ-DONE", flush=True)
    spark.stop()
    print("CHILD-STOPPED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
