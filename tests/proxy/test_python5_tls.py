"""TLS on the gRPC endpoint: a broker with tls.server.mode=enforcing serves grpcServerPort over TLS with its
certificate (the 5.x client checks it against the test CA), and reaches itself over TLS Remoting."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from rmq.common.codes import ResponseCode
from rmq.remoting import create_request
from rmq.remoting.client import RemotingClient
from rmq.remoting.tls import TlsClientSettings

from tests.brokerproc import BrokerProcess, start_broker
from tests.proxy.client5run import run_client5
from tests.tls.tlsenv import Pki, make_pki, server_props


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Pki]]:
    home = tmp_path_factory.mktemp("grpc-tls")
    pki = make_pki(home / "pki")
    props = [f"{k}={v}" for k, v in server_props(pki, "enforcing").items()]
    proc = start_broker(home / "store", *props)
    try:
        yield proc, pki
    finally:
        assert proc.stop() == 0, "".join(proc.log[-40:])


async def _create_topic(addr: str, topic: str) -> None:
    fields = {"topic": topic, "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}
    fields.update({"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
    async with RemotingClient(tls=TlsClientSettings(enable=True)) as client:
        r = await client.invoke(addr, create_request(17, fields), 5000)
    assert r.code == ResponseCode.SUCCESS, r.remark


async def test_tls_client_sends_and_plaintext_client_is_refused(
    tls_broker: tuple[BrokerProcess, Pki],
) -> None:
    broker, pki = tls_broker
    await _create_topic(broker.broker_addr, "TlsTopic5")
    endpoints = f"127.0.0.1:{broker.ready['grpc']}"
    trust = {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(pki.ca)}
    args = {"endpoints": endpoints, "topic": "TlsTopic5", "messages": [{"body": "secret"}]}
    sent = run_client5("send", extra_env=trust, tls=True, timeout=60, **args)["sent"]
    assert [s["body"] for s in sent] == ["secret"]
    with pytest.raises(AssertionError, match="failed to fetch topic:TlsTopic5 route"):
        run_client5("send", timeout=60, **args)
