"""The Spark schema of the rows, from the one column list the Rust reader defines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from rmq.spark.arrow import COLUMNS, arrow_schema

__all__ = ["ReadColumns", "columns_option", "spark_schema"]


def _spark_type(type_name: str) -> DataType:
    return {
        "string": StringType(),
        "binary": BinaryType(),
        "int": IntegerType(),
        "bigint": LongType(),
        "timestamp": TimestampType(),
        "boolean": BooleanType(),
        "map<string,string>": MapType(StringType(), StringType(), True),
    }[type_name]


def spark_schema(columns: Sequence[str] | None = None) -> StructType:
    """Every column: topic, queue_id, queue_offset, commitlog_offset, store_size, sysflag, flag,
    born/store timestamps, born/store hosts, reconsume_times, prepared_transaction_offset, tags, keys,
    uniq_key, msg_id, offset_msg_id, properties, body, body_size (the body's stored length) and the
    flags is_transaction_prepared, is_system_topic and visible; or only `columns`, in that order (an
    empty list: no column, the rows still counted)."""
    full = {c.name: c for c in COLUMNS}
    names = list(full) if columns is None else list(columns)
    unknown = [n for n in names if n not in full]
    if unknown:
        raise ValueError(f"rocketmq has no column {unknown[0]!r}; columns: {', '.join(full)}")
    if len(set(names)) != len(names):
        raise ValueError(f"a column is named twice in {', '.join(names)}")
    return StructType([StructField(n, _spark_type(full[n].type), full[n].nullable) for n in names])


def columns_option(options: Mapping[str, str]) -> list[str] | None:
    """The ``columns`` option (case-insensitive key; comma-separated names, empty = no column), or
    None when it is not given."""
    for k, v in options.items():
        if str(k).lower() == "columns":
            return [p.strip() for p in str(v).split(",") if p.strip()]
    return None


class ReadColumns:
    """The columns a read produces: a subset of the full schema, in the order Spark asked for."""

    def __init__(self, schema: StructType) -> None:
        full = {c.name: c for c in COLUMNS}
        names, types = [], []
        for f in schema.fields:
            c = full.get(f.name)
            if c is None:
                raise ValueError(f"rocketmq has no column {f.name!r}; columns: {', '.join(full)}")
            if f.dataType != _spark_type(c.type):
                raise ValueError(f"column {f.name} is {c.type}, not {f.dataType.simpleString()}")
            names.append(f.name)
            types.append(c.type)
        self.names: list[str] = names
        self.types: list[str] = types
        self.arrow: pa.Schema = arrow_schema(names, [f.nullable for f in schema.fields])
        # The reader builds columns in schema order; Spark may want another order.
        order = {c.name: i for i, c in enumerate(COLUMNS)}
        self.decode_order: list[str] = sorted(names, key=order.__getitem__)
        self.permutation: list[int] = [self.decode_order.index(n) for n in names]
