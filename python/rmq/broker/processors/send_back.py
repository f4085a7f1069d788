"""CONSUMER_SEND_MSG_BACK (36): a consumer failed a message; re-put it to `%RETRY%<group>` with a
growing delay, or to `%DLQ%<group>` after `maxReconsumeTimes` (REMOTING.md §7.6).

The answer is the consumer's receipt for the message (it moves its offset past it), so it comes once the
re-put message is as durable as a send's: after the group commit with SYNC_FLUSH, after a slave's ack on
a SYNC_MASTER (RocketMQ's send-back goes through the same put, which waits for both). Anything but
SUCCESS makes the consumer send the message back itself, through its producer.

With ACL on, the account must be allowed to read the topic of the record at the offset (SUB; its group's
own retry topic is the group): otherwise NO_PERMISSION naming that topic, and nothing is re-put."""

from __future__ import annotations

import logging
import random
import time

from rmq.broker.records import StoredMessage, properties_string
from rmq.broker.schedule import schedule_target
from rmq.broker.services import BrokerServices
from rmq.common import codes
from rmq.common.codes import MessageConst, PermName, RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.context import Processor, RequestContext
from rmq.remoting.headers import header_int, header_long, header_str
from rmq.store import MessageIllegalError, offset_msg_id

__all__ = ["SendBackProcessor"]

log = logging.getLogger(__name__)

_WARN_INTERVAL_S = 10.0
"""At most one SLAVE_NOT_AVAILABLE warning per this many seconds (with how many there were)."""


class SendBackProcessor:
    def __init__(self, services: BrokerServices) -> None:
        self.s = services
        self._sync_flush = services.config.sync_flush
        self._sync_master = services.config.broker_role == "SYNC_MASTER"
        self._slave_not_available = 0
        self._warned_at = -_WARN_INTERVAL_S

    def table(self) -> dict[int, Processor]:
        return {RequestCode.CONSUMER_SEND_MSG_BACK: self.send_back}

    def send_back(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        s = self.s
        # Queued with the sends in RocketMQ (its send thread pool): the same back-pressure.
        busy = s.fast_failure.waited_too_long(ctx, request)
        if busy is not None:
            return busy
        f = request.ext_fields
        group = header_str(f, "group")
        offset = header_long(f, "offset")
        delay_level = header_int(f, "delayLevel", 0)
        gcfg = s.groups.find(group)
        if gcfg is None:
            return create_response(
                request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        if not PermName.is_writeable(s.config.broker_permission):
            return create_response(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{s.config.broker_ip1}] sending message is forbidden",
            )
        if gcfg.retry_queue_nums <= 0:
            return create_response(request)
        raw = s.store.lookup(offset)
        if raw is None:
            return create_response(
                request, ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}"
            )
        m = StoredMessage.decode_one(raw)
        if s.read_check is not None:
            # The re-put copy lands in the group's retry topic, which the group may read: without this a
            # send-back would read any topic's record by its offset (RocketMQ checks only the group).
            refusal = s.read_check(ctx.remote_addr, request, m.topic)
            if refusal is not None:
                return create_response(request, ResponseCode.NO_PERMISSION, refusal)
        props = dict(m.properties)
        props.setdefault(MessageConst.RETRY_TOPIC, m.topic)
        max_times = gcfg.retry_max_times
        if request.version >= codes.V3_4_9 and f.get("maxReconsumeTimes"):
            max_times = header_int(f, "maxReconsumeTimes")
        if m.reconsume_times >= max_times or delay_level < 0:
            topic = codes.DLQ_GROUP_TOPIC_PREFIX + group
            s.topics.create_in_back(topic, 1, PermName.READ | PermName.WRITE)
            queue_id = 0
            props.pop(MessageConst.DELAY_TIME_LEVEL, None)
            level = 0
        else:
            topic = codes.RETRY_GROUP_TOPIC_PREFIX + group
            s.topics.create_in_back(topic, gcfg.retry_queue_nums)
            queue_id = random.randrange(gcfg.retry_queue_nums)
            level = delay_level if delay_level > 0 else 3 + m.reconsume_times
        origin = f.get("originMsgId") or props.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        props.setdefault(MessageConst.ORIGIN_MESSAGE_ID, origin or offset_msg_id(m.store_host, offset))
        props[MessageConst.WAIT_STORE_MSG_OK] = "false"
        if level > 0 and s.delay_levels:
            topic, queue_id, _ = schedule_target(topic, queue_id, props, level, len(s.delay_levels))
        busy = s.fast_failure.page_cache_busy(request, s.store.put_lock_held_ms())
        if busy is not None:
            return busy
        try:
            _msg_id, _queue_offset, phys, size, _ = s.store.put(
                topic,
                queue_id,
                m.body,
                properties_string(props).encode(),
                m.flag,
                m.sys_flag,
                m.born_timestamp,
                m.born_host,
                m.reconsume_times + 1,
                0,
            )
        except MessageIllegalError as e:
            return create_response(request, ResponseCode.MESSAGE_ILLEGAL, str(e))
        if level == 0 and topic.startswith(codes.DLQ_GROUP_TOPIC_PREFIX):
            s.metrics.dead(props[MessageConst.RETRY_TOPIC], group)
        return self._when_durable(phys + size, ctx, create_response(request))

    def _when_durable(
        self, end: int, ctx: RequestContext, response: RemotingCommand
    ) -> RemotingCommand | None:
        """`response` now, or held until the record ending at `end` is flushed (SYNC_FLUSH) or on a slave
        (SYNC_MASTER; then flushed as well with SYNC_FLUSH). When that takes too long the answer is
        SYSTEM_ERROR with remark FLUSH_DISK_TIMEOUT or FLUSH_SLAVE_TIMEOUT, as RocketMQ answers a send-back
        whose put is not PUT_OK (the consumer then sends the message back itself)."""
        s = self.s
        if self._sync_master:
            if s.hold_until_replicated(end, ctx, response, status_remark=True):
                return None
            # Stored but not on a slave: RocketMQ's send-back answers a put that is not PUT_OK so.
            response.code = ResponseCode.SYSTEM_ERROR
            response.remark = "SLAVE_NOT_AVAILABLE"
            self._slave_not_available += 1
            now = time.monotonic()
            if now - self._warned_at >= _WARN_INTERVAL_S:
                log.warning(
                    "SYNC_MASTER: %d send-backs answered SYSTEM_ERROR SLAVE_NOT_AVAILABLE (stored, not on a"
                    " slave; the consumer sends the message back itself)",
                    self._slave_not_available,
                )
                self._warned_at = now
                self._slave_not_available = 0
            return response
        if self._sync_flush and s.hold_until_flushed(end, ctx, response, status_remark=True):
            return None
        return response
