"""Queue selectors for ordered sends (``CL/producer/selector/*.java``).

A selector is any callable ``(queues, message, arg) -> MessageQueue``. :class:`SelectMessageQueueByHash`
shards by a key exactly like the Java client (``abs(arg.hashCode() % n)``, Java hash codes for ``str`` and
``int``), so a Python and a Java producer put the same sharding key on the same queue.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol

from rmq.client.message import Message, MessageQueue
from rmq.common.java import java_string_hash

__all__ = ["MessageQueueSelector", "SelectMessageQueueByHash", "SelectMessageQueueByRandom", "java_hash_code"]


class MessageQueueSelector(Protocol):
    def __call__(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue: ...


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 0x100000000 if value & 0x80000000 else value


def java_hash_code(value: Any) -> int:
    """``Object.hashCode()`` of the Java value ``value`` stands for (String, Integer/Long, Boolean)."""
    if isinstance(value, str):
        return java_string_hash(value)
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return value
        v = value & 0xFFFFFFFFFFFFFFFF
        return _int32(v ^ (v >> 32))
    return _int32(hash(value))


class SelectMessageQueueByHash:
    def __call__(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return mqs[abs(java_hash_code(arg)) % len(mqs)]


class SelectMessageQueueByRandom:
    def __call__(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return mqs[random.randrange(len(mqs))]
