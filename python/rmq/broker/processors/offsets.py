"""Consumer offsets and queue offsets (REMOTING.md §3.2, §3.4): QUERY_CONSUMER_OFFSET (14),
UPDATE_CONSUMER_OFFSET (15), SEARCH_OFFSET_BY_TIMESTAMP (29), GET_MAX_OFFSET (30),
GET_MIN_OFFSET (31), GET_EARLIEST_MSG_STORETIME (32), CLONE_GROUP_OFFSET (314).

CLONE_GROUP_OFFSET copies ``srcGroup``'s committed offsets of ``topic`` (or of every topic it has offsets
of, when blank) to ``destGroup``. A topic this broker does not have is skipped; so is, unless ``offline``,
a topic the source group's online consumers do not subscribe to (both logged), as by Apache's broker."""

from __future__ import annotations

import logging

from rmq.broker.services import BrokerServices
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.context import Processor, RequestContext
from rmq.remoting.headers import header_bool, header_int, header_long, header_str

__all__ = ["OffsetProcessors"]

log = logging.getLogger(__name__)


class OffsetProcessors:
    def __init__(self, services: BrokerServices) -> None:
        self.s = services

    def table(self) -> dict[int, Processor]:
        return {
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
            RequestCode.CLONE_GROUP_OFFSET: self.clone_group_offset,
        }

    def query_consumer_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        group, topic = header_str(f, "consumerGroup"), header_str(f, "topic")
        queue_id = header_int(f, "queueId")
        offset = self.s.offsets.query(group, topic, queue_id)
        if offset >= 0:
            return create_response(request, ResponseCode.SUCCESS, None, {"offset": str(offset)})
        if self.s.store.min_offset(topic, queue_id) <= 0:
            # Nothing consumed yet and the queue still starts at 0: start from the beginning.
            return create_response(request, ResponseCode.SUCCESS, None, {"offset": "0"})
        return create_response(
            request,
            ResponseCode.QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )

    def update_consumer_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        self.s.offsets.commit(
            header_str(f, "consumerGroup"),
            header_str(f, "topic"),
            header_int(f, "queueId"),
            header_long(f, "commitOffset"),
        )
        # An explicit commit is made durable before it is acknowledged, so a consumer resumes
        # from it after a broker crash (pull piggyback commits are persisted periodically).
        if not request.is_oneway:
            self.s.offsets.persist()
        return create_response(request)

    def search_offset_by_timestamp(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        off = self.s.store.offset_by_time(
            header_str(f, "topic"), header_int(f, "queueId"), header_long(f, "timestamp")
        )
        return create_response(request, ResponseCode.SUCCESS, None, {"offset": str(off)})

    def get_max_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        off = self.s.store.max_offset(header_str(f, "topic"), header_int(f, "queueId"))
        return create_response(request, ResponseCode.SUCCESS, None, {"offset": str(off)})

    def get_min_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        off = self.s.store.min_offset(header_str(f, "topic"), header_int(f, "queueId"))
        return create_response(request, ResponseCode.SUCCESS, None, {"offset": str(off)})

    def get_earliest_msg_storetime(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        ts = self.s.store.earliest_message_time(header_str(f, "topic"), header_int(f, "queueId"))
        return create_response(request, ResponseCode.SUCCESS, None, {"timestamp": str(max(ts, 0))})

    def clone_group_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        src, dest = header_str(f, "srcGroup"), header_str(f, "destGroup")
        only = f.get("topic") or ""
        offline = header_bool(f, "offline", False)
        s = self.s
        topics = [only] if only else sorted(s.offsets.topics_of_group(src))
        online = s.consumers.get(src)
        for topic in topics:
            if s.topics.get(topic) is None:
                log.warning(
                    "clone group offset %s -> %s: topic %s not in this broker, skipped", src, dest, topic
                )
                continue
            if (
                not offline
                and online is not None
                and online.subscriptions
                and topic not in online.subscriptions
            ):
                log.warning(
                    "clone group offset %s -> %s: %s's consumers do not subscribe to %s, skipped",
                    src,
                    dest,
                    src,
                    topic,
                )
                continue
            cloned = s.offsets.clone(src, dest, topic)
            log.info("clone group offset %s -> %s of %s: %s", src, dest, topic, cloned)
        s.offsets.persist()
        return create_response(request)
