"""AllocateMessageQueueConsistentHash: a hash ring of client ids with virtual nodes.

Same ring as Java's ``ConsistentHashRouter`` with its default ``MD5Hash`` (the first 4 digest bytes as an
unsigned number): virtual node ``"<cid>-<i>"`` for i < ``virtual_node_count`` (10); a queue, keyed by Java's
``MessageQueue.toString()``, belongs to the first virtual node at or after its hash, wrapping around.
Python and Java consumers of one group therefore agree on the assignment.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Sequence

from rmq.client.consumer.allocate.base import check_allocate_args
from rmq.client.message import MessageQueue

__all__ = ["AllocateMessageQueueConsistentHash", "md5_hash"]


def md5_hash(key: str) -> int:
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


class AllocateMessageQueueConsistentHash:
    name = "CONSISTENT_HASH"

    def __init__(self, virtual_node_count: int = 10, hash_function: Callable[[str], int] = md5_hash) -> None:
        if virtual_node_count < 0:
            raise ValueError(f"illegal virtualNodeCnt: {virtual_node_count}")
        self.virtual_node_count = virtual_node_count
        self.hash_function = hash_function

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not check_allocate_args(consumer_group, current_cid, mq_all, cid_all):
            return []
        ring: dict[int, str] = {}
        for cid in cid_all:  # later nodes overwrite equal hashes, like TreeMap.put
            for i in range(self.virtual_node_count):
                ring[self.hash_function(f"{cid}-{i}")] = cid
        if not ring:
            return []
        keys = sorted(ring)
        result = []
        for mq in mq_all:
            pos = bisect.bisect_left(keys, self.hash_function(str(mq)))
            owner = ring[keys[pos] if pos < len(keys) else keys[0]]
            if owner == current_cid:
                result.append(mq)
        return result
