"""TLS on the remoting ports (RocketMQ's ``tls.server.*``): a real name server and broker over loopback, with
certificates made at test time.

enforcing: plaintext connections are refused (logged, counted), rmq's client with ``tls=True`` sends and
consumes; permissive: plaintext and TLS clients both work; disabled: plaintext only;
``need.client.auth=require``: a client without a certificate (or with one of an unknown CA) is refused.
Each runs on the network thread (rustls, the send fast path answering TLS sends) and on the asyncio server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from cryptography.hazmat.primitives import serialization
from rmq.acl import AccessValidator
from rmq.broker.config import BrokerConfig, ConfigError
from rmq.broker.controller import BrokerController
from rmq.client import ClientConfig, LitePullConsumer, Message, MQClientError, Producer
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import create_request
from rmq.remoting.errors import RemotingError
from rmq.remoting.native import NativeRemotingServer
from rmq.remoting.server import RemotingServer
from rmq.remoting.tls import TlsClientSettings, TlsServerSettings

from tests.acl.aclenv import ADMIN, APP, DENIED_TOPIC, INNER, signed, topic_request, write_rules
from tests.acl.aclenv import TOPIC as ACL_TOPIC
from tests.tls.tlsenv import TlsCluster, make_pki, server_props, start_cluster, stop_cluster

TOPIC = "TlsTopic"


THREADS = pytest.mark.parametrize("network_thread", [True, False], ids=["network-thread", "asyncio"])


@pytest.fixture(params=[True, False], ids=["network-thread", "asyncio"])
async def enforcing(request, tmp_path) -> AsyncIterator[TlsCluster]:
    c = await start_cluster(tmp_path, "enforcing", network_thread=request.param)
    yield c
    await stop_cluster(c)


@pytest.fixture(params=[True, False], ids=["network-thread", "asyncio"])
async def permissive(request, tmp_path) -> AsyncIterator[TlsCluster]:
    c = await start_cluster(tmp_path, "permissive", network_thread=request.param)
    yield c
    await stop_cluster(c)


def fast_sends(c: TlsCluster) -> int:
    """Sends the network thread's fast path answered (0 on the asyncio server)."""
    net = c.ctl.remoting.net if isinstance(c.ctl.remoting, NativeRemotingServer) else None
    return net.fast_send_stats()[0] if net is not None else 0


async def send_some(cfg: ClientConfig, bodies: list[bytes]) -> None:
    producer = Producer("TlsProducer", client_config=cfg)
    await producer.start()
    try:
        for body in bodies:
            result = await producer.send(Message(TOPIC, body))
            assert result.send_status.name == "SEND_OK"
    finally:
        await producer.shutdown()


async def consume(cfg: ClientConfig, count: int) -> list[bytes]:
    consumer = LitePullConsumer("TlsGroup", client_config=cfg)
    consumer.subscribe(TOPIC, "*")
    await consumer.start()
    try:
        got: list[bytes] = []
        while len(got) < count:
            got += [m.body for m in await consumer.poll(1000)]
        return got
    finally:
        await consumer.shutdown()


