"""SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): the reply half of request-reply.

A responder sends the reply (a message to ``<cluster>_REPLY_TOPIC`` carrying the requester's client id in
``REPLY_TO_CLIENT`` and the ``CORRELATION_ID``). The broker pushes it straight to that requester's producer
connection as PUSH_REPLY_MESSAGE_TO_CLIENT (326) and waits for the requester's answer; then, with
``storeReplyMessageEnable`` (default on), stores it like any sent message. The responder is told SUCCESS
once the push succeeded (the stored message's id and offset when it was stored, else id "0" and offset 0),
and SYSTEM_ERROR naming the requester when there is no such connection or the push failed.
"""

from __future__ import annotations

import asyncio
import logging
import time

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


class ReplyProcessor:
    def __init__(self, services: BrokerServices, send: SendProcessor) -> None:
        self.s = services
        self.send = send
        self.store_reply = services.config.store_reply_message_enable
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        fields = request.ext_fields
        if request.code == RequestCode.SEND_REPLY_MESSAGE_V2:
            h = {_V2[k]: v for k, v in fields.items() if k in _V2}
        else:
            h = dict(fields)
        props = parse_properties(h.get("properties") or "")
        requester = props.get(MessageConst.MESSAGE_REPLY_TO_CLIENT)
        if not requester:
            log.warning("reply message from %s without %s: refused", ctx.remote_addr, "REPLY_TO_CLIENT")
            return create_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"reply message properties[{MessageConst.MESSAGE_REPLY_TO_CLIENT}] is null",
            )
        channel = self.s.producers.find_channel(requester)
        if channel is None:
            remark = f"push reply message fail, channel of <{requester}> not found."
            log.warning("%s (reply from %s)", remark, ctx.remote_addr)
            return create_response(request, ResponseCode.SYSTEM_ERROR, remark)
        task = asyncio.get_running_loop().create_task(self._push(ctx, request, h, props, channel.ctx))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return None

    async def _push(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        h: dict[str, str],
        props: dict[str, str],
        requester: RequestContext,
    ) -> None:
        who = props[MessageConst.MESSAGE_REPLY_TO_CLIENT]
        props[MessageConst.PUSH_REPLY_TIME] = str(int(time.time() * 1000))
        header = {k: h[k] for k in _PASSED if k in h}
        header["properties"] = properties_string(props)
        header["bornHost"] = ctx.remote_addr
        header["storeHost"] = f"{self.s.config.broker_ip1}:{self.s.config.listen_port}"
        header["storeTimestamp"] = str(int(time.time() * 1000))
        push = create_request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, header, request.body)
        try:
            answer = await requester.send_request(push, PUSH_REPLY_TIMEOUT_MS)
            ok = answer.code == ResponseCode.SUCCESS
            why = f"answered {answer.code} {answer.remark or ''}".strip()
        except (RemotingError, OSError) as e:
            ok, why = False, str(e)
        if not ok:
            log.warning("push reply message to <%s> failed: %s", who, why)
            ctx.send_response(
                create_response(request, ResponseCode.SYSTEM_ERROR, f"push reply message to {who}fail.")
            )
            return
        pushed = create_response(
            request,
            ResponseCode.SUCCESS,
            None,
            {"msgId": "0", "queueId": h.get("queueId", "0"), "queueOffset": "0"},
        )
        if not self.store_reply:
            ctx.send_response(pushed)
            return
        stored = self.send.send(ctx, request, h, False)
        if stored is None:  # held for a sync flush: the flush responder answers
            return
        if stored.code != ResponseCode.SUCCESS:
            log.warning("reply message to <%s> pushed but not stored: %s", who, stored.remark)
            stored = pushed
        ctx.send_response(stored)
