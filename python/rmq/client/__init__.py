"""rmq.client: an asyncio RocketMQ 4.x client (producer, push consumer, lite pull consumer).

Asynchronous API (this package)::

    from rmq.client import Message, Producer
    async with Producer("pg", namesrv_addr="127.0.0.1:9876") as producer:
        result = await producer.send(Message("TopicA", b"hello", tags="TagA"))

Producers and consumers also look stored messages up (by offset id, key, unique key: :mod:`rmq.client.admin`).
The admin API (topics, groups, offsets, brokers: what ``rmqadmin`` does) is :class:`Admin`
(:mod:`rmq.client.admin_ext`).
Synchronous facade for scripts: :mod:`rmq.client.sync` (same class names, no ``await``).
The client never imports the broker; it speaks the RocketMQ remoting protocol only.
"""

import typing

from rmq.common.lazy import lazy_exports

if typing.TYPE_CHECKING:
    from rmq.client.admin_ext import Admin, AdminNotFoundError
    from rmq.client.config import ClientConfig
    from rmq.client.consumer import (
        AllocateMessageQueueAveragely,
        AllocateMessageQueueAveragelyByCircle,
        AllocateMessageQueueConsistentHash,
        AllocateMessageQueueStrategy,
        ConsumeConcurrentlyContext,
        ConsumeConcurrentlyStatus,
        ConsumeOrderlyContext,
        ConsumeOrderlyStatus,
        LitePullConsumer,
        PushConsumer,
    )
    from rmq.client.errors import (
        ClientStateError,
        MessageIllegalError,
        MQBrokerError,
        MQClientError,
        NoMessageError,
        NoRouteError,
        RequestTimeoutError,
    )
    from rmq.client.heartbeat import ConsumeFromWhere, ExpressionType, MessageModel, MessageSelector
    from rmq.client.message import Message, MessageExt, MessageQueue
    from rmq.client.producer import (
        LocalTransactionState,
        MessageQueueSelector,
        Producer,
        SelectMessageQueueByHash,
        SelectMessageQueueByRandom,
        SendResult,
        SendStatus,
        TransactionListener,
        TransactionProducer,
        TransactionSendResult,
    )
    from rmq.client.results import QueryResult

# Imported on first use (rmq.common.lazy): importing one client module need not import them all.
_WHERE = {
    "Admin": "rmq.client.admin_ext",
    "AdminNotFoundError": "rmq.client.admin_ext",
    "ClientConfig": "rmq.client.config",
    "AllocateMessageQueueAveragely": "rmq.client.consumer",
    "AllocateMessageQueueAveragelyByCircle": "rmq.client.consumer",
    "AllocateMessageQueueConsistentHash": "rmq.client.consumer",
    "AllocateMessageQueueStrategy": "rmq.client.consumer",
    "ConsumeConcurrentlyContext": "rmq.client.consumer",
    "ConsumeConcurrentlyStatus": "rmq.client.consumer",
    "ConsumeOrderlyContext": "rmq.client.consumer",
    "ConsumeOrderlyStatus": "rmq.client.consumer",
    "LitePullConsumer": "rmq.client.consumer",
    "PushConsumer": "rmq.client.consumer",
    "ClientStateError": "rmq.client.errors",
    "MessageIllegalError": "rmq.client.errors",
    "MQBrokerError": "rmq.client.errors",
    "MQClientError": "rmq.client.errors",
    "NoMessageError": "rmq.client.errors",
    "NoRouteError": "rmq.client.errors",
    "RequestTimeoutError": "rmq.client.errors",
    "ConsumeFromWhere": "rmq.client.heartbeat",
    "ExpressionType": "rmq.client.heartbeat",
    "MessageModel": "rmq.client.heartbeat",
    "MessageSelector": "rmq.client.heartbeat",
    "Message": "rmq.client.message",
    "MessageExt": "rmq.client.message",
    "MessageQueue": "rmq.client.message",
    "LocalTransactionState": "rmq.client.producer",
    "MessageQueueSelector": "rmq.client.producer",
    "Producer": "rmq.client.producer",
    "SelectMessageQueueByHash": "rmq.client.producer",
    "SelectMessageQueueByRandom": "rmq.client.producer",
    "SendResult": "rmq.client.producer",
    "SendStatus": "rmq.client.producer",
    "TransactionListener": "rmq.client.producer",
    "TransactionProducer": "rmq.client.producer",
    "TransactionSendResult": "rmq.client.producer",
    "QueryResult": "rmq.client.results",
}
__getattr__ = lazy_exports("rmq.client", globals(), _WHERE)


__all__ = [
    "Admin",
    "AdminNotFoundError",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "ClientConfig",
    "ClientStateError",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ExpressionType",
    "LitePullConsumer",
    "LocalTransactionState",
    "MQBrokerError",
    "MQClientError",
    "Message",
    "MessageExt",
    "MessageIllegalError",
    "MessageModel",
    "MessageQueue",
    "MessageQueueSelector",
    "MessageSelector",
    "NoMessageError",
    "NoRouteError",
    "Producer",
    "PushConsumer",
    "QueryResult",
    "RequestTimeoutError",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SendResult",
    "SendStatus",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
]
