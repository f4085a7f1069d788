"""``rocketmq_rpc_latency`` as a dispatcher keeps it: how long requests took to be answered, per request code,
response code and long polling, in RocketMQ 5.x's buckets. Plain integers in a dict on the event loop (no
Prometheus import here: clients use the dispatcher too); :mod:`rmq.common.metrics` exports it."""

from __future__ import annotations

from typing import Final, Generic, TypeVar

__all__ = ["LATENCY_BOUNDS_MS", "LatencyTable", "RpcLatency", "bucket_index"]

K = TypeVar("K")

LATENCY_BOUNDS_MS: Final = (1, 3, 5, 10, 100, 1000, 3000)
"""Bucket bounds in milliseconds (5.x's: 1, 3, 5, 10, 100 ms, 1, 3 s), then one for the slower answers."""


def bucket_index(bounds: tuple[int, ...], value: float) -> int:
    """The bucket of ``value``: the first bound it does not exceed, else ``len(bounds)``."""
    for i, bound in enumerate(bounds):
        if value <= bound:
            return i
    return len(bounds)


class LatencyTable(Generic[K]):
    """Per label key: counts per latency bucket (:data:`LATENCY_BOUNDS_MS`, then overflow) and the sum in
    ms. Written on one thread; :meth:`rows` copies, so another thread may read it."""

    def __init__(self) -> None:
        self.table: dict[K, list[float]] = {}

    def add(self, key: K, seconds: float) -> None:
        ms = seconds * 1000.0
        row = self.table.get(key)
        if row is None:
            row = self.table[key] = [0] * (len(LATENCY_BOUNDS_MS) + 2)
        row[bucket_index(LATENCY_BOUNDS_MS, ms)] += 1
        row[-1] += ms

    def rows(self) -> list[tuple[K, list[float]]]:
        return [(k, list(v)) for k, v in list(self.table.items())]


class RpcLatency(LatencyTable[tuple[int, int, bool]]):
    """``rocketmq_rpc_latency``: how long requests took to be answered, per request code, response code and
    whether the request was a long-polling one that waited (answered by a hold service)."""

    def record(self, code: int, response_code: int, seconds: float, long_polling: bool = False) -> None:
        self.add((code, response_code, long_polling), seconds)
