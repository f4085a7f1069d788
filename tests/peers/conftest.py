"""Fixtures for the peer tests: one rmq broker and one Apache RocketMQ broker per session, the same settings
on both, and a helper that runs a Java driver scenario against each and returns both results."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.brokerproc import BrokerProcess, start_broker, start_proxy
from tests.peers.apache import (
    ApachePeer,
    PeerLibs,
    compile_drivers,
    peer_libs,
    restart_broker,
    run_driver,
    start_apache,
)
from tests.peers.apache5 import (
    LITE_BROKER_PROPS,
    Apache5Peer,
    ClusterProxy,
    start_apache5,
    start_cluster_proxy,
)

BROKERS = ("rmq", "apache")
# Broker settings the comparisons rely on, given to both brokers.
# Delay levels 1 and 2 differ (1 s, 2 s); retries start at level 3, and levels 3, 4, 5 are 1 s, 2 s, 3 s
# (as tests/integration/test_client_retry.py, rerun here, expects), every later one 1 s, so a retry chain
# to the DLQ takes seconds. Transactions are checked back after 1 s.
SHARED_PROPS = (
    "autoCreateTopicEnable=true",
    "autoCreateSubscriptionGroup=true",
    "enablePropertyFilter=true",
    "messageDelayLevel=1s 2s 1s 2s 3s" + " 1s" * 13,
    "transactionTimeOut=1000",
    "transactionCheckInterval=1000",
    # A shared test machine may be fuller than the default limits; the stores here are tiny.
    "diskMaxUsedSpaceRatio=95",
    # Small files: each broker reserves its mapped files' blocks up front.
    f"mappedFileSizeCommitLog={64 * 1024 * 1024}",
    f"mappedFileSizeConsumeQueue={20 * 30000}",
    # Both brokers' back-pressure as tests/brokerproc.py sets rmq's: a loaded CI machine stalls either
    # longer than the default 200 ms with nothing wrong.
    "waitTimeMillsInSendQueue=5000",
)


@dataclass
class Peers:
    libs: PeerLibs
    classes: Path
    home: Path
    rmq: BrokerProcess
    apache: ApachePeer

    def namesrv(self, broker: str) -> str:
        return self.rmq.namesrv_addr if broker == "rmq" else self.apache.namesrv_addr

    def run(self, broker: str, scenario: str, **args: object) -> dict[str, Any]:
        """Run a Java driver scenario against one broker."""
        home = self.home / broker
        return run_driver(self.libs, self.classes, home, scenario, namesrv=self.namesrv(broker), **args)

    def both(self, scenario: str, **args: object) -> dict[str, dict[str, Any]]:
        """Run the same scenario against rmq and the Apache broker (concurrently); results by broker.
        The same topic and group names serve both (the brokers share nothing), so results compare."""
        with ThreadPoolExecutor(len(BROKERS)) as pool:
            futures = {b: pool.submit(self.run, b, scenario, **args) for b in BROKERS}
            return {b: f.result() for b, f in futures.items()}


@dataclass
class ApacheBroker:
    """What rmq's integration tests use of their ``broker`` fixture, for the Apache peer."""

    namesrv_addr: str
    broker_addr: str
    is_apache: bool = True  # tests that check rmq-only counters (the send fast path) skip those checks


def rerun_against_apache(
    base: ModuleType, namespace: dict[str, Any], skip: frozenset[str] = frozenset()
) -> None:
    """Collect ``base``'s tests (and its ``producer`` fixture) once more into the test module whose globals
    are ``namespace``, with a ``broker`` fixture that points at the Apache peer; ``skip`` names tests left
    out (each with its reason in the calling module)."""
    namespace.update(
        {k: v for k, v in vars(base).items() if (k.startswith("test_") and k not in skip) or k == "producer"}
    )

    @pytest.fixture(scope="module")
    def broker(peers: Peers) -> ApacheBroker:
        return ApacheBroker(peers.apache.namesrv_addr, peers.apache.broker_addr)

    namespace["broker"] = broker


@dataclass
class RestartableApache:
    """What rmq's restart tests use of a ``BrokerProcess``, for an Apache broker of their own, with
    ``tests.integration.semantics_helpers.restart`` replaced by :func:`restart_apache`."""

    peer: ApachePeer
    props: tuple[str, ...]

    @property
    def namesrv_addr(self) -> str:
        return self.peer.namesrv_addr

    @property
    def broker_addr(self) -> str:
        return self.peer.broker_addr

    @property
    def broker_port(self) -> int:
        return int(self.broker_addr.rsplit(":", 1)[1])

    def kill(self) -> None:
        self.peer.broker.kill()
        self.peer.broker.wait()

    def stop(self) -> int:
        self.peer.stop()
        return 0


