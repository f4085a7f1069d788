"""decode_record on a value holding several stored records (a whole CommitLog file read with binaryFile)
is an error pointing at decode_records, which returns every record of each value."""

from __future__ import annotations

import pandas as pd
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.functions import explode, pandas_udf
from rmq.spark import decode_record, decode_records

from tests.spark.helpers import WrittenStore, read_rows


def test_whole_commitlog_files_decode_to_every_record(
    spark: SparkSession, written_store: WrittenStore
) -> None:
    files = spark.read.format("binaryFile").load(str(written_store.root / "commitlog"))
    with pytest.raises(Exception) as e:
        files.select(decode_record("content").alias("m")).collect()
    assert "stored records" in str(e.value) and "decode_records" in str(e.value)

    rows = (
        files.select(explode(decode_records("content", ["commitlog_offset", "topic", "body"])).alias("m"))
        .select("m.*")
        .collect()
    )
    expected = sorted((r["commitlog_offset"], r["topic"], r["body"]) for r in read_rows(written_store.root))
    assert sorted((r.commitlog_offset, r.topic, bytes(r.body)) for r in rows) == expected
    assert len({r.commitlog_offset for r in rows}) == len(rows)

    one = spark.createDataFrame([(None,), (b"\0" * 64,)], "raw binary")
    got = [r.m for r in one.select(decode_records("raw", ["topic"]).alias("m")).collect()]
    assert got == [None, []]
    bad = spark.createDataFrame([(b"\0\0\0\x10" + b"x" * 40,)], "raw binary")
    with pytest.raises(Exception) as e:
        bad.select(decode_records("raw").alias("m")).collect()
    assert "row 0" in str(e.value) and "claims 16 bytes" in str(e.value)


def test_pandas_udfs_run_beside_the_source(spark: SparkSession, written_store: WrittenStore) -> None:
    @pandas_udf("long")  # type: ignore[call-overload]
    def size(body: pd.Series) -> pd.Series:
        return body.map(lambda b: len(b) if b is not None else 0)

    df = spark.read.format("rocketmq").option("topics", "SparkA").load(str(written_store.root))
    got = sorted(r.n for r in df.select(size("body").alias("n")).collect())
    assert got == sorted(len(s.body) for s in written_store.sent if s.topic == "SparkA")
