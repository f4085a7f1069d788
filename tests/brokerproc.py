"""Run `python -m rmq.broker` as a real child process for integration tests.

The broker prints one machine-readable line to stdout once it serves:
``RMQ-READY namesrv=<host:port> broker=<host:port>`` (logs go to stderr).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class BrokerProcess:
    proc: subprocess.Popen[str]
    namesrv_addr: str
    broker_addr: str
    store_dir: Path
    args: list[str]
    log: list[str] = field(default_factory=list)
    ready: dict[str, str] = field(default_factory=dict)
    """The broker's RMQ-READY line (``namesrv``, ``broker``; ``metrics``, ``dashboard`` if it serves them)."""
    stderr_reader: threading.Thread | None = field(default=None, repr=False)
    """The thread filling ``log``: :meth:`stop` waits for it, so ``log`` then holds every line."""

    @property
    def broker_port(self) -> int:
        return int(self.broker_addr.rsplit(":", 1)[1])

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.stderr_reader is not None:
            # The process has exited, but its last lines may still be in the pipe.
            self.stderr_reader.join(10)
        return self.proc.returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


def start_broker(
    store_dir: Path,
    *props: str,
    namesrv: str | None = None,
    extra_args: list[str] | None = None,
    timeout: float = 60.0,
) -> BrokerProcess:
    """Start a broker on loopback with an ephemeral port (and an embedded name server on an
    ephemeral port unless `namesrv` is given). `props` are `KEY=VALUE` broker properties."""
    args = [sys.executable, "-m", "rmq.broker", "-p", "brokerIP1=127.0.0.1", "-p", "listenPort=0"]
    # The HA port (listenPort + 1 by default) on any free port: next to an ephemeral listenPort it may
    # be some other socket's, and a restart on the same listenPort must not depend on it being free.
    args += ["-p", "bindAddress=127.0.0.1", "-p", "haListenPort=0"]
    # The gRPC endpoint (5.x clients) on any free port too; its port is the RMQ-READY line's `grpc`.
    args += ["-p", "grpcServerPort=0"]
    # Back-pressure (waitTimeMillsInSendQueue, 200 ms by default as in RocketMQ) refuses a send that waited
    # that long: on a 2-core CI machine shared by a dozen JVMs and brokers the event loop can stall that long
    # with nothing wrong, and a refused send fails a test about something else. The tests of back-pressure
    # itself pass their own value (a later -p wins).
    args += ["-p", "waitTimeMillsInSendQueue=5000"]
    args += ["-p", f"storePathRootDir={store_dir}"]
    args += ["-p", f"logDir={Path(store_dir).parent / (Path(store_dir).name + '-logs')}"]
    for p in props:
        args += ["-p", p]
    if namesrv:
        args += ["-n", namesrv]
    else:
        args += ["--namesrv-port", "0"]
    args += extra_args or []
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    assert proc.stdout is not None and proc.stderr is not None
    log: list[str] = []
    reader = threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()
    deadline = time.monotonic() + timeout
    ready = None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("RMQ-READY"):
            ready = dict(kv.split("=", 1) for kv in line.split()[1:])
            break
    if ready is None:
        proc.kill()
        proc.wait()
        time.sleep(0.1)
        raise RuntimeError("broker did not start:\n" + "".join(log[-50:]))
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    return BrokerProcess(proc, ready["namesrv"], ready["broker"], Path(store_dir), args, log, ready, reader)


@dataclass
class ProxyProcess:
    """``python -m rmq.proxy`` as a child process: its gRPC port (its ``RMQ-PROXY-READY`` line), its log."""

    proc: subprocess.Popen[str]
    port: int
    log: list[str]
    stderr_reader: threading.Thread

    @property
    def endpoints(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr_reader.join(10)
        return self.proc.returncode


def start_proxy(namesrv: str, *extra_args: str, env: dict[str, str] | None = None) -> ProxyProcess:
    """Start the standalone gRPC endpoint on loopback, any free port, before the name servers `namesrv`."""
    args = [sys.executable, "-m", "rmq.proxy", "-n", namesrv, "--host", "127.0.0.1", "--port", "0"]
    args += extra_args
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})),
    )
    assert proc.stdout is not None and proc.stderr is not None
    log: list[str] = []
    reader = threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()
    line = proc.stdout.readline()
    if not line.startswith("RMQ-PROXY-READY"):
        proc.kill()
        proc.wait()
        reader.join(10)
        raise RuntimeError("rmq proxy did not start:\n" + line + "".join(log[-40:]))
    return ProxyProcess(proc, int(line.split("grpc=")[1]), log, reader)
