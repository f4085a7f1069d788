"""Topic and group names: validation, system topics, retry / DLQ topics (REMOTING.md §7.1, §7.4).

The ``check_*`` functions return ``None`` for a valid name or the remark a 4.9.8 broker answers with
(``TopicValidator.validateTopic``), so a processor can do
``if (err := check_topic(t)) is not None: return create_response(req, ResponseCode.SYSTEM_ERROR, err)``.
"""

from __future__ import annotations

import re
from typing import Final

from rmq.common.codes import (
    DLQ_GROUP_TOPIC_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
)

__all__ = [
    "GROUP_MAX_LENGTH",
    "TOPIC_MAX_LENGTH",
    "check_group",
    "check_topic",
    "dlq_topic",
    "group_of_retry_topic",
    "is_dlq_topic",
    "is_not_allowed_send_topic",
    "is_retry_topic",
    "is_system_topic",
    "is_valid_name",
    "retry_topic",
]

TOPIC_MAX_LENGTH: Final = 127
GROUP_MAX_LENGTH: Final = 255

_VALID_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")


def is_valid_name(name: str) -> bool:
    """Whether ``name`` is non-empty and uses only ``[%|a-zA-Z0-9_-]`` (no length check)."""
    return _VALID_NAME.fullmatch(name) is not None


def check_topic(topic: str | None) -> str | None:
    """``None`` if ``topic`` is a valid topic name, else the broker's error remark."""
    if topic is None or not topic.strip():
        return "The specified topic is blank."
    if not is_valid_name(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def check_group(group: str | None) -> str | None:
    """``None`` if ``group`` is a valid group name, else an error text (the Java client's wording)."""
    if group is None or not group.strip():
        return "the specified group is blank"
    if not is_valid_name(group):
        return "the specified group contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(group) > GROUP_MAX_LENGTH:
        return "the specified group is longer than group max length 255."
    return None


def is_system_topic(topic: str) -> bool:
    """``TopicValidator.isSystemTopic``: a reserved name or the ``rmq_sys_`` prefix."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    """Topics clients may not send to (schedule, transaction, self-test, offset-moved topics)."""
    return topic in NOT_ALLOWED_SEND_TOPICS


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def group_of_retry_topic(topic: str) -> str | None:
    """The consumer group of a ``%RETRY%<group>`` topic, or ``None`` for any other topic."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
    return None
