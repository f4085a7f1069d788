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


def test_a_batch_over_the_id_reservation_limit_is_encoded_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """An Arrow batch of more than 65,536 rows is encoded in chunks, each with its own id reservation."""
    from rmq.spark.sink import columnar
    from rmq.spark.sink.send import Sent

    monkeypatch.setattr(columnar, "UNIQ_IDS_AT_ONCE", 3)
    seen: list[tuple[int, int]] = []
    ids: list[str] = []

    class Impl:
        max_message_size = 1 << 20

    class FakeProducer:
        impl = Impl()

    def fake_run(coro):  # type: ignore[no-untyped-def]
        coro.close()

    real = columnar.encode_rows

    def spy(cols, topic, part, rows, first_row, opts, max_body):  # type: ignore[no-untyped-def]
        out = real(cols, topic, part, rows, first_row, opts, max_body)
        seen.extend((first, last) for first, last, _b in out)
        ids.extend(i for _f, _l, b in out for i in b.uniq_ids.split(","))
        return out

    monkeypatch.setattr(columnar, "encode_rows", spy)
    monkeypatch.setattr(columnar.sync, "run", fake_run)
    batch = pa.RecordBatch.from_pydict({"body": [b"x"] * 7})
    sent = Sent()
    columnar.send_columnar(FakeProducer(), _opts(), SinkColumns(("body",), "T"), batch, sent)  # type: ignore[arg-type]
    assert seen == [(0, 2), (3, 5), (6, 6)]
    assert sent.rows == 7 and len(ids) == 7 and len(set(ids)) == 7