async def refused(server: RemotingServer, at_least: int, timeout: float = 5.0) -> int:
    """``server.tls_refused`` once it reaches ``at_least`` (or the timeout passes).

    The network thread closes a refused socket and then posts the refusal; the event loop
    counts it on its next wake-up, which can come after the client has seen the close.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while server.tls_refused < at_least and loop.time() < deadline:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # a refusal too many would show by now
    return server.tls_refused


async def plain_call(addr: str, code: int = RequestCode.GET_BROKER_RUNTIME_INFO) -> int:
    async with RemotingClient(connect_timeout_ms=3000) as client:
        r = await client.invoke(addr, create_request(code, {}), 3000)
        return r.code


async def test_enforcing_refuses_plaintext_and_serves_tls(enforcing: TlsCluster, caplog) -> None:
    c = enforcing
    assert isinstance(c.ctl.remoting, NativeRemotingServer) == c.ctl.config.network_thread
    with caplog.at_level(logging.WARNING, logger="rmq.remoting.tls"):
        for addr in (c.addr, c.namesrv):
            with pytest.raises(RemotingError):
                await plain_call(addr)
    assert await refused(c.ctl.remoting, 1) == 1 and await refused(c.ns.remoting, 1) == 1
    assert "refusing a plaintext connection (tls.server.mode=enforcing)" in caplog.text

    before = c.written()
    with pytest.raises(MQClientError):  # no route: the name server refuses the plaintext client
        await send_some(c.client_config("plain-p", tls=False), [b"never"])
    assert c.written() == before

    big = bytes(range(256)) * 4096  # 1 MiB: many TLS records each way
    await send_some(c.client_config("tls-p", tls=True), [b"t0", b"t1", big])
    assert sorted(await consume(c.client_config("tls-c", tls=True), 3)) == sorted([b"t0", b"t1", big])
    if c.ctl.config.network_thread:  # the fast path answers TLS sends too (not the topic's first)
        assert fast_sends(c) >= 2


async def test_permissive_serves_plaintext_and_tls(permissive: TlsCluster) -> None:
    c = permissive
    await send_some(c.client_config("plain-p", tls=False), [b"p0", b"p1"])
    await send_some(c.client_config("tls-p", tls=True), [b"t0", b"t1"])
    got = await consume(c.client_config("plain-c", tls=False), 4)
    assert sorted(got) == [b"p0", b"p1", b"t0", b"t1"]
    assert c.ctl.remoting.tls_refused == 0
    if c.ctl.config.network_thread:
        assert fast_sends(c) >= 2


async def test_disabled_serves_plaintext_only(tmp_path) -> None:
    c = await start_cluster(tmp_path, "disabled")
    try:
        assert isinstance(c.ctl.remoting, NativeRemotingServer)  # the network thread keeps the port
        assert await plain_call(c.addr) == ResponseCode.SUCCESS
        async with RemotingClient(tls=TlsClientSettings(enable=True)) as client:
            with pytest.raises(RemotingError):
                await client.invoke(c.addr, create_request(RequestCode.GET_BROKER_CLUSTER_INFO, {}), 3000)
    finally:
        await stop_cluster(c)


@THREADS
async def test_need_client_auth_require(tmp_path, network_thread: bool) -> None:
    c = await start_cluster(tmp_path, "enforcing", "require", network_thread=network_thread)
    try:
        for settings in (
            TlsClientSettings(enable=True),  # no certificate
            TlsClientSettings(  # a certificate of a CA the server does not trust
                enable=True, cert_path=str(c.pki.rogue_cert), key_path=str(c.pki.rogue_key)
            ),
        ):
            async with RemotingClient(tls=settings) as client:
                with pytest.raises(RemotingError):
                    await client.invoke(c.addr, create_request(RequestCode.GET_BROKER_CLUSTER_INFO, {}), 3000)
        assert await refused(c.ctl.remoting, 2) == 2

        await send_some(c.client_config("cert-p", tls=True, cert=True), [b"c0"])
        assert await consume(c.client_config("cert-c", tls=True, cert=True), 1) == [b"c0"]
    finally:
        await stop_cluster(c)


async def test_acl_credentials_over_tls(tmp_path) -> None:
    rules = write_rules(tmp_path / "plain_acl.yml")
    extra = {"aclEnable": "true", "aclFilePath": str(rules), "innerClientAuthenticationCredentials": INNER}
    c = await start_cluster(tmp_path, "enforcing", extra=extra, acl=AccessValidator.from_file(rules))
    try:
        create = signed(topic_request(ACL_TOPIC), ADMIN)
        async with RemotingClient(tls=TlsClientSettings(enable=True)) as client:
            assert (await client.invoke(c.addr, create, 5000)).code == ResponseCode.SUCCESS
        creds = {"access_key": APP[0], "secret_key": APP[1]}
        producer = Producer("TlsAclProducer", client_config=c.client_config("acl-p", tls=True, **creds))
        await producer.start()
        try:
            assert (await producer.send(Message(ACL_TOPIC, b"signed"))).send_status.name == "SEND_OK"
            with pytest.raises(MQClientError):
                await producer.send(Message(DENIED_TOPIC, b"denied"))
        finally:
            await producer.shutdown()
        assert c.ctl.acl is not None and c.ctl.acl.denied >= 1
    finally:
        await stop_cluster(c)


async def test_encrypted_key_is_served_by_the_asyncio_server(tmp_path) -> None:
    pki = make_pki(tmp_path / "keys")
    key = serialization.load_pem_private_key(pki.server_key.read_bytes(), None)
    locked = tmp_path / "locked.key"
    locked.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"key-pass"),
        )
    )
    extra = {"tls.server.keyPath": str(locked), "tls.server.keyPassword": "key-pass"}
    c = await start_cluster(tmp_path, "enforcing", extra=extra, pki=pki)
    try:
        # rustls takes no encrypted key: the asyncio server (Python's ssl) serves the port.
        assert not isinstance(c.ctl.remoting, NativeRemotingServer)
        await send_some(c.client_config("locked-p", tls=True), [b"k0"])
        assert c.ctl.config.properties()["tls.server.keyPassword"] == "******"
    finally:
        await stop_cluster(c)


async def test_garbage_after_a_handshake_byte_is_refused(enforcing: TlsCluster) -> None:
    c = enforcing
    for junk in (b"\x16" + bytes(range(255)) * 8, b"\x16\x03\x01\xff\xff" + b"\x00" * 100):
        reader, writer = await asyncio.open_connection("127.0.0.1", c.ctl.port)
        writer.write(junk)
        await writer.drain()
        await reader.read()  # the server closes (after its alert, if any)
        writer.close()
    assert await refused(c.ctl.remoting, 2) == 2
    assert await tls_ping(c.addr) == ResponseCode.SUCCESS  # the server serves on


async def tls_ping(addr: str) -> int:
    async with RemotingClient(tls=TlsClientSettings(enable=True)) as client:
        r = await client.invoke(addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 3000)
        return r.code


async def test_client_checks_the_server_certificate(enforcing: TlsCluster) -> None:
    c = enforcing
    settings = TlsClientSettings(enable=True, verify_server=True, trust_cert_path=str(c.pki.rogue_ca))
    async with RemotingClient(tls=settings) as client:
        with pytest.raises(RemotingError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.invoke(c.addr, create_request(RequestCode.GET_BROKER_CLUSTER_INFO, {}), 3000)


async def test_silent_connection_is_closed_after_the_handshake_timeout(tmp_path) -> None:
    pki = make_pki(tmp_path)
    tls = TlsServerSettings(
        mode="permissive",
        cert_path=str(pki.server_cert),
        key_path=str(pki.server_key),
        handshake_timeout_s=0.2,
    )
    server = RemotingServer(tls=tls)
    await server.start("127.0.0.1", 0)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        assert await reader.read() == b""  # closed by the server, nothing sent
        writer.close()
        assert await refused(server, 1) == 1
    finally:
        await server.stop()


def test_config_errors(tmp_path) -> None:
    pki = make_pki(tmp_path)
    base = {"storePathRootDir": str(tmp_path / "store"), "namesrvAddr": "127.0.0.1:9876"}
    for props, message in (
        ({"tls.server.mode": "strict"}, "tls.server.mode: 'strict' is not one of"),
        ({"tls.server.mode": "enforcing"}, "needs tls.server.certPath and tls.server.keyPath"),
        (
            {
                **server_props(pki, "enforcing"),
                "tls.server.trustCertPath": "",
                "tls.server.need.client.auth": "require",
            },
            "needs tls.server.trustCertPath",
        ),
        (
            {**server_props(pki, "enforcing"), "tls.server.certPath": str(tmp_path / "missing.pem")},
            "cannot load tls.server.certPath",
        ),
        ({**server_props(pki, "enforcing"), "namesrvAddr": "", "tls.enable": "false"}, "set tls.enable=true"),
    ):
        cfg = BrokerConfig()
        with pytest.raises(ConfigError, match=message):
            cfg.update({**base, **props})
            BrokerController(cfg)


def test_tls_config_file(tmp_path) -> None:
    pki = make_pki(tmp_path)
    path = tmp_path / "tls.properties"
    path.write_text(
        f"tls.server.mode=enforcing\ntls.server.certPath={pki.server_cert}\ntls.server.keyPath={pki.server_key}\n"
    )
    cfg = BrokerConfig()
    cfg.update({"tls.config.file": str(path)})
    assert cfg.tls_server().mode == "enforcing"
    assert cfg.tls_server().cert_path == str(pki.server_cert)
    path.write_text("brokerName=x\n")
    with pytest.raises(ConfigError, match=r"not a tls\.\* setting"):
        BrokerConfig().update({"tls.config.file": str(path)})
    cfg.update({"tls.server.keyPassword": "pw"})
    assert cfg.properties()["tls.server.keyPassword"] == "******"
