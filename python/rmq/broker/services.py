"""What processors work with: the store and the broker's managers, wired by the controller."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from rmq.broker.clients import ConsumerManager, ProducerManager
from rmq.broker.config import BrokerConfig
from rmq.broker.consumer_offset import ConsumerOffsetManager
from rmq.broker.fast_failure import FastFailure
from rmq.broker.flush_responder import FlushResponder
from rmq.broker.ha.master import HAMaster
from rmq.broker.ha.responder import ReplicaResponder
from rmq.broker.long_polling import PullHoldService
from rmq.broker.metrics import BrokerMetrics
from rmq.broker.mq_lock import RebalanceLockManager
from rmq.broker.schedule import ScheduleService
from rmq.broker.stats import RateSampler, WindowCounter
from rmq.broker.subscription_group import SubscriptionGroupManager
from rmq.broker.topic_config import TopicConfigManager
from rmq.remoting.command import RemotingCommand
from rmq.remoting.context import RequestContext
from rmq.store import AsyncStore, MessageStore

if TYPE_CHECKING:
    from rmq.broker.pop.revive import ReviveService

__all__ = ["BrokerServices", "Counters", "TopicCheck", "socket_addr"]


class TopicCheck(Protocol):
    """ACL's check of a topic known only once a record is read (``AccessValidator.check_read``)."""

    def __call__(
        self, remote_addr: str, request: RemotingCommand, topic: str, perm: int = ...
    ) -> str | None: ...


