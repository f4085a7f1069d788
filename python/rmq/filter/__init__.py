"""SQL92 message filtering (RocketMQ's ``MessageSelector.bySql``), backed by the Rust ``rmq-filter``.

A consumer subscribes with expression type ``SQL92`` and an expression over message properties::

    >>> from rmq.filter import compile_sql92
    >>> f = compile_sql92("a > 5 AND b = 'x'")
    >>> f.matches({"a": "6", "b": "x"}), f.matches(b"a\\x016\\x02b\\x01x\\x02"), f.matches({"b": "x"})
    (True, True, False)

The grammar and semantics are RocketMQ 4.9.8's: comparisons (``> >= < <= = <>``), ``BETWEEN``,
``IN``, ``IS [NOT] NULL``, ``AND``/``OR``/``NOT`` (three-valued: a comparison with a missing
property is NULL, and only TRUE matches), string, integer, decimal and boolean literals, keywords in
any case. A property value compared with a number is parsed as one; when it does not parse the message
does not match. ``NOT`` binds tighter than comparisons, as in RocketMQ: write ``NOT (a > 5)``.

A malformed expression raises :class:`FilterSyntaxError` (a ``ValueError``) with ``kind``
(``"lexical"``, ``"grammar"``, ``"type"`` or ``"too_deep"``), ``offset``, ``line``, ``column`` and
``detail``.

Bloom bitmaps: at dispatch, a message of a topic gets an ``m``-bit map with the ``k`` bit positions
of every group whose expression it matches (:class:`FilterSet`); the pull path skips a message whose
map lacks one of the group's positions (:func:`bloom_may_match`) and evaluates the expression for the
rest. A group's positions derive from :func:`bloom_key` (``group#topic``) as in RocketMQ, whose broker
defaults (``maxErrorRateOfBloomFilter`` 20, ``expectConsumerNumUseFilter`` 32) give ``m = 112``,
``k = 3``. A message stored before a group registered (or changed its expression) has no bits for it
and must not be skipped.
"""

from __future__ import annotations

from rmq._store import (
    FilterSet,
    FilterSyntaxError,
    Sql92Filter,
    bloom_bits,
    bloom_may_match,
    bloom_shape,
    compile_sql92,
)

EXPRESSION_TYPE_SQL92 = "SQL92"
"""The subscription expression type of a SQL92 filter (``ExpressionType.SQL92``)."""

EXPRESSION_TYPE_TAG = "TAG"
"""The subscription expression type of a tag filter (``ExpressionType.TAG``)."""

DEFAULT_MAX_ERROR_RATE = 20
"""RocketMQ's ``maxErrorRateOfBloomFilter`` default, in percent."""

DEFAULT_EXPECTED_CONSUMERS = 32
"""RocketMQ's ``expectConsumerNumUseFilter`` default."""


def is_tag_type(expression_type: str | None) -> bool:
    """Whether a subscription filters by tag (``ExpressionType.isTagType``): no type, ``""`` or ``TAG``."""
    return not expression_type or expression_type == EXPRESSION_TYPE_TAG


def bloom_key(group: str, topic: str) -> str:
    """The key RocketMQ hashes for a consumer group's bloom positions on a topic."""
    return f"{group}#{topic}"


__all__ = [
    "DEFAULT_EXPECTED_CONSUMERS",
    "DEFAULT_MAX_ERROR_RATE",
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "FilterSet",
    "FilterSyntaxError",
    "Sql92Filter",
    "bloom_bits",
    "bloom_key",
    "bloom_may_match",
    "bloom_shape",
    "compile_sql92",
    "is_tag_type",
]
