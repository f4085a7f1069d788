"""The ``rocketmq`` PySpark data source: one row per stored message, decoded in Rust as Arrow batches.

Planning (on the driver) finds the committed end of the CommitLog and cuts the read into partitions:
slices of CommitLog files cut on record boundaries, or ConsumeQueue ranges when the predicates name
topics and that reads less. Each partition opens its own read-only view of the files in the worker
that runs it (workers are forked processes: nothing opened on the driver crosses into them).

Bad data: a damaged CommitLog record, or a compressed body that does not inflate, raises
``CorruptStoreError`` naming the file and offset; with ``failOnDataLoss=false`` the damaged bytes are
skipped up to the next intact record (a bad body reads as null), logged at WARN and counted in
``READ_STATS``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter, Filter, InputPartition
from pyspark.sql.types import StructType

from rmq import _store
from rmq.spark.arrow import OnBadBody, to_record_batch
from rmq.spark.network.options import is_network
from rmq.spark.options import ReadSpec, parse_options
from rmq.spark.pushdown import push_filters
from rmq.spark.schema import ReadColumns, columns_option, spark_schema

__all__ = [
    "READ_STATS",
    "QueuePartition",
    "RocketMQDataSource",
    "RocketMQDataSourceNoPushdown",
    "RocketMQReader",
    "ScanPartition",
    "auto_slice_size",
    "is_empty_plan",
    "plan_partitions",
    "read_partition",
]


class ScanPartition(InputPartition):
    """Records starting in ``[start, end)`` of one CommitLog file."""

    def __init__(self, start: int, end: int, end_is_boundary: bool) -> None:
        super().__init__((start, end, end_is_boundary))
        self.start = start
        self.end = end
        self.end_is_boundary = end_is_boundary


class QueuePartition(InputPartition):
    """The records a ConsumeQueue lists at logical offsets ``[start, end)``, below ``committed_end``."""

    def __init__(self, topic: str, queue_id: int, start: int, end: int, committed_end: int) -> None:
        super().__init__((topic, queue_id, start, end, committed_end))
        self.topic = topic
        self.queue_id = queue_id
        self.start = start
        self.end = end
        self.committed_end = committed_end


Partition = ScanPartition | QueuePartition

log = logging.getLogger(__name__)

READ_STATS: dict[str, int] = {
    "partitions": 0,
    "records_seen": 0,
    "bytes_seen": 0,
    "rows": 0,
    "damaged": 0,
    "bytes_skipped": 0,
    "bad_bodies": 0,
}
"""Counters of this process's partition reads (records examined vs rows produced; damaged ranges
skipped and their bytes; bodies that did not inflate, read as null); for tests and tuning."""

_COUNT_ROWS = 1 << 40
"""Rows per batch when no column is read (a zero-column batch is just a row count)."""

_SKIP_HINT = "option failOnDataLoss=false skips damaged records"


def plan_partitions(spec: ReadSpec, committed_end: int | None = None) -> tuple[str, list[Partition]]:
    """Plan a read of everything committed now (or below `committed_end`): `(kind, partitions)`."""
    reader = spec.open()
    end = reader.committed_end() if committed_end is None else committed_end
    kind, splits, _scan_bytes, _rows, _bytes = reader.plan(
        spec.filter.build(), end, spec.slice_size, spec.pushdown
    )
    if kind == "queue":
        return kind, [QueuePartition(t, q, s, e, end) for t, q, s, e in splits]
    return kind, [ScanPartition(s, e, b) for s, e, b in splits]


def _bad_body_handler(spec: ReadSpec) -> OnBadBody:
    """What a body that does not inflate does: raise, or (failOnDataLoss=false) log and count it."""

    def on_bad_body(offset: int, sys_flag: int, exc: Exception) -> None:
        what = (
            f"the body of the record at CommitLog offset {offset} of {spec.path} is stored compressed"
            f" (sysflag {sys_flag:#x}) and does not inflate: {exc}"
        )
        if spec.fail_on_data_loss:
            raise _store.CorruptStoreError(f"{what} (option failOnDataLoss=false reads it as a null body)")
        READ_STATS["bad_bodies"] += 1
        log.warning("%s; read as a null body", what)

    return on_bad_body


def _skipped(damage: list[tuple[str, int, int, str]]) -> None:
    for _file, _offset, skipped, text in damage:
        READ_STATS["damaged"] += 1
        READ_STATS["bytes_skipped"] += skipped
        log.warning("%s; skipped (failOnDataLoss=false)", text)


def read_partition(spec: ReadSpec, columns: ReadColumns, part: Partition) -> Iterator[pa.RecordBatch]:
    """Decode one partition into record batches of `columns.arrow`."""
    try:
        reader = spec.open()
    except _store.StoreNotFoundError:
        if spec.fail_on_data_loss:
            raise
        return
    filt = spec.filter.build()
    names = columns.decode_order
    # No column: the rows are only counted, so a batch can hold any number of them.
    max_rows = spec.batch_rows if names else _COUNT_ROWS
    skip = not spec.fail_on_data_loss
    on_bad_body = _bad_body_handler(spec)
    pos = part.start
    READ_STATS["partitions"] += 1
    while True:
        try:
            if isinstance(part, ScanPartition):
                split = (part.start, part.end, part.end_is_boundary)
                res = reader.scan(split, pos, filt, names, max_rows, spec.batch_bytes, skip)
            else:
                qsplit = (part.topic, part.queue_id, part.start, part.end)
                res = reader.read_queue(
                    qsplit, pos, part.committed_end, filt, names, max_rows, spec.batch_bytes, skip
                )
        except _store.StoreNotFoundError as e:
            if spec.fail_on_data_loss:
                raise _store.StoreNotFoundError(
                    f"{e} (retention deleted data this read needs; option failOnDataLoss=false skips it)"
                ) from e
            return
        except _store.CorruptStoreError as e:
            if skip:
                raise
            raise _store.CorruptStoreError(f"{e} ({_SKIP_HINT})") from e
        rows, buffers, compressed, nxt, done, seen, nbytes, damage = res
        READ_STATS["records_seen"] += seen
        READ_STATS["bytes_seen"] += nbytes
        READ_STATS["rows"] += rows
        _skipped(damage)
        if rows:
            ordered = [buffers[i] for i in columns.permutation]
            inflate = compressed if spec.decompress else ()
            yield to_record_batch(columns.arrow, columns.types, rows, ordered, inflate, on_bad_body)
        if done:
            return
        pos = nxt


_HEAVY = frozenset({"body", "properties"})


def auto_slice_size(names: list[str]) -> int:
    """Bytes per scan partition when the ``sliceSize`` option is not given: a read that builds no body
    nor properties gets through its bytes faster, so larger partitions amortise each Spark task's
    fixed cost (with no column at all the records are only walked and counted)."""
    if not names:
        return 512 << 20
    if _HEAVY.isdisjoint(names):
        return 256 << 20
    return 128 << 20


def is_empty_plan(partition: InputPartition) -> bool:
    """Spark reads a plan without partitions through one placeholder ``InputPartition(None)``."""
    return type(partition) is InputPartition and partition.value is None


class RocketMQReader(DataSourceReader):
    """Batch reader: plans partitions on the driver, decodes them in the workers."""

    def __init__(self, spec: ReadSpec, schema: StructType) -> None:
        self.spec = spec
        self.columns = ReadColumns(schema)

    def partitions(self) -> list[InputPartition]:
        spec = self.spec
        if spec.auto_slice:
            spec = replace(spec, slice_size=auto_slice_size(self.columns.names))
        _kind, parts = plan_partitions(spec)
        return list(parts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        if is_empty_plan(partition):
            return iter(())
        if not isinstance(partition, (ScanPartition, QueuePartition)):
            raise TypeError(f"not a rocketmq partition: {partition!r}")
        return read_partition(self.spec, self.columns, partition)


class RocketMQPushdownReader(RocketMQReader):
    """The batch reader with Spark filter pushdown (needs ``spark.sql.python.filterPushdown.enabled``,
    which ``rmq.spark.register`` sets)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:  # type: ignore[override]
        spec, rest = push_filters(self.spec.filter, filters)
        self.spec = replace(self.spec, filter=spec)
        yield from rest


