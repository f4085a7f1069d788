"""``rmq.spark.save`` and ``rmq.spark.write_stream``: writes through the JVM sink where it serves them.

The JVM sink (``org.rmq.spark.sink.RocketMQSink``, in the jar ``rmq.spark.jar_path()`` names) sends rows
from Spark's executors straight to the brokers, with no Python worker and no Arrow hop: the rows are
encoded as the Python sink's columnar path encodes them (SEND_BATCH_MESSAGE batches of ``batchSize``
messages, each with ``TAGS``, ``KEYS``, ``WAIT`` and a new ``UNIQ_KEY``) and sent at-least-once with the
same retries. The options and columns are checked here first, by the Python sink's own parsers, so a bad
option or column fails the same way on either path.

Writes the JVM sink does not serve go to the Python sink (``format("rocketmq")``), with a log line saying
why: ``deliveryGuarantee=exactly_once``, a TLS client certificate, columns other than ``body``, ``topic``,
``tags`` and ``keys`` (a string), ``batchSize=1``, or a Spark without the jar on its classpath. Both give
the same messages.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmq.spark.jvm import JVM_SINK, ensure_registered, jvm_class_available, no_jar_reason, security_options
from rmq.spark.sink.columnar import columnar
from rmq.spark.sink.columns import SinkColumns
from rmq.spark.sink.options import SinkOptions, parse_sink_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import DataStreamWriter

__all__ = ["python_only_sink_reason", "save", "write_stream"]

log = logging.getLogger(__name__)


def python_only_sink_reason(opts: SinkOptions, cols: SinkColumns) -> str | None:
    """Why a write with these options and columns needs the Python sink, or ``None`` when the JVM sink
    serves it."""
    if opts.exactly_once:
        return (
            "deliveryGuarantee=exactly_once (transactional messages decided at commit) is the Python sink's"
        )
    if opts.client.tls_cert or opts.client.tls_key:
        return "a TLS client certificate (tlsCert / tlsKey) is the Python sink's"
    if not columnar(opts, cols):
        return (
            "the JVM sink sends columns body, topic, tags and keys (a string) in batches (batchSize > 1);"
            f" this write has columns {', '.join(cols.names)} and batchSize={opts.batch_size}"
        )
    return None


def _strings(options: dict[str, str | int | bool]) -> dict[str, str]:
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in options.items()}


def _jvm_options(opts: SinkOptions) -> dict[str, str]:
    out = {
        "nameServer": opts.name_server,
        "producerGroup": opts.producer_group,
        "sendTimeoutMs": str(opts.send_timeout_ms),
        "retries": str(opts.retries),
        "maxInFlight": str(opts.max_in_flight),
        "batchSize": str(opts.batch_size),
    }
    if opts.topic is not None:
        out["topic"] = opts.topic
    c = opts.client
    out.update(security_options(c.access_key, c.secret_key, c.security_token, c.tls, c.tls_ca, c.tls_verify))
    return out


def _route(
    df: DataFrame, options: dict[str, str | int | bool], streaming: bool
) -> tuple[dict[str, str], bool]:
    """The options to write with and whether the JVM sink takes them (after the Python sink's checks)."""
    raw = _strings(options)
    opts = parse_sink_options(raw, streaming)
    cols = SinkColumns.check(df.schema, opts.topic)
    why = python_only_sink_reason(opts, cols)
    if why is None and not jvm_class_available(df.sparkSession, JVM_SINK):
        why = no_jar_reason("sink")
    if why is not None:
        log.info("rocketmq sink: writing with the Python sink: %s", why)
        ensure_registered(df.sparkSession)
        return raw, False
    log.info("rocketmq sink: writing with the JVM sink (nameServer %s)", opts.name_server)
    jvm = _jvm_options(opts)
    jvm.update((k, v) for k, v in raw.items() if k.lower() == "checkpointlocation")
    return jvm, True


def save(df: DataFrame, **options: str | int | bool) -> None:
    """Append the rows of `df` to RocketMQ topics (options and columns as the ``rocketmq`` sink's,
    :mod:`rmq.spark.sink`), through the JVM sink when it serves the write (see the module doc), else the
    Python sink. Returns when every row is stored; a bad option or column raises before any row is sent."""
    opts, jvm = _route(df, options, streaming=False)
    df.write.format(JVM_SINK if jvm else "rocketmq").mode("append").options(**opts).save()


def write_stream(df: DataFrame, **options: str | int | bool) -> DataStreamWriter:
    """``df.writeStream`` set up to append to RocketMQ topics as :func:`save` does (the JVM sink when it
    serves the write, else the Python sink), with `options` as the sink's, ``checkpointLocation`` among
    them (exactly-once keeps its commit records beside it); give it a trigger, then ``start()``."""
    opts, jvm = _route(df, options, streaming=True)
    return df.writeStream.format(JVM_SINK if jvm else "rocketmq").outputMode("append").options(**opts)
