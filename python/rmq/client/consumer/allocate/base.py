"""The allocation-strategy protocol and the argument checks every strategy shares.

``allocate(consumer_group, current_cid, mq_all, cid_all)`` gets the topic's queues sorted by
(topic, broker name, queue id) and the group's client ids sorted; it returns the queues ``current_cid``
consumes. A client id missing from ``cid_all`` gets nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from rmq.client.message import MessageQueue

__all__ = ["AllocateMessageQueueStrategy", "check_allocate_args"]

log = logging.getLogger(__name__)


@runtime_checkable
class AllocateMessageQueueStrategy(Protocol):
    @property
    def name(self) -> str: ...

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]: ...


def check_allocate_args(
    consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> bool:
    """``AbstractAllocateMessageQueueStrategy.check``: raise on empty inputs; ``False`` if not a member."""
    if not current_cid:
        raise ValueError("currentCID is empty")
    if not mq_all:
        raise ValueError("mqAll is null or mqAll empty")
    if not cid_all:
        raise ValueError("cidAll is null or cidAll empty")
    if current_cid not in cid_all:
        log.info(
            "[BUG] ConsumerGroup: %s The consumerId: %s not in cidAll: %s",
            consumer_group,
            current_cid,
            cid_all,
        )
        return False
    return True
