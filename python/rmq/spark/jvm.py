"""``rmq.spark.load``: batch reads through the JVM reader, planned here by rmq's Rust reader.

The JVM reader (``org.rmq.spark.RocketMQSource``, in the jar ``jar_path()`` names) is a DataSource V2 batch
source: it decodes records into Spark's own columnar batches in the executors and reads only the columns a
query needs, with no Python worker and no Arrow hop. Planning stays here: the committed end of the CommitLog
and splits cut on record boundaries come from the Rust reader, as for the Python source, and travel to the
JVM reader as options. The DataFrame reads what was committed when ``load`` planned it.

Reads the JVM reader does not serve (row filters given as options, ``failOnDataLoss=false``, or a Spark
without the jar on its classpath) go to the Python source (``spark.read.format("rocketmq")``), with a log
line saying why; both give the same rows.

A read over the network (a ``nameServer`` option, no path; ``read_stream`` for a streaming one) goes to the
JVM network reader (``org.rmq.spark.NetSource``, same jar) when it serves the options: topics by name,
``earliest`` / ``latest`` offsets, no ``minOffsetsPerTrigger``, no TLS client certificate
(:func:`network_python_only_reason`); it plans in the driver's JVM (the queues' offsets from the brokers)
and pulls in the executors, decoding as the store-direct JVM reader does. Other network reads go to the
Python network source (``rmq.spark.network``), with the reason logged; both give the same rows.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from rmq.spark.network.options import NetworkSpec, is_network, parse_network_options
from rmq.spark.network.reading import network_schema
from rmq.spark.options import FilterSpec, ReadSpec, parse_options
from rmq.spark.schema import columns_option, spark_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "JVM_NET_SOURCE",
    "JVM_SINK",
    "JVM_SOURCE",
    "ensure_registered",
    "jar_path",
    "jvm_class_available",
    "jvm_reader_available",
    "load",
    "network_python_only_reason",
    "no_jar_reason",
    "python_only_reason",
    "read_stream",
    "security_options",
]

log = logging.getLogger(__name__)

JVM_SOURCE = "org.rmq.spark.RocketMQSource"
"""The JVM reader's class, as ``spark.read.format`` takes it."""

JVM_NET_SOURCE = "org.rmq.spark.NetSource"
"""The JVM network reader's class (same jar): topics of a live cluster, batch and streaming."""

JVM_SINK = "org.rmq.spark.sink.RocketMQSink"
"""The JVM sink's class (same jar), as ``df.write.format`` takes it (``rmq.spark.save`` uses it)."""

_JAR = Path(__file__).with_name("jars") / "rmq-spark.jar"

# Options the JVM path takes as they are (the rest need the Python source).
_JVM_OPTIONS = frozenset(
    {
        *("path", "paths", "commitlogdir", "checkcrc", "decompress", "slicesize", "batchsize", "columns"),
        *("pushdown", "pushfilters", "failondataloss"),
    }
)


def jar_path() -> str | None:
    """The jar of the JVM reader inside this install (``None`` when the wheel was built without it). Put it on
    Spark's classpath when the session is built: ``SparkSession.builder.config("spark.jars", jar_path())``."""
    return str(_JAR) if _JAR.is_file() else None


def jvm_class_available(spark: SparkSession, name: str) -> bool:
    """Whether `spark`'s driver can load the class `name` (rmq's jar is on the classpath)."""
    try:
        jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
        return bool(jvm.org.apache.spark.util.Utils.classIsLoadable(name))
    except Exception:  # Spark Connect, or a JVM that is gone: no JVM classes
        return False


def jvm_reader_available(spark: SparkSession) -> bool:
    """Whether `spark`'s driver can load the JVM reader (its jar is on the classpath)."""
    return jvm_class_available(spark, JVM_SOURCE)


def python_only_reason(spec: ReadSpec, options: dict[str, str]) -> str | None:
    """Why these options need the Python source, or ``None`` when the JVM reader serves them."""
    others = sorted(k for k in options if k.lower() not in _JVM_OPTIONS)
    if others:
        return f"option(s) {', '.join(others)} filter rows or stream, which only the Python source does"
    if not spec.fail_on_data_loss:
        return "failOnDataLoss=false skips damage, which only the Python source does"
    if spec.filter != FilterSpec():
        return "a row filter is given"
    return None


