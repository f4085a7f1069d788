"""Subscription expressions: parse a tag expression into the tag set and ConsumeQueue codes."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from rmq._store import java_string_hash
from rmq.filter import FilterSyntaxError, Sql92Filter, compile_sql92

__all__ = [
    "SUB_ALL",
    "SqlNotEnabledError",
    "SubscriptionData",
    "SubscriptionParseError",
    "parse_subscription",
]

SUB_ALL = "*"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"


class SubscriptionParseError(ValueError):
    """A subscription expression that cannot be used."""


class SqlNotEnabledError(SubscriptionParseError):
    """An SQL92 subscription on a broker without `enablePropertyFilter`."""


@lru_cache(maxsize=1024)
def _compile(expression: str) -> Sql92Filter:
    return compile_sql92(expression)


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
    sql: Sql92Filter | None = None
    """The compiled expression of an SQL92 subscription."""

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
    topic: str,
    sub_string: str | None,
    expression_type: str | None = None,
    sub_version: int = 0,
    *,
    sql_enabled: bool = False,
) -> SubscriptionData:
    """Build a SubscriptionData from an expression (RocketMQ's FilterAPI.build). Tag codes are
    computed here, never taken from the client (the C++ client sends wrong ones). SQL92
    expressions are compiled when the broker has `enablePropertyFilter`."""
    etype = (expression_type or EXPRESSION_TAG).strip().upper() or EXPRESSION_TAG
    text = (sub_string or "").strip()
    if etype == EXPRESSION_SQL92:
        if not sql_enabled:
            raise SqlNotEnabledError("The broker does not support consumer to filter message by SQL92")
        try:
            sql = _compile(text)
        except FilterSyntaxError as e:
            raise SubscriptionParseError(f"SQL92 expression {text!r} is malformed: {e}") from None
        return SubscriptionData(topic, text, frozenset(), None, sub_version, etype, sql=sql)
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
