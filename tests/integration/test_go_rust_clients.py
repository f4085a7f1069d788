"""The Go client (``github.com/apache/rocketmq-client-go/v2``) and the Rust client (``rocketmq-client-rust``
from crates.io) against a real ``python -m rmq.broker``, unchanged, no proxy.

Each scenario runs the client's driver (``tests/clients/go``, ``tests/clients/rust``, built once and cached
by ``tests/clients/drivers.py``) as a child process: sync send with tags and keys (each message then read back
with rmq's own client by its offset message id), async, oneway and batch sends (the topic then read back with
rmq's own client: every message exactly once, intact), push consumer clustering, broadcasting, orderly, tag
and SQL92 subscriptions, transactions (commit, rollback, and an unknown state settled by the broker's
check-back), delay level 1, retry (the first delivery of each message fails, the redelivery carries
reconsumeTimes 1), dead letters after maxReconsumeTimes 2 (``%DLQ%<group>`` read back with rmq's own client)
and the classic pull consumer (every queue read from offset 0, the offsets stored on the broker); and that
the network thread's fast path declines none of the client's sends for what they carry. Each driver
produces what it consumes and prints one JSON result; these tests check it.

The broker's delay levels are all 1 s, so retries (level 3 + reconsumeTimes unless the client picks one)
come back after 1 s.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rmq.client import LitePullConsumer, MessageExt, MessageQueue
from rmq.client import sync as rmq_sync
from rmq.client.config import ClientConfig
from rmq.common.codes import MessageConst

from tests.brokerproc import BrokerProcess, start_broker
from tests.clients import drivers
from tests.fastsend import delta, fast_send_stats
from tests.integration.semantics_helpers import unique

COUNT = 6
TIMEOUT = "60"
CLIENTS = ["go", "rust"]
LEVELS = " ".join(["1s"] * 18)
DLQ_MAX_RECONSUME_TIMES = 2  # the drivers' dlq scenario


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(
        tmp_path_factory.mktemp("peerbroker"),
        "transactionCheckInterval=1000",
        "transactionTimeOut=1000",
        f"messageDelayLevel={LEVELS}",
        "enablePropertyFilter=true",
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
    result["topic"], result["group"] = topic, group
    for sent in result.get("sent", []):
        assert "error" not in sent, (sent, result["_stderr"])
        assert sent["status"] == 0, sent
    return result


def seqs(received: list[dict[str, Any]]) -> set[int]:
    return {int(m["props"]["seq"]) for m in received}


def check_stored_intact(m: MessageExt, topic: str) -> int:
    """The seq of a message read with rmq's own client, after checking it is the driver's message ``seq``."""
    i = int(m.get_property("seq") or -1)
    assert m.topic == topic
    assert m.body == f"{topic}#{i}".encode()
    assert m.tags == ("TagA" if i % 2 == 0 else "TagB")
    assert m.keys == f"k{i} kk{i}"
    return i


async def stored(broker: BrokerProcess, topic: str, count: int, timeout: float = 30.0) -> list[MessageExt]:
    """Every message stored in ``topic``, read with rmq's own client from each queue's first offset to its
    last, once the queues hold at least ``count`` (a oneway send is not acknowledged)."""
    group = unique("reader")
    consumer = LitePullConsumer(group, client_config=ClientConfig(namesrv_addr=broker.namesrv_addr))
    await consumer.start()
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                mqs = await consumer.fetch_message_queues(topic)
                ends = {mq: await consumer.max_offset(mq) for mq in mqs}
            except Exception:  # no route yet: the topic is created by its first message
                ends = {}
            if sum(ends.values()) >= count:
                break
            assert time.monotonic() < deadline, f"{topic} holds {sum(ends.values())} of {count}"
            await asyncio.sleep(0.1)
        consumer.assign(ends)
        for mq in ends:
            await consumer.seek(mq, 0)
        got: list[MessageExt] = []
        while len(got) < sum(ends.values()):
            assert time.monotonic() < deadline, f"read {len(got)} of {sum(ends.values())} in {topic}"
            got += await consumer.poll(200)
        return got
    finally:
        await consumer.shutdown()


def exactly_once(msgs: list[MessageExt], topic: str) -> dict[int, MessageExt]:
    """The messages by seq, after checking each of seqs 0..COUNT-1 is there once, intact."""
    seq_list = [check_stored_intact(m, topic) for m in msgs]
    assert sorted(seq_list) == list(range(COUNT)), Counter(seq_list)
    return {check_stored_intact(m, topic): m for m in msgs}


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


async def test_async_send_stores_every_message_once(
    client: tuple[str, Path], broker: BrokerProcess, tmp_path: Path
) -> None:
    result = run(client, "async", broker, tmp_path)
    assert sorted(s["i"] for s in result["sent"]) == list(range(COUNT))
    by_seq = exactly_once(await stored(broker, result["topic"], COUNT), result["topic"])
    for sent in result["sent"]:
        m = by_seq[sent["i"]]
        assert (m.queue_id, m.queue_offset) == (sent["queue_id"], sent["queue_offset"])
        assert m.get_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == sent["msg_id"]


async def test_oneway_send_stores_every_message_once(
    client: tuple[str, Path], broker: BrokerProcess, tmp_path: Path
) -> None:
    result = run(client, "oneway", broker, tmp_path)
    assert result["oneway"] == [{"i": i} for i in range(COUNT)]  # no error
    exactly_once(await stored(broker, result["topic"], COUNT), result["topic"])


async def test_batch_send_stores_each_message_once(
    client: tuple[str, Path], broker: BrokerProcess, tmp_path: Path
) -> None:
    result = run(client, "batch", broker, tmp_path)
    batch = result["batch"]
    assert "error" not in batch and batch["status"] == 0, batch
    by_seq = exactly_once(await stored(broker, result["topic"], COUNT), result["topic"])
    # one queue, consecutive offsets in the batch's order, one offset message id each
    assert [(by_seq[i].queue_id, by_seq[i].queue_offset) for i in range(COUNT)] == [
        (batch["queue_id"], batch["queue_offset"] + i) for i in range(COUNT)
    ]
    assert batch["offset_msg_id"].split(",") == [by_seq[i].offset_msg_id for i in range(COUNT)]
    uniq_keys = [by_seq[i].get_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) for i in range(COUNT)]
    if client[0] == "go":
        # rocketmq-client-go 2.1.2 gives the messages of a batch no UNIQ_KEY (producer.go buildSendRequest
        # sets one only when !msg.Batch), so its result's msg id is empty; the broker adds none either
        assert batch["msg_ids"] == [""] and uniq_keys == [None] * COUNT
    else:
        assert batch["msg_ids"] == uniq_keys


def test_sends_take_the_fast_path(client: tuple[str, Path], broker: BrokerProcess, tmp_path: Path) -> None:
    """Sync, batch, async and oneway sends of the client, to one topic, as the network thread's fast path
    counts them: none declined for what it sent (its header, properties, batch, ...). A request is left to
    Python only as the first to the new topic (Python creates and vets it) or when it arrived behind a
    request Python was still handling (``Queued``: a driver's sends follow its start-up heartbeat on the
    same connection, so its one batch often is), so only the sync sends after the first are sure to be
    taken."""
    name, exe = client
    topic, group = unique(f"{name}_fast"), unique(f"{name}_fast_g")
    scenarios = [("send", COUNT), ("batch", 1), ("async", COUNT), ("oneway", COUNT), ("batch", 1)]
    before = fast_send_stats(broker.broker_addr)
    for scenario, _requests in scenarios:
        result = drivers.run(
            exe,
            scenario,
            *("-namesrv", broker.namesrv_addr, "-topic", topic, "-group", group),
            *("-count", str(COUNT), "-timeout", TIMEOUT),
            home=tmp_path / "home",
        )
        assert result["_exit"] == 0 and "error" not in result, result
    requests = sum(r for _s, r in scenarios)
    # the driver does not wait for its oneway requests to be answered: wait until the broker counted them
    deadline = time.monotonic() + 30
    while True:
        d = delta(before, fast_send_stats(broker.broker_addr))
        if d["taken"] + d["declined"] >= requests or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert d["taken"] + d["declined"] == requests, d
    assert d["declined"] == d["Topic"] + d["Queued"] and d["Topic"] <= 1, f"the fast path declined sends: {d}"
    assert d["taken"] >= COUNT - 1, d


def test_push_consumer_broadcasting(client: tuple[str, Path], broker: BrokerProcess, tmp_path: Path) -> None:
    result = run(client, "broadcasting", broker, tmp_path)
    assert result["complete"], result
    per_consumer: dict[str, list[int]] = defaultdict(list)
    for m in result["received"]:
        check_intact(m, result["topic"])
        per_consumer[m["consumer"]].append(int(m["props"]["seq"]))
    assert {c: sorted(got) for c, got in per_consumer.items()} == {
        "c1": list(range(COUNT)),
        "c2": list(range(COUNT)),
    }


def test_push_consumer_tag_subscription(
    client: tuple[str, Path], broker: BrokerProcess, tmp_path: Path
) -> None:
    result = run(client, "tag", broker, tmp_path)
    assert result["complete"], result
    assert [m["tags"] for m in result["received"]] == ["TagA"] * len(result["received"])
    assert sorted(seqs_list(result["received"])) == list(range(0, COUNT, 2))
    for m in result["received"]:
        check_intact(m, result["topic"])


def test_push_consumer_sql92_subscription(
    client: tuple[str, Path], broker: BrokerProcess, tmp_path: Path
) -> None:
    result = run(client, "sql92", broker, tmp_path)  # "seq >= 2 AND seq < 5"
    assert result["complete"], result
    assert sorted(seqs_list(result["received"])) == [2, 3, 4]
    for m in result["received"]:
        check_intact(m, result["topic"])


async def test_dlq_after_max_reconsume_times(
    client: tuple[str, Path], broker: BrokerProcess, tmp_path: Path
) -> None:
    result = run(client, "dlq", broker, tmp_path)
    assert result["complete"], result
    topic, dlq = result["topic"], f"%DLQ%{result['group']}"
    deliveries: dict[int, list[int]] = defaultdict(list)
    for m in result["received"]:
        check_intact(m, topic)
        deliveries[int(m["props"]["seq"])].append(m["reconsume_times"])
    assert {i: sorted(times) for i, times in deliveries.items()} == {
        i: list(range(DLQ_MAX_RECONSUME_TIMES + 1)) for i in range(COUNT)
    }
    assert sorted(seqs_list(result["dead"])) == list(range(COUNT))  # the client read its DLQ
    letters = await stored(broker, dlq, COUNT)
    assert sorted(int(m.get_property("seq") or -1) for m in letters) == list(range(COUNT))
    for m in letters:
        i = int(m.get_property("seq") or -1)
        assert (m.topic, m.body, m.keys, m.tags) == (
            dlq,
            f"{topic}#{i}".encode(),
            f"k{i} kk{i}",
            "TagA" if i % 2 == 0 else "TagB",
        )
        assert m.reconsume_times == DLQ_MAX_RECONSUME_TIMES + 1
        assert m.get_property(MessageConst.RETRY_TOPIC) == topic


async def test_pull_consumer_reads_queues_and_stores_offsets(
    client: tuple[str, Path], broker: BrokerProcess, tmp_path: Path
) -> None:
    result = run(client, "pull", broker, tmp_path)
    assert result["complete"], result
    assert sorted(seqs_list(result["received"])) == list(range(COUNT))
    for m in result["received"]:
        check_intact(m, result["topic"])
    if client[0] == "rust":
        # rocketmq-client-rust 1.0.0's DefaultMQPullConsumer keeps update_consume_offset in memory: offsets
        # are persisted only for subscribed or assigned queues (default_lite_pull_consumer_impl.rs,
        # persist_consumer_offset, also on shutdown), and a classic pull consumer's are neither, so none
        # reaches the broker (there is no persist call in its API either)
        return
    consumer = LitePullConsumer(result["group"], client_config=ClientConfig(namesrv_addr=broker.namesrv_addr))
    await consumer.start()
    try:
        mqs = await consumer.fetch_message_queues(result["topic"])
        ends = {str(mq.queue_id): await consumer.max_offset(mq) for mq in mqs}
        assert result["offsets"] == ends  # each queue read to its end
        deadline = time.monotonic() + 10
        while (committed := await committed_offsets(consumer, mqs)) != ends:
            assert time.monotonic() < deadline, committed  # stored oneway
            await asyncio.sleep(0.1)
    finally:
        await consumer.shutdown()


async def committed_offsets(consumer: LitePullConsumer, mqs: set[MessageQueue]) -> dict[str, int]:
    return {str(mq.queue_id): await consumer.committed(mq) for mq in mqs}


def seqs_list(received: list[dict[str, Any]]) -> list[int]:
    return [int(m["props"]["seq"]) for m in received]
