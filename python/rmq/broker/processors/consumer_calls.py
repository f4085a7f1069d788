"""Admin requests the broker answers by calling a group's live consumers (REMOTING.md §3.6):

* INVOKE_BROKER_TO_RESET_OFFSET (222): work out, for each write queue of the topic, the offset to go back
  (or forward) to -- the first message stored at or after ``timestamp``, the queue's end for ``-1`` -- and
  send it to every connected consumer of the group as RESET_CONSUMER_CLIENT_OFFSET (220, oneway; the C++
  body form to a C++ admin). With ``isForce`` false a queue only moves back. The consumers apply and commit
  the offsets; the broker stores none itself (as Apache's broker). The answer carries the table sent. A
  group with no committed offset on a queue, or with no consumer online (CONSUMER_NOT_ONLINE, on which
  ``mqadmin resetOffsetByTime`` falls back to committing the offsets itself), is refused.
* INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223): ask each consumer of the group (or only ``clientAddr``) for
  its offsets of the topic (GET_CONSUMER_STATUS_FROM_CLIENT, 221); the answer maps client id to them. A
  consumer that fails to answer is left out (logged).
* GET_CONSUMER_RUNNING_INFO (307): forwarded as is to the consumer ``clientId`` of the group; its answer
  is the answer.
* CONSUME_MESSAGE_DIRECTLY (309): the message the offset message id ``msgId`` names, read from the store,
  forwarded to the consumer ``clientId`` to consume once; its ConsumeMessageDirectlyResult is the answer.
"""

from __future__ import annotations

import logging
from typing import Final

from rmq._store import StoreError
from rmq.broker.clients import ClientChannel
from rmq.broker.services import BrokerServices
from rmq.common import fastjson
from rmq.common.codes import LanguageCode, RequestCode, ResponseCode
from rmq.common.fastjson import ObjectKey
from rmq.remoting.command import RemotingCommand, create_request, create_response
from rmq.remoting.context import Processor, RequestContext
from rmq.remoting.errors import RemotingError, RemotingTimeoutError
from rmq.remoting.headers import header_bool, header_long, header_str
from rmq.store import decode_offset_msg_id

__all__ = ["ConsumerCallProcessors"]

log = logging.getLogger(__name__)

CALL_TIMEOUT_MS: Final = 5000
"""How long the broker waits for a consumer's answer (Apache's broker waits as long)."""
DIRECT_CONSUME_TIMEOUT_MS: Final = 10_000
"""How long the broker waits for a consumer to consume a message directly (Apache's callClient wait)."""


