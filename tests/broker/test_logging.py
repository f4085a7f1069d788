"""The broker's log file: what an operator finds in it (start, recovery, registration, clients, periodic
statistics), its rotation, and the console scripts' ``--version`` and ``--log-level`` checks."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import rmq
from rmq.client import Message
from rmq.client import sync as rmq_sync
from rmq.client.config import ClientConfig

from tests.brokerproc import BrokerProcess, start_broker


def log_dir(broker: BrokerProcess) -> Path:
    """Where tests/brokerproc.py points ``logDir``."""
    return broker.store_dir.parent / f"{broker.store_dir.name}-logs"


def wait_for_line(path: Path, needle: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            for line in path.read_text().splitlines():
                if needle in line:
                    return line
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} not in {path}:\n" + (path.read_text()[-3000:] if path.exists() else ""))


def test_the_log_file_tells_the_story(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "store", "statsLogInterval=200")
    path = log_dir(broker) / "broker.log"
    try:
        assert f"rmq {rmq.__version__} broker starting" in wait_for_line(path, "broker starting")
        opened = wait_for_line(path, "opened after a")
        assert "opened after a clean shutdown" in opened and " INFO " in opened
        wait_for_line(path, "registered with name server")
        config = ClientConfig(namesrv_addr=broker.namesrv_addr)
        with rmq_sync.Producer("log_pg", client_config=config) as producer:
            for i in range(20):
                assert producer.send(Message("LogTopic", b"m%d" % i)).ok
            wait_for_line(path, "joined group log_pg")
            # A stats line that saw the 20 puts.
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                stats = [line for line in path.read_text().splitlines() if "stats: put" in line]
                if any("(totals 20 /" in line for line in stats):
                    assert "page cache busy " in stats[-1], stats[-1]
                    break
                time.sleep(0.1)
            else:
                raise AssertionError(f"no stats line with 20 puts: {stats[-3:]}")
        wait_for_line(path, "left group log_pg")
    finally:
        broker.kill()
    # After kill -9 the next start says so, at WARN.
    again = start_broker(tmp_path / "store")
    try:
        crashed = wait_for_line(path, "opened after a crashed shutdown")
        assert " WARNING " in crashed
    finally:
        assert again.stop() == 0


def test_the_log_file_rotates(tmp_path: Path) -> None:
    broker = start_broker(tmp_path / "store", "statsLogInterval=50", "logFileMaxSize=2048", "logFileCount=2")
    try:
        rotated = log_dir(broker) / "broker.log.1"
        deadline = time.monotonic() + 30
        while not (log_dir(broker) / "broker.log.2").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert rotated.exists() and (log_dir(broker) / "broker.log.2").exists()
        assert not (log_dir(broker) / "broker.log.3").exists()  # logFileCount=2 old files kept
        assert rotated.stat().st_size <= 2048 + 1024  # one line may cross the limit
    finally:
        assert broker.stop() == 0


@pytest.mark.parametrize("script", ["rmq-broker", "rmq-namesrv"])
def test_console_scripts_version_and_bad_log_level(script: str, tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / script
    assert exe.exists(), f"{script} is not installed next to {sys.executable}"
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"{script}, version {rmq.__version__}"
    bad = subprocess.run(
        [str(exe), "--log-level", "LOUD"], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert bad.returncode == 2 and "'LOUD' is not one of" in bad.stderr, bad.stderr
