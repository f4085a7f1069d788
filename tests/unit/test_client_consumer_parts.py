"""Consumer parts without sockets: error registry, process queue, local offset store, subscriptions."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from rmq.client.consumer.offset_store import LocalFileOffsetStore, ReadOffsetType
from rmq.client.consumer.process_queue import ProcessQueue
from rmq.client.errors import (
    BROKER_ERRORS,
    MQBrokerError,
    MQClientError,
    OffsetNotFoundError,
    SystemBusyError,
    TopicNotExistError,
    broker_error,
    register_broker_error,
)
from rmq.client.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    ExpressionType,
    HeartbeatData,
    MessageModel,
    build_subscription,
)
from rmq.client.message import MessageExt, MessageQueue
from rmq.common.codes import ResponseCode
from rmq.common.java import java_string_hash

# --- error registry -----------------------------------------------------------------------------------------


def test_broker_error_registry() -> None:
    err = broker_error(17, "No topic route info", "10.0.0.1:10911")
    assert type(err) is TopicNotExistError
    assert isinstance(err, MQBrokerError) and isinstance(err, MQClientError)
    assert (err.code, err.remark, err.addr, err.response_code) == (
        17,
        "No topic route info",
        "10.0.0.1:10911",
        17,
    )
    assert "CODE: 17" in str(err) and "10.0.0.1:10911" in str(err)
    assert type(broker_error(22, None)) is OffsetNotFoundError
    assert type(broker_error(2, "[REJECTREQUEST]")) is SystemBusyError
    unknown = broker_error(4242, "?")
    assert type(unknown) is MQBrokerError and unknown.code == 4242
    restored = pickle.loads(pickle.dumps(err))
    assert type(restored) is TopicNotExistError and restored.remark == err.remark
    for code in (1, 2, 3, 13, 14, 16, 17, 22, 24, 25, 26, 206, 215):
        assert code in BROKER_ERRORS and code in {int(c) for c in ResponseCode}


def test_register_broker_error_rejects_duplicates() -> None:
    with pytest.raises(ValueError, match="already mapped"):

        @register_broker_error(17)
        class Again(MQBrokerError):
            pass


# --- process queue ------------------------------------------------------------------------------------------


def msg(offset: int, size: int = 10) -> MessageExt:
    return MessageExt("T", b"x" * size, queue_offset=offset)


def test_process_queue_concurrent_bookkeeping() -> None:
    pq = ProcessQueue()
    assert pq.remove_messages([msg(0)]) == -1  # nothing held
    batch = [msg(i) for i in range(10, 15)]
    assert pq.put_messages(batch) is True  # first put asks for a consume task
    assert pq.put_messages([msg(15)]) is False  # already consuming
    assert (pq.msg_count, pq.msg_size, pq.max_span, pq.queue_offset_max) == (6, 60, 5, 15)
    assert pq.put_messages([msg(12)]) is False  # duplicate offset ignored
    assert pq.msg_count == 6
    # Out of order completion: the committable offset stays at the smallest held offset.
    assert pq.remove_messages([batch[2]]) == 10
    assert pq.remove_messages([batch[1], batch[0]]) == 13
    assert pq.remove_messages([batch[3], batch[4]]) == 15
    assert pq.remove_messages([msg(15)]) == 16  # all consumed: queue_offset_max + 1
    assert (pq.msg_count, pq.msg_size, pq.max_span) == (0, 0, 0)
    assert not pq.contains_message(batch[0])


def test_process_queue_orderly_take_commit_retry() -> None:
    pq = ProcessQueue()
    pq.put_messages([msg(i) for i in range(5)])
    taken = pq.take_messages(2)
    assert [m.queue_offset for m in taken] == [0, 1]
    pq.make_message_to_consume_again(taken)  # suspend: back in front, in order
    taken = pq.take_messages(3)
    assert [m.queue_offset for m in taken] == [0, 1, 2]
    assert pq.commit() == 3
    assert pq.msg_count == 2
    assert pq.commit() == -1
    taken = pq.take_messages(10)
    assert [m.queue_offset for m in taken] == [3, 4]
    pq.rollback()
    assert [m.queue_offset for m in pq.take_messages(10)] == [3, 4]
    assert pq.commit() == 5
    assert pq.take_messages(1) == [] and pq.consuming is False
    assert pq.put_messages([msg(5)]) is True  # an idle queue dispatches again


def test_process_queue_handles_an_older_offset_arriving_late() -> None:
    pq = ProcessQueue()
    pq.put_messages([msg(10), msg(11)])
    pq.put_messages([msg(5)])  # re-pulled after a reset: kept sorted
    assert [m.queue_offset for m in pq.take_messages(3)] == [5, 10, 11]


def test_process_queue_info_and_expiry() -> None:
    pq = ProcessQueue()
    pq.put_messages([msg(3), msg(4)])
    info = pq.info()
    assert info["cachedMsgCount"] == 2 and info["cachedMsgMinOffset"] == 3 and info["cachedMsgMaxOffset"] == 4
    assert not pq.is_pull_expired() and not pq.is_lock_expired()
    pq.last_lock_timestamp -= 31_000
    pq.last_pull_timestamp -= 121_000
    assert pq.is_lock_expired() and pq.is_pull_expired()


# --- local offset store -------------------------------------------------------------------------------------


async def test_local_offset_store_round_trip(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("10.0.0.1@1", "g", tmp_path)
    a, b = MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)
    store.update_offset(a, 5, True)
    store.update_offset(a, 3, True)  # increase only
    assert await store.read_offset(a, ReadOffsetType.READ_FROM_MEMORY) == 5
    store.update_offset(a, 3, False)  # a seek
    store.update_offset(b, 9, False)
    await store.persist_all([a, b])
    path = tmp_path / "10.0.0.1@1" / "g" / "offsets.json"
    text = path.read_text()
    assert '{"brokerName":"b","queueId":0,"topic":"T"}:3' in text  # the Java client's (fastjson) form
    again = LocalFileOffsetStore("10.0.0.1@1", "g", tmp_path)
    again.load()
    assert again.clone_offset_table() == {a: 3, b: 9}
    assert await again.read_offset(MessageQueue("T", "b", 7), ReadOffsetType.READ_FROM_STORE) == -1
    assert await again.read_offset(b, ReadOffsetType.MEMORY_FIRST_THEN_STORE) == 9
    # A second write keeps the previous version as .bak; a broken main file falls back to it.
    store.update_offset(a, 4, True)
    await store.persist_all([a])
    assert path.with_name("offsets.json.bak").exists()
    path.write_text("{broken")
    fallback = LocalFileOffsetStore("10.0.0.1@1", "g", tmp_path)
    fallback.load()
    assert fallback.clone_offset_table() == {a: 3, b: 9}


async def test_local_offset_store_reads_strict_json_keys(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("c", "g", tmp_path)
    store.path.parent.mkdir(parents=True)
    key = json.dumps({"topic": "T", "brokerName": "b", "queueId": 2})
    store.path.write_text(json.dumps({"offsetTable": {key: 11}}))
    store.load()
    assert store.clone_offset_table() == {MessageQueue("T", "b", 2): 11}


# --- subscriptions and heartbeat ----------------------------------------------------------------------------


def test_build_subscription_tags() -> None:
    sub = build_subscription("T", " TagA || TagB||  || TagA ")
    assert sub.sub_string == " TagA || TagB||  || TagA "
    assert sub.tags_set == ["TagA", "TagB"]
    assert sub.code_set == [java_string_hash("TagA"), java_string_hash("TagB")]
    for everything in (None, "", "*"):
        sub = build_subscription("T", everything)
        assert sub.sub_string == "*" and sub.tags_set == []
    sql = build_subscription("T", "a > 5", ExpressionType.SQL92)
    assert sql.expression_type == "SQL92" and sql.tags_set == []
    with pytest.raises(MQClientError):
        build_subscription("T", " ", ExpressionType.SQL92)


def test_heartbeat_body_shape() -> None:
    sub = build_subscription("T", "A")
    data = HeartbeatData(
        "ip@1",
        ["pg"],
        [
            ConsumerData(
                "cg",
                ConsumeType.CONSUME_PASSIVELY,
                MessageModel.CLUSTERING,
                ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                [sub],
            )
        ],
    ).to_dict()
    assert data["clientID"] == "ip@1"
    assert data["producerDataSet"] == [{"groupName": "pg"}]
    consumer = data["consumerDataSet"][0]
    assert consumer["consumeType"] == "CONSUME_PASSIVELY" and consumer["messageModel"] == "CLUSTERING"
    assert consumer["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET" and consumer["unitMode"] is False
    s = consumer["subscriptionDataSet"][0]
    assert (
        s["topic"] == "T" and s["subString"] == "A" and s["tagsSet"] == ["A"] and s["expressionType"] == "TAG"
    )
    assert s["classFilterMode"] is False and isinstance(s["subVersion"], int)


# --- compute_pull_from_where -------------------------------------------------------------------------------


class FakeStore:
    def __init__(self, stored: int) -> None:
        self.stored = stored

    async def read_offset(self, mq: MessageQueue, kind: ReadOffsetType) -> int:
        assert kind is ReadOffsetType.READ_FROM_STORE
        return self.stored


@pytest.mark.parametrize(
    ("where", "stored", "topic", "expected"),
    [
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, 7, "T", 7),  # a stored offset always wins
        (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, 7, "T", 7),
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, -1, "T", 100),  # max offset
        (ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, -1, "%RETRY%g", 0),
        (ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET, -1, "T", 100),  # deprecated: like LAST in 4.9
        (ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, -1, "T", 0),
        (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, -1, "T", 42),  # search by timestamp
        (ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, -1, "%RETRY%g", 100),
    ],
)
async def test_compute_pull_from_where(
    where: ConsumeFromWhere, stored: int, topic: str, expected: int
) -> None:
    from datetime import datetime

    from rmq.client.consumer.base import ConsumerBase

    searched: list[int] = []

    class Probe(ConsumerBase):
        async def max_offset(self, mq: MessageQueue) -> int:
            return 100

        async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
            searched.append(timestamp_ms)
            return 42

    consumer = Probe(
        "g", namesrv_addr="127.0.0.1:1", consume_from_where=where, consume_timestamp="20240102030405"
    )
    consumer._offset_store = FakeStore(stored)  # type: ignore[assignment]
    assert await consumer.compute_pull_from_where(MessageQueue(topic, "b", 0)) == expected
    if searched:
        assert searched == [int(datetime(2024, 1, 2, 3, 4, 5).timestamp() * 1000)]


async def test_compute_pull_from_where_refuses_to_guess_when_the_broker_is_unreachable() -> None:
    from rmq.client.consumer.base import ConsumerBase

    consumer = ConsumerBase("g", namesrv_addr="127.0.0.1:1")
    consumer._offset_store = FakeStore(-2)  # type: ignore[assignment]
    with pytest.raises(MQClientError):
        await consumer.compute_pull_from_where(MessageQueue("T", "b", 0))
