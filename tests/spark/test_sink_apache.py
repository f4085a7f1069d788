"""The ``rocketmq`` sink against Apache RocketMQ 4.9.7 (the peer broker, Java): a batch write at-least-once
(by the Python sink and by the JVM sink) and a streaming query exactly-once (transactional half messages
committed by END_TRANSACTION from the driver), each row read back once by a real consumer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.peers.apache import ApachePeer, start_apache
from tests.spark.sinkhelp import consume, create_topic, digest
from tests.spark.test_sink_stream import add_file, run_available_now


@pytest.fixture(scope="module")
def apache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApachePeer]:
    peer = start_apache(
        tmp_path_factory.mktemp("sink-apache"),
        "transactionTimeOut=1000",
        "transactionCheckInterval=1000",
        "diskMaxUsedSpaceRatio=95",
        f"mappedFileSizeCommitLog={64 * 1024 * 1024}",
        f"mappedFileSizeConsumeQueue={20 * 30000}",
    )
    yield peer
    peer.stop()


def test_batch_write_to_apache(spark: SparkSession, apache: ApachePeer) -> None:
    create_topic(apache, "SinkApache")
    rows = [(f"apache-{i}".encode(), f"t{i % 2}", f"k{i}") for i in range(300)]
    df = spark.createDataFrame(rows, "body binary, tags string, keys string").repartition(2)
    (
        df.write.format("rocketmq")
        .mode("append")
        .option("nameServer", apache.namesrv_addr)
        .option("topic", "SinkApache")
        .save()
    )
    got = consume(apache.namesrv_addr, "SinkApache", len(rows))
    assert got.bodies == Counter(digest(b) for b, _t, _k in rows)
    by_body = {m.body: m for m in got.messages}
    for body, tags, keys in rows:
        assert (by_body[body].tags, by_body[body].keys) == (tags, keys)


def test_jvm_sink_batch_write_to_apache(spark: SparkSession, apache: ApachePeer) -> None:
    """``rmq.spark.save`` through the JVM sink: the route from Apache's name server (its JSON keys
    unquoted), batches stored by Apache's broker, every row once with its tags and keys."""
    import rmq.spark

    create_topic(apache, "SinkApacheJvm")
    rows = [(f"apache-jvm-{i}".encode(), f"t{i % 2}", f"k{i}") for i in range(3000)]
    df = spark.createDataFrame(rows, "body binary, tags string, keys string").repartition(2)
    rmq.spark.save(df, nameServer=apache.namesrv_addr, topic="SinkApacheJvm", batchSize=50)
    got = consume(apache.namesrv_addr, "SinkApacheJvm", len(rows))
    assert got.bodies == Counter(digest(b) for b, _t, _k in rows)
    by_body = {m.body: m for m in got.messages}
    for body, tags, keys in rows:
        assert (by_body[body].tags, by_body[body].keys) == (tags, keys)


def test_exactly_once_stream_to_apache(spark: SparkSession, apache: ApachePeer, tmp_path: Path) -> None:
    topic = "SinkApacheEos"
    create_topic(apache, topic)
    src, ck = tmp_path / "src", tmp_path / "ck"
    src.mkdir()
    expect: list[str] = []
    for part in range(4):
        bodies = [f"eos-{part}-{i}" for i in range(50)]
        add_file(src, f"f{part}", bodies)
        expect += bodies
        if part in (1, 3):  # a stop and a restart in between
            run_available_now(spark, src, ck, apache, topic, deliveryGuarantee="exactly_once")
    got = consume(apache.namesrv_addr, topic, len(expect))
    assert got.bodies == Counter(digest(b.encode()) for b in expect)
