"""Consumers: :class:`PushConsumer`, :class:`LitePullConsumer`, listeners, allocation, offset stores."""

from rmq.client.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
)
from rmq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from rmq.client.consumer.lite_pull import LitePullConsumer
from rmq.client.consumer.offset_store import LocalFileOffsetStore, ReadOffsetType, RemoteBrokerOffsetStore
from rmq.client.consumer.push import PushConsumer

__all__ = [
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "LitePullConsumer",
    "LocalFileOffsetStore",
    "PushConsumer",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
]
