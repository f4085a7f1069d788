"""What the admin requests answer (``C/admin/*``, ``CP/body/*``), as plain data with ``to_dict`` for JSON.

Each type is built from the broker's response body by ``from_body``; bodies keyed by a message queue
(``Map<MessageQueue, ...>``, written as fastjson object keys) come back keyed by
:class:`~rmq.client.message.MessageQueue`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final

from rmq.client.message import MessageQueue
from rmq.common.codes import V4_0_0
from rmq.common.fastjson import ObjectKey

__all__ = [
    "BrokerStatsData",
    "Connection",
    "ConsumeStats",
    "ConsumerConnection",
    "OffsetWrapper",
    "RollbackStats",
    "StatsItem",
    "SubscriptionGroupConfig",
    "TopicOffset",
    "mq_keyed",
    "version_desc",
]

_V5_0_0: Final = V4_0_0 + 2 * 100  # 4.x runs 4.0.0 .. 4.9.9, two ordinals (SNAPSHOT, release) each


def version_desc(ordinal: int) -> str:
    """Java's ``MQVersion.getVersionDesc``: ``409`` -> ``V4_9_8``, ``408`` -> ``V4_9_8_SNAPSHOT`` (4.x, 5.x);
    other ordinals are shown as the number."""
    for major, base in ((5, _V5_0_0), (4, V4_0_0)):
        if base - 1 <= ordinal < base + 199:
            step = ordinal - base + 1  # 0 = x.0.0_SNAPSHOT
            n, snapshot = divmod(step, 2)
            return f"V{major}_{n // 10}_{n % 10}" + ("" if snapshot else "_SNAPSHOT")
    return str(ordinal)


def mq_keyed(table: Any) -> dict[MessageQueue, Any]:
    """A ``Map<MessageQueue, V>`` body member (object keys) keyed by :class:`MessageQueue`."""
    out: dict[MessageQueue, Any] = {}
    for key, value in (table or {}).items():
        d = key.as_dict() if isinstance(key, ObjectKey) else key
        out[MessageQueue.from_dict(d)] = value
    return out


def _mq_dict(mq: MessageQueue) -> dict[str, Any]:
    return {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}


@dataclass(slots=True)
class TopicOffset:
    """One queue of ``topicStatus``: GET_TOPIC_STATS_INFO's ``offsetTable`` entry."""

    mq: MessageQueue
    min_offset: int
    max_offset: int
    last_update_timestamp: int

    def to_dict(self) -> dict[str, Any]:
        return {
            **_mq_dict(self.mq),
            "minOffset": self.min_offset,
            "maxOffset": self.max_offset,
            "lastUpdateTimestamp": self.last_update_timestamp,
        }

    @classmethod
    def table(cls, body: Mapping[str, Any]) -> list[TopicOffset]:
        rows = mq_keyed(body.get("offsetTable"))
        return sorted(
            (
                cls(
                    mq,
                    int(v.get("minOffset", 0)),
                    int(v.get("maxOffset", 0)),
                    int(v.get("lastUpdateTimestamp", 0)),
                )
                for mq, v in rows.items()
            ),
            key=lambda t: t.mq,
        )


@dataclass(slots=True)
class OffsetWrapper:
    """One queue of ``consumerProgress``: the broker's max offset, the group's committed offset and the store
    time of the last consumed message (0 if none); from a 5.x broker or rmq, where its pulls got to
    (``pullOffset``, else the committed offset), and from rmq the messages in flight (pulled and not
    committed; for a POP group, popped and not acked)."""

    mq: MessageQueue
    broker_offset: int
    consumer_offset: int
    last_timestamp: int
    pull_offset: int = -1
    inflight: int = 0

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset

    def to_dict(self) -> dict[str, Any]:
        return {
            **_mq_dict(self.mq),
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "pullOffset": self.pull_offset if self.pull_offset >= 0 else self.consumer_offset,
            "diff": self.diff,
            "inflight": self.inflight,
            "lastTimestamp": self.last_timestamp,
        }


@dataclass(slots=True)
class ConsumeStats:
    """GET_CONSUME_STATS of one group, merged over the brokers asked."""

    offsets: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    @property
    def diff_total(self) -> int:
        return sum(o.diff for o in self.offsets.values())

    @property
    def inflight_total(self) -> int:
        return sum(o.inflight for o in self.offsets.values())

    def rows(self) -> list[OffsetWrapper]:
        return [self.offsets[mq] for mq in sorted(self.offsets)]

    def merge_body(self, body: Mapping[str, Any]) -> None:
        self.consume_tps += float(body.get("consumeTps") or 0.0)
        for mq, v in mq_keyed(body.get("offsetTable")).items():
            self.offsets[mq] = OffsetWrapper(
                mq,
                int(v.get("brokerOffset", 0)),
                int(v.get("consumerOffset", 0)),
                int(v.get("lastTimestamp", 0)),
                int(v.get("pullOffset", -1)),
                int(v.get("inflight", 0)),
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "consumeTps": self.consume_tps,
            "diffTotal": self.diff_total,
            "inflightTotal": self.inflight_total,
            "offsets": [o.to_dict() for o in self.rows()],
        }


