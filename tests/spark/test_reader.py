"""spark.read.format("rocketmq") over a store written by rmq's broker: rows, values, visibility,
pushdown, SQL, UDFs. Expected values come from tests/storefmt.py, a reader that shares no code with
rmq, and from what the producer sent."""

from __future__ import annotations

import dataclasses
import zlib
from collections import Counter
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual
from rmq.spark import decode_record, parse_properties, spark_schema
from rmq.spark.options import parse_options
from rmq.spark.pushdown import push_filters
from rmq.spark.schema import ReadColumns
from rmq.spark.source import READ_STATS, plan_partitions, read_partition

from tests.spark.helpers import COMMITLOG_FILE_SIZE, WrittenStore, fingerprint
from tests.storefmt import Record, read_commitlog

HALF = "RMQ_SYS_TRANS_HALF_TOPIC"
OP = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
SYSTEM = {
    "TBW102",
    "SCHEDULE_TOPIC_XXXX",
    "BenchmarkTest",
    HALF,
    "RMQ_SYS_TRACE_TOPIC",
    OP,
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
}
TIMES = ("born_timestamp", "store_timestamp")


def expected_row(r: Record) -> dict[str, Any]:
    """The row a stored record must become, computed from REMOTING.md §4 by storefmt."""
    props = r.properties
    offset_id = f"{bytes(map(int, r.store_host[0].split('.'))).hex().upper()}{r.store_host[1]:08X}"
    offset_id += f"{r.physical_offset:016X}"
    prepared = (r.sys_flag & 0xC) == 0x4 or (r.topic == HALF and props.get("TRAN_MSG") == "true")
    system = r.topic in SYSTEM or r.topic.startswith("rmq_sys_")
    return {
        "topic": r.topic,
        "queue_id": r.queue_id,
        "queue_offset": r.queue_offset,
        "commitlog_offset": r.physical_offset,
        "store_size": r.total_size,
        "sysflag": r.sys_flag,
        "flag": r.flag,
        "born_timestamp": r.born_timestamp,
        "store_timestamp": r.store_timestamp,
        "born_host": f"{r.born_host[0]}:{r.born_host[1]}",
        "store_host": f"{r.store_host[0]}:{r.store_host[1]}",
        "reconsume_times": r.reconsume_times,
        "prepared_transaction_offset": r.prepared_transaction_offset,
        "tags": props.get("TAGS"),
        "keys": props.get("KEYS"),
        "uniq_key": props.get("UNIQ_KEY"),
        "msg_id": props.get("UNIQ_KEY", offset_id),
        "offset_msg_id": offset_id,
        "properties": props,
        "body": zlib.decompress(r.body) if r.sys_flag & 1 else r.body,
        "body_size": len(r.body),
        "is_transaction_prepared": prepared,
        "is_system_topic": system,
        "visible": not system and not prepared and (r.sys_flag & 0xC) != 0xC,
    }


def expected_rows(ws: WrittenStore) -> list[dict[str, Any]]:
    return [expected_row(r) for r in read_commitlog(str(ws.root / "commitlog"), COMMITLOG_FILE_SIZE)]


