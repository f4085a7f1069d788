"""Allocation strategies: AllocateMessageQueueAveragely exactly as §7.9, by circle, consistent hash."""

from __future__ import annotations

import hashlib

import pytest
from rmq.client.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
)
from rmq.client.consumer.allocate.consistent_hash import md5_hash
from rmq.client.message import MessageQueue


def queues(n: int, topic: str = "T") -> list[MessageQueue]:
    return sorted(MessageQueue(topic, f"broker-{i // 4}", i % 4) for i in range(n))


def cids(k: int) -> list[str]:
    return sorted(f"10.0.0.{i}@{100 + i}" for i in range(k))


def java_averagely(mq_all: list[MessageQueue], cid_all: list[str], current: str) -> list[MessageQueue]:
    """A literal transcription of AllocateMessageQueueAveragely.allocate (Java integer arithmetic)."""
    if current not in cid_all:
        return []
    index = cid_all.index(current)
    mod = len(mq_all) % len(cid_all)
    if len(mq_all) <= len(cid_all):
        average_size = 1
    elif mod > 0 and index < mod:
        average_size = len(mq_all) // len(cid_all) + 1
    else:
        average_size = len(mq_all) // len(cid_all)
    start_index = index * average_size if (mod > 0 and index < mod) else index * average_size + mod
    rng = min(average_size, len(mq_all) - start_index)
    return [mq_all[(start_index + i) % len(mq_all)] for i in range(rng)]


def test_averagely_n8_k3_example() -> None:
    mqs, clients = queues(8), cids(3)
    strategy = AllocateMessageQueueAveragely()
    got = [strategy.allocate("g", c, mqs, clients) for c in clients]
    assert got == [mqs[0:3], mqs[3:6], mqs[6:8]]


def test_averagely_fewer_queues_than_consumers() -> None:
    mqs, clients = queues(2), cids(5)
    strategy = AllocateMessageQueueAveragely()
    got = [strategy.allocate("g", c, mqs, clients) for c in clients]
    assert got == [[mqs[0]], [mqs[1]], [], [], []]


@pytest.mark.parametrize("n", range(1, 20))
@pytest.mark.parametrize("k", range(1, 9))
def test_averagely_matches_java_and_partitions(n: int, k: int) -> None:
    mqs, clients = queues(n), cids(k)
    strategy = AllocateMessageQueueAveragely()
    parts = [strategy.allocate("g", c, mqs, clients) for c in clients]
    assert parts == [java_averagely(mqs, clients, c) for c in clients]
    flat = [mq for p in parts for mq in p]
    assert sorted(flat) == mqs  # every queue exactly once
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_not_a_member_gets_nothing_and_bad_args_raise() -> None:
    for strategy in (
        AllocateMessageQueueAveragely(),
        AllocateMessageQueueAveragelyByCircle(),
        AllocateMessageQueueConsistentHash(),
    ):
        assert isinstance(strategy, AllocateMessageQueueStrategy)
        assert strategy.allocate("g", "stranger", queues(4), cids(2)) == []
        with pytest.raises(ValueError):
            strategy.allocate("g", "", queues(4), cids(2))
        with pytest.raises(ValueError):
            strategy.allocate("g", cids(2)[0], [], cids(2))
        with pytest.raises(ValueError):
            strategy.allocate("g", "x", queues(4), [])


def test_by_circle() -> None:
    mqs, clients = queues(8), cids(3)
    strategy = AllocateMessageQueueAveragelyByCircle()
    got = [strategy.allocate("g", c, mqs, clients) for c in clients]
    assert got == [[mqs[0], mqs[3], mqs[6]], [mqs[1], mqs[4], mqs[7]], [mqs[2], mqs[5]]]


def test_md5_hash_is_javas_first_four_digest_bytes() -> None:
    digest = hashlib.md5(b"abc").digest()
    assert md5_hash("abc") == (digest[0] << 24) | (digest[1] << 16) | (digest[2] << 8) | digest[3]


def test_message_queue_str_is_javas_to_string() -> None:
    assert str(MessageQueue("T", "b", 3)) == "MessageQueue [topic=T, brokerName=b, queueId=3]"


def test_consistent_hash_partitions_and_is_stable() -> None:
    mqs = queues(16)
    clients = cids(4)
    strategy = AllocateMessageQueueConsistentHash()
    parts = {c: strategy.allocate("g", c, mqs, clients) for c in clients}
    assert sorted(mq for p in parts.values() for mq in p) == mqs
    # Order of cidAll does not matter, and a second run gives the same answer.
    again = {c: strategy.allocate("g", c, mqs, list(reversed(clients))) for c in clients}
    assert again == parts
    # Removing one client only moves that client's queues.
    survivors = clients[:-1]
    after = {c: strategy.allocate("g", c, mqs, survivors) for c in survivors}
    for c in survivors:
        assert set(parts[c]) <= set(after[c])


def test_consistent_hash_ring_by_hand() -> None:
    # A tiny ring with a fake hash to pin the "first node at or after, wrapping" rule.
    values = {"a-0": 10, "b-0": 20, "q1": 5, "q2": 15, "q3": 25}

    def fake_hash(key: str) -> int:
        return values[key.split("=")[-1].rstrip("]")] if key.startswith("MessageQueue") else values[key]

    mqs = [MessageQueue("T", "x", 1), MessageQueue("T", "x", 2), MessageQueue("T", "x", 3)]
    values["1"], values["2"], values["3"] = 5, 15, 25
    strategy = AllocateMessageQueueConsistentHash(virtual_node_count=1, hash_function=fake_hash)
    assert strategy.allocate("g", "a", mqs, ["a", "b"]) == [mqs[0], mqs[2]]  # 5 -> a(10); 25 wraps -> a
    assert strategy.allocate("g", "b", mqs, ["a", "b"]) == [mqs[1]]  # 15 -> b(20)
