"""ACL on POP: POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME and BATCH_ACK_MESSAGE need SUB on the
topic and on the group (a POP retry topic ``%RETRY%<group>_<topic>`` counts as its topic), as 5.x's
``@RocketMQAction(action = SUB)`` headers ask; refused requests get NO_PERMISSION and change nothing."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import orjson
import pytest
from rmq.broker.pop.wire import ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, POP_MESSAGE
from rmq.common.codes import ResponseCode
from rmq.remoting.command import RemotingCommand, create_request

from tests.acl.aclenv import (
    ADMIN,
    APP,
    DENIED_GROUP,
    DENIED_TOPIC,
    GROUP,
    TOPIC,
    AclCluster,
    send_request,
    signed,
    start_cluster,
    stop_cluster,
)

NO_PERMISSION = ResponseCode.NO_PERMISSION


@pytest.fixture
async def cluster(tmp_path) -> AsyncIterator[AclCluster]:
    c = await start_cluster(tmp_path)
    yield c
    await stop_cluster(c)


def pop_request(topic: str, group: str) -> RemotingCommand:
    f = {"consumerGroup": group, "topic": topic, "queueId": "-1", "maxMsgNums": "32"}
    f.update({"invisibleTime": "60000", "pollTime": "0", "bornTime": str(int(time.time() * 1000))})
    f.update({"initMode": "0", "expType": "TAG", "exp": "*"})
    return create_request(POP_MESSAGE, f)


def handle_request(code: int, topic: str, group: str) -> RemotingCommand:
    f = {"consumerGroup": group, "topic": topic, "queueId": "0", "offset": "0"}
    f.update({"extraInfo": f"0 {int(time.time() * 1000)} 60000 0 0 broker-a 0 0", "invisibleTime": "1000"})
    return create_request(code, f)


async def test_pop_needs_sub_on_topic_and_group(cluster: AclCluster) -> None:
    c = cluster
    for t in (TOPIC, DENIED_TOPIC):
        assert (await c.call(signed(send_request(t, b"x"), ADMIN))).code == ResponseCode.SUCCESS
    for topic, group in ((DENIED_TOPIC, GROUP), (TOPIC, DENIED_GROUP), ("PubOnly", GROUP)):
        before = c.written()
        r = await c.call(signed(pop_request(topic, group), APP))
        assert r.code == NO_PERMISSION, (topic, group, r.code, r.remark)
        assert c.written() == before, "a refused pop writes no checkpoint"
        for code in (ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME):
            r = await c.call(signed(handle_request(code, topic, group), APP))
            assert r.code == NO_PERMISSION, (code, topic, group, r.code)
    # unsigned: refused
    assert (await c.call(pop_request(TOPIC, GROUP))).code == NO_PERMISSION
    # the POP retry topic of a denied topic is that topic
    r = await c.call(signed(handle_request(ACK_MESSAGE, f"%RETRY%{GROUP}_{DENIED_TOPIC}", GROUP), APP))
    assert r.code == NO_PERMISSION
    ack = {"c": GROUP, "t": DENIED_TOPIC, "r": "0", "so": 0, "q": 0, "rq": 0, "pt": 1, "it": 1, "b": "AQ=="}
    body = orjson.dumps({"brokerName": "broker-a", "acks": [ack]})
    r = await c.call(signed(create_request(BATCH_ACK_MESSAGE, {}, body), APP))
    assert r.code == NO_PERMISSION
    # what the account may read it pops, acks (here and by batch) and changes
    deadline = time.monotonic() + 30
    while True:
        r = await c.call(signed(pop_request(TOPIC, GROUP), APP))
        if r.code == ResponseCode.SUCCESS or time.monotonic() > deadline:
            break
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    r = await c.call(signed(handle_request(CHANGE_MESSAGE_INVISIBLETIME, TOPIC, GROUP), APP))
    assert r.code == ResponseCode.SUCCESS, r.remark
    r = await c.call(signed(handle_request(ACK_MESSAGE, TOPIC, GROUP), APP))
    assert r.code == ResponseCode.SUCCESS, r.remark
    ack.update({"t": TOPIC})
    body = orjson.dumps({"brokerName": "broker-a", "acks": [ack]})
    r = await c.call(signed(create_request(BATCH_ACK_MESSAGE, {}, body), APP))
    assert r.code == ResponseCode.SUCCESS, r.remark
