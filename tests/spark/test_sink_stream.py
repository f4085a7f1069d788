"""The ``rocketmq`` sink in streaming queries against a real broker: a file-stream source written to a
topic with a checkpoint, stopped and restarted, read back by a real consumer (every row once)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.brokerproc import BrokerProcess, start_broker
from tests.spark.helpers import read_rows, wait_for
from tests.spark.sinkhelp import Cluster, consume, create_topic, digest


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_broker(tmp_path_factory.mktemp("sink-stream-store"))
    yield b
    b.stop()


def add_file(src: Path, name: str, bodies: list[str]) -> None:
    tmp = src / f".{name}.tmp"
    tmp.write_text("".join(json.dumps({"body": b}) + "\n" for b in bodies))
    tmp.rename(src / f"{name}.json")  # the file source lists only complete files


def run_available_now(
    spark: SparkSession, src: Path, ck: Path, broker: Cluster, topic: str, **opts: str
) -> None:
    stream = spark.readStream.schema("body string").option("maxFilesPerTrigger", 1).json(str(src))
    w = (
        stream.writeStream.format("rocketmq")
        .option("nameServer", broker.namesrv_addr)
        .option("topic", topic)
        .option("checkpointLocation", str(ck))
    )
    for k, v in opts.items():
        w = w.option(k, v)
    q = w.trigger(availableNow=True).start()
    q.awaitTermination()
    assert q.exception() is None


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_stream_stopped_and_restarted_writes_every_row_once(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path, guarantee: str
) -> None:
    topic = f"SinkStream_{guarantee}"
    create_topic(broker, topic)
    src, ck = tmp_path / "src", tmp_path / "ck"
    src.mkdir()
    expect: list[str] = []
    for part in range(3):
        bodies = [f"{guarantee}-{part}-{i}" for i in range(100)]
        add_file(src, f"f{part}", bodies)
        expect += bodies
    run_available_now(spark, src, ck, broker, topic, deliveryGuarantee=guarantee)
    for part in range(3, 5):
        bodies = [f"{guarantee}-{part}-{i}" for i in range(100)]
        add_file(src, f"f{part}", bodies)
        expect += bodies
    run_available_now(spark, src, ck, broker, topic, deliveryGuarantee=guarantee)  # the restart
    got = consume(broker.namesrv_addr, topic, len(expect))
    assert got.bodies == Counter(digest(b.encode()) for b in expect)
    committed = sorted(int(p.name) for p in (ck / "commits").iterdir() if p.name.isdigit())
    assert committed == [0, 1, 2, 3, 4]  # one batch per file (maxFilesPerTrigger=1)
    records = ck / "rocketmq-sink" / "commits"
    if guarantee == "exactly_once":
        assert sorted(int(p.name) for p in records.iterdir() if p.name.isdigit()) == committed
        # Every row went through a half message of this query, each ended once (an op record each).
        halves = half_messages(broker.store_dir, ck)
        assert len(halves) == len(expect)
        wait_for(lambda: all(offsets & ended(broker.store_dir) for offsets in halves.values()))
    else:
        assert not records.exists()


def half_messages(store: Path, ck: Path) -> dict[str, set[int]]:
    """The half messages of the query with checkpoint `ck` in the store, by (task, row, try): the half
    queue offsets of each (a check-back re-appends a half it asks about, so one may have several)."""
    sink = str(ck / "rocketmq-sink")
    out: dict[str, set[int]] = {}
    for r in read_rows(store, topics="RMQ_SYS_TRANS_HALF_TOPIC"):
        props = dict(r["properties"] or ())
        if props.get("RMQ_SPARK_SINK") == sink:
            key = f"{props['RMQ_SPARK_TASK']}/{props['RMQ_SPARK_SEQ']}/{props['RMQ_SPARK_TRY']}"
            out.setdefault(key, set()).add(r["queue_offset"])
    return out


def ended(store: Path) -> set[int]:
    """Queue offsets of the half messages that have an op record (committed or rolled back)."""
    return {int(r["body"]) for r in read_rows(store, topics="RMQ_SYS_TRANS_OP_HALF_TOPIC")}
