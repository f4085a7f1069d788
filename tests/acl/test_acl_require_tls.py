"""``aclRequireTls``: what an ACL 1.0 signature leaves open, and the TLS-only mode that closes the path to it.

An ACL 1.0 signature covers the ext field values and the body, not the request code, so a frame captured off
a plaintext connection can be replayed with another code whose fields are the same: an admin's signed
GET_TOPIC_STATS_INFO (202, ``topic``) becomes DELETE_TOPIC_IN_BROKER (215, ``topic``) by changing three
bytes, and the broker deletes the topic. With ``aclRequireTls=true`` the broker and the name server refuse
plaintext connections (closed at once, counted, logged with the peer address at a limited rate), so no frame
can be read off the wire or sent in plain text; TLS clients with credentials work as before. Each runs on
the network thread and on the asyncio server.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from rmq.acl import AccessValidator
from rmq.broker.config import BrokerConfig, ConfigError
from rmq.broker.controller import BrokerController
from rmq.client import ClientConfig, LitePullConsumer, Message, MQClientError, Producer
from rmq.common.codes import RequestCode, ResponseCode
from rmq.namesrv.__main__ import main as namesrv_main
from rmq.namesrv.server import NameServer
from rmq.remoting.codec import FrameDecoder, encode
from rmq.remoting.command import RemotingCommand, create_request

from tests.acl.aclenv import ADMIN, APP, GROUP, INNER, TOPIC, signed, topic_request, write_rules
from tests.acl.aclenv import start_cluster as start_plain_cluster
from tests.acl.aclenv import stop_cluster as stop_plain_cluster
from tests.clients import drivers
from tests.integration.test_client_failover import start_namesrv
from tests.tls.tlsenv import Pki, make_pki, server_props

THREADS = pytest.mark.parametrize("network_thread", [True, False], ids=["network-thread", "asyncio"])


def tls_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def exchange(addr: str, frame: bytes, tls: bool = False) -> RemotingCommand | None:
    """Send one raw frame; the first answer, or None when the server closed the connection unanswered."""
    host, port = addr.rsplit(":", 1)
    try:
        reader, writer = await asyncio.open_connection(host, int(port), ssl=tls_context() if tls else None)
    except (ConnectionError, ssl.SSLError):
        return None
    try:
        writer.write(frame)
        await writer.drain()
        decoder = FrameDecoder()
        while True:
            chunk = await asyncio.wait_for(reader.read(65536), 5)
            if not chunk:
                return None
            answers = decoder.feed(chunk)
            if answers:
                return answers[0]
    except (ConnectionError, ssl.SSLError):
        return None
    finally:
        writer.close()


def stats_frame(topic: str = TOPIC) -> bytes:
    """An admin's signed GET_TOPIC_STATS_INFO as it crosses the wire."""
    return encode(signed(create_request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}), ADMIN))


def as_delete(frame: bytes) -> bytes:
    """The same frame with its request code changed to DELETE_TOPIC_IN_BROKER: the signature still holds."""
    assert RequestCode.GET_TOPIC_STATS_INFO == 202 and RequestCode.DELETE_TOPIC_IN_BROKER == 215
    replayed = frame.replace(b'"code":202', b'"code":215', 1)
    assert replayed != frame and len(replayed) == len(frame)
    return replayed


# --- (a) the attack on plaintext ----------------------------------------------------------------------------


@THREADS
async def test_replay_as_another_code_deletes_a_topic_on_plaintext(
    tmp_path: Path, network_thread: bool
) -> None:
    c = await start_plain_cluster(tmp_path, network_thread=network_thread)
    try:
        captured = stats_frame()
        stats = await exchange(c.addr, captured)
        assert stats is not None and stats.code == ResponseCode.SUCCESS, stats
        # ACL is on: the same delete unsigned, or signed by a non-admin, is refused ...
        unsigned = create_request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": TOPIC})
        denied = await exchange(c.addr, encode(unsigned))
        assert denied is not None and denied.code == ResponseCode.NO_PERMISSION
        app = signed(create_request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": TOPIC}), APP)
        denied = await exchange(c.addr, encode(app))
        assert denied is not None and denied.code == ResponseCode.NO_PERMISSION
        # ... but the admin's captured stats request, replayed with the delete's code, passes the check.
        deleted = await exchange(c.addr, as_delete(captured))
        assert deleted is not None and deleted.code == ResponseCode.SUCCESS, deleted
        gone = await exchange(c.addr, stats_frame())
        assert gone is not None and gone.code == ResponseCode.TOPIC_NOT_EXIST, gone
    finally:
        await stop_plain_cluster(c)


# --- (b) aclRequireTls --------------------------------------------------------------------------------------


class RequireTlsCluster:
    def __init__(self, ctl: BrokerController, ns: NameServer, pki: Pki) -> None:
        self.ctl, self.ns, self.pki = ctl, ns, pki

    @property
    def addr(self) -> str:
        return self.ctl.config.broker_addr

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.ns.port}"

    def client_config(self, instance: str, *, tls: bool) -> ClientConfig:
        return ClientConfig(
            namesrv_addr=self.namesrv,
            instance_name=instance,
            tls=tls,
            tls_ca=str(self.pki.ca) if tls else None,
            access_key=APP[0],
            secret_key=APP[1],
        )


