"""What POP puts on the wire and in the revive topic, in RocketMQ 5.x's formats.

* Request and response codes of POP (5.x's ``RequestCode`` / ``ResponseCode``; ``POLLING_FULL`` is 209,
  the number 4.x gave ``UPDATE_AND_CREATE_ACL_CONFIG_FAILED``, so they are plain ints here).
* The receipt handle ("extraInfo", the ``POP_CK`` property): ``ckQueueOffset popTime invisibleTime
  reviveQid retry brokerName queueId [msgQueueOffset]``, space separated; ``retry`` is ``0`` for the
  topic itself, ``1`` for ``%RETRY%<group>_<topic>`` and ``2`` for ``%RETRY%<group>+<topic>``.
* The response headers' ``startOffsetInfo``, ``msgOffsetInfo`` and ``orderCountInfo`` strings.
* The revive topic's records: a checkpoint (tag ``ck``, a ``PopCheckPoint`` as JSON), an ack (tag
  ``ack``, ``AckMsg``) and a batch ack (tag ``bAck``, ``BatchAckMsg``), under 5.x's short JSON names.
* BATCH_ACK_MESSAGE's body (``BatchAckMessageRequestBody``; the ack bits are a ``java.util.BitSet``'s
  ``toByteArray()`` in base64, as fastjson writes a ``byte[]``).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from rmq.common import codes, fastjson

__all__ = [
    "ACK_MESSAGE",
    "ACK_TAG",
    "BATCH_ACK_MESSAGE",
    "BATCH_ACK_TAG",
    "CHANGE_MESSAGE_INVISIBLETIME",
    "CK_TAG",
    "INVALID_PARAMETER",
    "ORDER_REVIVE_QUEUE",
    "POLLING_FULL",
    "POLLING_TIMEOUT",
    "POP_MESSAGE",
    "AckRecord",
    "BatchAck",
    "CheckPoint",
    "ExtraInfo",
    "ExtraInfoError",
    "bitset_from_bytes",
    "bitset_to_bytes",
    "decode_batch_ack_body",
    "offset_info",
    "pop_retry_topic",
    "real_topic",
    "retry_mark",
    "revive_topic",
]

POP_MESSAGE = codes.POP_MESSAGE
ACK_MESSAGE = codes.ACK_MESSAGE
CHANGE_MESSAGE_INVISIBLETIME = codes.CHANGE_MESSAGE_INVISIBLETIME
BATCH_ACK_MESSAGE = codes.BATCH_ACK_MESSAGE
INVALID_PARAMETER = codes.INVALID_PARAMETER
POLLING_FULL = codes.POLLING_FULL
POLLING_TIMEOUT = codes.POLLING_TIMEOUT

ORDER_REVIVE_QUEUE = 999
"""The reviveQid of an orderly pop's receipt handle (``KeyBuilder.POP_ORDER_REVIVE_QUEUE``): no checkpoint."""

CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
REVIVE_TOPIC_PREFIX = codes.SYSTEM_TOPIC_PREFIX + "REVIVE_LOG_"
FIRST_POP_TIME = "1ST_POP_TIME"
POP_CK = "POP_CK"

_SEP = " "


def revive_topic(cluster: str) -> str:
    """``rmq_sys_REVIVE_LOG_<cluster>``: the checkpoints and acks of the cluster's POP consumers."""
    return REVIVE_TOPIC_PREFIX + cluster


def pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """The retry topic of a POP group on ``topic``: ``%RETRY%<group>_<topic>`` (5.x's default, V1) or,
    with ``enableRetryTopicV2``, ``%RETRY%<group>+<topic>``."""
    return f"{codes.RETRY_GROUP_TOPIC_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def _is_retry_v2(topic: str) -> bool:
    return topic.startswith(codes.RETRY_GROUP_TOPIC_PREFIX) and "+" in topic


def retry_mark(topic: str) -> str:
    """``0``, ``1`` or ``2``: what the receipt handle and the offset infos say about ``topic``."""
    if _is_retry_v2(topic):
        return "2"
    if topic.startswith(codes.RETRY_GROUP_TOPIC_PREFIX):
        return "1"
    return "0"


def real_topic(topic: str, group: str, mark: str) -> str:
    """The topic a receipt handle's (or batch ack's) ``retry`` mark names."""
    if mark == "0":
        return topic
    if mark == "1":
        return pop_retry_topic(topic, group)
    if mark == "2":
        return pop_retry_topic(topic, group, v2=True)
    raise ExtraInfoError(f"retry mark {mark!r} is not 0, 1 or 2")


