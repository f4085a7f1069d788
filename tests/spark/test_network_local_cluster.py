"""The network source where users run it: driver processes with ``local-cluster[2,1,1024]`` (two executor
JVMs) against two broker groups on one name server. A batch read of exact content; a streaming query
SIGKILLed (driver and executors) after some micro-batches, messages sent meanwhile, and the query
restarted on its checkpoint: every message in the output once (bodies by hash)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.spark.netcluster import Cluster, hashes, start_cluster

TOPIC = "NetLocalCluster"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("netlc"), ["broker-a", "broker-b"])
    try:
        c.create(TOPIC)
        yield c
    finally:
        c.stop()


def driver(log: Path, *args: str) -> subprocess.Popen[str]:
    """A driver process; its stderr (Spark's and Python's errors) goes to `log`."""
    with log.open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.spark.netdriver", *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,  # its own process group: the driver JVM and the executors with it
        )


def finish(proc: subprocess.Popen[str], log: Path, timeout: float = 480) -> None:
    out, _ = proc.communicate(timeout=timeout)
    tail = log.read_text(errors="replace")[-6000:]
    assert proc.returncode == 0 and "DONE" in out, f"exit {proc.returncode}, stdout {out!r}, stderr:\n{tail}"


def test_local_cluster_batch_and_a_killed_stream(
    spark: SparkSession, cluster: Cluster, tmp_path: Path
) -> None:
    log = tmp_path / "drivers.log"
    first = cluster.send(TOPIC, 60, "lc1")
    finish(driver(log, "batch", cluster.ns, TOPIC, str(tmp_path / "batch")), log)
    got = [bytes(r.body) for r in spark.read.parquet(str(tmp_path / "batch")).collect()]
    assert hashes(got) == hashes([m.body for m in first])

    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    proc = driver(log, "stream", cluster.ns, TOPIC, out, ckpt)
    try:
        batches = 0
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("BATCH"):
                batches += 1
                if batches >= 3:
                    break
        assert batches >= 3, log.read_text(errors="replace")[-6000:]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # driver, its JVM and the executors: no clean stop
        proc.wait()
    second = cluster.send(TOPIC, 30, "lc2")
    finish(driver(log, "available", cluster.ns, TOPIC, out, ckpt), log)
    got = [bytes(r.body) for r in spark.read.parquet(out).collect()]
    assert hashes(got) == hashes([m.body for m in first + second])
    assert max(hashes(got).values()) == 1
