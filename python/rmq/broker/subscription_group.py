"""SubscriptionGroupManager: consumer group configs, persisted to `config/subscriptionGroup.json`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rmq.broker.persist import load_json, persist_json
from rmq.common.route import DataVersion

__all__ = ["SubscriptionGroupConfig", "SubscriptionGroupManager"]


GROUP_ATTRIBUTES = (
    "lite.bind.topic",
    "lite.sub.client.quota",
    "lite.sub.model",
    "lite.sub.reset.offset.exclusive",
    "lite.sub.reset.offset.unsubscribe",
    "lite.sub.client.max.event.cnt",
    "lite.sub.wildcard",
    "priority.factor",
)
"""The group attributes RocketMQ 5.5.0 knows. rmq applies ``lite.bind.topic`` (the parent topic of a lite
group) and ``lite.sub.client.quota`` (lite topics per consumer); the others are kept and shown."""

_NUMERIC_ATTRIBUTES = ("lite.sub.client.quota", "lite.sub.client.max.event.cnt", "priority.factor")


@dataclass
class SubscriptionGroupConfig:
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
    """RocketMQ 5.x: a FIFO group (its proxy pops it orderly); written to JSON only when true, so 4.x
    tools see the table they know."""

    attributes: dict[str, str] = field(default_factory=dict)
    """RocketMQ 5.x's group attributes (e.g. ``lite.bind.topic``: the parent topic of a lite group); written
    only when there are some."""

    _KEYS = {
        "groupName": "group_name",
        "consumeEnable": "consume_enable",
        "consumeFromMinEnable": "consume_from_min_enable",
        "consumeBroadcastEnable": "consume_broadcast_enable",
        "retryQueueNums": "retry_queue_nums",
        "retryMaxTimes": "retry_max_times",
        "brokerId": "broker_id",
        "whichBrokerWhenConsumeSlowly": "which_broker_when_consume_slowly",
        "notifyConsumerIdsChangedEnable": "notify_consumer_ids_changed_enable",
        "consumeMessageOrderly": "consume_message_orderly",
    }

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, a) for k, a in self._KEYS.items()}
        if not self.consume_message_orderly:
            del out["consumeMessageOrderly"]
        if self.attributes:
            out["attributes"] = dict(sorted(self.attributes.items()))
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any], name: str | None = None) -> SubscriptionGroupConfig:
        cfg = cls(str(d.get("groupName") or name or ""))
        for k, a in cls._KEYS.items():
            if k in d and d[k] is not None and k != "groupName":
                cur = getattr(cfg, a)
                v = d[k]
                if isinstance(cur, bool):
                    v = v if isinstance(v, bool) else str(v).lower() == "true"
                else:
                    v = int(v)
                setattr(cfg, a, v)
        raw = d.get("attributes") or {}
        if not isinstance(raw, dict):
            raise ValueError(f"attributes must be a map, not {type(raw).__name__}")
        cfg.attributes = {
            str(k).removeprefix("+"): str(v) for k, v in raw.items() if not str(k).startswith("-")
        }
        if not cfg.group_name:
            raise ValueError("subscription group config without groupName")
        return cfg

    def alter_attributes(self, current: SubscriptionGroupConfig | None, changes: dict[str, Any]) -> None:
        """An update's attributes as RocketMQ 5.x applies them: ``+key=value`` sets, ``-key`` removes, the
        group's other attributes stay."""
        out = dict(current.attributes) if current is not None else {}
        for k, v in changes.items():
            key = str(k)
            name = key[1:] if key[:1] in "+-" else key
            if name not in GROUP_ATTRIBUTES:
                raise ValueError(
                    f"unsupported group attribute {name!r} (5.x's are {', '.join(GROUP_ATTRIBUTES)})"
                )
            if key.startswith("-"):
                out.pop(name, None)
                continue
            value = str(v)
            if name in _NUMERIC_ATTRIBUTES and not value.lstrip("-").isdigit():
                raise ValueError(f"group attribute {name} must be a whole number, not {value!r}")
            out[name] = value
        self.attributes = out


class SubscriptionGroupManager:
    def __init__(self, config_dir: str, auto_create: bool) -> None:
        self.path = os.path.join(config_dir, "subscriptionGroup.json")
        self.auto_create = auto_create
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion()
        self.on_change: Callable[[str | None], None] | None = None
        """Called with a group whose config changed or that was deleted (None: any group may have): the
        network thread's pull fast path forgets what it vetted for it."""

    def _changed(self, group: str | None) -> None:
        if self.on_change is not None:
            self.on_change(group)

    def load(self) -> None:
        data = load_json(self.path)
        if not data:
            return
        for name, d in (data.get("subscriptionGroupTable") or {}).items():
            self.table[str(name)] = SubscriptionGroupConfig.from_dict(d, str(name))
        if data.get("dataVersion"):
            self.data_version = DataVersion.from_dict(data["dataVersion"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_dict(),
            "subscriptionGroupTable": {k: v.to_dict() for k, v in self.table.items()},
        }

    def persist(self) -> None:
        persist_json(self.path, self.to_dict())

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, auto-creating it when allowed."""
        cfg = self.table.get(group)
        if cfg is None and self.auto_create:
            cfg = SubscriptionGroupConfig(group)
            self.table[group] = cfg
            self.data_version.next_version()
            self.persist()
        return cfg

    def replace_all(self, data: dict[str, Any]) -> bool:
        """Take a master's whole table (a slave's copy: GET_ALL_SUBSCRIPTIONGROUP_CONFIG's body) if its
        data version differs from ours; returns whether it did."""
        version = DataVersion.from_dict(data.get("dataVersion") or {})
        if version == self.data_version:
            return False
        self.table = {
            str(name): SubscriptionGroupConfig.from_dict(d, str(name))
            for name, d in (data.get("subscriptionGroupTable") or {}).items()
        }
        self.data_version = version
        self.persist()
        self._changed(None)
        return True

    def update(self, cfg: SubscriptionGroupConfig) -> None:
        self.table[cfg.group_name] = cfg
        self.data_version.next_version()
        self.persist()
        self._changed(cfg.group_name)

    def delete(self, group: str) -> bool:
        if self.table.pop(group, None) is None:
            return False
        self.data_version.next_version()
        self.persist()
        self._changed(group)
        return True
