"""QueryRoute and QueryAssignment (Apache's ``RouteActivity``)."""

from __future__ import annotations

from typing import Any

from rmq.proxy.activities.base import Activity
from rmq.proxy.pb import d, s
from rmq.proxy.route import assignments, message_queues
from rmq.proxy.status import ProxyError, ok, status


class RouteActivity(Activity):
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
            # A lite group's consumers get one queue per broker, orderly or not (their lite topics are popped
            # orderly one by one).
            fifo = sess.fifo and not sess.is_lite if sess is not None else False
            out = assignments(view, request.topic, self._endpoints(request.endpoints, context), fifo)
            if not out:
                raise ProxyError(d.Code.FORBIDDEN, "no readable queue")
            return s.QueryAssignmentResponse(status=ok(), assignments=out)
        except ProxyError as e:
            return s.QueryAssignmentResponse(status=status(e.code, e.message))
