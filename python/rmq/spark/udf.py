"""UDFs for DataFrames that already hold raw records or property strings.

``decode_record(col)`` turns a binary column holding one stored record per value (the CommitLog
layout, e.g. cut from files copied elsewhere or from a pull response) into a struct with the data
source's columns; a null or undecodable value gives a null struct. ``parse_properties(col)`` turns
a RocketMQ property string (``name\\x01value\\x02...``) into a ``map<string,string>`` by Java's
rules. Both are Arrow UDFs: batches go to Rust as buffers, not row by row.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql.functions import arrow_udf
from pyspark.sql.types import MapType, StringType, StructType

from rmq import _store
from rmq.spark.arrow import COLUMN_NAMES, binary_buffers, to_array, to_struct_array
from rmq.spark.schema import ReadColumns, spark_schema

__all__ = ["decode_record", "parse_properties", "record_struct_type"]


def record_struct_type(columns: Sequence[str] = COLUMN_NAMES) -> StructType:
    """The struct ``decode_record`` returns: the data source's columns (a bad record is a null struct)."""
    full = {f.name: f for f in spark_schema().fields}
    return StructType([full[c] for c in columns])


def decode_record(
    col: Column | str,
    columns: Sequence[str] = COLUMN_NAMES,
    check_crc: bool = False,
    decompress: bool = True,
) -> Column:
    """A struct column decoded from a binary column of stored records (see the module doc)."""
    struct = record_struct_type(columns)
    read = ReadColumns(struct)
    arrow_struct = pa.struct(list(read.arrow))

    def decode(records: pa.Array) -> pa.Array:
        validity, offsets, data, offset, length = binary_buffers(records)
        rows, buffers, row_validity, compressed = _store.decode_record_buffers(
            validity, offsets, data, offset, length, read.decode_order, check_crc
        )
        ordered = [buffers[i] for i in read.permutation]
        inflate = compressed if decompress else ()
        return to_struct_array(arrow_struct, read.types, rows, ordered, row_validity, inflate)

    return arrow_udf(decode, struct)(col)  # type: ignore[call-overload,no-any-return]


def parse_properties(col: Column | str) -> Column:
    """A ``map<string,string>`` column from a column of RocketMQ property strings."""

    def parse(props: pa.Array) -> pa.Array:
        validity, offsets, data, offset, length = binary_buffers(props)
        buffers = _store.properties_map_buffers(validity, offsets, data, offset, length)
        return to_array("map<string,string>", length, buffers)

    return arrow_udf(parse, MapType(StringType(), StringType(), True))(col)  # type: ignore[call-overload,no-any-return]