@dataclass(slots=True)
class Connection:
    """One client connection (``CP/body/Connection.java``)."""

    client_id: str
    client_addr: str
    language: str
    version: int

    @property
    def version_desc(self) -> str:
        return version_desc(self.version)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Connection:
        return cls(
            str(d.get("clientId", "")),
            str(d.get("clientAddr", "")),
            str(d.get("language", "")),
            int(d.get("version", 0)),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "clientAddr": self.client_addr,
            "language": self.language,
            "version": self.version,
            "versionDesc": self.version_desc,
        }


@dataclass(slots=True)
class ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST: the group's online clients and what they subscribe
    (``subscriptions``: topic -> sub expression)."""

    connections: list[Connection]
    subscriptions: dict[str, str]
    expression_types: dict[str, str]
    consume_type: str
    message_model: str
    consume_from_where: str

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ConsumerConnection:
        subs = body.get("subscriptionTable") or {}
        return cls(
            sorted(
                (Connection.from_dict(c) for c in body.get("connectionSet") or ()), key=lambda c: c.client_id
            ),
            {str(t): str(s.get("subString", "")) for t, s in subs.items()},
            {str(t): str(s.get("expressionType") or "TAG") for t, s in subs.items()},
            str(body.get("consumeType", "")),
            str(body.get("messageModel", "")),
            str(body.get("consumeFromWhere", "")),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "connections": [c.to_dict() for c in self.connections],
            "subscriptions": dict(sorted(self.subscriptions.items())),
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "consumeFromWhere": self.consume_from_where,
        }


@dataclass(slots=True)
class StatsItem:
    """One window of VIEW_BROKER_STATS_DATA: the count, the rate per second, the average per event."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> StatsItem:
        d = d or {}
        return cls(int(d.get("sum", 0)), float(d.get("tps", 0.0)), float(d.get("avgpt", 0.0)))


@dataclass(slots=True)
class BrokerStatsData:
    """VIEW_BROKER_STATS_DATA: the last minute, hour and day of one statistic."""

    minute: StatsItem
    hour: StatsItem
    day: StatsItem

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> BrokerStatsData:
        return cls(
            StatsItem.from_dict(body.get("statsMinute")),
            StatsItem.from_dict(body.get("statsHour")),
            StatsItem.from_dict(body.get("statsDay")),
        )

    def sum_24h(self) -> int:
        """The day's count, else the hour's, else the minute's (as ``mqadmin statsAll`` reads it)."""
        return self.day.sum or self.hour.sum or self.minute.sum


def _snake(camel: str) -> str:
    """``retryMaxTimes`` -> ``retry_max_times``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


@dataclass(slots=True)
class SubscriptionGroupConfig:
    """The body of UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (``C/subscription/SubscriptionGroupConfig.java``)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    consume_message_orderly: bool = False
    """RocketMQ 5.x's FIFO group; sent only when true (4.x brokers ignore it; rmq's broker keeps it)."""
    attributes: dict[str, str] = field(default_factory=dict)
    """RocketMQ 5.x's group attributes (e.g. ``lite.bind.topic``). In an update, keys as mqadmin sends them:
    ``+key`` sets, ``-key`` removes; sent only when there are some."""

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SubscriptionGroupConfig:
        """From a broker's JSON (GET_ALL_SUBSCRIPTIONGROUP_CONFIG); keys it does not know are dropped."""
        attrs = {f.name for f in fields(cls)} - {"group_name"}
        known = {_snake(key): value for key, value in d.items() if _snake(key) in attrs}
        return cls(str(d["groupName"]), **known)

    def to_dict(self) -> dict[str, Any]:
        return {
            **({"consumeMessageOrderly": True} if self.consume_message_orderly else {}),
            "groupName": self.group_name,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times,
            "brokerId": self.broker_id,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            **({"attributes": dict(self.attributes)} if self.attributes else {}),
        }


@dataclass(frozen=True, slots=True)
class RollbackStats:
    """One queue of an offset reset done in the broker for an offline group (Java's ``RollbackStats``): the
    queue's end, the group's offset before, the offset of the time asked for, and the offset now set (the old
    one when not forced and the new one is ahead of it)."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "queueId": self.queue_id,
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "timestampOffset": self.timestamp_offset,
            "rollbackOffset": self.rollback_offset,
        }
