"""What rmq writes, read back with an independent reader written from REMOTING.md."""

from __future__ import annotations

import os
import re

from rmq.store import MessageStore, encode_batch_body

from tests.storefmt import (
    MAGIC_BLANK,
    index_lookup,
    java_hash,
    read_checkpoint,
    read_commitlog,
    read_consume_queue,
    read_index_file,
)

CL_SIZE = 64 * 1024
CQ_SIZE = 20 * 10
SLOTS = 97
ENTRIES = 64


def props(**kv: str) -> bytes:
    return "\x02".join(f"{k}\x01{v}" for k, v in kv.items()).encode()


def test_store_directory_matches_rocketmq_layout(tmp_path):
    s = MessageStore(
        {
            "storePathRootDir": str(tmp_path),
            "mappedFileSizeCommitLog": CL_SIZE,
            "mappedFileSizeConsumeQueue": CQ_SIZE,
            "maxHashSlotNum": SLOTS,
            "maxIndexNum": ENTRIES,
            "storeHost": "10.1.2.3:10911",
        }
    )
    sent = []
    for i in range(120):
        topic = ("Orders", "Audit")[i % 2]
        tag = ("TagA", "TagB", "")[i % 3]
        kv = {"KEYS": f"order-{i} shared", "UNIQ_KEY": f"U{i:06d}"}
        if tag:
            kv["TAGS"] = tag
        body = os.urandom(200 + i * 7)
        r = s.put(topic, i % 3, body, props(**kv), flag=i, born_timestamp=1_700_000_000_000 + i)
        sent.append((topic, i % 3, body, tag, kv, r))
    batch = encode_batch_body([(0, b"b1", props(TAGS="TagA")), (0, b"b2", b"")])
    s.put_batch("Orders", 0, batch, props(CLUSTER="DefaultCluster"))
    assert s.wait_dispatched(s.commitlog_max_offset(), 5000)
    s.shutdown()

    # Directory layout.
    assert {"checkpoint", "commitlog", "consumequeue", "index", "lock"} <= set(os.listdir(tmp_path))
    assert not (tmp_path / "abort").exists()
    names = sorted(os.listdir(tmp_path / "commitlog"))
    assert len(names) >= 2, "120 messages of ~600 B must roll 64 KiB files"
    assert names[:2] == ["00000000000000000000", f"{CL_SIZE:020d}"]

    # CommitLog: every record decodes with the right fields; files end in a blank.
    recs = read_commitlog(str(tmp_path / "commitlog"), CL_SIZE)
    assert len(recs) == 122
    for (topic, qid, body, tag, kv, r), rec in zip(sent, recs, strict=False):
        assert (rec.topic, rec.queue_id, rec.body) == (topic, qid, body)
        assert rec.physical_offset == r[2] and rec.queue_offset == r[1] and rec.total_size == r[3]
        assert rec.store_host == ("10.1.2.3", 10911)
        assert rec.properties["KEYS"] == kv["KEYS"]
        assert rec.properties.get("TAGS", "") == tag
    with open(tmp_path / "commitlog" / names[0], "rb") as f:
        data = f.read()
    last_in_first = max((r for r in recs if r.physical_offset < CL_SIZE), key=lambda r: r.physical_offset)
    blank_at = last_in_first.physical_offset + last_in_first.total_size
    assert int.from_bytes(data[blank_at : blank_at + 4], "big") == CL_SIZE - blank_at
    assert int.from_bytes(data[blank_at + 4 : blank_at + 8], "big") == MAGIC_BLANK
    assert recs[-2].properties == {"TAGS": "TagA", "CLUSTER": "DefaultCluster"}

    # ConsumeQueues: one 20-byte unit per message, tags code = String.hashCode(TAGS).
    by_queue: dict[tuple[str, int], list] = {}
    for rec in recs:
        by_queue.setdefault((rec.topic, rec.queue_id), []).append(rec)
    for (topic, qid), rs in by_queue.items():
        qdir = tmp_path / "consumequeue" / topic / str(qid)
        first, units = read_consume_queue(str(qdir), CQ_SIZE)
        assert first == 0
        assert units == [
            (
                r.physical_offset,
                r.total_size,
                java_hash(r.properties["TAGS"]) if "TAGS" in r.properties else 0,
            )
            for r in rs
        ]
        for n in sorted(os.listdir(qdir)):
            assert re.fullmatch(r"\d{20}", n) and int(n) % CQ_SIZE == 0
    assert len(os.listdir(tmp_path / "consumequeue" / "Orders" / "0")) >= 2, "CQ rolled over"

    # IndexFile: 17-digit time names, header, chains; 64 entries per file → several files.
    idx_names = sorted(os.listdir(tmp_path / "index"))
    assert len(idx_names) >= 2
    assert all(re.fullmatch(r"\d{17}", n) for n in idx_names)
    found: dict[str, list[int]] = {}
    total_entries = 0
    for n in idx_names:
        view = read_index_file(str(tmp_path / "index" / n), SLOTS, ENTRIES)
        total_entries += view.index_count - 1
        assert view.begin_phy_offset <= view.end_phy_offset
        assert view.begin_timestamp <= view.end_timestamp
        for key in ("Orders#order-10", "Audit#U000011", "Orders#shared"):
            found.setdefault(key, []).extend(index_lookup(view, key, SLOTS))
    # 120 messages × (2 keys + 1 uniq) + batch entries with no keys.
    assert total_entries == 120 * 3
    assert recs[10].physical_offset in found["Orders#order-10"]
    assert recs[11].physical_offset in found["Audit#U000011"]
    shared = {r.physical_offset for r in recs if r.topic == "Orders" and "KEYS" in r.properties}
    assert shared <= set(found["Orders#shared"])

    # Checkpoint: three store timestamps, 4096 bytes.
    physic, logics, index = read_checkpoint(str(tmp_path / "checkpoint"))
    newest = max(r.store_timestamp for r in recs)
    # The index's is that of the newest record it indexed (the final batch has no keys, and may
    # be stored a millisecond later).
    newest_indexed = max(r.store_timestamp for r in recs if {"KEYS", "UNIQ_KEY"} & set(r.properties))
    assert physic == newest and logics == newest and index == newest_indexed
