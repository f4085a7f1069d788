"""Client management (REMOTING.md §3.2, §7.8): HEART_BEAT (34), UNREGISTER_CLIENT (35),
GET_CONSUMER_LIST_BY_GROUP (38), LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42), CHECK_CLIENT_CONFIG (46)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from rmq.broker.clients import ClientChannel
from rmq.broker.services import BrokerServices
from rmq.broker.subscription import (
    SqlNotEnabledError,
    SubscriptionData,
    SubscriptionParseError,
    parse_subscription,
)
from rmq.common import codes, fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.context import Processor, ProcessorResult, RequestContext
from rmq.remoting.headers import header_str

__all__ = ["ClientProcessors"]

log = logging.getLogger(__name__)

_CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY")
_MODELS = ("BROADCASTING", "CLUSTERING")
_FROM_WHERE = (
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
)


def _enum(value: Any, names: tuple[str, ...], default: str) -> str:
    """fastjson enums arrive as names (Java) or ordinals (C++)."""
    if isinstance(value, str) and value in names:
        return value
    try:
        i = int(value)
    except (TypeError, ValueError):
        return default
    return names[i] if 0 <= i < len(names) else default


def _mq_list(body: dict[str, Any]) -> list[tuple[str, str, int]]:
    out = []
    for mq in body.get("mqSet") or []:
        out.append((str(mq.get("topic", "")), str(mq.get("brokerName", "")), int(mq.get("queueId", 0))))
    return out


def _mq_json(mq: tuple[str, str, int]) -> dict[str, Any]:
    return {"brokerName": mq[1], "queueId": mq[2], "topic": mq[0]}


class ClientProcessors:
    registration_wait_s = 2.0
    """How long a heartbeat that created a retry topic waits for the name servers to know it (well under
    the clients' 3 s heartbeat timeout)."""

    def __init__(self, services: BrokerServices) -> None:
        self.s = services

    def table(self) -> dict[int, Processor]:
        return {
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.get_consumer_list_by_group,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch_mq,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch_mq,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
        }

    def _body(self, request: RemotingCommand) -> dict[str, Any]:
        if not request.body:
            raise ValueError("request body is empty")
        data = fastjson.loads(bytes(request.body))
        if not isinstance(data, dict):
            raise ValueError("request body is not a JSON object")
        return data

    def heart_beat(self, ctx: RequestContext, request: RemotingCommand) -> ProcessorResult:
        """Registers the client's groups. A clustering consumer's first heartbeat creates its
        ``%RETRY%group`` topic; then, as the Java broker does, the answer waits until the name servers
        know that topic, so a client refreshing its routes right after the heartbeat finds it."""
        s = self.s
        created_retry_topic = False
        data = self._body(request)
        client_id = str(data.get("clientID") or data.get("clientId") or "")
        if not client_id:
            return create_response(request, ResponseCode.SYSTEM_ERROR, "heartbeat without clientID")
        ctx.attributes["client_id"] = client_id
        for cd in data.get("consumerDataSet") or []:
            group = str(cd.get("groupName") or "")
            if not group:
                continue
            gcfg = s.groups.find(group)
            if gcfg is None:
                continue
            model = _enum(cd.get("messageModel"), _MODELS, "CLUSTERING")
            subs: list[SubscriptionData] = []
            for sd in cd.get("subscriptionDataSet") or []:
                topic = str(sd.get("topic") or "")
                if not topic:
                    continue
                try:
                    sub = parse_subscription(
                        topic,
                        sd.get("subString"),
                        sd.get("expressionType"),
                        int(sd.get("subVersion") or 0),
                        sql_enabled=s.config.enable_property_filter,
                    )
                except SqlNotEnabledError as e:
                    return create_response(request, ResponseCode.SYSTEM_ERROR, str(e))
                except SubscriptionParseError as e:
                    return create_response(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(e))
                if sub.sql is not None:
                    s.store.register_filter(topic, f"{group}#{topic}", sub.sql)
                subs.append(sub)
            if model == "CLUSTERING" and gcfg.retry_queue_nums > 0:
                retry_topic = codes.RETRY_GROUP_TOPIC_PREFIX + group
                created_retry_topic |= retry_topic not in s.topics
                s.topics.create_in_back(retry_topic, gcfg.retry_queue_nums)
            channel = ClientChannel(ctx, client_id, request.language, request.version)
            added, topics_changed = s.consumers.register(
                group,
                channel,
                _enum(cd.get("consumeType"), _CONSUME_TYPES, "CONSUME_PASSIVELY"),
                model,
                _enum(cd.get("consumeFromWhere"), _FROM_WHERE, "CONSUME_FROM_LAST_OFFSET"),
                subs,
            )
            if (added or topics_changed) and gcfg.notify_consumer_ids_changed_enable:
                s.consumers.notify_ids_changed(group)
        for pd in data.get("producerDataSet") or []:
            group = str(pd.get("groupName") or "")
            if group:
                s.producers.register(group, ClientChannel(ctx, client_id, request.language, request.version))
        response = create_response(request)
        if created_retry_topic and s.registrations_settled is not None:
            return self._after_registration(s.registrations_settled, response, client_id)
        return response

    async def _after_registration(
        self, settled: Callable[[], Awaitable[None]], response: RemotingCommand, client_id: str
    ) -> RemotingCommand:
        try:
            await asyncio.wait_for(settled(), self.registration_wait_s)
        except TimeoutError:
            log.warning(
                "heartbeat of %s answered before the name servers acknowledged its new retry topic "
                "(waited %.1f s; the registration goes on)",
                client_id,
                self.registration_wait_s,
            )
        return response

    def unregister_client(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        s = self.s
        f = request.ext_fields
        producer_group = f.get("producerGroup") or ""
        consumer_group = f.get("consumerGroup") or ""
        if producer_group:
            s.producers.unregister(producer_group, ctx.channel_id)
        if consumer_group and s.consumers.unregister(consumer_group, ctx.channel_id):
            gcfg = s.groups.table.get(consumer_group)
            if gcfg is None or gcfg.notify_consumer_ids_changed_enable:
                s.consumers.notify_ids_changed(consumer_group)
        return create_response(request)

    def get_consumer_list_by_group(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        group = header_str(request.ext_fields, "consumerGroup")
        info = self.s.consumers.get(group)
        if info is None or not info.channels:
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return create_response(request, body=fastjson.dumps({"consumerIdList": info.client_ids()}))

    def lock_batch_mq(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        body = self._body(request)
        group = str(body.get("consumerGroup") or "")
        client_id = str(body.get("clientId") or "")
        ok = self.s.locks.try_lock_batch(group, _mq_list(body), client_id)
        return create_response(request, body=fastjson.dumps({"lockOKMQSet": [_mq_json(m) for m in ok]}))

    def unlock_batch_mq(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        body = self._body(request)
        self.s.locks.unlock_batch(
            str(body.get("consumerGroup") or ""), _mq_list(body), str(body.get("clientId") or "")
        )
        return create_response(request)

    def check_client_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        body = self._body(request)
        sd = body.get("subscriptionData") or {}
        try:
            parse_subscription(
                str(sd.get("topic") or ""),
                sd.get("subString"),
                sd.get("expressionType"),
                sql_enabled=self.s.config.enable_property_filter,
            )
        except SqlNotEnabledError as e:
            return create_response(request, ResponseCode.SYSTEM_ERROR, str(e))
        except SubscriptionParseError as e:
            return create_response(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(e))
        return create_response(request)
