"""Consumer vocabulary and the HEART_BEAT body (REMOTING.md §3.8 HeartbeatData).

Enums carry the Java names (written to JSON as names, like fastjson); their values are the Java ordinals.
:func:`build_subscription` is ``FilterAPI.build``: a TAG expression is split on ``||``, each piece trimmed,
empty pieces dropped, ``*`` / empty meaning everything; ``codeSet`` holds the Java ``String.hashCode`` of
each tag.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from rmq.client.errors import MQClientError
from rmq.common.java import java_string_hash

__all__ = [
    "SUB_ALL",
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerData",
    "ExpressionType",
    "HeartbeatData",
    "MessageModel",
    "MessageSelector",
    "SubscriptionData",
    "build_subscription",
]

SUB_ALL = "*"


class MessageModel(Enum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeType(Enum):
    CONSUME_ACTIVELY = 0
    """Pull / lite pull consumers."""
    CONSUME_PASSIVELY = 1
    """Push consumers."""


class ConsumeFromWhere(Enum):
    """Where a group starts on a queue it has no stored offset for."""

    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


class ExpressionType:
    TAG = "TAG"
    SQL92 = "SQL92"


@dataclass(frozen=True)
class MessageSelector:
    """An expression and its type: ``MessageSelector.by_tag("A || B")``, ``.by_sql("a > 5")``."""

    expression_type: str
    expression: str

    @classmethod
    def by_tag(cls, expression: str | None) -> MessageSelector:
        return cls(ExpressionType.TAG, expression or SUB_ALL)

    @classmethod
    def by_sql(cls, sql: str) -> MessageSelector:
        return cls(ExpressionType.SQL92, sql)


@dataclass
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = field(default_factory=lambda: int(time.time() * 1000))
    expression_type: str = ExpressionType.TAG
    class_filter_mode: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": self.code_set,
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": self.tags_set,
            "topic": self.topic,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SubscriptionData:
        return cls(
            topic=str(d["topic"]),
            sub_string=str(d.get("subString") or SUB_ALL),
            tags_set=[str(t) for t in d.get("tagsSet") or ()],
            code_set=[int(c) for c in d.get("codeSet") or ()],
            sub_version=int(d.get("subVersion") or 0),
            expression_type=str(d.get("expressionType") or ExpressionType.TAG),
            class_filter_mode=bool(d.get("classFilterMode")),
        )


def build_subscription(
    topic: str, expression: str | None, expression_type: str = ExpressionType.TAG
) -> SubscriptionData:
    if expression_type == ExpressionType.TAG or not expression_type:
        data = SubscriptionData(topic, SUB_ALL)
        if expression and expression != SUB_ALL:
            data.sub_string = expression
            for piece in expression.split("||"):
                tag = piece.strip()
                if tag and tag not in data.tags_set:
                    data.tags_set.append(tag)
                    data.code_set.append(java_string_hash(tag))
        return data
    if not expression or not expression.strip():
        raise MQClientError(f"{expression_type} expression of topic {topic} is blank")
    return SubscriptionData(topic, expression, expression_type=expression_type)


@dataclass
class ConsumerData:
    group_name: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscriptions: list[SubscriptionData]
    unit_mode: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "consumeFromWhere": self.consume_from_where.name,
            "consumeType": self.consume_type.name,
            "groupName": self.group_name,
            "messageModel": self.message_model.name,
            "subscriptionDataSet": [s.to_dict() for s in self.subscriptions],
            "unitMode": self.unit_mode,
        }


@dataclass
class HeartbeatData:
    client_id: str
    producer_groups: list[str] = field(default_factory=list)
    consumers: list[ConsumerData] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "clientID": self.client_id,
            "consumerDataSet": [c.to_dict() for c in self.consumers],
            "producerDataSet": [{"groupName": g} for g in self.producer_groups],
        }
