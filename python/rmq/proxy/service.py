"""MessagingService v2: one handler per RPC (Apache's grpc/v2 activities), translating to :mod:`.brokers`.

Every handler reads the caller from the metadata (``x-mq-client-id``, ``x-mq-namespace``, the HMAC
``authorization`` when ACL is on), answers a bad request with the response's ``status`` (the RPC succeeds,
as Apache's proxy answers) and leaves the broker's work to the broker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration

from rmq.client.message import MessageExt
from rmq.client.results import SendStatus
from rmq.proxy import pop
from rmq.proxy.auth import Authenticator
from rmq.proxy.brokers import Brokers, TxRef
from rmq.proxy.clients import ClientRegistry, Session
from rmq.proxy.messages import MAX_BODY_SIZE, duration_ms, from_broker, timestamp, to_broker
from rmq.proxy.pb import d, g, s
from rmq.proxy.route import assignments, message_queues
from rmq.proxy.status import ProxyError, ok, status

log = logging.getLogger("rmq.proxy")

DEFAULT_INVISIBLE_MS = 30_000
DEFAULT_POLL_MS = 20_000
MAX_POLL_MS = 30_000
RECEIVE_BATCH_MAX = 32
# Apache's default CustomizedRetryPolicy of a consumer group: the wait before each next attempt.
RETRY_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)

_SEND_STATUS_CODE = {
    SendStatus.SEND_OK: d.Code.OK,
    SendStatus.FLUSH_DISK_TIMEOUT: d.Code.MASTER_PERSISTENCE_TIMEOUT,
    SendStatus.FLUSH_SLAVE_TIMEOUT: d.Code.SLAVE_PERSISTENCE_TIMEOUT,
    SendStatus.SLAVE_NOT_AVAILABLE: d.Code.HA_NOT_AVAILABLE,
}


def _meta(context: grpc.aio.ServicerContext) -> dict[str, str]:
    return {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}


def _peer_host(context: grpc.aio.ServicerContext) -> str:
    peer = context.peer() or ""  # ipv4:127.0.0.1:5555 / ipv6:[::1]:5555
    _, _, rest = peer.partition(":")
    return rest


class MessagingService(g.MessagingServiceServicer):
    def __init__(self, brokers: Brokers, registry: ClientRegistry, auth: Authenticator | None) -> None:
        self.brokers = brokers
        self.registry = registry
        self.auth = auth
        brokers.on_check = self._on_check

    # --- common --------------------------------------------------------------------------------------

    def _caller(self, context: grpc.aio.ServicerContext) -> tuple[Session | None, dict[str, str]]:
        meta = _meta(context)
        if self.auth is not None:
            self.auth.authenticate(meta, _peer_host(context))
        cid = meta.get("x-mq-client-id")
        sess = None
        if cid:
            sess = self.registry.session(cid)
            sess.remote_addr = _peer_host(context)
            sess.language = meta.get("x-mq-language", sess.language)
            sess.version = meta.get("x-mq-client-version", sess.version)
        return sess, meta

    def _check(self, meta: dict[str, str], kind: str, name: str, perm: str) -> None:
        if self.auth is not None:
            self.auth.authorize(meta, kind, name, perm)

    @staticmethod
    def _endpoints(request_endpoints: d.Endpoints, context: grpc.aio.ServicerContext) -> d.Endpoints:
        if request_endpoints.addresses:
            return request_endpoints
        host = context.host() if hasattr(context, "host") else ""
        return d.Endpoints(
            scheme=d.AddressScheme.IPv4, addresses=[d.Address(host=host or "127.0.0.1", port=0)]
        )

    # --- route ---------------------------------------------------------------------------------------

    async def QueryRoute(self, request: s.QueryRouteRequest, context: Any) -> s.QueryRouteResponse:
        try:
            self._caller(context)
            topic = request.topic.name
            if not topic:
                raise ProxyError(d.Code.ILLEGAL_TOPIC, "topic name is empty")
            view = await self.brokers.view(topic)
            queues = message_queues(view, request.topic, self._endpoints(request.endpoints, context))
            return s.QueryRouteResponse(status=ok(), message_queues=queues)
        except ProxyError as e:
            return s.QueryRouteResponse(status=status(e.code, e.message))

    async def QueryAssignment(
        self, request: s.QueryAssignmentRequest, context: Any
    ) -> s.QueryAssignmentResponse:
        try:
            sess, meta = self._caller(context)
            self._check(meta, "group", request.group.name, "SUB")
            self._check(meta, "topic", request.topic.name, "SUB")
            view = await self.brokers.view(request.topic.name)
            fifo = sess.fifo if sess is not None else False
            out = assignments(view, request.topic, self._endpoints(request.endpoints, context), fifo)
            if not out:
                raise ProxyError(d.Code.FORBIDDEN, "no readable queue")
            return s.QueryAssignmentResponse(status=ok(), assignments=out)
        except ProxyError as e:
            return s.QueryAssignmentResponse(status=status(e.code, e.message))

    # --- client --------------------------------------------------------------------------------------

    async def Heartbeat(self, request: s.HeartbeatRequest, context: Any) -> s.HeartbeatResponse:
        try:
            sess, _ = self._caller(context)
            if sess is None:
                raise ProxyError(d.Code.CLIENT_ID_REQUIRED, "x-mq-client-id is missing")
            sess.client_type = request.client_type or sess.client_type
            if request.HasField("group") and request.group.name and sess.group != request.group.name:
                sess.group = request.group.name
                self.registry.changed.set()
            return s.HeartbeatResponse(status=ok())
        except ProxyError as e:
            return s.HeartbeatResponse(status=status(e.code, e.message))

    async def NotifyClientTermination(
        self, request: s.NotifyClientTerminationRequest, context: Any
    ) -> s.NotifyClientTerminationResponse:
        try:
            sess, _ = self._caller(context)
            if sess is not None:
                self.registry.remove(sess.client_id, "client terminated")
                self.registry.changed.set()
            return s.NotifyClientTerminationResponse(status=ok())
        except ProxyError as e:
            return s.NotifyClientTerminationResponse(status=status(e.code, e.message))

    async def Telemetry(
        self, request_iterator: AsyncIterator[s.TelemetryCommand], context: Any
    ) -> AsyncIterator[s.TelemetryCommand]:
        try:
            sess, _ = self._caller(context)
        except ProxyError as e:
            yield s.TelemetryCommand(status=status(e.code, e.message))
            return
        if sess is None:
            yield s.TelemetryCommand(status=status(d.Code.CLIENT_ID_REQUIRED, "x-mq-client-id is missing"))
            return
        out: asyncio.Queue[s.TelemetryCommand | None] = asyncio.Queue()
        sess.streams.append(out)

        async def read() -> None:
            try:
                async for cmd in request_iterator:
                    sess.touch()
                    kind = cmd.WhichOneof("command")
                    if kind == "settings":
                        out.put_nowait(await self._settings(sess, cmd.settings))
                    elif kind == "thread_stack_trace" or kind == "verify_message_result":
                        log.info("client %s answered %s", sess.client_id, kind)
            except (grpc.RpcError, asyncio.CancelledError):
                pass
            finally:
                out.put_nowait(None)

        reader = asyncio.get_running_loop().create_task(read())
        try:
            while True:
                cmd = await out.get()
                if cmd is None:
                    break
                yield cmd
        finally:
            reader.cancel()
            if out in sess.streams:
                sess.streams.remove(out)

    async def _settings(self, sess: Session, settings: d.Settings) -> s.TelemetryCommand:
        """Take a client's settings, answer the server's (Apache's ``processAndWriteClientSettings``)."""
        sess.settings = settings
        if settings.client_type:
            sess.client_type = settings.client_type
        answer = d.Settings()
        answer.CopyFrom(settings)
        answer.backoff_policy.CopyFrom(
            d.RetryPolicy(
                max_attempts=3,
                exponential_backoff=d.ExponentialBackoff(
                    initial=Duration(nanos=10_000_000), max=Duration(seconds=1), multiplier=2.0
                ),
            )
        )
        if settings.HasField("publishing"):
            topics = {r.name for r in settings.publishing.topics}
            if topics - sess.topics:
                self.registry.changed.set()
            sess.topics |= topics
            answer.publishing.max_body_size = MAX_BODY_SIZE
            answer.publishing.validate_message_type = False
        if settings.HasField("subscription"):
            sub = settings.subscription
            if sub.HasField("group") and sub.group.name:
                if sess.group != sub.group.name:
                    self.registry.changed.set()
                sess.group = sub.group.name
            for entry in sub.subscriptions:
                sess.subscriptions[entry.topic.name] = entry.expression
            answer.subscription.receive_batch_size = RECEIVE_BATCH_MAX
            answer.subscription.long_polling_timeout.CopyFrom(Duration(seconds=DEFAULT_POLL_MS // 1000))
            # As Apache's proxy: the group's retryMaxTimes + 1 attempts, its default customized backoff.
            topics = list(sess.subscriptions)
            retry_max = await self.brokers.group_retry_max_times(sess.group, topics) if sess.group else 16
            sess.max_attempts = retry_max + 1
            answer.backoff_policy.CopyFrom(
                d.RetryPolicy(
                    max_attempts=sess.max_attempts,
                    customized_backoff=d.CustomizedBackoff(
                        next=[Duration(seconds=x) for x in RETRY_BACKOFF_S]
                    ),
                )
            )
        answer.metric.on = False
        return s.TelemetryCommand(status=ok(), settings=answer)

    # --- producer ------------------------------------------------------------------------------------

    async def SendMessage(self, request: s.SendMessageRequest, context: Any) -> s.SendMessageResponse:
        try:
            _sess, meta = self._caller(context)
            if not request.messages:
                raise ProxyError(d.Code.BAD_REQUEST, "no message to send")
            topic = request.messages[0].topic.name
            self._check(meta, "topic", topic, "PUB")
            entries = []
            for msg in request.messages:
                if msg.topic.name != topic:
                    raise ProxyError(
                        d.Code.MESSAGE_CORRUPTED, "the messages of one request name different topics"
                    )
                out = to_broker(msg, _peer_host(context))
                try:
                    result, tx = await self.brokers.send(out, 3000)
                except ProxyError as e:
                    entries.append(s.SendResultEntry(status=status(e.code, e.message)))
                    continue
                code = _SEND_STATUS_CODE[result.send_status]
                entries.append(
                    s.SendResultEntry(
                        status=status(code, d.Code.Name(code)),
                        message_id=out.message_id,
                        transaction_id=str(tx) if tx is not None else "",
                        offset=result.queue_offset,
                    )
                )
            codes = {e.status.code for e in entries}
            if len(codes) == 1:
                code = codes.pop()
                top = entries[0].status if code != d.Code.OK else ok()
            else:
                top = status(d.Code.MULTIPLE_RESULTS, "MULTIPLE_RESULTS")
            return s.SendMessageResponse(status=top, entries=entries)
        except ProxyError as e:
            return s.SendMessageResponse(status=status(e.code, e.message))

    async def EndTransaction(
        self, request: s.EndTransactionRequest, context: Any
    ) -> s.EndTransactionResponse:
        try:
            _sess, meta = self._caller(context)
            topic = request.topic.name
            self._check(meta, "topic", topic, "PUB")
            tx = TxRef.parse(request.transaction_id)
            if request.resolution == d.TransactionResolution.COMMIT:
                commit = True
            elif request.resolution == d.TransactionResolution.ROLLBACK:
                commit = False
            else:
                raise ProxyError(d.Code.BAD_REQUEST, "transaction resolution must be COMMIT or ROLLBACK")
            from_check = request.source == d.TransactionSource.SOURCE_SERVER_CHECK
            await self.brokers.end_transaction(topic, tx, commit, from_check, request.message_id)
            return s.EndTransactionResponse(status=ok())
        except ProxyError as e:
            return s.EndTransactionResponse(status=status(e.code, e.message))

    def _on_check(self, broker_addr: str, msg: MessageExt, header: dict[str, str]) -> None:
        """A broker's CHECK_TRANSACTION_STATE: ask a producer of the topic (RecoverOrphanedTransaction)."""
        topic = msg.get_property("REAL_TOPIC") or msg.topic
        sess = self.registry.producer_for(topic)
        uniq = msg.get_property("UNIQ_KEY") or header.get("msgId", "")
        if sess is None:
            log.info(
                "transaction check of %s (topic %s) from %s: no producer of the topic is connected",
                uniq,
                topic,
                broker_addr,
            )
            return
        tx = TxRef(
            broker_addr,
            int(header.get("commitLogOffset", "0") or 0),
            int(header.get("tranStateTableOffset", "0") or 0),
            uniq,
        )
        cmd = s.TelemetryCommand(
            recover_orphaned_transaction_command=s.RecoverOrphanedTransactionCommand(
                message=from_broker(msg, topic=topic), transaction_id=str(tx)
            )
        )
        sess.streams[-1].put_nowait(cmd)
        log.info("transaction check of %s (topic %s) sent to client %s", uniq, topic, sess.client_id)

    # --- consumer ------------------------------------------------------------------------------------

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
            batch = request.batch_size or RECEIVE_BATCH_MAX
            f = request.filter_expression
            ftype = "SQL92" if f.type == d.FilterType.SQL else "TAG"
            found = await self.brokers.pop(
                group=group,
                topic=topic,
                broker_name=request.message_queue.broker.name,
                queue_id=request.message_queue.id,
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
