"""The JVM reader (``rmq.spark.load``): the same rows as the Python source, column pruning, damage, options.

Every comparison reads one store through both sources in the same Spark session: the Python source
(``spark.read.format("rocketmq")``, decoded by the Rust reader) and the JVM reader (decoded in Java), so the
two decoders check each other on the broker-written store and on a hand-built one with the rare cases."""

from __future__ import annotations

import logging
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
import rmq.spark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tests.spark.helpers import Store, WrittenStore
from tests.spark.test_reader import collect, expected_rows


def _scan_of(df: DataFrame) -> str:
    """The physical plan's scan line (which source read, and which columns)."""
    plan = df._jdf.queryExecution().executedPlan().toString()  # type: ignore[operator]
    return next(line for line in plan.splitlines() if "BatchScan" in line)


def _python(spark: SparkSession, root: Path, **options: str) -> DataFrame:
    reader = spark.read.format("rocketmq")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(root))


def test_the_wheel_carries_the_jvm_reader(spark: SparkSession) -> None:
    jar = rmq.spark.jar_path()
    assert jar is not None, "rmq/spark/jars/rmq-spark.jar is missing: build the wheel with scripts/wheel"
    assert rmq.spark.jvm_reader_available(spark)


def test_every_row_matches_the_python_source(spark: SparkSession, written_store: WrittenStore) -> None:
    jvm = rmq.spark.load(spark, written_store.root)
    assert "rocketmq CommitLog" in _scan_of(jvm)
    expected = collect(_python(spark, written_store.root))
    got = collect(jvm)
    assert len(got) == len(expected_rows(written_store))  # every record, read without either source
    assert got == expected


def test_narrow_queries_read_only_their_columns(spark: SparkSession, written_store: WrittenStore) -> None:
    root = written_store.root
    py = _python(spark, root)
    df = rmq.spark.load(spark, root)
    assert df.count() == py.count()
    by_topic = sorted(tuple(r) for r in df.groupBy("topic").count().collect())
    assert by_topic == sorted(tuple(r) for r in py.groupBy("topic").count().collect())
    assert df.agg(F.sum("body_size")).collect() == py.agg(F.sum("body_size")).collect()
    header = ["topic", "queue_id", "queue_offset", "commitlog_offset", "tags", "msg_id"]
    assert collect(df.select(*header)) == collect(py.select(*header))
    scan = _scan_of(df.select("topic", "body_size"))
    assert "topic" in scan and "body_size" in scan and "body#" not in scan and "properties" not in scan
    # The `columns` option shapes the DataFrame as with the Python source.
    narrow = rmq.spark.load(spark, root, columns="topic,queue_id")
    assert narrow.columns == ["topic", "queue_id"]
    assert rmq.spark.load(spark, root, columns="").count() == py.count()


def _rare_store(root: Path) -> tuple[Store, dict[str, int]]:
    """Records the broker-written store lacks: IPv6 hosts, repeated and empty properties, system and half
    topics, rolled-back and prepared transactions, compressed bodies, an empty body, a roll-over."""
    s = Store(root, file_size=4096)
    offs: dict[str, int] = {}
    offs["v6"] = s.put("T", 0, b"six", {"TAGS": "a", "UNIQ_KEY": "U1"}, born=("2001:db8::7", 1234))
    offs["v6b"] = s.put("T", 1, b"x" * 700, {"KEYS": "k1 k2"}, born=("::1", 65535))
    offs["v4mapped"] = s.put("T", 0, b"m", {}, born=("::ffff:10.0.0.1", 1))
    offs["dup"] = s.put("T", 0, b"d", {"A": "1", "B": "2"} | {"": "x"})
    offs["half"] = s.put("RMQ_SYS_TRANS_HALF_TOPIC", 0, b"h", {"TRAN_MSG": "true", "REAL_TOPIC": "T"})
    offs["prepared"] = s.put("T", 0, b"p", {"TRAN_MSG": "true"}, sys_flag=0x4)
    offs["rollback"] = s.put("T", 0, b"r", {}, sys_flag=0xC)
    offs["schedule"] = s.put("SCHEDULE_TOPIC_XXXX", 2, b"s", {"DELAY": "3"})
    offs["sys"] = s.put("rmq_sys_wheel_timer", 0, b"w", {})
    offs["zlib"] = s.put("T", 0, zlib.compress(b"inflated " * 50), {}, sys_flag=0x1)
    offs["empty"] = s.put("T", 0, b"", {"TAGS": "t"})
    for i in range(12):  # rolls over into more 4 KiB files
        offs[f"fill{i}"] = s.put("F", i % 3, bytes([i]) * 900, {"TAGS": f"t{i}", "KEYS": f"k{i}"})
    return s, offs


