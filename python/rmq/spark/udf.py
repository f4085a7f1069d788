"""UDFs for DataFrames that already hold raw records or property strings.

``decode_record(col)`` turns a binary column holding one stored record per value (the CommitLog
layout, e.g. cut from files copied elsewhere) into a struct with the data source's columns; a null or
undecodable value gives a null struct. A value holding more than one record (a whole CommitLog file read
with ``binaryFile``, a pull answer's body) is an error naming the row and how many records it holds,
never its first record alone: ``decode_records(col)`` gives every record of each value, as an array of
those structs (``explode`` it for a row per record; zeros or the blank record that fill the end of a
CommitLog file end the value's records). ``parse_properties(col)`` turns
a RocketMQ property string (``name\\x01value\\x02...``) into a ``map<string,string>`` by Java's
rules. Both are Arrow UDFs: batches go to Rust as buffers, not row by row.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql.functions import arrow_udf
from pyspark.sql.types import ArrayType, MapType, StringType, StructType

from rmq import _store
from rmq.spark.arrow import COLUMN_NAMES, binary_buffers, to_array, to_struct_array
from rmq.spark.records import RecordRunError, record_spans
from rmq.spark.schema import ReadColumns, spark_schema

_SIZE = struct.Struct(">i")

__all__ = ["decode_record", "decode_records", "parse_properties", "record_struct_type"]


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
        _refuse_runs(records)
        return _decode(records, read, arrow_struct, check_crc, decompress)

    return arrow_udf(decode, struct)(col)  # type: ignore[call-overload,no-any-return]


def _decode(
    records: pa.Array, read: ReadColumns, arrow_struct: pa.StructType, check_crc: bool, decompress: bool
) -> pa.StructArray:
    validity, offsets, data, offset, length = binary_buffers(records)
    rows, buffers, row_validity, compressed = _store.decode_record_buffers(
        validity, offsets, data, offset, length, read.decode_order, check_crc
    )
    ordered = [buffers[i] for i in read.permutation]
    inflate = compressed if decompress else ()
    return to_struct_array(arrow_struct, read.types, rows, ordered, row_validity, inflate)


def _refuse_runs(records: pa.Array) -> None:
    """A ValueError for the first value that holds more than one record (see the module doc)."""
    for row, value in enumerate(records):
        if not value.is_valid:
            continue
        raw = value.as_buffer()
        if raw is None or raw.size < 4:
            continue
        view = memoryview(raw)
        size = _SIZE.unpack_from(view, 0)[0]
        if size <= 0 or size >= len(view):
            continue
        try:
            more = len(record_spans(view, size))
        except RecordRunError:
            continue  # not records after the first: trailing bytes the decoder ignores as before
        if more:
            raise ValueError(
                f"decode_record: the value of row {row} in this batch holds {more + 1} stored records"
                f" ({len(view)} bytes); decode_record decodes one record per value: use"
                " rmq.spark.decode_records(col), which returns every record (explode it for a row each)"
            )


def decode_records(
    col: Column | str,
    columns: Sequence[str] = COLUMN_NAMES,
    check_crc: bool = False,
    decompress: bool = True,
) -> Column:
    """An array column of structs: every stored record of each binary value (see the module doc); a
    null value gives a null array, bytes that are not whole records are an error naming the row."""
    struct_type = record_struct_type(columns)
    read = ReadColumns(struct_type)
    arrow_struct = pa.struct(list(read.arrow))

    def decode(values: pa.Array) -> pa.Array:
        pieces: list[bytes] = []
        list_offsets = [0]
        mask = []
        for row, value in enumerate(values):
            if not value.is_valid:
                mask.append(True)
                list_offsets.append(list_offsets[-1])
                continue
            view = memoryview(value.as_buffer() or b"")
            try:
                spans = record_spans(view)
            except RecordRunError as e:
                raise ValueError(f"decode_records: row {row} of this batch: {e}") from None
            pieces.extend(bytes(view[p : p + n]) for p, n in spans)
            mask.append(False)
            list_offsets.append(list_offsets[-1] + len(spans))
        flat = _decode(pa.array(pieces, pa.binary()), read, arrow_struct, check_crc, decompress)
        return pa.ListArray.from_arrays(
            pa.array(list_offsets, pa.int32()), flat, mask=pa.array(mask, pa.bool_())
        )

    return arrow_udf(decode, ArrayType(struct_type, True))(col)  # type: ignore[call-overload,no-any-return]


def parse_properties(col: Column | str) -> Column:
    """A ``map<string,string>`` column from a column of RocketMQ property strings."""

    def parse(props: pa.Array) -> pa.Array:
        validity, offsets, data, offset, length = binary_buffers(props)
        buffers = _store.properties_map_buffers(validity, offsets, data, offset, length)
        return to_array("map<string,string>", length, buffers)

    return arrow_udf(parse, MapType(StringType(), StringType(), True))(col)  # type: ignore[call-overload,no-any-return]
