"""The admin requests behind mqadmin's cleanExpiredCQ, cleanUnusedTopic and deleteExpiredCommitLog
(CLEAN_EXPIRED_CONSUMEQUEUE 306, CLEAN_UNUSED_TOPIC 316, DELETE_EXPIRED_COMMITLOG 329), against the
broker's processors and a real store with small CommitLog files. tests/peers/test_mqadmin.py runs the
commands themselves against rmq and Apache RocketMQ."""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from typing import Any

from rmq.common.codes import RequestCode, ResponseCode

from tests.broker.test_processors import Broker

FILE = 64 * 1024


async def call(b: Broker, code: int, fields: dict[str, str] | None = None) -> Any:
    r = b.call(code, fields or {})
    return await r if inspect.isawaitable(r) else r


def fill(b: Broker, topic: str, qid: int, n: int, size: int = 1024) -> int:
    """`n` messages of `size` bytes to one queue; returns where the log ends."""
    for i in range(n):
        b.store.put(topic, qid, b"%06d" % i + b"x" * (size - 6))
    end = b.store.commitlog_max_offset()
    assert b.store.wait_dispatched(end, 5000)
    return end


async def test_delete_expired_commit_log_deletes_expired_files_at_any_hour(tmp_path):
    # fileReservedTime=0: every file is expired; deleteWhen=99: never the hour.
    b = Broker(
        str(tmp_path),
        mappedFileSizeCommitLog=str(FILE),
        fileReservedTime="0",
        deleteWhen="99",
        cleanResourceInterval="20",
        deleteCommitLogFilesInterval="0",
    )
    try:
        fill(b, "T", 0, 300)  # about 5 files
        await asyncio.sleep(0.3)  # retention rounds run; none deletes
        assert b.store.commitlog_min_offset() == 0
        resp = await call(b, RequestCode.DELETE_EXPIRED_COMMITLOG)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        deadline = time.monotonic() + 10
        while b.store.commitlog_min_offset() == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert b.store.commitlog_min_offset() > 0
        # The newest file stays, with what it holds.
        assert b.store.min_offset("T", 0) > 0
        assert b.store.max_offset("T", 0) == 300
    finally:
        b.close()


async def test_clean_expired_consume_queue_removes_queues_retention_emptied(tmp_path):
    b = Broker(str(tmp_path), mappedFileSizeCommitLog=str(FILE), mappedFileSizeConsumeQueue="6000")
    try:
        fill(b, "T", 0, 150)  # queue 0: only in the first files
        fill(b, "T", 1, 150)  # queue 1: through the last one
        resp = await call(b, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
        assert resp.code == ResponseCode.SUCCESS
        assert sorted(b.store.queues()) == [("T", 0), ("T", 1)], "nothing expired yet"
        assert b.store.delete_expired_files(0, True) > 0
        assert b.store.min_offset("T", 0) == b.store.max_offset("T", 0) == 150  # all deleted
        resp = await call(b, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
        assert resp.code == ResponseCode.SUCCESS
        assert b.store.queues() == [("T", 1)]
        assert not os.path.exists(tmp_path / "consumequeue" / "T" / "0")
        # The queue starts again at 0, as in RocketMQ; queue 1 keeps its offsets.
        assert b.store.put("T", 0, b"again")[1] == 0
        assert b.store.put("T", 1, b"next")[1] == 150
    finally:
        b.close()


async def test_clean_unused_topic_removes_queues_without_a_topic_config(tmp_path):
    b = Broker(str(tmp_path))
    try:
        resp = await call(
            b,
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {"topic": "Kept", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"},
        )
        assert resp.code == ResponseCode.SUCCESS
        # Queues of a topic with a config, of one without (a config lost, a store copied in), and of
        # the topics rmq writes without a config of their own.
        for topic in ("Kept", "Orphan", "RMQ_SYS_TRANS_HALF_TOPIC", "SCHEDULE_TOPIC_XXXX", "%RETRY%g"):
            b.store.put(topic, 0, b"x")
        assert b.store.wait_dispatched(b.store.commitlog_max_offset(), 5000)
        resp = await call(b, RequestCode.CLEAN_UNUSED_TOPIC)
        assert resp.code == ResponseCode.SUCCESS
        left = sorted(t for t, _ in b.store.queues())
        assert left == ["%RETRY%g", "Kept", "RMQ_SYS_TRANS_HALF_TOPIC", "SCHEDULE_TOPIC_XXXX"]
        assert not os.path.exists(tmp_path / "consumequeue" / "Orphan")
        assert b.store.put("Orphan", 0, b"again")[1] == 0
    finally:
        b.close()
