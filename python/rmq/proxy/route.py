"""QueryRoute and QueryAssignment (Apache's ``grpc/v2/route/RouteActivity``), and the queue a send goes to.

A 5.x client is given the topic's queues with the proxy's own address as every broker's endpoint (the client
talks to the proxy only; Apache's proxy answers the same in cluster mode). Per QueueData: read-only queues,
then write-only ones, then read-write ones, numbered from 0, each with its ``Permission``. rmq's topics
carry no message type, so every queue accepts all four (Apache's ``MIXED``). QueryAssignment gives one
assignment per readable broker (queue id -1: the broker's POP picks the queue) for a concurrent group, and
one per queue for a group that consumes orderly.

Sends with a message group (FIFO) go to ``writeQueues[consistentHash(group.hashCode(), n)]`` — Guava's
``Hashing.consistentHash`` as Apache's proxy computes it, so one group keeps one queue on either server.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rmq.client.errors import MQBrokerError
from rmq.common.codes import MASTER_ID, PermName
from rmq.common.java import java_string_hash
from rmq.common.route import TopicRouteData
from rmq.proxy.pb import d
from rmq.proxy.status import ProxyError

ROUTE_TTL_S = 20.0
"""How long a topic's route is reused before the name server is asked again."""

ALL_MESSAGE_TYPES = (
    d.MessageType.NORMAL,
    d.MessageType.FIFO,
    d.MessageType.DELAY,
    d.MessageType.TRANSACTION,
    d.MessageType.LITE,
)


@dataclass(frozen=True, slots=True)
class WriteQueue:
    broker_name: str
    queue_id: int
    addr: str


@dataclass(slots=True)
class TopicView:
    """A topic's route as the proxy uses it: the masters' addresses and the writable queues in order."""

    route: TopicRouteData
    fetched: float = field(default_factory=time.monotonic)
    write_queues: list[WriteQueue] = field(default_factory=list)
    cursor: int = 0

    def master(self, broker_name: str) -> str | None:
        for bd in self.route.broker_datas:
            if bd.broker_name == broker_name:
                return bd.broker_addrs.get(MASTER_ID)
        return None

    def masters(self) -> dict[str, str]:
        out = {}
        for bd in self.route.broker_datas:
            addr = bd.broker_addrs.get(MASTER_ID)
            if addr:
                out[bd.broker_name] = addr
        return out


def view_of(route: TopicRouteData) -> TopicView:
    view = TopicView(route)
    masters = view.masters()
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        addr = masters.get(qd.broker_name)
        if addr is None or not PermName.is_writeable(qd.perm):
            continue
        view.write_queues.extend(WriteQueue(qd.broker_name, i, addr) for i in range(qd.write_queue_nums))
    return view


class RouteCache:
    """Topic routes from the name servers, kept :data:`ROUTE_TTL_S` seconds."""

    def __init__(self, get_route: object) -> None:
        self._get_route = get_route  # async (topic) -> TopicRouteData, raising MQBrokerError
        self._views: dict[str, TopicView] = {}
        self.listener: Callable[[str, TopicView | None], None] | None = None
        """Told each view fetched and each forgotten (``None``): the gRPC port's own sends follow them."""

    def listen(self, listener: Callable[[str, TopicView | None], None]) -> None:
        """Tell ``listener`` of every view from now on, the cached ones first."""
        self.listener = listener
        for topic, view in list(self._views.items()):
            listener(topic, view)

    async def view(self, topic: str, *, refresh: bool = False) -> TopicView:
        view = self._views.get(topic)
        if view is None or refresh or time.monotonic() - view.fetched > ROUTE_TTL_S:
            try:
                route = await self._get_route(topic)  # type: ignore[operator]
            except MQBrokerError as e:
                if e.code == 17:  # TOPIC_NOT_EXIST
                    raise ProxyError(d.Code.TOPIC_NOT_FOUND, f"topic {topic} not found") from None
                raise ProxyError(d.Code.INTERNAL_SERVER_ERROR, f"route of {topic}: {e}") from None
            view = view_of(route)
            self._views[topic] = view
            if self.listener is not None:
                self.listener(topic, view)
        return view

    def forget(self, topic: str) -> None:
        self._views.pop(topic, None)
        if self.listener is not None:
            self.listener(topic, None)

    def broker_addr(self, broker_name: str) -> str | None:
        """A master address of ``broker_name`` from any cached route."""
        for view in self._views.values():
            addr = view.master(broker_name)
            if addr:
                return addr
        return None


