"""Producer and consumer bookkeeping: which client channels belong to which groups, their
subscriptions, liveness (expiry after `channelExpiredTimeout`), and NOTIFY_CONSUMER_IDS_CHANGED."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rmq.broker.subscription import SubscriptionData
from rmq.common.codes import RequestCode
from rmq.remoting.command import create_request
from rmq.remoting.context import RequestContext

__all__ = ["ClientChannel", "ConsumerGroupInfo", "ConsumerManager", "ProducerManager"]

log = logging.getLogger(__name__)


def _rule(sub: SubscriptionData) -> tuple[str, str, int, tuple[int, ...] | None]:
    """What a pull is answered by, of a subscription: a change to it ends what the fast path vetted."""
    codes = None if sub.codes is None else tuple(sub.codes)
    return (sub.expression_type, sub.sub_string, sub.sub_version, codes)


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class ClientChannel:
    ctx: RequestContext
    client_id: str
    language: int
    version: int
    last_update: int = field(default_factory=now_ms)

    def describe(self) -> dict[str, Any]:
        from rmq.common.codes import LanguageCode

        try:
            lang = LanguageCode(self.language).name
        except ValueError:
            lang = "OTHER"
        return {
            "clientAddr": self.ctx.remote_addr,
            "clientId": self.client_id,
            "language": lang,
            "version": self.version,
        }


@dataclass
class ConsumerGroupInfo:
    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[int, ClientChannel] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return sorted({c.client_id for c in self.channels.values()})


class ConsumerManager:
    def __init__(self, expiry_ms: int = 120_000) -> None:
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self.expiry_ms = expiry_ms
        self.on_subscription_change: Callable[[str], None] | None = None
        """Called with a group whose subscription of some topic changed or ended (the network thread's
        pull fast path forgets what it vetted for the group)."""

    def _subscription_changed(self, group: str) -> None:
        if self.on_subscription_change is not None:
            self.on_subscription_change(group)

    def register(
        self,
        group: str,
        channel: ClientChannel,
        consume_type: str,
        message_model: str,
        consume_from_where: str,
        subscriptions: list[SubscriptionData],
    ) -> tuple[bool, bool]:
        """Add or refresh a consumer. Returns (channel newly added, topic set changed)."""
        info = self.groups.get(group)
        if info is None:
            info = self.groups[group] = ConsumerGroupInfo(group)
        info.consume_type, info.message_model = consume_type, message_model
        info.consume_from_where = consume_from_where
        cid = channel.ctx.channel_id
        old = info.channels.get(cid)
        added = old is None or old.client_id != channel.client_id
        if old is not None and not added:
            old.last_update = now_ms()
        else:
            info.channels[cid] = channel
            log.info(
                "consumer %s from %s joined group %s (%s, %s)",
                channel.client_id,
                channel.ctx.remote_addr,
                group,
                message_model,
                consume_type,
            )
        new_subs = {s.topic: s for s in subscriptions}
        topics_changed = set(new_subs) != set(info.subscriptions)
        changed = topics_changed
        for topic, sub in new_subs.items():
            cur = info.subscriptions.get(topic)
            if cur is None or sub.sub_version >= cur.sub_version:
                if cur is not None and _rule(cur) != _rule(sub):
                    changed = True
                info.subscriptions[topic] = sub
        for topic in list(info.subscriptions):
            if topic not in new_subs:
                del info.subscriptions[topic]
        if changed:
            self._subscription_changed(group)
        return added, topics_changed

    def unregister(self, group: str, channel_id: int) -> bool:
        info = self.groups.get(group)
        gone = None if info is None else info.channels.pop(channel_id, None)
        if info is None or gone is None:
            return False
        log.info("consumer %s from %s left group %s", gone.client_id, gone.ctx.remote_addr, group)
        if not info.channels:
            del self.groups[group]
            self._subscription_changed(group)
        return True

    def channel_closed(self, channel_id: int) -> list[str]:
        """Forget a closed channel; returns the groups that lost a member."""
        changed = []
        for group in list(self.groups):
            if self.unregister(group, channel_id):
                changed.append(group)
        return changed

    def scan_expired(self, now: int | None = None) -> list[tuple[str, ClientChannel]]:
        now = now_ms() if now is None else now
        expired = []
        for group, info in list(self.groups.items()):
            for cid, ch in list(info.channels.items()):
                if now - ch.last_update > self.expiry_ms:
                    expired.append((group, ch))
                    self.unregister(group, cid)
        return expired

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)

    def subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.groups.get(group)
        return None if info is None else info.subscriptions.get(topic)

    def groups_of_topic(self, topic: str) -> list[str]:
        return [g for g, info in self.groups.items() if topic in info.subscriptions]

    def notify_ids_changed(self, group: str) -> None:
        """Tell every consumer of the group to rebalance now (oneway)."""
        info = self.groups.get(group)
        if info is None:
            return
        for ch in list(info.channels.values()):
            if ch.ctx.is_closed:
                continue
            req = create_request(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, oneway=True
            )
            try:
                ch.ctx.send_oneway(req)
            except Exception as e:  # a dying channel must not stop the others
                log.debug("notify %s failed: %s", ch.client_id, e)


class ProducerManager:
    def __init__(self, expiry_ms: int = 120_000) -> None:
        self.groups: dict[str, dict[int, ClientChannel]] = {}
        self.expiry_ms = expiry_ms

    def register(self, group: str, channel: ClientChannel) -> None:
        chans = self.groups.setdefault(group, {})
        old = chans.get(channel.ctx.channel_id)
        if old is not None and old.client_id == channel.client_id:
            old.last_update = now_ms()
        else:
            chans[channel.ctx.channel_id] = channel
            log.info("producer %s from %s joined group %s", channel.client_id, channel.ctx.remote_addr, group)

    def unregister(self, group: str, channel_id: int) -> None:
        chans = self.groups.get(group)
        if chans is not None:
            gone = chans.pop(channel_id, None)
            if gone is not None:
                log.info("producer %s from %s left group %s", gone.client_id, gone.ctx.remote_addr, group)
            if not chans:
                del self.groups[group]

    def channel_closed(self, channel_id: int) -> None:
        for group in list(self.groups):
            self.unregister(group, channel_id)

    def scan_expired(self, now: int | None = None) -> int:
        now = now_ms() if now is None else now
        n = 0
        for group, chans in list(self.groups.items()):
            for cid, ch in list(chans.items()):
                if now - ch.last_update > self.expiry_ms:
                    self.unregister(group, cid)
                    n += 1
        return n

    def any_channel(self, group: str) -> ClientChannel | None:
        for ch in self.groups.get(group, {}).values():
            if not ch.ctx.is_closed:
                return ch
        return None

    def find_channel(self, client_id: str) -> ClientChannel | None:
        """An open connection of the producer client ``client_id`` (any group)."""
        for chans in self.groups.values():
            for ch in chans.values():
                if ch.client_id == client_id and not ch.ctx.is_closed:
                    return ch
        return None
