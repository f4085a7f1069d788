"""The network source against the Apache RocketMQ 4.9.7 broker and name server (the peer of tests/peers):
a batch read of exact content, a tag filter and a SQL92 filter evaluated by the Apache broker, and a
stream with a consumerGroup whose offsets the Apache broker then holds."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from rmq.client import Message
from rmq.client.sync import Producer

from tests.peers.apache import ApachePeer, peer_libs, start_apache
from tests.peers.conftest import SHARED_PROPS
from tests.spark.helpers import wait_for
from tests.spark.netcluster import consumer_offset, create_topic, hashes

TOPIC = "NetApache"


@contextmanager
def apache_with_messages(home: Path) -> Iterator[tuple[ApachePeer, list[tuple[bytes, str]]]]:
    """The Apache name server and broker under `home`, 40 messages sent to TOPIC: (body, tag) each."""
    peer_libs()
    peer = start_apache(home, *SHARED_PROPS)
    try:
        create_topic(peer.broker_addr, TOPIC)
        sent = []
        with Producer("pg_net_apache", namesrv_addr=peer.namesrv_addr) as p:
            for i in range(40):
                tag = "TagA" if i % 2 else "TagB"
                body = f"apache-{i}".encode()
                assert p.send(Message(TOPIC, body, tags=tag, properties={"n": str(i)})).ok
                sent.append((body, tag))
        yield peer, sent
    finally:
        peer.stop()


@pytest.fixture(scope="module")
def apache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApachePeer, list[tuple[bytes, str]]]]:
    with apache_with_messages(tmp_path_factory.mktemp("apache-net") / "apache") as peer:
        yield peer


def test_reads_an_apache_cluster(
    spark: SparkSession, apache: tuple[ApachePeer, list[tuple[bytes, str]]], tmp_path: Path
) -> None:
    peer, sent = apache

    def read(**opts: str) -> list[bytes]:
        r = spark.read.format("rocketmq").option("nameServer", peer.namesrv_addr).option("topics", TOPIC)
        for k, v in opts.items():
            r = r.option(k, v)
        rows = r.load().select("body", "broker_name", "topic").collect()
        assert all(row.broker_name == "broker-a" and row.topic == TOPIC for row in rows)
        return [bytes(row.body) for row in rows]

    assert hashes(read()) == hashes([b for b, _ in sent])
    assert hashes(read(subExpression="TagA")) == hashes([b for b, t in sent if t == "TagA"])
    sql = read(subExpression="n < 10", expressionType="SQL92")
    assert hashes(sql) == hashes([b for i, (b, _) in enumerate(sent) if i < 10])

    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    q = (
        spark.readStream.format("rocketmq")
        .option("nameServer", peer.namesrv_addr)
        .option("topics", TOPIC)
        .option("startingOffsets", "earliest")
        .option("consumerGroup", "cg_spark_apache")
        .load()
        .select("body")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        wait_for(lambda: sum(p["numInputRows"] for p in q.recentProgress) >= 40, timeout=120)

        def committed() -> int:
            return sum(
                max(0, consumer_offset(peer.broker_addr, "cg_spark_apache", TOPIC, "broker-a", qid))
                for qid in range(4)
            )

        wait_for(lambda: committed() == 40, timeout=60)
    finally:
        q.stop()
    assert hashes([bytes(r.body) for r in spark.read.parquet(str(out)).collect()]) == hashes(
        [b for b, _ in sent]
    )


def test_jvm_network_reader_reads_an_apache_cluster(
    spark: SparkSession, apache: tuple[ApachePeer, list[tuple[bytes, str]]], tmp_path: Path
) -> None:
    """The JVM network reader (``rmq.spark.load`` / ``read_stream`` with a name server): the Apache name
    server's route (its JSON keys unquoted), the Apache broker's offsets and pull answers, its tag and SQL92
    filters; the same rows as the Python network source."""
    import rmq.spark

    peer, sent = apache

    def read(**opts: str) -> list[bytes]:
        df = rmq.spark.load(spark, nameServer=peer.namesrv_addr, topics=TOPIC, **opts)
        rows = df.select("body", "broker_name", "topic").collect()
        assert all(row.broker_name == "broker-a" and row.topic == TOPIC for row in rows)
        return [bytes(row.body) for row in rows]

    assert hashes(read()) == hashes([b for b, _ in sent])
    assert hashes(read(subExpression="TagA")) == hashes([b for b, t in sent if t == "TagA"])
    sql = read(subExpression="n < 10", expressionType="SQL92")
    assert hashes(sql) == hashes([b for i, (b, _) in enumerate(sent) if i < 10])
    python = (
        spark.read.format("rocketmq").option("nameServer", peer.namesrv_addr).option("topics", TOPIC).load()
    )
    jvm = rmq.spark.load(spark, nameServer=peer.namesrv_addr, topics=TOPIC)
    assert sorted(map(tuple, jvm.collect())) == sorted(map(tuple, python.collect()))

    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    q = (
        rmq.spark.read_stream(spark, nameServer=peer.namesrv_addr, topics=TOPIC, startingOffsets="earliest")
        .select("body")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    assert hashes([bytes(r.body) for r in spark.read.parquet(str(out)).collect()]) == hashes(
        [b for b, _ in sent]
    )