def permission(perm: int) -> int:
    r, w = PermName.is_readable(perm), PermName.is_writeable(perm)
    if r and w:
        return d.Permission.READ_WRITE
    if r:
        return d.Permission.READ
    if w:
        return d.Permission.WRITE
    return d.Permission.NONE


def message_queues(view: TopicView, topic: d.Resource, endpoints: d.Endpoints) -> list[d.MessageQueue]:
    """QueryRoute's queues: per QueueData read-only, write-only, then read-write ids (RouteActivity)."""
    out: list[d.MessageQueue] = []
    names = {bd.broker_name for bd in view.route.broker_datas if bd.broker_addrs.get(MASTER_ID)}
    for qd in view.route.queue_datas:
        if qd.broker_name not in names:
            continue
        broker = d.Broker(name=qd.broker_name, id=MASTER_ID, endpoints=endpoints)
        readable, writable = PermName.is_readable(qd.perm), PermName.is_writeable(qd.perm)
        r = w = rw = n = 0
        if readable and writable:
            rw = min(qd.write_queue_nums, qd.read_queue_nums)
            r, w = qd.read_queue_nums - rw, qd.write_queue_nums - rw
        elif writable:
            w = qd.write_queue_nums
        elif readable:
            r = qd.read_queue_nums
        else:
            n = max(1, qd.write_queue_nums, qd.read_queue_nums)
        qid = 0
        for count, perm in (
            (r, d.Permission.READ),
            (w, d.Permission.WRITE),
            (rw, d.Permission.READ_WRITE),
            (n, d.Permission.NONE),
        ):
            for _ in range(count):
                out.append(
                    d.MessageQueue(
                        topic=topic,
                        id=qid,
                        permission=perm,
                        broker=broker,
                        accept_message_types=ALL_MESSAGE_TYPES,
                    )
                )
                qid += 1
    return out


def assignments(view: TopicView, topic: d.Resource, endpoints: d.Endpoints, fifo: bool) -> list[d.Assignment]:
    """QueryAssignment: per readable broker one queue (id -1), or every queue for an orderly group."""
    out: list[d.Assignment] = []
    masters = view.masters()
    for qd in view.route.queue_datas:
        if not PermName.is_readable(qd.perm) or qd.read_queue_nums <= 0 or qd.broker_name not in masters:
            continue
        broker = d.Broker(name=qd.broker_name, id=MASTER_ID, endpoints=endpoints)
        perm = permission(qd.perm)
        ids = range(qd.read_queue_nums) if fifo else (-1,)
        for qid in ids:
            mq = d.MessageQueue(topic=topic, id=qid, permission=perm, broker=broker)
            out.append(d.Assignment(message_queue=mq))
    return out


_LCG_MULT = 2862933555777941757
_MASK64 = (1 << 64) - 1


def consistent_hash(value: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)`` (a linear congruential generator's jumps)."""
    if buckets <= 0:
        raise ValueError(f"buckets must be positive: {buckets}")
    state = value & _MASK64
    candidate = 0
    while True:
        state = (_LCG_MULT * state + 1) & _MASK64
        next_double = ((state >> 33) + 1) / float(1 << 31)
        nxt = int((candidate + 1) / next_double)
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def select_queue(view: TopicView, message_group: str | None) -> WriteQueue:
    """The queue of a send: by the message group's consistent hash, else round robin."""
    queues = view.write_queues
    if not queues:
        raise ProxyError(d.Code.FORBIDDEN, "the topic has no writable queue on a broker with a master")
    if message_group:
        return queues[consistent_hash(java_string_hash(message_group), len(queues))]
    view.cursor = (view.cursor + 1) & 0x7FFFFFFF
    return queues[view.cursor % len(queues)]
