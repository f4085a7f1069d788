"""The pull kernel shared by push and lite pull consumers (``CL/impl/consumer/PullAPIWrapper.java``).

:meth:`Puller.pull` picks the broker (the master, or the node the broker last suggested), refuses SQL92
against brokers older than 4.1.0, clears FLAG_COMMIT_OFFSET when reading from a slave, and sends
PULL_MESSAGE. :meth:`Puller.messages` decodes a FOUND body in one native call and keeps the messages whose
tag is subscribed (the broker filters by tag hash code only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmq.client.errors import MQClientError, NoRouteError
from rmq.client.heartbeat import ExpressionType, SubscriptionData
from rmq.client.message import MessageExt, MessageQueue
from rmq.client.results import PullResult, PullStatus
from rmq.common.codes import MASTER_ID, V4_1_0_SNAPSHOT, PullSysFlag

if TYPE_CHECKING:
    from rmq.client.instance import ClientInstance

__all__ = ["Puller"]


class Puller:
    def __init__(self, instance: ClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        self.pull_from_which_node: dict[MessageQueue, int] = {}

    def recalculate_pull_from_which_node(self, mq: MessageQueue) -> int:
        """The broker id the last pull response suggested for ``mq`` (the master at first)."""
        return self.pull_from_which_node.get(mq, MASTER_ID)

    async def pull(
        self,
        mq: MessageQueue,
        *,
        sub_expression: str | None,
        expression_type: str,
        sub_version: int,
        offset: int,
        max_nums: int,
        sys_flag: int,
        commit_offset: int,
        suspend_timeout_ms: int,
        timeout_ms: int,
    ) -> PullResult:
        instance = self.instance
        broker_id = self.recalculate_pull_from_which_node(mq)
        found = instance.find_broker_addr_in_subscribe(mq.broker_name, broker_id, False)
        if found is None:
            await instance.update_topic_route(mq.topic)
            found = instance.find_broker_addr_in_subscribe(mq.broker_name, broker_id, False)
        if found is None:
            raise NoRouteError(f"The broker[{mq.broker_name}] not exist", 10003)
        addr, slave = found
        if expression_type != ExpressionType.TAG:
            version = instance.broker_version(mq.broker_name, addr)
            if 0 < version < V4_1_0_SNAPSHOT:
                raise MQClientError(
                    f"The broker[{mq.broker_name}, {version}] does not upgrade to support for filter message "
                    f"by {expression_type}"
                )
        if slave:
            sys_flag = PullSysFlag.clear_commit_offset(sys_flag)
        return await instance.api.pull_message(
            addr,
            consumer_group=self.group,
            mq=mq,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=sys_flag,
            commit_offset=commit_offset,
            suspend_timeout_ms=suspend_timeout_ms,
            sub_version=sub_version,
            subscription=sub_expression,
            expression_type=expression_type,
            timeout_ms=timeout_ms,
        )

    def messages(self, mq: MessageQueue, result: PullResult, sub: SubscriptionData) -> list[MessageExt]:
        """``processPullResult``: remember the suggested node, decode, keep subscribed tags."""
        self.pull_from_which_node[mq] = result.suggest_which_broker_id
        if result.status is not PullStatus.FOUND:
            return []
        msgs = result.messages(mq.broker_name)
        if sub.tags_set and not sub.class_filter_mode and sub.expression_type == ExpressionType.TAG:
            tags = set(sub.tags_set)
            msgs = [m for m in msgs if m.tags in tags]
        return msgs
