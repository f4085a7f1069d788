"""The Spark schema of the rows, from the one column list the Rust reader defines."""

from __future__ import annotations

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

__all__ = ["ReadColumns", "spark_schema"]


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


def spark_schema() -> StructType:
    """Every column: topic, queue_id, queue_offset, commitlog_offset, store_size, sysflag, flag,
    born/store timestamps, born/store hosts, reconsume_times, prepared_transaction_offset, tags, keys,
    uniq_key, msg_id, offset_msg_id, properties, body and the flags is_transaction_prepared,
    is_system_topic and visible."""
    return StructType([StructField(c.name, _spark_type(c.type), c.nullable) for c in COLUMNS])


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
