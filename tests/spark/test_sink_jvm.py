"""The JVM sink (``rmq.spark.save`` / ``rmq.spark.write_stream`` through ``org.rmq.spark.sink.RocketMQSink``)
against a real broker: the same messages as the Python sink's, every row once in batch and streaming
writes, the writes it leaves to the Python sink (with the reason logged), and bad input failing with the
Python sink's errors."""

from __future__ import annotations

import logging
import socket
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import rmq.spark
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from rmq.spark.sink import SinkColumnError, SinkOptionError

from tests.brokerproc import BrokerProcess, start_broker
from tests.spark.sinkhelp import consume, create_topic, digest
from tests.spark.test_sink_stream import add_file

JVM_LINE = "writing with the JVM sink"
PYTHON_LINE = "writing with the Python sink"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_broker(tmp_path_factory.mktemp("sink-jvm-store"))
    yield b
    b.stop()


def _messages(
    broker: BrokerProcess, topic: str, expect: int
) -> dict[str, tuple[str, str | None, str, list[str]]]:
    out: dict[str, tuple[str, str | None, str, list[str]]] = {}
    for m in consume(broker.namesrv_addr, topic, expect).messages:
        assert m.body.decode() not in out, "a row came twice"
        names = sorted(set(m.properties) - {"WAIT", "UNIQ_KEY"})
        out[m.body.decode()] = (m.tags, m.keys, m.get_property("UNIQ_KEY") or "", names)
    return out


