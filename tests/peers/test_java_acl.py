"""The Java client 4.9.8 with ``AclClientRPCHook`` (``tests/peers/java/src/rmqpeer/AclDriver.java``) against
``python -m rmq.broker`` with ACL on (its embedded name server checking the same rules): with the right
credentials it sends (single and batch) and consumes on permitted topics; with a wrong secret, without
credentials, or on a denied topic its sends fail -- NO_PERMISSION (16) from the broker where it gets that
far -- and nothing is stored.
"""

from __future__ import annotations

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
from tests.peers.apache import PeerLibs, compile_drivers, peer_libs, run_driver


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> tuple[PeerLibs, Path]:
    libs = peer_libs()
    return libs, compile_drivers(libs)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    home = tmp_path_factory.mktemp("acl-java")
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


def run(
    java: tuple[PeerLibs, Path], home: Path, scenario: str, creds: tuple[str, str] | None, **args: Any
) -> dict:
    libs, classes = java
    if creds:
        args.update(ak=creds[0], sk=creds[1])
    return run_driver(libs, classes, home, scenario, main="rmqpeer.AclDriver", limit=120, **args)


def stored(broker: BrokerProcess, topic: str) -> int:
    total = 0
    for qid in range(4):
        req = create_request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(qid)})
        r = invoke_sync(broker.broker_addr, signed(req, ADMIN), 5000)
        assert r.code == ResponseCode.SUCCESS, r.remark
        total += int(r.ext_fields["offset"])
    return total


def test_java_client_with_acl_hook_sends_and_consumes(java, broker: BrokerProcess, tmp_path: Path) -> None:
    ns = broker.namesrv_addr
    sent = run(java, tmp_path, "send", APP, namesrv=ns, topic=TOPIC, group="PG_ACL_J", count=4)
    assert sent == {"statuses": ["SEND_OK"] * 4, "errors": []}
    batch = run(java, tmp_path, "send", APP, namesrv=ns, topic=TOPIC, group="PG_ACL_J", count=4, batch=1)
    assert batch == {"statuses": ["SEND_OK"], "errors": []}
    got = run(java, tmp_path, "pull", APP, namesrv=ns, topic=TOPIC, group=GROUP, expect=8)
    assert got["bodies"] == sorted([f"{TOPIC}#{i}" for i in range(4)] * 2)


@pytest.mark.parametrize(
    "creds, topic, broker_code",
    [((APP[0], "wrong-secret"), TOPIC, None), (None, TOPIC, None), (APP, DENIED_TOPIC, 16)],
    ids=["wrong-secret", "no-credentials", "denied-topic"],
)
def test_java_client_refused(java, broker: BrokerProcess, tmp_path: Path, creds, topic, broker_code) -> None:
    before = stored(broker, topic)
    sent = run(
        java, tmp_path, "send", creds, namesrv=broker.namesrv_addr, topic=topic, group="PG_ACL_J", count=2
    )
    assert sent["statuses"] == [] and len(sent["errors"]) == 2, sent
    if broker_code is not None:  # got a route, then the broker refused the send
        assert {e["code"] for e in sent["errors"]} == {broker_code}, sent
        refusal = "No permission for topic:DeniedTopic: needs PUB, accessKey=app has DENY"
        deadline = time.monotonic() + 10  # the broker's stderr is read by a thread
        while not any(refusal in line for line in broker.log):
            assert time.monotonic() < deadline, broker.log[-5:]
            time.sleep(0.05)
    assert stored(broker, topic) == before
