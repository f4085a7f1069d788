"""The Go client (``github.com/apache/rocketmq-client-go/v2``) and the Rust client (``rocketmq-client-rust``
from crates.io) against a real ``python -m rmq.broker``, unchanged, no proxy.

Each scenario runs the client's driver (``tests/clients/go``, ``tests/clients/rust``, built once and cached
by ``tests/clients/drivers.py``) as a child process: sync send with tags and keys (each message then read back
with rmq's own client by its offset message id), push consumer clustering, orderly, transactions (commit,
rollback, and an unknown state settled by the broker's check-back), delay level 1, and retry (the first
delivery of each message fails, the redelivery carries reconsumeTimes 1). Each driver produces what it
consumes and prints one JSON result; these tests check it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rmq.client import sync as rmq_sync
from rmq.client.config import ClientConfig

from tests.brokerproc import BrokerProcess, start_broker
from tests.clients import drivers
from tests.integration.semantics_helpers import unique

COUNT = 6
TIMEOUT = "60"
CLIENTS = ["go", "rust"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(
        tmp_path_factory.mktemp("peerbroker"), "transactionCheckInterval=1000", "transactionTimeOut=1000"
    )
    yield proc
    proc.stop()


@pytest.fixture(scope="module", params=CLIENTS)
def client(request: pytest.FixtureRequest) -> tuple[str, Path]:
    return request.param, drivers.build(request.param)


def run(client: tuple[str, Path], scenario: str, broker: BrokerProcess, tmp_path: Path) -> dict[str, Any]:
    name, exe = client
    topic, group = unique(f"{name}_{scenario}"), unique(f"{name}_{scenario}_g")
    result = drivers.run(
        exe,
        scenario,
        "-namesrv",
        broker.namesrv_addr,
        "-topic",
        topic,
        "-group",
        group,
        "-count",
        str(COUNT),
        "-timeout",
        TIMEOUT,
        home=tmp_path / "home",
    )
    assert "error" not in result, result
    assert result["_exit"] == 0, result
    result["topic"] = topic
    for sent in result.get("sent", []):
        assert "error" not in sent, (sent, result["_stderr"])
        assert sent["status"] == 0, sent
    return result


def seqs(received: list[dict[str, Any]]) -> set[int]:
    return {int(m["props"]["seq"]) for m in received}


def check_intact(m: dict[str, Any], topic: str) -> None:
    i = int(m["props"]["seq"])
    assert m["topic"] == topic
    assert m["body"] == f"{topic}#{i}"
    assert m["tags"] == ("TagA" if i % 2 == 0 else "TagB")
    assert m["keys"] == f"k{i} kk{i}"


def test_sync_send_with_tags_and_keys(
    client: tuple[str, Path], broker: BrokerProcess, tmp_path: Path
) -> None:
    result = run(client, "send", broker, tmp_path)
    topic = result["topic"]
    assert [s["i"] for s in result["sent"]] == list(range(COUNT))
    with rmq_sync.Producer(
        unique("viewer"), client_config=ClientConfig(namesrv_addr=broker.namesrv_addr)
    ) as p:
        for sent in result["sent"]:
            i = sent["i"]
            stored = p.view_message(sent["offset_msg_id"])
            assert (stored.topic, stored.queue_id, stored.queue_offset) == (
                topic,
                sent["queue_id"],
                sent["queue_offset"],
            )
            assert stored.body == f"{topic}#{i}".encode()
            assert stored.tags == ("TagA" if i % 2 == 0 else "TagB")
            assert stored.keys == f"k{i} kk{i}"
            assert stored.get_property("seq") == str(i)
            assert stored.get_property("UNIQ_KEY") == sent["msg_id"]


def test_push_consumer_clustering(client: tuple[str, Path], broker: BrokerProcess, tmp_path: Path) -> None:
    result = run(client, "clustering", broker, tmp_path)
    assert result["complete"], result
    assert seqs(result["received"]) == set(range(COUNT))
    for m in result["received"]:
        check_intact(m, result["topic"])
        assert m["reconsume_times"] == 0


def test_push_consumer_orderly(client: tuple[str, Path], broker: BrokerProcess, tmp_path: Path) -> None:
    result = run(client, "orderly", broker, tmp_path)
    assert result["complete"], result
    assert seqs(result["received"]) == set(range(COUNT))
    queue_of_shard = {}
    per_queue: dict[int, list[int]] = defaultdict(list)
    for sent in result["sent"]:
        queue_of_shard.setdefault(sent["i"] % 4, sent["queue_id"])
        assert queue_of_shard[sent["i"] % 4] == sent["queue_id"]  # one queue per sharding key
    for m in result["received"]:
        check_intact(m, result["topic"])
        per_queue[m["queue_id"]].append(int(m["props"]["seq"]))
    for queue, order in per_queue.items():
        assert order == sorted(order), (queue, order)


def test_transactions_commit_rollback_and_check(
    client: tuple[str, Path], broker: BrokerProcess, tmp_path: Path
) -> None:
    result = run(client, "transaction", broker, tmp_path)
    assert result["complete"], result
    committed = {i for i in range(COUNT) if i % 3 != 1}
    assert seqs(result["received"]) == committed
    unknown = {i for i in range(COUNT) if i % 3 == 2}
    assert unknown <= {int(s) for s in result["checks"]}  # settled by the broker's check-back
    for m in result["received"]:
        check_intact(m, result["topic"])


def test_delay_level(client: tuple[str, Path], broker: BrokerProcess, tmp_path: Path) -> None:
    result = run(client, "delay", broker, tmp_path)
    assert result["complete"], result
    assert seqs(result["received"]) == set(range(COUNT))
    for m in result["received"]:
        check_intact(m, result["topic"])
        assert m["props"].get("DELAY") == "1"
        # level 1 is 1 s: the copy stored in the real topic is written no earlier than that after the send
        assert m["store_timestamp"] - m["born_timestamp"] >= 1000, m


def test_retry_after_a_failed_delivery(
    client: tuple[str, Path], broker: BrokerProcess, tmp_path: Path
) -> None:
    result = run(client, "retry", broker, tmp_path)
    assert result["complete"], result
    by_times: dict[int, set[int]] = defaultdict(set)
    for m in result["received"]:
        check_intact(m, result["topic"])
        by_times[m["reconsume_times"]].add(int(m["props"]["seq"]))
    assert by_times[0] == set(range(COUNT))
    assert by_times[1] == set(range(COUNT))
