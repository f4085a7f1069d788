"""The network source's micro-batch reader: offsets per queue, in Spark's checkpoint.

An offset is ``{"topic": {"broker": {"queueId": offset}}}`` (``rmq.spark.network.offsets``): a micro-batch
reads each queue from its start offset to its end offset, so a batch replayed after a restart reads the
same messages, and a query restarted on its checkpoint goes on where it stopped.

* Each trigger lists the queues again: a queue that appears (a topic that gains queues or brokers, a new
  topic ``topicPattern`` matches) is read from its first offset.
* ``maxOffsetsPerTrigger`` shares its budget over the queues by their backlog; ``minOffsetsPerTrigger``
  holds a trigger back until that many offsets are new or ``maxTriggerDelay`` has passed since the last
  batch; Trigger.AvailableNow reads up to the offsets of when the query started, in batches as limited.
* ``failOnDataLoss``: a start offset retention has deleted is an error naming the queue and the offsets
  (or, ``false``, skipped, logged and counted in ``NET_STATS``).
* ``consumerGroup``: each committed batch's end offsets are sent to the brokers (UPDATE_CONSUMER_OFFSET).
* Progress: pyspark 4.3 gives Python sources no ``metrics`` hook, so ``StreamingQueryProgress.sources[i]``
  shows the per-queue ``startOffset`` / ``endOffset`` and, in ``latestOffset``, the queues' latest offsets
  plus ``"@offsetsBehindLatest": {"min", "avg", "max"}`` (per queue: latest minus this batch's end).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from rmq.spark.network.cluster import BrokerGroup, ClusterClient, NetworkReadError, QueueKey
from rmq.spark.network.offsets import QueueOffsets, from_json, to_json
from rmq.spark.network.options import NetworkSpec
from rmq.spark.network.planning import (
    NetPartition,
    QueueRange,
    check_data_loss,
    discover,
    queue_bounds,
    resolve_offsets,
    split_ranges,
)
from rmq.spark.network.reading import NetColumns
from rmq.spark.network.source import read_partition

__all__ = ["LAG_KEY", "NetworkStreamReader", "share_budget"]

log = logging.getLogger(__name__)

LAG_KEY = "@offsetsBehindLatest"
"""The key of the lag figures in a progress report's ``latestOffset`` (no topic name has an ``@``)."""


