"""``spark.readStream.format("rocketmq")``: new messages as the broker appends them.

Offsets are CommitLog positions, ``{"commitlog_offset": N}``, always record boundaries: a micro-batch
reads the records starting in ``[start, end)``. ``end`` is the committed end when the trigger fires
(capped by ``maxRecordsPerTrigger`` rows that pass the options' conditions). Committed data never
changes, so a micro-batch replayed after a restart reads exactly the same rows: with Spark's
checkpoint every message is delivered once.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from rmq import _store
from rmq.spark.options import ReadSpec
from rmq.spark.schema import ReadColumns
from rmq.spark.source import QueuePartition, ScanPartition, is_empty_plan, plan_partitions, read_partition

__all__ = ["OFFSET_KEY", "RocketMQStreamReader"]

OFFSET_KEY = "commitlog_offset"
_FAR = 1 << 62


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over CommitLog positions; every call opens a fresh read-only view."""

    def __init__(self, spec: ReadSpec, schema: StructType) -> None:
        self.spec = replace(spec, pushdown="scan")
        self.columns = ReadColumns(schema)
        self._cap: int | None = None

    def _start_of(self, reader: _store.StoreReader, offset: int, end: int) -> int:
        """The first record boundary at or after `offset` (`end` if none is committed yet)."""
        if offset >= end:
            return offset
        _kind, splits, *_ = reader.plan(_store.ReadFilter(commitlog_offset=(offset, end)), end, _FAR, "scan")
        return splits[0][0] if splits else end

    def initialOffset(self) -> dict:
        reader = self.spec.open()
        end = reader.committed_end()
        start = self.spec.starting_offsets
        if start == "earliest":
            offset = self._start_of(reader, reader.min_offset(), end)
        elif start == "latest":
            offset = end
        else:
            offset = self._start_of(reader, int(start), end)
        return {OFFSET_KEY: offset}

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.spec.max_records_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        reader = self.spec.open()
        s = int(start[OFFSET_KEY])
        end = reader.committed_end(s)
        if self._cap is not None:
            end = min(end, self._cap)
        if isinstance(limit, ReadMaxRows) and end > s:
            end, _n = reader.advance(s, end, limit.max_rows, self.spec.filter.build())
        return {OFFSET_KEY: max(end, s)}

    def reportLatestOffset(self) -> dict:
        return {OFFSET_KEY: self.spec.open().committed_end()}

    def prepareForTriggerAvailableNow(self) -> None:
        self._cap = self.spec.open().committed_end()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        s, e = int(start[OFFSET_KEY]), int(end[OFFSET_KEY])
        if s >= e:
            return []
        if self.spec.fail_on_data_loss:
            lowest = self.spec.open().min_offset()
            if s < lowest:
                raise _store.StoreNotFoundError(
                    f"CommitLog offsets [{s}, {lowest}) were deleted by retention before this stream"
                    " read them (option failOnDataLoss=false skips them)"
                )
        spec = replace(self.spec, filter=self.spec.filter.and_(commitlog_offset=(s, e)))
        _kind, parts = plan_partitions(spec, committed_end=e)
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        if is_empty_plan(partition):
            return iter(())
        if not isinstance(partition, (ScanPartition, QueuePartition)):
            raise TypeError(f"not a rocketmq partition: {partition!r}")
        return read_partition(self.spec, self.columns, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: reading never changes the store."""
