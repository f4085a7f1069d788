"""AllocateMessageQueueAveragely, the default strategy (REMOTING.md §7.9), exactly Java's arithmetic.

N queues over K clients, r = N mod K, client i: ``size = 1`` if N <= K, else ``N // K + (1 if i < r)``;
``start = i * size`` if i < r else ``i * size + r``; it takes ``min(size, N - start)`` queues from ``start``.
N = 8, K = 3 gives [0..2], [3..5], [6..7]; with N < K the clients ``i >= N`` get nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from rmq.client.consumer.allocate.base import check_allocate_args
from rmq.client.message import MessageQueue

__all__ = ["AllocateMessageQueueAveragely"]


class AllocateMessageQueueAveragely:
    name = "AVG"

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not check_allocate_args(consumer_group, current_cid, mq_all, cid_all):
            return []
        n, k = len(mq_all), len(cid_all)
        index = list(cid_all).index(current_cid)
        mod = n % k
        if n <= k:
            size = 1
        elif mod > 0 and index < mod:
            size = n // k + 1
        else:
            size = n // k
        start = index * size if mod > 0 and index < mod else index * size + mod
        return [mq_all[(start + i) % n] for i in range(min(size, n - start))]
