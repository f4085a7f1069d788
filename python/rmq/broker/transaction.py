"""Transactional messages (REMOTING.md §3.3, §7.7): END_TRANSACTION and the check-back service.

A half message lives in RMQ_SYS_TRANS_HALF_TOPIC queue 0 (real topic and queue in its
properties). END_TRANSACTION commit re-puts it to its real topic and queue as a COMMIT_TYPE
record; commit and rollback both write an op message (RMQ_SYS_TRANS_OP_HALF_TOPIC, tag `d`, body =
the half queue offset). The check service pairs half messages with op records; one older than
`transactionTimeOut` without an op record is re-appended with TRANSACTION_CHECK_TIMES + 1 and
CHECK_TRANSACTION_STATE is sent to a live producer of its group; after `transactionCheckMax`
checks it is parked in TRANS_CHECK_MAX_TIME_TOPIC and never delivered. Progress of both queues is
kept as consumer offsets of group CID_RMQ_SYS_TRANS, so it survives restarts.
"""

from __future__ import annotations

import logging
import time

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


def write_op(s: BrokerServices, half_queue_offset: int) -> None:
    s.topics.create_in_back(codes.TRANS_OP_HALF_TOPIC, 1)
    s.store.put(
        codes.TRANS_OP_HALF_TOPIC,
        0,
        str(half_queue_offset).encode(),
        properties_string({MessageConst.TAGS: OP_TAG}).encode(),
        0,
        0,
        int(time.time() * 1000),
        s.store.store_host,
        0,
        0,
    )


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
        self.checker.load_ops()
        if half.queue_offset in self.checker.done:
            return create_response(request)  # already decided (a late second phase)
        if kind == COMMIT:
            real_topic = half.properties.get(MessageConst.REAL_TOPIC)
            real_qid = half.properties.get(MessageConst.REAL_QUEUE_ID)
            if not real_topic or real_qid is None:
                return create_response(request, ResponseCode.SYSTEM_ERROR, "half message without REAL_TOPIC")
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
        write_op(s, half.queue_offset)
        self.checker.done.add(half.queue_offset)
        return create_response(request)


class TransactionCheckService:
    """Periodic check of half messages without an op record."""

    def __init__(self, services: BrokerServices) -> None:
        self.s = services
        self.done: set[int] = set()
        self._op_offset = 0
        self.checks_sent = 0
        self.discarded = 0

    def _read(self, topic: str, offset: int) -> tuple[list[StoredMessage], int]:
        status, nxt, _mn, _mx, buf, _n = self.s.store.get_message(topic, 0, offset, 32)
        if status == "FOUND":
            return StoredMessage.decode_all(buf), nxt
        if status in (
            "OFFSET_TOO_SMALL",
            "NO_MATCHED_MESSAGE",
            "MESSAGE_WAS_REMOVING",
            "OFFSET_OVERFLOW_BADLY",
        ):
            return [], nxt
        return [], offset

    def load_ops(self) -> None:
        """Read op records up to the end (done half offsets)."""
        offset = max(self.s.offsets.query(GROUP, codes.TRANS_OP_HALF_TOPIC, 0), 0)
        offset = min(offset, self._op_offset) if self._op_offset else offset
        while True:
            msgs, nxt = self._read(codes.TRANS_OP_HALF_TOPIC, offset)
            for m in msgs:
                try:
                    self.done.add(int(m.body))
                except ValueError:
                    pass
            if nxt == offset:
                break
            offset = nxt
        self._op_offset = offset

    def check(self) -> None:
        s = self.s
        self.load_ops()
        now = int(time.time() * 1000)
        timeout = s.config.transaction_time_out
        half_offset = max(s.offsets.query(GROUP, codes.TRANS_HALF_TOPIC, 0), 0)
        progress = half_offset
        while True:
            msgs, nxt = self._read(codes.TRANS_HALF_TOPIC, progress)
            if not msgs:
                if nxt != progress:
                    progress = nxt
                    continue
                break
            stop = False
            for m in msgs:
                if m.queue_offset in self.done:
                    progress = m.queue_offset + 1
                    continue
                immunity = m.properties.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
                wait_ms = timeout
                if immunity and immunity.isdigit():
                    wait_ms = max(wait_ms, int(immunity) * 1000)
                if now - m.born_timestamp < wait_ms or now - m.store_timestamp < min(wait_ms, timeout):
                    stop = True
                    break
                try:
                    self._check_one(m)
                except DiskFullError:
                    stop = True  # checked up to here; the rest once there is space
                    break
                progress = m.queue_offset + 1
            if stop:
                break
        if progress != half_offset:
            s.offsets.commit(GROUP, codes.TRANS_HALF_TOPIC, 0, progress)
        s.offsets.commit(GROUP, codes.TRANS_OP_HALF_TOPIC, 0, 0)

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
            write_op(s, m.queue_offset)
            self.done.add(m.queue_offset)
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
        # The old copy is superseded by the re-appended one.
        self.done.add(m.queue_offset)
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
