"""Issue 12, item 3: a store written by one broker is opened by the other, after a clean stop and after
``kill -9``, and the Java client 4.9.8 reads everything back on it.

The Java program ``rmqpeer.StoreFeed feed`` fills the source broker (messages with tags and keys, a batch,
batches of 1200-byte bodies filling several small CommitLog and ConsumeQueue files, a body past the client's
4 KiB compression threshold, a message delayed by level 1 and delivered, one delayed by level 3 still pending,
a committed, a rolled-back and an unresolved transaction) and has a group consume the first phase, its offsets
committed to the end of every queue (a second group consumes it too, asking for one message again later: a
retry parked for level 3); a second phase stays unconsumed. The source broker is then stopped (or killed once
its config files hold the offsets it acknowledged) and the other broker starts on the same store directory.
There level 3 is 1 s instead of 1 h, so the pending message and the retry are due at once, and a transaction
is checked back after 1 s instead of a minute, so the target checks back the unresolved one (the source never
did). ``rmqpeer.StoreFeed drain`` sends one new message to every queue, commits the checked-back transaction,
reads every queue (and the retry topic) from offset 0 as a fresh group, looks every message up by unique key
and by key, and reads the first group's range from its committed offsets on.
"""

from __future__ import annotations

import struct
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from rmq.common import fastjson

from tests.brokerproc import start_broker
from tests.peers.apache import compile_drivers, peer_libs, run_driver, start_apache
from tests.peers.conftest import unique
from tests.spark.helpers import read_rows

COMMITLOG_FILE = 32 * 1024
CQ_UNITS = 8
TOPIC_PROPS = (
    "autoCreateTopicEnable=true",
    "autoCreateSubscriptionGroup=true",
    "diskMaxUsedSpaceRatio=95",
    # Both brokers must agree on the file sizes of the store they share; small ones, so the feed rolls
    # the CommitLog over several files and the topic's ConsumeQueues over several each.
    f"mappedFileSizeCommitLog={COMMITLOG_FILE}",
    f"mappedFileSizeConsumeQueue={20 * CQ_UNITS}",
    "transactionCheckInterval=1000",
)
# The source holds level 3 for an hour (pending when it stops) and checks a transaction back after a
# minute (so it never does); the target delivers level 3 after 1 s and checks back after 1 s.
SOURCE_PROPS = ("messageDelayLevel=1s 2s 1h", "transactionTimeOut=60000")
TARGET_PROPS = ("messageDelayLevel=1s 2s 1s", "transactionTimeOut=1000")
RMQ_PROPS = ("diskSpaceWarningLevelRatio=99",)
COMPRESSED = 0x1

DIRECTIONS = ("apache_to_rmq", "rmq_to_apache")
STOPS = ("clean", "kill9")


@dataclass
class Exchange:
    direction: str
    stop: str
    store: Path
    topic: str
    group: str
    feed: dict[str, Any]
    drain: dict[str, Any]
    source_rows: list[dict[str, Any]] = field(default_factory=list)
    source_files: list[str] = field(default_factory=list)
    # The ConsumeQueue units of delay level 3 as the source left them: offset, size, tags code.
    source_schedule_units: list[tuple[int, int, int]] = field(default_factory=list)
    target_log: str = ""


class Broker:
    """One broker of either kind on a given store dir, as the test drives it."""

    def __init__(self, kind: str, home: Path, store: Path, props: tuple[str, ...]) -> None:
        self.kind = kind
        if kind == "rmq":
            self.rmq = start_broker(store, *TOPIC_PROPS, *props, *RMQ_PROPS)
            self.namesrv = self.rmq.namesrv_addr
        else:
            self.apache = start_apache(home, *TOPIC_PROPS, *props, store=store)
            self.namesrv = self.apache.namesrv_addr

    def stop(self, how: str) -> None:
        if self.kind == "rmq":
            if how == "kill9":
                self.rmq.kill()
            else:
                rc = self.rmq.stop()
                assert rc == 0, "rmq broker exited uncleanly:\n" + "".join(self.rmq.log[-40:])
        elif how == "kill9":
            self.apache.kill()
        else:
            self.apache.stop()

    def log(self) -> str:
        return "".join(self.rmq.log) if self.kind == "rmq" else self.apache.logs(1_000_000)


def _config(store: Path, name: str) -> dict[str, Any]:
    path = store / "config" / name
    if not path.exists():
        return {}
    try:
        return fastjson.loads(path.read_bytes()) or {}
    except ValueError:
        return {}  # caught between the write and the rename