def _with_duplicate_property(s: Store, off: int) -> None:
    """Rewrite the properties of the record at `off` (same length): B becomes a second A."""
    f = s.files[off // s.file_size * s.file_size]
    at = off % s.file_size
    total = struct.unpack_from(">i", f, at)[0]
    old = b"A\x011\x02B\x012\x02\x01x"
    new = b"A\x011\x02A\x019\x02\x01x"
    i = f.index(old, at, at + total)
    f[i : i + len(old)] = new


def test_rare_records_match_the_python_source(spark: SparkSession, tmp_path: Path) -> None:
    s, offs = _rare_store(tmp_path / "store")
    _with_duplicate_property(s, offs["dup"])
    s.write()
    got = collect(rmq.spark.load(spark, tmp_path / "store"))
    assert got == collect(_python(spark, tmp_path / "store"))
    by_off: dict[int, dict[str, Any]] = {r["commitlog_offset"]: r for r in got}
    assert by_off[offs["v6"]]["born_host"] == "[2001:db8::7]:1234"
    assert by_off[offs["v6b"]]["born_host"] == "[::1]:65535"
    assert by_off[offs["v4mapped"]]["born_host"] == "[::ffff:10.0.0.1]:1"
    assert by_off[offs["v6"]]["msg_id"] == "U1"
    assert by_off[offs["dup"]]["properties"] == {"A": "9"}  # the later A wins; the nameless entry is dropped
    assert by_off[offs["zlib"]]["body"] == b"inflated " * 50
    assert by_off[offs["half"]]["is_transaction_prepared"] and not by_off[offs["half"]]["visible"]
    assert by_off[offs["prepared"]]["is_transaction_prepared"]
    assert not by_off[offs["rollback"]]["visible"]
    assert by_off[offs["sys"]]["is_system_topic"] and by_off[offs["schedule"]]["is_system_topic"]
    assert by_off[offs["empty"]]["body"] == b""
    raw = collect(
        rmq.spark.load(spark, tmp_path / "store", decompress=False).select("commitlog_offset", "body")
    )
    assert {r["commitlog_offset"]: r["body"] for r in raw}[offs["zlib"]] == zlib.compress(b"inflated " * 50)


def _damage_body(root: Path, file_size: int, off: int) -> None:
    path = root / "commitlog" / f"{off // file_size * file_size:020d}"
    data = bytearray(path.read_bytes())
    at = off % file_size
    total = struct.unpack_from(">i", data, at)[0]
    data[at + total - 40] ^= 0xFF  # inside the body of a 900-byte record
    path.write_bytes(bytes(data))


def test_damage_is_an_error_naming_file_and_offset(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "store"
    s, offs = _rare_store(root)
    s.write()
    bad = offs["fill5"]
    _damage_body(root, s.file_size, bad)
    file = f"{bad // s.file_size * s.file_size:020d}"
    # The body's CRC is checked where the body is read.
    with pytest.raises(Exception, match=rf"{file} is damaged at offset {bad} .*body CRC mismatch"):
        rmq.spark.load(spark, root).select("commitlog_offset", "body").collect()
    with pytest.raises(Exception, match=rf"damaged at offset {bad} .*body CRC mismatch"):
        rmq.spark.load(spark, root).collect()
    # A read that does not read bodies checks every record's header and lengths, not the body's bytes.
    assert rmq.spark.load(spark, root).count() == len(offs)
    assert rmq.spark.load(spark, root, checkCRC=False).select("body").count() == len(offs)
    # failOnDataLoss=false goes to the Python source, which skips the damaged record.
    with caplog.at_level(logging.INFO, logger="rmq.spark.jvm"):
        skipped = rmq.spark.load(spark, root, failOnDataLoss=False)
        offsets = {r[0] for r in skipped.select("commitlog_offset").collect()}
    assert "with the Python source: failOnDataLoss=false" in caplog.text
    assert offsets == set(offs.values()) - {bad}


def test_a_broken_record_chain_fails_every_read(spark: SparkSession, tmp_path: Path) -> None:
    root = tmp_path / "store"
    s, offs = _rare_store(root)
    bad = offs["fill7"]
    f = s.files[bad // s.file_size * s.file_size]
    f[bad % s.file_size + 4] ^= 0x01  # the magic code
    s.write()
    with pytest.raises(
        Exception, match=rf"damaged at offset {bad} .*magic code 0x[0-9a-f]+ is not a message"
    ):
        rmq.spark.load(spark, root).count()
    root2 = tmp_path / "store2"
    s2, offs2 = _rare_store(root2)
    moved = offs2["fill8"]
    f = s2.files[moved // s2.file_size * s2.file_size]
    f[moved % s2.file_size + 28 + 7] ^= 0x01  # the record's PHYSICALOFFSET
    s2.write()
    with pytest.raises(Exception, match=rf"damaged at offset {moved} .*PHYSICALOFFSET"):
        rmq.spark.load(spark, root2).select("queue_id").collect()


def test_filters_go_to_the_python_source(
    spark: SparkSession, written_store: WrittenStore, caplog: pytest.LogCaptureFixture
) -> None:
    topic = written_store.sent[0].topic
    with caplog.at_level(logging.INFO, logger="rmq.spark.jvm"):
        df = rmq.spark.load(spark, written_store.root, topics=topic)
    assert "option(s) topics filter rows" in caplog.text
    assert collect(df) == collect(_python(spark, written_store.root, topics=topic))
    assert {r["topic"] for r in collect(df)} == {topic}


def test_bad_options_are_reported(spark: SparkSession, written_store: WrittenStore) -> None:
    with pytest.raises(ValueError, match="no column 'nope'"):
        rmq.spark.load(spark, written_store.root, columns="topic,nope")
    with pytest.raises(ValueError, match="option checkCRC must be true or false"):
        rmq.spark.load(spark, written_store.root, checkCRC="maybe")
    with pytest.raises(Exception, match="needs the options commitlogDir and splits"):
        spark.read.format(rmq.spark.jvm.JVM_SOURCE).load().count()
    with pytest.raises(Exception, match="option splits: '1:0:1' is not start:end"):
        jvm = spark.read.format(rmq.spark.jvm.JVM_SOURCE).option("commitlogDir", "/nope")
        jvm.option("splits", "1:0:1").load()
    with pytest.raises(Exception, match="unknown option 'topics' of the JVM rocketmq reader"):
        spark.read.format(rmq.spark.jvm.JVM_SOURCE).option("topics", "A").load()


def test_aggregates_are_pushed_down_and_exact(spark: SparkSession, written_store: WrittenStore) -> None:
    root = written_store.root
    py = _python(spark, root)
    df = rmq.spark.load(spark, root)

    def by_topic(d: DataFrame) -> DataFrame:
        return d.groupBy("topic").count()

    def by_queue(d: DataFrame) -> DataFrame:
        return d.groupBy("topic", "queue_id").agg(F.count("*"), F.sum("body_size"), F.count("msg_id"))

    def totals(d: DataFrame) -> DataFrame:
        return d.agg(F.count("*"), F.sum("body_size"), F.sum("store_size"))

    for query, pushed in (
        (by_topic, "count(*) group by topic"),
        (by_queue, "count(*), sum(body_size) group by topic, queue_id"),  # count(msg_id) is count(*)
        (totals, "count(*), sum(body_size), sum(store_size)"),
    ):
        assert sorted(map(tuple, query(df).collect())) == sorted(map(tuple, query(py).collect()))
        assert f"pushed aggregate: {pushed}" in _scan_of(query(df))
    assert df.count() == py.count()

    # Not taken: a nullable column's count, a long column's sum, a filter: Spark aggregates the rows.
    def rows(d: DataFrame) -> list[tuple[Any, ...]]:
        return sorted(map(tuple, d.collect()), key=repr)

    for query in (
        lambda d: d.agg(F.count("tags")),
        lambda d: d.agg(F.sum("queue_offset")),
        lambda d: d.where("queue_id = 1").agg(F.count("*")),
        lambda d: d.groupBy("tags").count(),
    ):
        # A Python-source DataFrame per query: pyspark 4.3 reuses a reader with pushed filters (see register).
        assert rows(query(df)) == rows(query(_python(spark, root)))
        assert "pushed aggregate" not in _scan_of(query(df))


def test_an_empty_store_counts_zero(spark: SparkSession, tmp_path: Path) -> None:
    s = Store(tmp_path / "store", file_size=4096)
    s.write()
    df = rmq.spark.load(spark, tmp_path / "store")
    assert df.count() == 0
    assert df.groupBy("topic").count().collect() == []
    assert df.agg(F.sum("body_size")).collect()[0][0] is None