def require_tls_props(pki: Pki, rules: Path) -> dict[str, str]:
    """TLS material but no ``tls.server.mode`` (so the default, disabled): aclRequireTls alone enforces."""
    props = server_props(pki, "enforcing")
    del props["tls.server.mode"]
    props.update({"aclEnable": "true", "aclFilePath": str(rules), "aclRequireTls": "true"})
    props["innerClientAuthenticationCredentials"] = INNER
    return props


@pytest.fixture(params=[True, False], ids=["network-thread", "asyncio"])
async def require_tls(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RequireTlsCluster]:
    pki = make_pki(tmp_path / "pki")
    rules = write_rules(tmp_path / "plain_acl.yml")
    cfg = BrokerConfig()
    cfg.update({"storePathRootDir": str(tmp_path / "store"), "listenPort": "0", "brokerIP1": "127.0.0.1"})
    cfg.update(require_tls_props(pki, rules))
    assert cfg.tls_server().mode == "enforcing"
    # the name server as the broker's embedded one is made: the broker's TLS settings and rules
    ns = NameServer(tls=cfg.tls_server(), acl=AccessValidator.from_file(rules))
    await ns.start("127.0.0.1", 0)
    cfg.update({"namesrvAddr": f"127.0.0.1:{ns.port}"})
    cfg.network_thread = request.param
    ctl = BrokerController(cfg)
    await ctl.start("127.0.0.1")
    c = RequireTlsCluster(ctl, ns, pki)
    created = await exchange(c.addr, encode(signed(topic_request(TOPIC), ADMIN)), tls=True)
    assert created is not None and created.code == ResponseCode.SUCCESS, created
    yield c
    await ctl.shutdown()
    await ns.stop()


