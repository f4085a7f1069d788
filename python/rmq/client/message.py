"""The message model: Message, MessageExt (a consumed message), MessageQueue, properties and ids.

* Properties travel as one string (REMOTING.md §4.3): ``name U+0001 value`` entries joined by U+0002;
  :func:`encode_properties` / :func:`parse_properties` follow ``MessageDecoder`` exactly (empty names and
  values are dropped on parse, ``None`` values are skipped on encode).
* ``UNIQ_KEY`` (§5.2) comes from :func:`rmq.client.uniq_id.create_uniq_id`.
* Delivery at an arbitrary time uses the RocketMQ 5.x timer properties ``TIMER_DELIVER_MS`` (epoch ms),
  ``TIMER_DELAY_MS`` and ``TIMER_DELAY_SEC`` (:attr:`Message.deliver_time_ms` and friends).
* A pull body is decoded by one native call (:func:`rmq._store.decode_records`); :func:`decode_messages` only
  wraps each record tuple in a :class:`MessageExt`. Properties of a consumed message are parsed lazily, the
  first time they are read.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

from rmq._store import decode_records, encode_batch_body, offset_msg_id
from rmq.common.codes import MessageConst, MessageSysFlag

__all__ = [
    "TIMER_DELAY_MS",
    "TIMER_DELAY_SEC",
    "TIMER_DELIVER_MS",
    "TIMER_PROPERTIES",
    "Message",
    "MessageExt",
    "MessageQueue",
    "decode_messages",
    "decompress_body",
    "encode_batch",
    "encode_properties",
    "inflate_body",
    "parse_properties",
]

log = logging.getLogger(__name__)

NAME_VALUE_SEPARATOR: Final = "\u0001"
PROPERTY_SEPARATOR: Final = "\u0002"

_KEYS: Final = MessageConst.KEYS
_TAGS: Final = MessageConst.TAGS
_WAIT: Final = MessageConst.WAIT_STORE_MSG_OK
_DELAY: Final = MessageConst.DELAY_TIME_LEVEL
_UNIQ_KEY: Final = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX

TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
"""Deliver at this epoch time (ms): RocketMQ 5.x timer messages, also served by rmq's broker."""
TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
"""Deliver this many ms after the broker stored the message."""
TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
"""Deliver this many seconds after the broker stored the message."""
TIMER_PROPERTIES: Final = (TIMER_DELIVER_MS, TIMER_DELAY_MS, TIMER_DELAY_SEC)

RESERVED_PROPERTIES: Final[frozenset[str]] = frozenset(
    value
    for name, value in vars(MessageConst).items()
    if name.isupper() and isinstance(value, str) and not name.endswith("SEPARATOR")
) | frozenset((*TIMER_PROPERTIES, "TIMER_OUT_MS"))
"""Property names a user may not set with :meth:`Message.put_user_property` (Java's ``STRING_HASH_SET``)."""


# --- properties ------------------------------------------------------------------------------------------


def encode_properties(properties: Mapping[str, str | None]) -> str:
    """``MessageDecoder.messageProperties2String``: entries with a ``None`` value are skipped."""
    return PROPERTY_SEPARATOR.join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in properties.items() if v is not None
    )


def parse_properties(text: str | None) -> dict[str, str]:
    """``MessageDecoder.string2messageProperties``: a segment needs a non-empty name and a non-empty value."""
    result: dict[str, str] = {}
    if not text:
        return result
    for segment in text.split(PROPERTY_SEPARATOR):
        name, sep, value = segment.partition(NAME_VALUE_SEPARATOR)
        if sep and name and value:
            result[name] = value
    return result


def _find_property(text: str, name: str) -> str | None:
    """One property of an encoded string without parsing the rest (the first match, like a prefix scan)."""
    key = name + NAME_VALUE_SEPARATOR
    start = 0
    while True:
        idx = text.find(key, start)
        if idx < 0:
            return None
        if idx == 0 or text[idx - 1] == PROPERTY_SEPARATOR:
            begin = idx + len(key)
            end = text.find(PROPERTY_SEPARATOR, begin)
            value = text[begin:] if end < 0 else text[begin:end]
            return value or None
        start = idx + 1


# --- MessageQueue ----------------------------------------------------------------------------------------


