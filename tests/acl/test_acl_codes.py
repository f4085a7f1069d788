"""Every request code the broker and the name server register, against the ACL: which permission each needs,
allowed and denied.

The expectations below are written out here, independently of :mod:`rmq.acl.validator`'s own table; a code
the servers register that is missing here fails the test, so a new processor cannot slip in unclassified.
Each code is sent unsigned over the wire (NO_PERMISSION, the processor never runs), and checked signed by
the real validator of the running broker (or name server) with the accounts of the real rules file.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
import pytest
from rmq.acl import AccessValidator, parse_rules
from rmq.common.codes import (
    ACK_MESSAGE,
    BATCH_ACK_MESSAGE,
    CHANGE_MESSAGE_INVISIBLETIME,
    POP_MESSAGE,
    ResponseCode,
)
from rmq.common.codes import RequestCode as RC
from rmq.remoting.command import RemotingCommand, create_request

from tests.acl.aclenv import (
    ADMIN,
    APP,
    DENIED_GROUP,
    DENIED_TOPIC,
    GROUP,
    OTHER,
    TOPIC,
    AclCluster,
    signed,
    start_cluster,
    stop_cluster,
)

PEER = "127.0.0.1:40000"
ADMIN_ONLY = "admin"
ANY_ACCOUNT = "any account"

# code -> what it needs besides a valid signature: ADMIN_ONLY, ANY_ACCOUNT, or {"topic"|"group": "PUB"|"SUB"}
BROKER: dict[int, object] = {
    RC.SEND_MESSAGE: {"topic": "PUB"},
    RC.SEND_MESSAGE_V2: {"topic": "PUB"},
    RC.SEND_BATCH_MESSAGE: {"topic": "PUB"},
    RC.PULL_MESSAGE: {"topic": "SUB", "group": "SUB"},
    RC.LITE_PULL_MESSAGE: {"topic": "SUB", "group": "SUB"},
    RC.QUERY_MESSAGE: {"topic": "SUB"},
    RC.QUERY_CONSUMER_OFFSET: {"topic": "SUB", "group": "SUB"},
    RC.UPDATE_CONSUMER_OFFSET: {"topic": "SUB", "group": "SUB"},
    RC.HEART_BEAT: {"topic": "SUB", "group": "SUB"},
    RC.UNREGISTER_CLIENT: {"group": "SUB"},
    RC.CONSUMER_SEND_MSG_BACK: {"group": "SUB"},
    RC.GET_CONSUMER_LIST_BY_GROUP: {"group": "SUB"},
    RC.UPDATE_AND_CREATE_TOPIC: ADMIN_ONLY,
    RC.UPDATE_BROKER_CONFIG: ADMIN_ONLY,
    RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: ADMIN_ONLY,
    RC.DELETE_SUBSCRIPTIONGROUP: ADMIN_ONLY,
    RC.DELETE_TOPIC_IN_BROKER: ADMIN_ONLY,
    RC.CLEAN_EXPIRED_CONSUMEQUEUE: ADMIN_ONLY,
    RC.CLEAN_UNUSED_TOPIC: ADMIN_ONLY,
    RC.DELETE_EXPIRED_COMMITLOG: ADMIN_ONLY,
    RC.GET_ALL_TOPIC_CONFIG: ANY_ACCOUNT,
    RC.GET_BROKER_CONFIG: ANY_ACCOUNT,
    RC.GET_BROKER_RUNTIME_INFO: ANY_ACCOUNT,
    RC.SEARCH_OFFSET_BY_TIMESTAMP: ANY_ACCOUNT,
    RC.GET_MAX_OFFSET: ANY_ACCOUNT,
    RC.GET_MIN_OFFSET: ANY_ACCOUNT,
    RC.GET_EARLIEST_MSG_STORETIME: ANY_ACCOUNT,
    RC.VIEW_MESSAGE_BY_ID: ANY_ACCOUNT,
    RC.END_TRANSACTION: ANY_ACCOUNT,
    RC.LOCK_BATCH_MQ: {"topic": "SUB", "group": "SUB"},
    RC.UNLOCK_BATCH_MQ: {"topic": "SUB", "group": "SUB"},
    RC.GET_ALL_CONSUMER_OFFSET: ANY_ACCOUNT,
    RC.GET_ALL_DELAY_OFFSET: ANY_ACCOUNT,  # a slave's copy, as GET_ALL_CONSUMER_OFFSET
    RC.CHECK_CLIENT_CONFIG: ANY_ACCOUNT,
    RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: ANY_ACCOUNT,
    RC.GET_TOPIC_STATS_INFO: ANY_ACCOUNT,
    RC.GET_CONSUMER_CONNECTION_LIST: ANY_ACCOUNT,
    RC.GET_PRODUCER_CONNECTION_LIST: ANY_ACCOUNT,
    RC.GET_CONSUME_STATS: ANY_ACCOUNT,
    RC.QUERY_TOPIC_CONSUME_BY_WHO: ANY_ACCOUNT,
    RC.SEND_REPLY_MESSAGE: ANY_ACCOUNT,
    RC.SEND_REPLY_MESSAGE_V2: ANY_ACCOUNT,
    # mqadmin's: offset resets and clones change a group's offsets for everyone; the rest read.
    RC.INVOKE_BROKER_TO_RESET_OFFSET: ADMIN_ONLY,
    RC.CLONE_GROUP_OFFSET: ADMIN_ONLY,
    RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: ANY_ACCOUNT,
    RC.GET_CONSUMER_RUNNING_INFO: ANY_ACCOUNT,
    RC.VIEW_BROKER_STATS_DATA: ANY_ACCOUNT,
    # the ACL files' accounts and white lists (RocketMQ lets every account read and change them)
    RC.UPDATE_AND_CREATE_ACL_CONFIG: ADMIN_ONLY,
    RC.DELETE_ACL_CONFIG: ADMIN_ONLY,
    RC.GET_BROKER_CLUSTER_ACL_INFO: ADMIN_ONLY,
    RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: ADMIN_ONLY,
    RC.GET_BROKER_CLUSTER_ACL_CONFIG: ADMIN_ONLY,
    RC.GET_BROKER_CONSUME_STATS: ANY_ACCOUNT,
    RC.GET_ALL_PRODUCER_INFO: ANY_ACCOUNT,
    RC.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: ANY_ACCOUNT,
    RC.QUERY_CONSUME_QUEUE: ANY_ACCOUNT,
    RC.CONSUME_MESSAGE_DIRECTLY: ANY_ACCOUNT,
    # RocketMQ 5.x's POP (their headers are @RocketMQAction(action = SUB) on topic and group)
    POP_MESSAGE: {"topic": "SUB", "group": "SUB"},
    ACK_MESSAGE: {"topic": "SUB", "group": "SUB"},
    CHANGE_MESSAGE_INVISIBLETIME: {"topic": "SUB", "group": "SUB"},
    BATCH_ACK_MESSAGE: {"topic": "SUB", "group": "SUB"},
}

NAMESRV: dict[int, object] = {
    RC.PUT_KV_CONFIG: ADMIN_ONLY,
    RC.DELETE_KV_CONFIG: ADMIN_ONLY,
    RC.REGISTER_BROKER: ADMIN_ONLY,
    RC.UNREGISTER_BROKER: ADMIN_ONLY,
    RC.WIPE_WRITE_PERM_OF_BROKER: ADMIN_ONLY,
    RC.ADD_WRITE_PERM_OF_BROKER: ADMIN_ONLY,
    RC.DELETE_TOPIC_IN_NAMESRV: ADMIN_ONLY,
    RC.GET_KV_CONFIG: ANY_ACCOUNT,
    RC.GET_ROUTEINFO_BY_TOPIC: ANY_ACCOUNT,
    RC.GET_BROKER_CLUSTER_INFO: ANY_ACCOUNT,
    RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: ANY_ACCOUNT,
    RC.GET_KVLIST_BY_NAMESPACE: ANY_ACCOUNT,
    RC.GET_TOPICS_BY_CLUSTER: ANY_ACCOUNT,
    RC.GET_SYSTEM_TOPIC_LIST_FROM_NS: ANY_ACCOUNT,
    RC.GET_UNIT_TOPIC_LIST: ANY_ACCOUNT,
    RC.GET_HAS_UNIT_SUB_TOPIC_LIST: ANY_ACCOUNT,
    RC.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: ANY_ACCOUNT,
    RC.QUERY_DATA_VERSION: ANY_ACCOUNT,
    RC.UPDATE_NAMESRV_CONFIG: ADMIN_ONLY,
    RC.GET_NAMESRV_CONFIG: ANY_ACCOUNT,
}


def code_name(code: int) -> str:
    try:
        return RC(code).name
    except ValueError:  # the 5.x POP codes are plain ints
        return str(code)


def build(code: int, topic: str, group: str) -> RemotingCommand:
    """A request of ``code`` naming ``topic`` and ``group`` where the code names them."""
    body = None
    if code in (RC.SEND_MESSAGE_V2, RC.SEND_BATCH_MESSAGE):
        fields = {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0"}
        body = b"body"
    elif code == RC.HEART_BEAT:
        fields = {}
        sub = {"topic": topic, "subString": "*", "subVersion": 0}
        data = {"clientID": "c1", "consumerDataSet": [{"groupName": group, "subscriptionDataSet": [sub]}]}
        body = orjson.dumps(data)
    elif code == BATCH_ACK_MESSAGE:
        fields = {}
        ack = {"c": group, "t": topic, "r": "0", "so": 0, "q": 0, "rq": 0, "pt": 1, "it": 1, "b": "AQ=="}
        body = orjson.dumps({"brokerName": "broker-a", "acks": [ack]})
    elif code in (RC.LOCK_BATCH_MQ, RC.UNLOCK_BATCH_MQ):
        fields = {}
        mq = {"topic": topic, "brokerName": "broker-a", "queueId": 0}
        body = orjson.dumps({"consumerGroup": group, "clientId": "c1", "mqSet": [mq]})
    else:
        # every long-named field a header may carry; each code reads the ones it knows
        fields = {"topic": topic, "producerGroup": group, "consumerGroup": group, "group": group}
        fields.update({"queueId": "0", "queueOffset": "0", "maxMsgNums": "1", "sysFlag": "0"})
        body = b"body" if code in (RC.SEND_MESSAGE,) else None
    return create_request(code, fields, body)


@pytest.fixture
async def cluster(tmp_path) -> AsyncIterator[AclCluster]:
    c = await start_cluster(tmp_path)
    yield c
    await stop_cluster(c)


def check(v: AccessValidator, request: RemotingCommand, creds: tuple[str, str]) -> str | None:
    return v.check(PEER, signed(request, creds))


def assert_needs(v: AccessValidator, code: int, need: object) -> None:
    name = code_name(code)
    if need == ADMIN_ONLY:
        assert check(v, build(code, TOPIC, GROUP), ADMIN) is None, name
        for creds in (APP, OTHER):
            reason = check(v, build(code, TOPIC, GROUP), creds)
            assert reason is not None and "admin" in reason, (name, reason)
        return
    if need == ANY_ACCOUNT:
        for creds in (ADMIN, APP, OTHER):
            assert check(v, build(code, TOPIC, GROUP), creds) is None, name
        req = signed(build(code, TOPIC, GROUP), APP)
        req.ext_fields["Signature"] = "AAAA" + req.ext_fields["Signature"][4:]
        assert "signature" in (v.check(PEER, req) or "").lower(), name
        return
    assert isinstance(need, dict)
    # APP: TOPIC=PUB|SUB, PubOnly=PUB, SubOnly=SUB, DeniedTopic=DENY; GROUP=SUB, DeniedGroup=DENY; else DENY.
    assert check(v, build(code, TOPIC, GROUP), APP) is None, name
    if "topic" in need:
        reason = check(v, build(code, DENIED_TOPIC, GROUP), APP)
        assert reason is not None and f"topic:{DENIED_TOPIC}" in reason, (name, reason)
        wrong = "SubOnly" if need["topic"] == "PUB" else "PubOnly"
        reason = check(v, build(code, wrong, GROUP), APP)
        assert reason is not None and f"needs {need['topic']}" in reason, (name, reason)
        right = "PubOnly" if need["topic"] == "PUB" else "SubOnly"
        assert check(v, build(code, right, GROUP), APP) is None, name
    else:
        assert check(v, build(code, DENIED_TOPIC, GROUP), APP) is None, name  # the topic is not checked
    if "group" in need:
        reason = check(v, build(code, TOPIC, DENIED_GROUP), APP)
        assert reason is not None and f"group:{DENIED_GROUP}" in reason, (name, reason)
        reason = check(v, build(code, TOPIC, "UnlistedGroup"), APP)  # defaultGroupPerm: DENY
        assert reason is not None and "group:UnlistedGroup" in reason, (name, reason)
    else:
        assert check(v, build(code, TOPIC, DENIED_GROUP), APP) is None, name
    # An admin account without resource lists may do it all; OTHER has SUB defaults only.
    assert check(v, build(code, DENIED_TOPIC, DENIED_GROUP), ADMIN) is None, name
    other = check(v, build(code, TOPIC, GROUP), OTHER)
    assert (other is None) == (need.get("topic", "SUB") == "SUB"), (name, other)


async def test_every_broker_code_is_classified_and_checked(cluster: AclCluster) -> None:
    c = cluster
    registered = c.ctl.remoting.dispatcher.codes
    assert registered == set(BROKER), (
        f"unclassified: {registered - set(BROKER)}, gone: {set(BROKER) - registered}"
    )
    for code, need in BROKER.items():
        assert_needs(c.acl, code, need)
        denied = c.acl.denied
        r = await c.call(build(code, TOPIC, GROUP))  # unsigned, over the wire
        assert r.code == ResponseCode.NO_PERMISSION, (code_name(code), r.code, r.remark)
        assert c.acl.denied == denied + 1


async def test_every_namesrv_code_is_classified_and_checked(cluster: AclCluster) -> None:
    c = cluster
    assert c.ns.acl is not None
    registered = c.ns.remoting.dispatcher.codes
    assert registered == set(NAMESRV), (
        f"unclassified: {registered - set(NAMESRV)}, gone: {set(NAMESRV) - registered}"
    )
    for code, need in NAMESRV.items():
        assert_needs(c.ns.acl, code, need)
        r = await c.call(build(code, TOPIC, GROUP), c.namesrv)
        assert r.code == ResponseCode.NO_PERMISSION, (code_name(code), r.code, r.remark)


async def test_admin_codes_need_admin_even_from_a_white_listed_address(cluster: AclCluster) -> None:
    c = cluster
    rules = c.acl_file.read_text().replace("  - 10.10.103.*", "  - 127.0.0.1")
    c.acl.rules = parse_rules(rules)
    r = await c.call(build(RC.GET_BROKER_RUNTIME_INFO, TOPIC, GROUP))  # unsigned, white-listed: served
    assert r.code == ResponseCode.SUCCESS, r.remark
    for code in (RC.UPDATE_AND_CREATE_TOPIC, RC.UPDATE_BROKER_CONFIG, RC.DELETE_TOPIC_IN_BROKER):
        r = await c.call(build(code, TOPIC, GROUP))
        assert r.code == ResponseCode.NO_PERMISSION, (code_name(code), r.remark)
        r = await c.call(signed(build(code, TOPIC, GROUP), APP))
        assert r.code == ResponseCode.NO_PERMISSION and "admin" in r.remark, (code_name(code), r.remark)