def test_jvm_sink_sends_what_the_python_sink_sends(
    spark: SparkSession, broker: BrokerProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """The same rows (two topics by column, tags and keys null, empty or set) written once by the JVM sink
    and once by the Python sink: a consumer reads the same messages from both (topic, body, tags, keys,
    property names), each row once with its own UNIQ_KEY."""
    for t in ("SinkJvmA", "SinkJvmB", "SinkPyA", "SinkPyB"):
        create_topic(broker, t)
    rows = [
        (
            "A" if i % 3 else "B",
            f"body-{i}-" + "y" * (i % 300),
            None if i % 4 == 0 else ("" if i % 4 == 1 else f"tag{i % 5}"),
            None if i % 6 == 0 else f"k{i} kk{i % 7}",
        )
        for i in range(5000)
    ]
    df = spark.createDataFrame(rows, "topic string, body string, tags string, keys string").repartition(3)
    with caplog.at_level(logging.INFO, logger="rmq.spark.sink.jvm"):
        rmq.spark.save(
            df.withColumn("topic", F.concat(F.lit("SinkJvm"), "topic")),
            nameServer=broker.namesrv_addr,
            batchSize=64,
        )
    assert JVM_LINE in caplog.text
    (
        df.withColumn("topic", F.concat(F.lit("SinkPy"), "topic"))
        .write.format("rocketmq")
        .mode("append")
        .option("nameServer", broker.namesrv_addr)
        .option("batchSize", "64")
        .save()
    )
    for side in ("A", "B"):
        want = sum(1 for r in rows if r[0] == side)
        jvm = _messages(broker, "SinkJvm" + side, want)
        py = _messages(broker, "SinkPy" + side, want)
        assert len(jvm) == want
        assert {b: v[:2] + v[3:] for b, v in jvm.items()} == {b: v[:2] + v[3:] for b, v in py.items()}
        assert len({v[2] for v in jvm.values()}) == want, "every row has its own UNIQ_KEY"
        assert all(len(v[2]) == 32 for v in jvm.values())
        assert {b: (tags, keys) for b, (tags, keys, _i, _n) in jvm.items()} == {
            body: (tags or None, keys) for topic, body, tags, keys in rows if topic == side
        }


def test_jvm_sink_batch_write_every_row_once(spark: SparkSession, broker: BrokerProcess) -> None:
    create_topic(broker, "SinkJvmMany", queues=8)
    n = 30_000
    df = spark.range(n).select(
        F.repeat(F.sha2(F.col("id").cast("string"), 256), 4).cast("binary").alias("body")
    )
    rmq.spark.save(df.repartition(4), nameServer=broker.namesrv_addr, topic="SinkJvmMany")
    got = consume(broker.namesrv_addr, "SinkJvmMany", n)
    want = Counter(digest((rmq_hex(i) * 4).encode()) for i in range(n))
    assert got.bodies == want
    assert len({m.queue_id for m in got.messages}) == 8, "the rows went to every queue in turn"


def rmq_hex(i: int) -> str:
    import hashlib

    return hashlib.sha256(str(i).encode()).hexdigest()


def test_jvm_sink_streaming_writes_every_row_once(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    """A file-stream source through ``rmq.spark.write_stream`` (the JVM sink), run to the end twice with
    more files between: every row once."""
    topic = "SinkJvmStream"
    create_topic(broker, topic)
    src, ck = tmp_path / "src", tmp_path / "ck"
    src.mkdir()
    expect: list[str] = []

    def run() -> None:
        stream = spark.readStream.schema("body string").option("maxFilesPerTrigger", 1).json(str(src))
        w = rmq.spark.write_stream(
            stream, nameServer=broker.namesrv_addr, topic=topic, checkpointLocation=str(ck)
        )
        q = w.trigger(availableNow=True).start()
        q.awaitTermination()
        assert q.exception() is None

    for part in range(3):
        bodies = [f"jvm-stream-{part}-{i}" for i in range(400)]
        add_file(src, f"f{part}", bodies)
        expect += bodies
    run()
    bodies = [f"jvm-stream-late-{i}" for i in range(100)]
    add_file(src, "late", bodies)
    expect += bodies
    run()
    got = consume(broker.namesrv_addr, topic, len(expect))
    assert got.bodies == Counter(digest(b.encode()) for b in expect)


@pytest.mark.parametrize(
    ("schema", "row", "options", "reason"),
    [
        (
            "body string, properties map<string,string>",
            ("p", {"n": "1"}),
            {},
            "this write has columns body, properties",
        ),
        ("body string", ("x",), {"batchSize": "1"}, "batchSize=1"),
        ("body string", ("x",), {"deliveryGuarantee": "exactly_once"}, "deliveryGuarantee=exactly_once"),
    ],
)
def test_writes_the_jvm_sink_does_not_serve_go_to_the_python_sink(
    spark: SparkSession,
    broker: BrokerProcess,
    caplog: pytest.LogCaptureFixture,
    schema: str,
    row: tuple,
    options: dict[str, str],
    reason: str,
) -> None:
    topic = "SinkJvmFallback"
    create_topic(broker, topic)
    before = len(consume(broker.namesrv_addr, topic, 0, quiet_s=0.5).messages)
    df = spark.createDataFrame([row], schema)
    with caplog.at_level(logging.INFO, logger="rmq.spark.sink.jvm"):
        rmq.spark.save(df, nameServer=broker.namesrv_addr, topic=topic, **options)
    assert PYTHON_LINE in caplog.text and reason in caplog.text
    got = consume(broker.namesrv_addr, topic, before + 1)
    assert len(got.messages) == before + 1


def test_bad_input_fails_with_the_python_sinks_errors(spark: SparkSession, broker: BrokerProcess) -> None:
    create_topic(broker, "SinkJvmBad")
    ns = broker.namesrv_addr
    one = spark.createDataFrame([(b"x",)], "body binary")
    with pytest.raises(SinkOptionError, match="retries=-1 must be at least 0"):
        rmq.spark.save(one, nameServer=ns, topic="SinkJvmBad", retries=-1)
    with pytest.raises(SinkOptionError, match="unknown rocketmq sink option"):
        rmq.spark.save(one, nameServer=ns, topic="SinkJvmBad", batchSizes=3)
    with pytest.raises(SinkColumnError, match="unknown column 'value'"):
        rmq.spark.save(spark.createDataFrame([(b"x", 1)], "body binary, value int"), nameServer=ns, topic="x")
    with pytest.raises(SinkOptionError, match="no topic"):
        rmq.spark.save(one, nameServer=ns)
    # Checked in the executors, by the JVM sink: the row is named, counted from the task's first row.
    rows = spark.createDataFrame([(b"a",), (None,)], "body binary").coalesce(1)
    with pytest.raises(Exception, match="row 1: column 'body' is null"):
        rmq.spark.save(rows, nameServer=ns, topic="SinkJvmBad")
    with pytest.raises(Exception, match="row 0: column 'body' is empty"):
        rmq.spark.save(spark.createDataFrame([(b"",)], "body binary"), nameServer=ns, topic="SinkJvmBad")
    tag = spark.createDataFrame([(b"a", "t\u0001")], "body binary, tags string")
    with pytest.raises(Exception, match="row 0: column 'tags' holds a"):
        rmq.spark.save(tag, nameServer=ns, topic="SinkJvmBad")
    with pytest.raises(Exception, match="topic 'NoSuchJvmTopic' does not exist"):
        rmq.spark.save(one, nameServer=ns, topic="NoSuchJvmTopic")
    retry = spark.createDataFrame([("%RETRY%g", b"a")], "topic string, body binary")
    with pytest.raises(Exception, match="topic '%RETRY%g' is a retry topic"):
        rmq.spark.save(retry, nameServer=ns)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    with pytest.raises(Exception, match=f"cannot reach name server\\(s\\) 127.0.0.1:{port}"):
        rmq.spark.save(one, nameServer=f"127.0.0.1:{port}", topic="SinkJvmBad", sendTimeoutMs=1000)
    assert consume(ns, "SinkJvmBad", 0).messages == [], "no failed write left a row behind"