def share_budget(backlog: dict[QueueKey, int], budget: int) -> dict[QueueKey, int]:
    """How many offsets each queue may advance: `budget` shared by backlog, every queue with a backlog
    getting at least one while budget lasts (rounding down, the remainder to the largest backlogs)."""
    total = sum(backlog.values())
    if total <= budget:
        return dict(backlog)
    share = {q: budget * n // total for q, n in backlog.items()}
    left = budget - sum(share.values())
    for q in sorted(backlog, key=lambda q: -backlog[q]):
        if left <= 0:
            break
        if share[q] < backlog[q]:
            share[q] += 1
            left -= 1
    return share


class NetworkStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over per-queue offsets (see the module doc)."""

    def __init__(self, spec: NetworkSpec, schema: StructType) -> None:
        self.spec = spec
        self.columns = NetColumns(schema)
        self._cap: QueueOffsets | None = None
        self._last_end: QueueOffsets | None = None
        self._last_batch_at = time.monotonic()
        self._latest: QueueOffsets | None = None
        self._committed: QueueOffsets | None = None

    def _client(self) -> ClusterClient:
        return ClusterClient(self.spec)

    def initialOffset(self) -> dict:
        with self._client() as client:
            queues = discover(client, self.spec)
            if not queues:
                raise NetworkReadError(f"no readable queue in {self.spec.describe()}")
            bounds = queue_bounds(client, queues)
            starts = resolve_offsets(
                client,
                self.spec.starting,
                self.spec.starting_timestamp,
                "startingOffsets",
                queues,
                bounds,
                "earliest",
            )
        log.info("rocketmq network stream %s: starts at %s", self.spec.describe(), to_json(starts))
        return to_json(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.spec.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        with self._client() as client:
            queues = discover(client, self.spec)
            self._cap = {q: hi for q, (_lo, hi) in queue_bounds(client, queues).items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        # `start` is the end of the last batch Spark completed; Spark's own commit() of it comes only
        # when a next batch is planned, so a query with nothing new would leave the broker one behind.
        self._commit_group(begin)
        with self._client() as client:
            queues = discover(client, self.spec)
            bounds = queue_bounds(client, queues)
        latest: QueueOffsets = {}
        backlog: dict[QueueKey, int] = {}
        for q, (lo, hi) in bounds.items():
            top = hi if self._cap is None else min(hi, self._cap.get(q, begin.get(q, lo)))
            first = begin.get(q, lo)
            latest[q] = max(top, first)
            if top > first:
                backlog[q] = top - first
        end: QueueOffsets = dict(begin)
        for q in bounds:
            end.setdefault(q, bounds[q][0])
        total = sum(backlog.values())
        mn = self.spec.min_offsets_per_trigger
        waited_ms = (time.monotonic() - self._last_batch_at) * 1000
        self._latest = latest
        if self._cap is None and mn and total < mn and waited_ms < self.spec.max_trigger_delay_ms:
            self._last_end = begin
            return start
        if isinstance(limit, ReadMaxRows):
            backlog = share_budget(backlog, limit.max_rows)
        for q, n in backlog.items():
            end[q] = begin.get(q, bounds[q][0]) + n
        # A queue first seen here starts at its first offset (`partitions` asks the broker again).
        if total:
            self._last_batch_at = time.monotonic()
        self._last_end = end
        return to_json(end)

    def reportLatestOffset(self) -> dict | None:
        latest = self._latest
        if latest is None:
            return None
        out: dict[str, Any] = dict(to_json(latest))
        done = self._last_end or {}
        behind = [max(0, hi - done.get(q, hi)) for q, hi in latest.items()]
        if behind:
            out[LAG_KEY] = {"min": min(behind), "avg": sum(behind) / len(behind), "max": max(behind)}
        return out

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, stop = from_json(start), from_json(end)
        todo = {q: e for q, e in stop.items() if e > begin.get(q, 0)}
        if not todo:
            return []
        with self._client() as client:
            queues = discover(client, self.spec)
            ranges = []
            for q, e in sorted(todo.items()):
                group = queues.get(q)
                if group is None:
                    raise NetworkReadError(
                        f"{q}: the name server no longer lists it; offsets up to {e} unread"
                    )
                s = begin.get(q)
                lo = client.min_offset(group, q)
                if s is None:
                    s = lo  # a queue new in this batch: from its first offset
                else:
                    s = check_data_loss(self.spec, q, s, min(lo, e), "this stream")
                ranges.append(QueueRange(q, group, s, e))
        return [NetPartition(r) for r in split_ranges(ranges, self.spec.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return read_partition(self.spec, self.columns, partition)

    def commit(self, end: dict) -> None:
        """With ``consumerGroup``: the batch's end offsets to the brokers (a failure is logged: the
        checkpoint, not the broker, is what the query goes on from)."""
        self._commit_group(from_json(end))

    def _commit_group(self, offsets: QueueOffsets) -> None:
        if not self.spec.commit_group or offsets == self._committed:
            return
        with self._client() as client:
            groups: dict[QueueKey, BrokerGroup] = {}
            ok = True
            try:
                groups = discover(client, self.spec)
            except NetworkReadError as e:
                log.warning("rocketmq network stream: offsets not committed to consumerGroup: %s", e)
                return
            for q, off in sorted(offsets.items()):
                group = groups.get(q)
                if group is None:
                    continue
                try:
                    client.update_consumer_offset(group, q, off)
                except NetworkReadError as e:
                    ok = False
                    log.warning("rocketmq network stream: %s", e)
        if ok:
            self._committed = dict(offsets)
