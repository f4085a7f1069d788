"""The handlers of broker -> client requests (``CL/impl/ClientRemotingProcessor.java``, REMOTING.md §3.7).

* NOTIFY_CONSUMER_IDS_CHANGED (40, oneway): rebalance now;
* CHECK_TRANSACTION_STATE (39, oneway): decode the half message, hand it to the producer of its ``PGROUP``;
* GET_CONSUMER_RUNNING_INFO (307): the consumer's ConsumerRunningInfo JSON (process queues keyed by
  MessageQueue objects, fastjson style);
* RESET_CONSUMER_CLIENT_OFFSET (220, Java or C++ body form): reset the group's offsets of a topic;
* GET_CONSUMER_STATUS_FROM_CLIENT (221): the group's offsets of a topic.

Anything else is answered with REQUEST_CODE_NOT_SUPPORTED by the dispatcher.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmq.client.message import MessageQueue, decode_messages
from rmq.common import fastjson
from rmq.common.codes import RMQ_VERSION_DESC, MessageConst, RequestCode, ResponseCode
from rmq.remoting import RemotingClient, RemotingCommand, RequestContext, create_response

if TYPE_CHECKING:
    from rmq.client.instance import ClientInstance

__all__ = ["ClientRemotingProcessor"]

log = logging.getLogger(__name__)


class ClientRemotingProcessor:
    def __init__(self, instance: ClientInstance) -> None:
        self.instance = instance

    def register(self, remoting: RemotingClient) -> None:
        remoting.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_consumer_ids_changed)
        remoting.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction_state)
        remoting.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_get_consumer_running_info)
        remoting.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_consumer_offset)
        remoting.register(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, self._on_get_consumer_status)

    def _on_consumer_ids_changed(self, ctx: RequestContext, request: RemotingCommand) -> None:
        log.info(
            "NOTIFY_CONSUMER_IDS_CHANGED from %s for group %s",
            ctx.remote_addr,
            request.ext_fields.get("consumerGroup"),
        )
        self.instance.rebalance_immediately()

    def _on_check_transaction_state(self, ctx: RequestContext, request: RemotingCommand) -> None:
        messages = decode_messages(request.body or b"")
        if not messages:
            log.warning("CHECK_TRANSACTION_STATE from %s without a message", ctx.remote_addr)
            return
        msg = messages[0]
        group = msg.get_property(MessageConst.PRODUCER_GROUP)
        producer = self.instance.producers.get(group or "")
        if producer is None:
            log.debug("CHECK_TRANSACTION_STATE for unknown producer group %s", group)
            return
        producer.check_transaction_state(ctx.remote_addr, msg, request.ext_fields)

    def _on_get_consumer_running_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_fields.get("consumerGroup", "")
        consumer = self.instance.consumers.get(group)
        if consumer is None:
            return create_response(
                request,
                int(ResponseCode.SYSTEM_ERROR),
                f"The Consumer Group <{group}> not exist in this consumer",
            )
        info = consumer.running_info()
        props = info.setdefault("properties", {})
        props.setdefault("PROP_NAMESERVER_ADDR", self.instance.config.namesrv_addr)
        props.setdefault("PROP_CLIENT_VERSION", RMQ_VERSION_DESC)
        return create_response(request, body=fastjson.dumps_with_object_keys(info))

    def _on_reset_consumer_offset(self, ctx: RequestContext, request: RemotingCommand) -> None:
        group = request.ext_fields.get("group", "")
        topic = request.ext_fields.get("topic", "")
        consumer = self.instance.consumers.get(group)
        if consumer is None or not request.body:
            return
        table = (fastjson.loads(request.body) or {}).get("offsetTable") or {}
        offsets: dict[MessageQueue, int] = {}
        if isinstance(table, list):  # ResetOffsetBodyForC
            for item in table:
                offsets[MessageQueue.from_dict(item)] = int(item["offset"])
        else:
            for key, value in table.items():
                mapping = key.as_dict() if isinstance(key, fastjson.ObjectKey) else fastjson.loads(key)
                offsets[MessageQueue.from_dict(mapping)] = int(value)
        consumer.reset_offset(topic, offsets)

    def _on_get_consumer_status(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_fields.get("group", "")
        topic = request.ext_fields.get("topic", "")
        consumer = self.instance.consumers.get(group)
        table = consumer.consume_status(topic) if consumer is not None else {}
        body = {
            "messageQueueTable": {
                fastjson.ObjectKey.from_mapping(mq.to_dict()): off for mq, off in table.items()
            },
            "consumerTable": {},
        }
        return create_response(request, body=fastjson.dumps_with_object_keys(body))
