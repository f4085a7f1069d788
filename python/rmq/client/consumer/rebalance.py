"""Rebalance: which queues this client consumes, and the process queue of each (``RebalanceImpl.java``).

For each subscribed topic: BROADCASTING takes every readable queue; CLUSTERING sorts the topic's queues
and the group's client ids (GET_CONSUMER_LIST_BY_GROUP from one broker of the topic) and asks the
allocation strategy. Then :meth:`update_process_queue_table` reconciles:

* a queue no longer ours (or, for push consumers, not pulled for 120 s) is *dropped*: its process queue is
  marked dropped, its offset persisted and forgotten (so nothing it still consumes commits later), and for
  orderly clustering consumers its broker lock released once no consume task holds it;
* a new queue (orderly: only once the broker lock is acquired) gets a fresh process queue starting at the
  consumer's ``compute_pull_from_where`` offset and is handed to the consumer to start pulling.

The consumer provides the policy through :class:`RebalanceHooks`. Rebalances of one consumer never overlap.
Each clustering rebalance logs (DEBUG; INFO when the allocation changed) the client ids the broker listed
and the queues this client computed from them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from rmq.client.consumer.allocate import AllocateMessageQueueStrategy
from rmq.client.consumer.process_queue import ProcessQueue
from rmq.client.errors import MQClientError
from rmq.client.heartbeat import ConsumeType, MessageModel, SubscriptionData
from rmq.client.message import MessageQueue
from rmq.common.codes import MASTER_ID
from rmq.common.topic import is_retry_topic
from rmq.remoting import RemotingError

if TYPE_CHECKING:
    from rmq.client.instance import ClientInstance

__all__ = ["RebalanceHooks", "RebalanceImpl"]

log = logging.getLogger(__name__)


class RebalanceHooks(Protocol):
    consume_type: ConsumeType

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool: ...
    async def compute_pull_from_where(self, mq: MessageQueue) -> int: ...
    def remove_dirty_offset(self, mq: MessageQueue) -> None: ...
    def dispatch_pull_requests(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None: ...
    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None: ...


class RebalanceImpl:
    def __init__(
        self,
        instance: ClientInstance,
        group: str,
        message_model: MessageModel,
        strategy: AllocateMessageQueueStrategy,
        hooks: RebalanceHooks,
    ) -> None:
        self.instance = instance
        self.group = group
        self.message_model = message_model
        self.strategy = strategy
        self.hooks = hooks
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        self.topic_subscribe_info: dict[str, set[MessageQueue]] = {}
        self.subscription_inner: dict[str, SubscriptionData] = {}
        self.mutex = asyncio.Lock()
        """Held by a rebalance; consumers take it at shutdown so none runs while they stop."""

    # --- rebalance --------------------------------------------------------------------------------------

    async def do_rebalance(self, is_order: bool) -> None:
        async with self.mutex:
            for topic in list(self.subscription_inner):
                try:
                    await self.rebalance_by_topic(topic, is_order)
                except (RemotingError, MQClientError) as exc:
                    if not is_retry_topic(topic):
                        log.warning("rebalance of %s / %s failed: %s", self.group, topic, exc)
            await self.truncate_message_queue_not_my_topic()

    async def _subscribe_queues(self, topic: str) -> set[MessageQueue] | None:
        mqs = self.topic_subscribe_info.get(topic)
        if mqs is None:  # not known yet (e.g. a retry topic the broker just created): ask now
            await self.instance.update_topic_route(topic)
            mqs = self.topic_subscribe_info.get(topic)
        return mqs

    async def rebalance_by_topic(self, topic: str, is_order: bool) -> None:
        mq_set = await self._subscribe_queues(topic)
        if self.message_model is MessageModel.BROADCASTING:
            if mq_set is None:
                log.warning("doRebalance, %s, but the topic[%s] not exist.", self.group, topic)
                return
            await self._apply(topic, mq_set, set(mq_set), is_order)
            return
        cid_all = await self.instance.find_consumer_id_list(topic, self.group)
        if mq_set is None:
            if not is_retry_topic(topic):
                log.warning("doRebalance, %s, but the topic[%s] not exist.", self.group, topic)
            return
        if cid_all is None:
            log.warning("doRebalance, %s %s, get consumer id list failed", self.group, topic)
            return
        mq_all = sorted(mq_set)
        cids = sorted(cid_all)
        try:
            allocated = self.strategy.allocate(self.group, self.instance.client_id, mq_all, cids)
        except Exception:
            log.exception("AllocateMessageQueueStrategy.allocate failed, strategy %s", self.strategy.name)
            return
        divided = set(allocated)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "rebalance %s %s: client %s, consumer ids %s, %d queues -> %s",
                self.group,
                topic,
                self.instance.client_id,
                cids,
                len(mq_all),
                _queue_ids(divided),
            )
        if await self._apply(topic, mq_set, divided, is_order):
            log.info(
                "rebalanced %s %s: client %s of %s gets %s of %d queues",
                self.group,
                topic,
                self.instance.client_id,
                cids,
                _queue_ids(divided),
                len(mq_all),
            )

    async def _apply(
        self, topic: str, mq_all: set[MessageQueue], divided: set[MessageQueue], is_order: bool
    ) -> bool:
        """Reconcile, tell the consumer, then start pulling the new queues.

        Java starts the pulls first and sends the heartbeat with the new subscription version from
        ``messageQueueChanged`` afterwards, so the first pulls race the heartbeat and may get
        SUBSCRIPTION_NOT_LATEST (25) and a 3 s back-off; starting them after the hook avoids that.
        """
        changed, requests = await self.update_process_queue_table(topic, divided, is_order)
        if changed:
            await self.hooks.message_queue_changed(topic, mq_all, divided)
        if requests:
            self.hooks.dispatch_pull_requests(requests)
        return changed

    async def update_process_queue_table(
        self, topic: str, mq_set: set[MessageQueue], is_order: bool
    ) -> tuple[bool, list[tuple[MessageQueue, ProcessQueue, int]]]:
        """Drop the queues not in ``mq_set``, create the missing ones; ``(changed, pulls to start)``."""
        changed = False
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic != topic:
                continue
            if mq not in mq_set:
                pq.dropped = True
                if await self.hooks.remove_unnecessary_message_queue(mq, pq):
                    self.process_queue_table.pop(mq, None)
                    changed = True
                    log.info("doRebalance, %s, remove unnecessary mq, %s", self.group, mq)
            elif pq.is_pull_expired() and self.hooks.consume_type is ConsumeType.CONSUME_PASSIVELY:
                pq.dropped = True
                if await self.hooks.remove_unnecessary_message_queue(mq, pq):
                    self.process_queue_table.pop(mq, None)
                    changed = True
                    log.warning("doRebalance, %s, remove pull-expired mq, %s", self.group, mq)
        requests: list[tuple[MessageQueue, ProcessQueue, int]] = []
        for mq in sorted(mq_set):
            if mq in self.process_queue_table:
                continue
            if is_order and not await self.lock(mq):
                log.warning("doRebalance, %s, add a new mq failed, %s, because lock failed", self.group, mq)
                continue
            self.hooks.remove_dirty_offset(mq)
            try:
                next_offset = await self.hooks.compute_pull_from_where(mq)
            except (RemotingError, MQClientError) as exc:
                log.warning("doRebalance, %s, compute offset failed, %s: %s", self.group, mq, exc)
                continue
            if next_offset < 0:
                log.warning("doRebalance, %s, add new mq failed, %s", self.group, mq)
                continue
            if mq in self.process_queue_table:  # a concurrent path added it while we awaited
                continue
            pq = ProcessQueue()
            if is_order:
                pq.locked = True
            self.process_queue_table[mq] = pq
            requests.append((mq, pq, next_offset))
            changed = True
            log.info("doRebalance, %s, add a new mq, %s, next offset %d", self.group, mq, next_offset)
        return changed, requests

    async def truncate_message_queue_not_my_topic(self) -> None:
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic not in self.subscription_inner:
                pq.dropped = True
                self.process_queue_table.pop(mq, None)
                log.info("doRebalance, %s, truncate message queue not my topic, %s", self.group, mq)

    async def remove_process_queue(self, mq: MessageQueue) -> None:
        pq = self.process_queue_table.pop(mq, None)
        if pq is not None:
            was_dropped = pq.dropped
            pq.dropped = True
            await self.hooks.remove_unnecessary_message_queue(mq, pq)
            log.info("Fix Offset, %s, remove unnecessary mq, %s Dropped: %s", self.group, mq, was_dropped)

    def drop_all(self) -> None:
        for pq in self.process_queue_table.values():
            pq.dropped = True
        self.process_queue_table.clear()

    # --- broker locks (orderly) -------------------------------------------------------------------------

    def _master(self, broker_name: str) -> str | None:
        found = self.instance.find_broker_addr_in_subscribe(broker_name, MASTER_ID, True)
        return None if found is None else found[0]

    async def lock(self, mq: MessageQueue) -> bool:
        addr = self._master(mq.broker_name)
        if addr is None:
            return False
        try:
            locked = await self.instance.api.lock_batch_mq(
                addr, self.group, self.instance.client_id, [mq], 1000
            )
        except (RemotingError, MQClientError) as exc:
            log.warning("lockBatchMQ %s failed: %s", mq, exc)
            return False
        now = _now_ms()
        for m in locked:
            pq = self.process_queue_table.get(m)
            if pq is not None:
                pq.locked = True
                pq.last_lock_timestamp = now
        return mq in locked

    def _by_broker(self, mqs: Iterable[MessageQueue]) -> dict[str, set[MessageQueue]]:
        grouped: dict[str, set[MessageQueue]] = defaultdict(set)
        for mq in mqs:
            grouped[mq.broker_name].add(mq)
        return grouped

    async def lock_all(self) -> None:
        """Renew the broker locks of every held queue (every 20 s for orderly clustering consumers)."""
        for broker_name, mqs in self._by_broker(self.process_queue_table).items():
            addr = self._master(broker_name)
            if addr is None:
                continue
            try:
                locked = await self.instance.api.lock_batch_mq(
                    addr, self.group, self.instance.client_id, mqs, 1000
                )
            except (RemotingError, MQClientError) as exc:
                log.warning("lockBatchMQ on %s failed: %s", broker_name, exc)
                continue
            now = _now_ms()
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is None:
                    continue
                if mq in locked:
                    if not pq.locked:
                        log.info("the message queue locked OK, Group: %s %s", self.group, mq)
                    pq.locked = True
                    pq.last_lock_timestamp = now
                else:
                    if pq.locked:
                        log.warning("the message queue locked Failed, Group: %s %s", self.group, mq)
                    pq.locked = False

    async def unlock(self, mq: MessageQueue, oneway: bool) -> None:
        addr = self._master(mq.broker_name)
        if addr is None:
            return
        try:
            await self.instance.api.unlock_batch_mq(
                addr, self.group, self.instance.client_id, [mq], oneway=oneway
            )
        except (RemotingError, MQClientError) as exc:
            log.warning("unlockBatchMQ %s failed: %s", mq, exc)

    async def unlock_all(self, oneway: bool) -> None:
        for broker_name, mqs in self._by_broker(self.process_queue_table).items():
            addr = self._master(broker_name)
            if addr is None:
                continue
            try:
                await self.instance.api.unlock_batch_mq(
                    addr, self.group, self.instance.client_id, mqs, oneway=oneway
                )
            except (RemotingError, MQClientError) as exc:
                log.warning("unlockBatchMQ on %s failed: %s", broker_name, exc)
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is not None:
                    pq.locked = False


def _queue_ids(mqs: Iterable[MessageQueue]) -> list[str]:
    """``broker:queue_id`` of each queue, sorted, for the logs."""
    return [f"{mq.broker_name}:{mq.queue_id}" for mq in sorted(mqs)]


def _now_ms() -> int:
    return int(time.time() * 1000)
