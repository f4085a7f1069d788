"""CONSUMER_SEND_MSG_BACK (36): a consumer failed a message; re-put it to `%RETRY%<group>` with a
growing delay, or to `%DLQ%<group>` after `maxReconsumeTimes` (REMOTING.md §7.6)."""

from __future__ import annotations

import random

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


class SendBackProcessor:
    def __init__(self, services: BrokerServices) -> None:
        self.s = services

    def table(self) -> dict[int, Processor]:
        return {RequestCode.CONSUMER_SEND_MSG_BACK: self.send_back}

    def send_back(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        s = self.s
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
        try:
            s.store.put(
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
        return create_response(request)
