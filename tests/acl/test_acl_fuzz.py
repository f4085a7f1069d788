"""Fuzz the ACL check with signed and forged frames: random fields and codes, huge ext fields, missing or
foreign AccessKey, signatures made with a wrong secret or over other content. No exception escapes the
check, no forged request gets through, no remark carries a secret.

Two layers: hypothesis drives the real validator loaded from a real rules file (thousands of cases, fast);
then a seeded stream of forged frames goes over loopback to a real broker with ACL on, which must answer
each with NO_PERMISSION, store nothing, and keep serving a correctly signed send afterwards.
"""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rmq.acl import AccessValidator, calc_signature, signed_content
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand

from tests.acl.aclenv import (
    ADMIN,
    APP,
    OTHER,
    SECRETS,
    TOPIC,
    send_request,
    signed,
    start_cluster,
    stop_cluster,
    write_rules,
)

ACCOUNTS = [ADMIN, APP, OTHER]
CODES = [int(c) for c in RequestCode] + [0, -1, 9999, 2**31 - 1]
PEER = "127.0.0.1:40001"

_validator: AccessValidator | None = None


def validator(tmp_path_factory: pytest.TempPathFactory | None = None) -> AccessValidator:
    global _validator
    if _validator is None:
        assert tmp_path_factory is not None
        path = write_rules(tmp_path_factory.mktemp("acl") / "plain_acl.yml")
        _validator = AccessValidator.from_file(path)
    return _validator


@pytest.fixture(scope="module", autouse=True)
def _load(tmp_path_factory: pytest.TempPathFactory) -> None:
    validator(tmp_path_factory)


keys = st.one_of(
    st.sampled_from(
        ["topic", "b", "a", "group", "consumerGroup", "producerGroup", "queueId", "_UNIQUE_KEY_QUERY"]
    ),
    st.text(max_size=20),
)
values = st.one_of(
    st.text(max_size=40), st.sampled_from([TOPIC, "%RETRY%AclGroup", "", "RMQ_SYS_TRACE_TOPIC"])
)
ext_fields = st.dictionaries(keys, values, max_size=12)
bodies = st.one_of(st.none(), st.binary(max_size=200), st.just(b'{"consumerDataSet": [{"groupName": 1}]}'))
access_keys = st.one_of(st.none(), st.sampled_from([a for a, _ in ACCOUNTS]), st.text(max_size=30))


def make(code: int, ext: dict[str, str], body: bytes | None) -> RemotingCommand:
    return RemotingCommand(code, ext_fields=dict(ext), body=body)


def no_secret(reason: str) -> None:
    for secret in SECRETS:
        assert secret not in reason


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    code=st.sampled_from(CODES),
    ext=ext_fields,
    body=bodies,
    ak=access_keys,
    forge=st.sampled_from(["none", "random", "wrong-secret", "other-content", "other-account"]),
    junk_sig=st.text(max_size=40),
)
def test_forged_requests_never_pass(code, ext, body, ak, forge, junk_sig) -> None:
    v = validator()
    req = make(code, ext, body)
    req.ext_fields.pop("Signature", None)
    if ak is not None:
        req.ext_fields["AccessKey"] = ak
    content = signed_content(req.ext_fields, body)
    if forge == "random":
        req.ext_fields["Signature"] = junk_sig
    elif forge == "wrong-secret":
        req.ext_fields["Signature"] = calc_signature(content, "not-" + APP[1])
    elif forge == "other-content":
        req.ext_fields["Signature"] = calc_signature(content + b"x", APP[1])
    elif forge == "other-account" and ak is not None:
        # a real account's signature, presented under another (or an unknown) access key
        real = next((s for a, s in ACCOUNTS if a != ak), ADMIN[1])
        req.ext_fields["Signature"] = calc_signature(content, real)
    reason = v.check(PEER, req)
    assert reason is not None, (code, req.ext_fields)
    no_secret(reason)


