"""Spark's pushed-down predicates as reader conditions.

Spark does not re-check a predicate the source accepts, so only exact translations are accepted:
equality and ``IN`` on ``topic``, ``queue_id`` and ``tags``; equality and ranges on
``queue_offset``, ``commitlog_offset``, ``store_timestamp`` and ``born_timestamp``; equality on the
flags ``visible``, ``is_system_topic`` and ``is_transaction_prepared``. ``IN`` on an offset or a
time only narrows the read to its envelope and is handed back to Spark; everything else is handed
back untouched.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
)

from rmq.spark.arrow import COLUMNS
from rmq.spark.options import FilterSpec

__all__ = ["push_filters"]

_I64_MAX = (1 << 63) - 1
_I64_MIN = -(1 << 63)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

_SETS = {"topic": "topics", "queue_id": "queue_ids", "tags": "tags"}
_OFFSETS = {"queue_offset": "queue_offset", "commitlog_offset": "commitlog_offset"}
_TIMES = {"store_timestamp": "store_time", "born_timestamp": "born_time"}
_FLAGS = {"visible": "visible", "is_system_topic": "system_topic", "is_transaction_prepared": "prepared"}
_NOT_NULL = {c.name for c in COLUMNS if not c.nullable}


def _micros(v: Any) -> int | None:
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.UTC)
        return (v - _EPOCH) // dt.timedelta(microseconds=1)
    return None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _ms_range(op: type, us: int) -> tuple[int, int]:
    """The store-ms range `[lo, hi)` of rows whose µs timestamp (ms × 1000) satisfies `op us`."""
    floor, ceil = us // 1000, -(-us // 1000)
    if op is GreaterThan:
        return (floor + 1, _I64_MAX)
    if op is GreaterThanOrEqual:
        return (ceil, _I64_MAX)
    if op is LessThan:
        return (_I64_MIN, ceil)
    if op is LessThanOrEqual:
        return (_I64_MIN, floor + 1)
    return (floor, floor + 1) if us % 1000 == 0 else (0, 0)  # equality


def _offset_range(op: type, v: int) -> tuple[int, int]:
    if op is GreaterThan:
        return (v + 1, _I64_MAX)
    if op is GreaterThanOrEqual:
        return (v, _I64_MAX)
    if op is LessThan:
        return (_I64_MIN, v)
    if op is LessThanOrEqual:
        return (_I64_MIN, v + 1)
    return (v, v + 1)


_COMPARE = (EqualTo, EqualNullSafe, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)


def _convert(f: Filter) -> tuple[dict[str, Any], bool]:
    """`(conditions, exact)` for one filter: conditions narrow the read; `exact` means Spark need
    not evaluate the filter again."""
    attr: tuple[str, ...] = getattr(f, "attribute", ())
    if len(attr) != 1:
        return {}, False
    col = attr[0]
    if isinstance(f, IsNotNull):
        return {}, col in _NOT_NULL
    value: Any = getattr(f, "value", None)
    equality = isinstance(f, (EqualTo, EqualNullSafe))
    if equality and value is None:
        return {}, False
    if col in _SETS:
        values = value if isinstance(f, In) else [value] if equality else None
        if values is None:
            return {}, False
        wanted = [v for v in values if v is not None]
        if col == "queue_id" and not all(_int(v) is not None for v in wanted):
            return {}, False
        if col != "queue_id" and not all(isinstance(v, str) for v in wanted):
            return {}, False
        return {_SETS[col]: wanted}, True
    if col in _FLAGS and equality and isinstance(value, bool):
        return {_FLAGS[col]: value}, True
    if col in _OFFSETS or col in _TIMES:
        to = _micros if col in _TIMES else _int
        if isinstance(f, In):
            converted = [to(v) for v in value if v is not None]
            nums = [n for n in converted if n is not None]
            if not nums or len(nums) != len(converted):
                return {}, False
            lo, hi = min(nums), max(nums)
            if col in _TIMES:
                return {_TIMES[col]: (lo // 1000, hi // 1000 + 1)}, False
            return {_OFFSETS[col]: (lo, hi + 1)}, False
        if isinstance(f, _COMPARE):
            n = to(value)
            if n is None:
                return {}, False
            op = EqualTo if equality else type(f)
            if col in _TIMES:
                return {_TIMES[col]: _ms_range(op, n)}, True
            return {_OFFSETS[col]: _offset_range(op, n)}, True
    return {}, False


def push_filters(spec: FilterSpec, filters: list[Filter]) -> tuple[FilterSpec, list[Filter]]:
    """`spec` narrowed by what `filters` allow, and the filters Spark must still evaluate."""
    rest: list[Filter] = []
    for f in filters:
        conds, exact = _convert(f)
        if conds:
            spec = spec.and_(**conds)
        if not exact:
            rest.append(f)
    return spec, rest
