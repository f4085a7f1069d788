"""Apache RocketMQ as a test peer: its name server and broker as child JVMs, and the Java driver programs.

``scripts/peers`` fetches the pinned jars (Apache RocketMQ 4.9.7 server, 4.9.8 Java client) from Maven
Central into the peers cache; :func:`peer_libs` runs it. A peer that cannot be fetched fails the tests that
need it, loudly; only ``RMQ_PEERS_SKIP=1`` (for a machine without Maven Central) turns that into a skip.

:func:`start_apache` starts ``NamesrvStartup`` and ``BrokerStartup`` on free loopback ports, with their
logs and store under a temp dir, and returns once the broker has registered; :meth:`ApachePeer.stop`
stops both by PID. :func:`compile_drivers` builds ``tests/peers/java/src`` with ``javac`` into a cache dir
keyed by a hash of the sources and the jar set; :func:`run_driver` runs one scenario in a child JVM and
returns the JSON object it prints.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
JAVA_SRC = Path(__file__).resolve().parent / "java" / "src"

# Java 17 closes the JDK internals RocketMQ 4.x reaches into (direct-buffer cleaners, NIO selectors).
JAVA_OPENS = [
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
]
# Sized for a 2-core machine: small heaps, serial GC, C1 only (starts fast, runs the tests fast enough).
JVM_SMALL = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k"]
NAMESRV_JVM = ["-Xms64m", "-Xmx128m", *JVM_SMALL]
# The broker refuses writes once its disk is 90% used and deletes files from 85% on; a shared test machine
# may well be that full, and the peer's store is tiny: only a really full disk (99%) stops it.
DISK_RATIOS = [
    "-Drocketmq.broker.diskSpaceWarningLevelRatio=0.99",
    "-Drocketmq.broker.diskSpaceCleanForciblyRatio=0.99",
]
BROKER_JVM = ["-Xms256m", "-Xmx512m", "-XX:MaxDirectMemorySize=512m", *JVM_SMALL, *DISK_RATIOS]
DRIVER_JVM = ["-Xms32m", "-Xmx256m", *JVM_SMALL]

LOGBACK = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>${user.home}/%s.log</file>
    <encoder><pattern>%%d{HH:mm:ss.SSS} %%-5level [%%thread] %%logger{30} - %%msg%%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


@dataclass(frozen=True)
class PeerLibs:
    server: Path  # Apache RocketMQ name server + broker jars
    client: Path  # Java client, tools and ACL jars
    server5: Path  # Apache RocketMQ 5.x name server + proxy (broker inside) + tools jars
    python5: Path  # site directory of the official 5.x Python client (rocketmq-python-client)
    client5: Path  # the official 5.x Java client (rocketmq-client-java, gRPC)
    node5: Path  # node_modules of the official 5.x Node.js client (rocketmq-client-nodejs)


_libs: PeerLibs | None = None


def peer_libs() -> PeerLibs:
    """The cached peer jars, fetched by ``scripts/peers`` on first use (once per session)."""
    global _libs
    if _libs is None:
        proc = subprocess.run(
            [str(REPO / "scripts" / "peers")], capture_output=True, text=True, timeout=900, check=False
        )
        if proc.returncode != 0:
            msg = f"scripts/peers failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
            if os.environ.get("RMQ_PEERS_SKIP") == "1":
                pytest.skip(msg)
            pytest.fail(msg, pytrace=False)
        _libs = PeerLibs(*(Path(line) for line in proc.stdout.split()))
    return _libs


def compile_drivers(libs: PeerLibs, src: Path = JAVA_SRC, jars: Path | None = None) -> Path:
    """The compiled driver classes of ``src`` against the jars in ``jars`` (default: the 4.x client's), in a
    cache dir keyed by the sources and the jar set."""
    jars = jars or libs.client
    sources = sorted(src.rglob("*.java"))
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.relative_to(src).as_posix().encode() + b"\0" + path.read_bytes())
    for jar in sorted(jars.glob("*.jar")):
        digest.update(jar.name.encode())
    out = jars.parent / "drivers" / digest.hexdigest()[:16]
    if (out / "complete").exists():
        return out
    tmp = out.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    javac = subprocess.run(
        ["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(tmp), "-cp", f"{jars}/*"]
        + [str(s) for s in sources],
        capture_output=True,
        text=True,
        check=False,
    )
    if javac.returncode != 0:
        raise RuntimeError(f"javac failed on the peer drivers:\n{javac.stderr[-4000:]}")
    (tmp / "complete").touch()
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(neighbours: tuple[int, ...] = ()) -> int:
    """A free loopback port whose ``neighbours`` (offsets from it) are free too."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if 1024 < port - 2 and port + 2 < 65535 and all(_port_free(port + d) for d in neighbours):
            return port
    raise RuntimeError("no free port with free neighbours")


@dataclass
class ApachePeer:
    namesrv: subprocess.Popen[str]
    broker: subprocess.Popen[str]
    namesrv_addr: str
    broker_addr: str
    home: Path
    log: list[str] = field(default_factory=list)

    def logs(self, tail: int = 60) -> str:
        """The last lines of the broker's and name server's own log files (for failure messages)."""
        parts = []
        for name in ("broker", "namesrv"):
            path = self.home / "user" / f"{name}.log"
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()[-tail:]
                parts.append(f"--- {path}\n" + "\n".join(lines))
        return "\n".join(parts + self.log[-tail:])

    def kill(self, timeout: float = 30.0) -> None:
        """``kill -9`` the broker (no shutdown hook runs); then stop the name server."""
        self.broker.kill()
        self.broker.wait()
        self.stop(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        stop_processes(self.broker, self.namesrv, timeout=timeout)


def stop_processes(*procs: subprocess.Popen[str], timeout: float = 30.0) -> None:
    """SIGTERM each process still running, then wait; one not gone within ``timeout`` is killed."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _java(libs: Path, jvm: list[str], home: Path, main: str, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, ROCKETMQ_HOME=str(home / "rocketmq"))
    return subprocess.Popen(
        ["java", *jvm, *JAVA_OPENS, f"-Duser.home={home / 'user'}", "-cp", f"{libs}/*", main, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=home,
    )


def _await_line(proc: subprocess.Popen[str], needle: str, log: list[str], timeout: float) -> bool:
    """Read ``proc``'s output until a line contains ``needle``; then keep draining it in a thread."""
    assert proc.stdout is not None
    found = threading.Event()
    start = len(log)  # lines of earlier runs (a restarted broker's) do not count

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.append(line)
            if needle in line:
                found.set()
        found.set()

    threading.Thread(target=drain, daemon=True).start()
    found.wait(timeout)
    return any(needle in line for line in log[start:])


def _prepare_home(home: Path) -> None:
    """The ``ROCKETMQ_HOME`` layout (logback configs) and the ``user.home`` logs go under ``home``."""
    conf = home / "rocketmq" / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (home / "user").mkdir(exist_ok=True)
    for name in ("namesrv", "broker", "tools"):
        (conf / f"logback_{name}.xml").write_text(LOGBACK % name)


def start_apache_namesrv(
    home: Path, log: list[str], timeout: float = 120.0, libs: Path | None = None
) -> tuple[subprocess.Popen[str], str]:
    """Start an Apache name server on a free loopback port under ``home``; returns it and its address."""
    _prepare_home(home)
    ns_port = free_port()
    (home / "namesrv.conf").write_text(f"listenPort={ns_port}\n")
    proc = _java(
        libs or peer_libs().server,
        NAMESRV_JVM,
        home,
        "org.apache.rocketmq.namesrv.NamesrvStartup",
        "-c",
        str(home / "namesrv.conf"),
    )
    if not _await_line(proc, "boot success", log, timeout):
        proc.kill()
        proc.wait()
        raise RuntimeError("Apache name server did not start:\n" + "".join(log[-60:]))
    return proc, f"127.0.0.1:{ns_port}"


def start_apache_broker(
    home: Path,
    namesrv_addr: str,
    *props: str,
    log: list[str],
    store: Path | None = None,
    name: str = "broker-a",
    cluster: str = "DefaultCluster",
    timeout: float = 120.0,
    jvm: list[str] | None = None,
) -> tuple[subprocess.Popen[str], str]:
    """Start an Apache broker (master) under ``home`` registering with ``namesrv_addr``; returns it and
    its address once it has booted. It listens on ``listenPort`` and also on ``listenPort - 2`` (the
    "VIP" channel) and ``listenPort + 1`` (HA), so all three are picked free. ``props`` are extra
    ``key=value`` lines for broker.conf; ``store`` is the store's root (default ``home/store``; it may
    hold a store already); ``jvm`` replaces the JVM options (default ``BROKER_JVM``)."""
    _prepare_home(home)
    broker_port = free_port(neighbours=(-2, 1))
    store = store or home / "store"
    lines = [
        f"brokerClusterName={cluster}",
        f"brokerName={name}",
        "brokerId=0",
        "brokerRole=ASYNC_MASTER",
        "brokerIP1=127.0.0.1",
        f"listenPort={broker_port}",
        f"namesrvAddr={namesrv_addr}",
        f"storePathRootDir={store}",
        f"storePathCommitLog={store / 'commitlog'}",
        "autoCreateTopicEnable=true",
        "autoCreateSubscriptionGroup=true",
        f"mappedFileSizeCommitLog={64 * 1024 * 1024}",
        f"mappedFileSizeConsumeQueue={20 * 30000}",
        *props,
    ]
    (home / "broker.conf").write_text("\n".join(lines) + "\n")
    proc = _java(
        peer_libs().server,
        BROKER_JVM if jvm is None else jvm,
        home,
        "org.apache.rocketmq.broker.BrokerStartup",
        "-c",
        str(home / "broker.conf"),
    )
    # The name server's "boot success" may be in the same ``log``: wait for this broker's own line.
    if not _await_line(proc, f", 127.0.0.1:{broker_port}] boot success", log, timeout):
        proc.kill()
        proc.wait()
        detail = ApachePeer(proc, proc, namesrv_addr, "", home, log).logs()
        raise RuntimeError(f"Apache broker {name} did not start:\n{detail}")
    return proc, f"127.0.0.1:{broker_port}"


def start_apache(
    home: Path,
    *props: str,
    timeout: float = 120.0,
    store: Path | None = None,
    jvm: list[str] | None = None,
) -> ApachePeer:
    """Start the Apache name server and broker (cluster DefaultCluster, broker-a, master) under ``home``
    (see :func:`start_apache_broker` for ``props``, ``store`` and ``jvm``); returns once the broker has
    booted."""
    log: list[str] = []
    namesrv, namesrv_addr = start_apache_namesrv(home, log, timeout)
    try:
        broker, broker_addr = start_apache_broker(
            home, namesrv_addr, *props, log=log, store=store, timeout=timeout, jvm=jvm
        )
    except BaseException:
        namesrv.kill()
        namesrv.wait()
        raise
    return ApachePeer(namesrv, broker, namesrv_addr, broker_addr, home, log)


def restart_broker(peer: ApachePeer, *, kill: bool = False, timeout: float = 120.0) -> None:
    """Stop (SIGTERM) or ``kill -9`` the Apache broker, then start it again with the same ``broker.conf``
    (same store, same ports); the name server keeps running. A broker already dead is just started."""
    if peer.broker.poll() is None:
        if kill:
            peer.broker.kill()
        else:
            peer.broker.send_signal(signal.SIGTERM)
        peer.broker.wait(timeout)
    peer.broker = _java(
        peer_libs().server,
        BROKER_JVM,
        peer.home,
        "org.apache.rocketmq.broker.BrokerStartup",
        "-c",
        str(peer.home / "broker.conf"),
    )
    if not _await_line(peer.broker, f", {peer.broker_addr}] boot success", peer.log, timeout):
        peer.broker.kill()
        peer.broker.wait()
        raise RuntimeError(f"Apache broker did not start again:\n{peer.logs()}")


def run_driver(
    libs: PeerLibs,
    classes: Path,
    home: Path,
    scenario: str,
    limit: float = 240.0,
    main: str = "rmqpeer.Driver",
    jvm: tuple[str, ...] = (),
    jars: Path | None = None,
    **args: object,
) -> dict[str, Any]:
    """Run one Java driver scenario; return the JSON object it printed (its last stdout line). The
    driver's own ``timeout`` argument bounds its waits; ``limit`` (seconds) bounds the whole JVM;
    ``main`` is the driver class (each ``tests/peers/java/src/rmqpeer`` program takes the scenario first);
    ``jvm`` adds JVM options (system properties such as ``-Dtls.enable=true``); ``jars`` is the client's
    jar directory (default: the 4.x client's)."""
    log_root = home / "client-logs"
    argv = [
        "java",
        *DRIVER_JVM,
        *jvm,
        f"-Drocketmq.client.logRoot={log_root}",
        f"-Duser.home={home}",
        f"-Dlogback.configurationFile={_driver_logback(home)}",
        "-cp",
        f"{classes}:{jars or libs.client}/*",
        main,
        scenario,
        *(f"{k}={v}" for k, v in args.items()),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=limit, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise AssertionError(
            f"driver {scenario} printed no result (exit {proc.returncode}):\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
    result = json.loads(lines[-1])
    if proc.returncode != 0 or "error" in result:
        raise AssertionError(f"driver {scenario} {args} failed: {result}\n{proc.stderr[-2000:]}")
    return result


def _driver_logback(home: Path) -> Path:
    path = home / "driver-logback.xml"
    if not path.exists():
        home.mkdir(parents=True, exist_ok=True)
        path.write_text(LOGBACK % "driver")
    return path
