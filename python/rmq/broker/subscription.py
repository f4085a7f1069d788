"""Subscription expressions: parse a tag expression into the tag set and ConsumeQueue codes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmq._store import java_string_hash

__all__ = ["SUB_ALL", "SubscriptionData", "parse_subscription"]

SUB_ALL = "*"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"


class SubscriptionParseError(ValueError):
    """A subscription expression that cannot be used."""


@dataclass
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags: frozenset[str] = frozenset()
    codes: list[int] | None = None
    """ConsumeQueue tag codes to match; None = every message."""
    sub_version: int = 0
    expression_type: str = EXPRESSION_TAG
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "classFilterMode": False,
            "codeSet": sorted(set(self.codes or [])),
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": sorted(self.tags),
            "topic": self.topic,
        }


def parse_subscription(
    topic: str, sub_string: str | None, expression_type: str | None = None, sub_version: int = 0
) -> SubscriptionData:
    """Build a SubscriptionData from an expression (RocketMQ's FilterAPI.build). Tag codes are
    computed here, never taken from the client (the C++ client sends wrong ones)."""
    etype = (expression_type or EXPRESSION_TAG).strip().upper() or EXPRESSION_TAG
    text = (sub_string or "").strip()
    if etype == EXPRESSION_SQL92:
        raise SubscriptionParseError("SQL92 filtering is not enabled on this broker")
    if etype != EXPRESSION_TAG:
        raise SubscriptionParseError(f"unknown expression type {expression_type!r}")
    if not text or text == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL, frozenset(), None, sub_version, etype)
    tags = [t.strip() for t in text.split("||")]
    tags = [t for t in tags if t]
    if not tags:
        raise SubscriptionParseError(f"subscription {text!r} names no tag")
    if SUB_ALL in tags:
        return SubscriptionData(topic, SUB_ALL, frozenset(), None, sub_version, etype)
    return SubscriptionData(
        topic, text, frozenset(tags), [java_string_hash(t) for t in tags], sub_version, etype
    )
