"""Heartbeat, NotifyClientTermination and Telemetry (Apache's ``ClientActivity``): sessions and settings."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration

from rmq.proxy.activities.base import (
    DEFAULT_POLL_MS,
    RECEIVE_BATCH_MAX,
    RETRY_BACKOFF_S,
    Activity,
    log,
)
from rmq.proxy.brokers import GroupInfo
from rmq.proxy.clients import Session
from rmq.proxy.messages import MAX_BODY_SIZE, MAX_LITE_TOPIC_SIZE
from rmq.proxy.pb import d, s
from rmq.proxy.status import ProxyError, ok, status


class ClientActivity(Activity):
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
            # As Apache's proxy: the group's retryMaxTimes + 1 attempts, its default customized backoff, and
            # FIFO when the group consumes orderly.
            topics = list(sess.subscriptions)
            info = await self.brokers.group_config(sess.group, topics) if sess.group else GroupInfo()
            problem = lite_problem(sess, info, topics)
            if problem is not None:
                log.warning("settings of client %s refused: %s", sess.client_id, problem.message)
                return s.TelemetryCommand(status=status(problem.code, problem.message))
            sess.max_attempts = info.retry_max_times + 1
            sess.orderly = info.orderly
            answer.subscription.fifo = info.orderly
            if sess.is_lite:
                answer.subscription.lite_subscription_quota = info.attribute_int(
                    LITE_QUOTA_ATTRIBUTE, DEFAULT_LITE_QUOTA
                )
                answer.subscription.max_lite_topic_size = MAX_LITE_TOPIC_SIZE
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


LITE_QUOTA_ATTRIBUTE = "lite.sub.client.quota"
DEFAULT_LITE_QUOTA = 2000
"""Lite topics one LitePushConsumer may subscribe to (Apache's group attribute default)."""


def lite_problem(sess: Session, info: GroupInfo, topics: list[str]) -> ProxyError | None:
    """Why a consumer may not use its group as it does (Apache's proxy: a lite group only with
    LitePushConsumers of its bind topic, and those only with a lite group)."""
    bind = info.lite_bind_topic
    if sess.is_lite:
        if not info.found:
            return ProxyError(d.Code.ILLEGAL_CONSUMER_GROUP, f"group not found: {sess.group}")
        if bind is None:
            return ProxyError(
                d.Code.ILLEGAL_CONSUMER_GROUP, f"regular group cannot use LITE mode: {sess.group}"
            )
        wrong = [t for t in topics if t != bind]
        if wrong:
            return ProxyError(
                d.Code.ILLEGAL_TOPIC,
                f"lite group {sess.group} is expected to bind topic {bind}, but actual is {wrong[0]}",
            )
    elif bind is not None and sess.group:
        return ProxyError(d.Code.ILLEGAL_CONSUMER_GROUP, f"lite group must use LITE mode: {sess.group}")
    return None