class ConsumerCallProcessors:
    def __init__(self, services: BrokerServices) -> None:
        self.s = services

    def table(self) -> dict[int, Processor]:
        return {
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.get_consumer_status,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
        }

    def _online(self, group: str) -> list[ClientChannel]:
        info = self.s.consumers.get(group)
        if info is None:
            return []
        return [c for c in info.channels.values() if not c.ctx.is_closed]

    # --- 222 --------------------------------------------------------------------------------------
    def reset_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        topic, group = header_str(f, "topic"), header_str(f, "group")
        timestamp, force = header_long(f, "timestamp"), header_bool(f, "isForce", False)
        s = self.s
        tc = s.topics.get(topic)
        if tc is None:
            log.warning("reset offset refused: no topic %s in this broker (group %s)", topic, group)
            return create_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}",
            )
        table: dict[int, int] = {}
        for qid in range(tc.write_queue_nums):
            committed = s.offsets.query(group, topic, qid)
            if committed < 0:
                log.warning("reset offset refused: group %s has no offset of %s queue %d", group, topic, qid)
                return create_response(
                    request,
                    ResponseCode.SYSTEM_ERROR,
                    f"The consumer group <{group}> not exist: no committed offset of {topic} queue {qid}",
                )
            if timestamp == -1:
                target = s.store.max_offset(topic, qid)
            else:
                target = max(s.store.offset_by_time(topic, qid, timestamp), 0)
            table[qid] = target if force or target < committed else committed
        channels = self._online(group)
        if not channels:
            remark = (
                f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} "
                f"Timestamp: {timestamp}"
            )
            log.warning("reset offset refused: %s", remark)
            return create_response(request, ResponseCode.CONSUMER_NOT_ONLINE, remark)
        broker = s.config.broker_name
        java_body = _offset_table_body(topic, broker, table)
        if request.language == LanguageCode.CPP:
            body = fastjson.dumps(
                {
                    "offsetTable": [
                        {"brokerName": broker, "offset": off, "queueId": qid, "topic": topic}
                        for qid, off in table.items()
                    ]
                }
            )
        else:
            body = java_body
        fields = {"topic": topic, "group": group, "timestamp": str(timestamp)}
        for ch in channels:
            try:
                ch.ctx.send_oneway(
                    create_request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, fields, body, oneway=True)
                )
            except (RemotingError, OSError) as e:  # a dying channel must not stop the others
                log.warning("reset offset of %s: consumer %s unreachable: %s", group, ch.client_id, e)
        log.info(
            "reset offset of group %s topic %s to %s (timestamp %d, force %s) sent to %d consumer(s)",
            group,
            topic,
            table,
            timestamp,
            force,
            len(channels),
        )
        return create_response(request, body=java_body)

    # --- 223 --------------------------------------------------------------------------------------
    async def get_consumer_status(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        topic, group = header_str(f, "topic"), header_str(f, "group")
        only = f.get("clientAddr") or ""
        channels = self._online(group)
        if not channels:
            return create_response(
                request, ResponseCode.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{group}]"
            )
        table: dict[str, object] = {}
        for ch in channels:
            if only and only != ch.client_id:
                continue
            ask = create_request(
                RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": topic, "group": group}
            )
            try:
                answer = await ch.ctx.send_request(ask, CALL_TIMEOUT_MS)
                if answer.code == ResponseCode.SUCCESS and answer.body:
                    status = fastjson.loads(bytes(answer.body))
                    table[ch.client_id] = status.get("messageQueueTable") or {}
                else:
                    log.warning(
                        "consumer status of %s from %s: %s %s",
                        group,
                        ch.client_id,
                        answer.code,
                        answer.remark,
                    )
            except (RemotingError, OSError, ValueError) as e:
                log.warning("consumer status of %s from %s failed: %s", group, ch.client_id, e)
            if only:
                break
        body = fastjson.dumps_with_object_keys({"consumerTable": table, "messageQueueTable": {}})
        return create_response(request, body=body)

    # --- 307, 309 ---------------------------------------------------------------------------------
    async def get_consumer_running_info(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        f = request.ext_fields
        group, client_id = header_str(f, "consumerGroup"), header_str(f, "clientId")
        forward = create_request(RequestCode.GET_CONSUMER_RUNNING_INFO, dict(f), request.body)
        return await self._call_consumer(request, forward, group, client_id, CALL_TIMEOUT_MS)

    async def consume_message_directly(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """Have the consumer ``clientId`` of the group consume the message the offset message id ``msgId``
        names, once, outside its queues (``mqadmin queryMsgById -g -d``): forwarded with this broker's name
        and the stored record as the body; the consumer's ConsumeMessageDirectlyResult is the answer."""
        f = request.ext_fields
        group, client_id = header_str(f, "consumerGroup"), header_str(f, "clientId", "")
        msg_id = header_str(f, "msgId", "")
        fields = {**f, "brokerName": self.s.config.broker_name}
        body = request.body
        try:
            record = self.s.store.lookup(decode_offset_msg_id(msg_id)[1])
        except StoreError as e:
            # Apache's broker forwards the request without the message too; the consumer then refuses it.
            log.warning("consume directly for %s: msgId %r names no stored message: %s", group, msg_id, e)
            record = None
        if record is not None:
            body = record
        forward = create_request(RequestCode.CONSUME_MESSAGE_DIRECTLY, fields, body)
        return await self._call_consumer(request, forward, group, client_id, DIRECT_CONSUME_TIMEOUT_MS)

    async def _call_consumer(
        self, request: RemotingCommand, forward: RemotingCommand, group: str, client_id: str, timeout_ms: int
    ) -> RemotingCommand:
        """Forward ``forward`` to the group's consumer ``client_id``; its answer is the answer."""
        what = RequestCode(forward.code).name
        channel = next((c for c in self._online(group) if c.client_id == client_id), None)
        if channel is None:
            return create_response(
                request, ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
            )
        try:
            answer = await channel.ctx.send_request(forward, timeout_ms)
        except RemotingTimeoutError as e:
            log.warning("%s of %s from %s timed out: %s", what, group, client_id, e)
            return create_response(
                request, ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {e}"
            )
        except (RemotingError, OSError) as e:
            log.warning("%s of %s from %s failed: %s", what, group, client_id, e)
            return create_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"invoke consumer <{group}> <{client_id}> Exception: {e}",
            )
        return create_response(
            request, answer.code, answer.remark, dict(answer.ext_fields or {}), answer.body
        )


def _offset_table_body(topic: str, broker: str, table: dict[int, int]) -> bytes:
    """ResetOffsetBody: ``{"offsetTable": {MessageQueue: offset}}`` (object keys, as fastjson writes them)."""
    keys = {
        ObjectKey.from_mapping({"brokerName": broker, "queueId": qid, "topic": topic}): off
        for qid, off in table.items()
    }
    return fastjson.dumps_with_object_keys({"offsetTable": keys})
