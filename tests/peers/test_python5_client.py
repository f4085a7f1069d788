"""The official RocketMQ 5.x Python client (5.1.2, unchanged): the same scenarios against rmq and against
Apache RocketMQ 5.x, results compared.

* Sends (normal with tag/keys/properties, FIFO message group, delay, transactions with check-back): through
  rmq's endpoint into rmq (the session's rmq broker serves gRPC itself) and through Apache's proxy into
  Apache's broker; each side's stored records are read back with rmq's 4.x consumer and compared.
* Receiving (SimpleConsumer receive / changeInvisibleDuration / ack, PushConsumer retry and dead-letter
  queue, a FIFO group in order) on three sides, compared: rmq's endpoint into rmq's broker (its own POP),
  rmq's endpoint run standalone in front of Apache's broker (``python -m rmq.proxy``, "cluster" mode:
  POP_MESSAGE, ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME over Remoting), and Apache's own proxy on
  Apache's broker.

Apache's proxy checks a message's 5.x type against the topic's ``message.type``; rmq's topics accept every
type, so on Apache each kind of message goes to a topic of its type.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from tests.peers.apache5 import create_topic, wait_for_route
from tests.peers.conftest import Peers, Peers5
from tests.peers.grpc5 import Side, apache_side, dlq_count, name, plain_record, pull, record, rmq_side
from tests.proxy.client5run import run_client5


def _rmq_topic(peers: Peers) -> str:
    topic = name("T5")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmq.admin",
            "updateTopic",
            "-n",
            peers.rmq.namesrv_addr,
            "-c",
            "DefaultCluster",
            "-t",
            topic,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    wait_for_route(peers.rmq.namesrv_addr, topic)
    return topic


PLAIN = [
    {"body": "plain-1", "tag": "TagA", "keys": ["k1", "k2"], "props": {"color": "red"}},
    {"body": "plain-2", "tag": "TagB"},
]
FIFO = [{"body": f"fifo-{i}", "group": "order-7"} for i in range(3)]
DELAY = [{"body": "later", "delay_s": 2}]


def _send_side(endpoints: str, namesrv: str, topics: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, messages in (("plain", PLAIN), ("fifo", FIFO), ("delay", DELAY)):
        sent = run_client5("send", endpoints=endpoints, topic=topics[kind], messages=messages)["sent"]
        got = sorted(pull(namesrv, topics[kind], len(messages)), key=lambda m: m.body)
        out[kind] = [record(m) for m in got]
        out[f"{kind}_ids_kept"] = sorted(s["message_id"] for s in sent) == sorted(m.msg_id for m in got)
        if kind == "fifo":  # one message group: one queue, consecutive offsets in send order
            ordered = sorted(got, key=lambda m: m.queue_offset)
            out["fifo_one_queue"] = len({m.queue_id for m in got}) == 1
            out["fifo_order"] = [m.body.decode() for m in ordered]
    return out


def test_sends_store_the_same_on_rmq_and_apache(peers: Peers, peers5: Peers5) -> None:
    rmq_topics = {kind: _rmq_topic(peers) for kind in ("plain", "fifo", "delay")}
    apache_topics = {kind: name(f"A5{kind}") for kind in ("plain", "fifo", "delay")}
    for kind, mtype in (("plain", "NORMAL"), ("fifo", "FIFO"), ("delay", "DELAY")):
        create_topic(peers5.apache.broker_addr, apache_topics[kind], mtype)
    rmq = _send_side(f"127.0.0.1:{peers.rmq.ready['grpc']}", peers.rmq.namesrv_addr, rmq_topics)
    apache = _send_side(peers5.apache.endpoints, peers5.apache.namesrv_addr, apache_topics)
    assert rmq == apache
    assert [r["body"] for r in rmq["plain"]] == ["plain-1", "plain-2"]
    assert rmq["plain"][0] == plain_record("plain-1", "TagA", ["k1", "k2"], "red")
    assert rmq["fifo_one_queue"] and rmq["fifo_order"] == ["fifo-0", "fifo-1", "fifo-2"]
    assert rmq["delay"][0]["timer"] is True
    assert rmq["plain_ids_kept"] and rmq["fifo_ids_kept"] and rmq["delay_ids_kept"]


def _transaction_side(endpoints: str, namesrv: str, topic: str) -> dict[str, Any]:
    result = run_client5(
        "transaction",
        endpoints=endpoints,
        topic=topic,
        ended={"tx-commit": "commit", "tx-rollback": "rollback"},
        unresolved="tx-checked",
        check_verdict="commit",
        check_wait=90,
        timeout=180,
    )
    # The broker may check an ended one too (its end not read yet), and a second check of the same half
    # message may commit it twice (Apache 5.x does with 1 s check intervals): compared as sets.
    stored = {m.body.decode() for m in pull(namesrv, topic, 2, bodies={"tx-checked", "tx-commit"})}
    return {"checked_unresolved": "tx-checked" in result["checked"], "stored": sorted(stored)}


def test_transactions_with_check_back_same_on_rmq_and_apache(peers: Peers, peers5: Peers5) -> None:
    apache_topic = name("A5tx")
    create_topic(peers5.apache.broker_addr, apache_topic, "TRANSACTION")
    rmq = _transaction_side(f"127.0.0.1:{peers.rmq.ready['grpc']}", peers.rmq.namesrv_addr, _rmq_topic(peers))
    apache = _transaction_side(peers5.apache.endpoints, peers5.apache.namesrv_addr, apache_topic)
    assert rmq == apache == {"checked_unresolved": True, "stored": ["tx-checked", "tx-commit"]}


def _sides(peers: Peers, peers5: Peers5) -> dict[str, Side]:
    """rmq's endpoint into rmq's broker, rmq's standalone endpoint into Apache's broker, Apache's proxy."""
    apache = apache_side(peers5)
    proxied = Side("rmq-proxy+apache", peers5.rmq_proxy_endpoints, apache.namesrv, apache.broker_addr, True)
    return {"rmq": rmq_side(peers), proxied.label: proxied, "apache": apache}


