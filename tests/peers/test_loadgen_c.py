"""``benches/loadgen_c.c``, the load generator of ``broker_bench.py`` and ``apache_raw.py``, against the
session's rmq broker and Apache RocketMQ 4.9.7 peer: what it counts as answered is what the broker stored —
each SEND_MESSAGE_V2 one message, each SEND_BATCH_MESSAGE its 16, each transactional half message one
message in the topic once its oneway commit lands — so the rates ``apache_raw.py`` reports count what each
broker did, and both brokers accept its frames without an error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.peers.conftest import Peers, build_bench_c, unique

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benches"))

import broker_bench  # noqa: E402
import loadgen as bench_loadgen  # noqa: E402

QUEUES = 4
GROUP = "loadgen_c_pg"
PREFIX = "0A0B0C0D0000"


@pytest.fixture(scope="module")
def loadgen_c(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_bench_c(tmp_path_factory, "loadgen_c.c")


def addrs(peers: Peers, broker: str) -> tuple[str, str]:
    side = peers.rmq if broker == "rmq" else peers.apache
    return side.broker_addr, side.namesrv_addr


def run(
    binary: Path, addr: str, templates: Path, lat: Path, tx: bool, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """2 connections x 2 in flight for a window of 0.05 s (the window only bounds the run): a few hundred
    requests, so the session's Apache CommitLog stays under the 2 x maxMessageSize below which its broker
    reports no earliest message time (test_mqadmin.py's clusterList relies on that)."""
    host, port = addr.rsplit(":", 1)
    argv = [str(binary), host, port, "2", "2", str(templates), str(lat), "0"]
    if tx:
        argv += [GROUP, PREFIX]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    start = time.monotonic()
    out, _ = proc.communicate(f"GO {start:.6f} {start + 0.05:.6f}\n", timeout=60)
    assert proc.returncode == 0
    return dict(json.loads(out))


def stored(addr: str, topic: str, want: int) -> int:
    """The topic's messages (sum of its queues' max offsets), waited for up to 15 s to reach ``want``."""
    deadline = time.monotonic() + 15
    while True:
        n = sum(broker_bench.max_offsets(addr, topic, QUEUES))
        if n >= want or time.monotonic() > deadline:
            return n
        time.sleep(0.2)


@pytest.mark.parametrize("broker", ["rmq", "apache"])
@pytest.mark.parametrize("kind", ["single", "batch", "transaction"])
def test_what_loadgen_c_counts_is_what_the_broker_stored(
    peers: Peers, loadgen_c: Path, tmp_path: Path, broker: str, kind: str
) -> None:
    addr, namesrv = addrs(peers, broker)
    topic = unique("LoadgenC")
    broker_bench.create_topic(addr, namesrv, topic, QUEUES)
    templates = tmp_path / "templates.bin"
    body = b"0123456789abcdef" * 4
    per_request = 16 if kind == "batch" else 1
    if kind == "batch":
        bench_loadgen.native_batch_templates(str(templates), topic, GROUP, body, 16, QUEUES, PREFIX)
    else:
        bench_loadgen.native_templates(
            str(templates), topic, GROUP, body, QUEUES, PREFIX, transactional=kind == "transaction"
        )
    out = run(loadgen_c, addr, templates, tmp_path / "lat.bin", kind == "transaction")
    assert out["errors"] == 0, out["error_samples"]
    assert out["ok_total"] > 0 and out["unfinished_conns"] == 0
    want = per_request * out["ok_total"]
    assert stored(addr, topic, want) == want


def test_a_polling_generator_counts_the_same_and_reports_its_idle_polling(
    peers: Peers, loadgen_c: Path, tmp_path: Path
) -> None:
    """``LOADGEN_SPIN_US`` (``broker_bench.py --gen-spin-us``): the generator polls for answers before it
    sleeps; every answer is still counted once, and the CPU it spent polling idle is reported apart: some, and
    never more than the CPU it used; none without the variable."""
    addr, namesrv = addrs(peers, "rmq")
    topic = unique("LoadgenSpin")
    broker_bench.create_topic(addr, namesrv, topic, QUEUES)
    templates = tmp_path / "templates.bin"
    bench_loadgen.native_templates(
        str(templates), topic, GROUP, b"x" * 128, QUEUES, PREFIX, transactional=False
    )
    env = dict(os.environ, LOADGEN_SPIN_US="200")
    out = run(loadgen_c, addr, templates, tmp_path / "lat.bin", False, env)
    assert out["errors"] == 0, out["error_samples"]
    assert out["ok_total"] > 0 and out["unfinished_conns"] == 0
    # 2 requests in flight over ~50 µs round trips: it waits for answers, so it polled without finding one.
    assert 0.0 < out["idle_poll"] <= out["cpu"]
    assert stored(addr, topic, out["ok_total"]) == out["ok_total"]
    quiet = run(
        loadgen_c,
        addr,
        templates,
        tmp_path / "lat2.bin",
        False,
        {k: v for k, v in env.items() if k != "LOADGEN_SPIN_US"},
    )
    assert quiet["idle_poll"] == 0.0
