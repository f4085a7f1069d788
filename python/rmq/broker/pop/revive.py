"""POP's revive service: checkpoints and acks in the revive topic, un-acked messages back to the
group's retry topic after their invisible time (RocketMQ 5.x's PopReviveService, in rmq's way).

Every pop appends a checkpoint (tag ``ck``) to one of the ``reviveQueueNum`` queues of
``rmq_sys_REVIVE_LOG_<cluster>``; acks (``ack``, ``bAck``) go to the queue the receipt handle names.
This service reads each revive queue in order and keeps the checkpoints not fully acked. Once a
checkpoint's revive time (pop time + invisible time) has passed, with everything written before now
read, its un-acked messages are re-put to ``%RETRY%<group>_<topic>`` with reconsumeTimes + 1 (or to
``%DLQ%<group>`` once a message's reconsume times reached the group's ``retryMaxTimes``), and a batch
ack of those offsets is appended, so that a replay of the revive queue does not revive them again.
(5.x instead delays each checkpoint in its timer wheel; rmq reads them at once and waits itself.)

Durability across kill -9: the revive topic is in the CommitLog, so the service's own progress (per
revive queue, the oldest checkpoint still pending) is all it persists. At start it replays each revive
queue from there: the pending checkpoints come back with the acks written after them, so no acked
message is revived and no un-acked one is forgotten. The replay also moves each (topic, group, queue)
pop offset past the messages its checkpoints took, so the pops of the lost last seconds (their
offsets not yet in ``consumerOffset.json``) are not popped again. The progress is written only after
the consumer offsets, so it never runs ahead of them."""

from __future__ import annotations

import heapq
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rmq.broker.persist import load_json, persist_json
from rmq.broker.pop.order import OrderInfoTable
from rmq.broker.pop.wire import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    FIRST_POP_TIME,
    AckRecord,
    CheckPoint,
    pop_retry_topic,
)
from rmq.broker.records import StoredMessage, properties_string
from rmq.broker.services import BrokerServices
from rmq.common import codes
from rmq.common.codes import MessageConst, PermName
from rmq.store import MessageIllegalError, StoreError

__all__ = ["ReviveService"]

log = logging.getLogger(__name__)

_READ_BATCH = 256
ORIGIN_GROUP = "ORIGIN_GROUP"
Key = tuple[str, int, int, str, int]


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _Pending:
    ck: CheckPoint
    position: int
    """The checkpoint's offset in its revive queue."""
    acked: set[int]