async def refused(server_count: Callable[[], int], at_least: int, timeout: float = 5.0) -> None:
    """Wait until ``server_count()`` reaches ``at_least`` (the network thread posts a refusal after it closed
    the connection)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while server_count() < at_least and loop.time() < deadline:
        await asyncio.sleep(0.01)


async def test_plaintext_refused_so_the_replay_is_impossible(
    require_tls: RequireTlsCluster, caplog: pytest.LogCaptureFixture
) -> None:
    c = require_tls
    caplog.set_level(logging.WARNING, "rmq.remoting")
    # A TLS connection works: the admin's stats request is answered.
    over_tls = await exchange(c.addr, stats_frame(), tls=True)
    assert over_tls is not None and over_tls.code == ResponseCode.SUCCESS, over_tls
    # A plaintext connection is closed unanswered: neither the frame nor its replay as a delete is served.
    for frame in (stats_frame(), as_delete(stats_frame())):
        assert await exchange(c.addr, frame) is None
    await refused(lambda: c.ctl.remoting.tls_refused, 2)
    assert c.ctl.remoting.tls_refused == 2
    still = await exchange(c.addr, stats_frame(), tls=True)
    assert still is not None and still.code == ResponseCode.SUCCESS, still
    # The name server too.
    route = encode(signed(create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), APP))
    assert await exchange(c.namesrv, route) is None
    await refused(lambda: c.ns.remoting.tls_refused, 1)
    assert c.ns.remoting.tls_refused == 1
    answered = await exchange(c.namesrv, route, tls=True)
    assert answered is not None and answered.code == ResponseCode.SUCCESS, answered
    # Logged with the peer address and the count, once per peer host and 10 s: the second refusal of the
    # broker port is counted, not logged.
    lines = [r.getMessage() for r in caplog.records if "refusing a plaintext connection" in r.getMessage()]
    assert len(lines) == 2, lines  # one for the broker, one for the name server
    assert any(line.startswith("broker: refusing") and "(1 refused so far)" in line for line in lines)
    assert all("from 127.0.0.1:" in line for line in lines)
    c.ctl.remoting.tls_refusals.flush()
    summary = [r.getMessage() for r in caplog.records if "more connections" in r.getMessage()]
    assert summary == [
        "refused 1 more connections in the last 10 s: a plaintext connection (tls.server.mode=enforcing) "
        "from 127.0.0.1"
    ]


async def test_rmq_client_with_tls_and_credentials(require_tls: RequireTlsCluster) -> None:
    c = require_tls
    producer = Producer("RequireTlsProducer", client_config=c.client_config("rt-p", tls=True))
    await producer.start()
    try:
        for i in range(3):
            assert (await producer.send(Message(TOPIC, b"m%d" % i))).send_status.name == "SEND_OK"
    finally:
        await producer.shutdown()
    consumer = LitePullConsumer("AclGroup", client_config=c.client_config("rt-c", tls=True))
    consumer.subscribe(TOPIC, "*")
    await consumer.start()
    try:
        got: list[bytes] = []
        for _ in range(100):
            got += [m.body for m in await consumer.poll(500)]
            if len(got) >= 3:
                break
        assert sorted(got) == [b"m0", b"m1", b"m2"]
    finally:
        await consumer.shutdown()
    # the same client without TLS gets nowhere: the name server refuses its connection
    plain = Producer("RequireTlsPlain", client_config=c.client_config("rt-plain", tls=False))
    await plain.start()
    try:
        with pytest.raises(MQClientError):
            await plain.send(Message(TOPIC, b"never"))
    finally:
        await plain.shutdown()


async def test_go_client_with_tls_and_credentials(require_tls: RequireTlsCluster, tmp_path: Path) -> None:
    c = require_tls
    exe = await asyncio.to_thread(drivers.build, "go-tls")
    common = ("-namesrv", c.namesrv, "-topic", TOPIC, "-timeout", "60", "-ak", APP[0], "-sk", APP[1])

    async def go(scenario: str, *args: str) -> dict[str, object]:
        return await asyncio.to_thread(drivers.run, exe, scenario, *common, *args, home=tmp_path / "go")

    sent = await go("send", "-tls", "-group", "GoTlsProducer", "-count", "4")
    assert (sent["statuses"], sent["errors"]) == (["SEND_OK"] * 4, []), sent
    got = await go("consume", "-tls", "-group", GROUP, "-count", "4")
    assert got["complete"] is True, got
    assert got["bodies"] == [f"{TOPIC}#{i}" for i in range(4)], got
    # without TLS the same client gets nowhere, and stores nothing
    before = c.ctl.store.commitlog_max_offset() if c.ctl.store is not None else -1
    plain = await go("send", "-group", "GoPlainProducer", "-count", "1")
    assert plain.get("statuses") in (None, []) and (plain.get("errors") or plain.get("error")), plain
    assert c.ctl.store is not None and c.ctl.store.commitlog_max_offset() == before


# --- configuration ------------------------------------------------------------------------------------------


def test_config_errors(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    rules = write_rules(tmp_path / "plain_acl.yml")
    base = {"storePathRootDir": str(tmp_path / "store"), "namesrvAddr": "127.0.0.1:9876"}
    good = require_tls_props(pki, rules)
    for props, message in (
        ({**good, "aclEnable": "false"}, "aclRequireTls=true needs aclEnable=true"),
        ({**good, "tls.server.certPath": ""}, "aclRequireTls=true needs TLS material"),
        ({**good, "tls.server.keyPath": ""}, "aclRequireTls=true needs TLS material"),
        ({**good, "tls.server.mode": "permissive"}, "tls.server.mode=permissive is set"),
        (
            {**good, "namesrvAddr": "", "tls.enable": "false"},
            "aclRequireTls=true with the embedded name server",
        ),
    ):
        cfg = BrokerConfig()
        with pytest.raises(ConfigError, match=message):
            cfg.update({**base, **props})
            BrokerController(cfg)
    cfg = BrokerConfig()
    cfg.update({**base, **good, "tls.server.mode": "enforcing"})
    cfg.validate()
    assert cfg.tls_server().mode == "enforcing"
    assert cfg.properties()["aclRequireTls"] == "true"


def test_namesrv_cli_errors(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    rules = write_rules(tmp_path / "plain_acl.yml")
    tls = ["--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)]
    for args, message in (
        (["--acl-require-tls", *tls], "--acl-require-tls needs --acl-file"),
        (["--acl-require-tls", "--acl-file", str(rules)], "needs TLS material: --tls-cert and --tls-key"),
        (
            ["--acl-require-tls", "--acl-file", str(rules), *tls, "--tls-mode", "permissive"],
            "--tls-mode permissive contradicts it",
        ),
    ):
        result = CliRunner().invoke(namesrv_main, args)
        assert result.exit_code == 2, result.output
        assert message in result.output


async def test_standalone_namesrv_requires_tls(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    rules = write_rules(tmp_path / "plain_acl.yml")
    ns = await asyncio.to_thread(
        start_namesrv,
        tmp_path,
        *("--acl-file", str(rules), "--acl-require-tls"),
        *("--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)),
    )
    try:
        topics = encode(signed(create_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}), APP))
        assert await exchange(ns.addr, topics) is None
        answered = await exchange(ns.addr, topics, tls=True)
        assert answered is not None and answered.code == ResponseCode.SUCCESS, answered
        unsigned = await exchange(
            ns.addr, encode(create_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {})), tls=True
        )
        assert unsigned is not None and unsigned.code == ResponseCode.NO_PERMISSION
    finally:
        ns.stop()
    assert any("refusing a plaintext connection" in line and "WARN" in line for line in ns.log), ns.log[-20:]
