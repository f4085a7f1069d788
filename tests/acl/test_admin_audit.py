"""The admin audit log (``rmq.audit``): every admin change a broker or a name server made, one line each, with
the request, its arguments (secrets masked), the caller's address and access key, and the result.

A real broker and name server with ACL on (so the access key is known), each kind of change made with a
signed request; and one without ACL (access key ``-``)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import orjson
import pytest
from rmq.acl.audit import AUDITED_CODES, MASK, describe_arguments
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand, create_request

from tests.acl.aclenv import (
    ADMIN,
    APP,
    GROUP,
    TOPIC,
    AclCluster,
    signed,
    start_cluster,
    stop_cluster,
    topic_request,
)

RC = RequestCode


@pytest.fixture
async def cluster(tmp_path) -> AsyncIterator[AclCluster]:
    c = await start_cluster(tmp_path, network_thread=False)
    yield c
    await stop_cluster(c)


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "rmq.audit"]


def group_request(group: str) -> RemotingCommand:
    body = {"groupName": group, "consumeEnable": True, "retryQueueNums": 1, "retryMaxTimes": 16}
    return create_request(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, orjson.dumps(body))


async def change(
    c: AclCluster, caplog: pytest.LogCaptureFixture, request: RemotingCommand, *, namesrv: bool = False
) -> str:
    """Make the change as the admin account; the one audit line it logged."""
    caplog.clear()
    r = await c.call(signed(request, ADMIN), c.namesrv if namesrv else None)
    assert r.code == ResponseCode.SUCCESS, (request.code, r.remark)
    lines = audit_lines(caplog)
    assert len(lines) == 1, [x.getMessage() for x in lines]
    assert lines[0].levelno == logging.INFO
    text = lines[0].getMessage()
    assert f"({request.code}) from 127.0.0.1:" in text and f"accessKey={ADMIN[0]}" in text, text
    assert text.endswith("-> SUCCESS"), text
    assert ADMIN[1] not in text and "Signature=" not in text
    return text


async def test_every_kind_of_admin_change_is_logged(cluster: AclCluster, caplog) -> None:
    c = cluster
    caplog.set_level(logging.INFO, logger="rmq.audit")
    broker_name = c.ctl.config.broker_name

    text = await change(c, caplog, topic_request("AuditTopic", 3))
    assert "UPDATE_AND_CREATE_TOPIC (17)" in text and "topic=AuditTopic" in text and "readQueueNums=3" in text
    text = await change(c, caplog, topic_request("AuditTopic", 2))  # an update (e.g. updateTopicPerm)
    assert "writeQueueNums=2" in text
    text = await change(c, caplog, create_request(RC.DELETE_TOPIC_IN_BROKER, {"topic": "AuditTopic"}))
    assert "DELETE_TOPIC_IN_BROKER" in text and "topic=AuditTopic" in text

    text = await change(c, caplog, group_request("AuditGroup"))
    assert "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200)" in text and '"groupName":"AuditGroup"' in text
    text = await change(c, caplog, create_request(RC.DELETE_SUBSCRIPTIONGROUP, {"groupName": "AuditGroup"}))
    assert "DELETE_SUBSCRIPTIONGROUP" in text and "groupName=AuditGroup" in text

    update = create_request(RC.UPDATE_BROKER_CONFIG, {}, b"defaultQueryMaxNum=64\n")
    text = await change(c, caplog, update)
    assert "UPDATE_BROKER_CONFIG (25)" in text and "body: defaultQueryMaxNum=64" in text

    for qid in range(4):  # a committed offset per queue (a consumer's; not an admin change)
        commit = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(qid), "commitOffset": "0"}
        r = await c.call(signed(create_request(RC.UPDATE_CONSUMER_OFFSET, commit), ADMIN))
        assert r.code == ResponseCode.SUCCESS, r.remark
    # The group online (a heartbeat on this connection), as an online reset needs.
    sub = {
        "topic": TOPIC,
        "subString": "*",
        "expressionType": "TAG",
        "tagsSet": [],
        "codeSet": [],
        "subVersion": 1,
    }
    consumer = {"groupName": GROUP, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING"}
    consumer.update(
        {"consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": [sub], "unitMode": False}
    )
    hb = {"clientID": "127.0.0.1@audit", "consumerDataSet": [consumer], "producerDataSet": []}
    r = await c.call(signed(create_request(RC.HEART_BEAT, {}, orjson.dumps(hb)), ADMIN))
    assert r.code == ResponseCode.SUCCESS, r.remark
    caplog.clear()
    reset = {"topic": TOPIC, "group": GROUP, "timestamp": "0", "isForce": "true"}
    text = await change(c, caplog, create_request(RC.INVOKE_BROKER_TO_RESET_OFFSET, reset))
    assert (
        "INVOKE_BROKER_TO_RESET_OFFSET (222)" in text and f"group={GROUP}" in text and "timestamp=0" in text
    )
    clone = {"srcGroup": GROUP, "destGroup": "AuditClone", "topic": TOPIC, "offline": "true"}
    text = await change(c, caplog, create_request(RC.CLONE_GROUP_OFFSET, clone))
    assert "CLONE_GROUP_OFFSET (314)" in text and "destGroup=AuditClone" in text

    # The name server's changes.
    kv = {"namespace": "ORDER_TOPIC_CONFIG", "key": "AuditOrdered", "value": f"{broker_name}:4"}
    text = await change(c, caplog, create_request(RC.PUT_KV_CONFIG, kv), namesrv=True)
    assert "PUT_KV_CONFIG (100)" in text and "key=AuditOrdered" in text
    kv.pop("value")
    text = await change(c, caplog, create_request(RC.DELETE_KV_CONFIG, kv), namesrv=True)
    assert "DELETE_KV_CONFIG (102)" in text
    wipe = create_request(RC.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": broker_name})
    text = await change(c, caplog, wipe, namesrv=True)
    assert "WIPE_WRITE_PERM_OF_BROKER (205)" in text and f"brokerName={broker_name}" in text
    add = create_request(RC.ADD_WRITE_PERM_OF_BROKER, {"brokerName": broker_name})
    assert "ADD_WRITE_PERM_OF_BROKER" in await change(c, caplog, add, namesrv=True)


async def test_namesrv_config_update_is_logged(cluster: AclCluster, caplog) -> None:
    """UPDATE_NAMESRV_CONFIG (mqadmin updateNamesrvConfig): the properties changed, the admin's key; a
    refused one (a path) at WARN with its code."""
    caplog.set_level(logging.INFO, logger="rmq.audit")
    update = create_request(RC.UPDATE_NAMESRV_CONFIG, {}, b"orderMessageEnable=true\n")
    text = await change(cluster, caplog, update, namesrv=True)
    assert "UPDATE_NAMESRV_CONFIG (318)" in text and "body: orderMessageEnable=true" in text
    caplog.clear()
    path = create_request(RC.UPDATE_NAMESRV_CONFIG, {}, b"kvConfigPath=/tmp/elsewhere\n")
    r = await cluster.call(signed(path, ADMIN), cluster.namesrv)
    assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "Can not update config path")
    (line,) = audit_lines(caplog)
    assert line.levelno == logging.WARNING and "kvConfigPath=/tmp/elsewhere" in line.getMessage()


async def test_failed_and_refused_changes(cluster: AclCluster, caplog) -> None:
    c = cluster
    caplog.set_level(logging.INFO, logger="rmq.audit")
    # A change the broker could not make: WARNING, with the answer's code and remark.
    bad = create_request(RC.UPDATE_BROKER_CONFIG, {}, b"brokerPermission=banana\n")
    r = await c.call(signed(bad, ADMIN))
    assert r.code != ResponseCode.SUCCESS
    [line] = audit_lines(caplog)
    assert line.levelno == logging.WARNING, line.getMessage()
    assert line.getMessage().endswith(f"({r.code}): {r.remark}"), (line.getMessage(), r.remark)
    # A refused request never reached a processor: the ACL validator logs it, the audit does not.
    caplog.clear()
    r = await c.call(signed(topic_request("NotByApp"), APP))
    assert r.code == ResponseCode.NO_PERMISSION
    assert audit_lines(caplog) == []
    # Reads and the brokers' periodic registrations are not changes.
    await c.call(signed(create_request(RC.GET_BROKER_CONFIG, {}), ADMIN))
    assert audit_lines(caplog) == []
    assert int(RC.REGISTER_BROKER) not in AUDITED_CODES
    assert int(RC.GET_BROKER_CLUSTER_ACL_CONFIG) not in AUDITED_CODES
    assert int(RC.UPDATE_AND_CREATE_ACL_CONFIG) in AUDITED_CODES


async def test_without_acl_the_access_key_is_a_dash(tmp_path, caplog) -> None:
    from rmq.broker.config import BrokerConfig
    from rmq.broker.controller import BrokerController
    from rmq.remoting.client import RemotingClient

    cfg = BrokerConfig()
    cfg.update({"storePathRootDir": str(tmp_path / "store"), "listenPort": "0", "brokerIP1": "127.0.0.1"})
    ctl = BrokerController(cfg)
    await ctl.start("127.0.0.1")
    client = RemotingClient()
    caplog.set_level(logging.INFO, logger="rmq.audit")
    try:
        r = await client.invoke(cfg.broker_addr, topic_request("PlainAudit"), 5000)
        assert r.code == ResponseCode.SUCCESS, r.remark
        [line] = audit_lines(caplog)
        assert "accessKey=-:" in line.getMessage() and "topic=PlainAudit" in line.getMessage()
    finally:
        await client.close()
        await ctl.shutdown()


def test_secrets_are_masked() -> None:
    fields = {"accessKey": "rocketmq2", "secretKey": "12345678", "AccessKey": "rmqadmin", "Signature": "sig"}
    text = describe_arguments(create_request(RC.UPDATE_AND_CREATE_ACL_CONFIG, fields))
    assert "accessKey=rocketmq2" in text and f"secretKey={MASK}" in text
    assert "12345678" not in text and "sig" not in text and "rmqadmin" not in text
    body = b'innerClientAuthenticationCredentials={"secretKey": "s3cr3t"}\nbrokerPermission=6\n'
    text = describe_arguments(create_request(RC.UPDATE_BROKER_CONFIG, {}, body))
    assert f"innerClientAuthenticationCredentials={MASK}" in text and "brokerPermission=6" in text
    assert "s3cr3t" not in text
    text = describe_arguments(
        create_request(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, b'{"password": "x"}')
    )
    assert "x" not in text.replace("JSON", "")
    text = describe_arguments(create_request(RC.REGISTER_MESSAGE_FILTER_CLASS, {}, b"\x00" * 40))
    assert text == "body: 40 bytes"
