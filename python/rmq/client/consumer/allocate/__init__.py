"""Queue allocation strategies, one per module behind :class:`AllocateMessageQueueStrategy`."""

from rmq.client.consumer.allocate.averagely import AllocateMessageQueueAveragely
from rmq.client.consumer.allocate.base import AllocateMessageQueueStrategy
from rmq.client.consumer.allocate.by_circle import AllocateMessageQueueAveragelyByCircle
from rmq.client.consumer.allocate.consistent_hash import AllocateMessageQueueConsistentHash

__all__ = [
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
]
