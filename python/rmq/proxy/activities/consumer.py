"""ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue over POP."""

from __future__ import annotations

import asyncio
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
from rmq.proxy.clients import Session
from rmq.proxy.messages import duration_ms, from_broker, lmq_name, timestamp
from rmq.proxy.pb import d, s
from rmq.proxy.status import ProxyError, ok, status

Received = tuple[MessageExt, pop.Handle, str | None]
"""A message received, its receipt handle, and its lite topic (when popped from one)."""

BROKER_QUEUE_ID = -1
"""The queue id a POP_MESSAGE names to read every queue of the topic on the broker."""

LITE_INVISIBLE_MS = 60_000
"""How long a lite message stays invisible when the receive names no time (Apache's proxy default, which
renews it for its push consumers)."""

LITE_POLL_MS = 2000
"""The longest a lite consumer's receive waits for messages (then it is answered none and receives again)."""

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
            if sess is not None and sess.is_lite:
                async for answer in self._receive_lite(sess, request, poll, batch):
                    yield answer
                return
            f = request.filter_expression
            ftype = "SQL92" if f.type == d.FilterType.SQL else "TAG"
            found = await self.brokers.pop(
                group=group,
                topic=topic,
                broker_name=request.message_queue.broker.name,
                # Every queue of the named broker, whatever queue the client names (Apache's proxy pops the
                # broker's "acting" queue, id -1): the 5.x SimpleConsumers walk the route's queues in turn,
                # and popping only the one named left a message waiting a long poll per other queue.
                queue_id=BROKER_QUEUE_ID,
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
        async for answer in self._answer(request, [(m, h, None) for m, h in found], max_attempts):
            yield answer

    async def _answer(
        self, request: s.ReceiveMessageRequest, found: list[Received], max_attempts: int
    ) -> AsyncIterator[s.ReceiveMessageResponse]:
        """A receive's answer: the messages found (less those for the dead-letter queue), or none found."""
        group, topic = request.group.name, request.message_queue.topic.name
        if max_attempts > 0:
            found = await self._dead_letters(found, group, topic, max_attempts)
        if not found:
            yield s.ReceiveMessageResponse(status=status(d.Code.MESSAGE_NOT_FOUND, "no new message"))
            return
        yield s.ReceiveMessageResponse(status=ok())
        ns = request.group.resource_namespace
        for m, handle, _lite in found:
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

    async def _receive_lite(
        self, sess: Session, request: s.ReceiveMessageRequest, poll_ms: int, batch: int
    ) -> AsyncIterator[s.ReceiveMessageResponse]:
        """A lite consumer's receive: its lite topics' LMQs on the broker named, in one orderly pop that
        waits on all of them until messages come or the long poll ends."""
        group, topic = request.group.name, request.message_queue.topic.name
        broker = request.message_queue.broker.name
        invisible = (
            duration_ms(request.invisible_duration)
            if request.HasField("invisible_duration")
            else LITE_INVISIBLE_MS
        )
        attempt = request.attempt_id if request.HasField("attempt_id") else None
        # The pop waits on the lite topics subscribed when it started: short, so a topic subscribed meanwhile
        # is looked at soon (Apache's broker, which keeps the subscriptions, is told of them at once).
        poll_ms = min(poll_ms, LITE_POLL_MS)
        names = sorted(sess.lite_topics)
        found: list[Received] = []
        if names:
            # Each receive starts at another lite topic, so each gets its turn when batches fill up.
            start = sess.lite_cursor % len(names)
            sess.lite_cursor += 1
            try:
                found = list(
                    await self.brokers.pop_lite(
                        group=group,
                        topic=topic,
                        lite_topics=names[start:] + names[:start],
                        broker_name=broker,
                        batch=batch,
                        invisible_ms=invisible,
                        poll_ms=poll_ms,
                        attempt_id=attempt,
                    )
                )
            except ProxyError as e:
                yield s.ReceiveMessageResponse(status=status(e.code, e.message))
                return
            found = await self._unsubscribed_meanwhile(sess, group, topic, found)
        elif poll_ms > 0:
            await asyncio.sleep(poll_ms / 1000)  # nothing subscribed yet: an empty long poll
        async for answer in self._answer(request, found, sess.max_attempts):
            yield answer

    async def _unsubscribed_meanwhile(
        self, sess: Session, group: str, topic: str, found: list[Received]
    ) -> list[Received]:
        """Messages of lite topics the client unsubscribed while its pop waited are made visible again at
        once (not delivered, and not left blocking their lite topic for the group's other clients)."""
        keep = []
        for m, handle, lite in found:
            if lite is None or lite in sess.lite_topics:
                keep.append((m, handle, lite))
                continue
            try:
                await self.brokers.change_invisible(
                    group, lmq_name(topic, lite), handle, 0, route_topic=topic
                )
                log.info(
                    "message %s of lite topic %s, which client %s unsubscribed meanwhile, made visible again",
                    m.msg_id,
                    lite,
                    sess.client_id,
                )
            except ProxyError as e:
                log.warning(
                    "message %s of lite topic %s could not be made visible again: %s", m.msg_id, lite, e
                )
        return keep

    async def _dead_letters(
        self, found: list[Received], group: str, topic: str, max_attempts: int
    ) -> list[Received]:
        """Messages delivered ``max_attempts`` times already go to the dead-letter queue, not to the client
        (Apache's proxy filters them the same way)."""
        keep = []
        for m, handle, lite in found:
            if m.reconsume_times < max_attempts:
                keep.append((m, handle, lite))
                continue
            try:
                await self.brokers.forward_to_dlq(group, topic, handle, m.msg_id, lite)
            except ProxyError as e:
                log.warning(
                    "message %s of %s could not go to the dead-letter queue: %s", m.msg_id, topic, e.message
                )
                keep.append((m, handle, lite))
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
                    lite = entry.lite_topic if entry.HasField("lite_topic") else None
                    await self.brokers.ack(group, topic, self._handle(entry.receipt_handle), lite)
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
            sess, meta = self._caller(context)
            group, topic = request.group.name, request.topic.name
            self._check(meta, "group", group, "SUB")
            invisible = duration_ms(request.invisible_duration)
            if invisible <= 0:
                raise ProxyError(
                    d.Code.ILLEGAL_INVISIBLE_TIME, f"invisible duration {invisible} ms is not positive"
                )
            handle = self._handle(request.receipt_handle)
            if request.HasField("lite_topic"):
                handle = await self.brokers.change_invisible(
                    group, lmq_name(topic, request.lite_topic), handle, invisible, route_topic=topic
                )
            elif sess is not None and sess.is_lite:
                # As on Apache: a LitePushConsumer (5.2.0) names no lite topic here, and the message stays
                # invisible for the time it was received with.
                log.info(
                    "client %s: invisible time of a lite message, no lite topic named: kept", sess.client_id
                )
            else:
                handle = await self.brokers.change_invisible(group, topic, handle, invisible)
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
            lite = request.lite_topic if request.HasField("lite_topic") else None
            await self.brokers.forward_to_dlq(group, topic, handle, request.message_id, lite)
            return s.ForwardMessageToDeadLetterQueueResponse(status=ok())
        except ProxyError as e:
            return s.ForwardMessageToDeadLetterQueueResponse(status=status(e.code, e.message))


def now_ms() -> int:
    return int(time.time() * 1000)
