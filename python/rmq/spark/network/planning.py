"""Which offset ranges a network read covers (driver side): topics, queues, their bounds, start and end
offsets by option, data loss at planning time, and the split into Spark partitions.

One partition reads one MessageQueue range ``[start, end)``; a long range is cut into equal pieces until
there are ``minPartitions`` of them.
"""

from __future__ import annotations

import heapq
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from pyspark.sql.datasource import InputPartition

from rmq.spark.network.cluster import BrokerGroup, ClusterClient, DataLossError, NetworkReadError, QueueKey
from rmq.spark.network.options import NetworkSpec, OffsetSpec

__all__ = [
    "NET_STATS",
    "NetPartition",
    "QueueRange",
    "check_data_loss",
    "discover",
    "plan_batch",
    "queue_bounds",
    "resolve_offsets",
    "split_ranges",
]

log = logging.getLogger(__name__)

NET_STATS: dict[str, int] = {"pulls": 0, "rows": 0, "failovers": 0, "lost_offsets": 0, "lost_ranges": 0}
"""This process's counters: pull requests, rows produced, moves to another broker of a group, and offsets
skipped because retention deleted them (``failOnDataLoss=false``) and in how many ranges."""

_SYSTEM_PREFIXES = ("%RETRY%", "%DLQ%", "%LMQ%", "rmq_sys_", "RMQ_SYS_", "SCHEDULE_TOPIC_", "TBW102")


@dataclass(frozen=True)
class QueueRange:
    """Offsets ``[start, end)`` of one queue and the broker group that serves it."""

    queue: QueueKey
    group: BrokerGroup
    start: int
    end: int


class NetPartition(InputPartition):
    """One Spark partition: one queue range."""

    def __init__(self, rng: QueueRange) -> None:
        super().__init__(rng)
        self.range = rng


def _is_system(topic: str) -> bool:
    return (
        topic.startswith(_SYSTEM_PREFIXES) or topic.endswith("_REPLY_TOPIC") or topic == "OFFSET_MOVED_EVENT"
    )


def topics_of(client: ClusterClient, spec: NetworkSpec) -> list[str]:
    """The topics the spec names, or those of the cluster ``topicPattern`` matches whole."""
    if spec.topics is not None:
        return list(spec.topics)
    pattern = re.compile(spec.topic_pattern or "")
    return [t for t in client.topic_list() if not _is_system(t) and pattern.fullmatch(t)]


def discover(client: ClusterClient, spec: NetworkSpec) -> dict[QueueKey, BrokerGroup]:
    """Every readable queue of the spec's topics, with its broker group."""
    out: dict[QueueKey, BrokerGroup] = {}
    for topic in topics_of(client, spec):
        out.update(client.queues(topic))
    return out


def queue_bounds(
    client: ClusterClient, queues: Mapping[QueueKey, BrokerGroup]
) -> dict[QueueKey, tuple[int, int]]:
    """``(min offset, max offset)`` of each queue (max: the next offset to be written)."""
    return {q: (client.min_offset(g, q), client.max_offset(g, q)) for q, g in sorted(queues.items())}


def _named(
    spec_offsets: OffsetSpec, option: str, queues: Mapping[QueueKey, BrokerGroup]
) -> dict[QueueKey, int]:
    if isinstance(spec_offsets, str):
        return {}
    out: dict[QueueKey, int] = {}
    known_topics = {q.topic for q in queues}
    for topic, brokers in spec_offsets.items():
        if topic not in known_topics:
            raise ValueError(f"option {option} names topic {topic!r}, which this read does not cover")
        for broker, qs in brokers.items():
            for qid, off in qs.items():
                q = QueueKey(topic, broker, qid)
                if q not in queues:
                    raise ValueError(f"option {option} names {q}, which the route of {topic} does not list")
                out[q] = off
    return out


def resolve_offsets(
    client: ClusterClient,
    spec_offsets: OffsetSpec,
    timestamp: int | None,
    option: str,
    queues: Mapping[QueueKey, BrokerGroup],
    bounds: Mapping[QueueKey, tuple[int, int]],
    default: str,
) -> dict[QueueKey, int]:
    """Each queue's offset by a ``startingOffsets``-like option (or a timestamp, which wins); queues the
    JSON does not name take `default` (``earliest`` or ``latest``)."""
    if timestamp is not None:
        return {q: client.search_offset(g, q, timestamp) for q, g in sorted(queues.items())}
    named = _named(spec_offsets, option, queues)
    whole = spec_offsets if isinstance(spec_offsets, str) else default
    out: dict[QueueKey, int] = {}
    for q in sorted(queues):
        lo, hi = bounds[q]
        off = named.get(q, -2 if whole == "earliest" else -1)
        out[q] = lo if off == -2 else hi if off == -1 else off
    return out


def check_data_loss(spec: NetworkSpec, q: QueueKey, start: int, min_offset: int, when: str) -> int:
    """The offset to read `q` from when the queue's first kept offset is `min_offset`: `start` itself, or
    (``failOnDataLoss=false``) `min_offset` when retention deleted ``[start, min_offset)``, logged and
    counted; with ``failOnDataLoss=true`` that is a :class:`DataLossError`."""
    if start >= min_offset:
        return start
    what = (
        f"{q}: offsets [{start}, {min_offset}) were deleted by retention before {when} read them"
        f" ({min_offset - start} messages)"
    )
    if spec.fail_on_data_loss:
        raise DataLossError(f"{what}; option failOnDataLoss=false skips them")
    NET_STATS["lost_offsets"] += min_offset - start
    NET_STATS["lost_ranges"] += 1
    log.warning("rocketmq network source: %s; skipped (failOnDataLoss=false)", what)
    return min_offset


def split_ranges(ranges: Iterable[QueueRange], min_partitions: int | None) -> list[QueueRange]:
    """`ranges` without empty ones, the longest cut in halves until there are `min_partitions`."""
    out = [r for r in ranges if r.end > r.start]
    if not min_partitions or len(out) >= min_partitions:
        return out
    heap = [(-(r.end - r.start), i, r) for i, r in enumerate(out)]
    heapq.heapify(heap)
    seq = len(heap)
    while len(heap) < min_partitions:
        size, _, r = heapq.heappop(heap)
        if -size < 2:
            heapq.heappush(heap, (size, seq, r))
            break
        mid = r.start + (r.end - r.start) // 2
        for piece in (replace(r, end=mid), replace(r, start=mid)):
            seq += 1
            heapq.heappush(heap, (-(piece.end - piece.start), seq, piece))
    return sorted((r for _, _, r in heap), key=lambda r: (r.queue, r.start))


def plan_batch(client: ClusterClient, spec: NetworkSpec) -> list[QueueRange]:
    """The ranges of a batch read, from the options' start to their end."""
    queues = discover(client, spec)
    if not queues:
        raise NetworkReadError(f"no readable queue in {spec.describe()}")
    bounds = queue_bounds(client, queues)
    starts = resolve_offsets(
        client, spec.starting, spec.starting_timestamp, "startingOffsets", queues, bounds, "earliest"
    )
    ends = resolve_offsets(
        client, spec.ending, spec.ending_timestamp, "endingOffsets", queues, bounds, "latest"
    )
    ranges = []
    for q, g in sorted(queues.items()):
        lo, hi = bounds[q]
        end = min(ends[q], hi)
        start = starts[q]
        if start < end:
            start = check_data_loss(spec, q, start, lo, "this batch")
        ranges.append(QueueRange(q, g, start, end))
    return split_ranges(ranges, spec.min_partitions)
