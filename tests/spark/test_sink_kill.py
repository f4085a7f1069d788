"""Exactly-once through a SIGKILL: a streaming query writing to RocketMQ with
``deliveryGuarantee=exactly_once`` is killed (driver, JVM and Python workers, kill -9) while a batch's
half messages are stored but before its commit, and started again on the same checkpoint. A real
consumer then finds every row in the topic exactly once, and every half message of the killed attempt
is rolled back (by the broker's check-back, answered from the checkpoint by the restarted query)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess, start_broker
from tests.spark.helpers import read_rows
from tests.spark.sinkhelp import consume, create_topic, digest

pytest.importorskip("pyspark")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    # Asks about a half message soon after its immunity (the sink's checkImmunitySec) ends, and never gives
    # up on one (so the killed attempt's halves wait for the restarted query's answer).
    b = start_broker(
        tmp_path / "store",
        "transactionCheckInterval=1000",
        "transactionTimeOut=1000",
        "transactionCheckMax=1000000",
    )
    yield b
    b.stop()


def add_file(src: Path, name: str, bodies: list[str]) -> None:
    tmp = src / f".{name}.tmp"
    tmp.write_text("".join(json.dumps({"body": b}) + "\n" for b in bodies))
    tmp.rename(src / f"{name}.json")


def start_child(
    broker: BrokerProcess, topic: str, src: Path, ck: Path, stop: Path, log: Path
) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "tests.spark.sink_child", broker.namesrv_addr, topic, str(src), str(ck)]
    args += [str(stop), "1.0", "checkImmunitySec=2"]
    with open(log, "ab") as out:
        return subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def descendants(pid: int) -> list[int]:
    """Every live process under `pid` (Spark's Python daemons have process groups of their own)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_all(child: subprocess.Popen[bytes]) -> None:
    """kill -9 of the query process and everything it started: driver, JVM, Python workers."""
    pids = descendants(child.pid)
    os.killpg(child.pid, signal.SIGKILL)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    child.wait()


def halves(store: Path, ck: Path) -> dict[tuple[str, str, str], dict]:
    """The query's half messages by (task, row, try): their batch and half queue offsets (a check-back
    re-appends the half it asks about, so one may have several copies)."""
    sink = str(ck / "rocketmq-sink")
    out: dict[tuple[str, str, str], dict] = {}
    for r in read_rows(store, topics="RMQ_SYS_TRANS_HALF_TOPIC"):
        p = dict(r["properties"] or ())
        if p.get("RMQ_SPARK_SINK") == sink:
            h = out.setdefault(
                (p["RMQ_SPARK_TASK"], p["RMQ_SPARK_SEQ"], p["RMQ_SPARK_TRY"]), {"offsets": set()}
            )
            h["batch"] = int(p["RMQ_SPARK_BATCH"])
            h["offsets"].add(r["queue_offset"])
    return out


def ended(store: Path) -> set[int]:
    """Half queue offsets with an op record (committed or rolled back)."""
    return {int(r["body"]) for r in read_rows(store, topics="RMQ_SYS_TRANS_OP_HALF_TOPIC")}


def resolved(store: Path, ck: Path, keys: set[tuple[str, str, str]]) -> bool:
    """Whether every half of `keys` has been ended (its last copy, when the check-back re-appended it)."""
    now, done = halves(store, ck), ended(store)
    return all(now[k]["offsets"] & done for k in keys)


def visible(store: Path, topic: str) -> int:
    return sum(1 for _ in read_rows(store, topics=topic))


def wait(
    cond,
    what: str,
    timeout: float = 600.0,
    child: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if child is not None and child.poll() is not None:
            tail = log.read_text()[-4000:] if log else ""
            raise AssertionError(f"the query process exited ({child.returncode}) waiting for {what}:\n{tail}")
        time.sleep(1.0)
    raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-4000:] if log else ''}")


def test_sigkill_mid_batch_then_restart_writes_every_row_exactly_once(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = "SinkKill"
    create_topic(broker, topic)
    src, ck, stop, log = tmp_path / "src", tmp_path / "ck", tmp_path / "stop", tmp_path / "child.log"
    src.mkdir()
    # Batch 0: two fast files. Batch 1: a fast file and a slow one (a second a row): the fast task's
    # halves are stored while the slow task runs, and the batch cannot commit before the slow one ends.
    fast = [f"fast-{i}" for i in range(60)]
    slow = [f"slow-{i}" for i in range(20)] + [f"fast1-{i}" for i in range(30)]
    later = [f"later-{i}" for i in range(40)]
    add_file(src, "f0a", fast[:30])
    add_file(src, "f0b", fast[30:])
    add_file(src, "f1a", slow[20:])
    add_file(src, "f1b", slow[:20])
    store = broker.store_dir

    child = start_child(broker, topic, src, ck, stop, log)
    try:
        # Batch 0 committed (its rows visible), batch 1 in flight: some of its halves stored.
        wait(
            lambda: (
                visible(store, topic) >= len(fast)
                and any(h["batch"] == 1 for h in halves(store, ck).values())
            ),
            "batch 1's first half messages",
            child=child,
            log=log,
        )
    finally:
        kill_all(child)
    first = halves(store, ck)
    orphans = {k: h for k, h in first.items() if h["batch"] == 1}
    assert orphans
    assert not (ck / "rocketmq-sink" / "commits" / "1").exists()  # killed before batch 1's commit
    assert visible(store, topic) == len(fast)

    add_file(src, "f2a", later[:20])
    add_file(src, "f2b", later[20:])
    child = start_child(broker, topic, src, ck, stop, log)
    try:
        expect = fast + slow + later
        wait(
            lambda: visible(store, topic) >= len(expect), "every row after the restart", child=child, log=log
        )
        # The killed attempt's halves are asked about and rolled back while the restarted query runs.
        wait(
            lambda: resolved(store, ck, set(orphans)),
            "the killed attempt's half messages to be rolled back",
            child=child,
            log=log,
        )
        stop.touch()
        assert child.wait(120) == 0
    finally:
        if child.poll() is None:
            kill_all(child)
    got = consume(broker.namesrv_addr, topic, len(expect))
    assert got.bodies == Counter(digest(b.encode()) for b in expect)  # every row once
    # The replayed batch 1 was sent again by new tasks; no row of the killed attempt reached the topic.
    after = halves(store, ck)
    assert {k for k, h in after.items() if h["batch"] == 1} > set(orphans)
    assert (ck / "rocketmq-sink" / "commits" / "1").exists()
    # Rolled back by the restarted query's answer to the check-back, not given up on by the broker.
    assert not list(read_rows(store, topics="TRANS_CHECK_MAX_TIME_TOPIC"))
