"""Reading one queue range (executor side): a pull loop over the blocking client, the pulled records
decoded by the store source's decoder into Arrow batches, plus the ``broker_name`` column.

A pull answer's body is stored records as the CommitLog holds them; they are gathered until ``batchSize``
rows and decoded in one call (``rmq._store.decode_record_buffers``, the decoder of the ``decode_record``
UDF). Records at or past the range's end are dropped (a pull may return more than asked for).

Which broker: the group's master first. A transport failure moves the read to the next broker of the
group (its slaves), and back round the list; an answer's ``suggestWhichBrokerId`` moves it to that
broker when the group has it. Answers:

* FOUND: rows; the read goes on at ``nextBeginOffset``;
* RETRY_IMMEDIATELY: a filter skipped offsets (go on at ``nextBeginOffset``), or a slave sends the read
  back to its master;
* NOT_FOUND / OFFSET_MOVED above the broker's max: the broker does not have the planned offsets yet (a
  slave behind its master): asked again until ``pullTimeoutMs`` has passed without progress, then an error;
* OFFSET_MOVED below the broker's min: retention deleted them: an error (``failOnDataLoss``) or skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.types import StructField, StructType

from rmq import _store
from rmq.common.codes import MASTER_ID, ResponseCode
from rmq.spark.arrow import to_record_batch
from rmq.spark.network.cluster import TRANSPORT_ERRORS, ClusterClient, NetworkReadError
from rmq.spark.network.options import NetworkSpec
from rmq.spark.network.planning import NET_STATS, QueueRange, check_data_loss
from rmq.spark.records import queue_offset_of, record_offsets, record_spans
from rmq.spark.schema import ReadColumns

__all__ = ["BROKER_NAME", "NetColumns", "network_schema", "read_range"]

log = logging.getLogger(__name__)

BROKER_NAME = "broker_name"
_RETRY_PAUSE_S = 0.05


def network_schema(columns: list[str] | None = None) -> StructType:
    """The store source's columns plus ``broker_name`` (last), or only `columns` in that order."""
    from pyspark.sql.types import StringType

    from rmq.spark.schema import spark_schema

    broker = StructField(BROKER_NAME, StringType(), False)
    if columns is None:
        return StructType([*spark_schema().fields, broker])
    if len(set(columns)) != len(columns):
        raise ValueError(f"a column is named twice in {', '.join(columns)}")
    stored = spark_schema([c for c in columns if c != BROKER_NAME])
    by_name = {f.name: f for f in stored.fields} | {BROKER_NAME: broker}
    return StructType([by_name[c] for c in columns])


class NetColumns:
    """The columns of a network read: the stored ones (decoded as the store source does) and
    ``broker_name`` at its place."""

    def __init__(self, schema: StructType) -> None:
        self.names = [f.name for f in schema.fields]
        self.broker_at = self.names.index(BROKER_NAME) if BROKER_NAME in self.names else None
        stored = StructType([f for f in schema.fields if f.name != BROKER_NAME])
        self.stored = ReadColumns(stored)
        fields = list(self.stored.arrow)
        if self.broker_at is not None:
            nullable = schema.fields[self.broker_at].nullable
            fields.insert(self.broker_at, pa.field(BROKER_NAME, pa.string(), nullable))
        self.arrow = pa.schema(fields)


class _Batcher:
    """Pulled records gathered until a batch is worth decoding."""

    def __init__(self, spec: NetworkSpec, columns: NetColumns, broker: str) -> None:
        self.spec, self.columns, self.broker = spec, columns, broker
        self.parts: list[bytes] = []
        self.sizes: list[int] = []

    def add(self, body: bytes, spans: list[tuple[int, int]]) -> None:
        if not spans:
            return
        first, last = spans[0][0], spans[-1][0] + spans[-1][1]
        self.parts.append(body[first:last])
        self.sizes.extend(size for _, size in spans)

    def __len__(self) -> int:
        return len(self.sizes)

    def flush(self, rng: QueueRange) -> pa.RecordBatch:
        data = b"".join(self.parts)
        spans, pos = [], 0
        for size in self.sizes:
            spans.append((pos, size))
            pos += size
        self.parts, self.sizes = [], []
        cols = self.columns.stored
        rows, buffers, validity, compressed = _store.decode_record_buffers(
            None, record_offsets(spans), data, 0, len(spans), cols.decode_order, self.spec.check_crc
        )
        if validity is not None and not _all_valid(validity, len(spans)):
            raise NetworkReadError(f"{rng.queue}: the broker sent a record that does not decode")
        ordered = [buffers[i] for i in cols.permutation]
        inflate = compressed if self.spec.decompress else ()
        batch = to_record_batch(cols.arrow, cols.types, rows, ordered, inflate)
        NET_STATS["rows"] += rows
        at = self.columns.broker_at
        if at is None:
            return batch if cols.names else _count_batch(self.columns.arrow, rows)
        arrays = list(batch.columns) if cols.names else []
        arrays.insert(at, pa.repeat(pa.scalar(self.broker, pa.string()), rows))
        return pa.RecordBatch.from_arrays(arrays, schema=self.columns.arrow)


