"""The network source against a live cluster of two broker groups on one name server (real processes):
batch reads of exact content, offsets and timestamps by option, broker-side filters, errors."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.errors import PythonException
from pyspark.sql import DataFrame, SparkSession

from tests.spark.netcluster import Cluster, SentMsg, digest, hashes, start_cluster

TOPIC = "NetAll"
N = 120


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("net"), ["broker-a", "broker-b"], "enablePropertyFilter=true")
    try:
        c.create(TOPIC)
        c.send(TOPIC, N, "all", tags=["TagA", "TagB"])
        yield c
    finally:
        c.stop()


def read(spark: SparkSession, cluster: Cluster, **options: object) -> DataFrame:
    r = spark.read.format("rocketmq").option("nameServer", cluster.ns)
    if "topics" not in options and "topicPattern" not in options:
        r = r.option("topics", TOPIC)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load()


def sent_of(cluster: Cluster, topic: str = TOPIC) -> list[SentMsg]:
    return [m for m in cluster.sent if m.topic == topic]


def test_batch_reads_every_message_of_both_groups_once(spark: SparkSession, cluster: Cluster) -> None:
    df = read(spark, cluster)
    assert df.columns[-1] == "broker_name" and "body" in df.columns and "queue_offset" in df.columns
    rows = df.select("body", "broker_name", "queue_id", "queue_offset", "tags", "topic").collect()
    assert hashes([bytes(r.body) for r in rows]) == hashes([m.body for m in sent_of(cluster)])
    assert max(hashes([bytes(r.body) for r in rows]).values()) == 1
    by_body = {digest(m.body): m for m in sent_of(cluster)}
    for r in rows:
        m = by_body[digest(bytes(r.body))]
        assert (r.broker_name, r.queue_id, r.queue_offset, r.tags, r.topic) == (
            m.broker,
            m.queue_id,
            m.queue_offset,
            m.tags,
            TOPIC,
        )
    assert {r.broker_name for r in rows} == {"broker-a", "broker-b"}


def test_min_partitions_splits_queue_ranges(spark: SparkSession, cluster: Cluster) -> None:
    df = read(spark, cluster, minPartitions=20, columns="body,queue_offset")
    assert df.rdd.getNumPartitions() >= 20
    bodies = [bytes(r.body) for r in df.collect()]
    assert hashes(bodies) == hashes([m.body for m in sent_of(cluster)])
    assert read(spark, cluster, columns="").count() == N
    assert read(spark, cluster, columns="broker_name").count() == N


def test_topic_pattern(spark: SparkSession, cluster: Cluster) -> None:
    df = read(spark, cluster, topicPattern="Net.*", columns="topic,body")
    rows = df.collect()
    assert {r.topic for r in rows} == {TOPIC}
    assert len(rows) == N


def test_starting_and_ending_offsets_json(spark: SparkSession, cluster: Cluster) -> None:
    msgs = sent_of(cluster)
    start = {TOPIC: {"broker-a": {"0": 3, "1": -1}, "broker-b": {"2": 5}}}
    end = {TOPIC: {"broker-a": {"0": 10}, "broker-b": {"3": 2}}}
    import json

    df = read(spark, cluster, startingOffsets=json.dumps(start), endingOffsets=json.dumps(end))

    def expected(m: SentMsg) -> bool:
        s = start[TOPIC].get(m.broker, {}).get(str(m.queue_id), -2)
        e = end[TOPIC].get(m.broker, {}).get(str(m.queue_id), -1)
        lo = 0 if s == -2 else (1 << 62) if s == -1 else s
        hi = (1 << 62) if e == -1 else e
        return lo <= m.queue_offset < hi

    got = [bytes(r.body) for r in df.select("body").collect()]
    want = [m.body for m in msgs if expected(m)]
    assert want and len(want) < len(msgs)
    assert hashes(got) == hashes(want)


def test_starting_timestamp(spark: SparkSession, cluster: Cluster) -> None:
    topic = "NetTime"
    cluster.create(topic)
    cluster.send(topic, 12, "early")
    time.sleep(0.05)
    ts = int(time.time() * 1000)
    time.sleep(0.05)
    late = cluster.send(topic, 12, "late")
    df = read(spark, cluster, topics=topic, startingTimestamp=ts)
    assert hashes([bytes(r.body) for r in df.select("body").collect()]) == hashes([m.body for m in late])
    ended = read(spark, cluster, topics=topic, endingTimestamp=ts)
    assert Counter(bytes(r.body).split(b"-")[0] for r in ended.select("body").collect()) == {b"early": 12}


def test_broker_side_tag_and_sql92_filters(spark: SparkSession, cluster: Cluster) -> None:
    msgs = sent_of(cluster)
    tag = read(spark, cluster, subExpression="TagA")
    got = [bytes(r.body) for r in tag.select("body").collect()]
    assert hashes(got) == hashes([m.body for m in msgs if m.tags == "TagA"])
    sql = read(spark, cluster, subExpression="n >= 100 AND TAGS = 'TagB'", expressionType="SQL92")
    got = [bytes(r.body) for r in sql.select("body").collect()]
    want = [m.body for i, m in enumerate(msgs) if i >= 100 and m.tags == "TagB"]
    assert want and hashes(got) == hashes(want)


def error_of(df_fn) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception) as e:
        df_fn()
    return str(e.value)


def test_errors_name_the_option_or_topic(spark: SparkSession, cluster: Cluster, tmp_path: Path) -> None:
    text = error_of(lambda: read(spark, cluster, topics="NoSuchTopic").collect())
    assert "NoSuchTopic" in text and "does not exist" in text
    text = error_of(
        lambda: (
            spark.read.format("rocketmq")
            .option("nameServer", "127.0.0.1:1")
            .option("topics", TOPIC)
            .load()
            .collect()
        )
    )
    assert "nameServer=127.0.0.1:1" in text
    text = error_of(lambda: read(spark, cluster, pullBatchSize="lots").collect())
    assert "pullBatchSize" in text
    text = error_of(lambda: read(spark, cluster, startingOffsets="{oops").collect())
    assert "startingOffsets" in text
    text = error_of(lambda: read(spark, cluster, noSuchOption="1").collect())
    assert "nosuchoption" in text
    text = error_of(lambda: read(spark, cluster, path=str(tmp_path)).collect())
    assert "nameServer" in text
    text = error_of(lambda: read(spark, cluster, expressionType="XPATH").collect())
    assert "expressionType" in text
    text = error_of(lambda: read(spark, cluster, subExpression="n >>> 1", expressionType="SQL92").collect())
    assert "subExpression" in text
    json_unknown = '{"NetAll": {"broker-z": {"0": 1}}}'
    text = error_of(lambda: read(spark, cluster, startingOffsets=json_unknown).collect())
    assert "broker-z" in text and "startingOffsets" in text
    # The store source keeps rejecting the network options.
    text = error_of(
        lambda: spark.read.format("rocketmq").option("topicPattern", "x").load(str(tmp_path)).collect()
    )
    assert "topicpattern" in text and "network source" in text
    assert PythonException  # the errors above reach the driver wrapped by Spark


def test_load_with_a_name_server_reads_over_the_network(
    spark: SparkSession, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    import rmq.spark

    with caplog.at_level(logging.INFO, logger="rmq.spark.jvm"):
        df = rmq.spark.load(spark, nameServer=cluster.ns, topics=TOPIC, columns="body,broker_name")
    assert "with the JVM network reader" in caplog.text  # tests/spark/test_network_jvm.py: its rows
    assert df.columns == ["body", "broker_name"]
    assert hashes([bytes(r.body) for r in df.collect()]) == hashes([m.body for m in sent_of(cluster)])


def test_load_without_the_jar_says_how_to_get_it(
    spark: SparkSession, cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    import logging

    import rmq.spark
    import rmq.spark.jvm as jvm

    monkeypatch.setattr(jvm, "jvm_reader_available", lambda spark: False)
    with caplog.at_level(logging.INFO, logger="rmq.spark.jvm"):
        rmq.spark.load(spark, str(tmp_path), columns="topic")
    jar = rmq.spark.jar_path()
    assert f'SparkSession.builder.config("spark.jars", "{jar}")' in caplog.text
    monkeypatch.setattr(jvm, "jar_path", lambda: None)
    with caplog.at_level(logging.INFO, logger="rmq.spark.jvm"):
        rmq.spark.load(spark, str(tmp_path), columns="topic")
    assert "scripts/spark-jar" in caplog.text
