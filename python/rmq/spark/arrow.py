"""Arrow arrays and record batches from the Rust reader's column buffers (pyarrow only).

The reader (``rmq._store.StoreReader``) decodes a run of stored records into buffers laid out as
Arrow lays out its arrays (values, i32 offsets, LSB-first validity bitmaps); here they are wrapped
with ``pyarrow.Array.from_buffers`` without another copy. Column names, types and nullability come
from ``rmq._store.reader_columns()``, the one definition of the row schema.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from rmq import _store

__all__ = [
    "COLUMNS",
    "COLUMN_NAMES",
    "Column",
    "arrow_schema",
    "arrow_type",
    "binary_buffers",
    "inflate",
    "to_array",
    "to_record_batch",
    "to_struct_array",
]


@dataclass(frozen=True)
class Column:
    """One column of the row schema: name, Spark SQL type name and nullability."""

    name: str
    type: str
    nullable: bool


COLUMNS: tuple[Column, ...] = tuple(Column(*c) for c in _store.reader_columns())
COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
_BY_NAME = {c.name: c for c in COLUMNS}

_ARROW_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "binary": pa.binary(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "boolean": pa.bool_(),
    "map<string,string>": pa.map_(pa.string(), pa.string()),
}


def arrow_type(type_name: str) -> pa.DataType:
    """The Arrow type of a column type name (as Spark's Arrow conversion maps it, UTC timestamps)."""
    return _ARROW_TYPES[type_name]


def arrow_schema(columns: Sequence[str] = COLUMN_NAMES, nullable: Sequence[bool] | None = None) -> pa.Schema:
    """The Arrow schema of `columns`; `nullable` overrides the fields' nullability (Spark's schema)."""
    flags = nullable if nullable is not None else [_BY_NAME[c].nullable for c in columns]
    return pa.schema(
        [pa.field(c, arrow_type(_BY_NAME[c].type), n) for c, n in zip(columns, flags, strict=True)]
    )


Buf = bytes | _store.ColumnBuffer
"""A buffer from the reader: ``bytes`` or a ``ColumnBuffer`` (the Rust vector, lent without a copy)."""


def _buf(b: Buf | None) -> pa.Buffer | None:
    return None if b is None else pa.py_buffer(b)


def _entries(offsets: Buf | None) -> int:
    view = memoryview(offsets or b"")
    return int.from_bytes(view[-4:], "little", signed=True) if len(view) else 0


def to_array(type_name: str, rows: int, buffers: Sequence[Buf | None]) -> pa.Array:
    """Wrap one column's buffers (layout per type: see ``rust/reader/src/columns.rs``)."""
    t = arrow_type(type_name)
    if type_name in ("string", "binary"):
        return pa.Array.from_buffers(t, rows, [_buf(b) for b in buffers], null_count=-1)
    if type_name == "map<string,string>":
        validity, offsets, key_off, key_data, val_off, val_data = buffers
        n = _entries(offsets)
        keys = pa.Array.from_buffers(pa.string(), n, [None, _buf(key_off), _buf(key_data)], null_count=0)
        values = pa.Array.from_buffers(pa.string(), n, [None, _buf(val_off), _buf(val_data)], null_count=0)
        entries = pa.StructArray.from_arrays([keys, values], fields=[t.key_field, t.item_field])  # type: ignore[attr-defined]
        return pa.Array.from_buffers(
            t, rows, [_buf(validity), _buf(offsets)], null_count=-1, children=[entries]
        )
    return pa.Array.from_buffers(t, rows, [_buf(b) for b in buffers], null_count=0)


Compressed = Sequence[tuple[int, int, int]]
"""``(row, sysflag, commitlog offset)`` of each row whose body is stored compressed."""

OnBadBody = Callable[[int, int, Exception], None]
"""Called as ``(commitlog offset, sysflag, error)`` for a body that does not inflate; it may raise."""


def inflate(body: pa.Array, compressed: Compressed, on_bad_body: OnBadBody | None = None) -> pa.Array:
    """`body` with the bodies of the `compressed` rows decompressed (zlib, or LZ4/ZSTD when those
    packages are installed; without the package a body stays as stored). A body that does not
    inflate (corrupt data) becomes null, after `on_bad_body` is told (it may raise instead)."""
    from rmq.client.message import inflate_body

    values = body.to_pylist()
    for row, sys_flag, offset in compressed:
        if values[row] is None:
            continue
        try:
            out = inflate_body(values[row], sys_flag)
        except Exception as exc:
            if on_bad_body is not None:
                on_bad_body(offset, sys_flag, exc)
            values[row] = None
            continue
        if out is not None:
            values[row] = out
    return pa.array(values, pa.binary())


def to_record_batch(
    schema: pa.Schema,
    types: Sequence[str],
    rows: int,
    buffers: Sequence[Sequence[Buf | None]],
    compressed: Compressed = (),
    on_bad_body: OnBadBody | None = None,
) -> pa.RecordBatch:
    """A record batch of `schema` from the reader's buffers (one list per column, schema order);
    bodies of the `compressed` rows are inflated (see `inflate`)."""
    if not schema.names:  # no column: a batch that only carries its row count
        return pa.RecordBatch.from_struct_array(
            pa.Array.from_buffers(pa.struct([]), rows, [None], children=[])
        )
    arrays = [to_array(t, rows, b) for t, b in zip(types, buffers, strict=True)]
    if compressed and "body" in schema.names:
        i = schema.get_field_index("body")
        arrays[i] = inflate(arrays[i], compressed, on_bad_body)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def to_struct_array(
    struct_type: pa.StructType,
    types: Sequence[str],
    rows: int,
    buffers: Sequence[Sequence[Buf | None]],
    validity: Buf | None,
    compressed: Compressed = (),
) -> pa.StructArray:
    """A struct array (one child per column) with the reader's row validity; bodies of the
    `compressed` rows are inflated (one that does not inflate is null)."""
    children = [to_array(t, rows, b) for t, b in zip(types, buffers, strict=True)]
    if compressed and struct_type.get_field_index("body") >= 0:
        i = struct_type.get_field_index("body")
        children[i] = inflate(children[i], compressed)
    return pa.Array.from_buffers(struct_type, rows, [_buf(validity)], null_count=-1, children=children)  # type: ignore[return-value]


def binary_buffers(arr: pa.Array) -> tuple[bytes | None, bytes, bytes, int, int]:
    """`(validity, offsets, data, offset, length)` of a string or binary array (large types are cast)."""
    if pa.types.is_large_binary(arr.type):
        arr = arr.cast(pa.binary())
    elif pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.string())
    validity, offsets, data = arr.buffers()
    return (
        None if validity is None or arr.null_count == 0 else validity.to_pybytes(),
        offsets.to_pybytes() if offsets is not None else b"\0\0\0\0",
        data.to_pybytes() if data is not None else b"",
        arr.offset,
        len(arr),
    )
