"""spark.read.format("rocketmq") on bad input: empty stores and filters, a directory that is not a store,
damaged records inside closed CommitLog files, and compressed bodies that do not inflate.

Stores are laid out byte by byte (``tests.spark.helpers.Store``, small files) and then damaged. Most
option combinations are read in-process (the data source's own planning and decoding, no Spark);
a few go through Spark to show what a job sees."""

from __future__ import annotations

import logging
import re
import zlib
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from rmq import _store
from rmq.spark.source import READ_STATS

from tests.spark.helpers import Store, read_rows

FILE = 16 * 1024
TOPICS = ("DmgA", "DmgB")


def load(spark: SparkSession, root: Path, **options: str) -> DataFrame:
    reader = spark.read.format("rocketmq")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(root))


def offsets(rows: list[Any]) -> list[int]:
    return sorted(r["commitlog_offset"] for r in rows)


def test_empty_stores_and_filters_read_no_rows(spark: SparkSession, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert load(spark, empty).count() == 0
    # A store whose CommitLog directory exists but holds no file.
    (empty / "commitlog").mkdir()
    (empty / "checkpoint").write_bytes(bytes(4096))
    assert read_rows(empty) == []

    s = Store(tmp_path / "store", FILE)
    for i in range(5):
        s.put("Present", 0, f"p{i}".encode(), {})
    s.write()
    df = load(spark, s.root)
    assert df.where("topic = 'Absent'").count() == 0  # pushed down: ConsumeQueues, none to read
    assert load(spark, s.root, topics="Absent", pushdown="scan").count() == 0
    assert df.where("topic = 'Present'").count() == 5


def test_a_directory_that_is_not_a_store_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"meow")
    with pytest.raises(Exception, match=re.escape(str(other)) + ".*no commitlog/ directory"):
        load(spark, other).count()
    missing = r"CommitLog directory .*elsewhere \(does not exist\)"
    with pytest.raises(_store.StoreNotFoundError, match=missing):
        read_rows(tmp_path, commitlogDir=str(tmp_path / "elsewhere"))


def damaged_store(root: Path) -> tuple[list[int], list[int], list[int]]:
    """Three 16 KiB files; the first two (closed) damaged. Returns (intact offsets, damaged record
    offsets, first offsets of the damaged ranges a scan reports)."""
    s = Store(root, FILE)
    offs = [s.put(TOPICS[i % 2], 0, f"m{i:04d}".encode() + bytes(200 + i % 7), {}) for i in range(200)]
    s.write()
    size = {off: n for units in s.units.values() for off, n in units}
    f0 = [o for o in offs if o < FILE]
    f1 = [o for o in offs if FILE <= o < 2 * FILE]
    assert any(o >= 2 * FILE for o in offs)  # both damaged files are closed ones

    def damage(base: int, edit: Any) -> None:
        path = root / "commitlog" / f"{base:020d}"
        data = bytearray(path.read_bytes())
        edit(data)
        path.write_bytes(data)

    def in_file_0(b: bytearray) -> None:
        b[f0[3] + 5] ^= 0xFF  # a magic code
        b[f0[4] + 150] ^= 0xFF  # a body byte: the CRC fails
        b[f0[10] + 150 : f0[12] + 50] = bytes(f0[12] + 50 - f0[10] - 150)  # three records zeroed in part

    blank = f1[-1] + size[f1[-1]]

    def in_file_1(b: bytearray) -> None:
        b[f1[0] - FILE + 2] ^= 0xFF  # the file's first record: its TOTALSIZE
        b[blank - FILE : blank - FILE + 8] = bytes(8)  # the end-of-file blank marker

    damage(0, in_file_0)
    damage(FILE, in_file_1)
    lost = [f0[3], f0[4], f0[10], f0[11], f0[12], f1[0]]
    return [o for o in offs if o not in lost], lost, [f0[3], f0[10], f1[0], blank]


