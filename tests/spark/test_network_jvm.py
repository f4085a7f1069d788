"""The JVM network reader (``rmq.spark.load(spark, nameServer=..., topics=...)`` and
``rmq.spark.read_stream``, through ``org.rmq.spark.NetSource``) against a live cluster of two broker groups
(real processes): the same rows as the Python network source, column by column; filters; streaming to the
end twice on one checkpoint, every message once, per-queue offsets and lag in the progress; the reads it
leaves to the Python source (the reason logged); errors naming the topic or option."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import rmq.spark
from pyspark.sql import SparkSession

from tests.spark.netcluster import Cluster, digest, hashes, start_cluster

TOPIC = "NetJvm"
N = 400
JVM_LINE = "with the JVM network reader"
PYTHON_LINE = "with the Python network source"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("netjvm"), ["broker-a", "broker-b"], "enablePropertyFilter=true"
    )
    try:
        c.create(TOPIC)
        c.send(TOPIC, N, "jvm", tags=["TagA", "TagB"])
        yield c
    finally:
        c.stop()


def available_now(df, out: Path, ck: Path) -> list[dict]:  # type: ignore[no-untyped-def]
    """`df` (streaming) to parquet at `out` with Trigger.AvailableNow on checkpoint `ck`: its progress."""
    q = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ck))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    assert q.exception() is None
    return [json.loads(p.json) for p in q.recentProgress]


def _jvm(spark: SparkSession, cluster: Cluster, caplog: pytest.LogCaptureFixture, **options: object):  # type: ignore[no-untyped-def]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="rmq.spark.jvm"):
        df = rmq.spark.load(spark, nameServer=cluster.ns, topics=TOPIC, **options)  # type: ignore[arg-type]
    assert JVM_LINE in caplog.text, caplog.text
    return df


def test_jvm_network_reader_gives_the_python_sources_rows(
    spark: SparkSession, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Every column of every message of both broker groups, compared row by row with the Python network
    source's rows (rows keyed by their body's hash: each body is sent once)."""
    jvm = _jvm(spark, cluster, caplog)
    python = spark.read.format("rocketmq").option("nameServer", cluster.ns).option("topics", TOPIC).load()
    assert jvm.columns == python.columns and jvm.columns[-1] == "broker_name"

    def rows(df) -> dict[str, dict]:  # type: ignore[no-untyped-def]
        out = {}
        for r in df.collect():
            d = r.asDict()
            out[digest(bytes(d["body"]))] = d
        return out

    got, want = rows(jvm), rows(python)
    assert len(got) == N and got == want
    sent = {digest(m.body): m for m in cluster.sent if m.topic == TOPIC}
    assert set(got) == set(sent)
    for h, r in got.items():
        m = sent[h]
        assert (r["broker_name"], r["queue_id"], r["queue_offset"], r["tags"]) == (
            m.broker,
            m.queue_id,
            m.queue_offset,
            m.tags,
        )
    assert {r["broker_name"] for r in got.values()} == {"broker-a", "broker-b"}


