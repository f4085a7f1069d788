"""spark.readStream.format("rocketmq") against a running broker: new messages arrive, a trigger
reads at most maxRecordsPerTrigger rows, and a query restarted from its checkpoint delivers every
message exactly once across the two runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery
from rmq.client import Message
from rmq.client.sync import Producer

from tests.brokerproc import start_broker
from tests.spark.helpers import COMMITLOG_FILE_SIZE, wait_for

TOPIC = "StreamT"
MAX_PER_TRIGGER = 7


def rows_in(q: StreamingQuery) -> int:
    return sum(p["numInputRows"] for p in q.recentProgress)


def test_stream_follows_the_broker_and_resumes_exactly_once(spark: SparkSession, tmp_path: Path) -> None:
    root, out, ckpt = tmp_path / "store", tmp_path / "out", tmp_path / "ckpt"
    broker = start_broker(root, f"mappedFileSizeCommitLog={COMMITLOG_FILE_SIZE}")
    producer = Producer("stream_pg", namesrv_addr=broker.namesrv_addr)
    producer.start()

    def produce(lo: int, hi: int) -> None:
        for i in range(lo, hi):
            # 3 KiB bodies: 30 of them roll the 64 KiB CommitLog over while the stream runs.
            body = f"m-{i:03d}-".encode() + bytes(3000)
            assert producer.send(Message(TOPIC, body, keys=f"k{i}")).ok
        # Noise the stream must not see.
        assert producer.send(Message("OtherTopic", b"noise")).ok

    def start() -> StreamingQuery:
        df = (
            spark.readStream.format("rocketmq")
            .option("topics", TOPIC)
            .option("maxRecordsPerTrigger", MAX_PER_TRIGGER)
            .load(str(root))
            .select("topic", "queue_id", "queue_offset", "commitlog_offset", "body")
        )
        return (
            df.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ckpt))
            .trigger(processingTime="300 milliseconds")
            .start()
        )

    def progress(q: StreamingQuery) -> list[dict[str, Any]]:
        return [p for p in q.recentProgress if p["numInputRows"]]

    try:
        produce(0, 10)
        q = start()
        wait_for(lambda: rows_in(q) >= 10, timeout=120)
        produce(10, 20)  # while the query runs: the new rows arrive
        wait_for(lambda: rows_in(q) >= 20, timeout=120)
        assert all(p["numInputRows"] <= MAX_PER_TRIGGER for p in progress(q))
        assert len(progress(q)) >= 20 // MAX_PER_TRIGGER + 1
        q.stop()

        produce(20, 30)  # while it is stopped
        q2 = start()
        wait_for(lambda: rows_in(q2) >= 10, timeout=120)
        q2.stop()
    finally:
        producer.shutdown()
        broker.stop()

    rows = spark.read.parquet(str(out)).collect()
    bodies = sorted(bytes(r.body)[:5] for r in rows)
    assert bodies == [f"m-{i:03d}".encode() for i in range(30)]  # each exactly once
    assert {r.topic for r in rows} == {TOPIC}
    assert max(r.commitlog_offset for r in rows) > COMMITLOG_FILE_SIZE
