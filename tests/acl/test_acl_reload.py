"""The rules file: reloaded on change without a restart, atomically; and a broker (or name server) with ACL on
refuses to start when the file is missing or invalid (RocketMQ logs and runs open).

A changed file takes effect once its content has stayed the same for two checks in a row and parses whole; a
half-written file (it does not parse) keeps the old rules and logs a WARN, and a file caught between two
writes is never used.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from rmq.broker.config import BrokerConfig, ConfigError
from rmq.broker.controller import BrokerController
from rmq.common.codes import ResponseCode

from tests.acl.aclenv import (
    APP,
    RULES,
    AclCluster,
    send_request,
    signed,
    start_cluster,
    stop_cluster,
    write_rules,
)

OPENED = RULES.replace("      - SubOnly=SUB\n", "      - SubOnly=PUB|SUB\n")
assert OPENED != RULES


@pytest.fixture
async def cluster(tmp_path) -> AsyncIterator[AclCluster]:
    c = await start_cluster(tmp_path)
    yield c
    await stop_cluster(c)


async def send_code(c: AclCluster, topic: str) -> int:
    return (await c.call(signed(send_request(topic), APP))).code


async def stop_periodic_reload(c: AclCluster) -> None:
    """Stop the broker's own once-a-second check of the file, for a test that steps the checks itself:
    one firing while the test awaits a send would take (or see) the file a check early."""
    (task,) = [t for t in c.ctl._tasks if t.name == "acl-file-reload"]
    await task.stop()


async def test_a_changed_file_takes_effect_without_restart(cluster: AclCluster) -> None:
    c = cluster
    await stop_periodic_reload(c)
    assert await send_code(c, "SubOnly") == ResponseCode.NO_PERMISSION
    write_rules(c.acl_file, OPENED)
    assert c.acl.reload_if_changed() is False  # seen once: maybe still being written
    assert await send_code(c, "SubOnly") == ResponseCode.NO_PERMISSION
    assert c.acl.reload_if_changed() is True  # the same content twice: taken
    assert await send_code(c, "SubOnly") == ResponseCode.SUCCESS
    assert c.acl.reload_if_changed() is False  # unchanged since


async def test_the_broker_reloads_by_itself(cluster: AclCluster) -> None:
    c = cluster
    write_rules(c.acl_file, OPENED)
    deadline = time.monotonic() + 15
    while c.acl.reloads == 0:  # the broker's once-a-second check, twice
        assert time.monotonic() < deadline, "the broker did not reload a changed ACL file"
        await asyncio.sleep(0.05)
    assert await send_code(c, "SubOnly") == ResponseCode.SUCCESS


async def test_a_half_written_file_keeps_the_old_rules(cluster: AclCluster, caplog) -> None:
    c = cluster
    cut = OPENED.index("SubOnly=PUB|SUB") + len("SubOnly=PUB|S")
    c.acl_file.write_text(OPENED[:cut])  # a writer stopped mid-word, in place
    caplog.set_level(logging.WARNING, logger="rmq.acl.validator")
    for _ in range(3):
        assert c.acl.reload_if_changed() is False
    assert "keeping the rules loaded before" in caplog.text and "PUB|S" in caplog.text
    assert sum("not valid" in r.message for r in caplog.records) == 1  # once per bad content, not per check
    assert await send_code(c, "SubOnly") == ResponseCode.NO_PERMISSION
    assert await send_code(c, "AclTopic") == ResponseCode.SUCCESS  # the old rules still serve
    c.acl_file.write_text(OPENED)  # the writer finishes
    assert c.acl.reload_if_changed() is False
    assert c.acl.reload_if_changed() is True
    assert await send_code(c, "SubOnly") == ResponseCode.SUCCESS


async def test_content_between_two_writes_is_never_used(cluster: AclCluster) -> None:
    c = cluster
    # A first half that parses by itself and would let APP publish everywhere.
    partial = RULES.split("  - accessKey: app")[0] + "  - accessKey: app\n    secretKey: " + APP[1] + "\n"
    partial += "    defaultTopicPerm: PUB\n"
    c.acl_file.write_text(partial)
    assert c.acl.reload_if_changed() is False  # seen once
    c.acl_file.write_text(RULES)  # the rest arrives before the next check
    assert c.acl.reload_if_changed() is False
    assert await send_code(c, "AnyTopic") == ResponseCode.NO_PERMISSION
    assert c.acl.reload_if_changed() is False  # the same as what was loaded: nothing to do
    assert c.acl.reloads == 0


async def test_a_deleted_file_keeps_the_old_rules(cluster: AclCluster, caplog) -> None:
    c = cluster
    caplog.set_level(logging.WARNING, logger="rmq.acl.validator")
    c.acl_file.unlink()
    assert c.acl.reload_if_changed() is False
    assert "cannot be read" in caplog.text
    assert await send_code(c, "AclTopic") == ResponseCode.SUCCESS
    assert await send_code(c, "DeniedTopic") == ResponseCode.NO_PERMISSION


def acl_config(tmp_path: Path, **props: str) -> BrokerConfig:
    cfg = BrokerConfig()
    cfg.update(
        {"storePathRootDir": str(tmp_path / "store"), "listenPort": "0", "brokerIP1": "127.0.0.1", **props}
    )
    return cfg


def test_a_broker_refuses_to_start_without_a_valid_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)
    with pytest.raises(ConfigError, match="aclFilePath"):
        acl_config(tmp_path, aclEnable="true").validate()
    with pytest.raises(ConfigError, match="does not exist"):
        BrokerController(acl_config(tmp_path, aclEnable="true", aclFilePath=str(tmp_path / "missing.yml")))
    bad = tmp_path / "bad.yml"
    for text, why in (
        ("accounts:\n  - accessKey: a\n    secretKey: [\n", "not valid YAML"),
        ("accounts:\n  - accessKey: a\n    secretKey: s\n    defaultTopicPerm: READ\n", "READ"),
        ("accounts:\n  - accessKey: a\n", "secretKey"),
        ("globalWhiteRemoteAddresses: [300.1.1.*]\n", "address"),
        ("accounts:\n  - {accessKey: a, secretKey: s}\n  - {accessKey: a, secretKey: t}\n", "twice"),
        ("", "expected a mapping"),
    ):
        bad.write_text(text)
        with pytest.raises(ConfigError, match=why):
            BrokerController(acl_config(tmp_path, aclEnable="true", aclFilePath=str(bad)))


def test_the_default_file_is_under_rocketmq_home(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "conf").mkdir(parents=True)
    write_rules(tmp_path / "home" / "conf" / "plain_acl.yml")
    cfg = acl_config(tmp_path, aclEnable="true")
    assert cfg.acl_path == str(tmp_path / "home" / "conf" / "plain_acl.yml")
    ctl = BrokerController(cfg)
    assert ctl.acl is not None and "app" in ctl.acl.rules.accounts


def run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def test_the_commands_refuse_to_start(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.yml")
    base = [
        "-m",
        "rmq.broker",
        "-p",
        "listenPort=0",
        "--namesrv-port",
        "0",
        "-p",
        f"storePathRootDir={tmp_path}/s",
    ]
    r = run([*base, "-p", "aclEnable=true", "-p", f"aclFilePath={missing}"], tmp_path)
    assert r.returncode == 1 and "does not exist" in r.stderr, r.stderr[-2000:]
    # The embedded name server checks the same rules: the broker must register as an admin account.
    rules = write_rules(tmp_path / "plain_acl.yml")
    r = run([*base, "-p", "aclEnable=true", "-p", f"aclFilePath={rules}"], tmp_path)
    assert r.returncode == 1 and "innerClientAuthenticationCredentials" in r.stderr, r.stderr[-2000:]
    r = run(["-m", "rmq.namesrv", "--port", "0", "--acl-file", missing], tmp_path)
    assert r.returncode == 2 and "does not exist" in r.stderr, r.stderr[-2000:]


async def test_a_standalone_name_server_reloads_its_file(tmp_path: Path) -> None:
    from rmq.acl import AccessValidator
    from rmq.common.codes import RequestCode
    from rmq.namesrv.server import NameServer
    from rmq.remoting.client import RemotingClient
    from rmq.remoting.command import create_request

    path = write_rules(tmp_path / "plain_acl.yml")
    ns = NameServer(acl=AccessValidator.from_file(path))
    await ns.start("127.0.0.1", 0)
    client = RemotingClient()
    try:
        kv = {"namespace": "ns", "key": "k", "value": "v"}
        r = await client.invoke(
            ns.addr, signed(create_request(RequestCode.PUT_KV_CONFIG, dict(kv)), APP), 5000
        )
        assert r.code == ResponseCode.NO_PERMISSION and "admin" in r.remark
        write_rules(
            path,
            RULES.replace(
                "    admin: false\n    defaultTopicPerm: DENY", "    admin: true\n    defaultTopicPerm: DENY"
            ),
        )
        assert ns.acl is not None
        deadline = time.monotonic() + 15
        while ns.acl.reloads == 0:  # the name server's own once-a-second check
            assert time.monotonic() < deadline, "the name server did not reload a changed ACL file"
            await asyncio.sleep(0.05)
        r = await client.invoke(
            ns.addr, signed(create_request(RequestCode.PUT_KV_CONFIG, dict(kv)), APP), 5000
        )
        assert r.code == ResponseCode.SUCCESS, r.remark
    finally:
        await client.close()
        await ns.stop()