def test_damage_in_closed_files_is_an_error_or_skipped_the_same_way_in_every_mode(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    intact, lost, ranges = damaged_store(tmp_path)
    file0 = str(tmp_path / "commitlog" / f"{0:020d}")
    for slice_size in ("4k", "5000", "64m"):
        for pushdown in ("scan", "consumequeue", "auto"):
            for topics in ({"topics": ",".join(TOPICS)}, {}):
                if pushdown == "consumequeue" and not topics:
                    continue  # a queue read needs topics
                opts = {"sliceSize": slice_size, "pushdown": pushdown, **topics}
                before = dict(READ_STATS)
                caplog.clear()
                with caplog.at_level(logging.WARNING, logger="rmq.spark.source"):
                    rows = read_rows(tmp_path, failOnDataLoss="false", **opts)
                assert offsets(rows) == intact, opts
                damaged = READ_STATS["damaged"] - before["damaged"]
                assert len(caplog.records) == damaged > 0
                assert all("is damaged at offset" in r.getMessage() for r in caplog.records)
                if pushdown == "scan":
                    assert damaged == len(ranges)
                    assert READ_STATS["bytes_skipped"] > before["bytes_skipped"]
                with pytest.raises(_store.CorruptStoreError, match="is damaged at offset") as err:
                    read_rows(tmp_path, **opts)
                m = re.search(r"file (\S+) is damaged at offset (\d+)", str(err.value))
                assert m and m.group(1).startswith(str(tmp_path / "commitlog"))
                assert int(m.group(2)) in lost + ranges
                assert "failOnDataLoss=false" in str(err.value)
                if pushdown == "scan":
                    assert (m.group(1), int(m.group(2))) == (file0, ranges[0])

    # Through Spark: the predicate pushed down (ConsumeQueues or a scan) or evaluated by Spark.
    pushed = load(spark, tmp_path, failOnDataLoss="false", sliceSize="4k").where("topic IN ('DmgA', 'DmgB')")
    assert offsets(pushed.select("commitlog_offset").collect()) == intact
    unpushed = load(spark, tmp_path, failOnDataLoss="false", sliceSize="5000", pushFilters="false")
    assert offsets(unpushed.where("topic LIKE 'Dmg%'").select("commitlog_offset").collect()) == intact
    with pytest.raises(Exception, match=re.escape(file0) + f" is damaged at offset {ranges[0]}"):
        load(spark, tmp_path, sliceSize="4k").count()


def test_a_body_that_does_not_inflate_is_an_error_or_null(spark: SparkSession, tmp_path: Path) -> None:
    s = Store(tmp_path, FILE)
    text = b"".join(b"line %d of a compressible body\n" % i for i in range(300))
    good = s.put("Zip", 0, zlib.compress(text), {}, sys_flag=0x1)
    bad = s.put("Zip", 0, zlib.compress(text), {}, sys_flag=0x1)
    plain = s.put("Zip", 0, b"plain", {})
    s.write()
    path = tmp_path / "commitlog" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    body_at = bad + 4 * 5 + 8 * 2 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4  # fixed fields, IPv4 hosts
    data[body_at + 60] ^= 0xFF
    path.write_bytes(data)
    with pytest.raises(zlib.error):
        zlib.decompress(bytes(data[body_at : body_at + len(zlib.compress(text))]))

    df = load(spark, tmp_path, checkCRC="false", failOnDataLoss="false").select("commitlog_offset", "body")
    got = {r.commitlog_offset: r.body for r in df.collect()}
    assert got == {good: bytearray(text), bad: None, plain: bytearray(b"plain")}
    before = READ_STATS["bad_bodies"]
    assert read_rows(tmp_path, checkCRC="false", failOnDataLoss="false")[1]["body"] is None
    assert READ_STATS["bad_bodies"] == before + 1
    with pytest.raises(Exception, match=f"CommitLog offset {bad} .* does not inflate"):
        load(spark, tmp_path, checkCRC="false").select("body").collect()
    # With the CRC checked, the record itself is damage (its CRC fails).
    with pytest.raises(_store.CorruptStoreError, match=f"damaged at offset {bad}"):
        read_rows(tmp_path)
