"""The 5.x clients the proxy serves: their sessions, their Telemetry streams, and what brokers must know.

A session is keyed by the client id (the ``x-mq-client-id`` header): its type and settings (from Telemetry),
the topics a producer publishes, the group a consumer is in, and the queue of commands to write on its
Telemetry stream. The proxy stands for its clients towards the brokers as one Remoting client: it sends
HEART_BEAT for the producer groups (a 5.x producer's group is its topic, as Apache's proxy makes it) and
consumer groups of its live sessions, so a broker's CHECK_TRANSACTION_STATE reaches the proxy, which hands it
to a producer of that topic as a RecoverOrphanedTransactionCommand.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from rmq.proxy.pb import d, s

log = logging.getLogger("rmq.proxy")

SESSION_EXPIRY_S = 120.0
"""A session not heard of (no RPC, no Telemetry) for this long is dropped (Apache: channel expiry)."""


@dataclass(slots=True)
class Session:
    client_id: str
    client_type: int = d.ClientType.CLIENT_TYPE_UNSPECIFIED
    settings: d.Settings | None = None
    group: str | None = None
    topics: set[str] = field(default_factory=set)
    subscriptions: dict[str, d.FilterExpression] = field(default_factory=dict)
    max_attempts: int = 0
    """Deliveries of one message before it goes to the dead-letter queue (0: not a consumer yet)."""
    remote_addr: str = ""
    language: str = ""
    version: str = ""
    last_seen: float = field(default_factory=time.monotonic)
    streams: list[asyncio.Queue[s.TelemetryCommand | None]] = field(default_factory=list)
    lite_topics: set[str] = field(default_factory=set)
    """A LitePushConsumer's lite topics (SyncLiteSubscription), of its group's bind topic."""
    lite_cursor: int = 0
    """Where the next receive starts in the lite topics, so each gets its turn."""

    def touch(self) -> None:
        self.last_seen = time.monotonic()

    @property
    def is_producer(self) -> bool:
        return self.client_type in (d.ClientType.PRODUCER, d.ClientType.CLIENT_TYPE_UNSPECIFIED) and bool(
            self.topics
        )

    orderly: bool = False
    """The consumer's group consumes orderly (its broker config's ``consumeMessageOrderly``): FIFO."""

    @property
    def fifo(self) -> bool:
        return self.orderly

    @property
    def is_lite(self) -> bool:
        """A LitePushConsumer or a LiteSimpleConsumer (of a lite group)."""
        return self.client_type in (d.ClientType.LITE_PUSH_CONSUMER, d.ClientType.LITE_SIMPLE_CONSUMER)


class ClientRegistry:
    """Sessions by client id; the proxy's services read and update them."""

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self.changed = asyncio.Event()
        """Set when a producer topic or consumer group appears, so the brokers are told at once."""

    def session(self, client_id: str) -> Session:
        sess = self._sessions.get(client_id)
        if sess is None:
            sess = self._sessions[client_id] = Session(client_id)
            log.info("new 5.x client %s", client_id)
        sess.touch()
        return sess

    def get(self, client_id: str) -> Session | None:
        return self._sessions.get(client_id)

    def sessions(self) -> Iterable[Session]:
        return list(self._sessions.values())

    def remove(self, client_id: str, why: str) -> None:
        sess = self._sessions.pop(client_id, None)
        if sess is not None:
            for q in sess.streams:
                q.put_nowait(None)
            log.info("5.x client %s gone (%s)", client_id, why)

    def expire(self) -> None:
        now = time.monotonic()
        for sess in self.sessions():
            if not sess.streams and now - sess.last_seen > SESSION_EXPIRY_S:
                self.remove(sess.client_id, f"silent for {now - sess.last_seen:.0f} s")

    def producer_groups(self) -> set[str]:
        return {t for sess in self.sessions() if sess.is_producer for t in sess.topics}

    def consumer_groups(self) -> dict[str, dict[str, d.FilterExpression]]:
        out: dict[str, dict[str, d.FilterExpression]] = {}
        for sess in self.sessions():
            if sess.group and sess.client_type != d.ClientType.PRODUCER:
                out.setdefault(sess.group, {}).update(sess.subscriptions)
        return out

    def census(self) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str, str], int]]:
        """The live clients: producers by (language, version), consumers by (group, language, version);
        language in lower case, ``unknown`` where a client sent none."""
        producers: dict[tuple[str, str], int] = {}
        consumers: dict[tuple[str, str, str], int] = {}
        for sess in self.sessions():
            lang, version = (sess.language or "unknown").lower(), sess.version or "unknown"
            if sess.is_producer:
                producers[(lang, version)] = producers.get((lang, version), 0) + 1
            elif sess.group:
                key = (sess.group, lang, version)
                consumers[key] = consumers.get(key, 0) + 1
        return producers, consumers

    def simple_consumer_groups(self) -> set[str]:
        """Groups with a SimpleConsumer among their clients (they consume "actively", as Apache's proxy
        tells the brokers; PushConsumers' groups "passively")."""
        return {
            sess.group
            for sess in self.sessions()
            if sess.group and sess.client_type == d.ClientType.SIMPLE_CONSUMER
        }

    def producer_for(self, topic: str) -> Session | None:
        """A producer of ``topic`` with an open Telemetry stream (the most recently heard)."""
        best: Session | None = None
        for sess in self.sessions():
            if topic in sess.topics and sess.streams and (best is None or sess.last_seen > best.last_seen):
                best = sess
        return best
