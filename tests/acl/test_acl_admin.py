"""The ACL admin requests (50-54) over a real broker with ACL on, and the ``acl/`` directory of rules files
beside ``plain_acl.yml`` (RocketMQ 4.9.7's ``conf/acl/``).

Each change is written atomically to the file that defines the account (a new account: the main file),
bumps that file's ``dataVersion``, keeps every other account, and takes effect at once; invalid input is
refused with a remark and nothing written; only an admin account may send any of the five; a secret key
never shows in a remark, a log line or an answer.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from rmq.acl.validator import SECRET_MASK
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand, create_request

from tests.acl.aclenv import (
    ADMIN,
    APP,
    OTHER,
    SECRETS,
    AclCluster,
    send_request,
    signed,
    start_cluster,
    stop_cluster,
    topic_request,
    write_rules,
)

NEW = ("newuser1", "new-secret-0004")
DIR_USER = ("diruser1", "dir-secret-0005")
DIR_RULES = f"""\
globalWhiteRemoteAddresses:
  - 10.20.30.*
accounts:
  - accessKey: {DIR_USER[0]}
    secretKey: {DIR_USER[1]}
    defaultTopicPerm: DENY
    topicPerms:
      - DirTopic=PUB
"""
ALL_SECRETS = (*SECRETS, NEW[1], DIR_USER[1])


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[AclCluster]:
    (tmp_path / "acl").mkdir()
    write_rules(tmp_path / "acl" / "team.yml", DIR_RULES)
    c = await start_cluster(tmp_path)
    r = await c.call(signed(topic_request("DirTopic"), ADMIN))
    assert r.code == ResponseCode.SUCCESS, r.remark
    yield c
    await stop_cluster(c)


def update_request(ak: str, sk: str | None, **fields: str) -> RemotingCommand:
    f = {"accessKey": ak, "admin": "false", **fields}
    if sk is not None:
        f["secretKey"] = sk
    return create_request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, f)


async def admin_call(
    c: AclCluster, request: RemotingCommand, creds: tuple[str, str] = ADMIN
) -> RemotingCommand:
    return await c.call(signed(request, creds))


async def send_as(c: AclCluster, creds: tuple[str, str], topic: str) -> RemotingCommand:
    return await c.call(signed(send_request(topic), creds))


def file_data(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def accounts_of(path: Path) -> dict[str, dict]:
    return {str(a["accessKey"]): a for a in file_data(path)["accounts"]}


async def versions(c: AclCluster) -> dict[str, dict[str, int]]:
    r = await admin_call(c, create_request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO))
    assert r.code == ResponseCode.SUCCESS, r.remark
    return fastjson.loads(r.ext_fields["allAclFileVersion"])


async def test_create_update_delete_an_account(cluster: AclCluster, caplog) -> None:
    c = cluster
    caplog.set_level(logging.INFO)
    main = c.acl_file
    assert (await send_as(c, NEW, "AclTopic")).code == ResponseCode.NO_PERMISSION
    before = await versions(c)
    assert before[str(main)]["counter"] == 0

    r = await admin_call(
        c, update_request(*NEW, topicPerms="AclTopic=PUB,PubOnly=PUB", defaultTopicPerm="DENY")
    )
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
    # Written to the main file, every other account kept, the version bumped; in effect at once.
    accounts = accounts_of(main)
    assert set(accounts) == {ADMIN[0], APP[0], OTHER[0], NEW[0]}
    assert accounts[NEW[0]] == {
        "accessKey": NEW[0],
        "secretKey": NEW[1],
        "admin": False,
        "defaultTopicPerm": "DENY",
        "topicPerms": ["AclTopic=PUB", "PubOnly=PUB"],
    }
    assert file_data(main)["globalWhiteRemoteAddresses"] == ["10.10.103.*"]
    assert file_data(main)["dataVersion"][0]["counter"] == 1
    after = await versions(c)
    assert (
        after[str(main)]["counter"] == 1 and after[str(main)]["timestamp"] >= before[str(main)]["timestamp"]
    )
    assert (await send_as(c, NEW, "AclTopic")).code == ResponseCode.SUCCESS
    assert (await send_as(c, NEW, "DeniedTopic")).code == ResponseCode.NO_PERMISSION
    assert (await send_as(c, APP, "AclTopic")).code == ResponseCode.SUCCESS
    assert not list(main.parent.glob(".*tmp"))  # no temp file left behind

    # An update keeps what it does not name (admin is always written, as RocketMQ).
    r = await admin_call(c, update_request(*NEW, topicPerms="AclTopic=DENY"))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert accounts_of(main)[NEW[0]]["topicPerms"] == ["AclTopic=DENY"]
    assert accounts_of(main)[NEW[0]]["defaultTopicPerm"] == "DENY"
    assert (await send_as(c, NEW, "AclTopic")).code == ResponseCode.NO_PERMISSION

    r = await admin_call(c, create_request(RequestCode.DELETE_ACL_CONFIG, {"accessKey": NEW[0]}))
    assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
    assert set(accounts_of(main)) == {ADMIN[0], APP[0], OTHER[0]}
    assert file_data(main)["dataVersion"][0]["counter"] == 3
    r = await send_as(c, NEW, "PubOnly")
    assert r.code == ResponseCode.NO_PERMISSION and "No acl config" in r.remark
    r = await admin_call(c, create_request(RequestCode.DELETE_ACL_CONFIG, {"accessKey": NEW[0]}))
    assert (
        r.code == ResponseCode.DELETE_ACL_CONFIG_FAILED and "no account with accessKey=newuser1" in r.remark
    )

    # Logged at INFO with who and what; never a secret.
    changes = [
        rec.getMessage()
        for rec in caplog.records
        if rec.name == "rmq.acl.validator" and "by accessKey" in rec.getMessage()
    ]
    assert len(changes) == 3, changes
    assert f"ACL account {NEW[0]} created in {main} by accessKey={ADMIN[0]} from 127.0.0.1:" in changes[0]
    assert (
        "topicPerms=['AclTopic=PUB', 'PubOnly=PUB']" in changes[0]
        and f"secretKey={SECRET_MASK}" in changes[0]
    )
    assert f"ACL account {NEW[0]} updated" in changes[1]
    assert f"ACL account {NEW[0]} deleted from {main}" in changes[2]
    assert not any(s in caplog.text for s in ALL_SECRETS)


@pytest.mark.parametrize(
    "fields, why",
    [
        ({"accessKey": "", "secretKey": NEW[1]}, "accessKey is required"),
        ({"secretKey": NEW[1]}, "accessKey is required"),
        (
            {"accessKey": "short", "secretKey": NEW[1]},
            "accessKey=short is 5 characters: it must be at least 7",
        ),
        ({"accessKey": NEW[0], "secretKey": "abc123"}, "secretKey of accessKey=newuser1 is 6 characters"),
        ({"accessKey": NEW[0]}, "secretKey is required"),
        (
            {"accessKey": NEW[0], "secretKey": NEW[1], "defaultTopicPerm": "READ"},
            "'READ' is not DENY, PUB, SUB",
        ),
        (
            {"accessKey": NEW[0], "secretKey": NEW[1], "topicPerms": "AclTopic=ALL"},
            "topicPerms[0]: 'ALL' is not",
        ),
        (
            {"accessKey": NEW[0], "secretKey": NEW[1], "groupPerms": "g1=SUB,g2"},
            "groupPerms[1]: 'g2' is not resource=PERM",
        ),
        (
            {"accessKey": NEW[0], "secretKey": NEW[1], "whiteRemoteAddress": "300.1.1.*"},
            "bad address pattern",
        ),
        ({"accessKey": NEW[0], "secretKey": NEW[1], "admin": "maybe"}, "not a boolean"),
    ],
    ids=[
        "blank-ak",
        "no-ak",
        "short-ak",
        "short-sk",
        "no-sk",
        "bad-default-perm",
        "bad-perm",
        "bad-entry",
        "bad-ip",
        "bad-admin",
    ],
)
async def test_invalid_input_is_refused_and_nothing_written(cluster: AclCluster, caplog, fields, why) -> None:
    c = cluster
    caplog.set_level(logging.INFO)
    before = c.acl_file.read_bytes(), (c.acl_file.parent / "acl" / "team.yml").read_bytes()
    r = await admin_call(c, create_request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields))
    assert r.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, (r.code, r.remark)
    assert why in r.remark, r.remark
    assert (c.acl_file.read_bytes(), (c.acl_file.parent / "acl" / "team.yml").read_bytes()) == before
    assert "refused" in caplog.text and not any(s in r.remark or s in caplog.text for s in ALL_SECRETS)


async def test_global_white_list_per_file(cluster: AclCluster) -> None:
    c = cluster
    team = c.acl_file.parent / "acl" / "team.yml"
    req = create_request(
        RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "10.1.1.*,192.168.0.1"}
    )
    r = await admin_call(c, req)
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert file_data(c.acl_file)["globalWhiteRemoteAddresses"] == ["10.1.1.*", "192.168.0.1"]
    assert set(accounts_of(c.acl_file)) == {ADMIN[0], APP[0], OTHER[0]}
    fields = {"globalWhiteAddrs": "127.0.0.1", "aclFileFullPath": str(team)}
    r = await admin_call(c, create_request(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, fields))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert file_data(team)["globalWhiteRemoteAddresses"] == ["127.0.0.1"]
    assert file_data(team)["dataVersion"][0]["counter"] == 1
    # 127.0.0.1 is now white-listed: an unsigned send goes through (but no admin request does).
    r = await c.call(send_request("AnyTopic"))
    assert r.code == ResponseCode.SUCCESS, r.remark
    v = await versions(c)
    assert (v[str(c.acl_file)]["counter"], v[str(team)]["counter"]) == (1, 1)
    for fields, why in (
        (
            {"globalWhiteAddrs": "1.2.3.4", "aclFileFullPath": str(c.acl_file.parent / "other.yml")},
            "is not one of",
        ),
        ({"globalWhiteAddrs": "1.2.3.x"}, "not an IP address"),
        ({}, "globalWhiteAddrs is required"),
    ):
        before = c.acl_file.read_bytes()
        r = await admin_call(c, create_request(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, fields))
        assert r.code == ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED and why in r.remark, r.remark
        assert c.acl_file.read_bytes() == before


async def test_cluster_acl_info_and_config(cluster: AclCluster) -> None:
    c = cluster
    team = c.acl_file.parent / "acl" / "team.yml"
    r = await admin_call(c, create_request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO))
    assert r.code == ResponseCode.SUCCESS
    h = r.ext_fields
    cfg = c.ctl.config
    assert (h["brokerName"], h["brokerAddr"], h["clusterName"]) == (
        cfg.broker_name,
        cfg.broker_addr,
        cfg.broker_cluster_name,
    )
    assert set(fastjson.loads(h["allAclFileVersion"])) == {str(c.acl_file), str(team)}
    assert fastjson.loads(h["version"])["counter"] == 0 and list(fastjson.loads(h["version"])) == [
        "counter",
        "timestamp",
    ]

    r = await admin_call(c, create_request(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG))
    assert r.code == ResponseCode.SUCCESS
    body = fastjson.loads(r.body)
    assert body["globalWhiteAddrs"] == ["10.20.30.*", "10.10.103.*"]  # the directory's files first
    by_ak = {a["accessKey"]: a for a in body["plainAccessConfigs"]}
    assert set(by_ak) == {ADMIN[0], APP[0], OTHER[0], DIR_USER[0]}
    assert by_ak[APP[0]] == {
        "accessKey": "app",
        "admin": False,
        "defaultGroupPerm": "DENY",
        "defaultTopicPerm": "DENY",
        "groupPerms": ["AclGroup=SUB", "DeniedGroup=DENY"],
        "secretKey": SECRET_MASK,
        "topicPerms": ["AclTopic=PUB|SUB", "DeniedTopic=DENY", "PubOnly=PUB", "SubOnly=SUB"],
    }  # whiteRemoteAddress is empty (null) in the file: left out, as fastjson leaves out a null
    assert by_ak[ADMIN[0]]["admin"] is True
    assert not any(s.encode() in r.body for s in ALL_SECRETS)


async def test_only_an_admin_account_may_send_them(cluster: AclCluster) -> None:
    c = cluster
    before = c.acl_file.read_bytes()
    for code, fields in (
        (
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
            {"accessKey": "sneaky01", "secretKey": "sneaky-secret", "admin": "true"},
        ),
        (RequestCode.DELETE_ACL_CONFIG, {"accessKey": ADMIN[0]}),
        (RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}),
        (RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "*"}),
        (RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, {}),
    ):
        for creds in (APP, OTHER, DIR_USER):
            r = await admin_call(c, create_request(code, dict(fields)), creds)
            assert r.code == ResponseCode.NO_PERMISSION, (code, creds[0], r.code, r.remark)
            assert f"Need admin permission for request code={int(code)}" in r.remark
            assert not r.body
        r = await c.call(create_request(code, dict(fields)))  # unsigned
        assert r.code == ResponseCode.NO_PERMISSION
    assert c.acl_file.read_bytes() == before
    assert "sneaky01" not in c.acl.rules.accounts


async def test_an_account_of_a_directory_file_is_changed_in_that_file(cluster: AclCluster) -> None:
    c = cluster
    team = c.acl_file.parent / "acl" / "team.yml"
    main_before = c.acl_file.read_bytes()
    assert (await send_as(c, DIR_USER, "DirTopic")).code == ResponseCode.SUCCESS
    assert (await send_as(c, DIR_USER, "AclTopic")).code == ResponseCode.NO_PERMISSION
    r = await admin_call(c, update_request(*DIR_USER, topicPerms="DirTopic=PUB,AclTopic=PUB"))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert c.acl_file.read_bytes() == main_before
    assert accounts_of(team)[DIR_USER[0]]["topicPerms"] == ["DirTopic=PUB", "AclTopic=PUB"]
    assert file_data(team)["globalWhiteRemoteAddresses"] == ["10.20.30.*"]
    assert (await send_as(c, DIR_USER, "AclTopic")).code == ResponseCode.SUCCESS
    v = await versions(c)
    assert (v[str(c.acl_file)]["counter"], v[str(team)]["counter"]) == (0, 1)
    r = await admin_call(c, create_request(RequestCode.DELETE_ACL_CONFIG, {"accessKey": DIR_USER[0]}))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert file_data(team)["accounts"] == [] and c.acl_file.read_bytes() == main_before


async def test_a_file_not_loaded_as_it_is_on_disk_is_never_written(cluster: AclCluster) -> None:
    c = cluster
    (task,) = [t for t in c.ctl._tasks if t.name == "acl-file-reload"]
    await task.stop()
    broken = c.acl_file.read_text() + "accounts: [\n"  # an editor's half-saved file
    c.acl_file.write_text(broken)
    r = await admin_call(c, update_request(*NEW))
    assert r.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED and "changed on disk" in r.remark, (
        r.remark
    )
    assert c.acl_file.read_text() == broken
    assert c.acl.reload_if_changed() is False and c.acl.reload_if_changed() is False  # it does not parse
    r = await admin_call(
        c, create_request(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "*"})
    )
    assert r.code == ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED and c.acl_file.read_text() == broken
    # Another file is written as usual; once the main file is mended and reloaded, it is written too.
    r = await admin_call(c, update_request(*DIR_USER))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert c.acl_file.read_text() == broken
    write_rules(c.acl_file)  # back to what is loaded
    r = await admin_call(c, update_request(*NEW))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert NEW[0] in accounts_of(c.acl_file)


async def test_directory_files_are_reloaded_added_and_removed(cluster: AclCluster) -> None:
    c = cluster
    (task,) = [t for t in c.ctl._tasks if t.name == "acl-file-reload"]
    await task.stop()
    acl_dir = c.acl_file.parent / "acl"
    team = acl_dir / "team.yml"
    # A changed second file: taken once it stayed the same for two checks.
    write_rules(team, DIR_RULES.replace("DirTopic=PUB", "DirTopic=PUB\n      - AclTopic=PUB"))
    assert c.acl.reload_if_changed() is False
    assert (await send_as(c, DIR_USER, "AclTopic")).code == ResponseCode.NO_PERMISSION
    assert c.acl.reload_if_changed() is True
    assert (await send_as(c, DIR_USER, "AclTopic")).code == ResponseCode.SUCCESS
    # A new file in a subdirectory; a dot file (an editor's temp file) is never read.
    (acl_dir / "more").mkdir()
    write_rules(
        acl_dir / "more" / "new.yaml",
        f"accounts:\n  - {{accessKey: {NEW[0]}, secretKey: {NEW[1]}, defaultTopicPerm: PUB}}\n",
    )
    (acl_dir / ".hidden.yml").write_text("accounts: [\n")
    c.acl.reload_if_changed()
    assert c.acl.reload_if_changed() is True
    assert (await send_as(c, NEW, "AnyTopic")).code == ResponseCode.SUCCESS
    assert str(acl_dir / "more" / "new.yaml") in await versions(c)
    # An access key already defined in another file: that file's change is refused, the old rules stay.
    write_rules(team, DIR_RULES + f"  - {{accessKey: {NEW[0]}, secretKey: other-secret-x}}\n")
    assert c.acl.reload_if_changed() is False and c.acl.reload_if_changed() is False
    assert (await send_as(c, DIR_USER, "AclTopic")).code == ResponseCode.SUCCESS
    # A removed file's accounts are gone.
    (acl_dir / "more" / "new.yaml").unlink()
    assert c.acl.reload_if_changed() is False  # gone once: maybe being replaced
    assert (await send_as(c, NEW, "AnyTopic")).code == ResponseCode.SUCCESS
    assert c.acl.reload_if_changed() is True
    assert (await send_as(c, NEW, "AnyTopic")).code == ResponseCode.NO_PERMISSION
    assert str(acl_dir / "more" / "new.yaml") not in await versions(c)


async def test_the_broker_reloads_a_changed_directory_file_by_itself(cluster: AclCluster) -> None:
    import asyncio
    import time

    c = cluster
    team = c.acl_file.parent / "acl" / "team.yml"
    write_rules(team, DIR_RULES.replace("DirTopic=PUB", "DirTopic=PUB\n      - AclTopic=PUB"))
    deadline = time.monotonic() + 15
    while (await send_as(c, DIR_USER, "AclTopic")).code != ResponseCode.SUCCESS:
        assert time.monotonic() < deadline, "the broker did not reload a changed file of its acl/ directory"
        await asyncio.sleep(0.2)


async def test_deleting_the_last_admin_account_is_done_and_warned(cluster: AclCluster, caplog) -> None:
    c = cluster
    caplog.set_level(logging.INFO)
    r = await admin_call(c, create_request(RequestCode.DELETE_ACL_CONFIG, {"accessKey": ADMIN[0]}))
    assert r.code == ResponseCode.SUCCESS, r.remark  # as RocketMQ: the account may delete itself
    assert "no admin account is left in the ACL files" in caplog.text
    r = await admin_call(c, create_request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO))
    assert r.code == ResponseCode.NO_PERMISSION and "No acl config" in r.remark


async def test_with_acl_off_each_is_refused_saying_so(tmp_path: Path) -> None:
    from rmq.broker.config import BrokerConfig
    from rmq.broker.controller import BrokerController
    from rmq.remoting.client import RemotingClient

    cfg = BrokerConfig()
    cfg.update({"storePathRootDir": str(tmp_path / "store"), "listenPort": "0", "brokerIP1": "127.0.0.1"})
    ctl = BrokerController(cfg)
    await ctl.start("127.0.0.1")
    client = RemotingClient()
    try:
        for code, want in (
            (RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED),
            (RequestCode.DELETE_ACL_CONFIG, ResponseCode.DELETE_ACL_CONFIG_FAILED),
            (RequestCode.GET_BROKER_CLUSTER_ACL_INFO, ResponseCode.SYSTEM_ERROR),
            (
                RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
            ),
            (RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, ResponseCode.SYSTEM_ERROR),
        ):
            r = await client.invoke(cfg.broker_addr, create_request(code, {"accessKey": NEW[0]}), 5000)
            assert r.code == want and "aclEnable=false" in r.remark, (code, r.code, r.remark)
    finally:
        await client.close()
        await ctl.shutdown()
