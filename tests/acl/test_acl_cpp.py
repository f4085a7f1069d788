"""The official C++ client (PyPI ``rocketmq==0.4.4``, driven in a child process by
``tests/integration/cpp_driver.py``) against ``python -m rmq.broker`` with ACL on and its embedded name server
checking the same rules: with session credentials it sends and pulls on permitted topics; with a wrong
secret, without credentials, or on a denied topic its sends fail and nothing is stored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.acl.aclenv import ADMIN, APP, DENIED_TOPIC, GROUP, INNER, TOPIC, signed, topic_request, write_rules
from tests.brokerproc import BrokerProcess, start_broker

DRIVER = Path(__file__).resolve().parents[1] / "integration" / "cpp_driver.py"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    home = tmp_path_factory.mktemp("acl-cpp")
    rules = write_rules(home / "plain_acl.yml")
    proc = start_broker(
        home / "store",
        "aclEnable=true",
        f"aclFilePath={rules}",
        f"innerClientAuthenticationCredentials={INNER}",
    )
    try:
        for topic in (TOPIC, DENIED_TOPIC):
            r = invoke_sync(proc.broker_addr, signed(topic_request(topic), ADMIN), 5000)
            assert r.code == ResponseCode.SUCCESS, r.remark
        yield proc
    finally:
        assert proc.stop() == 0, "".join(proc.log[-40:])


def drive(args: list[str], home: Path, creds: tuple[str, str] | None) -> list[dict[str, Any]]:
    if creds:
        args += ["--access-key", creds[0], "--secret-key", creds[1]]
    home.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [sys.executable, str(DRIVER), *args, "--timeout", "60"],
        capture_output=True,
        text=True,
        timeout=90,
        env=dict(os.environ, HOME=str(home)),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def max_offset(broker: BrokerProcess, topic: str) -> int:
    total = 0
    for qid in range(4):
        req = create_request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(qid)})
        r = invoke_sync(broker.broker_addr, signed(req, ADMIN), 5000)
        assert r.code == ResponseCode.SUCCESS, r.remark
        total += int(r.ext_fields["offset"])
    return total


def produce(broker: BrokerProcess, home: Path, topic: str, creds: tuple[str, str] | None) -> list[dict]:
    args = ["produce", "--namesrv", broker.namesrv_addr, "--group", "PG_ACL_CPP", "--topic", topic]
    lines = drive([*args, "--count", "3", "--mode", "sync"], home, creds)
    return [line["result"] for line in lines if line.get("event") == "sent"]


def test_cpp_client_with_credentials_sends_and_pulls(broker: BrokerProcess, tmp_path: Path) -> None:
    results = produce(broker, tmp_path / "p", TOPIC, APP)
    assert len(results) == 3 and all("error" not in r for r in results), results
    args = ["pull", "--namesrv", broker.namesrv_addr, "--group", GROUP, "--topic", TOPIC, "--expect", "3"]
    lines = drive(args, tmp_path / "c", APP)
    bodies = sorted(line["body"] for line in lines if line.get("event") == "msg")
    assert bodies == [f"{TOPIC}#{i}" for i in range(3)], lines[-3:]


@pytest.mark.parametrize(
    "creds, topic, refusal",
    [
        ((APP[0], "wrong-secret"), TOPIC, "Check signature failed for accessKey=app"),
        (None, TOPIC, "No accessKey is configured"),
        (APP, DENIED_TOPIC, "No permission for topic:DeniedTopic: needs PUB, accessKey=app has DENY"),
    ],
    ids=["wrong-secret", "no-credentials", "denied-topic"],
)
def test_cpp_client_refused(broker: BrokerProcess, tmp_path: Path, creds, topic, refusal) -> None:
    before = max_offset(broker, topic)
    logged = len(broker.log)
    results = produce(broker, tmp_path, topic, creds)
    # (The C++ client reports "No route info" whether the name server or the broker refused.)
    assert results and all("error" in r for r in results), results
    assert max_offset(broker, topic) == before
    deadline = time.monotonic() + 10  # the broker's stderr is read by a thread
    while not any(refusal in line for line in broker.log[logged:]):
        assert time.monotonic() < deadline, broker.log[-5:]
        time.sleep(0.05)
