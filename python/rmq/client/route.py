"""The queues of a topic route (``MQClientInstance.topicRouteData2TopicPublishInfo`` / ``...SubscribeInfo``).

Publish queues: with ``orderTopicConf`` (``brokerName:queueNum;...``) exactly those; otherwise for each
QueueData sorted by broker name, writable, whose broker has a master: queue ids ``0..writeQueueNums-1``.
Subscribe queues: for each readable QueueData, ``0..readQueueNums-1``.
"""

from __future__ import annotations

import random

from rmq.client.message import MessageQueue
from rmq.common.codes import MASTER_ID, PermName
from rmq.common.route import TopicRouteData

__all__ = ["TopicPublishInfo", "publish_info", "subscribe_queues"]


class TopicPublishInfo:
    """The writable queues of a topic and the round-robin cursor over them (``TopicPublishInfo.java``)."""

    __slots__ = ("have_route", "order_topic", "queues", "route", "send_which_queue")

    def __init__(
        self,
        queues: list[MessageQueue] | None = None,
        route: TopicRouteData | None = None,
        order_topic: bool = False,
    ) -> None:
        self.queues: list[MessageQueue] = queues or []
        self.route = route
        self.order_topic = order_topic
        self.have_route = route is not None
        self.send_which_queue = random.randrange(1 << 16)  # Java's ThreadLocalIndex starts at random

    def ok(self) -> bool:
        return bool(self.queues)

    def next_index(self) -> int:
        self.send_which_queue = (self.send_which_queue + 1) & 0x7FFFFFFF
        return self.send_which_queue

    def select_one(self, last_broker_name: str | None = None) -> MessageQueue:
        """Round robin, skipping ``last_broker_name`` when another broker has a queue."""
        queues = self.queues
        n = len(queues)
        if last_broker_name is not None:
            for _ in range(n):
                mq = queues[self.next_index() % n]
                if mq.broker_name != last_broker_name:
                    return mq
        return queues[self.next_index() % n]

    def write_queue_nums(self, broker_name: str) -> int:
        """``getQueueIdByBroker``: the writeQueueNums of ``broker_name`` in the route (-1 if absent)."""
        if self.route is not None:
            for qd in self.route.queue_datas:
                if qd.broker_name == broker_name:
                    return qd.write_queue_nums
        return -1


def publish_info(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    if route.order_topic_conf:
        queues: list[MessageQueue] = []
        for item in route.order_topic_conf.split(";"):
            name, _, num = item.partition(":")
            if name and num.strip():
                queues.extend(MessageQueue(topic, name, i) for i in range(int(num)))
        return TopicPublishInfo(queues, route, order_topic=True)
    masters = {bd.broker_name for bd in route.broker_datas if MASTER_ID in bd.broker_addrs}
    queues = []
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if PermName.is_writeable(qd.perm) and qd.broker_name in masters:
            queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    return TopicPublishInfo(queues, route)


def subscribe_queues(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    return {
        MessageQueue(topic, qd.broker_name, i)
        for qd in route.queue_datas
        if PermName.is_readable(qd.perm)
        for i in range(qd.read_queue_nums)
    }