@dataclass
class Counters:
    put_messages: int = 0
    get_messages: int = 0
    get_requests: int = 0
    """Pulls answered (found or not), as Apache's getTotalTps counts them."""
    fast_pull_requests: int = 0
    fast_pull_messages: int = 0
    """Of those, the pulls the network thread's fast path answered, and the messages they returned."""
    boot_ms: int = 0
    day: str = ""
    """The local date the morning marks below belong to ("" until the first :meth:`mark_day`)."""
    put_today_morning: int = 0
    get_today_morning: int = 0
    put_yesterday_morning: int = 0
    get_yesterday_morning: int = 0

    def mark_day(self, today: str, put_total: int) -> None:
        """Record the totals at the start of a new local day (``today``, ISO date); the first call (at
        start) only notes the day, so a broker started today reports 0 for both mornings, as Apache's."""
        if self.day == today:
            return
        if self.day:
            self.put_yesterday_morning, self.get_yesterday_morning = (
                self.put_today_morning,
                self.get_today_morning,
            )
            self.put_today_morning, self.get_today_morning = put_total, self.get_messages
        self.day = today


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
    group_gets: WindowCounter = field(default_factory=WindowCounter)
    """Messages pulled, by ``topic@group`` (VIEW_BROKER_STATS_DATA's GROUP_GET_NUMS)."""
    put_rate: RateSampler = field(default_factory=RateSampler)
    """Messages stored per second (runtime info ``putTps``)."""
    get_rate: RateSampler = field(default_factory=RateSampler)
    """Messages pulled per second (``getTransferedTps``)."""
    pull_rate: RateSampler = field(default_factory=RateSampler)
    """Pulls answered per second (``getTotalTps``)."""
    metrics: BrokerMetrics = field(default_factory=BrokerMetrics)
    """What the Python path counts for the Prometheus metrics (the fast path counts in Rust)."""
    fast_failure: FastFailure = field(init=False)
    """RocketMQ's fast failure on sends (``brokerFastFailureEnable``), with its refusals' counts."""
    register_brokers: Callable[[], None] = lambda: None
    """Re-register with the name servers now (after a topic change)."""
    registrations_settled: Callable[[], Awaitable[None]] | None = None
    """Wait until the scheduled re-registrations have reached the name servers (None: nothing to wait)."""
    ha_master: HAMaster | None = None
    """The HA service of a master (None on a slave)."""
    replica_responder: ReplicaResponder | None = None
    """SYNC_MASTER: holds send answers until a slave acknowledged their records (None otherwise)."""
    schedule: ScheduleService | None = None
    """The delay levels' service (its offsets answer GET_ALL_DELAY_OFFSET)."""
    read_check: TopicCheck | None = None
    """ACL (None: off): why the request's account may not have a permission (SUB unless given) on a topic
    known only once the record the request names by offset is read, or None when it may."""
    transaction_stats: Callable[[], dict[str, str]] = dict
    """The transaction service's figures for GET_BROKER_RUNTIME_INFO (``transactionHalfOffset``, ...)."""
    grpc_endpoint: Any = None
    """The gRPC endpoint this broker's process serves (``rmq.proxy.server.ProxyServer``), or None: its 5.x
    clients and call latency are exported with the broker's metrics (``protocol_type="grpc"``)."""
    pop_revive: ReviveService | None = None
    """POP's revive service (None until POP is served: a master): its in-flight messages and revive
    counters for the metrics."""
    fast_send: Any = None
    """The network thread's SEND fast path (``rmq._store.NetServer``), or None: ``allow_topic`` lets a
    vetted topic's sends and batches bypass Python, ``forget_topic`` / ``forget_topics`` undo it (called
    only by the controller's one hook for topic and broker config changes), ``fast_puts`` counts them,
    ``fast_send_stats`` counts what it took and declined. Its PULL fast path: ``allow_pull`` lets a vetted
    (group, topic)'s pulls that find messages bypass Python, ``forget_pull_group`` and the topic hooks undo
    it, ``take_pulls`` hands over what it served (:meth:`drain_pulls`)."""

    def __post_init__(self) -> None:
        self.fast_failure = FastFailure(self.config)

    def hold_until_replicated(
        self, end: int, ctx: RequestContext, response: RemotingCommand, status_remark: bool = False
    ) -> bool:
        """SYNC_MASTER: hold `response` until a slave acknowledged the record ending at `end` (the
        controller then holds it for the flush too with SYNC_FLUSH); False, and not held, when no slave is
        connected or the slave lags more than haSlaveFallbehindMax. `status_remark`: a timeout answers
        SYSTEM_ERROR with the status as the remark (a send-back) instead of the status's own code."""
        ha, responder = self.ha_master, self.replica_responder
        if ha is None or responder is None:
            return False
        ha.notify()
        if not ha.is_slave_ok(end):
            return False
        responder.hold(end, ctx, response, status_remark)
        return True

    def hold_until_flushed(
        self, end: int, ctx: RequestContext, response: RemotingCommand, status_remark: bool = False
    ) -> bool:
        """Hold `response` until the record ending at `end` is flushed (callers decide whether SYNC_FLUSH
        asks for it); False, and not held, when it already is. `status_remark` as for
        `hold_until_replicated`."""
        if self.store.flushed_offset() >= end:
            return False
        self.flush_responder.hold(end, ctx, response, status_remark)
        return True

    def pop_stats(self) -> dict[str, str]:
        """POP and the gRPC endpoint for GET_BROKER_RUNTIME_INFO (rmq's own keys; none before POP is served):
        ``popInflightMessages`` popped and neither acked nor revived yet, ``popReviveBehindRecords`` revive
        records not yet done with and ``popReviveBehindMs`` how long the oldest pending checkpoint has been
        due (the most of any revive queue), ``popRevivedMessages`` / ``popDeadLetteredMessages`` re-put to
        retry topics / DLQs since start; with the gRPC endpoint in this process, ``grpcProducers`` and
        ``grpcConsumers``: its live 5.x clients."""
        out: dict[str, str] = {}
        revive = self.pop_revive
        if revive is not None:
            behind = revive.behind()
            out["popInflightMessages"] = str(revive.inflight())
            out["popReviveBehindRecords"] = str(sum(records for _q, records, _ms in behind))
            out["popReviveBehindMs"] = str(max((ms for _q, _r, ms in behind), default=0))
            out["popRevivedMessages"] = str(revive.revived)
            out["popDeadLetteredMessages"] = str(revive.dead)
        endpoint = self.grpc_endpoint
        if endpoint is not None:
            producers, consumers = endpoint.registry.census()
            out["grpcProducers"] = str(sum(producers.values()))
            out["grpcConsumers"] = str(sum(consumers.values()))
        return out

    def fast_send_stats(self) -> dict[str, str]:
        """The fast path's counters for GET_BROKER_RUNTIME_INFO: send requests it answered
        (``fastSendTaken``), the messages they stored (``fastSendMessages``) and the send requests it left to
        the Python path (``fastSendDeclined``), also per reason (``fastSendDeclinedTopic``, ...: header,
        topic, queue id, body, special, properties, batch, store, queued, acl, busy); without a network thread
        the totals only, zeros. With ACL on, ``fastSendAclChecked``: sends it took after checking their
        signature and PUB permission itself (``fastSendDeclinedAcl``: the ones it left to the ACL validator),
        ``fastSendAclLoads``: times the validator pushed its rules to it. ``netThreadWakeups``: times the
        network thread woke up with events to handle (requests per wake-up tell how much each of its sleeps
        and system calls is shared). ``fastSendBatchUniqKeysDropped``: batches whose batch-level UNIQ_KEY it
        dropped. ``fastPullTaken`` / ``fastPullMessages``: pulls its PULL fast path answered and the messages
        they returned. ``netThreadSpinMillis``: time the network thread spent polling for requests instead
        of sleeping (``networkThreadSpinMicros``), idle time that counts as the broker's CPU time."""
        self.drain_pulls()
        if self.fast_send is None:
            taken, messages, declined, wakeups, uniq, spun = 0, 0, [], 0, 0, 0
        else:
            taken, messages, declined = self.fast_send.fast_send_stats()
            wakeups = self.fast_send.wakeups()
            uniq = self.fast_send.fast_batch_uniq_keys_dropped()
            spun = self.fast_send.spun_ms()
        out = {
            "netThreadWakeups": str(wakeups),
            "netThreadSpinMillis": str(spun),
            "fastSendBatchUniqKeysDropped": str(uniq),
            "fastSendTaken": str(taken),
            "fastSendMessages": str(messages),
            "fastSendDeclined": str(sum(n for _, n in declined)),
            "fastPullTaken": str(self.counters.fast_pull_requests),
            "fastPullMessages": str(self.counters.fast_pull_messages),
        }
        for reason, n in declined:
            out["fastSendDeclined" + reason.title().replace("_", "")] = str(n)
        acl = self.fast_send.fast_send_acl_stats() if self.fast_send is not None else None
        if acl is not None:
            out["fastSendAclChecked"] = str(acl[0])
            out["fastSendAclLoads"] = str(acl[2])
        return out

    def drain_pulls(self) -> None:
        """Count what the network thread's pull fast path served since the last call, as the Python path
        counts its own pulls (requests, messages, per-group gets, the outgoing metrics and each queue's
        last next offset), and apply the offsets those pulls committed. Called before anything reads
        these figures or the offset table."""
        fast = self.fast_send
        if fast is None:
            return
        taken = fast.take_pulls()
        if not taken:
            return
        for group, topic, queue_id, requests, messages, nbytes, next_offset, commit in taken:
            self.counters.get_requests += requests
            self.counters.get_messages += messages
            self.counters.fast_pull_requests += requests
            self.counters.fast_pull_messages += messages
            self.group_gets.add(f"{topic}@{group}", messages)
            if requests:  # else only a held pull's commit: no answer, no offset reached yet
                self.metrics.got(topic, group, queue_id, messages, nbytes, next_offset)
            if commit is not None:
                self.offsets.commit_taken(group, topic, queue_id, commit)

    def sample_rates(self) -> None:
        self.drain_pulls()
        self.put_rate.sample(self.put_messages())
        self.get_rate.sample(self.counters.get_messages)
        self.pull_rate.sample(self.counters.get_requests)

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
