"""Read-only admin views of a broker's state that ``mqadmin`` asks for, answered with the bodies of
Apache RocketMQ 4.9.7's ``AdminBrokerProcessor``:

* GET_BROKER_CONSUME_STATS (317, ``mqadmin brokerConsumeStats``): ``ConsumeStatsList`` -- for every
  subscription group, one ``ConsumeStats`` per topic it committed offsets of (``isOrder``: order topics
  only; a group whose online consumers subscribe other topics skips the ones they do not), and the total
  of broker minus consumer offsets.
* GET_ALL_PRODUCER_INFO (328, ``mqadmin producer``): ``ProducerTableInfo`` -- every producer connection
  by group (client id, remote address as Java prints it, language, version, last heartbeat).
* GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305, what ``exportMetadata`` and ``exportMetrics`` filter topics by):
  the system topic set.
* QUERY_CONSUME_QUEUE (321, ``mqadmin queryCq``): a queue's min and max offsets and up to ``count`` of its
  units from ``index`` (:mod:`rmq.broker.cq_units`); with ``consumerGroup``, that group's subscription of
  the topic. A queue the store does not have is SYSTEM_ERROR ``<queueId>@<topic> is not exist!``; an
  index it does not hold is SUCCESS with no body and the remark ``Index <i> of <queueId>@<topic> is not
  exist!`` (as Apache answers).
"""

from __future__ import annotations

import logging

from rmq.broker import cq_units
from rmq.broker.services import BrokerServices
from rmq.broker.stats import MINUTE_MS
from rmq.common import codes, fastjson
from rmq.common.codes import LanguageCode, RequestCode, ResponseCode
from rmq.common.fastjson import ObjectKey
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.context import Processor, RequestContext
from rmq.remoting.headers import header_bool, header_int, header_long, header_str

__all__ = ["AdminViewProcessors"]

log = logging.getLogger(__name__)

_MAX_CQ_UNITS = 10_000
"""The most units one QUERY_CONSUME_QUEUE answers (a file holds 300,000 by default)."""


def _language(code: int) -> str:
    try:
        return LanguageCode(code).name
    except ValueError:
        return "OTHER"


class AdminViewProcessors:
    def __init__(self, services: BrokerServices) -> None:
        self.s = services

    def table(self) -> dict[int, Processor]:
        return {
            RequestCode.GET_BROKER_CONSUME_STATS: self.get_broker_consume_stats,
            RequestCode.GET_ALL_PRODUCER_INFO: self.get_all_producer_info,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.get_system_topic_list,
            RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
        }

    # --- 317 --------------------------------------------------------------------------------------
    def get_broker_consume_stats(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        order_only = header_bool(request.ext_fields, "isOrder", False)
        s = self.s
        broker = s.config.broker_name
        stats_list: list[dict[str, list[dict[str, object]]]] = []
        total_diff = 0
        for group in list(s.groups.table):
            online = s.consumers.get(group)
            subscribed = set(online.subscriptions) if online is not None else set()
            per_topic: list[dict[str, object]] = []
            for topic in sorted(s.offsets.topics_of_group(group)):
                tc = s.topics.get(topic)
                if tc is None or (order_only and not tc.order):
                    continue
                if subscribed and topic not in subscribed:
                    continue
                offsets: dict[ObjectKey, dict[str, int]] = {}
                for qid in range(tc.write_queue_nums):
                    broker_offset = max(s.store.max_offset(topic, qid), 0)
                    consumer_offset = max(s.offsets.query(group, topic, qid), 0)
                    last = s.store.store_time_at(topic, qid, consumer_offset - 1) if consumer_offset else None
                    key = ObjectKey.from_mapping({"brokerName": broker, "queueId": qid, "topic": topic})
                    offsets[key] = {
                        "brokerOffset": broker_offset,
                        "consumerOffset": consumer_offset,
                        "lastTimestamp": last if last and last > 0 else 0,
                    }
                    total_diff += broker_offset - consumer_offset
                tps = s.group_gets.window(f"{topic}@{group}", MINUTE_MS).sum * 1000 / MINUTE_MS
                per_topic.append({"consumeTps": tps, "offsetTable": offsets})
            stats_list.append({group: per_topic})
        body = {"brokerAddr": s.config.broker_addr, "consumeStatsList": stats_list, "totalDiff": total_diff}
        return create_response(request, body=fastjson.dumps_with_object_keys(body))

    # --- 328 --------------------------------------------------------------------------------------
    def get_all_producer_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        data = {
            group: [
                {
                    "clientId": ch.client_id,
                    # Java prints the channel's InetSocketAddress: "/ip:port".
                    "remoteIP": "/" + ch.ctx.remote_addr,
                    "language": _language(ch.language),
                    "version": ch.version,
                    "lastUpdateTimestamp": ch.last_update,
                }
                for ch in chans.values()
            ]
            for group, chans in self.s.producers.groups.items()
        }
        return create_response(request, body=fastjson.dumps({"data": data}))

    # --- 305 --------------------------------------------------------------------------------------
    def get_system_topic_list(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return create_response(request, body=fastjson.dumps({"topicList": sorted(codes.SYSTEM_TOPICS)}))

    # --- 321 --------------------------------------------------------------------------------------
    def query_consume_queue(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        topic, qid = header_str(f, "topic"), header_int(f, "queueId")
        index, count = header_long(f, "index"), header_int(f, "count", 10)
        group = f.get("consumerGroup") or None
        s = self.s
        if (topic, qid) not in set(s.store.queues()):
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"{qid}@{topic} is not exist!")
        low, high = s.store.min_offset(topic, qid), s.store.max_offset(topic, qid)
        body: dict[str, object] = {"maxQueueIndex": high, "minQueueIndex": low}
        if group is not None:
            sub = s.consumers.subscription(group, topic)
            if sub is None:
                body["filterData"] = f"{group}@{topic} is not online!"
            else:
                body["subscriptionData"] = sub.to_dict()
                # Apache's ConsumerFilterData, kept for SQL92 subscriptions only ("null" for tags).
                body["filterData"] = (
                    fastjson.dumps(
                        {
                            "consumerGroup": group,
                            "expression": sub.sub_string,
                            "expressionType": sub.expression_type,
                            "topic": topic,
                        }
                    ).decode()
                    if sub.sql is not None
                    else "null"
                )
        held = low <= index < high
        units = (
            cq_units.read_units(s.config, topic, qid, index, min(count, _MAX_CQ_UNITS), high) if held else []
        )
        if not units and not (held and count <= 0):
            return create_response(
                request, ResponseCode.SUCCESS, f"Index {index} of {qid}@{topic} is not exist!"
            )
        body["queueData"] = [
            {
                "eval": False,
                "physicOffset": u.physic_offset,
                "physicSize": u.physic_size,
                "tagsCode": u.tags_code,
            }
            for u in units
        ]
        return create_response(request, body=fastjson.dumps(body))
