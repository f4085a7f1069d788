"""Message listeners: what a push consumer calls, and what the call may answer.

A listener is a plain function or an ``async def``; plain functions run in the consumer's thread pool (they
may block), coroutines run on the event loop (they must not)::

    def on_messages(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        ...
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

A raised exception, or a result of ``None``, counts as RECONSUME_LATER (concurrently) /
SUSPEND_CURRENT_QUEUE_A_MOMENT (orderly), like the Java client. Orderly listeners may also answer with the
concurrent statuses (CONSUME_SUCCESS = SUCCESS, RECONSUME_LATER = SUSPEND_CURRENT_QUEUE_A_MOMENT).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import TypeAlias

from rmq.client.message import MessageExt, MessageQueue

__all__ = [
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "MessageListenerConcurrently",
    "MessageListenerOrderly",
]


class ConsumeConcurrentlyStatus(Enum):
    CONSUME_SUCCESS = 0
    RECONSUME_LATER = 1


class ConsumeOrderlyStatus(Enum):
    SUCCESS = 0
    SUSPEND_CURRENT_QUEUE_A_MOMENT = 3


@dataclass
class ConsumeConcurrentlyContext:
    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    """0: the broker picks the delay (3 + reconsume times); > 0 a delay level; < 0 straight to the DLQ."""
    ack_index: int = 2**31 - 1
    """On CONSUME_SUCCESS, messages after this index of the batch are treated as failed."""


@dataclass
class ConsumeOrderlyContext:
    message_queue: MessageQueue
    auto_commit: bool = True
    suspend_current_queue_time_ms: int = -1
    """Overrides the consumer's ``suspend_current_queue_time_ms`` for this suspension when >= 0."""


ConcurrentlyResult: TypeAlias = ConsumeConcurrentlyStatus | ConsumeOrderlyStatus | None
OrderlyResult: TypeAlias = ConsumeOrderlyStatus | ConsumeConcurrentlyStatus | None

MessageListenerConcurrently: TypeAlias = Callable[
    [list[MessageExt], ConsumeConcurrentlyContext],
    ConcurrentlyResult | Awaitable[ConcurrentlyResult],
]
MessageListenerOrderly: TypeAlias = Callable[
    [list[MessageExt], ConsumeOrderlyContext],
    OrderlyResult | Awaitable[OrderlyResult],
]


def is_success(status: object) -> bool:
    return status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS or status is ConsumeOrderlyStatus.SUCCESS