def offset_info(topic: str, queue_id: int, value: str) -> str:
    """One ``;``-separated entry of startOffsetInfo / msgOffsetInfo / orderCountInfo."""
    return f"{retry_mark(topic)}{_SEP}{queue_id}{_SEP}{value}"


class ExtraInfoError(ValueError):
    """A receipt handle (extraInfo) that does not parse."""


@dataclass(frozen=True)
class ExtraInfo:
    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    msg_queue_offset: int | None = None

    @classmethod
    def parse(cls, text: str | None) -> ExtraInfo:
        if not text:
            raise ExtraInfoError("extraInfo is missing")
        parts = text.split(_SEP)
        if len(parts) < 7:
            raise ExtraInfoError(f"extraInfo {text!r} has {len(parts)} fields, not 7 or 8")
        try:
            return cls(
                int(parts[0]),
                int(parts[1]),
                int(parts[2]),
                int(parts[3]),
                parts[4],
                parts[5],
                int(parts[6]),
                int(parts[7]) if len(parts) > 7 else None,
            )
        except ValueError:
            raise ExtraInfoError(f"extraInfo {text!r} has a field that is not a number") from None

    def __str__(self) -> str:
        head = (
            f"{self.ck_queue_offset}{_SEP}{self.pop_time}{_SEP}{self.invisible_time}{_SEP}{self.revive_qid}"
            f"{_SEP}{self.retry}{_SEP}{self.broker_name}{_SEP}{self.queue_id}"
        )
        return head if self.msg_queue_offset is None else f"{head}{_SEP}{self.msg_queue_offset}"

    @property
    def is_order(self) -> bool:
        return self.revive_qid == ORDER_REVIVE_QUEUE


@dataclass
class CheckPoint:
    """``PopCheckPoint``: the messages one pop took from one queue, and when they become visible again."""

    topic: str
    queue_id: int
    cid: str
    start_offset: int
    pop_time: int
    invisible_time: int
    diffs: list[int] = field(default_factory=list)
    broker_name: str = ""
    revive_offset: int = 0

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    def offsets(self) -> list[int]:
        return [self.start_offset + d for d in self.diffs]

    def key(self) -> tuple[str, int, int, str, int]:
        return (self.topic, self.queue_id, self.start_offset, self.cid, self.pop_time)

    def unique_id(self) -> str:
        return (
            f"{self.topic}@{self.queue_id}@{self.start_offset}@{self.cid}@{self.pop_time}"
            f"@{self.broker_name}@{CK_TAG}"
        )

    def to_json(self) -> bytes:
        return fastjson.dumps(
            {
                "bm": 0,
                "bn": self.broker_name,
                "c": self.cid,
                "d": self.diffs,
                "it": self.invisible_time,
                "n": len(self.diffs),
                "pt": self.pop_time,
                "q": self.queue_id,
                "ro": self.revive_offset,
                "so": self.start_offset,
                "t": self.topic,
            }
        )

    @classmethod
    def from_json(cls, data: bytes) -> CheckPoint:
        d = _json_object(data, "checkpoint")
        start = int(d["so"])
        diffs = d.get("d")
        if diffs is None:  # a checkpoint of 5.x's older form: n messages from so on
            diffs = list(range(int(d.get("n") or 0)))
        return cls(
            str(d["t"]),
            int(d["q"]),
            str(d["c"]),
            start,
            int(d["pt"]),
            int(d["it"]),
            [int(x) for x in diffs],
            str(d.get("bn") or ""),
            int(d.get("ro") or 0),
        )