def _each_side(peers: Peers, peers5: Peers5, scenario: Any) -> dict[str, Any]:
    return {name: scenario(side) for name, side in _sides(peers, peers5).items()}


def _consume_side(side: Side) -> dict[str, Any]:
    topic, group = side.topic("A5recv", "NORMAL"), side.group("G5")
    run_client5("send", endpoints=side.endpoints, topic=topic, messages=PLAIN)
    got = run_client5(
        "consume", endpoints=side.endpoints, topic=topic, group=group, count=len(PLAIN), deadline=60
    )
    got["received"] = sorted(got["received"], key=lambda r: r["body"])
    del got["errors"]  # Apache's proxy may refuse the first receive, before the client's settings arrive
    return got


def test_simple_consumer_same_on_rmq_and_apache(peers: Peers, peers5: Peers5) -> None:
    """Receive, change invisible duration, ack."""
    got = _each_side(peers, peers5, _consume_side)
    rmq = got["rmq"]
    assert rmq == got["rmq-proxy+apache"] == got["apache"], got
    assert rmq["changed_invisible"] is True
    assert [r["body"] for r in rmq["received"]] == ["plain-1", "plain-2"]
    first = rmq["received"][0]
    assert (first["tag"], first["keys"], first["attempt"], first["props"]) == (
        "TagA",
        ["k1", "k2"],
        1,
        {"color": "red"},
    )


def _push_side(side: Side) -> dict[str, Any]:
    topic = side.topic("A5push", "NORMAL")
    group = side.group("G5push", retry_max_times=2)  # 3 attempts, then the DLQ
    bodies = ["ok-1", "once", "never"]
    run_client5("send", endpoints=side.endpoints, topic=topic, messages=[{"body": b} for b in bodies])
    got = run_client5(
        "push",
        endpoints=side.endpoints,
        topic=topic,
        group=group,
        bodies=bodies,
        fail_always=["never"],
        fail_once=["once"],
        max_attempts=3,
        settle=25,
        deadline=150,
        timeout=240,
    )
    deliveries = [tuple(x) for x in got["deliveries"]]
    return {"deliveries": sorted(set(deliveries)), "dlq": dlq_count(side.broker_addr, group)}


def test_push_consumer_retry_and_dead_letter_same_on_rmq_and_apache(peers: Peers, peers5: Peers5) -> None:
    """Failed deliveries come back with a growing attempt number (nack = change invisible duration by the
    group's backoff); after the group's retryMaxTimes + 1 attempts the message goes to %DLQ%<group>."""
    got = _each_side(peers, peers5, _push_side)
    rmq = got["rmq"]
    assert rmq == got["rmq-proxy+apache"] == got["apache"], got
    assert rmq["deliveries"] == [
        ("never", 1),
        ("never", 2),
        ("never", 3),
        ("ok-1", 1),
        ("once", 1),
        ("once", 2),
    ]
    assert rmq["dlq"] == 1


def _fifo_side(side: Side) -> list[str]:
    topic, group = side.topic("A5fifo", "FIFO"), side.group("G5fifo", orderly=True)
    messages = [{"body": f"f{i}", "group": "order-1"} for i in range(5)]
    run_client5("send", endpoints=side.endpoints, topic=topic, messages=messages)
    got = run_client5(
        "consume", endpoints=side.endpoints, topic=topic, group=group, count=len(messages), deadline=90
    )
    return [r["body"] for r in got["received"]]


def test_fifo_group_receives_in_order_same_on_rmq_and_apache(peers: Peers, peers5: Peers5) -> None:
    """A group that consumes orderly is told FIFO and pops orderly: one message group comes in send order."""
    got = _each_side(peers, peers5, _fifo_side)
    assert got["rmq"] == got["rmq-proxy+apache"] == got["apache"] == ["f0", "f1", "f2", "f3", "f4"], got
