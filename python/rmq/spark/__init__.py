"""PySpark readers of rmq / RocketMQ 4.x topics: over the network from a live cluster, or from a store
directory without going through the broker.

::

    import rmq.spark
    rmq.spark.register(spark)
    df = spark.read.format("rocketmq").load("/path/to/store")

    stream = (spark.readStream.format("rocketmq")
              .option("maxRecordsPerTrigger", 100_000).load("/path/to/store"))

    df = (spark.read.format("rocketmq").option("nameServer", "ns1:9876;ns2:9876")
          .option("topics", "Orders").load())                # over the network: rmq.spark.network

One row per stored message (``rmq.spark.spark_schema()``; the network source adds ``broker_name``);
decoding happens in Rust and reaches Spark as Arrow record batches. Reading is read-only and safe while
a broker writes: only committed records are read. Options: ``rmq.spark.options`` (store directory),
``rmq.spark.network.options`` (network). UDFs for raw records: ``decode_record``, ``decode_records``,
``parse_properties``. Needs the ``spark`` extra (``pip install 'rmq[spark]'``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmq.common.lazy import lazy_exports

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from rmq.spark.jvm import jar_path, jvm_reader_available, load, read_stream
    from rmq.spark.schema import spark_schema
    from rmq.spark.sink.jvm import save, write_stream
    from rmq.spark.source import RocketMQDataSource
    from rmq.spark.udf import decode_record, decode_records, parse_properties, record_struct_type

# Imported on first use: Spark starts a fresh Python process for each write job's planning and commit
# (and for each streaming query), which unpickles the data source from rmq.spark.source and so imports
# this package; importing only what that process uses keeps its start short.
_LAZY = {
    "RocketMQDataSource": "rmq.spark.source",
    "RocketMQDataSourceNoPushdown": "rmq.spark.source",
    "decode_record": "rmq.spark.udf",
    "decode_records": "rmq.spark.udf",
    "parse_properties": "rmq.spark.udf",
    "record_struct_type": "rmq.spark.udf",
    "jar_path": "rmq.spark.jvm",
    "jvm_reader_available": "rmq.spark.jvm",
    "load": "rmq.spark.jvm",
    "read_stream": "rmq.spark.jvm",
    "spark_schema": "rmq.spark.schema",
    "save": "rmq.spark.sink.jvm",
    "write_stream": "rmq.spark.sink.jvm",
}


__getattr__ = lazy_exports("rmq.spark", globals(), _LAZY)


__all__ = [
    "RocketMQDataSource",
    "decode_record",
    "decode_records",
    "jar_path",
    "jvm_reader_available",
    "load",
    "parse_properties",
    "read_stream",
    "record_struct_type",
    "register",
    "save",
    "spark_schema",
    "write_stream",
]


def register(spark: SparkSession, *, filter_pushdown: bool = False) -> None:
    """Register the ``rocketmq`` format with `spark`.

    ``filter_pushdown=True`` also turns on Spark's filter pushdown to Python data sources
    (``spark.sql.python.filterPushdown.enabled``), which the reader uses to plan a ``where`` on topic,
    queue, offsets or times from ConsumeQueues. It is off by default because pyspark 4.3 gives wrong
    answers with it: the reader planned for a query whose filters were pushed down is kept and reused
    by a later query over the same DataFrame that pushes none (``df.where("topic = 'A'").count()``
    then ``df.count()`` counts topic ``A`` only). With it on, load one DataFrame per query. The
    ``topics``, ``queueIds``, ``startOffset``, ``startTime``... options plan reads the same way and are
    always safe. `register` sets that Spark option either way."""
    if filter_pushdown:
        log.warning(
            "rocketmq source: Spark filter pushdown on; pyspark 4.3 reuses a pushed-down reader for a "
            "later query over the same DataFrame that pushes no filter, so load one DataFrame per query"
        )
    from rmq.spark.source import RocketMQDataSource, RocketMQDataSourceNoPushdown

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true" if filter_pushdown else "false")
    spark.dataSource.register(RocketMQDataSource if filter_pushdown else RocketMQDataSourceNoPushdown)
