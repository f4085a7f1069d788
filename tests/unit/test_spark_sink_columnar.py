"""The sink's columnar path without Spark: Arrow batches split by topic, encoded, bad rows named by
their task row number."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from rmq.client.message import parse_properties
from rmq.client.uniq_id import reserve_uniq_ids
from rmq.spark.sink.columnar import by_topic, encode_rows
from rmq.spark.sink.columns import SinkColumnError, SinkColumns
from rmq.spark.sink.options import parse_sink_options


def decode_batch(body: bytes) -> list[tuple[bytes, dict[str, str]]]:
    """A SEND_BATCH_MESSAGE body read by hand (REMOTING.md §4.5): size, magic, CRC, flag, body, properties."""
    out, pos = [], 0
    while pos < len(body):
        size, _magic, _crc, _flag, blen = struct.unpack_from(">iiiii", body, pos)
        data = body[pos + 20 : pos + 20 + blen]
        (plen,) = struct.unpack_from(">h", body, pos + 20 + blen)
        props = body[pos + 22 + blen : pos + 22 + blen + plen].decode()
        assert size == 22 + blen + plen
        out.append((data, parse_properties(props)))
        pos += size
    return out


def _opts(**extra: str):  # type: ignore[no-untyped-def]
    return parse_sink_options({"nameServer": "127.0.0.1:9876", **extra}, False)


def test_rows_split_by_topic_keep_their_order_and_task_row_numbers() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "topic": ["T1", None, "T2", "T1", "T2"],
            "body": [b"a", b"b", b"c", b"d", b"e"],
            "tags": ["x", None, "", "y", "z"],
        }
    )
    cols = SinkColumns(("topic", "body", "tags"), "T1")
    parts = by_topic(cols, batch, 100)
    assert [(t, p.column("body").to_pylist()) for t, p, _rows in parts] == [
        ("T1", [b"a", b"b", b"d"]),
        ("T2", [b"c", b"e"]),
    ]
    out = []
    for topic, part, rows in parts:
        for first, last, eb in encode_rows(cols, topic, part, rows, 100, _opts(batchSize="2"), 1 << 20):
            msgs = decode_batch(eb.body)
            out.append((topic, first, last, [(body, props.get("TAGS")) for body, props in msgs]))
            assert eb.uniq_ids == ",".join(props["UNIQ_KEY"] for _b, props in msgs)
            assert all(props["WAIT"] == "true" for _b, props in msgs)
    assert out == [
        ("T1", 100, 101, [(b"a", "x"), (b"b", None)]),
        ("T1", 103, 103, [(b"d", "y")]),
        ("T2", 102, 104, [(b"c", None), (b"e", "z")]),
    ]


def test_a_bad_row_is_named_by_its_task_row() -> None:
    batch = pa.RecordBatch.from_pydict({"topic": ["T1", "T2", "T2"], "body": [b"a", b"b", None]})
    cols = SinkColumns(("topic", "body"), None)
    (t1, p1, r1), (t2, p2, r2) = by_topic(cols, batch, 10)
    encode_rows(cols, t1, p1, r1, 10, _opts(), 1 << 20)
    with pytest.raises(SinkColumnError, match="row 12: column 'body' is null"):
        encode_rows(cols, t2, p2, r2, 10, _opts(), 1 << 20)
    big = pa.RecordBatch.from_pydict({"body": [b"xx", b"y" * 11]})
    with pytest.raises(SinkColumnError, match="row 4: column 'body' has 11 bytes, over the maximum 10"):
        encode_rows(SinkColumns(("body",), "T"), "T", big, None, 3, _opts(), 10)


def test_reserved_ids_follow_on_from_single_ids() -> None:
    from rmq.client.uniq_id import create_uniq_id

    base, counter = reserve_uniq_ids(3)
    nxt = create_uniq_id()
    assert len(base) + 4 == len(nxt) == 32
    assert int(nxt[-4:], 16) == (counter + 3) & 0xFFFF
    props = parse_properties(f"UNIQ_KEY\x01{base}{counter:04X}")
    assert props["UNIQ_KEY"].startswith(nxt[:20])
