"""``benches/loadgen_peer.c``, the load generator ``broker_bench.py`` drives Redis and NATS JetStream with,
against the real peers ``scripts/bench-peers`` fetches: every request it counts as answered was stored by
the peer and nothing else was, so its rates count what the peer did; error replies are counted as errors.

A peer that cannot be fetched fails these tests; ``RMQ_PEERS_SKIP=1`` turns that into a skip.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.peers.conftest import build_bench_c

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benches"))

import peers as bench_peers  # noqa: E402

BODY = 300


@pytest.fixture(scope="module")
def peer_bins() -> dict[str, Path]:
    try:
        return bench_peers.fetch(list(bench_peers.NAMES))
    except bench_peers.PeerMissing as exc:
        if os.environ.get("RMQ_PEERS_SKIP") == "1":
            pytest.skip(str(exc))
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="module")
def loadgen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_bench_c(tmp_path_factory, "loadgen_peer.c")


def _server(argv: list[str], name: str, port: int) -> Iterator[int]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        bench_peers.wait_ready(name, port, lambda: proc.poll() is None)
        yield port
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture()
def redis(peer_bins: dict[str, Path], tmp_path: Path) -> Iterator[int]:
    port = bench_peers.free_port()
    yield from _server(bench_peers.redis_argv(peer_bins["redis"], port, tmp_path, "always"), "redis", port)


@pytest.fixture()
def nats(peer_bins: dict[str, Path], tmp_path: Path) -> Iterator[int]:
    port = bench_peers.free_port()
    yield from _server(bench_peers.nats_argv(peer_bins["nats"], port, tmp_path, False), "nats", port)


def run_loadgen(loadgen: Path, name: str, port: int, lat: Path) -> dict[str, Any]:
    """3 connections x 4 in flight for a window of 0.3 s (the window only bounds the run)."""
    argv = bench_peers.loadgen_argv(loadgen, name, port, 3, 4, BODY, lat, 0)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    start = time.monotonic()
    out, _ = proc.communicate(f"GO {start:.6f} {start + 0.3:.6f}\n", timeout=60)
    assert proc.returncode == 0
    return dict(json.loads(out))


def redis_command(port: int, command: bytes) -> bytes:
    """One inline command; its whole reply (the replies used here fit in one read once complete)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(command + b"\r\n")
        got = b""
        while not got.endswith(b"\r\n"):
            got += s.recv(65536)
        return got


def test_redis_xadd_counts_what_is_stored(loadgen: Path, redis: int, tmp_path: Path) -> None:
    result = run_loadgen(loadgen, "redis", redis, tmp_path / "lat.bin")
    assert result["errors"] == 0, result["error_samples"]
    assert result["ok_total"] > 0 and result["unfinished_conns"] == 0
    stream = bench_peers.REDIS_STREAM.encode()
    assert redis_command(redis, b"XLEN " + stream) == b":%d\r\n" % result["ok_total"]
    body = (b"0123456789abcdef" * (BODY // 16 + 1))[:BODY]
    first = redis_command(redis, b"XRANGE " + stream + b" - + COUNT 1")
    assert b"$1\r\nf\r\n$%d\r\n%s\r\n" % (BODY, body) in first
    latencies = (tmp_path / "lat.bin").stat().st_size // 8
    assert 0 < latencies <= result["ok"]


def test_redis_error_replies_are_errors(loadgen: Path, redis: int, tmp_path: Path) -> None:
    assert redis_command(redis, b"SET " + bench_peers.REDIS_STREAM.encode() + b" not-a-stream") == b"+OK\r\n"
    result = run_loadgen(loadgen, "redis", redis, tmp_path / "lat.bin")
    assert result["ok_total"] == 0 and result["errors"] > 0
    assert any("WRONGTYPE" in sample for sample in result["error_samples"])


def test_nats_jetstream_acks_count_what_is_stored(loadgen: Path, nats: int, tmp_path: Path) -> None:
    result = run_loadgen(loadgen, "nats", nats, tmp_path / "lat.bin")
    assert result["errors"] == 0, result["error_samples"]
    assert result["ok_total"] > 0 and result["unfinished_conns"] == 0
    info = bench_peers.nats_api(nats, f"$JS.API.STREAM.INFO.{bench_peers.NATS_STREAM}")
    state = info["state"]
    assert isinstance(state, dict)
    assert state["messages"] == result["ok_total"]
    assert state["bytes"] > result["ok_total"] * BODY
