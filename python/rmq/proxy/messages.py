"""5.x ``Message`` <-> RocketMQ's stored message (Apache's ``SendMessageActivity`` / ``GrpcConverter``).

To the broker: the properties a 5.x message becomes — user properties (system names refused), ``TAGS``,
``KEYS`` (space-joined), ``UNIQ_KEY`` = the client's message id, ``TRAN_MSG`` (+ the orphaned-transaction
recovery time as ``CHECK_IMMUNITY_TIME_IN_SECONDS``) for a transactional message, ``TIMER_DELIVER_MS`` for a
delivery timestamp, ``__SHARDINGKEY`` = the message group, ``PGROUP`` = the topic (Apache's proxy uses the
topic as the producer group, so a transaction check finds the producers of the topic), ``TRACE_CONTEXT``,
``__BORNHOST`` and ``BORN_TIMESTAMP``. From the broker: the same read back into ``SystemProperties``, with
the body's CRC32 digest the clients verify.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from rmq.client.message import RESERVED_PROPERTIES, MessageExt, encode_properties
from rmq.common.codes import RETRY_GROUP_TOPIC_PREFIX, MessageConst, MessageSysFlag
from rmq.proxy.pb import d
from rmq.proxy.status import ProxyError

SHARDING_KEY = "__SHARDINGKEY"
TRACE_CONTEXT = "TRACE_CONTEXT"
BORN_HOST = "__BORNHOST"
BORN_TIMESTAMP = "BORN_TIMESTAMP"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
POP_CK = "POP_CK"
LITE_TOPIC = "__LITE_TOPIC"
"""The lite topic of a message sent to a LITE topic (RocketMQ 5.x)."""
INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
"""The LMQs a stored message is also dispatched into (the store reads it)."""
LMQ_PREFIX = "%LMQ%"
MAX_LITE_TOPIC_SIZE = 64
"""The longest lite topic name (Apache's proxy ``maxLiteTopicSize``), told to lite consumers."""
_LITE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def lmq_name(parent: str, lite_topic: str) -> str:
    """The LMQ holding a lite topic's messages (Apache's ``LiteUtil.toLmqName``)."""
    return f"{LMQ_PREFIX}${parent}${lite_topic}"


def check_lite_topic(lite_topic: str) -> None:
    """A lite topic name as Apache's proxy accepts it: 1 to 64 bytes of letters, digits, ``_`` and ``-``."""
    if not lite_topic.strip():
        raise ProxyError(d.Code.ILLEGAL_LITE_TOPIC, "lite topic is blank")
    if len(lite_topic.encode()) > MAX_LITE_TOPIC_SIZE:
        raise ProxyError(
            d.Code.ILLEGAL_LITE_TOPIC,
            f"lite topic {lite_topic!r} is longer than {MAX_LITE_TOPIC_SIZE} bytes",
        )
    bad = sorted(set(lite_topic) - _LITE_CHARS)
    if bad:
        raise ProxyError(
            d.Code.ILLEGAL_LITE_TOPIC,
            f"lite topic {lite_topic!r} has characters other than letters, digits, _ and -: {''.join(bad)!r}",
        )


# Names a 5.x user property may not take: the 4.x reserved ones and the ones this module writes.
SYSTEM_NAMES = frozenset(RESERVED_PROPERTIES) | {
    SHARDING_KEY,
    TRACE_CONTEXT,
    BORN_HOST,
    BORN_TIMESTAMP,
    TIMER_DELIVER_MS,
    POP_CK,
    MessageConst.PRODUCER_GROUP,
    MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS,
    LITE_TOPIC,
    INNER_MULTI_DISPATCH,
}

MAX_BODY_SIZE = 4 * 1024 * 1024
"""The largest body a 5.x client may send (the ``max_body_size`` the proxy's settings announce)."""


def _control(text: str) -> bool:
    return any(ord(c) < 0x20 or ord(c) == 0x7F for c in text)


def millis(ts: Timestamp) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def duration_ms(dur: Duration) -> int:
    return dur.seconds * 1000 + dur.nanos // 1_000_000


class Outgoing:
    """A 5.x message ready for SEND_MESSAGE_V2."""

    __slots__ = ("body", "message_group", "message_id", "properties", "sys_flag", "topic", "transactional")

    def __init__(
        self, topic: str, body: bytes, sys_flag: int, properties: dict[str, str], message_id: str
    ) -> None:
        self.topic = topic
        self.body = body
        self.sys_flag = sys_flag
        self.properties = properties
        self.message_id = message_id
        # The queue of a send: by its message group, else its lite topic (all of a lite topic in one queue).
        self.message_group = properties.get(SHARDING_KEY) or properties.get(LITE_TOPIC)
        self.transactional = (
            MessageSysFlag.transaction_type(sys_flag) == MessageSysFlag.TRANSACTION_PREPARED_TYPE
        )

    def encoded_properties(self) -> str:
        return encode_properties(self.properties)


def to_broker(msg: d.Message, remote_addr: str, max_body_size: int = MAX_BODY_SIZE) -> Outgoing:
    """The send of one 5.x message; a bad one raises :class:`ProxyError` saying what is wrong."""
    topic = msg.topic.name
    sp = msg.system_properties
    if len(msg.body) > max_body_size:
        raise ProxyError(
            d.Code.MESSAGE_BODY_TOO_LARGE,
            f"message body of {len(msg.body)} bytes exceeds the max {max_body_size}",
        )
    props: dict[str, str] = {}
    for key, value in msg.user_properties.items():
        if key in SYSTEM_NAMES:
            raise ProxyError(d.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if _control(key) or _control(value):
            raise ProxyError(
                d.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property {key!r} contains a control character"
            )
        props[key] = value
    if sp.HasField("tag"):
        if not sp.tag.strip() or "|" in sp.tag or _control(sp.tag):
            raise ProxyError(d.Code.ILLEGAL_MESSAGE_TAG, f"illegal tag {sp.tag!r}")
        props[MessageConst.TAGS] = sp.tag
    keys = list(sp.keys)
    for key in keys:
        if not key.strip() or _control(key):
            raise ProxyError(d.Code.ILLEGAL_MESSAGE_KEY, f"illegal key {key!r}")
    if keys:
        props[MessageConst.KEYS] = MessageConst.KEY_SEPARATOR.join(keys)
    if not sp.message_id.strip():
        raise ProxyError(d.Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = sp.message_id
    sys_flag = 0
    if sp.body_encoding == d.Encoding.GZIP:
        sys_flag |= MessageSysFlag.COMPRESSED_FLAG
    if sp.message_type == d.MessageType.TRANSACTION:
        sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
        props[MessageConst.TRANSACTION_PREPARED] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            seconds = sp.orphaned_transaction_recovery_duration.seconds
            props[MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
    if sp.HasField("delivery_timestamp"):
        props[TIMER_DELIVER_MS] = str(millis(sp.delivery_timestamp))
    props[MessageConst.RECONSUME_TIME] = str(sp.delivery_attempt)
    props[MessageConst.PRODUCER_GROUP] = topic
    if sp.HasField("message_group"):
        group = sp.message_group
        if not group.strip() or _control(group) or len(group.encode()) >= 64:
            raise ProxyError(d.Code.ILLEGAL_MESSAGE_GROUP, f"illegal message group {group!r}")
        props[SHARDING_KEY] = group
    if sp.HasField("lite_topic"):
        check_lite_topic(sp.lite_topic)
        props[LITE_TOPIC] = sp.lite_topic
        props[INNER_MULTI_DISPATCH] = lmq_name(topic, sp.lite_topic)
    if sp.HasField("trace_context") and sp.trace_context:
        props[TRACE_CONTEXT] = sp.trace_context
    born_host = sp.born_host or remote_addr
    if born_host:
        props[BORN_HOST] = born_host
    if sp.HasField("born_timestamp"):
        props[BORN_TIMESTAMP] = str(millis(sp.born_timestamp))
    return Outgoing(topic, bytes(msg.body), sys_flag, props, sp.message_id)


def _message_type(props: Mapping[str, str]) -> int:
    if props.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return d.MessageType.TRANSACTION
    if SHARDING_KEY in props:
        return d.MessageType.FIFO
    if LITE_TOPIC in props:
        return d.MessageType.LITE
    if TIMER_DELIVER_MS in props or props.get(MessageConst.DELAY_TIME_LEVEL, "0") != "0":
        return d.MessageType.DELAY
    return d.MessageType.NORMAL


def _host(addr: str) -> str:
    return addr.rsplit(":", 1)[0] if addr else addr


def from_broker(
    m: MessageExt,
    *,
    namespace: str = "",
    receipt_handle: str | None = None,
    invisible_ms: int | None = None,
    topic: str | None = None,
) -> d.Message:
    """The 5.x message of a stored one (``topic``: the name to show, e.g. the original of a retry)."""
    props = dict(m.properties)
    shown = topic or m.topic
    if shown.startswith(RETRY_GROUP_TOPIC_PREFIX) and props.get(MessageConst.RETRY_TOPIC):
        shown = props[MessageConst.RETRY_TOPIC]
    sp = d.SystemProperties(
        message_id=m.msg_id,
        body_digest=d.Digest(
            type=d.DigestType.CRC32, checksum=format(zlib.crc32(m.body) & 0xFFFFFFFF, "08X")
        ),
        body_encoding=d.Encoding.IDENTITY,
        message_type=_message_type(props),
        born_timestamp=timestamp(m.born_timestamp),
        born_host=props.get(BORN_HOST) or _host(m.born_host),
        store_timestamp=timestamp(m.store_timestamp),
        store_host=m.store_host,
        queue_id=m.queue_id,
        queue_offset=m.queue_offset,
        delivery_attempt=m.reconsume_times + 1,
    )
    tags = props.get(MessageConst.TAGS)
    if tags:
        sp.tag = tags
    keys = props.get(MessageConst.KEYS)
    if keys:
        sp.keys.extend(k for k in keys.split(MessageConst.KEY_SEPARATOR) if k)
    if SHARDING_KEY in props:
        sp.message_group = props[SHARDING_KEY]
    if LITE_TOPIC in props:
        sp.lite_topic = props[LITE_TOPIC]
    deliver = props.get(TIMER_DELIVER_MS)
    if deliver and deliver.lstrip("-").isdigit():
        sp.delivery_timestamp.CopyFrom(timestamp(int(deliver)))
    if TRACE_CONTEXT in props:
        sp.trace_context = props[TRACE_CONTEXT]
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
    if invisible_ms is not None:
        sp.invisible_duration.CopyFrom(
            Duration(seconds=invisible_ms // 1000, nanos=(invisible_ms % 1000) * 1_000_000)
        )
    immunity = props.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
    if immunity and immunity.isdigit():
        sp.orphaned_transaction_recovery_duration.CopyFrom(Duration(seconds=int(immunity)))
    user = {k: v for k, v in props.items() if k not in HIDDEN_NAMES}
    return d.Message(
        topic=d.Resource(name=shown, resource_namespace=namespace),
        user_properties=user,
        system_properties=sp,
        body=m.body,
    )


# Properties the broker adds to stored messages that are not the user's.
_BROKER_NAMES = frozenset(
    {
        "MSG_REGION",
        "TRACE_ON",
        "CLUSTER",
        "RETRY_TOPIC",
        "REAL_TOPIC",
        "REAL_QID",
        "ORIGIN_MESSAGE_ID",
        "RECONSUME_TIME",
        "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "1ST_POP_TIME",
        "TIMER_OUT_MS",
        "TIMER_ENQUEUE_MS",
        "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "WAIT",
        "DELAY",
    }
)

# What a 5.x consumer is not shown: Apache's MessageConst.STRING_HASH_SET, which its proxy leaves out.
# __transactionId__ and TRANSACTION_CHECK_TIMES are not in it: a committed transactional message shows its
# transaction id and how often the broker checked it, on Apache's proxy too.
HIDDEN_NAMES = (SYSTEM_NAMES | _BROKER_NAMES) - {
    MessageConst.TRANSACTION_CHECK_TIMES,
    MessageConst.TRANSACTION_ID,
}