def ensure_registered(spark: SparkSession) -> None:
    """Register the ``rocketmq`` format (the Python source and sink) with `spark` unless it is already."""
    from rmq.spark import register

    try:
        registered = spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists("rocketmq")  # type: ignore[attr-defined]
    except Exception:
        registered = False
    if not registered:
        register(spark)


def _python_source(spark: SparkSession, options: dict[str, str]) -> DataFrame:
    ensure_registered(spark)
    return spark.read.format("rocketmq").options(**options).load()


def no_jar_reason(what: str = "reader") -> str:
    """Why the JVM `what` (reader or sink) cannot be used, and how to get its jar on the classpath."""
    jar = jar_path()
    if jar is None:
        return (
            f"this install has no JVM {what} jar (rmq/spark/jars/rmq-spark.jar: a wheel built by"
            " scripts/wheel carries it, or build it with scripts/spark-jar), so the session cannot load it"
        )
    return (
        f"the JVM {what} is not on Spark's classpath: build the first session of the process with"
        f' SparkSession.builder.config("spark.jars", "{jar}") (the path rmq.spark.jar_path() gives)'
    )


def load(spark: SparkSession, path: str | Path | None = None, **options: str | int | bool) -> DataFrame:
    """A DataFrame of every message committed in the store at `path` now (one row per message; columns as
    ``spark_schema()``, or those the ``columns`` option names). Options as ``rmq.spark.options``, with values
    as strings, numbers or booleans. Read by the JVM reader when it can (see the module doc). With a
    ``nameServer`` option and no `path`, the topics are read over the network by the Python network source
    (options as ``rmq.spark.network.options``)."""
    opts = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in options.items()}
    if is_network(opts):
        return _network(spark, opts, path, streaming=False)
    if path is None:
        raise ValueError("rmq.spark.load needs a store path, or a nameServer option to read over the network")
    opts["path"] = str(path)
    spec = parse_options(opts)
    columns = columns_option(opts)
    spark_schema(columns)  # an unknown or repeated column name is an error here, as with the Python source
    why = python_only_reason(spec, opts)
    if why is None and not jvm_reader_available(spark):
        why = no_jar_reason()
    if why is not None:
        log.info("rocketmq: reading %s with the Python source: %s", spec.path, why)
        return _python_source(spark, opts)
    return _jvm_frame(spark, spec, columns)


def security_options(
    access_key: str | None,
    secret_key: str | None,
    security_token: str | None,
    tls: bool,
    tls_ca: str | None,
    tls_verify: bool | None,
) -> dict[str, str]:
    """The JVM reader's and sink's options for ACL credentials (every request signed, as the Python paths
    sign them) and TLS (without a client certificate)."""
    out: dict[str, str] = {}
    if access_key and secret_key:
        out.update(accessKey=access_key, secretKey=secret_key)
        if security_token:
            out["securityToken"] = security_token
    if tls:
        out["tls"] = "true"
        if tls_ca:
            out["tlsCa"] = tls_ca
        if tls_verify is not None:
            out["tlsVerify"] = str(tls_verify).lower()
    return out


def read_stream(spark: SparkSession, **options: str | int | bool) -> DataFrame:
    """A streaming DataFrame of the topics of a live cluster (options as ``rmq.spark.network.options``,
    ``nameServer`` required), read by the JVM network reader when it serves the options (see
    :func:`network_python_only_reason`), else by the Python network source."""
    opts = {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in options.items()}
    if not is_network(opts):
        raise ValueError("rmq.spark.read_stream reads over the network: give it a nameServer option")
    return _network(spark, opts, None, streaming=True)


def network_python_only_reason(spec: NetworkSpec) -> str | None:
    """Why a network read with these options needs the Python network source, or ``None`` when the JVM
    network reader serves it."""
    if spec.topics is None:
        return "topicPattern is the Python source's"
    if not isinstance(spec.starting, str) or not isinstance(spec.ending, str):
        return "JSON startingOffsets / endingOffsets are the Python source's"
    if spec.starting_timestamp is not None or spec.ending_timestamp is not None:
        return "startingTimestamp / endingTimestamp are the Python source's"
    if spec.min_offsets_per_trigger is not None:
        return "minOffsetsPerTrigger / maxTriggerDelay are the Python source's"
    if not spec.fail_on_data_loss:
        return "failOnDataLoss=false skips lost offsets, which only the Python source does"
    if spec.tls_cert or spec.tls_key:
        return "a TLS client certificate (tlsCert / tlsKey) is the Python source's"
    return None


