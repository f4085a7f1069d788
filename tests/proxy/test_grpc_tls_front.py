"""The gRPC port takes TLS and plaintext clients on one port, as RocketMQ's proxy does by default (its TLS
test mode: a self-signed certificate made at start): the official 5.x Java client connects over TLS unless
told otherwise, the Python and Node.js clients in plaintext. grpcio serves a port one way only, so the port
is a Rust front (``rmq._store.TlsFront``) passing every connection on to grpcio (an abstract Unix
socket); the endpoint still sees each client's own address (sessions, ACL white lists, born hosts), not the
front's."""

from __future__ import annotations

import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from rmq.common.codes import ResponseCode
from rmq.proxy import ProxyConfig, ProxyThread
from rmq.proxy.pb import d, s
from rmq.proxy.v2 import service_pb2_grpc
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.brokerproc import BrokerProcess, start_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_broker(tmp_path_factory.mktemp("grpc-front") / "store")
    try:
        yield b
    finally:
        assert b.stop() == 0, "".join(b.log[-40:])


def new_topic(b: BrokerProcess) -> str:
    topic = f"Front_{uuid.uuid4().hex[:8]}"
    fields = {"topic": topic, "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}
    fields.update({"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
    r = invoke_sync(b.broker_addr, create_request(17, fields), 5000)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return topic


def query_route(channel: grpc.Channel, topic: str, port: int) -> s.QueryRouteResponse:
    request = s.QueryRouteRequest(
        topic=d.Resource(name=topic),
        endpoints=d.Endpoints(
            scheme=d.AddressScheme.IPv4, addresses=[d.Address(host="127.0.0.1", port=port)]
        ),
    )
    return service_pb2_grpc.MessagingServiceStub(channel).QueryRoute(request, timeout=30)


def test_tls_and_plaintext_clients_share_the_port(broker: BrokerProcess) -> None:
    port = int(broker.ready["grpc"])
    topic = new_topic(broker)
    # The certificate the port serves (a TLS handshake of its own), then trusted by a gRPC client over TLS.
    cert = ssl.get_server_certificate(("127.0.0.1", port))
    creds = grpc.ssl_channel_credentials(root_certificates=cert.encode())
    options = [("grpc.ssl_target_name_override", "localhost")]
    with grpc.secure_channel(f"127.0.0.1:{port}", creds, options=options) as channel:
        over_tls = query_route(channel, topic, port)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        plain = query_route(channel, topic, port)
    for answer in (over_tls, plain):
        assert answer.status.code == d.Code.OK, answer.status
        assert sorted(q.id for q in answer.message_queues) == [0, 1, 2, 3]
    assert any("with TLS and plaintext (TLS test mode" in line for line in broker.log), broker.log[-20:]


def test_a_client_that_is_not_tls_nor_grpc_gets_closed_and_logged(broker: BrokerProcess) -> None:
    """Garbage in a TLS handshake record fails the handshake: the connection is closed and the broker's log
    names the peer and the cause."""
    port = int(broker.ready["grpc"])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(bytes([0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5]))
        sock.settimeout(10)
        while sock.recv(4096):
            pass
    refused = "gRPC port: connection refused or broken off"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if any(refused in line and "TLS" in line for line in broker.log):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("no refusal logged: " + "".join(broker.log[-20:]))


def _client_port_towards(port: int) -> int:
    """The local port of this host's one established TCP connection whose remote end is 127.0.0.1:`port`
    (grpcio's sockets are IPv6 ones with IPv4-mapped addresses)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, remote, state = line.split()[1:4]
            if state == "01" and remote.endswith(f"0100007F:{port:04X}"):
                found.append(int(local.split(":")[1], 16))
    assert len(found) == 1, found
    return found[0]


def test_the_endpoint_sees_each_client_not_the_front(broker: BrokerProcess) -> None:
    proxy = ProxyThread(ProxyConfig([broker.namesrv_addr], "127.0.0.1", 0))
    port = proxy.start()
    try:
        server = proxy.server
        assert server is not None and server.front is not None
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)
            meta = [("x-mq-client-id", "front-test-client"), ("x-mq-language", "PYTHON")]
            request = s.HeartbeatRequest(client_type=d.ClientType.PRODUCER)
            answer = stub.Heartbeat(request, metadata=meta, timeout=30)
            assert answer.status.code == d.Code.OK, answer.status
            client_port = _client_port_towards(port)
            session = server.registry.session("front-test-client")
            assert session.remote_addr == f"127.0.0.1:{client_port}"
        assert server.front.stats()["plain"] == 1
    finally:
        proxy.stop()
