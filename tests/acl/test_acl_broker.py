"""ACL 1.0 on a real broker and name server (in this process, over loopback, with a real plain_acl.yml).

Signed requests of a permitted account go through; a wrong secret, a tampered body, a signature replayed
on a changed request, no credentials, an unknown account, or a denied topic/group get NO_PERMISSION (16),
nothing is stored, and no remark carries a secret.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from rmq.client import ClientConfig, LitePullConsumer, Message, MQClientError, Producer
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand, create_request
from rmq.store import decode_offset_msg_id, decode_records

from tests.acl.aclenv import (
    ADMIN,
    APP,
    DENIED_GROUP,
    DENIED_TOPIC,
    GROUP,
    OTHER,
    SECRETS,
    TOPIC,
    AclCluster,
    send_request,
    signed,
    start_cluster,
    stop_cluster,
    topic_request,
)

NO_PERMISSION = ResponseCode.NO_PERMISSION


@pytest.fixture(params=[True, False], ids=["network-thread", "asyncio"])
async def cluster(request, tmp_path) -> AsyncIterator[AclCluster]:
    c = await start_cluster(tmp_path, network_thread=request.param)
    yield c
    await stop_cluster(c)


def no_secret(remark: str | None) -> None:
    assert remark
    for secret in SECRETS:
        assert secret not in remark


def client_config(c: AclCluster, creds: tuple[str, str] | None, instance: str) -> ClientConfig:
    ak, sk = creds if creds else (None, None)
    return ClientConfig(namesrv_addr=c.namesrv, instance_name=instance, access_key=ak, secret_key=sk)


def acl_counts(c: AclCluster) -> tuple[int, int]:
    """``(fastSendAclChecked, fastSendDeclinedAcl)``: signed sends the network thread checked and took, and
    the sends its check left to the Python validator; zeros on the asyncio server (no fast path)."""
    assert c.ctl.services is not None
    table = c.ctl.services.fast_send_stats()
    return int(table.get("fastSendAclChecked", 0)), int(table.get("fastSendDeclinedAcl", 0))


async def test_rmq_client_with_credentials_sends_and_consumes(cluster: AclCluster) -> None:
    c = cluster
    producer = Producer("AclProducer", client_config=client_config(c, APP, "acl-p"))
    await producer.start()
    try:
        for i in range(4):
            result = await producer.send(Message(TOPIC, f"m{i}".encode()))
            assert result.send_status.name == "SEND_OK"
    finally:
        await producer.shutdown()
    fast = c.ctl.services.fast_send if c.ctl.services else None
    if c.ctl.config.network_thread:
        # The first send vets the topic (Python); the others are checked and taken by the network thread.
        assert fast is not None
        assert acl_counts(c)[0] >= 1, c.ctl.services.fast_send_stats()
    else:
        assert fast is None

    consumer = LitePullConsumer(GROUP, client_config=client_config(c, APP, "acl-c"))
    consumer.subscribe(TOPIC, "*")
    await consumer.start()
    try:
        got: list[bytes] = []
        while len(got) < 4:
            got += [m.body for m in await consumer.poll(1000)]
    finally:
        await consumer.shutdown()
    assert sorted(got) == [b"m0", b"m1", b"m2", b"m3"]
    assert c.acl.denied == 0


@pytest.mark.parametrize(
    "creds, topic",
    [
        (None, TOPIC),  # no credentials
        ((APP[0], "not-the-secret"), TOPIC),  # wrong secret
        (("nobody", APP[1]), TOPIC),  # unknown account
        (APP, DENIED_TOPIC),  # topic denied
        (APP, "SomeOtherTopic"),  # default DENY
    ],
    ids=["no-credentials", "wrong-secret", "unknown-account", "denied-topic", "default-deny"],
)
async def test_rmq_client_refused_stores_nothing(cluster: AclCluster, creds, topic) -> None:
    c = cluster
    before = c.written()
    producer = Producer("AclProducer", client_config=client_config(c, creds, "acl-refused"))
    await producer.start()
    try:
        with pytest.raises(MQClientError) as err:
            await producer.send(Message(topic, b"never"))
    finally:
        await producer.shutdown()
    assert c.written() == before
    # Refused by the name server (no route for a bad signature) or by the broker (a denied topic).
    assert c.acl.denied + c.ns.acl.denied > 0
    no_secret(str(err.value))


async def test_raw_frames_refused(cluster: AclCluster) -> None:
    c = cluster
    ok = await c.call(signed(send_request(TOPIC, b"hello"), APP))
    assert ok.code == ResponseCode.SUCCESS, ok.remark
    # Vet the denied topic for the fast path (an admin's send), so its sends reach the network thread's check.
    ok = await c.call(signed(send_request(DENIED_TOPIC, b"by the admin"), ADMIN))
    assert ok.code == ResponseCode.SUCCESS, ok.remark
    before = c.written()
    declined_before = acl_counts(c)[1]

    # A tampered body: signed, then the body changed on the way.
    req = signed(send_request(TOPIC, b"original"), APP)
    req.body = b"tampered"
    r = await c.call(req)
    assert r.code == NO_PERMISSION and "signature" in r.remark.lower()
    no_secret(r.remark)

    # A signature replayed on a changed request: another queue, another topic, another body.
    original = signed(send_request(TOPIC, b"x", qid=0), APP)
    changes = (send_request(TOPIC, b"x", qid=1), send_request("PubOnly", b"x"), send_request(TOPIC, b"y"))
    for changed in changes:
        changed.ext_fields["AccessKey"] = APP[0]
        changed.ext_fields["Signature"] = original.ext_fields["Signature"]
        r = await c.call(changed)
        assert r.code == NO_PERMISSION, r.remark
        no_secret(r.remark)

    # No AccessKey at all, and a signature without one.
    r = await c.call(send_request(TOPIC))
    code = RequestCode.SEND_MESSAGE_V2
    assert (r.code, r.remark) == (NO_PERMISSION, f"No accessKey is configured (request code {code})")
    req = signed(send_request(TOPIC), APP)
    del req.ext_fields["AccessKey"]
    assert (await c.call(req)).code == NO_PERMISSION

    # A denied topic, a retry topic of a denied group, and pulls of a denied group or topic.
    for req, what in (
        (send_request(DENIED_TOPIC), f"topic:{DENIED_TOPIC}"),
        (send_request("%RETRY%" + DENIED_GROUP), f"group:{DENIED_GROUP}"),
        (pull_request(TOPIC, DENIED_GROUP), f"group:{DENIED_GROUP}"),
        (pull_request(DENIED_TOPIC, GROUP), f"topic:{DENIED_TOPIC}"),
        (pull_request("PubOnly", GROUP), "topic:PubOnly"),
    ):
        r = await c.call(signed(req, APP))
        assert r.code == NO_PERMISSION and what in r.remark, (r.code, r.remark)
        no_secret(r.remark)
    assert c.written() == before
    if c.ctl.config.network_thread:
        # the sends to the two vetted topics (tampered, 2 replays, unsigned, no AccessKey, the denied topic)
        # were each checked by the network thread and left to the validator
        assert acl_counts(c)[1] - declined_before == 6, c.ctl.services.fast_send_stats()


def pull_fields(topic: str, group: str) -> dict[str, str]:
    return {
        "consumerGroup": group,
        "topic": topic,
        "queueId": "0",
        "queueOffset": "0",
        "maxMsgNums": "32",
        "sysFlag": "0",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subVersion": "0",
    }


def pull_request(topic: str, group: str) -> RemotingCommand:
    return create_request(RequestCode.PULL_MESSAGE, pull_fields(topic, group))


async def test_admin_codes_need_an_admin_account(cluster: AclCluster) -> None:
    c = cluster
    for creds in (APP, OTHER):
        r = await c.call(signed(topic_request("MadeByApp"), creds))
        assert r.code == NO_PERMISSION and "admin" in r.remark, r.remark
    assert (await c.call(topic_request("MadeByNobody"))).code == NO_PERMISSION
    assert (await c.call(signed(topic_request("MadeByAdmin"), ADMIN))).code == ResponseCode.SUCCESS
    assert "MadeByApp" not in c.ctl.services.topics
    # GET_BROKER_CONFIG (any account) never shows the broker's own secret.
    r = await c.call(signed(create_request(RequestCode.GET_BROKER_CONFIG, {}), OTHER))
    assert r.code == ResponseCode.SUCCESS
    assert ADMIN[1] not in bytes(r.body).decode()


async def test_broker_registration_is_signed(cluster: AclCluster) -> None:
    """The broker registered with the ACL name server as its inner admin account: routes exist."""
    c = cluster
    route = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
    r = await c.call(signed(route, APP), c.namesrv)
    assert r.code == ResponseCode.SUCCESS, r.remark
    # Unsigned, the name server answers nothing but NO_PERMISSION.
    r = await c.call(create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), c.namesrv)
    assert r.code == NO_PERMISSION


async def test_view_message_by_id_needs_sub_on_the_messages_topic(cluster: AclCluster) -> None:
    """The topic of VIEW_MESSAGE_BY_ID is known once the message is read; RocketMQ never checks it."""
    c = cluster
    offsets = {}
    for topic in (TOPIC, DENIED_TOPIC):
        r = await c.call(signed(send_request(topic, b"secret-ish body"), ADMIN))
        assert r.code == ResponseCode.SUCCESS, r.remark
        offsets[topic] = decode_offset_msg_id(r.ext_fields["msgId"])[1]
    view = create_request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offsets[DENIED_TOPIC])})
    r = await c.call(signed(view, APP))
    assert r.code == NO_PERMISSION and f"topic:{DENIED_TOPIC}" in r.remark and not r.body, r.remark
    view = create_request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offsets[TOPIC])})
    r = await c.call(signed(view, APP))
    assert r.code == ResponseCode.SUCCESS and r.body, r.remark
    view = create_request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offsets[DENIED_TOPIC])})
    assert (await c.call(signed(view, ADMIN))).code == ResponseCode.SUCCESS


async def stored_offset(c: AclCluster, topic: str, body: bytes) -> int:
    r = await c.call(signed(send_request(topic, body), ADMIN))
    assert r.code == ResponseCode.SUCCESS, r.remark
    return decode_offset_msg_id(r.ext_fields["msgId"])[1]


def send_back_request(offset: int, group: str = GROUP, delay_level: int = 1) -> RemotingCommand:
    f = {"offset": str(offset), "group": group, "delayLevel": str(delay_level), "maxReconsumeTimes": "16"}
    return create_request(RequestCode.CONSUMER_SEND_MSG_BACK, f)


async def pulled(c: AclCluster, topic: str, group: str) -> list[tuple[Any, ...]]:
    f = pull_fields(topic, group)
    f.update({"sysFlag": "4", "subscription": "*", "expressionType": "TAG"})  # with its subscription
    r = await c.call(signed(create_request(RequestCode.PULL_MESSAGE, f), APP))
    if r.code != ResponseCode.SUCCESS or not r.body:
        return []
    return decode_records(bytes(r.body))


async def test_send_back_needs_sub_on_the_records_topic(cluster: AclCluster) -> None:
    """The send-back read bypass: a record of a denied topic, sent back to the account's own group, would
    land in ``%RETRY%<group>``, which the account may pull. Refused, naming the topic; nothing re-put."""
    c = cluster
    secret = await stored_offset(c, DENIED_TOPIC, b"the secret body")
    before = c.written()
    r = await c.call(signed(send_back_request(secret), APP))
    assert r.code == NO_PERMISSION and f"topic:{DENIED_TOPIC}" in r.remark, (r.code, r.remark)
    no_secret(r.remark)
    assert c.written() == before, "nothing is re-put"
    assert c.acl.denied >= 1
    # A topic the account does not name at all (defaultTopicPerm DENY) is refused the same way.
    other = await stored_offset(c, "PubOnly", b"pub only body")
    before = c.written()
    r = await c.call(signed(send_back_request(other), APP))
    assert r.code == NO_PERMISSION and "topic:PubOnly" in r.remark, (r.code, r.remark)
    assert c.written() == before
    # Its own topic's record goes back as before, and its group reads it from the retry topic.
    mine = await stored_offset(c, TOPIC, b"my own body")
    r = await c.call(signed(send_back_request(mine), APP))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert c.written() > before
    retry = "%RETRY%" + GROUP
    got: list[tuple[Any, ...]] = []
    for _ in range(100):  # delay level 1: a second in the schedule topic
        got = await pulled(c, retry, GROUP)
        if got:
            break
        await asyncio.sleep(0.1)
    assert [rec[12] for rec in got] == [b"my own body"], got
    assert got[0][0] == retry
    # A record of the group's own retry topic (a message failed again) goes back too: the group is its SUB.
    r = await c.call(signed(send_back_request(got[0][3]), APP))
    assert r.code == ResponseCode.SUCCESS, r.remark
    # The admin account may send back any record (it reads every topic).
    assert (await c.call(signed(send_back_request(secret), ADMIN))).code == ResponseCode.SUCCESS


async def test_end_transaction_needs_pub_on_the_half_messages_topic(cluster: AclCluster) -> None:
    """END_TRANSACTION names a half message by its offset; a commit writes it to its real topic. An
    account may decide only transactions of topics it may send to (RocketMQ does not check it)."""
    c = cluster

    async def half(topic: str, body: bytes) -> RemotingCommand:
        req = send_request(topic, body, group="TxPG")
        req.ext_fields["f"] = "4"  # TRANSACTION_PREPARED_TYPE
        req.ext_fields["i"] = "TRAN_MSG\x01true\x02PGROUP\x01TxPG\x02UNIQ_KEY\x01" + body.decode()
        r = await c.call(signed(req, ADMIN))
        assert r.code == ResponseCode.SUCCESS, r.remark
        return r

    def end(r: RemotingCommand) -> RemotingCommand:
        f = {
            "producerGroup": "TxPG",
            "tranStateTableOffset": r.ext_fields["queueOffset"],
            "commitLogOffset": str(decode_offset_msg_id(r.ext_fields["msgId"])[1]),
            "commitOrRollback": "8",  # COMMIT
            "fromTransactionCheck": "false",
            "msgId": r.ext_fields["msgId"],
        }
        return create_request(RequestCode.END_TRANSACTION, f)

    denied = await half(DENIED_TOPIC, b"denied-half")
    before = c.written()
    r = await c.call(signed(end(denied), APP))
    assert r.code == NO_PERMISSION and f"topic:{DENIED_TOPIC}" in r.remark, (r.code, r.remark)
    no_secret(r.remark)
    assert c.written() == before, "nothing committed, no op record"
    mine = await half(TOPIC, b"my-half")
    r = await c.call(signed(end(mine), APP))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert c.written() > before
    r = await c.call(signed(end(denied), ADMIN))
    assert r.code == ResponseCode.SUCCESS, r.remark
