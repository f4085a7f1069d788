"""The Java client 4.9.8 with ``-Dtls.enable=true`` (RocketMQ's own TLS switch; it does not check the server
certificate by default) against ``python -m rmq.broker`` with ``tls.server.mode=enforcing`` on its port and
its embedded name server: it sends and pulls over TLS. The Java client without TLS gets no route (the name
server refuses its plaintext connection) and stores nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import create_request
from rmq.remoting.client import RemotingClient
from rmq.remoting.tls import TlsClientSettings

from tests.brokerproc import BrokerProcess, start_broker
from tests.peers.apache import PeerLibs, compile_drivers, peer_libs, run_driver
from tests.tls.tlsenv import make_pki, server_props

TOPIC = "JavaTlsTopic"
TLS_JVM = ("-Dtls.enable=true",)


@pytest.fixture(scope="module")
def java() -> tuple[PeerLibs, Path]:
    libs = peer_libs()
    return libs, compile_drivers(libs)


async def _call(addr: str, code: int, fields: dict[str, str]) -> tuple[int, dict[str, str]]:
    async with RemotingClient(tls=TlsClientSettings(enable=True)) as client:
        r = await client.invoke(addr, create_request(code, fields), 5000)
        return r.code, r.ext_fields


def tls_call(addr: str, code: int, fields: dict[str, str]) -> tuple[int, dict[str, str]]:
    return asyncio.run(_call(addr, code, fields))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    home = tmp_path_factory.mktemp("tls-java")
    props = server_props(make_pki(home / "pki"), "enforcing")
    proc = start_broker(home / "store", *(f"{k}={v}" for k, v in props.items()))
    try:
        f = {"topic": TOPIC, "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}
        f.update({"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
        code, _ = tls_call(proc.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, f)
        assert code == ResponseCode.SUCCESS
        yield proc
    finally:
        assert proc.stop() == 0, "".join(proc.log[-40:])


def stored(broker: BrokerProcess) -> int:
    total = 0
    for qid in range(4):
        code, fields = tls_call(
            broker.broker_addr, RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": str(qid)}
        )
        assert code == ResponseCode.SUCCESS
        total += int(fields["offset"])
    return total


def test_java_client_with_tls_sends_and_pulls(java, broker: BrokerProcess, tmp_path: Path) -> None:
    libs, classes = java
    ns = broker.namesrv_addr
    sent = run_driver(
        libs,
        classes,
        tmp_path,
        "send",
        limit=120,
        jvm=TLS_JVM,
        namesrv=ns,
        topic=TOPIC,
        group="PG_TLS",
        count=4,
    )
    assert sent == {"statuses": {"SEND_OK": 4}, "errors": [], "queues": {}}
    got = run_driver(
        libs,
        classes,
        tmp_path,
        "pull",
        limit=120,
        jvm=TLS_JVM,
        namesrv=ns,
        topic=TOPIC,
        group="CG_TLS",
        expect=4,
    )
    assert sorted(m["body"] for m in got["messages"]) == [f"{TOPIC}#{i}" for i in range(4)]


def test_java_client_without_tls_is_refused(java, broker: BrokerProcess, tmp_path: Path) -> None:
    libs, classes = java
    before = stored(broker)
    # The refusal reaches the Java client as a failed route lookup (a send error) or as a
    # RemotingTimeoutException thrown out of the driver, depending on when its channel notices the close.
    try:
        result = run_driver(
            libs,
            classes,
            tmp_path,
            "send",
            limit=120,
            namesrv=broker.namesrv_addr,
            topic=TOPIC,
            group="PG_P",
            count=1,
        )
    except AssertionError as e:
        assert "Remoting" in str(e), e
    else:
        assert result["statuses"] == {} and result["errors"], result
    assert stored(broker) == before