async def restart_apache(broker: RestartableApache, *props: str, kill: bool = False) -> RestartableApache:
    """``semantics_helpers.restart`` for the Apache broker: same store, ports and name server."""
    assert set(props) <= set(broker.props), f"the Apache broker was started without {props}"
    await asyncio.to_thread(restart_broker, broker.peer, kill=kill)
    return broker


def rerun_with_restarts(base: ModuleType, namespace: dict[str, Any]) -> None:
    """Collect ``base``'s tests into the calling module with a function-scoped ``broker`` fixture
    holding ``[RestartableApache]`` (a fresh Apache name server and broker per test, started with
    ``base.PROPS`` if it has them), and ``base.restart`` restarting that Apache broker."""
    namespace.update({k: v for k, v in vars(base).items() if k.startswith("test_")})

    @pytest.fixture
    async def broker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> AsyncIterator[list[RestartableApache]]:
        props = tuple(getattr(base, "PROPS", ()))
        peer = await asyncio.to_thread(start_apache, tmp_path / "apache", *props)
        holder = [RestartableApache(peer, props)]
        monkeypatch.setattr(base, "restart", restart_apache)
        try:
            yield holder
        finally:
            await asyncio.to_thread(peer.stop)

    namespace["broker"] = broker


def build_bench_c(tmp_path_factory: pytest.TempPathFactory, source: str) -> Path:
    """``benches/<source>`` compiled as the benchmarks compile it (``$CC -O2``, warnings as errors)."""
    out = tmp_path_factory.mktemp(source.removesuffix(".c")) / source.removesuffix(".c")
    cc = os.environ.get("CC", "cc")
    src = Path(__file__).resolve().parents[2] / "benches" / source
    subprocess.run([cc, "-O2", "-Wall", "-Werror", "-o", str(out), str(src)], check=True, timeout=120)
    return out


def unique(prefix: str) -> str:
    """A topic or group name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peers]:
    libs = peer_libs()
    classes = compile_drivers(libs)
    home = tmp_path_factory.mktemp("peers")
    with ThreadPoolExecutor(2) as pool:
        apache_f = pool.submit(start_apache, home / "apache-broker", *SHARED_PROPS)
        # The Apache broker's disk thresholds are raised the same way (JVM flags, tests/peers/apache.py).
        rmq_f = pool.submit(start_broker, home / "rmq-store", *SHARED_PROPS, "diskSpaceWarningLevelRatio=99")
        rmq = rmq_f.result()
        try:
            apache = apache_f.result()
        except BaseException:
            rmq.stop()
            raise
    try:
        yield Peers(libs, classes, home, rmq, apache)
    finally:
        apache.stop()
        rc = rmq.stop()
        assert rc == 0, "rmq broker exited uncleanly:\n" + "".join(rmq.log[-40:])


@dataclass
class Peers5:
    """The 5.x side: Apache RocketMQ 5.x (name server + proxy with its broker) and rmq's gRPC endpoint run
    standalone (``python -m rmq.proxy``) in front of that Apache broker, over Remoting ("cluster" mode)."""

    apache: Apache5Peer
    rmq_proxy: subprocess.Popen[str]
    rmq_proxy_port: int
    rmq_proxy_log: list[str]

    @property
    def rmq_proxy_endpoints(self) -> str:
        return f"127.0.0.1:{self.rmq_proxy_port}"


# Module scope: one module uses it (test_python5_client.py), and an idle Apache 5.x proxy with its broker
# keeps most of a CPU busy (~20 CPU-minutes over a CI run when it lived to the session's end).
@pytest.fixture(scope="module")
def peers5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peers5]:
    home = tmp_path_factory.mktemp("peers5")
    apache = start_apache5(home / "apache5", *SHARED_PROPS, *LITE_BROKER_PROPS)
    try:
        proxy = start_proxy(apache.namesrv_addr, env={"HOME": str(home)})
    except BaseException:
        apache.stop()
        raise
    try:
        yield Peers5(apache, proxy.proc, proxy.port, proxy.log)
    finally:
        proxy.stop()
        apache.stop()


@pytest.fixture(scope="module")
def cluster_proxy(peers5: Peers5, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProxy]:
    """A cluster-mode Apache proxy on the 5.x peer's broker (Apache 5.5.0 serves lite consumers only so)."""
    proxy = start_cluster_proxy(peers5.apache, tmp_path_factory.mktemp("proxy-cluster"))
    try:
        yield proxy
    finally:
        proxy.stop()
