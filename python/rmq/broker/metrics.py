"""What the broker's Python path counts for its Prometheus metrics: messages and bytes in (per topic and
message type, with their sizes) and out (per topic and consumer group), the offset each group last pulled up
to (for the inflight and ready figures), and the request latency per code (kept by the dispatcher). Plain
integers in dicts, updated on the event loop; :mod:`rmq.broker.metrics_collector` reads them (and the network
thread's own counters for the sends it answers) when scraped.
"""

from __future__ import annotations

import re
from typing import Final

from rmq.common.codes import MessageConst
from rmq.remoting.latency import RpcLatency, bucket_index

__all__ = ["SIZE_BOUNDS", "BrokerMetrics", "message_type", "parse_metrics_label"]

SIZE_BOUNDS: Final = (1 << 10, 4 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20)
"""``rocketmq_message_size`` bucket bounds in bytes (RocketMQ 5.x's: 1 KiB, 4 KiB, 512 KiB, 1, 2, 4 MiB), then
one for the larger messages."""

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_OWN_LABELS = frozenset({"cluster", "node_type", "node_id", "le"})
_TRAN = MessageConst.TRANSACTION_PREPARED + "\x01true"
_DELAY = MessageConst.DELAY_TIME_LEVEL + "\x01"
_TIMER = "TIMER_"
_SHARDING = "__SHARDINGKEY\x01"


def message_type(props: str) -> str:
    """The ``message_type`` label of a message with these properties, as RocketMQ 5.x tells them apart:
    transaction (a half message), delay (a delay level or a timer property), fifo (a sharding key), normal."""
    if not props:
        return "normal"
    if _TRAN in props:
        return "transaction"
    if _DELAY in props or _TIMER in props:
        return "delay"
    if _SHARDING in props:
        return "fifo"
    return "normal"


class BrokerMetrics:
    def __init__(self) -> None:
        self.messages_in: dict[tuple[str, str], list[int]] = {}
        """(topic, message type) -> [messages, bytes, messages per size bucket...] (Python-path sends)."""
        self.messages_out: dict[tuple[str, str], list[int]] = {}
        """(topic, consumer group) -> [messages, bytes] pulled."""
        self.to_dlq: dict[tuple[str, str], int] = {}
        """(topic, consumer group) -> messages moved to the group's dead letter queue."""
        self.pulled: dict[tuple[str, str, int], int] = {}
        """(consumer group, topic, queue id) -> where the group's last pull that found messages ended."""
        self.rpc = RpcLatency()

    def put(self, topic: str, mtype: str, sizes: list[int]) -> None:
        """Count stored messages of one send (their CommitLog record sizes)."""
        key = (topic, mtype)
        row = self.messages_in.get(key)
        if row is None:
            row = self.messages_in[key] = [0] * (len(SIZE_BOUNDS) + 3)
        row[0] += len(sizes)
        for size in sizes:
            row[1] += size
            row[2 + bucket_index(SIZE_BOUNDS, size)] += 1

    def dead(self, topic: str, group: str) -> None:
        """Count a message of ``topic`` that ``group`` gave up on (stored in its ``%DLQ%`` topic)."""
        key = (topic, group)
        self.to_dlq[key] = self.to_dlq.get(key, 0) + 1

    def got(self, topic: str, group: str, queue_id: int, count: int, nbytes: int, next_offset: int) -> None:
        """Count a pull that found ``count`` messages (``nbytes`` of records) and ends at ``next_offset``."""
        key = (topic, group)
        row = self.messages_out.get(key)
        if row is None:
            row = self.messages_out[key] = [0, 0]
        row[0] += count
        row[1] += nbytes
        self.pulled[(group, topic, queue_id)] = next_offset


def parse_metrics_label(text: str) -> dict[str, str]:
    """``metricsLabel``: extra labels as ``key:value,key:value`` (5.x's syntax); a malformed pair is an
    error."""
    out: dict[str, str] = {}
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition(":")
        key = key.strip()
        if not sep or ":" in value or _LABEL_NAME.fullmatch(key) is None:
            raise ValueError(f"metricsLabel: {item!r} is not key:value with a Prometheus label name as key")
        if key in _OWN_LABELS:
            raise ValueError(f"metricsLabel: {key!r} is a label the broker sets itself")
        out[key] = value.strip()
    return out
