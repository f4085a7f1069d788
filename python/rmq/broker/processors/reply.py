"""SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): the reply half of request-reply.

A responder sends the reply (a message to ``<cluster>_REPLY_TOPIC`` carrying the requester's client id in
``REPLY_TO_CLIENT`` and the ``CORRELATION_ID``). The broker pushes it straight to that requester's producer
connection as PUSH_REPLY_MESSAGE_TO_CLIENT (326) and waits for the requester's answer; then, with
``storeReplyMessageEnable`` (default on), stores it like any sent message, pushed or not (as the Apache
broker does). The responder is told SUCCESS once the push succeeded (the stored message's id and offset
when it was stored, else id "0" and offset 0), and SYSTEM_ERROR naming the requester when the reply names
none, there is no such connection or the push failed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Coroutine
from typing import Any, cast

from rmq.broker.processors.send import _V2, SendProcessor
from rmq.broker.records import parse_properties, properties_string
from rmq.broker.services import BrokerServices
from rmq.common.codes import MessageConst, RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand, create_request, create_response
from rmq.remoting.context import RequestContext
from rmq.remoting.errors import RemotingError

__all__ = ["ReplyProcessor"]

log = logging.getLogger(__name__)

PUSH_REPLY_TIMEOUT_MS = 3000
# Header fields passed on to the requester as they came (ReplyMessageRequestHeader).
_PASSED = (
    "producerGroup",
    "topic",
    "defaultTopic",
    "defaultTopicQueueNums",
    "queueId",
    "sysFlag",
    "bornTimestamp",
    "flag",
    "reconsumeTimes",
    "unitMode",
)


class _Failed:
    """The responder's connection, answering SYSTEM_ERROR with the push failure in place of the store's
    answer (which may come later, from the flush responder)."""

    def __init__(self, ctx: RequestContext, remark: str) -> None:
        self._ctx = ctx
        self._remark = remark

    def rewrite(self, response: RemotingCommand) -> RemotingCommand:
        response.code = ResponseCode.SYSTEM_ERROR
        response.remark = self._remark
        return response

    def send_response(self, response: RemotingCommand) -> bool:
        return self._ctx.send_response(self.rewrite(response))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


class ReplyProcessor:
    def __init__(self, services: BrokerServices, send: SendProcessor) -> None:
        self.s = services
        self.send = send
        self.store_reply = services.config.store_reply_message_enable

    def __call__(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> Coroutine[Any, Any, RemotingCommand | None]:
        return self._reply(ctx, request)

    async def _reply(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        fields = request.ext_fields
        if request.code == RequestCode.SEND_REPLY_MESSAGE_V2:
            h = {_V2[k]: v for k, v in fields.items() if k in _V2}
        else:
            h = dict(fields)
        failure = await self._push(ctx, request, h)
        pushed = create_response(
            request,
            ResponseCode.SUCCESS,
            None,
            {"msgId": "0", "queueId": h.get("queueId", "0"), "queueOffset": "0"},
        )
        if not self.store_reply:
            return pushed if failure is None else _Failed(ctx, failure).rewrite(pushed)
        if failure is None:
            stored = self.send.send(ctx, request, h, False)
            if stored is not None and stored.code != ResponseCode.SUCCESS:
                log.warning("reply message pushed but not stored: %s", stored.remark)
                return pushed
            return stored  # None: held for a sync flush, the flush responder answers
        failed = _Failed(ctx, failure)
        stored = self.send.send(cast(RequestContext, failed), request, h, False)
        return None if stored is None else failed.rewrite(stored)

    async def _push(self, ctx: RequestContext, request: RemotingCommand, h: dict[str, str]) -> str | None:
        """Push the reply to its requester; ``None`` once it took it, else why not (logged)."""
        props = parse_properties(h.get("properties") or "")
        who = props.get(MessageConst.MESSAGE_REPLY_TO_CLIENT)
        if not who:
            remark = f"reply message properties[{MessageConst.MESSAGE_REPLY_TO_CLIENT}] is null"
            log.warning("%s (reply from %s)", remark, ctx.remote_addr)
            return remark
        channel = self.s.producers.find_channel(who)
        if channel is None:
            remark = f"push reply message fail, channel of <{who}> not found."
            log.warning("%s (reply from %s)", remark, ctx.remote_addr)
            return remark
        props[MessageConst.PUSH_REPLY_TIME] = str(int(time.time() * 1000))
        header = {k: h[k] for k in _PASSED if k in h}
        header["properties"] = properties_string(props)
        header["bornHost"] = ctx.remote_addr
        header["storeHost"] = f"{self.s.config.broker_ip1}:{self.s.config.listen_port}"
        header["storeTimestamp"] = str(int(time.time() * 1000))
        push = create_request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, header, request.body)
        try:
            answer = await channel.ctx.send_request(push, PUSH_REPLY_TIMEOUT_MS)
        except (RemotingError, OSError) as e:
            log.warning("push reply message to <%s> failed: %s", who, e)
            return f"push reply message to <{who}> failed"
        if answer.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> answered %s: %s", who, answer.code, answer.remark)
            return f"push reply message to <{who}> failed"
        return None