@settings(max_examples=800, deadline=None)
@given(code=st.sampled_from(CODES), ext=ext_fields, body=bodies, who=st.sampled_from(ACCOUNTS))
def test_signed_requests_never_crash_the_check(code, ext, body, who) -> None:
    v = validator()
    req = signed(make(code, ext, body), who)
    reason = v.check(PEER, req)  # any outcome, but no exception
    if reason is not None:
        no_secret(reason)
    # The same request with one byte of the body or one field changed is refused.
    tampered = make(code, req.ext_fields, (body or b"") + b"!")
    assert v.check(PEER, tampered) is not None


@settings(max_examples=30, deadline=None)
@given(size=st.integers(min_value=10_000, max_value=400_000), n=st.integers(min_value=1, max_value=3000))
def test_huge_ext_fields(size, n) -> None:
    v = validator()
    ext = {f"k{i}": "v" for i in range(n)}
    ext["topic"] = TOPIC
    ext["big"] = "x" * size
    req = signed(make(RequestCode.SEND_MESSAGE, ext, b"b"), APP)
    assert v.check(PEER, req) is None  # signed and permitted: a large header is still checked right
    req.ext_fields["big"] = "y" * size
    assert v.check(PEER, req) is not None
    req.ext_fields.pop("AccessKey")
    assert v.check(PEER, req) == f"No accessKey is configured (request code {RequestCode.SEND_MESSAGE})"


async def test_forged_frames_over_the_wire(tmp_path: Path) -> None:
    rng = random.Random(20261124)
    c = await start_cluster(tmp_path)
    try:
        # A first send vets the topic: the forged sends that follow reach the network thread's own check.
        ok = await c.call(signed(send_request(TOPIC, b"vets the topic"), APP))
        assert ok.code == ResponseCode.SUCCESS, ok.remark
        before = c.written()
        assert c.ctl.services is not None
        fast = c.ctl.services.fast_send_stats
        declined_before = int(fast()["fastSendDeclinedAcl"])
        for i in range(300):
            code = rng.choice(
                [
                    RequestCode.SEND_MESSAGE_V2,
                    RequestCode.SEND_MESSAGE,
                    RequestCode.UPDATE_AND_CREATE_TOPIC,
                    RequestCode.PULL_MESSAGE,
                    RequestCode.HEART_BEAT,
                    rng.randrange(0, 400),
                ]
            )
            req = send_request(TOPIC, body=rng.randbytes(rng.randrange(0, 64)))
            req.code = int(code)
            for _ in range(rng.randrange(0, 20)):
                k = "".join(rng.choices(string.printable, k=rng.randrange(1, 12)))
                req.ext_fields[k] = "".join(rng.choices(string.printable + "éß主", k=rng.randrange(0, 50)))
            if i % 50 == 0:
                req.ext_fields["huge"] = "h" * 1_000_000
            kind = i % 4
            if kind == 0:
                pass  # no AccessKey
            elif kind == 1:
                req.ext_fields["AccessKey"] = APP[0]
                req.ext_fields["Signature"] = calc_signature(
                    signed_content(req.ext_fields, req.body), "guess"
                )
            elif kind == 2:
                signed(req, APP)
                req.body = (req.body or b"") + b"tampered"
            else:
                signed(req, APP)
                req.ext_fields["queueId"] = "3"  # changed after signing
            r = await c.call(req)
            assert r.code == ResponseCode.NO_PERMISSION, (i, int(code), r.code, r.remark)
            no_secret(r.remark or "")
        assert c.written() == before, "a forged frame was stored"
        assert int(fast()["fastSendDeclinedAcl"]) > declined_before, "no forged send reached the Rust check"
        checked = int(fast()["fastSendAclChecked"])
        ok = await c.call(signed(send_request(TOPIC, b"still serving"), APP))
        assert ok.code == ResponseCode.SUCCESS, ok.remark
        assert int(fast()["fastSendAclChecked"]) == checked + 1, "taken by the network thread"
    finally:
        await stop_cluster(c)
