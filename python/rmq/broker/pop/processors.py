"""POP_MESSAGE (200050), ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151) and
CHANGE_MESSAGE_INVISIBLETIME (200053) as RocketMQ 5.x's broker answers them over Remoting.

A pop takes up to ``maxMsgNums`` (at most 32) messages from one queue or, with ``queueId`` -1, from the
topic's queues in turn starting at a random one, and — with the probability ``popFromRetryProbability``
first, otherwise when the topic gave fewer than asked — from the group's retry topic
``%RETRY%<group>_<topic>``. Each (topic, group, queue) has its own pop offset (kept with the consumer
offsets, so a classic pull group on the same topic is not affected). A non-orderly pop appends one
checkpoint per queue read to the revive topic and moves the pop offset past what it took; an orderly
pop (``order=true``) appends none, keeps the offset at the batch and blocks the queue until the batch
is acked or its invisible time passes (:mod:`rmq.broker.pop.order`).

The answer: SUCCESS with the records as stored (retry-topic records re-encoded under the topic asked
for and with their ``POP_CK`` property, as 5.x does), or POLLING_TIMEOUT (``NO_MESSAGE_IN_QUEUE``) when
nothing was found within ``pollTime``; headers popTime, invisibleTime, reviveQid, restNum,
startOffsetInfo, msgOffsetInfo (and orderCountInfo for orderly pops), from which the client builds each
message's receipt handle as ``ExtraInfoUtil`` does.

The receive path reads with the store's get_message (Rust) and walks the returned records only to
collect their queue offsets (a struct read per record); records go out as the store returned them
except those of a retry topic, which are decoded and re-encoded."""

from __future__ import annotations

import logging
import random
import struct
import time
from dataclasses import dataclass, field

from rmq.broker.pop.order import OrderInfoTable
from rmq.broker.pop.polling import HeldPop, PopHoldService
from rmq.broker.pop.revive import ReviveService, now_ms
from rmq.broker.pop.wire import (
    ACK_MESSAGE,
    BATCH_ACK_MESSAGE,
    CHANGE_MESSAGE_INVISIBLETIME,
    INVALID_PARAMETER,
    ORDER_REVIVE_QUEUE,
    POLLING_FULL,
    POLLING_TIMEOUT,
    POP_CK,
    POP_MESSAGE,
    AckRecord,
    CheckPoint,
    ExtraInfo,
    ExtraInfoError,
    decode_batch_ack_body,
    offset_info,
    pop_retry_topic,
    real_topic,
    retry_mark,
)
from rmq.broker.records import StoredMessage, encode_record
from rmq.broker.services import BrokerServices
from rmq.broker.subscription import (
    SqlNotEnabledError,
    SubscriptionData,
    SubscriptionParseError,
    parse_subscription,
)
from rmq.common.codes import PermName, ResponseCode
from rmq.common.route import TopicConfig
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.context import Processor, RequestContext
from rmq.remoting.headers import header_bool, header_int, header_long, header_str

