"""POP over Remoting as Apache 5.x speaks it: request codes, and the receipt handle ("extraInfo").

POP_MESSAGE (200050) answers the messages with ``popTime``, ``invisibleTime``, ``reviveQid`` and, per queue,
``startOffsetInfo`` / ``msgOffsetInfo`` (``<retry> <queueId> <offset>[,<offset>...]`` joined by ``;``, where
``<retry>`` is 0 for the topic, 1 for a ``%RETRY%<group>_<topic>`` and 2 for a ``%RETRY%<group>+<topic>``).
A message's handle is Apache's proxy ``ReceiptHandle``: the broker's ``ExtraInfoUtil.buildExtraInfo``
(``ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId msgQueueOffset``, space-separated)
followed by the message's CommitLog offset (what a forward to the dead-letter queue needs). ACK_MESSAGE
(200051) and CHANGE_MESSAGE_INVISIBLETIME (200053) take it back as ``extraInfo`` (the broker reads the first
eight fields) with the queue and offset it names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rmq.common.codes import RETRY_GROUP_TOPIC_PREFIX

POLLING_FULL: Final = 209
POLLING_TIMEOUT: Final = 210

NORMAL_TOPIC: Final = "0"
RETRY_TOPIC: Final = "1"
RETRY_TOPIC_V2: Final = "2"


def retry_mark(topic: str) -> str:
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_TOPIC_V2 if "+" in topic else RETRY_TOPIC
    return NORMAL_TOPIC


def real_topic(topic: str, group: str, mark: str) -> str:
    """The topic an extraInfo's ``retry`` mark points at (``ExtraInfoUtil.getRealTopic``)."""
    if mark == RETRY_TOPIC:
        return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"
    if mark == RETRY_TOPIC_V2:
        return f"{RETRY_GROUP_TOPIC_PREFIX}{group}+{topic}"
    return topic


def parse_offset_info(text: str | None) -> dict[str, list[int]]:
    """``startOffsetInfo`` / ``msgOffsetInfo`` / ``orderCountInfo`` as ``{"<retry>@<queueId>": [values]}``."""
    out: dict[str, list[int]] = {}
    if not text:
        return out
    for one in text.split(";"):
        parts = one.split(" ")
        if len(parts) != 3:
            raise ValueError(f"bad offset info entry {one!r} in {text!r}")
        out[f"{parts[0]}@{parts[1]}"] = [int(v) for v in parts[2].split(",") if v]
    return out


def order_counts(text: str | None) -> dict[int, int]:
    """An orderly pop's ``orderCountInfo`` as {queue offset: deliveries before}: its per-message entries
    (``<retry> qo<queueId>%<offset> <count>``); the queue-level entry is left out."""
    out: dict[int, int] = {}
    for key, values in parse_offset_info(text).items():
        _, _, where = key.partition("@")
        if where.startswith("qo") and "%" in where and values:
            out[int(where.rpartition("%")[2])] = values[0]
    return out


@dataclass(frozen=True, slots=True)
class Handle:
    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int = -1
    """-1: not known (a handle of eight fields)."""

    def __str__(self) -> str:
        text = (
            f"{self.ck_queue_offset} {self.pop_time} {self.invisible_time} {self.revive_qid} {self.retry} "
            f"{self.broker_name} {self.queue_id} {self.queue_offset}"
        )
        return text if self.commit_log_offset < 0 else f"{text} {self.commit_log_offset}"

    @classmethod
    def parse(cls, text: str) -> Handle:
        parts = text.split(" ")
        if len(parts) < 8:
            raise ValueError(f"receipt handle {text!r} has {len(parts)} fields, not 8")
        return cls(
            int(parts[0]),
            int(parts[1]),
            int(parts[2]),
            int(parts[3]),
            parts[4],
            parts[5],
            int(parts[6]),
            int(parts[7]),
            int(parts[8]) if len(parts) > 8 else -1,
        )