@dataclass
class AckRecord:
    """``AckMsg`` (one offset, ``ack_offsets`` of one) or ``BatchAckMsg`` (several) of a checkpoint."""

    topic: str
    queue_id: int
    consumer_group: str
    start_offset: int
    pop_time: int
    ack_offsets: list[int]
    broker_name: str = ""
    batch: bool = False

    def key(self) -> tuple[str, int, int, str, int]:
        return (self.topic, self.queue_id, self.start_offset, self.consumer_group, self.pop_time)

    @property
    def tag(self) -> str:
        return BATCH_ACK_TAG if self.batch else ACK_TAG

    def unique_id(self) -> str:
        if self.batch:
            offsets = "[" + ", ".join(str(o) for o in self.ack_offsets) + "]"
            return (
                f"{self.topic}@{self.queue_id}@{offsets}@{self.consumer_group}@{self.pop_time}"
                f"@{BATCH_ACK_TAG}"
            )
        return (
            f"{self.topic}@{self.queue_id}@{self.ack_offsets[0]}@{self.consumer_group}@{self.pop_time}"
            f"@{self.broker_name}@{ACK_TAG}"
        )

    def to_json(self) -> bytes:
        d: dict[str, Any] = {
            "bn": self.broker_name,
            "c": self.consumer_group,
            "pt": self.pop_time,
            "q": self.queue_id,
            "so": self.start_offset,
            "t": self.topic,
        }
        if self.batch:
            d["aol"] = self.ack_offsets
            d["ao"] = -1
        else:
            d["ao"] = self.ack_offsets[0]
        return fastjson.dumps(dict(sorted(d.items())))

    @classmethod
    def from_json(cls, data: bytes, batch: bool) -> AckRecord:
        d = _json_object(data, "ack")
        if batch:
            offsets = [int(x) for x in (d.get("aol") or d.get("ackOffsetList") or [])]
        else:
            offsets = [int(d["ao"] if "ao" in d else d["ackOffset"])]
        return cls(
            str(d.get("t", d.get("topic", ""))),
            int(d.get("q", d.get("queueId", 0))),
            str(d.get("c", d.get("consumerGroup", ""))),
            int(d.get("so", d.get("startOffset", 0))),
            int(d.get("pt", d.get("popTime", 0))),
            offsets,
            str(d.get("bn", d.get("brokerName", "")) or ""),
            batch,
        )


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        d = fastjson.loads(data)
    except ValueError as e:
        raise ValueError(f"{what} record is not JSON: {e}") from None
    if not isinstance(d, dict):
        raise ValueError(f"{what} record is not a JSON object")
    return d


def bitset_from_bytes(raw: bytes) -> list[int]:
    """The set bits of ``java.util.BitSet.valueOf(bytes)`` (little-endian bytes, bit 0 first)."""
    out = []
    for i, byte in enumerate(raw):
        for b in range(8):
            if byte >> b & 1:
                out.append(i * 8 + b)
    return out


def bitset_to_bytes(bits: list[int]) -> bytes:
    """``BitSet.toByteArray()`` of a set holding ``bits``."""
    if not bits:
        return b""
    out = bytearray(max(bits) // 8 + 1)
    for b in bits:
        out[b // 8] |= 1 << (b % 8)
    return bytes(out)


@dataclass
class BatchAck:
    """One entry of BATCH_ACK_MESSAGE's body: acks of one pop's messages of one queue."""

    consumer_group: str
    topic: str
    retry: str
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    bits: list[int]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BatchAck:
        def get(short: str, long: str, default: Any = None) -> Any:
            return d[short] if short in d else d.get(long, default)

        raw = get("b", "bitSet")
        if isinstance(raw, str):
            try:
                bits = bitset_from_bytes(base64.b64decode(raw, validate=True))
            except (binascii.Error, ValueError):
                raise ValueError(f"bitSet {raw!r} is not base64") from None
        elif isinstance(raw, list):  # a byte array written as numbers
            bits = bitset_from_bytes(bytes(int(x) & 0xFF for x in raw))
        else:
            bits = []
        group, topic = get("c", "consumerGroup"), get("t", "topic")
        if not group or not topic:
            raise ValueError("a batch ack without consumerGroup or topic")
        return cls(
            str(group),
            str(topic),
            str(get("r", "retry", "0") or "0"),
            int(get("so", "startOffset", 0)),
            int(get("q", "queueId", 0)),
            int(get("rq", "reviveQueueId", 0)),
            int(get("pt", "popTime", 0)),
            int(get("it", "invisibleTime", 0)),
            bits,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "b": base64.b64encode(bitset_to_bytes(self.bits)).decode(),
            "c": self.consumer_group,
            "it": self.invisible_time,
            "pt": self.pop_time,
            "q": self.queue_id,
            "r": self.retry,
            "rq": self.revive_queue_id,
            "so": self.start_offset,
            "t": self.topic,
        }


def decode_batch_ack_body(body: bytes | None) -> tuple[str, list[BatchAck]]:
    """BATCH_ACK_MESSAGE's body: (brokerName, acks). Raises ``ValueError`` saying what is wrong."""
    if not body:
        return "", []
    try:
        d = fastjson.loads(body)
    except ValueError as e:
        raise ValueError(f"batch ack body is not JSON: {e}") from None
    if not isinstance(d, dict):
        raise ValueError("batch ack body is not a JSON object")
    acks = d.get("acks") or []
    if not isinstance(acks, list):
        raise ValueError("batch ack body's acks is not a list")
    out = []
    for a in acks:
        if not isinstance(a, dict):
            raise ValueError("a batch ack is not a JSON object")
        out.append(BatchAck.from_dict(a))
    return str(d.get("brokerName") or ""), out
