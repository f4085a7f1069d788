"""Transactional messages (REMOTING.md §3.3, §7.7): END_TRANSACTION and the check-back service.

A half message lives in RMQ_SYS_TRANS_HALF_TOPIC queue 0 (real topic and queue in its
properties). END_TRANSACTION commit re-puts it to its real topic and queue as a COMMIT_TYPE
record; commit and rollback both write an op message (RMQ_SYS_TRANS_OP_HALF_TOPIC, tag `d`, body =
the half queue offset). The check service pairs half messages with op records; one older than
`transactionTimeOut` without an op record is re-appended with TRANSACTION_CHECK_TIMES + 1 and
CHECK_TRANSACTION_STATE is sent to a live producer of its group; after `transactionCheckMax`
checks it is parked in TRANS_CHECK_MAX_TIME_TOPIC and never delivered.

What is decided is kept in memory and costs the same whatever the history: every half offset below
the *half floor* is settled (decided by an op record, superseded by its re-appended copy, or parked),
and the decided ones at or above it are a set (with the offset of each one's op record). A decision
adds to the set and moves the floor over every decided offset in a row, so with transactions decided
as they come the set holds only those decided ahead of an older open one; the check service moves the
floor over the open ones it re-appends. Op records are read once: the broker writes its own into the
set as it appends them and reads only those appended by something else since its last read. The
floor and the lowest op offset still needed (that of the oldest op record of an offset at or above
the floor) are committed as consumer offsets of group CID_RMQ_SYS_TRANS (half and op queue) after each
decision and check, so a restarted broker reads the op records from there only, not from the start.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable
from typing import Any

from rmq.acl.rules import PUB
from rmq.broker.records import StoredMessage, encode_record, properties_string
from rmq.broker.services import BrokerServices
from rmq.common import codes
from rmq.common.codes import MessageConst, MessageSysFlag, RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand, create_request, create_response
from rmq.remoting.context import Processor, RequestContext
from rmq.remoting.headers import header_int, header_long, header_str
from rmq.store import DiskFullError, offset_msg_id

__all__ = ["EndTransactionProcessor", "TransactionCheckService"]

log = logging.getLogger(__name__)

COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
GROUP = codes.CID_SYS_RMQ_TRANS
OP_TAG = "d"


class EndTransactionProcessor:
    def __init__(self, services: BrokerServices, checker: TransactionCheckService) -> None:
        self.s = services
        self.checker = checker

    def table(self) -> dict[int, Processor]:
        return {RequestCode.END_TRANSACTION: self.end_transaction}

    def end_transaction(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        response = self._end(ctx, request)
        return None if request.is_oneway else response

    def _end(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        s = self.s
        f = request.ext_fields
        kind = header_int(f, "commitOrRollback")
        if kind not in (COMMIT, ROLLBACK):
            return create_response(request)  # unknown: wait for the check
        group = header_str(f, "producerGroup")
        table_offset = header_long(f, "tranStateTableOffset")
        cl_offset = header_long(f, "commitLogOffset")
        raw = s.store.lookup(cl_offset)
        if raw is None:
            return create_response(
                request, ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed"
            )
        half = StoredMessage.decode_one(raw)
        if half.topic != codes.TRANS_HALF_TOPIC:
            return create_response(request, ResponseCode.SYSTEM_ERROR, "The message is not a half message")
        if half.properties.get(MessageConst.PRODUCER_GROUP) != group:
            return create_response(request, ResponseCode.SYSTEM_ERROR, "The producer group wrong")
        if half.queue_offset != table_offset:
            return create_response(
                request, ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong"
            )
        if half.physical_offset != cl_offset:
            return create_response(request, ResponseCode.SYSTEM_ERROR, "The commit log offset wrong")
        if s.read_check is not None:
            # The half message names the topic a commit writes to; the account must be allowed to send
            # there (RocketMQ does not check END_TRANSACTION).
            real_topic = half.properties.get(MessageConst.REAL_TOPIC) or ""
            refusal = s.read_check(ctx.remote_addr, request, real_topic, PUB)
            if refusal is not None:
                return create_response(request, ResponseCode.NO_PERMISSION, refusal)
        checker = self.checker
        checker.catch_up()
        if checker.decided(half.queue_offset):
            return create_response(request)  # already decided (a late second phase)
        real_topic = half.properties.get(MessageConst.REAL_TOPIC)
        real_qid = half.properties.get(MessageConst.REAL_QUEUE_ID)
        if kind == COMMIT and (not real_topic or real_qid is None):
            return create_response(request, ResponseCode.SYSTEM_ERROR, "half message without REAL_TOPIC")
        if not checker.claim(half.queue_offset):
            return create_response(request)  # decided by the network thread meanwhile
        try:
            if kind == COMMIT:
                assert real_topic and real_qid is not None
                props = dict(half.properties)
                props[MessageConst.WAIT_STORE_MSG_OK] = "false"
                s.store.put(
                    real_topic,
                    int(real_qid),
                    half.body,
                    properties_string(props).encode(),
                    half.flag,
                    MessageSysFlag.reset_transaction_type(half.sys_flag, COMMIT),
                    half.born_timestamp,
                    half.born_host,
                    half.reconsume_times,
                    half.physical_offset,
                )
        except BaseException:
            checker.release(half.queue_offset)  # not decided: a later END_TRANSACTION or check may
            raise
        checker.write_op(half.queue_offset)
        checker.commit_progress()
        checker.allow_fast()
        return create_response(request)


class TransactionCheckService:
    """What is decided (the half floor and the decided set above it) and the periodic check of half
    messages without an op record."""

    def __init__(self, services: BrokerServices) -> None:
        self.s = services
        self.floor = 0
        """Every half queue offset below is settled."""
        self.done: dict[int, int] = {}
        """Decided half queue offsets at or above the floor -> queue offset of their op record."""
        self._op_heap: list[tuple[int, int]] = []
        """(op offset, half offset) of the op records noted in ``done``; stale ones leave from the top."""
        self._op_read = 0
        """The next op record to read: those below are in ``done`` or below the floor."""
        self._loaded = False
        self._stuck_floor = -1
        self._stuck_since = 0.0
        self._early_check_after = 0.0
        self.request_check: Callable[[], None] | None = None
        """Run the periodic check now (the controller's): asked for when the floor has waited on an open
        half message for ``transactionTimeOut`` while decisions pile up above it."""
        self.op_records_read = 0
        """Op records decoded (at start from the committed op offset, then only ones not written here)."""
        self.checks_sent = 0
        self.discarded = 0
        self.fast: Any = None
        """The network thread (``rmq._store.NetServer``) when it decides END_TRANSACTION too: a half offset
        is decided by whichever side claims it first (``tx_claim``), its op records are read here as any
        other, and the half floor is pushed to it (``tx_floor``), which bounds its claims."""
        self._fast_seen = (0, 0, 0)

    # --- the network thread's share -----------------------------------------------------------------
    def claim(self, half_offset: int) -> bool:
        """Take the right to decide (or check) ``half_offset``: False if the network thread decided it."""
        return self.fast is None or bool(self.fast.tx_claim(half_offset))

    def release(self, half_offset: int) -> None:
        """Give back a claim whose decision or check was not stored."""
        if self.fast is not None:
            self.fast.tx_release(half_offset)

    def allow_fast(self) -> None:
        """Let the network thread decide END_TRANSACTION too (the op topic exists now), unless ACL is on:
        the validator must check the account may send to the real topic."""
        s = self.s
        if self.fast is not None and s.read_check is None and not s.config.acl_enable:
            self.fast.allow_end_transaction()

    def sync_fast(self) -> None:
        """Once a second: read the op records the network thread appended (moving the floor over its
        decisions), commit the progress (which pushes the floor to it), and log commits it stored without
        their op record."""
        if self.fast is None or not self._loaded:
            return
        commits, rollbacks, lost, _claims = self.fast.end_transaction_stats()
        seen = self._fast_seen
        if (commits, rollbacks, lost) == seen:
            return
        self._fast_seen = (commits, rollbacks, lost)
        if lost > seen[2]:
            log.error(
                "transactions: %d commits were stored without their op record (store error; %d in all): "
                "their half messages are kept from checks and not committed again",
                lost - seen[2],
                lost,
            )
        self.catch_up()
        self.commit_progress()

    # --- what is decided --------------------------------------------------------------------------
    def load(self) -> None:
        """Take the committed half floor and op offset, and read the op records from there (once)."""
        if self._loaded:
            return
        self._loaded = True
        s = self.s
        half_end = s.store.max_offset(codes.TRANS_HALF_TOPIC, 0)
        op_end = s.store.max_offset(codes.TRANS_OP_HALF_TOPIC, 0)
        floor = max(s.offsets.query(GROUP, codes.TRANS_HALF_TOPIC, 0), 0)
        op_from = max(s.offsets.query(GROUP, codes.TRANS_OP_HALF_TOPIC, 0), 0)
        if floor > half_end:
            log.warning(
                "transactions: committed half offset %d is past the half queue's end %d: checking from %d",
                floor,
                half_end,
                half_end,
            )
            floor = half_end
        if op_from > op_end:
            log.warning(
                "transactions: committed op offset %d is past the op queue's end %d: reading from %d",
                op_from,
                op_end,
                op_end,
            )
            op_from = op_end
        self.floor = floor
        self._op_read = op_from
        started = time.monotonic()
        self.catch_up()
        if self.op_records_read:
            log.info(
                "transactions: %d op records read from op offset %d in %.0f ms; half offset %d, "
                "%d decided above it",
                self.op_records_read,
                op_from,
                (time.monotonic() - started) * 1000,
                self.floor,
                len(self.done),
            )

    def catch_up(self) -> None:
        """Note the op records appended since the last read by anything but :meth:`write_op` (at start:
        those of earlier runs; none otherwise), so :meth:`decided` knows every decision."""
        if not self._loaded:
            self.load()
            return
        store = self.s.store
        end = store.max_offset(codes.TRANS_OP_HALF_TOPIC, 0)
        while self._op_read < end:
            status, nxt, n, pairs = store.read_op_records(codes.TRANS_OP_HALF_TOPIC, 0, self._op_read)
            if status not in ("FOUND", "OFFSET_TOO_SMALL", "MESSAGE_WAS_REMOVING"):
                break
            self.op_records_read += n
            noted = [pairs[i + 1] for i in range(0, len(pairs), 2) if self._note(pairs[i + 1], pairs[i])]
            self._advance()
            self._heap_open(noted)
            if nxt <= self._op_read:
                break
            self._op_read = nxt

    def decided(self, half_offset: int) -> bool:
        return half_offset < self.floor or half_offset in self.done

    def write_op(self, half_offset: int) -> None:
        """Append the op record deciding ``half_offset`` and note it."""
        s = self.s
        s.topics.create_in_back(codes.TRANS_OP_HALF_TOPIC, 1)
        _msg_id, op_offset, _phys, _size, _ts = s.store.put(
            codes.TRANS_OP_HALF_TOPIC,
            0,
            str(half_offset).encode(),
            properties_string({MessageConst.TAGS: OP_TAG}).encode(),
            0,
            0,
            int(time.time() * 1000),
            s.store.store_host,
            0,
            0,
        )
        noted = self._note(half_offset, op_offset)
        if op_offset == self._op_read:
            self._op_read += 1  # else records of others lie between: catch_up reads them (and this again)
        self._advance()
        if noted:
            self._heap_open([half_offset])

    def commit_progress(self) -> None:
        """Commit the half floor and the lowest op offset a restart must read from."""
        heap, done, floor = self._op_heap, self.done, self.floor
        while heap and (heap[0][1] < floor or done.get(heap[0][1]) != heap[0][0]):
            heapq.heappop(heap)
        op_offset = min(heap[0][0], self._op_read) if heap else self._op_read
        if self.fast is not None:
            self.fast.tx_floor(floor)
        offsets = self.s.offsets
        offsets.commit(GROUP, codes.TRANS_HALF_TOPIC, 0, floor)
        offsets.commit(GROUP, codes.TRANS_OP_HALF_TOPIC, 0, op_offset)
        if done and self.request_check is not None:
            # Decisions wait above an open half message: once it is old enough to be checked, check it now
            # rather than at the next interval (at most once a second), so the set holds no more than
            # about transactionTimeOut's worth of decisions.
            now = time.monotonic()
            if floor != self._stuck_floor:
                self._stuck_floor, self._stuck_since = floor, now
            elif now - self._stuck_since > self.s.config.transaction_time_out / 1000 and (
                now >= self._early_check_after
            ):
                self._early_check_after = now + 1.0
                self.request_check()

    def stats(self) -> dict[str, str]:
        """For GET_BROKER_RUNTIME_INFO: the half floor, how many are decided above it, op records read; with
        the network thread, the commits and rollbacks it decided, commits it stored without their op
        record, and the claims it holds."""
        out = {
            "transactionHalfOffset": str(self.floor),
            "transactionDecidedAhead": str(len(self.done)),
            "transactionOpRecordsRead": str(self.op_records_read),
            "transactionChecksSent": str(self.checks_sent),
            "transactionDiscarded": str(self.discarded),
        }
        if self.fast is not None:
            commits, rollbacks, lost, claims = self.fast.end_transaction_stats()
            out["transactionFastCommits"] = str(commits)
            out["transactionFastRollbacks"] = str(rollbacks)
            out["transactionFastOpsLost"] = str(lost)
            out["transactionFastClaims"] = str(claims)
        return out

    def _note(self, half_offset: int, op_offset: int) -> bool:
        """Record the decision; False when ``half_offset`` was already settled or decided."""
        if half_offset < self.floor or half_offset in self.done:
            return False
        self.done[half_offset] = op_offset
        return True

    def _heap_open(self, noted: list[int]) -> None:
        """Heap the op records of those just noted that the floor did not pass (after :meth:`_advance`:
        most of a read is settled by then and never touches the heap)."""
        done, heap = self.done, self._op_heap
        for half_offset in noted:
            op_offset = done.get(half_offset)
            if op_offset is not None:
                heapq.heappush(heap, (op_offset, half_offset))

    def _advance(self) -> None:
        """Move the floor over the decided offsets in a row from it."""
        done, floor = self.done, self.floor
        while floor in done:
            del done[floor]
            floor += 1
        self.floor = floor

    def _settle_below(self, offset: int) -> None:
        """Everything below ``offset`` is settled (checked, or gone from the half queue)."""
        floor, done = self.floor, self.done
        if offset <= floor:
            return
        if offset - floor <= len(done):
            for h in range(floor, offset):
                done.pop(h, None)
        elif done:
            self.done = {h: o for h, o in done.items() if h >= offset}
        self.floor = offset
        self._advance()

    def _read(self, topic: str, offset: int) -> tuple[list[StoredMessage], int]:
        status, nxt, _mn, _mx, buf, _n = self.s.store.get_message(topic, 0, offset, 32)
        if status == "FOUND":
            return StoredMessage.decode_all(buf), nxt
        if status in ("OFFSET_TOO_SMALL", "MESSAGE_WAS_REMOVING"):
            return [], nxt
        return [], offset

    # --- the check --------------------------------------------------------------------------------
    def check(self) -> None:
        s = self.s
        self.catch_up()
        now = int(time.time() * 1000)
        timeout = s.config.transaction_time_out
        while True:
            msgs, nxt = self._read(codes.TRANS_HALF_TOPIC, self.floor)
            if not msgs:
                if nxt > self.floor:
                    # Half messages gone with their CommitLog files: nothing left to decide there.
                    log.warning(
                        "transactions: half offsets %d..%d are gone: not checked", self.floor, nxt - 1
                    )
                    self._settle_below(nxt)
                    continue
                break
            stop = False
            for m in msgs:
                q = m.queue_offset
                if q < self.floor:
                    continue  # decided while read
                if q > self.floor:
                    self._settle_below(q)
                    if q < self.floor:
                        continue
                immunity = m.properties.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
                wait_ms = timeout
                if immunity and immunity.isdigit():
                    wait_ms = max(wait_ms, int(immunity) * 1000)
                if now - m.born_timestamp < wait_ms or now - m.store_timestamp < min(wait_ms, timeout):
                    stop = True
                    break
                if not self.claim(q):
                    self._settle_below(q + 1)  # decided by the network thread: its op record comes later
                    continue
                try:
                    self._check_one(m)
                except DiskFullError:
                    self.release(q)
                    stop = True  # checked up to here; the rest once there is space
                    break
                except BaseException:
                    self.release(q)
                    raise
                self._settle_below(q + 1)  # this copy is parked, or superseded by the re-appended one
            if stop:
                break
        self.commit_progress()

    def _check_one(self, m: StoredMessage) -> None:
        s = self.s
        props = dict(m.properties)
        times = int(props.get(MessageConst.TRANSACTION_CHECK_TIMES, "0") or 0)
        if times >= s.config.transaction_check_max:
            # Checked too often: park it where no consumer looks, and mark it done.
            s.topics.create_in_back(codes.TRANS_CHECK_MAX_TIME_TOPIC, 1)
            s.store.put(
                codes.TRANS_CHECK_MAX_TIME_TOPIC,
                0,
                m.body,
                properties_string(props).encode(),
                m.flag,
                m.sys_flag,
                m.born_timestamp,
                m.born_host,
                m.reconsume_times,
                0,
            )
            self.write_op(m.queue_offset)
            self.discarded += 1
            return
        props[MessageConst.TRANSACTION_CHECK_TIMES] = str(times + 1)
        props.setdefault(MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET, str(m.queue_offset))
        msg_id, qoff, phys, _size, store_ts = s.store.put(
            codes.TRANS_HALF_TOPIC,
            0,
            m.body,
            properties_string(props).encode(),
            m.flag,
            m.sys_flag,
            m.born_timestamp,
            m.born_host,
            m.reconsume_times,
            0,
        )
        group = props.get(MessageConst.PRODUCER_GROUP, "")
        channel = s.producers.any_channel(group)
        if channel is None:
            log.info("no live producer of group %s to check transaction %s", group, msg_id)
            return
        uniq = props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
        view = StoredMessage(
            props.get(MessageConst.REAL_TOPIC, m.topic),
            int(props.get(MessageConst.REAL_QUEUE_ID, "0") or 0),
            qoff,
            phys,
            m.sys_flag,
            m.flag,
            m.born_timestamp,
            m.born_host,
            store_ts,
            s.store.store_host,
            m.reconsume_times,
            0,
            m.body,
            props,
            0,
        )
        header = {
            "tranStateTableOffset": str(qoff),
            "commitLogOffset": str(phys),
            "msgId": uniq,
            "transactionId": uniq,
            "offsetMsgId": offset_msg_id(s.store.store_host, phys),
        }
        req = create_request(RequestCode.CHECK_TRANSACTION_STATE, header, encode_record(view), oneway=True)
        try:
            channel.ctx.send_oneway(req)
            self.checks_sent += 1
        except Exception as e:
            log.info("check of %s not sent: %s", msg_id, e)
