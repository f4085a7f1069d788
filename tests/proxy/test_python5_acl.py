"""ACL on the gRPC endpoint: the official 5.x Python client's HMAC signature checked against the broker's
plain_acl.yml (the same rules and accounts as tests/acl)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rmq.common.codes import ResponseCode
from rmq.remoting.client import invoke_sync

from tests.acl.aclenv import ADMIN, APP, DENIED_TOPIC, GROUP, INNER, TOPIC, signed, topic_request, write_rules
from tests.brokerproc import BrokerProcess, start_broker, start_proxy
from tests.proxy.client5run import run_client5


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    home = tmp_path_factory.mktemp("acl-grpc")
    rules = write_rules(home / "plain_acl.yml")
    proc = start_broker(
        home / "store",
        "aclEnable=true",
        f"aclFilePath={rules}",
        f"innerClientAuthenticationCredentials={INNER}",
    )
    try:
        for topic in (TOPIC, DENIED_TOPIC):
            r = invoke_sync(proc.broker_addr, signed(topic_request(topic), ADMIN), 5000)
            assert r.code == ResponseCode.SUCCESS, r.remark
        yield proc
    finally:
        assert proc.stop() == 0, "".join(proc.log[-40:])


def send(b: BrokerProcess, topic: str, creds: tuple[str, str]) -> dict[str, object]:
    endpoints = f"127.0.0.1:{b.ready['grpc']}"
    return run_client5(
        "send",
        endpoints=endpoints,
        topic=topic,
        messages=[{"body": "x"}],
        ak=creds[0],
        sk=creds[1],
        timeout=60,
    )


def test_a_signed_send_with_pub_permission_is_stored(broker: BrokerProcess) -> None:
    sent = send(broker, TOPIC, APP)["sent"]
    assert [s["body"] for s in sent] == ["x"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("topic", "creds", "client_says", "why"),
    [
        (
            TOPIC,
            (APP[0], "not-the-secret"),
            "failed to fetch topic:AclTopic route",
            "signature mismatch for access key app",
        ),
        (
            TOPIC,
            ("nobody", "x"),
            "failed to fetch topic:AclTopic route",
            "no account for access key 'nobody'",
        ),
        (DENIED_TOPIC, APP, "no permission for topic:DeniedTopic", "needs PUB, accessKey=app has DENY"),
    ],
)
def test_refusals_say_why(
    broker: BrokerProcess, topic: str, creds: tuple[str, str], client_says: str, why: str
) -> None:
    """A refused signature fails the client's first call (its route query: 5.1.2 reports only that); the
    endpoint's log says why, as a refused permission's status does to the client."""
    with pytest.raises(AssertionError, match=client_says):
        send(broker, topic, creds)
    assert any(why in line and "refused" in line for line in broker.log), "".join(broker.log[-20:])


def test_receiving_from_rmq_is_served_under_acl(broker: BrokerProcess) -> None:
    """The endpoint's receives are the broker's POP requests, signed as the account: its SUB on the topic
    and the group let them through (before POP, the broker answered REQUEST_CODE_NOT_SUPPORTED)."""
    got = run_client5(
        "consume",
        endpoints=f"127.0.0.1:{broker.ready['grpc']}",
        topic=TOPIC,
        group=GROUP,
        count=1,
        deadline=5,
        ak=APP[0],
        sk=APP[1],
    )
    assert got["errors"] == [], got["errors"]


def test_the_standalone_proxy_checks_signatures_with_its_acl_file(tmp_path: Path) -> None:
    """``python -m rmq.proxy --acl-file`` checks 5.x signatures against that file, in front of a broker
    without ACL: a wrong secret is refused (and logged), the account's own is served. (The file's rules once
    went into another setting and were never checked.)"""
    rules = write_rules(tmp_path / "plain_acl.yml")
    plain = start_broker(tmp_path / "store")
    try:
        r = invoke_sync(plain.broker_addr, topic_request(TOPIC), 5000)
        assert r.code == ResponseCode.SUCCESS, r.remark
        proxy = start_proxy(plain.namesrv_addr, "--acl-file", str(rules))
        try:
            args = {"endpoints": proxy.endpoints, "topic": TOPIC, "messages": [{"body": "x"}], "timeout": 60}
            with pytest.raises(AssertionError, match="failed to fetch topic:AclTopic route"):
                run_client5("send", ak=APP[0], sk="not-the-secret", **args)
            sent = run_client5("send", ak=APP[0], sk=APP[1], **args)["sent"]
            assert [m["body"] for m in sent] == ["x"]  # type: ignore[index]
        finally:
            proxy.stop()
    finally:
        assert plain.stop() == 0, "".join(plain.log[-40:])
    log = proxy.log
    why = "signature mismatch for access key app"
    assert any(why in x and "refused" in x for x in log), "".join(log[-20:])
