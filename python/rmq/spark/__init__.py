"""PySpark readers of an rmq / RocketMQ 4.x store, without going through the broker.

::

    import rmq.spark
    rmq.spark.register(spark)
    df = spark.read.format("rocketmq").load("/path/to/store")

    stream = (spark.readStream.format("rocketmq")
              .option("maxRecordsPerTrigger", 100_000).load("/path/to/store"))

One row per stored message (``rmq.spark.spark_schema()``); decoding happens in Rust and reaches Spark
as Arrow record batches. Reading is read-only and safe while a broker writes: only committed records
are read. Options: ``rmq.spark.options``. UDFs for raw records: ``decode_record``,
``parse_properties``. Needs the ``spark`` extra (``pip install 'rmq[spark]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmq.spark.schema import spark_schema
from rmq.spark.source import RocketMQDataSource
from rmq.spark.udf import decode_record, parse_properties, record_struct_type

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "RocketMQDataSource",
    "decode_record",
    "parse_properties",
    "record_struct_type",
    "register",
    "spark_schema",
]


def register(spark: SparkSession) -> None:
    """Register the ``rocketmq`` format with `spark` and enable filter pushdown to Python data
    sources (``spark.sql.python.filterPushdown.enabled``), which the reader uses."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(RocketMQDataSource)
