"""ACL on the network thread's send fast path: a signed send of an account with PUB on its topic is checked
in Rust (HMAC-SHA1 against the rules the Python validator pushes) and stays on the fast path; whatever the
Rust check cannot vouch for goes to the Python validator, which answers it exactly as it answers any other
send (NO_PERMISSION with its remark, nothing stored); a reload of the rules file reaches the Rust side.

Each test runs a real name server and broker with ACL on over loopback; the fast path's counters
(``fastSendAclChecked``, ``fastSendDeclinedAcl``, ...) show which path answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from rmq.acl.validator import AccountChange
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand, create_request

from tests.acl.aclenv import (
    ADMIN,
    APP,
    DENIED_TOPIC,
    RULES,
    TOPIC,
    AclCluster,
    send_request,
    signed,
    start_cluster,
    stop_cluster,
    topic_request,
    write_rules,
)

NO_PERMISSION = ResponseCode.NO_PERMISSION
PEER = "127.0.0.1:40001"


@pytest.fixture
async def cluster(tmp_path) -> AsyncIterator[AclCluster]:
    c = await start_cluster(tmp_path, network_thread=True)
    yield c
    await stop_cluster(c)


def stats(c: AclCluster) -> dict[str, int]:
    assert c.ctl.services is not None
    return {k: int(v) for k, v in c.ctl.services.fast_send_stats().items()}


async def vet(c: AclCluster, topic: str) -> None:
    """A first send the Python path answers (it vets the topic for the fast path); signed by the admin."""
    r = await c.call(signed(send_request(topic, b"first"), ADMIN))
    assert r.code == ResponseCode.SUCCESS, r.remark


async def test_signed_sends_take_the_fast_path(cluster: AclCluster) -> None:
    c = cluster
    assert stats(c)["fastSendAclLoads"] >= 1, "the validator pushed its rules at start"
    await vet(c, TOPIC)
    before = stats(c)
    for i in range(20):
        r = await c.call(signed(send_request(TOPIC, f"m{i}".encode(), qid=i % 4), APP))
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.ext_fields["queueId"] == str(i % 4)
    after = stats(c)
    assert after["fastSendAclChecked"] - before["fastSendAclChecked"] == 20, after
    assert after["fastSendTaken"] - before["fastSendTaken"] == 20, after
    assert after["fastSendDeclinedAcl"] == before["fastSendDeclinedAcl"], after
    assert c.acl.denied == 0
    # The code SEND_MESSAGE (10), its long field names, signed the same way.
    f = {"producerGroup": "PG", "topic": TOPIC, "queueId": "1", "sysFlag": "0", "bornTimestamp": "0"}
    f.update({"flag": "0", "properties": "", "reconsumeTimes": "0", "defaultTopic": "TBW102"})
    r = await c.call(signed(create_request(RequestCode.SEND_MESSAGE, f, b"v1"), APP))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert stats(c)["fastSendAclChecked"] - after["fastSendAclChecked"] == 1


def forged(kind: str) -> RemotingCommand:
    """A send the Rust check must not take, to a topic the fast path already took sends to."""
    if kind == "tampered-body":
        req = signed(send_request(TOPIC, b"original"), APP)
        req.body = b"tampered"
    elif kind == "wrong-secret":
        req = signed(send_request(TOPIC, b"x"), (APP[0], "not-the-secret"))
    elif kind == "unknown-key":
        req = signed(send_request(TOPIC, b"x"), ("nobody-at-all", APP[1]))
    elif kind == "no-credentials":
        req = send_request(TOPIC, b"x")
    elif kind == "no-signature":
        req = signed(send_request(TOPIC, b"x"), APP)
        del req.ext_fields["Signature"]
    elif kind == "replayed-on-another-queue":
        original = signed(send_request(TOPIC, b"x", qid=0), APP)
        req = send_request(TOPIC, b"x", qid=1)
        req.ext_fields["AccessKey"] = APP[0]
        req.ext_fields["Signature"] = original.ext_fields["Signature"]
    elif kind == "denied-topic":
        req = signed(send_request(DENIED_TOPIC, b"x"), APP)
    elif kind == "default-deny":
        req = signed(send_request("VettedByAdmin", b"x"), APP)
    elif kind == "sub-only":
        req = signed(send_request("SubOnly", b"x"), APP)
    elif kind == "send-message-b-is-not-its-topic":
        # SEND_MESSAGE (10) stores to `topic`: a `b` naming a permitted topic must not vouch for it.
        f = {"producerGroup": "PG", "topic": DENIED_TOPIC, "b": TOPIC, "queueId": "0", "sysFlag": "0"}
        f.update({"bornTimestamp": "0", "flag": "0", "properties": "", "reconsumeTimes": "0"})
        req = signed(create_request(RequestCode.SEND_MESSAGE, f, b"x"), APP)
    else:
        raise AssertionError(kind)
    return req


KINDS = [
    "tampered-body",
    "wrong-secret",
    "unknown-key",
    "no-credentials",
    "no-signature",
    "replayed-on-another-queue",
    "denied-topic",
    "default-deny",
    "sub-only",
    "send-message-b-is-not-its-topic",
]


async def test_what_the_rust_check_cannot_vouch_for_is_refused_as_before(cluster: AclCluster) -> None:
    """Every topic is vetted first (the admin's sends), so each forged send reaches the Rust check, which
    declines it; the validator answers NO_PERMISSION with the remark it gives when asked directly."""
    c = cluster
    for t in ("VettedByAdmin", "SubOnly"):
        r = await c.call(signed(topic_request(t), ADMIN))
        assert r.code == ResponseCode.SUCCESS, r.remark
    for t in (TOPIC, DENIED_TOPIC, "VettedByAdmin", "SubOnly"):
        await vet(c, t)
    before = stats(c)
    written = c.written()
    for kind in KINDS:
        req = forged(kind)
        expected = c.acl.check(PEER, req)
        assert expected is not None, kind
        r = await c.call(req)
        assert (r.code, r.remark) == (NO_PERMISSION, expected), kind
        assert not r.body, kind
    after = stats(c)
    assert c.written() == written, "nothing stored"
    assert after["fastSendDeclinedAcl"] - before["fastSendDeclinedAcl"] == len(KINDS), after
    assert after["fastSendAclChecked"] == before["fastSendAclChecked"], after
    assert after["fastSendTaken"] == before["fastSendTaken"], after
    # and the fast path still takes a good one
    r = await c.call(signed(send_request(TOPIC, b"good"), APP))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert stats(c)["fastSendAclChecked"] == after["fastSendAclChecked"] + 1


async def test_send_message_is_checked_by_the_topic_it_stores_to(tmp_path) -> None:
    """The Python path too (asyncio server): a SEND_MESSAGE (10) is checked by its `topic`, whatever
    an extra `b` says (the validator used to read `b` first, letting a permitted `b` open a denied topic)."""
    c = await start_cluster(tmp_path, network_thread=False)
    try:
        written = c.written()
        r = await c.call(forged("send-message-b-is-not-its-topic"))
        assert r.code == NO_PERMISSION and f"topic:{DENIED_TOPIC}" in r.remark, (r.code, r.remark)
        assert c.written() == written
    finally:
        await stop_cluster(c)


async def wait_loads(c: AclCluster, above: int) -> None:
    for _ in range(100):
        if stats(c)["fastSendAclLoads"] > above:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the rules did not reach the network thread: {stats(c)}")


async def test_a_reload_reaches_the_rust_check(cluster: AclCluster) -> None:
    c = cluster
    await vet(c, TOPIC)
    await vet(c, "PubOnly")
    ok = await c.call(signed(send_request(TOPIC, b"allowed"), APP))
    assert ok.code == ResponseCode.SUCCESS, ok.remark
    loads = stats(c)["fastSendAclLoads"]
    # The file now denies TOPIC to APP (and lets it publish to SubOnly).
    write_rules(c.acl_file, RULES.replace(f"      - {TOPIC}=PUB|SUB\n", f"      - {TOPIC}=SUB\n"))
    await wait_loads(c, loads)
    before, written = stats(c), c.written()
    req = signed(send_request(TOPIC, b"now denied"), APP)
    r = await c.call(req)
    assert r.code == NO_PERMISSION and f"topic:{TOPIC}" in r.remark and "needs PUB" in r.remark, r.remark
    assert c.written() == written
    assert stats(c)["fastSendDeclinedAcl"] == before["fastSendDeclinedAcl"] + 1
    # Still taken where the new rules allow it.
    r = await c.call(signed(send_request("PubOnly", b"still allowed"), APP))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert stats(c)["fastSendAclChecked"] == before["fastSendAclChecked"] + 1
    # An ACL admin request's change reaches it too: a new account may publish at once, on the fast path.
    loads = stats(c)["fastSendAclLoads"]
    c.acl.update_account(AccountChange("fresh-app", "fresh-secret-0004", topic_perms=["PubOnly=PUB"]), "test")
    assert stats(c)["fastSendAclLoads"] == loads + 1
    r = await c.call(signed(send_request("PubOnly", b"fresh"), ("fresh-app", "fresh-secret-0004")))
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert stats(c)["fastSendAclChecked"] == before["fastSendAclChecked"] + 2
