"""QUERY_MESSAGE (12) by key through the IndexFile, VIEW_MESSAGE_BY_ID (33) by commitlog offset."""

from __future__ import annotations

from rmq.broker.services import BrokerServices
from rmq.common import codes
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.context import Processor, RequestContext
from rmq.remoting.headers import header_int, header_long, header_str
from rmq.store import decode_records

__all__ = ["QueryProcessors"]


class QueryProcessors:
    def __init__(self, services: BrokerServices) -> None:
        self.s = services

    def table(self) -> dict[int, Processor]:
        return {
            RequestCode.QUERY_MESSAGE: self.query_message,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message_by_id,
        }

    def query_message(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        topic, key = header_str(f, "topic"), header_str(f, "key")
        max_num = header_int(f, "maxNum", 32)
        if (f.get(codes.UNIQUE_MSG_QUERY_FLAG) or "").lower() == "true":
            max_num = self.s.config.default_query_max_num
        max_num = max(1, min(max_num, self.s.config.max_msgs_num_batch))
        records, last_ts, last_phy = self.s.store.query_by_key(
            topic, key, max_num, header_long(f, "beginTimestamp", 0), header_long(f, "endTimestamp", 2**62)
        )
        header = {"indexLastUpdateTimestamp": str(last_ts), "indexLastUpdatePhyoffset": str(last_phy)}
        if not records:
            return create_response(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                "can not find message, maybe time range not correct",
                header,
            )
        return create_response(request, ResponseCode.SUCCESS, None, header, b"".join(records))

    def view_message_by_id(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        offset = header_long(request.ext_fields, "offset")
        record = self.s.store.lookup(offset)
        if record is None:
            return create_response(
                request, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}"
            )
        if self.s.read_check is not None:
            records = decode_records(record)
            topic = records[0][0] if records else ""
            refusal = self.s.read_check(ctx.remote_addr, request, topic)
            if refusal is not None:
                return create_response(request, ResponseCode.NO_PERMISSION, refusal)
        return create_response(request, body=record)
