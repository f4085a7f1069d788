"""The native store through its Python binding."""

from __future__ import annotations

import asyncio
import time

import pytest
from rmq.store import (
    AsyncStore,
    MessageIllegalError,
    MessageStore,
    StoreConfigError,
    StoreLockedError,
    decode_offset_msg_id,
    decode_records,
    encode_batch_body,
    java_string_hash,
    offset_msg_id,
)


def props(**kv: str) -> bytes:
    return "\x02".join(f"{k}\x01{v}" for k, v in kv.items()).encode()


def open_store(path, **extra) -> MessageStore:
    cfg = {
        "storePathRootDir": str(path),
        "mappedFileSizeCommitLog": 1 << 20,
        "mappedFileSizeConsumeQueue": 20 * 1000,
        "maxHashSlotNum": 1000,
        "maxIndexNum": 4000,
        "storeHost": "127.0.0.1:10911",
    }
    cfg.update(extra)
    return MessageStore(cfg)


def test_put_get_roundtrip_and_statuses(tmp_path):
    s = open_store(tmp_path)
    try:
        r = s.put("T", 1, b"hello", props(TAGS="TagA", KEYS="k1 k2"), born_host="10.0.0.9:4321")
        msg_id, qoff, phys, size, ts = r
        assert qoff == 0 and phys == 0
        assert msg_id == offset_msg_id("127.0.0.1:10911", 0)
        assert decode_offset_msg_id(msg_id) == ("127.0.0.1:10911", 0)
        s.put("T", 1, b"world", props(TAGS="TagB"))
        assert s.wait_dispatched(s.commitlog_max_offset(), 5000)
        status, nxt, mn, mx, buf, n = s.get_message("T", 1, 0, 32)
        assert (status, nxt, mn, mx, n) == ("FOUND", 2, 0, 2, 2)
        recs = decode_records(buf, check_crc=True)
        assert [x[12] for x in recs] == [b"hello", b"world"]
        assert recs[0][7] == "10.0.0.9:4321" and recs[0][9] == "127.0.0.1:10911"
        assert recs[0][8] == ts and recs[0][14] == size
        # Tag filter by code.
        status, nxt, *_, n = s.get_message("T", 1, 0, 32, [java_string_hash("TagB")])
        assert (status, nxt, n) == ("FOUND", 2, 1)
        status, nxt, *_ = s.get_message("T", 1, 0, 32, [java_string_hash("TagC")])
        assert (status, nxt) == ("NO_MATCHED_MESSAGE", 2)
        assert s.get_message("T", 1, 2)[0:2] == ("OFFSET_OVERFLOW_ONE", 2)
        assert s.get_message("T", 1, 9)[0:2] == ("OFFSET_OVERFLOW_BADLY", 2)  # back to the end, as 4.9
        assert s.get_message("T", 7, 0)[0] == "NO_MATCHED_LOGIC_QUEUE"
        assert s.lookup(phys) is not None and decode_records(s.lookup(phys))[0][12] == b"hello"
        assert s.lookup(3) is None
        recs, _, _ = s.query_by_key("T", "k2", 10, 0, int(time.time() * 1000) + 1000)
        assert [decode_records(b)[0][12] for b in recs] == [b"hello"]
        assert s.query_by_key("U", "k2", 10, 0, 2**62)[0] == []
        assert s.min_offset("T", 1) == 0 and s.max_offset("T", 1) == 2
        assert s.offset_by_time("T", 1, 0) == 0
        assert s.offset_by_time("T", 1, ts + 10_000) == 2
        assert s.earliest_message_time("T", 1) == ts
        assert ("T", 1) in s.queues()
    finally:
        s.shutdown()


def test_batch_and_errors(tmp_path):
    s = open_store(tmp_path)
    try:
        body = encode_batch_body([(0, b"a", props(UNIQ_KEY="u1")), (0, b"b", b"")])
        rs = s.put_batch("B", 0, body, props(CLUSTER="c"))
        assert [r[1] for r in rs] == [0, 1]
        s.wait_dispatched(s.commitlog_max_offset(), 5000)
        recs = decode_records(s.get_message("B", 0, 0)[4])
        assert [r[13] for r in recs] == ["UNIQ_KEY\x01u1\x02CLUSTER\x01c", "CLUSTER\x01c"]
        with pytest.raises(MessageIllegalError, match="127"):
            s.put("x" * 128, 0, b"a")
        with pytest.raises(MessageIllegalError):
            s.put_batch("B", 0, body[:-2])
        with pytest.raises(MessageIllegalError, match="ip:port"):
            s.put("T", 0, b"a", born_host="nonsense")
        with pytest.raises(StoreLockedError):
            open_store(tmp_path)
    finally:
        s.shutdown()
    with pytest.raises(StoreConfigError, match="unknown store property"):
        MessageStore({"storePathRootDir": str(tmp_path / "x"), "noSuchThing": "1"})
    with pytest.raises(StoreConfigError, match="flushDiskType"):
        MessageStore({"storePathRootDir": str(tmp_path / "y"), "flushDiskType": "MAYBE"})


def test_reopen_keeps_offsets(tmp_path):
    s = open_store(tmp_path)
    for i in range(10):
        s.put("T", 0, b"m%d" % i)
    s.shutdown()
    s = open_store(tmp_path)
    try:
        assert s.recovery_report()["last_shutdown"] == "clean"
        assert s.max_offset("T", 0) == 10
        assert s.put("T", 0, b"next")[1] == 10
    finally:
        s.shutdown()


async def test_sync_flush_awaited_while_loop_serves_others(tmp_path):
    s = open_store(tmp_path, flushDiskType="SYNC_FLUSH")
    a = AsyncStore(s)
    ticks = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    async def writer(n: int) -> list[int]:
        acked = []
        for _ in range(50):
            _, qoff, phys, size, _ = s.put("S", n, b"x" * 512)
            await a.wait_flushed(phys + size, timeout=10)
            assert s.flushed_offset() >= phys + size
            acked.append(qoff)
        return acked

    t = asyncio.create_task(ticker())
    try:
        results = await asyncio.gather(*(writer(n) for n in range(8)))
        for acked in results:
            assert acked == list(range(50))
        # The loop kept running other tasks while writers waited for the group commit.
        assert ticks > 100
        # Long-poll style wait for dispatch.
        assert await a.wait_dispatched(s.commitlog_max_offset(), timeout=5)
    finally:
        stop.set()
        await t
        a.close()
        s.shutdown()
