"""The peers ``broker_bench.py`` compares rmq with: Redis Streams and NATS JetStream, run on loopback.

No process handling here (the bench owns its children): where the pinned binaries are
(``scripts/bench-peers`` fetches and caches them), the command lines and configuration of each server,
how to tell it is ready, and the argv of ``benches/loadgen_peer.c``, the C load generator against them.

* Redis: Debian's redis-server 7.0.15, ``appendonly yes`` with ``appendfsync always`` (durable rows: the AOF
  is fsynced before a write is answered) or ``everysec`` (async rows), no RDB snapshots, its data
  directory fresh for every run. The generator sends ``XADD bench * f <body>``, every connection to the
  same stream.
* NATS: nats-server 2.15 with JetStream, file storage in a fresh directory, stream ``BENCH`` on subjects
  ``bench.>``; the generator publishes to ``bench.s`` with a reply subject and waits for each ack. For
  durable rows the server runs with ``sync_interval: always`` (fsync per write before the ack); otherwise
  with its default (fsync every 2 minutes).
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FETCH = REPO / "scripts" / "bench-peers"
NAMES = ("redis", "nats")
TITLES = {"redis": "Redis", "nats": "NATS"}
REDIS_STREAM = "bench"
NATS_STREAM = "BENCH"
NATS_SUBJECT = "bench.s"


class PeerMissing(RuntimeError):
    """A peer could not be fetched or started: the run stops (unless the peer was skipped)."""


def fetch(names: list[str]) -> dict[str, Path]:
    """Run ``scripts/bench-peers`` for ``names`` (cached after the first fetch): peer name -> executable."""
    if not names:
        return {}
    try:
        out = subprocess.run(
            [str(FETCH), *names], check=True, capture_output=True, text=True, timeout=1800
        ).stdout
    except subprocess.CalledProcessError as exc:
        raise PeerMissing(
            f"scripts/bench-peers {' '.join(names)} failed ({exc.returncode}):\n{exc.stderr.strip()[-2000:]}"
        ) from exc
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerMissing(f"cannot run scripts/bench-peers: {exc}") from exc
    paths = {}
    for line in out.splitlines():
        name, _, path = line.partition(" ")
        if name in names and Path(path).is_file():
            paths[name] = Path(path)
    for name in names:
        if name not in paths:
            raise PeerMissing(f"scripts/bench-peers printed no executable for {name}: {out.strip()!r}")
    return paths


def free_port() -> int:
    """A loopback port free now (Redis has no "any port" option; the race with other processes is small)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_argv(binary: Path, port: int, data: Path, fsync: str) -> list[str]:
    """redis-server in the foreground with an AOF fsynced ``always`` or ``everysec`` in ``data``."""
    return [
        str(binary),
        "--bind", "127.0.0.1",
        "--port", str(port),
        "--dir", str(data),
        "--appendonly", "yes",
        "--appendfsync", fsync,
        "--save", "",
        "--daemonize", "no",
        "--protected-mode", "no",
        "--loglevel", "warning",
    ]  # fmt: skip


def nats_argv(binary: Path, port: int, data: Path, sync_always: bool) -> list[str]:
    """nats-server with JetStream storing in ``data``; its configuration file is written there."""
    conf = data / "nats.conf"
    sync = "\n  sync_interval: always" if sync_always else ""
    conf.write_text(
        f'listen: "127.0.0.1:{port}"\njetstream {{\n  store_dir: {json.dumps(str(data / "js"))}{sync}\n}}\n'
    )
    return [str(binary), "-c", str(conf)]


def _exchange(port: int, hello: bytes, done: Callable[[bytes], bool], timeout: float) -> bytes:
    """Connect, send ``hello``, read until ``done(what was read)``; what was read."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(hello)
        got = b""
        while not done(got):
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed after {got[-200:]!r}")
            got += chunk
        return got


def wait_ready(name: str, port: int, alive: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait until the peer on ``port`` answers a PING (and, for NATS, has its stream); ``alive()`` is False
    once the process has exited."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not alive():
            raise PeerMissing(f"{TITLES[name]} exited while starting")
        try:
            if name == "redis":
                _exchange(port, b"PING\r\n", lambda got: b"+PONG\r\n" in got, 2.0)
            else:
                nats_create_stream(port)
            return
        except (OSError, ConnectionError, ValueError) as exc:
            last = exc
            time.sleep(0.05)
    raise PeerMissing(f"{TITLES[name]} not ready on port {port} after {timeout:.0f} s: {last}")


def nats_api(port: int, subject: str, request: dict[str, object] | None = None) -> dict[str, object]:
    """One JetStream API request (``$JS.API...``) on a connection of its own: the JSON answer; an answer
    holding an error raises ValueError."""
    body = json.dumps(request).encode() if request is not None else b""
    hello = (
        b'CONNECT {"verbose":false,"pedantic":false,"headers":true}\r\nSUB _INBOX.setup 1\r\n'
        + f"PUB {subject} _INBOX.setup {len(body)}\r\n".encode()
        + body
        + b"\r\n"
    )

    def answered(got: bytes) -> bool:  # MSG _INBOX.setup 1 <n>, then n bytes of JSON
        at = got.find(b"MSG _INBOX.setup ")
        return at >= 0 and got.find(b"}\r\n", at) >= 0

    got = _exchange(port, hello, answered, 2.0)
    reply = got[got.find(b"\r\n", got.find(b"MSG _INBOX.setup ")) + 2 :]
    answer = json.loads(reply[: reply.rfind(b"}") + 1])
    if "error" in answer:
        raise ValueError(f"JetStream answered {subject} with {answer['error']}")
    return dict(answer)


def nats_create_stream(port: int) -> None:
    """Create the JetStream stream the generator publishes to (file storage, one replica)."""
    cfg = {
        "name": NATS_STREAM,
        "subjects": ["bench.>"],
        "storage": "file",
        "retention": "limits",
        "discard": "old",
        "num_replicas": 1,
    }
    nats_api(port, f"$JS.API.STREAM.CREATE.{NATS_STREAM}", cfg)


def loadgen_argv(
    binary: Path, name: str, port: int, conns: int, inflight: int, body: int, lat: Path, worker: int
) -> list[str]:
    target = REDIS_STREAM if name == "redis" else NATS_SUBJECT
    return [
        str(binary), name, "127.0.0.1", str(port), str(conns), str(inflight), str(body), str(lat),
        str(worker), target,
    ]  # fmt: skip
