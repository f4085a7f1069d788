"""Narrow reads: the ``columns`` option (Spark's Python data source API prunes no columns, so a query
that needs few names them), ``count(*)`` with no column at all, and ``body_size``. Each narrow read
must give exactly what the full decode gives, with the same filters (options, pushed-down predicates,
ConsumeQueue or scan plans) and on a damaged store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import rmq.spark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from rmq import _store
from rmq.spark import spark_schema
from rmq.spark.options import parse_options
from rmq.spark.schema import ReadColumns
from rmq.spark.source import READ_STATS, RocketMQReader, auto_slice_size, plan_partitions, read_partition

from tests.spark.helpers import WrittenStore
from tests.spark.test_bad_input import damaged_store
from tests.spark.test_reader import expected_rows

HEADER = "topic,queue_id,queue_offset,commitlog_offset,store_size,store_timestamp,tags,msg_id"


def load(spark: SparkSession, root: Path, **options: str) -> DataFrame:
    reader = spark.read.format("rocketmq")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(root))


def count_in_process(root: Path, **options: str) -> tuple[int, int, int]:
    """`(rows, batches, records examined)` of a read with no column, in-process (no Spark)."""
    spec = parse_options({"path": str(root), **options})
    cols = ReadColumns(spark_schema([]))
    before = READ_STATS["records_seen"]
    _kind, parts = plan_partitions(spec)
    batches = [b for p in parts for b in read_partition(spec, cols, p)]
    assert all(b.num_columns == 0 for b in batches)
    return sum(b.num_rows for b in batches), len(batches), READ_STATS["records_seen"] - before


def test_count_without_columns_equals_the_full_decode(
    spark: SparkSession, written_store: WrittenStore
) -> None:
    root = written_store.root
    expected = expected_rows(written_store)
    none = load(spark, root, columns="")
    assert none.columns == []
    assert none.count() == load(spark, root).count() == len(expected)
    rows, batches, seen = count_in_process(root, sliceSize="16k")
    assert rows == seen == len(expected)
    assert batches <= len(plan_partitions(parse_options({"path": str(root), "sliceSize": "16k"}))[1])

    # Without a sliceSize option, partitions grow as the columns read get lighter; the rows do not change.
    assert auto_slice_size([]) > auto_slice_size(["topic", "body_size"]) > auto_slice_size(["topic", "body"])
    spec = parse_options({"path": str(root)})
    for names in ([], ["topic"], spark_schema().fieldNames()):
        parts = RocketMQReader(spec, spark_schema(names)).partitions()
        sized = parse_options({"path": str(root), "sliceSize": str(auto_slice_size(names))})
        assert [p.value for p in parts] == [p.value for p in plan_partitions(sized)[1]]

    # The same filters as options, through a scan or the ConsumeQueues, count what the full decode keeps.
    b = next(s for s in written_store.sent if s.topic == "SparkB")
    lo, hi = expected[5]["commitlog_offset"], expected[-5]["commitlog_offset"]
    t = expected[len(expected) // 2]["store_timestamp"]
    cases: list[dict[str, str]] = [
        {"topics": "SparkB"},
        {"topics": "SparkB,SparkC", "queueIds": str(b.queue_id)},
        {"startOffset": str(lo), "endOffset": str(hi)},
        {"startTime": str(t)},
        {"visibleOnly": "true"},
        {"includeSystemTopics": "false", "endTime": str(t)},
    ]
    for opts in cases:
        for pushdown in ("scan", "auto", "consumequeue"):
            if pushdown == "consumequeue" and "topics" not in opts:
                continue
            o = {**opts, "pushdown": pushdown, "sliceSize": "16k"}
            full = load(spark, root, **o).count()
            assert load(spark, root, columns="", **o).count() == full, o
            assert count_in_process(root, **o)[0] == full, o
            assert full > 0, o


def test_narrow_columns_and_pushed_filters_equal_the_full_decode(
    spark: SparkSession, written_store: WrittenStore
) -> None:
    root = written_store.root
    expected = expected_rows(written_store)

    # A DataFrame per query: pyspark 4.3 keeps the reader of a query whose filters were pushed down
    # and reuses it for the next query over the same DataFrame that pushes none (see the README).
    def full() -> DataFrame:
        return load(spark, root)

    def narrow() -> DataFrame:
        return load(spark, root, columns=HEADER)

    by_topic = load(spark, root, columns="topic").groupBy("topic").count().orderBy("topic").collect()
    assert by_topic == full().groupBy("topic").count().orderBy("topic").collect()
    want: dict[str, int] = {}
    for r in expected:
        want[r["topic"]] = want.get(r["topic"], 0) + 1
    assert {r["topic"]: r["count"] for r in by_topic} == want

    header = HEADER.split(",")
    assert narrow().columns == header
    assert sorted(narrow().collect()) == sorted(full().select(*header).collect())

    # Predicates Spark pushes down (topic, queue, offsets, time) narrow a narrow read exactly as a full one.
    b = next(s for s in written_store.sent if s.topic == "SparkB")
    t = expected[len(expected) // 3]["store_timestamp"]
    where = (
        f"(topic = 'SparkB' AND queue_id = {b.queue_id} AND queue_offset >= 1)"
        f" OR (topic IN ('SparkA', 'SparkC') AND store_timestamp >= timestamp_millis({t}))"
    )
    for sel in (where, f"commitlog_offset > {expected[3]['commitlog_offset']} AND tags = 'TagA'"):
        got = narrow().where(sel).collect()
        assert sorted(got) == sorted(full().where(sel).select(*header).collect())
        assert got
        assert narrow().where(sel).count() == full().where(sel).count()

    # body_size is the body's stored length: length(body) unless the body is stored compressed.
    sizes = load(spark, root, columns="commitlog_offset,body_size,sysflag").collect()
    assert sorted((r["commitlog_offset"], r["body_size"]) for r in sizes) == [
        (r["commitlog_offset"], r["body_size"]) for r in expected
    ]
    plain = "sysflag & 1 = 0"
    total = load(spark, root, columns="body_size,sysflag").where(plain).agg(F.sum("body_size")).first()
    assert total is not None and total[0] == full().where(plain).agg(F.sum(F.length("body"))).first()[0]  # type: ignore[index]
    assert any(r["sysflag"] & 1 for r in sizes)  # the store holds compressed bodies too
    raw = load(spark, root, columns="body,body_size", decompress="false").collect()
    assert all(len(r["body"]) == r["body_size"] for r in raw)


def test_narrow_reads_of_a_damaged_store(spark: SparkSession, tmp_path: Path) -> None:
    intact, _lost, _ranges = damaged_store(tmp_path)
    for slice_size in ("4k", "5000", "64m"):
        opts = {"sliceSize": slice_size, "failOnDataLoss": "false"}
        assert count_in_process(tmp_path, **opts)[0] == len(intact)
        assert count_in_process(tmp_path, topics="DmgA,DmgB", pushdown="consumequeue", **opts)[0] == len(
            intact
        )
        with pytest.raises(_store.CorruptStoreError, match="is damaged at offset"):
            count_in_process(tmp_path, sliceSize=slice_size)
    assert load(spark, tmp_path, columns="", failOnDataLoss="false", sliceSize="4k").count() == len(intact)
    got: Any = load(spark, tmp_path, columns="commitlog_offset", failOnDataLoss="false").collect()
    assert sorted(r["commitlog_offset"] for r in got) == intact
    with pytest.raises(Exception, match="is damaged at offset"):
        load(spark, tmp_path, columns="", sliceSize="4k").count()


def test_bad_columns_option_is_reported(spark: SparkSession, written_store: WrittenStore) -> None:
    with pytest.raises(Exception, match="rocketmq has no column 'nope'"):
        load(spark, written_store.root, columns="topic,nope").count()
    with pytest.raises(Exception, match="named twice"):
        load(spark, written_store.root, columns="topic,topic").count()


def test_default_registration_keeps_a_reused_dataframe_exact(spark: Any, written_store: Any) -> None:
    """``register(spark)`` leaves Spark's filter pushdown to Python sources off: with it on, pyspark 4.3
    reuses the reader planned for a pushed-down ``where`` for a later query over the same DataFrame."""
    rmq.spark.register(spark)
    try:
        assert spark.conf.get("spark.sql.python.filterPushdown.enabled") == "false"
        df = spark.read.format("rocketmq").load(str(written_store.root))
        total = df.count()
        topic = df.select("topic").first()[0]
        in_topic = df.where(f"topic = '{topic}'").count()
        assert 0 < in_topic < total
        assert df.count() == total  # the same DataFrame again, no predicate: every row
        assert in_topic == sum(1 for r in df.select("topic").collect() if r[0] == topic)
    finally:
        rmq.spark.register(spark, filter_pushdown=True)  # as the session fixture set it
