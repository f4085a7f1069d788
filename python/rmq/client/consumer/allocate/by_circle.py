"""AllocateMessageQueueAveragelyByCircle: client i of K takes queues i, i + K, i + 2K, ..."""

from __future__ import annotations

from collections.abc import Sequence

from rmq.client.consumer.allocate.base import check_allocate_args
from rmq.client.message import MessageQueue

__all__ = ["AllocateMessageQueueAveragelyByCircle"]


class AllocateMessageQueueAveragelyByCircle:
    name = "AVG_BY_CIRCLE"

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not check_allocate_args(consumer_group, current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        return list(mq_all[index :: len(cid_all)])
