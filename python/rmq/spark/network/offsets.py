"""Per-queue offsets as Spark's checkpoint holds them: JSON ``{"topic": {"broker": {"queueId": offset}}}``.

The same shape as the ``startingOffsets`` / ``endingOffsets`` options, so an offset copied out of a
checkpoint or a progress report can start another query. Queue ids are strings in JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rmq.spark.network.cluster import QueueKey

__all__ = ["QueueOffsets", "from_json", "to_json"]

QueueOffsets = dict[QueueKey, int]


def to_json(offsets: Mapping[QueueKey, int]) -> dict[str, dict[str, dict[str, int]]]:
    """The checkpoint form, sorted by topic, broker and queue."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for q in sorted(offsets):
        out.setdefault(q.topic, {}).setdefault(q.broker, {})[str(q.queue_id)] = int(offsets[q])
    return out


def from_json(data: Mapping[str, Any]) -> QueueOffsets:
    """Offsets from the checkpoint form (a ValueError names what does not fit)."""
    out: QueueOffsets = {}
    for topic, brokers in data.items():
        if not isinstance(brokers, Mapping):
            raise ValueError(f"offsets of topic {topic!r} are not a broker -> queue map: {brokers!r}")
        for broker, queues in brokers.items():
            if not isinstance(queues, Mapping):
                raise ValueError(f"offsets of {topic}/{broker} are not a queue -> offset map: {queues!r}")
            for qid, off in queues.items():
                out[QueueKey(str(topic), str(broker), int(qid))] = int(off)
    return out
