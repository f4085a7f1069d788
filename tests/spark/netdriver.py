"""The network reads of tests/spark/test_network_local_cluster.py, run in a ``local-cluster[2,1,1024]``
driver process (tests/spark/sink_child.py, beside its sink query): batch reads written as parquet, a topic
copied by the JVM reader and sink, and a
stream (8 offsets per trigger) written as parquet, whose micro-batches with rows are printed as
``BATCH <rows>``."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery


def cluster_settings() -> dict[str, str]:
    """The session settings of ``local-cluster[2,1,1024]``: two executor JVMs of one core and 1 GiB each.
    The executors' Python imports rmq from where this process did (the installed wheel in CI), never from
    the source tree, which has no native module on a clean checkout."""
    import rmq.spark

    rmq_path = str(Path(rmq.__file__).resolve().parents[1])
    return {
        "spark.master": "local-cluster[2,1,1024]",
        "spark.executorEnv.PYTHONPATH": rmq_path,
        "spark.jars": rmq.spark.jar_path() or "",  # the JVM network reader, shipped to the executors
    }


def batch_reads(spark: SparkSession, args: list[str]) -> None:
    """`args`: NS, TOPIC, OUT, ...: each topic read from its name server, written as parquet to OUT, by the
    Python network source, and to OUT-jvm by the JVM network reader (``rmq.spark.load``)."""
    import rmq.spark
    from rmq.spark.jvm import JVM_NET_SOURCE, jvm_class_available

    if not jvm_class_available(spark, JVM_NET_SOURCE):
        raise RuntimeError("the session cannot load rmq's JVM network reader (spark.jars)")
    for ns, topic, out in zip(args[::3], args[1::3], args[2::3], strict=True):
        df = spark.read.format("rocketmq").option("nameServer", ns).option("topics", topic).load()
        df.select("body", "broker_name").write.parquet(out)
        jvm = rmq.spark.load(spark, nameServer=ns, topics=topic, columns="body,broker_name")
        jvm.write.parquet(out + "-jvm")


def copy_topic(spark: SparkSession, args: list[str]) -> None:
    """`args`: NS, SRC, DST: every message of SRC read by the JVM network reader and written to DST by the
    JVM sink (``rmq.spark.save``), both in the executors."""
    import rmq.spark
    from rmq.spark.jvm import JVM_SINK, jvm_class_available

    ns, src, dst = args
    if not jvm_class_available(spark, JVM_SINK):
        raise RuntimeError("the session cannot load rmq's JVM sink (spark.jars)")
    df = rmq.spark.load(spark, nameServer=ns, topics=src, columns="body,tags")
    rmq.spark.save(df.repartition(2), nameServer=ns, topic=dst)


def read_stream(
    spark: SparkSession, ns: str, topic: str, out: str, ckpt: str, available: bool
) -> StreamingQuery:
    """The stream from the earliest offsets (or its checkpoint), Trigger.AvailableNow if `available`."""
    stream = (
        spark.readStream.format("rocketmq")
        .option("nameServer", ns)
        .option("topics", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 8)
        .option("pullTimeoutMs", 3000)  # a pull from a killed master gives up soon, for its slave
        .load()
        .select("body", "broker_name")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", ckpt)
    )
    if available:
        return stream.trigger(availableNow=True).start()
    return stream.trigger(processingTime="500 milliseconds").start()


class Progress:
    """Prints ``BATCH <rows>`` for each micro-batch of `query` with rows, when :meth:`report` is called."""

    def __init__(self, query: StreamingQuery) -> None:
        self.query = query
        self.seen = 0
        self.batches = 0

    def report(self) -> None:
        progress = self.query.recentProgress
        for p in progress[self.seen :]:
            if p["numInputRows"]:
                print("BATCH", p["numInputRows"], flush=True)
                self.batches += 1
        self.seen = len(progress)
