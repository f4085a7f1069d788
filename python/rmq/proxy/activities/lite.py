"""SyncLiteSubscription: which lite topics of its group's bind topic a LitePushConsumer receives.

A lite topic (RocketMQ 5.x) is a light queue under a LITE parent topic: a message sent with a lite topic is
stored in the parent's queue its lite topic hashes to, and dispatched into the LMQ ``%LMQ%$<parent>$<lite>``
(queue 0) too. A lite group (attribute ``lite.bind.topic=<parent>``) is consumed by LitePushConsumers, each
subscribing lite topics by name; the proxy keeps each client's set and pops its LMQs orderly (one batch in
flight per lite topic and group, as Apache's broker serves them), so a lite topic is consumed in send order
from its first message (or from where an offset option puts the group).
"""

from __future__ import annotations

from typing import Any

from rmq.proxy.activities.base import Activity, log
from rmq.proxy.activities.client import DEFAULT_LITE_QUOTA, LITE_QUOTA_ATTRIBUTE, lite_problem
from rmq.proxy.messages import check_lite_topic
from rmq.proxy.pb import d, s
from rmq.proxy.status import ProxyError, ok, status


class LiteActivity(Activity):
    async def SyncLiteSubscription(
        self, request: s.SyncLiteSubscriptionRequest, context: Any
    ) -> s.SyncLiteSubscriptionResponse:
        try:
            sess, meta = self._caller(context)
            if sess is None:
                raise ProxyError(d.Code.CLIENT_ID_REQUIRED, "x-mq-client-id is missing")
            group, topic = request.group.name, request.topic.name
            self._check(meta, "group", group, "SUB")
            self._check(meta, "topic", topic, "SUB")
            if not group:
                raise ProxyError(d.Code.ILLEGAL_CONSUMER_GROUP, "consumer group is empty")
            if not sess.is_lite:
                sess.client_type = d.ClientType.LITE_PUSH_CONSUMER
            sess.group = group
            info = await self.brokers.group_config(group, [topic])
            problem = lite_problem(sess, info, [topic])
            if problem is not None:
                raise problem
            names = set(request.lite_topic_set)
            action = request.action
            if action in (d.LiteSubscriptionAction.PARTIAL_ADD, d.LiteSubscriptionAction.COMPLETE_ADD):
                for name in names:
                    check_lite_topic(name)
            if action == d.LiteSubscriptionAction.PARTIAL_ADD:
                wanted = sess.lite_topics | names
            elif action == d.LiteSubscriptionAction.PARTIAL_REMOVE:
                wanted = sess.lite_topics - names
            elif action == d.LiteSubscriptionAction.COMPLETE_ADD:
                wanted = set(names)
            elif action == d.LiteSubscriptionAction.COMPLETE_REMOVE:
                wanted = set()
            else:
                raise ProxyError(d.Code.BAD_REQUEST, f"unknown lite subscription action {action}")
            quota = info.attribute_int(LITE_QUOTA_ATTRIBUTE, DEFAULT_LITE_QUOTA)
            if len(wanted) > quota and len(wanted) > len(sess.lite_topics):
                raise ProxyError(
                    d.Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED,
                    f"client {sess.client_id} would subscribe {len(wanted)} lite topics of group {group}, "
                    f"over its quota of {quota}",
                )
            if action == d.LiteSubscriptionAction.PARTIAL_ADD and request.HasField("offset_option"):
                for name in sorted(names):
                    await self.brokers.lite_offsets(group, topic, name, request.offset_option)
            added, removed = wanted - sess.lite_topics, sess.lite_topics - wanted
            sess.lite_topics = wanted
            if added or removed:
                log.info(
                    "client %s (group %s, topic %s) lite topics: %d added %s, %d removed %s, %d now",
                    sess.client_id,
                    group,
                    topic,
                    len(added),
                    sorted(added)[:10],
                    len(removed),
                    sorted(removed)[:10],
                    len(wanted),
                )
            return s.SyncLiteSubscriptionResponse(status=ok())
        except ProxyError as e:
            return s.SyncLiteSubscriptionResponse(status=status(e.code, e.message))
