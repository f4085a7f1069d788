"""What processors work with: the store and the broker's managers, wired by the controller."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from rmq.broker.clients import ConsumerManager, ProducerManager
from rmq.broker.config import BrokerConfig
from rmq.broker.consumer_offset import ConsumerOffsetManager
from rmq.broker.flush_responder import FlushResponder
from rmq.broker.ha.master import HAMaster
from rmq.broker.ha.responder import ReplicaResponder
from rmq.broker.long_polling import PullHoldService
from rmq.broker.mq_lock import RebalanceLockManager
from rmq.broker.subscription_group import SubscriptionGroupManager
from rmq.broker.topic_config import TopicConfigManager
from rmq.store import AsyncStore, MessageStore

__all__ = ["BrokerServices", "Counters", "socket_addr"]


@dataclass
class Counters:
    put_messages: int = 0
    get_messages: int = 0
    boot_ms: int = 0


@dataclass
class BrokerServices:
    config: BrokerConfig
    store: MessageStore
    astore: AsyncStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    consumers: ConsumerManager
    producers: ProducerManager
    locks: RebalanceLockManager
    holds: PullHoldService
    flush_responder: FlushResponder
    delay_levels: list[int] = field(default_factory=list)
    """Delay of each level in ms (`messageDelayLevel`)."""
    counters: Counters = field(default_factory=Counters)
    register_brokers: Callable[[], None] = lambda: None
    """Re-register with the name servers now (after a topic change)."""
    registrations_settled: Callable[[], Awaitable[None]] | None = None
    """Wait until the scheduled re-registrations have reached the name servers (None: nothing to wait)."""
    ha_master: HAMaster | None = None
    """The HA service of a master (None on a slave)."""
    replica_responder: ReplicaResponder | None = None
    """SYNC_MASTER: holds send answers until a slave acknowledged their records (None otherwise)."""
    fast_send: Any = None
    """The network thread's SEND fast path (``rmq._store.NetServer``), or None: ``allow_topic`` lets a
    vetted topic's plain sends bypass Python, ``forget_topic`` / ``forget_topics`` undo it (called only by the
controller's one hook for topic and broker config changes), ``fast_puts`` counts them."""

    def put_messages(self) -> int:
        """Messages stored since start, by the Python path and the fast path."""
        fast = self.fast_send.fast_puts() if self.fast_send is not None else 0
        return self.counters.put_messages + fast


def socket_addr(remote: str) -> str:
    """`ip:port` as the store parses it (IPv6 hosts in brackets)."""
    host, _, port = remote.rpartition(":")
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return remote or "0.0.0.0:0"