__all__ = ["PopProcessors"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_QUEUE_OFFSET = struct.Struct(">q")
_QUEUE_OFFSET_AT = 20
_MOVED = ("OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_BADLY", "OFFSET_FOUND_NULL")
_SKIPPED = ("NO_MATCHED_MESSAGE", "OFFSET_FOUND_NULL", "MESSAGE_WAS_REMOVING", "NO_MATCHED_LOGIC_QUEUE")
INIT_MODE_MIN = 0


def queue_offsets(body: bytes) -> list[int]:
    """The queue offsets of the stored records in ``body``."""
    out = []
    pos, end = 0, len(body)
    while pos + _QUEUE_OFFSET_AT + 8 <= end:
        size = _SIZE.unpack_from(body, pos)[0]
        if size <= 0:
            break
        out.append(_QUEUE_OFFSET.unpack_from(body, pos + _QUEUE_OFFSET_AT)[0])
        pos += size
    return out


@dataclass
class _Pop:
    """One POP_MESSAGE being answered."""

    group: str
    topic: str
    max_msgs: int
    invisible_time: int
    init_mode: int
    order: bool
    attempt_id: str | None
    sub: SubscriptionData
    pop_time: int
    revive_qid: int
    remote: str
    count: int = 0
    rest: int = 0
    parts: list[bytes] = field(default_factory=list)
    start_info: list[str] = field(default_factory=list)
    msg_info: list[str] = field(default_factory=list)
    order_info: list[str] = field(default_factory=list)


class PopProcessors:
    def __init__(self, services: BrokerServices, revive: ReviveService, holds: PopHoldService) -> None:
        self.s = services
        self.revive = revive
        self.holds = holds
        self.orders: OrderInfoTable = revive.orders
        self._ck_counter = 0
        self._woken_at = now_ms()
        self._rng = random.Random()

    def table(self) -> dict[int, Processor]:
        return {
            POP_MESSAGE: self.pop,
            ACK_MESSAGE: self.ack,
            BATCH_ACK_MESSAGE: self.ack,
            CHANGE_MESSAGE_INVISIBLETIME: self.change_invisible_time,
        }

    # --- POP_MESSAGE -------------------------------------------------------------------------------------
    def pop(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return self.process_pop(ctx, request, allow_suspend=True)

    def resume(self, held: HeldPop, expired: bool) -> None:
        """Run a held pop again (woken: it may be held again; expired: answered whatever it finds)."""
        try:
            response = self.process_pop(held.ctx, held.request, allow_suspend=not expired)
        except Exception as e:  # answer rather than leave the client waiting
            log.exception("POP: a held pop failed when run again")
            response = create_response(held.request, ResponseCode.SYSTEM_ERROR, str(e))
        if response is not None and not held.request.is_oneway:
            held.ctx.send_response(response)
            self.s.metrics.rpc.record(
                held.request.code, response.code, time.perf_counter() - held.started, long_polling=True
            )

    def wake_unblocked(self) -> None:
        """Held orderly pops of a queue whose batch became visible again since the last call run again
        (nothing was dispatched for them; 5.x's lock-free notification)."""
        now = now_ms()
        since, self._woken_at = self._woken_at, now
        if len(self.holds) == 0:
            return
        for topic in self.orders.unblocked_between(since, now):
            self.holds.notify(topic)

    def topics_signature(self, topics: list[str]) -> int:
        s = self.s
        total = 0
        for t in topics:
            tc = self._topic(t)
            if tc is None:
                continue
            for q in range(tc.read_queue_nums):
                total += s.store.max_offset(t, q)
        return total

    def _topic(self, topic: str) -> TopicConfig | None:
        """The topic's config; an LMQ (``%LMQ%...``, RocketMQ 5.x's lite topics) has none and one
        readable queue, 0, when the store keeps LMQs (``enableLmq``)."""
        tc = self.s.topics.get(topic)
        if tc is None and is_lmq(topic) and self.s.config.store.get("enableLmq", "true").lower() != "false":
            return TopicConfig(topic, read_queue_nums=1, write_queue_nums=1)
        return tc

    @staticmethod
    def _pop_response(
        request: RemotingCommand,
        code: int,
        remark: str | None,
        pop_time: int = 0,
        invisible_time: int = 0,
        revive_qid: int = 0,
        rest: int = 0,
    ) -> RemotingCommand:
        # Java writes a response header's primitive fields always (0 when not set): a client decoding a
        # POLLING_TIMEOUT answer requires them.
        fields = {
            "popTime": str(pop_time),
            "invisibleTime": str(invisible_time),
            "reviveQid": str(revive_qid),
            "restNum": str(rest),
        }
        return create_response(request, code, remark, fields)

    def process_pop(
        self, ctx: RequestContext, request: RemotingCommand, allow_suspend: bool
    ) -> RemotingCommand | None:
        s = self.s
        f = request.ext_fields
        now = now_ms()
        born = header_long(f, "bornTime", 0)
        if born <= 0:  # as 5.x: a pop without a born time was born now (and stays so when held)
            born = now
            f["bornTime"] = str(now)
        group = header_str(f, "consumerGroup")
        topic = header_str(f, "topic")
        queue_id = header_int(f, "queueId")
        max_msgs = header_int(f, "maxMsgNums")
        invisible_time = header_long(f, "invisibleTime")
        poll_time = header_long(f, "pollTime", 0)
        init_mode = header_int(f, "initMode", INIT_MODE_MIN)
        order = header_bool(f, "order", False)
        attempt_id = f.get("attemptId") or None
        broker_ip = s.config.broker_ip1
        if now - born - poll_time > 500:
            return self._pop_response(
                request, POLLING_TIMEOUT, f"the broker[{broker_ip}] pop message is timeout too much"
            )
        if not PermName.is_readable(s.config.broker_permission):
            return self._pop_response(
                request, ResponseCode.NO_PERMISSION, f"the broker[{broker_ip}] pop message is forbidden"
            )
        if max_msgs > 32:
            return self._pop_response(
                request, INVALID_PARAMETER, f"the broker[{broker_ip}] pop message's num is greater than 32"
            )
        if max_msgs <= 0 or invisible_time < 0:
            return self._pop_response(
                request,
                INVALID_PARAMETER,
                f"maxMsgNums {max_msgs} and invisibleTime {invisible_time} must be positive",
            )
        tc = self._topic(topic)
        if tc is None:
            return self._pop_response(
                request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not PermName.is_readable(tc.perm):
            return self._pop_response(
                request, ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden"
            )
        if queue_id >= tc.read_queue_nums:
            return self._pop_response(
                request,
                INVALID_PARAMETER,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                f"[{tc.read_queue_nums}] consumer:[{ctx.remote_addr}]",
            )
        gcfg = s.groups.find(group)
        if gcfg is None:
            return self._pop_response(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist",
            )
        if not gcfg.consume_enable:
            return self._pop_response(
                request, ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}"
            )
        try:
            sub = parse_subscription(
                topic,
                f.get("exp") or "*",
                f.get("expType") or "TAG",
                0,
                sql_enabled=s.config.enable_property_filter,
            )
        except SqlNotEnabledError as e:
            return self._pop_response(request, ResponseCode.SYSTEM_ERROR, str(e))
        except SubscriptionParseError as e:
            return self._pop_response(
                request,
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                f"parse the consumer's subscription failed: {e}",
            )

        if order:
            revive_qid = ORDER_REVIVE_QUEUE
        else:
            revive_qid = self._ck_counter % self.revive.queue_nums
            self._ck_counter += 1
        rand = self._rng.randrange(100)
        st = _Pop(
            group,
            topic,
            max_msgs,
            invisible_time,
            init_mode,
            order,
            attempt_id,
            sub,
            now,
            revive_qid,
            ctx.remote_addr,
        )
        retry_topic = pop_retry_topic(topic, group, s.config.enable_retry_topic_v2)
        need_retry = rand < s.config.pop_from_retry_probability
        lmqs = self._lmqs(f.get("lmqs"))
        lite_info: list[str] = []
        if lmqs is not None:
            if not order:
                return self._pop_response(request, INVALID_PARAMETER, "a pop of LMQs (lmqs) must be orderly")
            lite_info = self._pop_lmqs(st, lmqs, rand)
        else:
            if need_retry and not order:
                self._pop_topic(st, retry_topic, rand, True)
            if queue_id < 0:
                self._pop_topic(st, topic, rand, False)
            else:
                self._pop_queue(st, topic, queue_id, False)
            if not need_retry and st.count < max_msgs and not order:
                self._pop_topic(st, retry_topic, rand, True)

        if st.count:
            s.counters.get_requests += 1
            if st.rest > 0 and len(self.holds):
                self.holds.notify(topic)  # more is there: held pops of the topic may take it (as 5.x)
            response = self._pop_response(
                request, ResponseCode.SUCCESS, "FOUND", now, invisible_time, revive_qid, st.rest
            )
        else:
            if poll_time > 0 and allow_suspend:
                if self.holds.is_full():
                    self.holds.full += 1
                    return self._pop_response(
                        request, POLLING_FULL, "NO_MESSAGE_IN_QUEUE", now, invisible_time, revive_qid, st.rest
                    )
                expires = born + poll_time
                if expires > now:
                    topics = lmqs if lmqs is not None else [topic] if order else [topic, retry_topic]
                    held = HeldPop(ctx, request, topics, self.topics_signature(topics), time.perf_counter())
                    self.holds.hold(held, expires - now)
                    return None
            s.counters.get_requests += 1
            response = self._pop_response(
                request, POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", now, invisible_time, revive_qid, st.rest
            )
        fields = response.ext_fields
        fields["startOffsetInfo"] = ";".join(st.start_info)
        fields["msgOffsetInfo"] = ";".join(st.msg_info)
        if order:
            fields["orderCountInfo"] = ";".join(st.order_info)
        if lmqs is not None:
            fields["lmqInfo"] = ";".join(lite_info)
        if st.count:
            response.body = b"".join(st.parts)
        return response

    @staticmethod
    def _lmqs(text: str | None) -> list[str] | None:
        """rmq's extension of POP_MESSAGE for its gRPC endpoint's lite consumers: ``lmqs``, the LMQs
        (comma-separated) to pop orderly, queue 0 of each, in one request that waits on all of them."""
        if text is None:
            return None
        return [t for t in text.split(",") if is_lmq(t)]

    def _pop_lmqs(self, st: _Pop, lmqs: list[str], rand: int) -> list[str]:
        """Pop the LMQs in turn (from a random one) until the batch is full; per LMQ popped, its lmqInfo
        entry ``<lmq> <offset>/<deliveries before>,...`` (its records follow in that order)."""
        out = []
        n = len(lmqs)
        for i in range(n):
            if st.count >= st.max_msgs:
                break
            lmq = lmqs[(rand + i) % n]
            offsets = self._pop_queue(st, lmq, 0, False)
            if not offsets:
                continue
            info = self.orders.table.get((lmq, st.group, 0))
            counts = info.counts if info is not None else {}
            out.append(f"{lmq} " + ",".join(f"{o}/{counts.get(o, 0)}" for o in offsets))
        return out

    def _pop_topic(self, st: _Pop, topic: str, rand: int, is_retry: bool) -> None:
        tc = self.s.topics.get(topic)
        if tc is None:
            return
        n = tc.read_queue_nums
        for i in range(n):
            self._pop_queue(st, topic, (rand + i) % n, is_retry)

    def _pop_offset(self, st: _Pop, topic: str, queue_id: int) -> int:
        s = self.s
        offset = s.offsets.query(st.group, topic, queue_id)
        if offset >= 0:
            return offset
        if st.init_mode == INIT_MODE_MIN or is_retry_topic(topic):
            offset = s.store.min_offset(topic, queue_id)
        elif s.store.min_offset(topic, queue_id) <= 0:
            offset = 0  # 5.x: the queue's first message is still in memory (initPopOffsetByCheckMsgInMem)
        else:
            offset = max(0, s.store.max_offset(topic, queue_id) - 1)
        s.offsets.commit(st.group, topic, queue_id, offset)
        return offset

    def _get(
        self, st: _Pop, topic: str, queue_id: int, offset: int, n: int
    ) -> tuple[str, int, int, int, bytes, int]:
        sub = st.sub
        if is_lmq(topic):
            return self.s.store.get_message(topic, queue_id, offset, n, None)
        if sub.sql is None:
            return self.s.store.get_message(topic, queue_id, offset, n, sub.codes)
        return self.s.store.get_message(
            topic, queue_id, offset, n, None, 0, sub.sql, f"{st.group}#{st.topic}"
        )

    def _pop_queue(self, st: _Pop, topic: str, queue_id: int, is_retry: bool) -> list[int]:
        """Pop what ``st`` still wants of one queue; the queue offsets popped."""
        s = self.s
        offset = self._pop_offset(st, topic, queue_id)
        if st.order and self.orders.check_block(st.attempt_id, topic, st.group, queue_id):
            return []
        want = st.max_msgs - st.count
        if want <= 0:
            st.rest += max(0, s.store.max_offset(topic, queue_id) - offset)
            return []
        status, nxt, _mn, mx, body, count = self._get(st, topic, queue_id, offset, want)
        if status in _MOVED and nxt != offset:
            log.info(
                "POP: offset %d of %s:%d for group %s is %s; moved to %d",
                offset,
                topic,
                queue_id,
                st.group,
                status,
                nxt,
            )
            s.offsets.commit(st.group, topic, queue_id, nxt)
            offset = nxt
            status, nxt, _mn, mx, body, count = self._get(st, topic, queue_id, offset, want)
        offsets: list[int] = []
        if status == "FOUND" and count:
            # An LMQ's records carry their own topic's queue offsets; its own are the units read, one
            # after the other (LMQ pops are unfiltered).
            offsets = list(range(offset, offset + count)) if is_lmq(topic) else queue_offsets(body)
            if st.order:
                st.order_info += self.orders.update(
                    st.attempt_id, topic, st.group, queue_id, st.pop_time, st.invisible_time, offsets
                )
                s.offsets.commit(st.group, topic, queue_id, offset)
            else:
                ck = CheckPoint(
                    topic,
                    queue_id,
                    st.group,
                    offset,
                    st.pop_time,
                    st.invisible_time,
                    [o - offset for o in offsets],
                    s.config.broker_name,
                )
                # The checkpoint first: a pop offset moved past messages without one would lose them.
                self.revive.add_checkpoint(ck, st.revive_qid)
                s.offsets.commit(st.group, topic, queue_id, nxt)
            st.start_info.append(offset_info(topic, queue_id, str(offset)))
            st.msg_info.append(offset_info(topic, queue_id, ",".join(str(o) for o in offsets)))
            if is_retry:
                st.parts.append(self._retry_records(st, body, offset))
            else:
                st.parts.append(body)
            st.count += len(offsets)
            s.counters.get_messages += len(offsets)
            s.group_gets.add(f"{topic}@{st.group}", len(offsets))
            s.metrics.got(topic, st.group, queue_id, len(offsets), len(body), nxt)
        elif status in _SKIPPED and nxt > offset:
            s.offsets.commit(st.group, topic, queue_id, nxt)
        st.rest += max(0, mx - nxt)
        return offsets

    def _retry_records(self, st: _Pop, body: bytes, start: int) -> bytes:
        """Retry-topic records as 5.x answers them: under the topic popped, with their receipt handle."""
        out = []
        broker = self.s.config.broker_name
        for m in StoredMessage.decode_all(body):
            handle = ExtraInfo(
                start,
                st.pop_time,
                st.invisible_time,
                st.revive_qid,
                retry_mark(m.topic),
                broker,
                m.queue_id,
                m.queue_offset,
            )
            m.properties.setdefault(POP_CK, str(handle))
            m.topic = st.topic
            out.append(encode_record(m))
        return b"".join(out)

    # --- ACK_MESSAGE / BATCH_ACK_MESSAGE -----------------------------------------------------------------
    def ack(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        s = self.s
        response = create_response(request)
        if request.code == ACK_MESSAGE:
            f = request.ext_fields
            group = header_str(f, "consumerGroup")
            topic = header_str(f, "topic")
            queue_id = header_int(f, "queueId")
            offset = header_long(f, "offset")
            tc = self._topic(topic)
            if tc is None:
                return create_response(
                    request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
                )
            if queue_id < 0 or queue_id >= tc.read_queue_nums:
                return create_response(
                    request,
                    ResponseCode.MESSAGE_ILLEGAL,
                    f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                    f"[{tc.read_queue_nums}] consumer:[{ctx.remote_addr}]",
                )
            mn, mx = s.store.min_offset(topic, queue_id), s.store.max_offset(topic, queue_id)
            if offset < mn or offset > mx:
                return create_response(
                    request,
                    ResponseCode.NO_MESSAGE,
                    f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{mn}~{mx}",
                )
            try:
                info = ExtraInfo.parse(f.get("extraInfo"))
            except ExtraInfoError as e:
                return create_response(request, INVALID_PARAMETER, str(e))
            if info.is_order:
                return self._ack_orderly(ctx, request, topic, group, queue_id, offset, info.pop_time)
            refusal = self._check_revive_qid(info.revive_qid)
            if refusal:
                return create_response(request, ResponseCode.MESSAGE_ILLEGAL, refusal)
            ack = AckRecord(
                topic, queue_id, group, info.ck_queue_offset, info.pop_time, [offset], info.broker_name
            )
            return self._when_flushed(self.revive.add_ack(ack, info.revive_qid), ctx, response)
        try:
            broker_name, acks = decode_batch_ack_body(request.body)
        except ValueError as e:
            return create_response(request, INVALID_PARAMETER, str(e))
        if not acks:
            return create_response(request, ResponseCode.NO_MESSAGE)
        end = 0
        skipped = 0
        for b in acks:
            try:
                topic = real_topic(b.topic, b.consumer_group, b.retry)
            except ExtraInfoError as e:
                return create_response(request, INVALID_PARAMETER, str(e))
            if s.topics.get(topic) is None:
                skipped += len(b.bits)
                continue
            mn, mx = s.store.min_offset(topic, b.queue_id), s.store.max_offset(topic, b.queue_id)
            offsets = [b.start_offset + i for i in b.bits if mn <= b.start_offset + i <= mx]
            skipped += len(b.bits) - len(offsets)
            if not offsets:
                continue
            if b.revive_queue_id == ORDER_REVIVE_QUEUE:
                for o in offsets:
                    r = self._ack_orderly(ctx, request, topic, b.consumer_group, b.queue_id, o, b.pop_time)
                    if r.code != ResponseCode.SUCCESS:
                        response = r
                continue
            refusal = self._check_revive_qid(b.revive_queue_id)
            if refusal:
                return create_response(request, ResponseCode.MESSAGE_ILLEGAL, refusal)
            ack = AckRecord(
                topic, b.queue_id, b.consumer_group, b.start_offset, b.pop_time, offsets, broker_name, True
            )
            end = self.revive.add_ack(ack, b.revive_queue_id)
        if skipped:
            # As Apache's broker, a batch skips acks of topics it does not have or of offsets outside the
            # queue; rmq says how many (an extension header), so rmq's gRPC port can ack those one by one.
            response.ext_fields["skipped"] = str(skipped)
            log.info(
                "POP: batch ack from %s skipped %d ack(s) of unknown topics or offsets outside their queues",
                ctx.remote_addr,
                skipped,
            )
        return self._when_flushed(end, ctx, response)

    def _when_flushed(
        self, end: int, ctx: RequestContext, response: RemotingCommand
    ) -> RemotingCommand | None:
        """With SYNC_FLUSH an ack is answered once its record (ending at ``end``) is flushed, as 5.x's
        put of the ack record waits for the flush: an acked message must not come back after a power
        loss either."""
        if end and self.s.config.sync_flush and self.s.hold_until_flushed(end, ctx, response):
            return None
        return response

    def _check_revive_qid(self, qid: int) -> str | None:
        if 0 <= qid < self.revive.queue_nums:
            return None
        return f"reviveQid {qid} is not a revive queue of this broker (0..{self.revive.queue_nums - 1})"

    def _ack_orderly(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        topic: str,
        group: str,
        queue_id: int,
        offset: int,
        pop_time: int,
    ) -> RemotingCommand:
        s = self.s
        old = s.offsets.query(group, topic, queue_id)
        if offset < old:
            return create_response(request)
        nxt = self.orders.commit_and_next(topic, group, queue_id, offset, pop_time)
        if nxt > -1:
            s.offsets.commit(group, topic, queue_id, nxt)
            # An acked orderly message must not come back after a crash: its offset and the batch's
            # acks are on disk before the answer (an orderly ack has no revive record to replay).
            self.revive.persist()
            if not self.orders.check_block(None, topic, group, queue_id):
                self.holds.notify(topic)
        elif nxt == -1:
            remark = (
                f"offset is illegal, key:{topic}@{group}@{queue_id}, old:{old}, commit:{offset}, next:{nxt}, "
                f"{ctx.remote_addr}"
            )
            log.warning("POP: orderly ack refused: %s", remark)
            return create_response(request, ResponseCode.MESSAGE_ILLEGAL, remark)
        return create_response(request)

    # --- CHANGE_MESSAGE_INVISIBLETIME --------------------------------------------------------------------
    def change_invisible_time(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        s = self.s
        f = request.ext_fields
        group = header_str(f, "consumerGroup")
        topic = header_str(f, "topic")
        queue_id = header_int(f, "queueId")
        offset = header_long(f, "offset")
        invisible_time = header_long(f, "invisibleTime")

        def answer(
            code: int = ResponseCode.SUCCESS,
            remark: str | None = "not set any response code",  # 5.x's remark where it sets none
            pt: int = 0,
            it: int = 0,
            rq: int = 0,
        ) -> RemotingCommand:
            fields = {"popTime": str(pt), "invisibleTime": str(it), "reviveQid": str(rq)}
            return create_response(request, code, remark, fields)

        tc = self._topic(topic)
        if tc is None:
            return answer(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if queue_id < 0 or queue_id >= tc.read_queue_nums:
            return answer(
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                f"[{tc.read_queue_nums}] consumer:[{ctx.remote_addr}]",
            )
        mn, mx = s.store.min_offset(topic, queue_id), s.store.max_offset(topic, queue_id)
        if offset < mn or offset >= mx:
            return answer(ResponseCode.NO_MESSAGE)
        try:
            info = ExtraInfo.parse(f.get("extraInfo"))
        except ExtraInfoError as e:
            return answer(INVALID_PARAMETER, str(e))
        if invisible_time < 0:
            return answer(INVALID_PARAMETER, f"invisibleTime {invisible_time} is negative")
        if info.is_order:
            if offset < s.offsets.query(group, topic, queue_id):
                return answer()
            visible_at = now_ms() + invisible_time
            self.orders.change_visible(topic, group, queue_id, offset, info.pop_time, visible_at)
            return answer(pt=info.pop_time, it=visible_at - info.pop_time, rq=info.revive_qid)
        refusal = self._check_revive_qid(info.revive_qid)
        if refusal:
            return answer(ResponseCode.MESSAGE_ILLEGAL, refusal)
        # The new checkpoint's key is (topic, queue, offset, group, pop time): in the millisecond of the pop
        # it changes, it would be the old checkpoint's key, and the ack of the old one below would ack it
        # too (the message never revived). Its pop time is therefore always after the old one's.
        now = max(now_ms(), info.pop_time + 1)
        ck = CheckPoint(topic, queue_id, group, offset, now, invisible_time, [0], info.broker_name)
        self.revive.add_checkpoint(ck, info.revive_qid)
        old = AckRecord(
            topic, queue_id, group, info.ck_queue_offset, info.pop_time, [offset], info.broker_name
        )
        end = self.revive.add_ack(old, info.revive_qid)
        return self._when_flushed(end, ctx, answer(pt=now, it=invisible_time, rq=info.revive_qid))


LMQ_PREFIX = "%LMQ%"


def is_lmq(topic: str) -> bool:
    return topic.startswith(LMQ_PREFIX) and len(topic) > len(LMQ_PREFIX)


def is_retry_topic(topic: str) -> bool:
    return topic.startswith("%RETRY%")