class RocketMQDataSource(DataSource):
    """``spark.read.format("rocketmq").load("/path/to/store")``: see ``rmq.spark.options`` for the
    options and ``rmq.spark.schema.spark_schema`` for the columns."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        if is_network(self.options):
            from rmq.spark.network.reading import network_schema

            return network_schema(columns_option(self.options))
        return spark_schema(columns_option(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        if is_network(self.options):
            return _network_reader(self.options, schema)
        spec = parse_options(self.options)
        cls = RocketMQPushdownReader if spec.push_filters else RocketMQReader
        return cls(spec, schema)

    def streamReader(self, schema: StructType):  # type: ignore[no-untyped-def]
        if is_network(self.options):
            from rmq.spark.network.options import parse_network_options
            from rmq.spark.network.stream import NetworkStreamReader

            return NetworkStreamReader(parse_network_options(self.options, streaming=True), schema)
        from rmq.spark.stream import RocketMQStreamReader

        return RocketMQStreamReader(parse_options(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from rmq.spark.sink.writer import RocketMQWriter

        return RocketMQWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool):  # type: ignore[no-untyped-def]
        from rmq.spark.sink.writer import RocketMQStreamWriter

        return RocketMQStreamWriter(dict(self.options), schema, overwrite)


def _network_reader(options: dict[str, str], schema: StructType) -> DataSourceReader:
    from rmq.spark.network.options import parse_network_options
    from rmq.spark.network.source import NetworkReader

    return NetworkReader(parse_network_options(options), schema)


class RocketMQDataSourceNoPushdown(RocketMQDataSource):
    """The ``rocketmq`` format as ``rmq.spark.register(spark)`` registers it by default: Spark's filter
    pushdown to Python sources is off there, so the reader implements no ``pushFilters`` unless the
    ``pushFilters`` option asks for it (then Spark's own error says to enable the configuration)."""

    def reader(self, schema: StructType) -> DataSourceReader:
        if is_network(self.options):
            return _network_reader(self.options, schema)
        spec = parse_options(self.options)
        asked = any(k.lower() == "pushfilters" for k in self.options)
        cls = RocketMQPushdownReader if (spec.push_filters and asked) else RocketMQReader
        return cls(spec, schema)
