"""Spark where users run it: driver processes with ``local-cluster[2,1,1024]`` (two executor JVMs) against
two broker groups, each a master and a slave, on one name server, and against the Apache RocketMQ broker.
Two driver processes (tests/spark/sink_child.py, with tests/spark/netdriver.py's reads) do it all:

1. The first reads the rmq cluster and the Apache broker (batch, exact content; by the Python network
   source and by the JVM network reader, whose jar Spark ships to the executors; the JVM reader and sink copy
   the topic to another, every message once), then runs a stream that
   reads the cluster and the exactly-once sink, until both the driver and its executors are SIGKILLed in
   the middle of a sink batch (its first half messages stored, not committed).
2. The second, on the same checkpoints, runs the sink on (every row once in the topic, counted by a
   consumer; the killed attempt's half messages rolled back), then the read stream, Trigger.AvailableNow,
   with messages sent meanwhile; a master is SIGKILLed during it, and the stream goes on from that
   group's slave: every message in the output once (bodies by hash)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.spark.netcluster import Cluster, SentMsg, hashes, start_cluster
from tests.spark.netdriver import cluster_settings
from tests.spark.test_network_apache import TOPIC as APACHE_TOPIC
from tests.spark.test_network_apache import apache_with_messages
from tests.spark.test_sink_kill import CHECK_PROPS, kill_mid_batch_and_restart

TOPIC = "NetLocalCluster"
SINK_TOPIC = "SinkLocalCluster"
COPY_TOPIC = "CopyLocalCluster"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("netlc"), ["broker-a", "broker-b"], *CHECK_PROPS, slaves=True)
    try:
        c.create(TOPIC)
        c.create(SINK_TOPIC)
        c.create(COPY_TOPIC)
        yield c
    finally:
        c.stop()


def restarted_rows(log: Path) -> int:
    """The rows of the restarted read stream's micro-batches, by the driver's ``BATCH <rows>`` lines."""
    _, mark, after = log.read_text(errors="replace").rpartition("READ-RESTARTED")
    lines = after.splitlines() if mark else []
    return sum(int(line.split()[1]) for line in lines if line.startswith("BATCH "))


def test_local_cluster_reads_and_sink_through_kills(
    spark: SparkSession, cluster: Cluster, tmp_path: Path
) -> None:
    settings = tuple(f"{k}={v}" for k, v in cluster_settings().items())
    batch, apache_batch = str(tmp_path / "batch"), str(tmp_path / "apache-batch")
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    stream = f"{cluster.ns},{TOPIC},{out},{ckpt}"
    sent = cluster.send(TOPIC, 60, "lc1")
    with ExitStack() as apache:
        peer, apache_sent = apache.enter_context(apache_with_messages(tmp_path / "apache"))
        reads = f"read.batch={cluster.ns},{TOPIC},{batch},{peer.namesrv_addr},{APACHE_TOPIC},{apache_batch}"
        later: list[SentMsg] = []
        before_kill = 0

        def killed() -> None:
            apache.close()  # read by the first driver; no more CPU for it
            later.extend(cluster.send(TOPIC, 48, "lc2"))
            cluster.wait_replicated(TOPIC)
            cluster.wait_replicated(COPY_TOPIC)

        def stopping(log: Path) -> None:
            # The restarted stream's first micro-batch, then broker-a's master dies: the rest of its
            # messages come from its slave.
            nonlocal before_kill
            deadline = time.monotonic() + 300
            while not restarted_rows(log):
                assert time.monotonic() < deadline, log.read_text(errors="replace")[-4000:]
                time.sleep(0.2)
            cluster.brokers["broker-a"].kill()
            time.sleep(1)  # the driver prints a micro-batch within 0.2 s of its end
            before_kill = restarted_rows(log)

        kill_mid_batch_and_restart(
            cluster.ns,
            [b.store_dir for b in cluster.brokers.values()],
            SINK_TOPIC,
            tmp_path,
            first=(*settings, reads, f"read.copy={cluster.ns},{TOPIC},{COPY_TOPIC}", f"read.stream={stream}"),
            second=(*settings, f"read.available={stream}"),
            killed=killed,
            stopping=stopping,
        )
    # More rows read after the kill than broker-b has: some of broker-a's came from its slave
    # (child.log: the drivers' output, kill_mid_batch_and_restart's log).
    assert restarted_rows(tmp_path / "child.log") - before_kill > sum(m.broker == "broker-b" for m in later)
    for suffix in ("", "-jvm"):  # the Python network source, and the JVM network reader
        got = [bytes(r.body) for r in spark.read.parquet(batch + suffix).collect()]
        assert hashes(got) == hashes([m.body for m in sent])
        got = [bytes(r.body) for r in spark.read.parquet(apache_batch + suffix).collect()]
        assert hashes(got) == hashes([b for b, _ in apache_sent])
    # The JVM reader and sink in the executor JVMs copied the topic's first messages, each once.
    # (read by the Python network source: broker-a's master is dead by now, its slave serves the reads)
    copied = (
        spark.read.format("rocketmq").option("nameServer", cluster.ns).option("topics", COPY_TOPIC).load()
    )
    assert hashes([bytes(r.body) for r in copied.select("body").collect()]) == hashes([m.body for m in sent])
    got = [bytes(r.body) for r in spark.read.parquet(out).collect()]
    assert hashes(got) == hashes([m.body for m in sent + later])
    assert max(hashes(got).values()) == 1