def _all_valid(validity: bytes, rows: int) -> bool:
    full, rest = divmod(rows, 8)
    if any(b != 0xFF for b in validity[:full]):
        return False
    return not rest or (validity[full] & ((1 << rest) - 1)) == (1 << rest) - 1


def _count_batch(schema: pa.Schema, rows: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_struct_array(pa.Array.from_buffers(pa.struct([]), rows, [None], children=[]))


def read_range(spec: NetworkSpec, columns: NetColumns, rng: QueueRange) -> Iterator[pa.RecordBatch]:
    """The rows of `rng` as Arrow batches (see the module doc)."""
    q, group = rng.queue, rng.group
    addrs = list(group.addrs)
    at = 0  # index in addrs: the master first
    pos, end = rng.start, rng.end
    batcher = _Batcher(spec, columns, q.broker)
    stalled_since: float | None = None
    failures: list[str] = []
    down: set[str] = set()  # addresses that failed: a suggestion does not lead back to them
    with ClusterClient(spec) as client:
        while pos < end:
            broker_id, addr = addrs[at]
            try:
                ans = client.pull(addr, q, pos, min(spec.pull_batch_size, end - pos))
            except TRANSPORT_ERRORS as e:
                failures.append(f"{addr}: {e}")
                down.add(addr)
                if len(failures) >= 3 * len(addrs):
                    raise NetworkReadError(
                        f"{q}: no broker of group {group.name} serves offset {pos}:"
                        f" {'; '.join(failures[-3:])}"
                    ) from None
                at = (at + 1) % len(addrs)
                NET_STATS["failovers"] += 1
                log.warning(
                    "rocketmq network source: pulling %s from %s failed (%s); trying %s",
                    q,
                    addr,
                    e,
                    addrs[at][1],
                )
                time.sleep(_RETRY_PAUSE_S)
                continue
            NET_STATS["pulls"] += 1
            failures.clear()
            down.discard(addr)
            progressed = False
            if ans.code == ResponseCode.SUCCESS and ans.body:
                spans = record_spans(ans.body)
                keep = [s for s in spans if pos <= queue_offset_of(ans.body, s[0]) < end]
                batcher.add(ans.body, keep)
                if len(batcher) >= spec.batch_rows:
                    yield batcher.flush(rng)
                nxt = max(ans.next_offset, pos + (1 if not spans else 0))
                progressed = nxt > pos
                pos = nxt
            elif ans.code == ResponseCode.PULL_OFFSET_MOVED and pos < ans.min_offset:
                pos = check_data_loss(spec, q, pos, min(ans.min_offset, end), "this read")
                progressed = True
            elif ans.code == ResponseCode.PULL_RETRY_IMMEDIATELY and ans.next_offset > pos:
                pos = ans.next_offset
                progressed = True
            if ans.suggest != broker_id:
                for i, (bid, a) in enumerate(addrs):
                    if bid == ans.suggest and a not in down:
                        at = i
                        break
                else:
                    if broker_id != MASTER_ID and not progressed and addrs[0][1] not in down:
                        at = 0  # back to the master when the slave has nothing to give
            if progressed:
                stalled_since = None
                continue
            now = time.monotonic()
            if stalled_since is None:
                stalled_since = now
            elif (now - stalled_since) * 1000 > spec.pull_timeout_ms:
                raise NetworkReadError(
                    f"{q}: offsets [{pos}, {end}) were planned but broker {addr} (id {broker_id}) does not"
                    f" serve them (answer {ans.code} {ans.remark}, its offsets [{ans.min_offset},"
                    f" {ans.max_offset})) after {spec.pull_timeout_ms} ms (option pullTimeoutMs)"
                )
            time.sleep(_RETRY_PAUSE_S)
    if len(batcher):
        yield batcher.flush(rng)
