"""The Java client 4.9.8 with TLS (``-Dtls.enable=true``) and ACL (``AclClientRPCHook``,
``tests/peers/java/src/rmqpeer/AclDriver.java``) against ``python -m rmq.broker`` with ``aclRequireTls=true``
(ACL on, TLS only on its port and its embedded name server's): with both it sends (single and batch) and
pulls; with credentials but without TLS it gets nowhere (the name server refuses its plaintext connection)
and nothing is stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import create_request
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import RemotingCommand
from rmq.remoting.tls import TlsClientSettings

from tests.acl.aclenv import ADMIN, APP, GROUP, INNER, TOPIC, signed, topic_request, write_rules
from tests.brokerproc import BrokerProcess, start_broker
from tests.peers.apache import PeerLibs, compile_drivers, peer_libs, run_driver
from tests.tls.tlsenv import make_pki, server_props

TLS_JVM = ("-Dtls.enable=true",)


@pytest.fixture(scope="module")
def java() -> tuple[PeerLibs, Path]:
    libs = peer_libs()
    return libs, compile_drivers(libs)


async def _call(addr: str, request: RemotingCommand) -> RemotingCommand:
    async with RemotingClient(tls=TlsClientSettings(enable=True)) as client:
        return await client.invoke(addr, request, 5000)


def tls_call(addr: str, request: RemotingCommand) -> RemotingCommand:
    return asyncio.run(_call(addr, request))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    home = tmp_path_factory.mktemp("acl-tls-java")
    props = server_props(make_pki(home / "pki"), "enforcing")
    del props["tls.server.mode"]  # aclRequireTls alone makes the ports TLS-only
    rules = write_rules(home / "plain_acl.yml")
    props.update({"aclEnable": "true", "aclFilePath": str(rules), "aclRequireTls": "true"})
    props["innerClientAuthenticationCredentials"] = INNER
    proc = start_broker(home / "store", *(f"{k}={v}" for k, v in props.items()))
    try:
        r = tls_call(proc.broker_addr, signed(topic_request(TOPIC), ADMIN))
        assert r.code == ResponseCode.SUCCESS, r.remark
        yield proc
    finally:
        assert proc.stop() == 0, "".join(proc.log[-40:])


def run(java: tuple[PeerLibs, Path], home: Path, scenario: str, tls: bool, **args: Any) -> dict:
    libs, classes = java
    args.update(ak=APP[0], sk=APP[1])
    jvm = TLS_JVM if tls else ()
    return run_driver(libs, classes, home, scenario, main="rmqpeer.AclDriver", limit=120, jvm=jvm, **args)


def stored(broker: BrokerProcess) -> int:
    total = 0
    for qid in range(4):
        req = create_request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": str(qid)})
        r = tls_call(broker.broker_addr, signed(req, ADMIN))
        assert r.code == ResponseCode.SUCCESS, r.remark
        total += int(r.ext_fields["offset"])
    return total


def test_java_client_with_tls_and_acl_sends_and_pulls(java, broker: BrokerProcess, tmp_path: Path) -> None:
    ns = broker.namesrv_addr
    sent = run(java, tmp_path, "send", True, namesrv=ns, topic=TOPIC, group="PG_ACL_TLS", count=4)
    assert sent == {"statuses": ["SEND_OK"] * 4, "errors": []}
    batch = run(java, tmp_path, "send", True, namesrv=ns, topic=TOPIC, group="PG_ACL_TLS", count=4, batch=1)
    assert batch == {"statuses": ["SEND_OK"], "errors": []}
    got = run(java, tmp_path, "pull", True, namesrv=ns, topic=TOPIC, group=GROUP, expect=8)
    assert got["bodies"] == sorted([f"{TOPIC}#{i}" for i in range(4)] * 2)


def test_java_client_with_acl_but_without_tls_is_refused(java, broker: BrokerProcess, tmp_path: Path) -> None:
    before = stored(broker)
    # As in test_java_tls: the refusal reaches the Java client as failed sends, or as a Remoting exception out
    # of the driver, depending on when its channel notices the close.
    try:
        sent = run(
            java, tmp_path, "send", False, namesrv=broker.namesrv_addr, topic=TOPIC, group="PG_P", count=1
        )
    except AssertionError as e:
        assert "Remoting" in str(e), e
    else:
        assert sent["statuses"] == [] and sent["errors"], sent
    assert stored(broker) == before
    assert any("refusing a plaintext connection" in line for line in broker.log)
