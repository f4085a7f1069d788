"""The official RocketMQ 5.x Java client (rocketmq-client-java 5.2.0, gRPC, unchanged): one scenario against
rmq's broker (its own gRPC endpoint, POP in the broker) and against Apache RocketMQ 5.5.0's proxy (local
mode), results compared; and 4.x <-> 5.x cross consumption on both.

One JVM per side (tests/peers/java/grpc5/rmqgrpc5/Grpc5Driver.java, the two sides run at once) does: sends
(normal with tag, keys and a property; a FIFO message group; a 2 s delay), transactions (commit, rollback,
one left for the server's check-back, which commits it), a SimpleConsumer receiving the normal, delayed,
transactional and 4.x-sent messages (changeInvisibleDuration on the first, ack on each), an orderly group's
SimpleConsumer receiving the FIFO group, and a PushConsumer whose listener fails one message always (retried,
then the dead-letter queue) and one once. Around it, rmq's 4.x client sends what the 5.x SimpleConsumer
receives, and reads back what the 5.x producer stored.

Client 5.2.0's LitePushConsumer (lite topics) is compared in tests/peers/test_lite5.py.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.peers.apache import compile_drivers, run_driver
from tests.peers.conftest import Peers, Peers5
from tests.peers.grpc5 import (
    CROSS_4X,
    Side,
    apache_side,
    await_dlq,
    plain_record,
    pull,
    record,
    rmq_side,
    same,
    send_4x,
)

GRPC5_SRC = Path(__file__).resolve().parent / "java" / "grpc5"


def _run_side(side: Side, peers: Peers, classes: Path) -> dict[str, Any]:
    topics = {
        "normal": side.topic("J5n"),
        "fifo": side.topic("J5f", "FIFO"),
        "delay": side.topic("J5d", "DELAY"),
        "tx": side.topic("J5t", "TRANSACTION"),
        "push": side.topic("J5p"),
        "cross": side.topic("J5c"),
    }
    groups = {
        "simpleGroup": side.group("G5s"),
        "fifoGroup": side.group("G5f", orderly=True),
        "pushGroup": side.group("G5p", retry_max_times=2),  # 3 attempts, then the DLQ
    }
    send_4x(side, topics["cross"])
    result = run_driver(
        peers.libs,
        classes,
        peers.home / f"java5-{side.label}",
        "grpc5",
        limit=300,
        main="rmqgrpc5.Grpc5Driver",
        jars=peers.libs.client5,
        endpoints=side.endpoints,
        crossBodies=",".join(CROSS_4X),
        **topics,
        **groups,
    )
    # 5.x -> 4.x: rmq's 4.x consumer reads what the 5.x producer stored.
    stored = sorted(pull(side.namesrv, topics["normal"], 2), key=lambda m: m.body)
    result["stored4x"] = [record(m) for m in stored]
    result["ids_kept"] = {m.body.decode(): m.msg_id == result["sent"][m.body.decode()] for m in stored}
    result["dlq"] = await_dlq(side.broker_addr, groups["pushGroup"], 1)
    return result


@pytest.fixture(scope="module")
def java5(peers: Peers, peers5: Peers5) -> dict[str, dict[str, Any]]:
    """The scenario's results by side (the JVMs run at once)."""
    classes = compile_drivers(peers.libs, GRPC5_SRC, peers.libs.client5)
    sides = (rmq_side(peers), apache_side(peers5))
    with ThreadPoolExecutor(len(sides)) as pool:
        futures = {s.label: pool.submit(_run_side, s, peers, classes) for s in sides}
        return {label: f.result() for label, f in futures.items()}


def test_simple_consumer_receives_what_the_java_producer_sent(java5: dict[str, dict[str, Any]]) -> None:
    """Normal (tag, keys, property) and delayed messages come to a SimpleConsumer as sent, on time; the first
    one received got changeInvisibleDuration before its ack, and no message came twice (acks held)."""
    simple = dict(same(java5, "simple"))
    assert simple.pop("") == "changedInvisible"
    assert simple["plain-1"] == {
        "kind": "normal",
        "tag": "TagA",
        "keys": "k1 k2",
        "group": None,
        "attempt": "1",
        "props": "color=red",
    }
    assert (simple["plain-2"]["tag"], simple["plain-2"]["keys"]) == ("TagB", "")
    assert simple["later"]["kind"] == "delay" and simple["later"]["onTime"] == "true"
    assert all(r["attempt"] == "1" for r in simple.values())


def test_transactions_with_check_back(java5: dict[str, dict[str, Any]]) -> None:
    """Committed and checked-then-committed half messages are delivered; the rolled-back one is not."""
    simple = same(java5, "simple")
    assert {b for b, r in simple.items() if b and r["kind"] == "tx"} == {"tx-commit", "tx-checked"}
    # As on Apache, each shows its transaction id (its message id), the checked one how often it was checked.
    assert simple["tx-checked"]["props"] == "TRANSACTION_CHECK_TIMES=1;__transactionId__=<id>"
    assert simple["tx-commit"]["props"] == "__transactionId__=<id>"
    for side in ("rmq", "apache"):
        assert "tx-checked" in java5[side]["tx"], java5[side]["tx"]
        assert not any(c.startswith("error") for c in java5[side]["tx"])


def test_fifo_group_received_in_send_order(java5: dict[str, dict[str, Any]]) -> None:
    assert same(java5, "fifo") == ["fifo-0@order-7", "fifo-1@order-7", "fifo-2@order-7"]


def test_push_consumer_retries_then_dead_letter(java5: dict[str, dict[str, Any]]) -> None:
    """A failing listener's message comes back with attempts 2 and 3 (the group's retryMaxTimes 2), then
    goes to %DLQ%<group>; one failing once is delivered again as attempt 2."""
    deliveries = {side: sorted(set(java5[side]["push"])) for side in ("rmq", "apache")}
    assert (
        deliveries["rmq"]
        == deliveries["apache"]
        == [
            "never#1",
            "never#2",
            "never#3",
            "ok-1#1",
            "once#1",
            "once#2",
        ]
    )
    assert same(java5, "dlq") == 1


def test_java5_sends_read_by_4x_consumer(java5: dict[str, dict[str, Any]]) -> None:
    """5.x -> 4.x: rmq's Remoting consumer reads the 5.x producer's messages with their tag, keys, property
    and the message ids the 5.x client was given."""
    stored = same(java5, "stored4x")
    assert stored[0] == plain_record("plain-1", "TagA", ["k1", "k2"], "red")
    assert same(java5, "ids_kept") == {"plain-1": True, "plain-2": True}


def test_4x_sends_received_by_java5_simple_consumer(java5: dict[str, dict[str, Any]]) -> None:
    """4.x -> 5.x: messages rmq's 4.x producer sent over Remoting reach the 5.x SimpleConsumer."""
    simple = same(java5, "simple")
    for body in CROSS_4X:
        assert simple[body] == {
            "kind": "cross",
            "tag": "Tag4",
            "keys": "k4",
            "group": None,
            "attempt": "1",
            "props": "origin=4x",
        }