def collect(df: DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts, timestamps as epoch ms (exact), binary as bytes."""
    cols = [f"unix_millis({c}) AS {c}" if c in TIMES else c for c in df.columns]
    out = []
    for row in df.selectExpr(*cols).collect():
        d = row.asDict()
        if "body" in d and d["body"] is not None:
            d["body"] = bytes(d["body"])
        out.append(d)
    return sorted(out, key=lambda d: d.get("commitlog_offset", 0))


def load(spark: SparkSession, ws: WrittenStore, **options: str) -> DataFrame:
    reader = spark.read.format("rocketmq")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(ws.root))


def test_every_stored_record_is_one_row_with_its_values(
    spark: SparkSession, written_store: WrittenStore
) -> None:
    df = load(spark, written_store)
    assert df.schema == spark_schema()
    rows = collect(df)
    expected = expected_rows(written_store)
    assert rows == expected
    # The CommitLog rolled over: rows come from several files.
    assert len(list((written_store.root / "commitlog").iterdir())) >= 2
    assert max(r["commitlog_offset"] for r in rows) > COMMITLOG_FILE_SIZE
    # And they are what the producer sent.
    by_offset = {r["commitlog_offset"]: r for r in rows}
    for s in written_store.sent:
        r = by_offset[s.commitlog_offset]
        assert (r["topic"], r["queue_id"], r["queue_offset"]) == (s.topic, s.queue_id, s.queue_offset)
        assert (r["uniq_key"], r["msg_id"], r["body"]) == (s.uniq_key, s.uniq_key, s.body)
        assert (r["tags"], r["keys"]) == (s.tags, s.keys)
        assert s.user_properties.items() <= r["properties"].items()
        assert r["visible"] and not r["is_system_topic"]
    assert sum(r["sysflag"] & 1 for r in rows) == 16  # the 5000-byte bodies went compressed


def test_transactions_and_visibility(spark: SparkSession, written_store: WrittenStore) -> None:
    ws = written_store
    df = load(spark, ws)
    half = collect(df.where("is_transaction_prepared"))
    assert sorted(r["body"] for r in half) == sorted([ws.committed, ws.rolled_back])
    assert {(r["topic"], r["visible"], r["is_system_topic"]) for r in half} == {(HALF, False, True)}
    tx = collect(df.where("topic = 'SparkTx'"))
    assert [r["body"] for r in tx] == [ws.committed]
    commit = tx[0]
    assert commit["sysflag"] & 0xC == 0x8 and commit["visible"]
    assert commit["prepared_transaction_offset"] in {r["commitlog_offset"] for r in half}
    visible = collect(df.where("visible").select("topic", "body"))
    bodies = {r["body"] for r in visible}
    assert ws.committed in bodies and ws.rolled_back not in bodies
    assert Counter(r["topic"] for r in visible) == Counter([s.topic for s in ws.sent] + ["SparkTx"])
    # The same through options, without predicates.
    opts = collect(load(spark, ws, visibleOnly="true").select("topic", "body"))
    assert Counter((r["topic"], r["body"]) for r in opts) == Counter((r["topic"], r["body"]) for r in visible)
    no_system = collect(load(spark, ws, includeSystemTopics="false").select("topic"))
    assert not {r["topic"] for r in no_system} & SYSTEM
    assert len(no_system) == len(visible)


def test_pushdown_reads_less_and_is_exact(spark: SparkSession, written_store: WrittenStore) -> None:
    ws = written_store
    expected = expected_rows(ws)
    target = next(s for s in ws.sent if s.topic == "SparkB")
    base = load(spark, ws, sliceSize="16k")
    scan_tasks = base.rdd.getNumPartitions()
    assert scan_tasks > 4  # 16 KiB slices of three or four 64 KiB files
    sel = base.where(f"topic = 'SparkB' AND queue_id = {target.queue_id}")
    assert sel.rdd.getNumPartitions() < scan_tasks  # read through the ConsumeQueue
    want = [
        r["commitlog_offset"] for r in expected if r["topic"] == "SparkB" and r["queue_id"] == target.queue_id
    ]
    assert [r["commitlog_offset"] for r in collect(sel.select("commitlog_offset"))] == want

    # Ranges on offsets and store time are exact (bounds included or not as the operators say).
    lo, hi = expected[5]["commitlog_offset"], expected[-5]["commitlog_offset"]
    t = expected[10]["store_timestamp"]
    ranged = base.where(
        f"commitlog_offset >= {lo} AND commitlog_offset < {hi} AND store_timestamp > timestamp_millis({t})"
        " AND tags IN ('big', 'batch', 'TagA')"
    )
    got = [r["commitlog_offset"] for r in collect(ranged.select("commitlog_offset"))]
    assert got == [
        r["commitlog_offset"]
        for r in expected
        if lo <= r["commitlog_offset"] < hi
        and r["store_timestamp"] > t
        and r["tags"] in ("big", "batch", "TagA")
    ]
    assert got

    # Records examined: a ConsumeQueue read of one queue touches only its records; a scan, all.
    spec, rest = push_filters(
        parse_options({"path": str(ws.root)}).filter,
        [
            EqualTo(("topic",), "SparkB"),
            EqualTo(("queue_id",), target.queue_id),
            GreaterThanOrEqual(("queue_offset",), 0),
        ],
    )
    assert rest == []
    cols = ReadColumns(spark_schema())
    seen = {}
    for mode in ("scan", "consumequeue"):
        s = dataclasses.replace(parse_options({"path": str(ws.root), "pushdown": mode}), filter=spec)
        before = READ_STATS["records_seen"]
        kind, parts = plan_partitions(s)
        rows = [r for p in parts for b in read_partition(s, cols, p) for r in b.to_pylist()]
        assert [r["commitlog_offset"] for r in rows] == want
        seen[kind] = READ_STATS["records_seen"] - before
    assert seen["queue"] == len(want) < seen["scan"] == len(expected)


def test_sql_over_a_temp_view(spark: SparkSession, written_store: WrittenStore) -> None:
    spark.sql(
        f"CREATE OR REPLACE TEMP VIEW rmq_messages USING rocketmq OPTIONS (path '{written_store.root}')"
    )
    got = spark.sql(
        "SELECT topic, count(*) AS n, sum(length(body)) AS bytes FROM rmq_messages"
        " WHERE visible GROUP BY topic ORDER BY topic"
    ).collect()
    want: dict[str, list[int]] = {}
    for r in expected_rows(written_store):
        if r["visible"]:
            n, b = want.setdefault(r["topic"], [0, 0]), len(r["body"])
            n[0] += 1
            n[1] += b
    assert [(r.topic, r.n, r.bytes) for r in got] == [(t, n, b) for t, (n, b) in sorted(want.items())]
    keys = spark.sql("SELECT keys FROM rmq_messages WHERE topic = 'SparkA' AND tags = 'TagB'").collect()
    assert sorted(r["keys"] for r in keys) == ["a1 order-1", "a3 order-3", "a5 order-5"]


def test_user_schema_selects_and_orders_columns(spark: SparkSession, written_store: WrittenStore) -> None:
    df = (
        spark.read.format("rocketmq")
        .schema("body binary, queue_offset bigint, commitlog_offset bigint")
        .option("topics", "SparkC")
        .load(str(written_store.root))
    )
    assert df.columns == ["body", "queue_offset", "commitlog_offset"]
    rows = collect(df)
    batch = [s for s in written_store.sent if s.topic == "SparkC"]
    assert [(r["body"], r["queue_offset"]) for r in rows] == [(s.body, s.queue_offset) for s in batch]


def test_udfs_decode_raw_records_and_properties(spark: SparkSession, written_store: WrittenStore) -> None:
    expected = [r for r in expected_rows(written_store) if r["topic"] in ("SparkA", "SparkBig")][:8]
    raws: list[tuple[bytes | None]] = []
    for r in expected:
        off = r["commitlog_offset"]
        base = off // COMMITLOG_FILE_SIZE * COMMITLOG_FILE_SIZE
        data = (written_store.root / "commitlog" / f"{base:020d}").read_bytes()
        raws.append((data[off - base : off - base + r["store_size"]],))
    raws += [(b"not a record",), (None,)]
    df = spark.createDataFrame(raws, "raw binary").select(decode_record("raw").alias("m"))
    got = df.select("m.topic", "m.commitlog_offset", "m.body", "m.properties", "m.visible", "m").collect()
    for g, e in zip(got, expected, strict=False):
        assert (g.topic, g.commitlog_offset, bytes(g.body), g.properties, g.visible) == (
            e["topic"],
            e["commitlog_offset"],
            e["body"],
            e["properties"],
            True,
        )
    assert got[-2].m is None and got[-1].m is None

    props = spark.createDataFrame(
        [("TAGS\x01a\x02KEYS\x01k1 k2\x02TAGS\x01b",), ("\x01x\x02y\x01",), (None,)], "p string"
    )
    maps = [r.m for r in props.select(parse_properties("p").alias("m")).collect()]
    assert maps == [{"KEYS": "k1 k2", "TAGS": "b"}, {}, None]


def test_reading_never_modified_the_store(written_store: WrittenStore) -> None:
    assert fingerprint(written_store.root) == written_store.fingerprint
    assert not (written_store.root / "abort").exists()


def test_bad_options_and_schema_are_reported(spark: SparkSession, written_store: WrittenStore) -> None:
    with pytest.raises(Exception, match="unknown rocketmq option"):
        load(spark, written_store, topic="x").count()
    with pytest.raises(Exception, match="no column"):
        spark.read.format("rocketmq").schema("nope string").load(str(written_store.root)).count()
