"""At-least-once rows straight from Arrow to RocketMQ batches: no Python object per row.

A write whose columns are among ``body``, ``topic``, ``tags`` and ``keys`` (a string), sent
at-least-once in batches (``batchSize`` > 1), takes this path: each Arrow batch is split by topic (row
order kept within a topic), checked, and encoded by the native module into SEND_BATCH_MESSAGE bodies of
up to ``batchSize`` rows and ``BATCH_BYTES`` (:func:`rmq._store.encode_row_batches`), each message with
the properties the producer would give it (``TAGS``, ``KEYS``, ``WAIT``, a new ``UNIQ_KEY``). The batches
go ``maxInFlight // batchSize`` at a time, each sent again whole after a failed send, as
:mod:`rmq.spark.sink.send` sends the batches it builds from messages. A bad row fails the task with the
same errors, naming the row (counted from the task's first row).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import pyarrow as pa
import pyarrow.compute as pc

from rmq._store import encode_row_batches
from rmq.client import sync
from rmq.client.producer.producer import EncodedBatch, Producer
from rmq.client.results import SendResult
from rmq.client.uniq_id import reserve_uniq_ids
from rmq.common.topic import is_retry_topic
from rmq.spark.sink.columns import SinkColumnError, SinkColumns
from rmq.spark.sink.options import SinkOptions
from rmq.spark.sink.send import BATCH_BYTES, Sent, all_or_cancel, queues_of, with_retries

__all__ = ["COLUMNAR_COLUMNS", "by_topic", "columnar", "encode_rows", "send_columnar"]

COLUMNAR_COLUMNS = frozenset({"body", "topic", "tags", "keys"})
UNIQ_IDS_AT_ONCE = 1 << 16


def columnar(opts: SinkOptions, cols: SinkColumns) -> bool:
    """Whether a write's rows take this path (else one message per row, :mod:`rmq.spark.sink.send`)."""
    return (
        not opts.exactly_once
        and opts.batch_size > 1
        and set(cols.names) <= COLUMNAR_COLUMNS
        and not cols.keys_list
    )


_Column = tuple[memoryview, memoryview, memoryview | None, int, int]
_EMPTY = memoryview(b"")


def _bytes(buf: pa.Buffer) -> memoryview:
    return memoryview(buf).cast("B")  # pyarrow exports its buffers as signed chars


def _buffers(arr: pa.Array, binary: pa.DataType) -> _Column:
    """The Arrow buffers of a binary or string column as the native encoder takes them (32-bit offsets)."""
    if arr.type != binary:
        arr = arr.cast(binary)
    validity, offsets, data = arr.buffers()
    return (
        _bytes(offsets),
        _EMPTY if data is None else _bytes(data),
        _bytes(validity) if arr.null_count and validity is not None else None,
        arr.offset,
        len(arr),
    )


def _first(mask: pa.Array) -> int:
    return int(pc.index(mask, True).as_py())


def by_topic(
    cols: SinkColumns, batch: pa.RecordBatch, first_row: int
) -> list[tuple[str, pa.RecordBatch, pa.Array | None]]:
    """The batch's rows per topic, each with the task row numbers of its rows (``None``: the rows of the
    whole batch, in order)."""
    if "topic" not in cols.names:
        assert cols.topic is not None
        return [(cols.topic, batch, None)]
    arr = batch.column("topic")
    if arr.null_count:
        if cols.topic is None:
            row = first_row + _first(pc.is_null(arr))
            raise SinkColumnError(
                f"rocketmq sink: row {row}: column 'topic' is null and option topic is not set"
            )
        arr = pc.fill_null(arr, cols.topic)
    empty = pc.equal(pc.utf8_length(arr), 0)
    if pc.any(empty).as_py():
        raise SinkColumnError(f"rocketmq sink: row {first_row + _first(empty)}: column 'topic' is empty")
    names = pc.unique(arr).to_pylist()
    if len(names) == 1:
        return [(names[0], batch, None)]
    out = []
    for name in names:
        mask = pc.equal(arr, name)
        out.append((name, batch.filter(mask), pc.indices_nonzero(mask)))
    return out


def encode_rows(
    cols: SinkColumns,
    topic: str,
    batch: pa.RecordBatch,
    rows: pa.Array | None,
    first_row: int,
    opts: SinkOptions,
    max_body: int,
) -> list[tuple[int, int, EncodedBatch]]:
    """`batch` (rows of one topic) as batches: ``(first task row, last task row, batch)``."""

    def task_row(i: int) -> int:
        return first_row + (i if rows is None else int(rows[i].as_py()))

    if is_retry_topic(topic):
        raise SinkColumnError(
            f"rocketmq sink: row {task_row(0)}: topic {topic!r} is a retry topic, which batches cannot go to"
        )
    names = batch.schema.names
    body = _buffers(batch.column("body"), pa.binary())
    tags = _buffers(batch.column("tags"), pa.string()) if "tags" in names else None
    keys = _buffers(batch.column("keys"), pa.string()) if "keys" in names else None
    base, counter = reserve_uniq_ids(batch.num_rows)
    try:
        encoded = encode_row_batches(body, tags, keys, base, counter, opts.batch_size, BATCH_BYTES, max_body)
    except ValueError as exc:
        if len(exc.args) == 2:
            row, what = exc.args
            raise SinkColumnError(f"rocketmq sink: row {task_row(row)}: {what}") from None
        raise
    return [
        (task_row(first), task_row(first + count - 1), EncodedBatch(topic, data, ids))
        for data, first, count, ids in encoded
    ]


async def _send(
    producer: Producer, opts: SinkOptions, todo: list[tuple[str, list[tuple[int, int, EncodedBatch]]]]
) -> None:
    gate = asyncio.Semaphore(max(1, opts.max_in_flight // opts.batch_size))

    async def one(topic: str, first: int, last: int, batch: EncodedBatch) -> None:
        def send(_attempt: int) -> Awaitable[SendResult]:
            return producer.send(batch)

        async with gate:
            what = f"row {first}" if first == last else f"a batch of rows {first}..{last}"
            await with_retries(opts, topic, what, send)

    for topic, _ in todo:
        await queues_of(producer, opts, topic)  # a clear error for an unknown topic, before any row is sent
    await all_or_cancel(one(topic, *b) for topic, batches in todo for b in batches)


def send_columnar(
    producer: sync.Producer, opts: SinkOptions, cols: SinkColumns, batch: pa.RecordBatch, sent: Sent
) -> None:
    """Send the rows of `batch` (the task's next rows), blocking until all are stored; raises if a row is
    bad or a batch cannot be sent."""
    impl: Producer = producer.impl
    # At most 65,536 rows per id reservation: the ids of one reservation differ only in a 16-bit counter.
    for start in range(0, batch.num_rows, UNIQ_IDS_AT_ONCE):
        chunk = batch.slice(start, UNIQ_IDS_AT_ONCE)
        todo = [
            (topic, encode_rows(cols, topic, part, rows, sent.rows, opts, impl.max_message_size))
            for topic, part, rows in by_topic(cols, chunk, sent.rows)
        ]
        sync.run(_send(impl, opts, todo))
        sent.rows += chunk.num_rows
