"""Producers: :class:`Producer`, queue selectors, latency fault tolerance, send results."""

from rmq.client.producer.fault import LatencyFaultTolerance, MQFaultStrategy
from rmq.client.producer.producer import Producer, validate_message
from rmq.client.producer.selector import (
    MessageQueueSelector,
    SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
)
from rmq.client.producer.transaction import (
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)
from rmq.client.results import SendResult, SendStatus

__all__ = [
    "LatencyFaultTolerance",
    "LocalTransactionState",
    "MQFaultStrategy",
    "MessageQueueSelector",
    "Producer",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SendResult",
    "SendStatus",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "validate_message",
]
