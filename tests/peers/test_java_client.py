"""The Java client 4.9.8 against rmq and against the Apache RocketMQ broker, the same scenario on both.

Each test runs one Java driver scenario (``tests/peers/java/src/rmqpeer/Driver.java``) against rmq and
against the Apache broker and compares what the client observed: send statuses, the messages received
(body, tags, keys, user property, reconsume count), their order where orderly, pull statuses and stored
offsets. A difference is a bug in rmq unless shown otherwise. Every topic and group is new to the test.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.peers.conftest import Peers, unique

N = 16


def bodies(result: dict[str, Any]) -> list[str]:
    return sorted(m["body"] for m in result["messages"])


def expected(topic: str, n: int = N, only: str | None = None) -> list[dict[str, Any]]:
    msgs = [
        {
            "body": f"{topic}#{i}",
            "keys": f"k{i}",
            "reconsume": 0,
            "seq": str(i),
            "tags": "TagB" if i % 2 else "TagA",
        }
        for i in range(n)
    ]
    return sorted((m for m in msgs if only in (None, m["tags"])), key=lambda m: m["body"])


def same(results: dict[str, dict[str, Any]], *keys: str) -> None:
    """rmq's result carries the same ``keys`` as the Apache broker's."""
    for key in keys:
        assert results["rmq"].get(key) == results["apache"].get(key), (
            f"{key}: rmq {results['rmq'].get(key)!r} != apache {results['apache'].get(key)!r}"
        )


@pytest.mark.parametrize("mode", ["sync", "async", "oneway", "batch"])
def test_send_modes_store_every_message(peers: Peers, mode: str) -> None:
    topic, group = unique(f"JSend{mode}"), unique("JSendG")
    sent = peers.both("send", topic=topic, group=group, count=N, mode=mode)
    same(sent, "statuses", "errors")
    assert sent["rmq"]["errors"] == []
    got = peers.both("pull", topic=topic, group=group, expect=N)
    for broker in ("rmq", "apache"):
        assert sorted(got[broker]["messages"], key=lambda m: m["body"]) == expected(topic), broker
    if mode == "batch":  # one batch goes to one queue (the client picks which)
        assert [list(r["queues"].values()) for r in sent.values()] == [[N], [N]]


def test_push_clustering_two_consumers_get_everything_once(peers: Peers) -> None:
    topic, group = unique("JPushC"), unique("JPushCG")
    peers.both("send", topic=topic, group=group, count=N)
    got = peers.both("push", topic=topic, group=group, consumers=2, expect=N, timeout=60)
    same(got, "complete", "per_consumer")
    assert got["rmq"]["complete"]
    assert sorted(got["rmq"]["messages"], key=lambda m: m["body"]) == expected(topic)


def test_push_broadcasting_each_consumer_gets_everything(peers: Peers) -> None:
    topic, group = unique("JPushB"), unique("JPushBG")
    peers.both("send", topic=topic, group=group, count=N)
    got = peers.both("push", topic=topic, group=group, consumers=2, expect=N, model="broadcasting")
    same(got, "complete", "per_consumer")
    assert got["rmq"]["per_consumer"] == [N, N]


def test_push_orderly_keeps_each_shard_in_order(peers: Peers) -> None:
    topic, group = unique("JOrder"), unique("JOrderG")
    sent = peers.both("send", topic=topic, group=group, count=N * 2, mode="orderly", shards=4)
    same(sent, "statuses", "queues")
    got = peers.both("push", topic=topic, group=group, expect=N * 2, orderly=1, shards=4)
    same(got, "complete", "order_errors")
    assert got["rmq"]["order_errors"] == []
    assert sorted(got["rmq"]["messages"], key=lambda m: m["body"]) == expected(topic, N * 2)


def test_push_tag_subscription(peers: Peers) -> None:
    topic, group = unique("JTag"), unique("JTagG")
    peers.both("send", topic=topic, group=group, count=N)
    got = peers.both("push", topic=topic, group=group, expect=N // 2, expression="TagB")
    same(got, "complete")
    for broker in ("rmq", "apache"):
        assert sorted(got[broker]["messages"], key=lambda m: m["body"]) == expected(topic, only="TagB")


def test_lite_pull_subscribe_then_commit(peers: Peers) -> None:
    topic, group = unique("JLite"), unique("JLiteG")
    peers.both("send", topic=topic, group=group, count=N)
    got = peers.both("lite_pull", topic=topic, group=group, expect=N)
    same(got, "committed")
    assert sorted(got["rmq"]["messages"], key=lambda m: m["body"]) == expected(topic)
    assert sum(got["rmq"]["committed"].values()) == N


def test_lite_pull_assign_seek_then_commit(peers: Peers) -> None:
    topic, group = unique("JLiteA"), unique("JLiteAG")
    sent = peers.both("send", topic=topic, group=group, count=N, mode="orderly", shards=4)
    same(sent, "queues")
    # Each of the 4 queues holds 4 messages. The driver reads them all first (see its note on the
    # 4.9.8 client's seek race), then seeks every queue back to 1, which skips the first of each.
    got = peers.both("lite_pull", topic=topic, group=group, mode="assign", drain=N, seek=1, expect=N - 4)
    same(got, "committed")
    want = [m for m in expected(topic) if int(m["seq"]) >= 4]
    for broker in ("rmq", "apache"):
        assert sorted(got[broker]["messages"], key=lambda m: m["body"]) == want, broker


@pytest.mark.parametrize("expression", ["*", "TagA"])
def test_pull_consumer_reads_queues_and_stores_offsets(peers: Peers, expression: str) -> None:
    topic, group = unique("JPull"), unique("JPullG")
    peers.both("send", topic=topic, group=group, count=N, mode="orderly", shards=4)
    only = None if expression == "*" else expression
    got = peers.both(
        "pull", topic=topic, group=group, expression=expression, expect=len(expected(topic, N, only))
    )
    same(got, "next", "last_status", "beyond_status", "beyond_next", "stored_first")
    for broker in ("rmq", "apache"):
        assert sorted(got[broker]["messages"], key=lambda m: m["body"]) == expected(topic, only=only), broker


def test_transaction_commit_rollback_and_check_back(peers: Peers) -> None:
    topic, group = unique("JTx"), unique("JTxG")
    got = peers.both("transaction", topic=topic, group=group, count=9, timeout=90)
    same(got, "states", "checked", "messages")
    assert got["rmq"]["states"] == {
        "SEND_OK/COMMIT_MESSAGE": 3,
        "SEND_OK/ROLLBACK_MESSAGE": 3,
        "SEND_OK/UNKNOW": 3,
    }
    assert got["rmq"]["checked"] == ["2", "5", "8"]
    assert [m["seq"] for m in got["rmq"]["messages"]] == ["0", "2", "3", "5", "6", "8"]


def test_delay_levels(peers: Peers) -> None:
    topic, group = unique("JDelay"), unique("JDelayG")
    got = peers.both("delay", topic=topic, group=group, count=4)
    same(got, "statuses", "messages")
    assert [m["delayed"] for m in got["rmq"]["messages"]] == [True] * 4


def test_retry_then_dlq_after_max_reconsume_times(peers: Peers) -> None:
    topic, group = unique("JRetry"), unique("JRetryG")
    got = peers.both("retry", topic=topic, group=group, count=4, max=2, timeout=90)
    same(got, "reconsume_seen", "dlq")
    assert got["rmq"]["dlq"] == 4
    assert got["rmq"]["reconsume_seen"] == {f"{topic}#{i}": [0, 1, 2] for i in range(4)}


@pytest.mark.parametrize(
    "sql",
    ["TAGS = 'TagA' AND seq IN ('2', '4', '5')", "seq > 5", "seq IS NOT NULL AND (seq = '1' OR seq = '15')"],
)
def test_sql92_subscription(peers: Peers, sql: str) -> None:
    topic, group = unique("JSql"), unique("JSqlG")
    peers.both("send", topic=topic, group=group, count=N)
    want = {
        "TAGS = 'TagA' AND seq IN ('2', '4', '5')": ["2", "4"],
        "seq > 5": [str(i) for i in range(6, N)],
        "seq IS NOT NULL AND (seq = '1' OR seq = '15')": ["1", "15"],
    }[sql]
    got = peers.both("push", topic=topic, group=group, expect=len(want), sql=sql, timeout=30)
    same(got, "messages", "complete")
    assert sorted(int(m["seq"]) for m in got["rmq"]["messages"]) == sorted(int(s) for s in want)


def test_request_reply(peers: Peers) -> None:
    topic, group = unique("JReq"), unique("JReqG")
    got = peers.both("request_reply", topic=topic, group=group, count=3, timeout=60)
    same(got, "replies", "errors", "reply_errors")
    assert got["rmq"]["replies"] == [f"re:{topic}#{i}" for i in range(3)]


def test_message_trace_lands_in_trace_topic(peers: Peers) -> None:
    topic, group = unique("JTrace"), unique("JTraceG")
    got = peers.both("trace", topic=topic, group=group, count=3, timeout=60)
    same(got, "traced_keys")
    assert got["rmq"]["traced_keys"] == ["k0", "k1", "k2"]
