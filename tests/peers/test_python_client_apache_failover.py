"""rmq's Python client against Apache brokers: ``tests/integration/test_client_failover.py`` (two broker
groups of one cluster behind one name server, one group's broker killed while producers send, then
restarted on its store) once more, unchanged, with an Apache name server and two Apache brokers."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import tests.integration.test_client_failover as base
from tests.peers.apache import start_apache_broker, start_apache_namesrv


@dataclass
class ApacheProcess:
    """What the failover test uses of a name server or broker process: its address, kill and stop."""

    proc: subprocess.Popen[str]
    addr: str
    log: list[str] = field(default_factory=list)

    @property
    def broker_addr(self) -> str:
        return self.addr

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return 0


def start_member(store: Path, name: str, namesrv: str) -> ApacheProcess:
    """An Apache broker of the test's cluster on ``store`` (a restart passes the same store again)."""
    home = store.parent / f"{name}-apache-{uuid.uuid4().hex[:6]}"
    log: list[str] = []
    proc, addr = start_apache_broker(home, namesrv, log=log, store=store, name=name, cluster=base.CLUSTER)
    return ApacheProcess(proc, addr, log)


@pytest.fixture
def namesrv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ApacheProcess]:
    log: list[str] = []
    proc, addr = start_apache_namesrv(tmp_path / "apache-namesrv", log)
    monkeypatch.setattr(base, "start_member", start_member)
    yield ApacheProcess(proc, addr, log)
    ApacheProcess(proc, addr).stop()


test_sync_sends_fail_over_when_a_broker_is_killed = base.test_sync_sends_fail_over_when_a_broker_is_killed