class ReviveService:
    def __init__(self, services: BrokerServices, topic: str, queue_nums: int, config_dir: str) -> None:
        self.s = services
        self.topic = topic
        self.queue_nums = queue_nums
        self.path = os.path.join(config_dir, "popState.json")
        self.read_pos = [0] * queue_nums
        self.pending: list[dict[Key, _Pending]] = [{} for _ in range(queue_nums)]
        self._due: list[list[tuple[int, int, Key]]] = [[] for _ in range(queue_nums)]
        """Per revive queue, a heap of (revive time, position, key) of the pending checkpoints (an entry
        whose checkpoint was acked meanwhile is skipped when it comes up)."""
        self.orders = OrderInfoTable()
        self._written: dict[str, object] | None = None
        """What ``popState.json`` holds (None: not written by this process yet)."""
        self.revived = 0
        """Messages re-put to a retry topic since start."""
        self.dead = 0
        """Messages re-put to a DLQ since start."""
        self.on_revived: Callable[[str], None] = lambda _topic: None
        """Told of each retry topic messages were re-put to (POP long polling wakes its waiters)."""
        self.put_counts: dict[tuple[str, str, str], int] = {}
        """(group, topic, ``CK`` / ``ACK``) -> revive records written (5.x's
        ``rocketmq_pop_revive_in_message_total``)."""
        self.read_counts: dict[tuple[str, str, int, str], int] = {}
        """(group, topic, revive queue, ``CK`` / ``ACK``) -> revive records read
        (``rocketmq_pop_revive_out_message_total``)."""
        self.retry_counts: dict[tuple[str, str], int] = {}
        """(group, topic) -> messages re-put to the group's retry topic
        (``rocketmq_pop_revive_retry_messages_total``)."""

    # --- state ---------------------------------------------------------------------------------------
    def load(self) -> None:
        """Read the persisted progress and replay the revive queues from it (see the module doc)."""
        data = load_json(self.path) or {}
        offsets = data.get("reviveOffsets") or {}
        for q in range(self.queue_nums):
            self.read_pos[q] = max(0, int(offsets.get(str(q), 0)))
        self.orders.load_list(data.get("orderInfo") or [])
        started = time.monotonic()
        records, moved = self.scan(replay=True)
        if records or moved:
            log.info(
                "POP: replayed %d revive records of %s in %.2f s: %d checkpoints pending, %d pop offsets "
                "moved past the messages their checkpoints took",
                records,
                self.topic,
                time.monotonic() - started,
                sum(len(p) for p in self.pending),
                moved,
            )

    def progress(self) -> list[int]:
        """Per revive queue, where a replay must start: the oldest pending checkpoint, else what was read."""
        out = []
        for q in range(self.queue_nums):
            pend = self.pending[q]
            out.append(min((p.position for p in pend.values()), default=self.read_pos[q]))
        return out

    def persist(self) -> None:
        """Write the progress, after the consumer offsets (the pops it covers) are on disk."""
        state = {
            "reviveOffsets": {str(q): o for q, o in enumerate(self.progress())},
            "orderInfo": self.orders.to_list(),
        }
        self.s.offsets.persist_if_dirty()  # not dirty: the file already holds every pop offset
        if state != self._written:
            persist_json(self.path, state)
            self._written = state

    def inflight(self) -> int:
        """Popped messages neither acked nor revived yet."""
        return sum(len(p.ck.diffs) - len(p.acked) for pend in self.pending for p in pend.values())

    def inflight_by_group(self) -> dict[tuple[str, str], int]:
        """(topic, group) -> its popped messages neither acked nor revived yet (callable from another
        thread: each table is copied before it is walked)."""
        out: dict[tuple[str, str], int] = {}
        for pend in list(self.pending):
            for p in list(pend.values()):
                key = (p.ck.topic, p.ck.cid)
                out[key] = out.get(key, 0) + len(p.ck.diffs) - len(p.acked)
        return out

    def inflight_of(self, group: str, topic: str) -> dict[int, int]:
        """Queue id -> the messages of ``topic`` ``group`` popped from it and neither acked nor revived."""
        out: dict[int, int] = {}
        for pend in list(self.pending):
            for p in list(pend.values()):
                if p.ck.cid == group and p.ck.topic == topic:
                    out[p.ck.queue_id] = out.get(p.ck.queue_id, 0) + len(p.ck.diffs) - len(p.acked)
        return out

    def behind(self) -> list[tuple[int, int, int]]:
        """Per revive queue: (queue id, records written but not yet done with, ms since its oldest pending
        checkpoint became due (0 when none is overdue)). "Done with": before the oldest checkpoint still
        pending, or read (5.x's ``getReviveBehindMessages`` / ``getReviveBehindMillis``)."""
        now = now_ms()
        progress = self.progress()
        out = []
        for q in range(self.queue_nums):
            written = self.s.store.max_offset(self.topic, q) if self.topic in self.s.topics else 0
            due = [p.ck.revive_time for p in list(self.pending[q].values())]
            oldest = min(due, default=now)
            out.append((q, max(0, written - progress[q]), max(0, now - oldest)))
        return out

    # --- writing -------------------------------------------------------------------------------------
    def append(self, revive_qid: int, tag: str, body: bytes, unique_id: str) -> int:
        """Put one record to the revive queue (raises the store's errors); returns the CommitLog offset
        where it ends. 5.x also gives it a timer delivery time; rmq's revive service reads records at
        once, so none is set."""
        props = {MessageConst.TAGS: tag, MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: unique_id}
        if self.topic not in self.s.topics:
            # Made at the first POP record, not at start (5.x's broker makes it at start): a broker
            # serving 4.x clients only lists the topics a 4.x broker lists.
            self.s.topics.create_in_back(self.topic, self.queue_nums, PermName.READ | PermName.WRITE)
        store = self.s.store
        _id, _qo, phys, size, _ts = store.put(
            self.topic, revive_qid, body, properties_string(props).encode(), 0, 0, now_ms(), store.store_host
        )
        return phys + size

    def add_checkpoint(self, ck: CheckPoint, revive_qid: int) -> int:
        end = self.append(revive_qid, CK_TAG, ck.to_json(), ck.unique_id())
        _count(self.put_counts, (ck.cid, ck.topic, "CK"))
        return end

    def add_ack(self, ack: AckRecord, revive_qid: int) -> int:
        end = self.append(revive_qid, ack.tag, ack.to_json(), ack.unique_id())
        _count(self.put_counts, (ack.consumer_group, ack.topic, "ACK"))
        return end

    # --- reading -------------------------------------------------------------------------------------
    def scan(self, replay: bool = False) -> tuple[int, int]:
        """Read every revive queue to its end; returns (records read, pop offsets moved on replay)."""
        records = moved = 0
        store = self.s.store
        for q in range(self.queue_nums):
            while True:
                pos = self.read_pos[q]
                status, nxt, _mn, _mx, body, count = store.get_message(self.topic, q, pos, _READ_BATCH, None)
                if status != "FOUND":
                    if nxt > pos:
                        if status not in ("NO_MATCHED_MESSAGE", "OFFSET_FOUND_NULL", "MESSAGE_WAS_REMOVING"):
                            log.warning(
                                "POP: revive queue %s:%d read at %d answered %s; continuing at %d",
                                self.topic,
                                q,
                                pos,
                                status,
                                nxt,
                            )
                        self.read_pos[q] = nxt
                        continue
                    break
                for m in StoredMessage.decode_all(body):
                    moved += self._apply(q, m, replay)
                    records += 1
                self.read_pos[q] = nxt
                if count < _READ_BATCH:
                    break
        return records, moved

    def _apply(self, q: int, m: StoredMessage, replay: bool) -> int:
        tag = m.properties.get(MessageConst.TAGS)
        try:
            if tag == CK_TAG:
                ck = CheckPoint.from_json(m.body)
                _count(self.read_counts, (ck.cid, ck.topic, q, "CK"))
                if ck.diffs:
                    self.pending[q][ck.key()] = _Pending(ck, m.queue_offset, set())
                    heapq.heappush(self._due[q], (ck.revive_time, m.queue_offset, ck.key()))
                if replay and ck.diffs:
                    return self._move_pop_offset(ck)
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                ack = AckRecord.from_json(m.body, tag == BATCH_ACK_TAG)
                _count(self.read_counts, (ack.consumer_group, ack.topic, q, "ACK"))
                p = self.pending[q].get(ack.key())
                if p is not None:
                    offsets = set(p.ck.offsets())
                    p.acked.update(o for o in ack.ack_offsets if o in offsets)
                    if len(p.acked) >= len(offsets):
                        del self.pending[q][ack.key()]
            else:
                log.warning(
                    "POP: revive record %s:%d@%d has tag %r; skipped", self.topic, q, m.queue_offset, tag
                )
        except (KeyError, TypeError, ValueError) as e:
            log.warning(
                "POP: revive record %s:%d@%d does not parse (%s); skipped", self.topic, q, m.queue_offset, e
            )
        return 0

    def _move_pop_offset(self, ck: CheckPoint) -> int:
        after = max(ck.offsets()) + 1
        offsets = self.s.offsets
        if offsets.query(ck.cid, ck.topic, ck.queue_id) < after:
            offsets.commit(ck.cid, ck.topic, ck.queue_id, after)
            return 1
        return 0

    # --- reviving ------------------------------------------------------------------------------------
    def tick(self) -> None:
        """Read what is new, then revive the checkpoints whose time has come."""
        self.scan()
        now = now_ms()
        revived = dead = failed = 0
        for q in range(self.queue_nums):
            heap, pend = self._due[q], self.pending[q]
            while heap and heap[0][0] <= now:
                _t, position, key = heap[0]
                p = pend.get(key)
                if p is None or p.position != position:
                    heapq.heappop(heap)  # acked meanwhile (or replaced by a later checkpoint)
                    continue
                try:
                    r, d = self._revive(q, p)
                except (StoreError, OSError) as e:
                    failed += 1
                    log.warning(
                        "POP: reviving checkpoint %s failed (%s); retried next round", p.ck.unique_id(), e
                    )
                    break
                heapq.heappop(heap)
                revived += r
                dead += d
                del pend[key]
        if revived or dead or failed:
            log.info(
                "POP: %d un-acked messages re-put to retry topics, %d to DLQs (%d checkpoints failed)",
                revived,
                dead,
                failed,
            )

    def _revive(self, q: int, p: _Pending) -> tuple[int, int]:
        ck = p.ck
        s = self.s
        todo = [o for o in ck.offsets() if o not in p.acked]
        revived = dead = 0
        gcfg = s.groups.table.get(ck.cid)
        max_times = gcfg.retry_max_times if gcfg is not None else 16
        for off in todo:
            status, _n, _mn, _mx, body, count = s.store.get_message(ck.topic, ck.queue_id, off, 1, None)
            if status != "FOUND" or count == 0:
                log.warning(
                    "POP: message %s:%d@%d of group %s is gone from the store (%s); not revived",
                    ck.topic,
                    ck.queue_id,
                    off,
                    ck.cid,
                    status,
                )
                continue
            m = StoredMessage.decode_one(body)
            if m.queue_offset != off:
                continue
            props = dict(m.properties)
            props.pop("POP_CK", None)
            if m.reconsume_times == 0 or FIRST_POP_TIME not in props:
                props[FIRST_POP_TIME] = str(ck.pop_time)
            props[ORIGIN_GROUP] = ck.cid  # as 5.5's revive
            if m.reconsume_times >= max_times:
                target = codes.DLQ_GROUP_TOPIC_PREFIX + ck.cid
                s.topics.create_in_back(target, 1, PermName.READ | PermName.WRITE)
                origin = _origin_topic(ck.topic, ck.cid)
                props.setdefault(MessageConst.RETRY_TOPIC, origin)
                dead += 1
            else:
                target = (
                    ck.topic
                    if ck.topic.startswith(codes.RETRY_GROUP_TOPIC_PREFIX)
                    else pop_retry_topic(ck.topic, ck.cid)
                )
                s.topics.create_in_back(target, 1)
                revived += 1
            try:
                s.store.put(
                    target,
                    0,
                    m.body,
                    properties_string(props).encode(),
                    m.flag,
                    m.sys_flag,
                    m.born_timestamp,
                    s.store.store_host,  # 5.x: the re-put copy is born on this broker
                    m.reconsume_times + 1,
                    0,
                )
            except MessageIllegalError as e:
                log.warning(
                    "POP: message %s:%d@%d cannot be re-put (%s); dropped", ck.topic, ck.queue_id, off, e
                )
                continue
            if target.startswith(codes.DLQ_GROUP_TOPIC_PREFIX):
                s.metrics.dead(props[MessageConst.RETRY_TOPIC], ck.cid)
            else:
                _count(self.retry_counts, (ck.cid, ck.topic))
                self.on_revived(target)
        if todo:
            # Mark them done in the revive queue itself: a replay after a crash does not revive them again.
            mark = AckRecord(
                ck.topic, ck.queue_id, ck.cid, ck.start_offset, ck.pop_time, todo, ck.broker_name, True
            )
            self.add_ack(mark, q)
        self.revived += revived
        self.dead += dead
        return revived, dead


def _count(table: dict[Any, int], key: Any) -> None:
    table[key] = table.get(key, 0) + 1


def _origin_topic(topic: str, group: str) -> str:
    """The topic a POP retry topic retries (itself for any other topic)."""
    for sep in ("_", "+"):
        prefix = f"{codes.RETRY_GROUP_TOPIC_PREFIX}{group}{sep}"
        if topic.startswith(prefix):
            return topic[len(prefix) :]
    return topic