def _await(cond: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _persisted(store: Path, topic: str, group: str, committed: dict[str, int]) -> None:
    """Wait until the config files hold what the broker acknowledged: the group's offsets and the
    delivery of the level-1 message (both brokers persist them periodically)."""

    def offsets_on_disk() -> bool:
        table = _config(store, "consumerOffset.json").get("offsetTable") or {}
        got = {str(q): int(o) for q, o in (table.get(f"{topic}@{group}") or {}).items()}
        return got == {str(q): int(o) for q, o in committed.items()}

    def delay_on_disk() -> bool:
        table = _config(store, "delayOffset.json").get("offsetTable") or {}
        return int(table.get("1", table.get(1, 0))) >= 1

    _await(offsets_on_disk, "consumerOffset.json to hold the committed offsets")
    _await(delay_on_disk, "delayOffset.json to hold the level-1 delivery")


@pytest.fixture(scope="module")
def java() -> tuple[Any, Path]:
    libs = peer_libs()
    return libs, compile_drivers(libs)


@pytest.fixture(scope="module", params=[(d, s) for d in DIRECTIONS for s in STOPS], ids=lambda p: "-".join(p))
def exchange(
    request: pytest.FixtureRequest, java: tuple[Any, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Exchange]:
    direction, stop = request.param
    source_kind, target_kind = ("apache", "rmq") if direction == "apache_to_rmq" else ("rmq", "apache")
    libs, classes = java
    home = tmp_path_factory.mktemp(f"exchange-{direction}-{stop}")
    store = home / "store"
    topic, group = unique("StoreX"), unique("storex_g")

    source = Broker(source_kind, home / "source", store, SOURCE_PROPS)
    try:
        feed = run_driver(
            libs,
            classes,
            home / "client",
            "feed",
            main="rmqpeer.StoreFeed",
            namesrv=source.namesrv,
            topic=topic,
            group=group,
        )
        if stop == "kill9":
            _persisted(store, topic, group, feed["committed"])
    finally:
        source.stop(stop)
    source_rows = read_rows(store)
    source_files = sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file())
    with open(store / "consumequeue" / "SCHEDULE_TOPIC_XXXX" / "2" / f"{0:020d}", "rb") as f:
        data = f.read()
    units = [struct.unpack_from(">qiq", data, i) for i in range(0, len(data), 20)]
    units = [u for u in units if u != (0, 0, 0)]

    awaited = ",".join(m["msg_id"] for m in feed["sent"] if m["kind"] in ("delay3", "txu"))
    target = Broker(target_kind, home / "target", store, TARGET_PROPS)
    try:
        drain = run_driver(
            libs,
            classes,
            home / "client",
            "drain",
            main="rmqpeer.StoreFeed",
            namesrv=target.namesrv,
            topic=topic,
            group=group,
            fresh=group + "_fresh",
            **{"await": awaited},
        )
    finally:
        target.stop("clean")
    yield Exchange(
        direction, stop, store, topic, group, feed, drain, source_rows, source_files, units, target.log()
    )


# Where a send's queue and offset are the real topic's (a delayed or transactional send answers with the
# system topic's).
PLACED = ("plain", "batch", "bulk", "big", "new")
# Appended to the topic by the target: the pending delayed message, the transaction it checks back.
BY_TARGET = ("delay3", "txu")
FIELDS = ("body", "tags", "keys", "kind", "seq")


def _by_id(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    counts = Counter(m["msg_id"] for m in messages)
    twice = [
        (m["kind"], m["seq"], m["queue_id"], m["queue_offset"]) for m in messages if counts[m["msg_id"]] > 1
    ]
    assert twice == [], "read more than once"
    return {m["msg_id"]: m for m in messages}


def _same(sent: dict[str, Any], got: dict[str, Any]) -> None:
    assert {k: got[k] for k in FIELDS} == {k: sent[k] for k in FIELDS}, sent["msg_id"]
    if sent["kind"] in PLACED:
        assert (got["queue_id"], got["queue_offset"]) == (sent["queue_id"], sent["queue_offset"]), sent


def test_everything_is_read_back_by_a_fresh_group(exchange: Exchange) -> None:
    """A fresh group reads every queue from 0 on the target: each message once (the delayed ones in the real
    topic, the pending one delivered by the target, the committed transaction, not the rolled-back one), with
    body, tags, keys and properties as sent; the new sends continue each queue's offsets without a gap."""
    sent = exchange.feed["sent"] + exchange.drain["sent"]
    all_ = _by_id(exchange.drain["all"])
    want = {m["msg_id"]: m for m in sent if m["kind"] != "txr"}
    assert sorted(all_) == sorted(want), exchange.target_log[-4000:]
    for msg_id, m in want.items():
        _same(m, all_[msg_id])
    big = next(m for m in exchange.feed["sent"] if m["kind"] == "big")
    assert len(all_[big["msg_id"]]["body"]) >= 12000
    by_queue: dict[int, list[int]] = {}
    for m in all_.values():
        by_queue.setdefault(m["queue_id"], []).append(m["queue_offset"])
    for q, offsets in by_queue.items():
        assert sorted(offsets) == list(range(len(offsets))), f"queue {q}: {sorted(offsets)}"
    for new in exchange.drain["sent"]:
        older = [
            all_[m["msg_id"]]["queue_offset"]
            for m in exchange.feed["sent"]
            if m["kind"] != "txr"
            and m["kind"] not in BY_TARGET
            and all_[m["msg_id"]]["queue_id"] == new["queue_id"]
        ]
        assert new["queue_offset"] > max(older, default=-1), new


def test_the_group_resumes_from_its_committed_offsets(exchange: Exchange) -> None:
    """The group's offsets committed on the source are its offsets on the target, and from them it reads
    exactly the unconsumed second phase, what the target appended (the pending delayed message, the
    transaction it checked back) and the target's new sends."""
    committed = {str(q): o for q, o in exchange.feed["committed"].items()}
    assert {str(q): o for q, o in exchange.drain["committed"].items()} == committed
    rest = _by_id(exchange.drain["rest"])
    want = [m for m in exchange.feed["sent"] if m["phase"] == "B" or m["kind"] in BY_TARGET]
    want += exchange.drain["sent"]
    assert sorted(rest) == sorted(m["msg_id"] for m in want)
    for m in want:
        _same(m, rest[m["msg_id"]])


def test_the_reader_reads_the_source_store_exactly(exchange: Exchange) -> None:
    """rmq's reader (the Spark data source's partitions and decode) reads the source's store as it was left:
    every visible message of the topic equals what was sent, the big body flagged compressed and inflated,
    the pending delayed message and the retry still parked in SCHEDULE_TOPIC_XXXX (due in an hour), the
    rolled-back transaction invisible."""
    rows = [r for r in exchange.source_rows if r["topic"] == exchange.topic]
    visible = {r["uniq_key"]: r for r in rows if r["visible"]}
    assert len(visible) == len([r for r in rows if r["visible"]]), "a message stored twice"
    sent = {m["msg_id"]: m for m in exchange.feed["sent"] if m["kind"] not in ("txr", *BY_TARGET)}
    assert sorted(visible) == sorted(sent)
    for msg_id, m in sent.items():
        r = visible[msg_id]
        props = dict(r["properties"])
        got = {
            "body": r["body"].decode(),
            "tags": r["tags"],
            "keys": r["keys"],
            "kind": props.get("kind"),
            "seq": props.get("seq"),
        }
        assert got == {k: m[k] for k in FIELDS}, msg_id
        if m["kind"] in PLACED:
            assert (r["queue_id"], r["queue_offset"]) == (m["queue_id"], m["queue_offset"])
        assert bool(r["sysflag"] & COMPRESSED) == (m["kind"] == "big"), (m["kind"], r["sysflag"])
    pending = next(m["msg_id"] for m in exchange.feed["sent"] if m["kind"] == "delay3")
    parked = [r for r in exchange.source_rows if r["topic"] == "SCHEDULE_TOPIC_XXXX" and r["queue_id"] == 2]
    assert [r["uniq_key"] for r in parked] == [exchange.feed["retried"], pending]
    retry = dict(parked[0]["properties"])
    assert (retry["REAL_TOPIC"], retry["RETRY_TOPIC"]) == (f"%RETRY%{exchange.group}_retry", exchange.topic)
    # Their ConsumeQueue units' tags codes are when they are due: stored + the source's level 3 (1 h).
    due = [int(r["store_timestamp"].timestamp() * 1000) + 3_600_000 for r in parked]
    assert exchange.source_schedule_units == [
        (r["commitlog_offset"], r["store_size"], d) for r, d in zip(parked, due, strict=True)
    ]


def test_the_target_resolves_the_transaction_left_open(exchange: Exchange) -> None:
    """The source's half and op records tell the target which transactions are settled: it checks back only
    the one the source left unknown (answered COMMIT by the producer now), never the committed or the
    rolled-back one, and the checked one is in the topic once (asserted with everything else above)."""
    assert sorted(exchange.drain["checked"]) == ["txu"], exchange.target_log[-4000:]


def test_the_index_answers_for_what_the_source_stored(exchange: Exchange) -> None:
    """The target's index (the source's index files, and what it added) finds every message of the topic by
    its unique key and by its own key."""
    all_ = _by_id(exchange.drain["all"])
    assert exchange.drain["by_uniq_key"] == {i: m["body"] for i, m in all_.items()}
    assert exchange.drain["by_key"] == {i: [i] for i in all_}


def test_the_store_spans_several_files(exchange: Exchange) -> None:
    """The feed rolled the CommitLog and the topic's ConsumeQueues over several files (so recovery and
    reads crossed file ends, blank end-of-file records included)."""
    commitlog = [f for f in exchange.source_files if f.startswith("commitlog/")]
    cq = [f for f in exchange.source_files if f.startswith(f"consumequeue/{exchange.topic}/")]
    assert len(commitlog) >= 3, exchange.source_files
    assert len(cq) > 4, exchange.source_files


def test_the_target_recovers_the_store(exchange: Exchange) -> None:
    """The target sees how the source stopped (clean, or the abort file a kill -9 leaves) and recovers
    without repairing anything: rmq journals no repair (no WARN from its store), Apache logs no store
    error."""
    log = exchange.target_log
    if exchange.direction == "apache_to_rmq":
        state = "clean shutdown" if exchange.stop == "clean" else "unclean shutdown"
        # Lines read "<time> LEVEL [<brokerName>_<brokerId> <pid>] <logger>: <message>".
        assert any(
            " INFO [" in line and f"] rmq.store: store recovery: {state};" in line
            for line in log.splitlines()
        ), log
        assert [line for line in log.splitlines() if " WARNING [" in line and "] rmq.store:" in line] == []
    else:
        state = "normally" if exchange.stop == "clean" else "abnormally"
        assert f"RocketmqStore - last shutdown {state}" in log
        assert [line for line in log.splitlines() if "ERROR" in line and "RocketmqStore" in line] == []


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    import os
    import sys

    import rmq.spark
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[1]")
        .appName("rmq-store-exchange")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "512m")
        .config("spark.sql.shuffle.partitions", "1")
        # The first session of the process launches Spark's JVM, and only jars given then are on the
        # driver's classpath: tests/spark's JVM reader tests run later in this process.
        .config("spark.jars", rmq.spark.jar_path() or "")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    rmq.spark.register(session)
    yield session
    session.stop()


# One Spark session costs more than the rest of a case: Spark reads the store left by a kill -9 only (the
# reader's own read of every source store is above).
@pytest.mark.parametrize("exchange", [("apache_to_rmq", "kill9")], indirect=True, ids=["apache_to_rmq-kill9"])
def test_spark_reads_the_topic_as_the_client_does(exchange: Exchange, spark: Any) -> None:
    """Through Spark (the topic predicate answered from the ConsumeQueues), the Apache-written store as rmq
    left it holds exactly what the fresh group read: the same messages at the same queue offsets, bodies
    inflated."""
    df = (
        spark.read.format("rocketmq")
        .load(str(exchange.store))
        .where(f"topic = '{exchange.topic}' AND visible")
    )
    got = {r.uniq_key: (r.queue_id, r.queue_offset, bytes(r.body).decode()) for r in df.collect()}
    want = {m["msg_id"]: (m["queue_id"], m["queue_offset"], m["body"]) for m in exchange.drain["all"]}
    assert got == want


def test_the_retry_parked_on_the_source_is_redelivered_by_the_target(exchange: Exchange) -> None:
    """A message one group asked to reconsume later, parked for an hour on the source, is delivered by the
    target into that group's retry topic (created on the source), once, with its reconsume count and
    origin."""
    first = next(m for m in exchange.feed["sent"] if m["msg_id"] == exchange.feed["retried"])
    got = [(m["msg_id"], m["body"], m["reconsume"], m["retry_topic"]) for m in exchange.drain["retry"]]
    assert got == [(first["msg_id"], first["body"], 1, exchange.topic)]
