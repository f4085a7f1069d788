"""A store laid out as Apache RocketMQ 4.9 writes it reads the same way.

The files are built here byte by byte from REMOTING.md §4 and §6 (no rmq code): 1 GiB CommitLog
files named by offset (sparse), 6,000,000-byte ConsumeQueue files, a blank marker closing the first
file, an IPv6 born host, a zlib body with the pre-4.9.4 COMPRESSED flag, and a transaction as a 4.9
broker stores it (half message in RMQ_SYS_TRANS_HALF_TOPIC, COMMIT_TYPE record in the real topic,
op record)."""

from __future__ import annotations

import zlib
from pathlib import Path

from pyspark.sql import SparkSession

from tests.spark.helpers import GIB, Store, read_rows


def build(root: Path) -> dict[str, int]:
    s = Store(root)
    offs = {}
    base_props = {"UNIQ_KEY": "AC110001000018B4AAC2", "CLUSTER": "DefaultCluster"}
    offs["plain"] = s.put("JavaTopic", 0, b"java-0", {"TAGS": "TagA", "KEYS": "k0 k1", **base_props})
    offs["v6"] = s.put("JavaTopic", 0, b"v6", {"TAGS": "TagB"}, born=("::1", 5555))
    offs["zlib"] = s.put("JavaTopic", 0, zlib.compress(b"x" * 8000), {}, sys_flag=0x1)
    tx = {"TRAN_MSG": "true", "PGROUP": "pg", "REAL_TOPIC": "JavaTopic", "REAL_QID": "0", "UNIQ_KEY": "TX1"}
    offs["half"] = s.put("RMQ_SYS_TRANS_HALF_TOPIC", 0, b"tx", tx)
    offs["commit"] = s.put("JavaTopic", 0, b"tx", tx, sys_flag=0x8, prepared_offset=offs["half"])
    offs["op"] = s.put("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0, b"0", {"TAGS": "d"})
    s.close_file()
    offs["second_file"] = s.put("JavaTopic", 1, b"after roll-over", {"KEYS": "late"})
    offs["last"] = s.put("JavaTopic", 0, b"last", {})
    s.write()
    return offs


def test_a_rocketmq_49_store_reads_the_same(spark: SparkSession, tmp_path: Path) -> None:
    offs = build(tmp_path)
    rows = {r["commitlog_offset"]: r for r in read_rows(tmp_path)}
    assert sorted(rows) == sorted(offs.values())
    plain = rows[offs["plain"]]
    assert (plain["tags"], plain["keys"], plain["msg_id"]) == ("TagA", "k0 k1", "AC110001000018B4AAC2")
    assert (plain["born_host"], plain["store_host"]) == ("192.168.0.7:40000", "10.1.2.3:10911")
    assert plain["offset_msg_id"] == "0A01020300002A9F0000000000000000"
    assert rows[offs["v6"]]["born_host"] == "[::1]:5555"
    assert rows[offs["v6"]]["sysflag"] == 0x10
    assert rows[offs["zlib"]]["body"] == b"x" * 8000
    half, commit = rows[offs["half"]], rows[offs["commit"]]
    assert (half["is_transaction_prepared"], half["visible"]) == (True, False)
    assert (commit["is_transaction_prepared"], commit["visible"]) == (False, True)
    assert commit["prepared_transaction_offset"] == offs["half"]
    assert rows[offs["op"]]["is_system_topic"] and not rows[offs["op"]]["visible"]
    assert rows[offs["second_file"]]["commitlog_offset"] == GIB
    assert [r["queue_offset"] for r in rows.values() if r["topic"] == "JavaTopic" and r["queue_id"] == 0] == [
        0,
        1,
        2,
        3,
        4,
    ]

    # Through Spark, with the queue predicates answered by the 4.9 ConsumeQueue files.
    df = spark.read.format("rocketmq").load(str(tmp_path)).where("topic = 'JavaTopic' AND queue_id = 0")
    assert df.rdd.getNumPartitions() == 1
    got = [(r.queue_offset, bytes(r.body)[:6]) for r in df.orderBy("queue_offset").collect()]
    assert got == [(0, b"java-0"), (1, b"v6"), (2, b"xxxxxx"), (3, b"tx"), (4, b"last")]
