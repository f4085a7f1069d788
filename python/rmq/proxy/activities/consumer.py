"""ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue over POP."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from rmq.client.message import MessageExt
from rmq.proxy import pop
from rmq.proxy.activities.base import (
    DEFAULT_INVISIBLE_MS,
    DEFAULT_POLL_MS,
    MAX_POLL_MS,
    RECEIVE_BATCH_MAX,
    Activity,
    log,
)
from rmq.proxy.messages import duration_ms, from_broker, timestamp
from rmq.proxy.pb import d, s
from rmq.proxy.status import ProxyError, ok, status

DEADLINE_MARGIN_MS = 1000
"""Time kept back from a ReceiveMessage call's deadline for the answer to travel."""


class ConsumerActivity(Activity):
    async def ReceiveMessage(
        self, request: s.ReceiveMessageRequest, context: Any
    ) -> AsyncIterator[s.ReceiveMessageResponse]:
        try:
            sess, meta = self._caller(context)
            group, topic = request.group.name, request.message_queue.topic.name
            self._check(meta, "group", group, "SUB")
            self._check(meta, "topic", topic, "SUB")
            if not group:
                raise ProxyError(d.Code.ILLEGAL_CONSUMER_GROUP, "consumer group is empty")
            invisible = (
                duration_ms(request.invisible_duration)
                if request.HasField("invisible_duration")
                else DEFAULT_INVISIBLE_MS
            )
            if invisible <= 0:
                raise ProxyError(
                    d.Code.ILLEGAL_INVISIBLE_TIME, f"invisible duration {invisible} ms is not positive"
                )
            poll = (
                duration_ms(request.long_polling_timeout)
                if request.HasField("long_polling_timeout")
                else DEFAULT_POLL_MS
            )
            poll = max(0, min(poll, MAX_POLL_MS))
            # The answer must reach the client before its deadline: messages popped for a call it has given
            # up on would stay invisible (Apache's proxy caps the long poll the same way).
            remaining = context.time_remaining() if hasattr(context, "time_remaining") else None
            if remaining is not None:
                poll = max(0, min(poll, int(remaining * 1000) - DEADLINE_MARGIN_MS))
            batch = request.batch_size or RECEIVE_BATCH_MAX
            f = request.filter_expression
            ftype = "SQL92" if f.type == d.FilterType.SQL else "TAG"
            found = await self.brokers.pop(
                group=group,
                topic=topic,
                broker_name=request.message_queue.broker.name,
                # Every queue of that broker, whichever the client names: the Java client's SimpleConsumer
                # names each route queue in turn, and a pop of that one queue long-polls while others hold
                # messages (Apache's proxy pops the broker's queues as one, queueId -1, the same way).
                queue_id=-1,
                batch=batch,
                invisible_ms=invisible,
                poll_ms=poll,
                filter_type=ftype,
                expression=f.expression or "*",
                fifo=sess.fifo if sess is not None else False,
                attempt_id=request.attempt_id if request.HasField("attempt_id") else None,
            )
        except ProxyError as e:
            yield s.ReceiveMessageResponse(status=status(e.code, e.message))
            return
        max_attempts = sess.max_attempts if sess is not None else 0
        if max_attempts > 0:
            found = await self._dead_letters(found, group, topic, max_attempts)
        if not found:
            yield s.ReceiveMessageResponse(status=status(d.Code.MESSAGE_NOT_FOUND, "no new message"))
            return
        yield s.ReceiveMessageResponse(status=ok())
        ns = request.group.resource_namespace
        for m, handle in found:
            yield s.ReceiveMessageResponse(
                message=from_broker(
                    m,
                    namespace=ns,
                    receipt_handle=str(handle),
                    invisible_ms=handle.invisible_time,
                    topic=topic,
                )
            )
        # When the messages left the server: the clients' receive latency (5.1.2's PushConsumer needs it).
        yield s.ReceiveMessageResponse(delivery_timestamp=timestamp(now_ms()))

    async def _dead_letters(
        self, found: list[tuple[MessageExt, pop.Handle]], group: str, topic: str, max_attempts: int
    ) -> list[tuple[MessageExt, pop.Handle]]:
        """Messages delivered ``max_attempts`` times already go to the dead-letter queue, not to the client
        (Apache's proxy filters them the same way)."""
        keep = []
        for m, handle in found:
            if m.reconsume_times < max_attempts:
                keep.append((m, handle))
                continue
            try:
                await self.brokers.forward_to_dlq(group, topic, handle, m.msg_id)
            except ProxyError as e:
                log.warning(
                    "message %s of %s could not go to the dead-letter queue: %s", m.msg_id, topic, e.message
                )
                keep.append((m, handle))
        return keep

    def _handle(self, text: str) -> pop.Handle:
        try:
            return pop.Handle.parse(text)
        except ValueError as e:
            raise ProxyError(d.Code.INVALID_RECEIPT_HANDLE, str(e)) from None

    async def AckMessage(self, request: s.AckMessageRequest, context: Any) -> s.AckMessageResponse:
        try:
            _, meta = self._caller(context)
            group, topic = request.group.name, request.topic.name
            self._check(meta, "group", group, "SUB")
            entries = []
            for entry in request.entries:
                try:
                    await self.brokers.ack(group, topic, self._handle(entry.receipt_handle))
                    st = ok()
                except ProxyError as e:
                    st = status(e.code, e.message)
                entries.append(
                    s.AckMessageResultEntry(
                        message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=st
                    )
                )
            codes = {e.status.code for e in entries}
            top = (
                ok()
                if codes <= {d.Code.OK}
                else (
                    entries[0].status
                    if len(codes) == 1
                    else status(d.Code.MULTIPLE_RESULTS, "MULTIPLE_RESULTS")
                )
            )
            return s.AckMessageResponse(status=top, entries=entries)
        except ProxyError as e:
            return s.AckMessageResponse(status=status(e.code, e.message))

    async def ChangeInvisibleDuration(
        self, request: s.ChangeInvisibleDurationRequest, context: Any
    ) -> s.ChangeInvisibleDurationResponse:
        try:
            _, meta = self._caller(context)
            group, topic = request.group.name, request.topic.name
            self._check(meta, "group", group, "SUB")
            invisible = duration_ms(request.invisible_duration)
            if invisible <= 0:
                raise ProxyError(
                    d.Code.ILLEGAL_INVISIBLE_TIME, f"invisible duration {invisible} ms is not positive"
                )
            handle = await self.brokers.change_invisible(
                group, topic, self._handle(request.receipt_handle), invisible
            )
            return s.ChangeInvisibleDurationResponse(status=ok(), receipt_handle=str(handle))
        except ProxyError as e:
            return s.ChangeInvisibleDurationResponse(status=status(e.code, e.message))

    async def ForwardMessageToDeadLetterQueue(
        self, request: s.ForwardMessageToDeadLetterQueueRequest, context: Any
    ) -> s.ForwardMessageToDeadLetterQueueResponse:
        try:
            _, meta = self._caller(context)
            group, topic = request.group.name, request.topic.name
            self._check(meta, "group", group, "SUB")
            handle = self._handle(request.receipt_handle)
            await self.brokers.forward_to_dlq(group, topic, handle, request.message_id)
            return s.ForwardMessageToDeadLetterQueueResponse(status=ok())
        except ProxyError as e:
            return s.ForwardMessageToDeadLetterQueueResponse(status=status(e.code, e.message))


def now_ms() -> int:
    return int(time.time() * 1000)
