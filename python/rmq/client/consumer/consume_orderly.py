"""Orderly consumption (``ConsumeMessageOrderlyService.java``): one queue, one consumer task, in order.

In CLUSTERING mode a queue is only consumed while this client holds its broker lock (LOCK_BATCH_MQ, renewed
for all held queues every 20 s, considered stale after 30 s). A consume request owns its queue (a per-queue
lock) and takes messages in offset order until the queue is empty, the lock is lost, or it ran for 60 s:

* SUCCESS commits the taken messages (the offset moves past them);
* SUSPEND_CURRENT_QUEUE_A_MOMENT (also a raised exception or ``None``) puts them back and retries the queue
  after ``suspend_current_queue_time_ms``; a message retried ``max_reconsume_times`` times is sent to
  ``%RETRY%<group>`` (-> DLQ after the broker's limit) and committed, so the queue moves on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rmq.client.consumer.consume_service import ConsumerInternals, ConsumeService
from rmq.client.consumer.listener import ConsumeOrderlyContext, is_success
from rmq.client.consumer.process_queue import ProcessQueue
from rmq.client.errors import MQClientError
from rmq.client.heartbeat import MessageModel
from rmq.client.message import MessageExt, MessageQueue
from rmq.common.codes import MessageConst
from rmq.common.service import PeriodicTask
from rmq.remoting import RemotingError

__all__ = ["ConsumeOrderlyService"]

log = logging.getLogger(__name__)

MAX_TIME_CONSUME_CONTINUOUSLY_MS = 60_000
LOCK_ALL_INTERVAL_S = 20.0


@dataclass(slots=True)
class _Request:
    pq: ProcessQueue
    mq: MessageQueue


class ConsumeOrderlyService(ConsumeService):
    def __init__(self, consumer: ConsumerInternals, listener: Callable[..., Any], thread_max: int) -> None:
        super().__init__(consumer, listener, thread_max)
        self._mq_locks: dict[MessageQueue, asyncio.Lock] = {}
        self._lock_task: PeriodicTask | None = None

    @property
    def clustering(self) -> bool:
        return self.consumer.message_model is MessageModel.CLUSTERING

    def start(self) -> None:
        super().start()
        if self.clustering:
            self._lock_task = PeriodicTask(
                f"lock-mq-{self.consumer.group}",
                LOCK_ALL_INTERVAL_S,
                self.consumer.rebalance.lock_all,
                initial_delay_s=1,
            )
            self._lock_task.start()

    async def shutdown(self, await_termination_ms: int) -> None:
        if self._lock_task is not None:
            await self._lock_task.stop()
        await super().shutdown(await_termination_ms)
        if self.clustering:
            await self.consumer.rebalance.unlock_all(oneway=False)

    def submit_consume_request(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch_to_consume: bool
    ) -> None:
        if dispatch_to_consume:
            self._put(_Request(pq, mq))

    def _submit_later(self, pq: ProcessQueue, mq: MessageQueue, delay_ms: int) -> None:
        self.put_later(_Request(pq, mq), min(max(delay_ms, 10), 30_000))

    def _try_lock_later_and_reconsume(self, mq: MessageQueue, pq: ProcessQueue, delay_ms: int) -> None:
        async def later() -> None:
            await asyncio.sleep(delay_ms / 1000)
            locked = not pq.dropped and await self.consumer.rebalance.lock(mq)
            self._submit_later(pq, mq, 10 if locked else 3000)

        self.consumer.spawn(later())

    async def run(self, item: _Request) -> None:
        pq, mq = item.pq, item.mq
        if pq.dropped:
            return
        lock = self._mq_locks.get(mq)
        if lock is None:
            lock = self._mq_locks[mq] = asyncio.Lock()
        async with lock:
            if self.clustering and not (pq.locked and not pq.is_lock_expired()):
                if not pq.dropped:
                    self._try_lock_later_and_reconsume(mq, pq, 100)
                return
            await self._consume_queue(pq, mq)

    async def _consume_queue(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        consumer = self.consumer
        begin = time.monotonic()
        while not self.stopped:
            if pq.dropped:
                return
            if self.clustering and (not pq.locked or pq.is_lock_expired()):
                self._try_lock_later_and_reconsume(mq, pq, 10)
                return
            if (time.monotonic() - begin) * 1000 > MAX_TIME_CONSUME_CONTINUOUSLY_MS:
                self._submit_later(pq, mq, 10)
                return
            msgs = pq.take_messages(max(1, consumer.consume_message_batch_max_size))
            consumer.reset_retry_topic(msgs)
            if not msgs:
                return
            ctx = ConsumeOrderlyContext(mq)
            async with pq.consume_lock:
                if pq.dropped:
                    return
                status = await self.call_listener(msgs, ctx)
            if status is None:
                log.warning("consumeMessage Orderly return null, Group: %s MQ: %s", consumer.group, mq)
            if not await self.process_consume_result(msgs, is_success(status), ctx, pq, mq):
                return

    async def process_consume_result(
        self,
        msgs: list[MessageExt],
        success: bool,
        ctx: ConsumeOrderlyContext,
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> bool:
        """Commit or schedule a retry; ``False`` stops the current consume loop of the queue."""
        commit_offset = -1
        keep_going = True
        if success:
            commit_offset = pq.commit()
        elif await self._check_reconsume_times(msgs):
            pq.make_message_to_consume_again(msgs)
            suspend = ctx.suspend_current_queue_time_ms
            self._submit_later(
                pq, mq, suspend if suspend >= 0 else self.consumer.suspend_current_queue_time_ms
            )
            keep_going = False
        else:
            commit_offset = pq.commit()
        if commit_offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update_offset(mq, commit_offset, False)
        return keep_going

    async def _check_reconsume_times(self, msgs: list[MessageExt]) -> bool:
        """``True``: retry locally later; ``False``: every message went to the retry topic (move on)."""
        suspend = False
        max_times = self.consumer.reconsume_limit(orderly=True)
        for msg in msgs:
            if msg.reconsume_times >= max_times:
                msg.put_property(MessageConst.RECONSUME_TIME, str(msg.reconsume_times))
                try:
                    await self.consumer.send_to_retry_topic(msg, msg.reconsume_times)
                except (RemotingError, MQClientError) as exc:
                    log.warning("sending %s to the retry topic failed: %s", msg.msg_id, exc)
                    suspend = True
                    msg.reconsume_times += 1
            else:
                suspend = True
                msg.reconsume_times += 1
        return suspend
