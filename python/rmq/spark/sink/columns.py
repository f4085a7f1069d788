"""The columns a DataFrame written to RocketMQ may have, checked on the driver, and rows to messages.

========================== ==============================================================================
``body`` (required)        binary or string (UTF-8); a null or empty body is an error
``topic``                  string; else option ``topic`` names the topic of every row
``tags``                   string
``keys``                   string (space-separated keys) or array<string>
``properties``             map<string,string>: user properties (system names are refused)
``queue_id``               int: the row goes to this queue (index into the topic's writable queues
                           ordered by broker name, then queue id: with one broker group, the queue id);
                           rows of one queue are sent one at a time in row order
``broker_name``            string, with ``queue_id``: the queue of this broker group
``sharding_key``           string or integer: the queue is chosen by the key's Java hash, as
                           ``SelectMessageQueueByHash`` does; rows of a key keep their order
``delay_level``            int: the broker's delay level (1-based; 0 or null: none)
``deliver_time_ms``        long: deliver at this epoch time in ms (timer message)
========================== ==============================================================================

Any other column, or a column of another type, is an error naming it; ``queue_id`` and
``sharding_key`` exclude each other, as do ``delay_level`` and ``deliver_time_ms`` on one row.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

from rmq.client.message import RESERVED_PROPERTIES, Message
from rmq.spark.sink.options import SinkOptionError

__all__ = ["OutRow", "SinkColumnError", "SinkColumns", "rows_of"]

_INTS = (ByteType, ShortType, IntegerType, LongType)


class SinkColumnError(ValueError):
    """A column of the written DataFrame is unknown, of the wrong type, or holds a value that cannot be
    sent; the message names the column."""


def _is_str(t: DataType) -> bool:
    return isinstance(t, StringType)


def _is_int(t: DataType) -> bool:
    return isinstance(t, _INTS)


_COLUMNS: dict[str, tuple[str, Any]] = {
    "body": ("binary or string", lambda t: isinstance(t, (BinaryType, StringType))),
    "topic": ("string", _is_str),
    "tags": ("string", _is_str),
    "keys": (
        "string or array<string>",
        lambda t: _is_str(t) or (isinstance(t, ArrayType) and _is_str(t.elementType)),
    ),
    "properties": (
        "map<string,string>",
        lambda t: isinstance(t, MapType) and _is_str(t.keyType) and _is_str(t.valueType),
    ),
    "queue_id": ("an integer type", _is_int),
    "broker_name": ("string", _is_str),
    "sharding_key": ("string or an integer type", lambda t: _is_str(t) or _is_int(t)),
    "delay_level": ("an integer type", _is_int),
    "deliver_time_ms": ("an integer type (epoch ms)", _is_int),
}


@dataclass(frozen=True)
class SinkColumns:
    """The checked column set of a write."""

    names: tuple[str, ...]
    topic: str | None
    keys_list: bool = False
    """Whether ``keys`` is an array of strings (else a space-separated string)."""

    @classmethod
    def check(cls, schema: StructType, topic_option: str | None) -> SinkColumns:
        names: list[str] = []
        for field in schema.fields:
            name = field.name
            spec = _COLUMNS.get(name)
            if spec is None:
                raise SinkColumnError(
                    f"rocketmq sink: unknown column {name!r}; the columns are {', '.join(_COLUMNS)}"
                )
            want, ok = spec
            if not ok(field.dataType):
                raise SinkColumnError(
                    f"rocketmq sink: column {name!r} is {field.dataType.simpleString()}, it must be {want}"
                )
            names.append(name)
        if "body" not in names:
            raise SinkColumnError("rocketmq sink: the DataFrame needs a 'body' column (binary or string)")
        if "topic" not in names and topic_option is None:
            raise SinkOptionError(
                "rocketmq sink: no topic: give the DataFrame a 'topic' column or set option topic"
            )
        if "queue_id" in names and "sharding_key" in names:
            raise SinkColumnError("rocketmq sink: columns 'queue_id' and 'sharding_key' exclude each other")
        if "broker_name" in names and "queue_id" not in names:
            raise SinkColumnError("rocketmq sink: column 'broker_name' needs a 'queue_id' column")
        keys_list = any(f.name == "keys" and isinstance(f.dataType, ArrayType) for f in schema.fields)
        return cls(tuple(names), topic_option, keys_list)

    @property
    def orderly(self) -> bool:
        return "queue_id" in self.names or "sharding_key" in self.names


@dataclass(slots=True)
class OutRow:
    """One row made into a message, with where it must go (``queue_id``/``broker_name``) or how to shard."""

    message: Message
    queue_id: int | None
    broker_name: str | None
    sharding_key: str | int | None


def _body(value: Any, row: int) -> bytes:
    if value is None:
        raise SinkColumnError(f"rocketmq sink: row {row}: column 'body' is null")
    data = value.encode() if isinstance(value, str) else bytes(value)
    if not data:
        raise SinkColumnError(f"rocketmq sink: row {row}: column 'body' is empty (RocketMQ refuses it)")
    return data


def _make(cols: SinkColumns, r: dict[str, Any], row: int) -> OutRow:
    topic = r.get("topic") if "topic" in r else cols.topic
    if topic is None:
        topic = cols.topic
    if not topic:
        raise SinkColumnError(f"rocketmq sink: row {row}: column 'topic' is null and option topic is not set")
    props: dict[str, str] = {}
    for k, v in r.get("properties") or ():
        if v is None:
            continue
        if k in RESERVED_PROPERTIES:
            raise SinkColumnError(
                f"rocketmq sink: row {row}: column 'properties' sets {k!r}, a name RocketMQ reserves"
            )
        props[k] = v
    delay = r.get("delay_level")
    deliver = r.get("deliver_time_ms")
    if delay and deliver is not None:
        raise SinkColumnError(f"rocketmq sink: row {row}: both 'delay_level' and 'deliver_time_ms' are set")
    if delay is not None and delay < 0:
        raise SinkColumnError(f"rocketmq sink: row {row}: column 'delay_level' is {delay}, not >= 0")
    keys = r.get("keys")
    if isinstance(keys, list):
        keys = [k for k in keys if k]
    msg = Message(
        topic,
        _body(r["body"], row),
        tags=r.get("tags") or None,
        keys=keys or None,
        properties=props,
        delay_time_level=delay or 0,
        deliver_time_ms=deliver,
    )
    qid = r.get("queue_id")
    if qid is not None and qid < 0:
        raise SinkColumnError(f"rocketmq sink: row {row}: column 'queue_id' is {qid}, not >= 0")
    return OutRow(msg, qid, r.get("broker_name"), r.get("sharding_key"))


def rows_of(cols: SinkColumns, batches: Iterator[pa.RecordBatch]) -> Iterator[list[OutRow]]:
    """The rows of each Arrow batch as messages, in row order."""
    row = 0
    for batch in batches:
        data = batch.to_pydict()
        names = [n for n in batch.schema.names if n in cols.names]
        out = []
        for i in range(batch.num_rows):
            out.append(_make(cols, {n: data[n][i] for n in names}, row))
            row += 1
        yield out