class MessageQueue(NamedTuple):
    """One queue of a topic on one broker; ordered by (topic, broker_name, queue_id) like Java's.

    A named tuple: hashing and comparison run in C, which matters because every consumed message looks
    its queue up in a few dicts.
    """

    topic: str
    broker_name: str
    queue_id: int

    def to_dict(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MessageQueue:
        return cls(str(d["topic"]), str(d["brokerName"]), int(d["queueId"]))

    def __str__(self) -> str:
        # Java's MessageQueue.toString(): the consistent-hash strategy hashes exactly this text.
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"


# --- Message ---------------------------------------------------------------------------------------------


class Message:
    """A message to send: topic, body, user flag and properties (tags, keys, delay level, user properties).

    ``Message("T", b"body", tags="TagA", keys=["k1", "k2"])`` -- like Java, a new message carries
    ``WAIT=true`` (wait for the store to confirm). ``delay_time_level`` picks one of the broker's
    ``messageDelayLevel`` delays; ``deliver_time_ms`` (epoch ms) / ``delay_time_ms`` ask for delivery at
    an arbitrary time (timer messages, see :attr:`deliver_time_ms`).
    """

    __slots__ = ("_properties", "_transaction_id", "body", "flag", "topic")

    def __init__(
        self,
        topic: str,
        body: bytes = b"",
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        flag: int = 0,
        delay_time_level: int = 0,
        wait_store_msg_ok: bool = True,
        properties: Mapping[str, str] | None = None,
        deliver_time_ms: int | None = None,
        delay_time_ms: int | None = None,
    ) -> None:
        self.topic = topic
        self.body = body
        self.flag = flag
        self._transaction_id: str | None = None
        props: dict[str, str] = dict(properties) if properties else {}
        self._properties: dict[str, str] | None = props
        if tags:
            props[_TAGS] = tags
        if keys:
            self.keys = keys
        props[_WAIT] = "true" if wait_store_msg_ok else "false"
        if delay_time_level > 0:
            props[_DELAY] = str(delay_time_level)
        if deliver_time_ms is not None:
            self.deliver_time_ms = deliver_time_ms
        elif delay_time_ms is not None:
            self.delay_time_ms = delay_time_ms

    # properties ----------------------------------------------------------------------------------------

    @property
    def properties(self) -> dict[str, str]:
        props = self._properties
        assert props is not None
        return props

    def get_property(self, name: str) -> str | None:
        return self.properties.get(name)

    def put_property(self, name: str, value: str) -> None:
        """Set any property, system ones included (what ``MessageAccessor.putProperty`` does)."""
        self.properties[name] = value

    def clear_property(self, name: str) -> None:
        self.properties.pop(name, None)

    def put_user_property(self, name: str, value: str) -> None:
        """Set an application property; system names (``TAGS``, ``UNIQ_KEY``, ...) and blanks are refused."""
        if name in RESERVED_PROPERTIES:
            raise ValueError(f"The Property<{name}> is used by system, input another please")
        if not name or not name.strip() or not value or not value.strip():
            raise ValueError("The name or value of property can not be null or blank string!")
        self.properties[name] = value

    def get_user_property(self, name: str) -> str | None:
        return self.properties.get(name)

    # well-known properties -----------------------------------------------------------------------------

    @property
    def tags(self) -> str | None:
        return self.properties.get(_TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        if value:
            self.properties[_TAGS] = value
        else:
            self.properties.pop(_TAGS, None)

    @property
    def keys(self) -> str | None:
        """Space-separated business keys (indexed by the broker)."""
        return self.properties.get(_KEYS)

    @keys.setter
    def keys(self, value: str | Iterable[str] | None) -> None:
        if value is None:
            self.properties.pop(_KEYS, None)
            return
        text = value if isinstance(value, str) else MessageConst.KEY_SEPARATOR.join(value)
        if text:
            self.properties[_KEYS] = text
        else:
            self.properties.pop(_KEYS, None)

    @property
    def key_list(self) -> list[str]:
        keys = self.keys
        return keys.split(MessageConst.KEY_SEPARATOR) if keys else []

    @property
    def delay_time_level(self) -> int:
        value = self.properties.get(_DELAY)
        return int(value) if value else 0

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        if level > 0:
            self.properties[_DELAY] = str(level)
        else:
            self.properties.pop(_DELAY, None)

    # arbitrary-time delivery (timer messages) ------------------------------------------------------------

    def _timer(self, name: str) -> int | None:
        value = self.get_property(name)
        try:
            return int(value) if value else None
        except ValueError:
            return None

    def _set_timer(self, name: str, value: int | None) -> None:
        props = self.properties
        for other in TIMER_PROPERTIES:
            props.pop(other, None)
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative whole number, not {value!r}")
        props[name] = str(value)

    @property
    def deliver_time_ms(self) -> int | None:
        """Epoch time (ms) at which the broker delivers the message (``TIMER_DELIVER_MS``; Java 5.x
        ``setDeliverTimeMs``). Setting any of the three timer properties clears the other two; ``None``
        clears them all. The broker refuses (code 13) a time more than ``timerMaxDelaySec`` away; a delay
        level, when also set, takes precedence. Not allowed in batches."""
        return self._timer(TIMER_DELIVER_MS)

    @deliver_time_ms.setter
    def deliver_time_ms(self, epoch_ms: int | None) -> None:
        self._set_timer(TIMER_DELIVER_MS, epoch_ms)

    @property
    def delay_time_ms(self) -> int | None:
        """Deliver this many ms after the broker stores the message (``TIMER_DELAY_MS``)."""
        return self._timer(TIMER_DELAY_MS)

    @delay_time_ms.setter
    def delay_time_ms(self, ms: int | None) -> None:
        self._set_timer(TIMER_DELAY_MS, ms)

    @property
    def delay_time_sec(self) -> int | None:
        """Deliver this many seconds after the broker stores the message (``TIMER_DELAY_SEC``)."""
        return self._timer(TIMER_DELAY_SEC)

    @delay_time_sec.setter
    def delay_time_sec(self, seconds: int | None) -> None:
        self._set_timer(TIMER_DELAY_SEC, seconds)

    @property
    def is_timer_message(self) -> bool:
        props = self.properties
        return any(name in props for name in TIMER_PROPERTIES)

    @property
    def wait_store_msg_ok(self) -> bool:
        return self.properties.get(_WAIT) != "false"

    @wait_store_msg_ok.setter
    def wait_store_msg_ok(self, value: bool) -> None:
        self.properties[_WAIT] = "true" if value else "false"

    @property
    def uniq_id(self) -> str | None:
        """The ``UNIQ_KEY`` the producer assigned (``None`` before the first send)."""
        return self.properties.get(_UNIQ_KEY)

    @property
    def transaction_id(self) -> str | None:
        return self._transaction_id

    @transaction_id.setter
    def transaction_id(self, value: str | None) -> None:
        self._transaction_id = value

    def __repr__(self) -> str:
        return (
            f"Message(topic={self.topic!r}, flag={self.flag}, properties={self.properties!r}, "
            f"body=<{len(self.body)} bytes>)"
        )


class MessageExt(Message):
    """A stored message as a consumer receives it (pull body record, REMOTING.md §4.1).

    ``msg_id`` is the ``UNIQ_KEY`` when present (else the offset id); ``offset_msg_id`` is the broker-side id
    built from the store host and the commitlog offset. ``broker_name`` is the broker it was pulled from.
    """

    __slots__ = (
        "_pull",
        "_raw_properties",
        "body_crc",
        "born_host",
        "born_timestamp",
        "commit_log_offset",
        "prepared_transaction_offset",
        "queue_id",
        "queue_offset",
        "reconsume_times",
        "store_host",
        "store_size",
        "store_timestamp",
        "sys_flag",
    )

    def __init__(
        self,
        topic: str,
        body: bytes = b"",
        *,
        queue_id: int = 0,
        queue_offset: int = 0,
        commit_log_offset: int = 0,
        sys_flag: int = 0,
        flag: int = 0,
        born_timestamp: int = 0,
        born_host: str = "",
        store_timestamp: int = 0,
        store_host: str = "",
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        properties: Mapping[str, str] | None = None,
        broker_name: str | None = None,
    ) -> None:
        self.topic = topic
        self.body = body
        self.flag = flag
        self._transaction_id = None
        self._properties = dict(properties) if properties else {}
        self._raw_properties = ""
        self._pull = None if broker_name is None else (broker_name, -1, -1)
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.commit_log_offset = commit_log_offset
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.born_host = born_host
        self.store_timestamp = store_timestamp
        self.store_host = store_host
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset
        self.store_size = 0
        self.body_crc = 0

    @property
    def properties(self) -> dict[str, str]:
        props = self._properties
        if props is None:
            props = parse_properties(self._raw_properties)
            pull = self._pull
            if pull is not None and pull[1] >= 0:
                props[MessageConst.MIN_OFFSET] = str(pull[1])
                props[MessageConst.MAX_OFFSET] = str(pull[2])
            self._properties = props
        return props

    def get_property(self, name: str) -> str | None:
        if self._properties is None:  # no need to build the whole map for one lookup
            if name == MessageConst.MIN_OFFSET or name == MessageConst.MAX_OFFSET:
                return self.properties.get(name)
            return _find_property(self._raw_properties, name)
        return self._properties.get(name)

    @property
    def tags(self) -> str | None:
        return self.get_property(_TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        Message.tags.fset(self, value)  # type: ignore[attr-defined]

    @property
    def broker_name(self) -> str | None:
        return None if self._pull is None else self._pull[0]

    @property
    def offset_msg_id(self) -> str:
        """Store host + commitlog offset as hex (§5.1); ``""`` for a message that was never stored."""
        if not self.store_host:
            return ""
        return offset_msg_id(self.store_host, self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        return self.get_property(_UNIQ_KEY) or self.offset_msg_id

    @property
    def transaction_id(self) -> str | None:
        if self._transaction_id is None and self.get_property(MessageConst.TRANSACTION_PREPARED) == "true":
            return self.get_property(_UNIQ_KEY)
        return self._transaction_id

    @transaction_id.setter
    def transaction_id(self, value: str | None) -> None:
        self._transaction_id = value

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
            f"msg_id={self.msg_id!r}, reconsume_times={self.reconsume_times}, "
            f"properties={self.properties!r}, body=<{len(self.body)} bytes>)"
        )


# --- bodies ----------------------------------------------------------------------------------------------

_warned_compression: set[int] = set()


def inflate_body(body: bytes, sys_flag: int) -> bytes | None:
    """Inflate a body stored with COMPRESSED_FLAG; the type bits (4.9.4+) choose zlib (0, 3), LZ4 or ZSTD.
    ``None`` when no decoder for the type is installed; data that does not inflate raises."""
    ctype = (sys_flag & MessageSysFlag.COMPRESSION_TYPE_MASK) >> 8
    try:
        if ctype in (0, 3):
            return zlib.decompress(body)
        if ctype == 1:
            import lz4.frame  # type: ignore[import-not-found]

            return bytes(lz4.frame.decompress(body))
        if ctype == 2:
            import zstandard  # type: ignore[import-not-found]

            return bytes(zstandard.ZstdDecompressor().decompressobj().decompress(body))
    except ImportError:
        pass
    if ctype not in _warned_compression:
        _warned_compression.add(ctype)
        log.warning("message bodies compressed with type %d are delivered compressed (no decoder)", ctype)
    return None


def decompress_body(body: bytes, sys_flag: int) -> bytes:
    """:func:`inflate_body`, or the body as stored when it has no decoder or does not inflate."""
    try:
        out = inflate_body(body, sys_flag)
    except Exception as exc:
        log.warning("cannot decompress a message body (sysFlag %#x): %s", sys_flag, exc)
        return body
    return body if out is None else out


def decode_messages(
    buffer: bytes | memoryview, broker_name: str | None = None, min_offset: int = -1, max_offset: int = -1
) -> list[MessageExt]:
    """The messages of a pull body: one native decode, then one :class:`MessageExt` per record."""
    records = decode_records(bytes(buffer) if isinstance(buffer, memoryview) else buffer)
    pull = None if broker_name is None else (broker_name, min_offset, max_offset)
    new = object.__new__
    cls = MessageExt
    out: list[MessageExt] = []
    append = out.append
    for rec in records:
        m = new(cls)
        (
            m.topic,
            m.queue_id,
            m.queue_offset,
            m.commit_log_offset,
            m.sys_flag,
            m.flag,
            m.born_timestamp,
            m.born_host,
            m.store_timestamp,
            m.store_host,
            m.reconsume_times,
            m.prepared_transaction_offset,
            m.body,
            m._raw_properties,
            m.store_size,
            m.body_crc,
        ) = rec
        m._properties = None
        m._transaction_id = None
        m._pull = pull
        if m.sys_flag & 1:
            m.body = decompress_body(m.body, m.sys_flag)
        append(m)
    return out


def encode_batch(messages: Iterable[Message]) -> bytes:
    """The SEND_BATCH_MESSAGE body (REMOTING.md §4.5) of messages that are already validated."""
    return encode_batch_body(
        [(m.flag, m.body, encode_properties(m.properties).encode("utf-8")) for m in messages]
    )