def test_pruned_columns_counts_splits_and_filters(
    spark: SparkSession, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    msgs = [m for m in cluster.sent if m.topic == TOPIC]
    assert _jvm(spark, cluster, caplog, columns="").count() == N
    df = _jvm(spark, cluster, caplog, columns="body,queue_offset", minPartitions=20, pullBatchSize=7)
    assert df.columns == ["body", "queue_offset"] and df.rdd.getNumPartitions() >= 20
    assert hashes([bytes(r.body) for r in df.collect()]) == hashes([m.body for m in msgs])
    tag = _jvm(spark, cluster, caplog, subExpression="TagA", columns="body")
    assert hashes([bytes(r.body) for r in tag.collect()]) == hashes(
        [m.body for m in msgs if m.tags == "TagA"]
    )
    sql = _jvm(spark, cluster, caplog, subExpression="TAGS = 'TagB'", expressionType="SQL92", columns="body")
    assert hashes([bytes(r.body) for r in sql.collect()]) == hashes(
        [m.body for m in msgs if m.tags == "TagB"]
    )
    assert _jvm(spark, cluster, caplog, startingOffsets="latest", columns="").count() == 0
    assert _jvm(spark, cluster, caplog, endingOffsets="earliest", columns="").count() == 0


def test_stream_available_now_twice_on_one_checkpoint(
    spark: SparkSession, cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``read_stream`` from the earliest offsets to the end, more messages sent, run again on the same
    checkpoint: every message once over the two runs; the progress carries per-queue offsets and the
    offsets-behind-latest metrics."""
    topic = "NetJvmStream"
    cluster.create(topic)
    first = cluster.send(topic, 300, "s1")
    ck, out = tmp_path / "ck", tmp_path / "out"

    def run() -> list[dict]:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="rmq.spark.jvm"):
            df = rmq.spark.read_stream(spark, nameServer=cluster.ns, topics=topic, startingOffsets="earliest")
        assert JVM_LINE in caplog.text
        return available_now(df.select("body", "broker_name", "queue_id", "queue_offset"), out, ck)

    progress = run()
    second = cluster.send(topic, 200, "s2")
    progress += run()
    got = [bytes(r.body) for r in spark.read.parquet(str(out)).collect()]
    assert hashes(got) == hashes([m.body for m in first + second])
    assert max(hashes(got).values()) == 1
    ends = [p["sources"][0]["endOffset"] for p in progress if p["numInputRows"]]
    assert ends and set(ends[-1][topic]) == {"broker-a", "broker-b"}
    assert sum(v for b in ends[-1][topic].values() for v in b.values()) == 500
    metrics = [p["sources"][0].get("metrics", {}) for p in progress if p["numInputRows"]]
    assert metrics[-1]["maxOffsetsBehindLatest"] == "0"


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        ({"topicPattern": "NetJvm"}, "topicPattern"),
        ({"topics": TOPIC, "startingOffsets": json.dumps({TOPIC: {"broker-a": {"0": 0}}})}, "JSON"),
        ({"topics": TOPIC, "failOnDataLoss": "false"}, "failOnDataLoss=false"),
        ({"topics": TOPIC, "minOffsetsPerTrigger": "5"}, "minOffsetsPerTrigger"),
    ],
)
def test_reads_the_jvm_reader_does_not_serve_go_to_the_python_source(
    spark: SparkSession,
    cluster: Cluster,
    caplog: pytest.LogCaptureFixture,
    options: dict[str, str],
    reason: str,
) -> None:
    with caplog.at_level(logging.INFO, logger="rmq.spark.jvm"):
        df = rmq.spark.load(spark, nameServer=cluster.ns, columns="", **options)
    assert PYTHON_LINE in caplog.text and reason in caplog.text
    assert df.count() > 0


def test_stream_with_a_rate_limit_commits_its_offsets_to_the_group(
    spark: SparkSession, cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``maxOffsetsPerTrigger`` (shared out over the queues by backlog) and ``consumerGroup`` through the
    JVM reader: several micro-batches of at most 40 rows, every message once, and the group's committed
    offsets on the brokers the queues' ends (what ``rmqadmin consumerProgress`` shows)."""
    from tests.spark.netcluster import consumer_offset

    topic, group = "NetJvmLimited", "cg_netjvm"
    cluster.create(topic)
    sent = cluster.send(topic, 250, "lim")
    ck, out = tmp_path / "ck", tmp_path / "out"
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="rmq.spark.jvm"):
        df = rmq.spark.read_stream(
            spark,
            nameServer=cluster.ns,
            topics=topic,
            startingOffsets="earliest",
            maxOffsetsPerTrigger=40,
            consumerGroup=group,
        )
    assert JVM_LINE in caplog.text
    sizes = [p["numInputRows"] for p in available_now(df.select("body"), out, ck) if p["numInputRows"]]
    assert sum(sizes) == 250 and max(sizes) <= 40 and len(sizes) >= 7
    got = [bytes(r.body) for r in spark.read.parquet(str(out)).collect()]
    assert hashes(got) == hashes([m.body for m in sent])
    ends: dict[tuple[str, int], int] = {}
    for m in sent:
        ends[(m.broker, m.queue_id)] = max(ends.get((m.broker, m.queue_id), 0), m.queue_offset + 1)
    for (broker, qid), end in ends.items():
        addr = cluster.brokers[broker].broker_addr
        assert consumer_offset(addr, group, topic, broker, qid) == end


def test_errors_name_the_topic_or_option(
    spark: SparkSession, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(Exception, match="topic 'NoSuchJvmTopic' does not exist"):
        rmq.spark.load(spark, nameServer=cluster.ns, topics="NoSuchJvmTopic").count()
    with pytest.raises(Exception, match="cannot reach name server"):
        rmq.spark.load(spark, nameServer="127.0.0.1:1", topics=TOPIC, pullTimeoutMs=1000).count()
    with pytest.raises(Exception, match="pullBatchSize"):
        rmq.spark.load(spark, nameServer=cluster.ns, topics=TOPIC, pullBatchSize="lots")
    with pytest.raises(Exception, match="expressionType"):
        rmq.spark.load(spark, nameServer=cluster.ns, topics=TOPIC, expressionType="XPATH")
    with pytest.raises(Exception, match="nosuchoption"):
        rmq.spark.load(spark, nameServer=cluster.ns, topics=TOPIC, noSuchOption=1)
    with pytest.raises(Exception, match="subExpression"):
        _jvm(spark, cluster, caplog, subExpression="n >>> 1", expressionType="SQL92").count()
    with pytest.raises(ValueError, match="nameServer"):
        rmq.spark.read_stream(spark, topics=TOPIC)


def test_compressed_and_big_bodies_come_back_as_sent(
    spark: SparkSession, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Bodies over the producer's compression threshold (4 KiB: stored zlib-compressed, sysflag bit 0) and
    a body of 1 MiB: inflated by default, as stored with ``decompress=false``; the same as the Python
    network source either way."""
    import zlib

    from rmq.client import Message
    from rmq.client.sync import Producer

    topic = "NetJvmZip"
    cluster.create(topic)
    bodies = [(f"zip-{i}-".encode() * 1000)[: 5000 + i * 997] for i in range(6)] + [bytes(range(256)) * 4096]
    with Producer("pg_netjvm_zip", namesrv_addr=cluster.ns) as p:
        for b in bodies:
            assert p.send(Message(topic, b)).ok
    python = spark.read.format("rocketmq").option("nameServer", cluster.ns).option("topics", topic).load()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="rmq.spark.jvm"):
        jvm = rmq.spark.load(spark, nameServer=cluster.ns, topics=topic, columns="body,sysflag,body_size")
        raw = rmq.spark.load(
            spark, nameServer=cluster.ns, topics=topic, columns="body,sysflag", decompress=False
        )
    assert caplog.text.count(JVM_LINE) == 2
    rows = jvm.collect()
    assert hashes([bytes(r.body) for r in rows]) == hashes(bodies)
    assert all(r.sysflag & 1 for r in rows), "every body was stored compressed"
    assert sorted(bytes(r.body) for r in rows) == sorted(
        bytes(r.body) for r in python.select("body").collect()
    )
    assert hashes([zlib.decompress(bytes(r.body)) for r in raw.collect()]) == hashes(bodies)
