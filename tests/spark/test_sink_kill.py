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
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.brokerproc import BrokerProcess, start_broker
from tests.spark.helpers import read_rows
from tests.spark.sinkhelp import consume, create_topic, digest

pytest.importorskip("pyspark")

ROOT = Path(__file__).resolve().parents[2]


# A broker asks about a half message soon after its immunity (the sink's checkImmunitySec) ends, and never
# gives up on one (so the killed attempt's halves wait for the restarted query's answer).
CHECK_PROPS = ("transactionCheckInterval=1000", "transactionTimeOut=1000", "transactionCheckMax=1000000")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = start_broker(tmp_path / "store", *CHECK_PROPS)
    yield b
    b.stop()


def add_file(src: Path, name: str, bodies: list[str]) -> None:
    tmp = src / f".{name}.tmp"
    tmp.write_text("".join(json.dumps({"body": b}) + "\n" for b in bodies))
    tmp.rename(src / f"{name}.json")


def start_child(
    namesrv: str, topic: str, src: Path, ck: Path, stop: Path, log: Path, *extra: str
) -> subprocess.Popen[bytes]:
    """tests/spark/sink_child.py (`extra`: its OPTION=VALUE arguments)."""
    args = [sys.executable, "-m", "tests.spark.sink_child", namesrv, topic, str(src), str(ck)]
    args += [str(stop), "1.0", "checkImmunitySec=2", *extra]
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


Half = tuple[int, str, str, str]
"""A half message of the query: (store, task, row, try), the store its index in the list of stores."""


def halves(stores: list[Path], ck: Path) -> dict[Half, dict]:
    """The query's half messages in the brokers' stores: their batch and half queue offsets (a check-back
    re-appends the half it asks about, so one may have several copies)."""
    sink = str(ck / "rocketmq-sink")
    out: dict[Half, dict] = {}
    for i, store in enumerate(stores):
        for r in read_rows(store, topics="RMQ_SYS_TRANS_HALF_TOPIC"):
            p = dict(r["properties"] or ())
            if p.get("RMQ_SPARK_SINK") == sink:
                key = (i, p["RMQ_SPARK_TASK"], p["RMQ_SPARK_SEQ"], p["RMQ_SPARK_TRY"])
                h = out.setdefault(key, {"offsets": set()})
                h["batch"] = int(p["RMQ_SPARK_BATCH"])
                h["offsets"].add(r["queue_offset"])
    return out


def ended(store: Path) -> set[int]:
    """Half queue offsets with an op record (committed or rolled back)."""
    return {int(r["body"]) for r in read_rows(store, topics="RMQ_SYS_TRANS_OP_HALF_TOPIC")}


def resolved(stores: list[Path], ck: Path, keys: set[Half]) -> bool:
    """Whether every half of `keys` has been ended (its last copy, when the check-back re-appended it)."""
    now, done = halves(stores, ck), [ended(s) for s in stores]
    return all(now[k]["offsets"] & done[k[0]] for k in keys)


def visible(stores: list[Path], topic: str) -> int:
    return sum(1 for s in stores for _ in read_rows(s, topics=topic))


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
    create_topic(broker, "SinkKill")
    kill_mid_batch_and_restart(broker.namesrv_addr, [broker.store_dir], "SinkKill", tmp_path)


def kill_mid_batch_and_restart(
    namesrv: str,
    stores: list[Path],
    topic: str,
    tmp_path: Path,
    first: tuple[str, ...] = (),
    second: tuple[str, ...] = (),
    killed: Callable[[], None] = lambda: None,
    stopping: Callable[[Path], None] = lambda log: None,
) -> None:
    """The scenario against the brokers (masters) whose stores are `stores`. `first`, `second`: more
    OPTION=VALUE arguments of the killed and the restarted sink_child; `killed` runs once the first is
    killed, `stopping` (given the children's log) once the second is told to stop."""
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

    child = start_child(namesrv, topic, src, ck, stop, log, *first)
    try:
        # Batch 0 committed (its rows visible), batch 1 in flight: some of its halves stored.
        wait(
            lambda: (
                visible(stores, topic) >= len(fast)
                and any(h["batch"] == 1 for h in halves(stores, ck).values())
            ),
            "batch 1's first half messages",
            child=child,
            log=log,
        )
    finally:
        kill_all(child)
    first = halves(stores, ck)
    orphans = {k: h for k, h in first.items() if h["batch"] == 1}
    assert orphans
    assert not (ck / "rocketmq-sink" / "commits" / "1").exists()  # killed before batch 1's commit
    assert visible(stores, topic) == len(fast)
    killed()

    add_file(src, "f2a", later[:20])
    add_file(src, "f2b", later[20:])
    child = start_child(namesrv, topic, src, ck, stop, log, *second)
    try:
        expect = fast + slow + later
        wait(
            lambda: visible(stores, topic) >= len(expect), "every row after the restart", child=child, log=log
        )
        # The killed attempt's halves are asked about and rolled back while the restarted query runs.
        wait(
            lambda: resolved(stores, ck, set(orphans)),
            "the killed attempt's half messages to be rolled back",
            child=child,
            log=log,
        )
        got = consume(namesrv, topic, len(expect))
        assert got.bodies == Counter(digest(b.encode()) for b in expect)  # every row once
        stop.touch()
        stopping(log)
        assert child.wait(300) == 0, log.read_text(errors="replace")[-4000:]
    finally:
        if child.poll() is None:
            kill_all(child)
    # The replayed batch 1 was sent again by new tasks; no row of the killed attempt reached the topic.
    after = halves(stores, ck)
    assert {k for k, h in after.items() if h["batch"] == 1} > set(orphans)
    assert (ck / "rocketmq-sink" / "commits" / "1").exists()
    # Rolled back by the restarted query's answer to the check-back, not given up on by the broker.
    assert not [r for s in stores for r in read_rows(s, topics="TRANS_CHECK_MAX_TIME_TOPIC")]
