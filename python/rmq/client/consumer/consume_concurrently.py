"""Concurrent consumption (``ConsumeMessageConcurrentlyService.java``).

Pulled messages are cut into requests of ``consume_message_batch_max_size`` (1) and consumed by the worker
pool in any order. After the listener answers:

* CONSUME_SUCCESS acknowledges messages up to ``context.ack_index`` (all by default); RECONSUME_LATER, an
  exception or ``None`` acknowledges none;
* CLUSTERING: every unacknowledged message is sent back with CONSUMER_SEND_MSG_BACK (the broker re-delivers
  it through ``%RETRY%<group>`` after a growing delay); one the broker cannot take back is consumed again
  locally 5 s later with its reconsume count raised. BROADCASTING: unacknowledged messages are dropped;
* the handled messages leave the process queue and the queue's offset moves to the smallest offset still
  held (never backwards, never past a message still in progress), unless the queue was dropped meanwhile.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rmq.client.consumer.consume_service import ConsumeService
from rmq.client.consumer.listener import ConsumeConcurrentlyContext, is_success
from rmq.client.consumer.process_queue import ProcessQueue
from rmq.client.errors import MQClientError
from rmq.client.heartbeat import MessageModel
from rmq.client.message import MessageExt, MessageQueue
from rmq.remoting import RemotingError

__all__ = ["ConsumeConcurrentlyService"]

log = logging.getLogger(__name__)

RETRY_LATER_MS = 5000


@dataclass(slots=True)
class _Request:
    msgs: list[MessageExt]
    pq: ProcessQueue
    mq: MessageQueue


class ConsumeConcurrentlyService(ConsumeService):
    def submit_consume_request(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch_to_consume: bool
    ) -> None:
        size = max(1, self.consumer.consume_message_batch_max_size)
        if len(msgs) <= size:
            self._put(_Request(msgs, pq, mq))
            return
        for i in range(0, len(msgs), size):
            self._put(_Request(msgs[i : i + size], pq, mq))

    async def run(self, item: _Request) -> None:
        pq, mq, msgs = item.pq, item.mq, item.msgs
        if pq.dropped:
            return
        consumer = self.consumer
        ctx = ConsumeConcurrentlyContext(mq)
        consumer.reset_retry_topic(msgs)
        status = await self.call_listener(msgs, ctx)
        if status is None:
            log.warning("consumeMessage return null, Group: %s MQ: %s", consumer.group, mq)
        if pq.dropped:
            log.warning("processQueue is dropped without process consume result. mq: %s", mq)
            return
        await self.process_consume_result(is_success(status), ctx, item)

    async def process_consume_result(
        self, success: bool, ctx: ConsumeConcurrentlyContext, item: _Request
    ) -> None:
        consumer = self.consumer
        msgs = item.msgs
        if not msgs:
            return
        ack_index = min(ctx.ack_index, len(msgs) - 1) if success else -1
        failed = msgs[ack_index + 1 :]
        if failed:
            if consumer.message_model is MessageModel.BROADCASTING:
                for msg in failed:
                    log.warning("BROADCASTING, the message consume failed, drop it, %s", msg.msg_id)
            else:
                back_failed: list[MessageExt] = []
                for msg in failed:
                    if not item.pq.contains_message(msg):  # expired and cleaned meanwhile
                        continue
                    try:
                        await consumer.send_message_back(
                            msg, ctx.delay_level_when_next_consume, item.mq.broker_name
                        )
                    except (RemotingError, MQClientError) as exc:
                        log.warning("sendMessageBack of %s failed: %s", msg.msg_id, exc)
                        msg.reconsume_times += 1
                        back_failed.append(msg)
                if back_failed:
                    ids = {id(m) for m in back_failed}
                    msgs = [m for m in msgs if id(m) not in ids]
                    self.put_later(_Request(back_failed, item.pq, item.mq), RETRY_LATER_MS)
        offset = item.pq.remove_messages(msgs)
        if offset >= 0 and not item.pq.dropped:
            consumer.offset_store.update_offset(item.mq, offset, True)