def _network(
    spark: SparkSession, opts: dict[str, str], path: str | Path | None, streaming: bool
) -> DataFrame:
    spec = parse_network_options({**opts, **({"path": str(path)} if path is not None else {})}, streaming)
    columns = columns_option(opts)
    network_schema(columns)  # an unknown or repeated column name is an error here, as with the Python source
    why = network_python_only_reason(spec)
    if why is None and not jvm_class_available(spark, JVM_NET_SOURCE):
        why = no_jar_reason("network reader")
    if why is not None:
        log.info("rocketmq: reading %s with the Python network source: %s", spec.describe(), why)
        ensure_registered(spark)
        reader = spark.readStream if streaming else spark.read
        return reader.format("rocketmq").options(**opts).load()
    assert spec.topics is not None and isinstance(spec.starting, str) and isinstance(spec.ending, str)
    jvm = {
        "nameServer": ";".join(spec.name_servers),
        "topics": ",".join(spec.topics),
        "endingOffsets": spec.ending,
        "subExpression": spec.sub_expression,
        "expressionType": spec.expression_type,
        "consumerGroup": spec.consumer_group,
        "pullBatchSize": str(spec.pull_batch_size),
        "pullTimeoutMs": str(spec.pull_timeout_ms),
        "batchSize": str(min(spec.batch_rows, 8192)),
        "checkCRC": str(spec.check_crc).lower(),
        "decompress": str(spec.decompress).lower(),
    }
    if spec.starting_given:
        jvm["startingOffsets"] = spec.starting
    if spec.min_partitions is not None:
        jvm["minPartitions"] = str(spec.min_partitions)
    if spec.max_offsets_per_trigger is not None:
        jvm["maxOffsetsPerTrigger"] = str(spec.max_offsets_per_trigger)
    if spec.commit_group:
        jvm["commitOffsets"] = "true"
    jvm.update(
        security_options(
            spec.access_key, spec.secret_key, spec.security_token, spec.tls, spec.tls_ca, spec.tls_verify
        )
    )
    log.info("rocketmq: reading %s with the JVM network reader", spec.describe())
    reader = spark.readStream if streaming else spark.read
    df = reader.format(JVM_NET_SOURCE).options(**jvm).load()
    return df if columns is None else df.select(*columns)


_MIN_SLICE = 32 << 20


def _slice_size(spark: SparkSession, spec: ReadSpec) -> int:
    """Bytes per split when ``sliceSize`` is not given: the committed bytes shared out over Spark's default
    parallelism (at least 32 MiB; a split never crosses a CommitLog file). A JVM task has no Python worker
    to amortise, and one split per core keeps each core on one sequential walk."""
    from rmq.spark.source import plan_partitions

    _kind, whole = plan_partitions(replace(spec, slice_size=1 << 62))
    total = sum(p.end - p.start for p in whole)  # type: ignore[union-attr]
    cores = max(1, spark.sparkContext.defaultParallelism)
    return max(_MIN_SLICE, -(-total // cores))


def _jvm_frame(spark: SparkSession, spec: ReadSpec, columns: list[str] | None) -> DataFrame:
    from rmq.spark.source import ScanPartition, plan_partitions

    if spec.auto_slice:
        spec = replace(spec, slice_size=_slice_size(spark, spec))
    kind, parts = plan_partitions(spec)
    if kind != "scan" or not all(isinstance(p, ScanPartition) for p in parts):
        raise AssertionError(f"an unfiltered read planned {kind} partitions")
    splits = ";".join(f"{p.start}:{p.end}:{int(p.end_is_boundary)}" for p in parts)  # type: ignore[union-attr]
    commitlog = spec.commitlog_dir or str(Path(spec.path) / "commitlog")
    df = (
        spark.read.format(JVM_SOURCE)
        .option("commitlogDir", commitlog)
        .option("splits", splits)
        .option("checkCRC", str(spec.check_crc).lower())
        .option("decompress", str(spec.decompress).lower())
        .option("batchSize", str(min(spec.batch_rows, 8192)))
        .load()
    )
    log.info("rocketmq: reading %s with the JVM reader, %d splits", spec.path, len(parts))
    return df if columns is None else df.select(*columns)
