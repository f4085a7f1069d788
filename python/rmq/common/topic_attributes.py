"""Topic attributes: RocketMQ 5.x's per-topic settings kept in the topic config (``attributes`` in
``topics.json``): 5.x's ``message.type`` and the one rmq defines, ``retention.hours``.

UPDATE_AND_CREATE_TOPIC carries them as its ``attributes`` header in 5.x's form, ``+key=value`` to set and
``-key`` to remove, comma-separated (``+retention.hours=24``; mqadmin 5.x's ``updateTopic -a``). As in
5.x, a topic being created takes only ``+key=value``, removing a key it does not have is refused, an update
without the header keeps the topic's attributes, and a key the broker does not know is refused: rmq knows
``message.type`` and ``retention.hours`` (5.x's ``queue.type`` and ``cleanup.policy`` select features rmq
does not have).

``message.type`` (``NORMAL``, ``FIFO``, ``DELAY``, ``TRANSACTION``, ``LITE``, ``MIXED`` or ``UNSPECIFIED``, as
5.x spells them): what 5.x's ``updateTopic -a +message.type=FIFO`` sets. It is kept and shown with the topic's
config, so a 5.x operator's scripts work unchanged; rmq's queues accept every type whatever it says.

``lite.topic.expiration`` (minutes, -1 for never, at most 43200): 5.x's time after which a LITE topic's lite
topics without new messages are deleted. Kept and shown; rmq does not delete lite topics by it (their
messages go with the CommitLog files, as every topic's).

``retention.hours`` (a positive number of hours, fractions allowed): the topic's messages are served for
that long after they were stored, shorter or longer than the broker's ``fileReservedTime``. CommitLog
files are still deleted whole, so a file is kept while a topic with a longer time needs it, and a topic
with a shorter time has its older messages hidden (no longer pulled or counted) while the file stays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

__all__ = [
    "LITE_TOPIC_EXPIRATION",
    "MAX_RETENTION_HOURS",
    "MESSAGE_TYPE",
    "MESSAGE_TYPES",
    "RETENTION_HOURS",
    "SUPPORTED",
    "alter_attributes",
    "attributes_text",
    "retention_ms",
]

RETENTION_HOURS: Final = "retention.hours"
"""How long a topic's messages are served after they were stored, in hours."""

MAX_RETENTION_HOURS: Final = 87_600.0
"""Ten years: a longer ``retention.hours`` is refused (most likely a unit mistake)."""

MESSAGE_TYPE: Final = "message.type"
"""5.x's topic message type."""

MESSAGE_TYPES: Final = ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "LITE", "MIXED", "UNSPECIFIED")
"""The values 5.x's ``message.type`` takes (spelled as 5.x spells them, upper case)."""

LITE_TOPIC_EXPIRATION: Final = "lite.topic.expiration"
"""5.x's expiry of a LITE topic's idle lite topics, in minutes (kept, not applied)."""

MAX_LITE_TOPIC_EXPIRATION: Final = 43_200

SUPPORTED: Final = (MESSAGE_TYPE, RETENTION_HOURS, LITE_TOPIC_EXPIRATION)


def _check_message_type(value: str) -> str:
    if value not in MESSAGE_TYPES:
        raise ValueError(f"{MESSAGE_TYPE} must be one of {', '.join(MESSAGE_TYPES)}, not {value!r}")
    return value


def _check_retention(value: str) -> str:
    """The value as stored, or ValueError saying what is wrong."""
    try:
        hours = float(value)
    except ValueError:
        raise ValueError(f"{RETENTION_HOURS} must be a number of hours, not {value!r}") from None
    if not math.isfinite(hours) or hours <= 0 or hours > MAX_RETENTION_HOURS:
        raise ValueError(
            f"{RETENTION_HOURS} must be more than 0 and at most {MAX_RETENTION_HOURS:g} hours, not {value!r}"
        )
    return value.strip()


def _check_lite_expiration(value: str) -> str:
    try:
        minutes = int(value.strip())
    except ValueError:
        raise ValueError(
            f"{LITE_TOPIC_EXPIRATION} must be a whole number of minutes, not {value!r}"
        ) from None
    if minutes < -1 or minutes > MAX_LITE_TOPIC_EXPIRATION:
        raise ValueError(
            f"{LITE_TOPIC_EXPIRATION} must be -1 (never) to {MAX_LITE_TOPIC_EXPIRATION} minutes, "
            f"not {value!r}"
        )
    return str(minutes)


_CHECKS = {
    MESSAGE_TYPE: _check_message_type,
    RETENTION_HOURS: _check_retention,
    LITE_TOPIC_EXPIRATION: _check_lite_expiration,
}


def alter_attributes(current: Mapping[str, str], text: str | None, *, create: bool) -> dict[str, str]:
    """The attributes after applying ``text`` (``+k=v,-k``) to ``current``; ValueError with the remark to
    answer when ``text`` is malformed, names an unsupported key, has a bad value, or removes what is not
    there (or anything, when ``create``)."""
    out = dict(current)
    if not text:
        return out
    seen: set[str] = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        op, body = item[:1], item[1:]
        if op == "+":
            key, eq, value = body.partition("=")
            if not eq or not key or not value:
                raise ValueError(f"bad attribute {item!r}: expected +key=value")
        elif op == "-":
            key, value = body, ""
            if not key or "=" in key:
                raise ValueError(f"bad attribute {item!r}: expected -key")
            if create:
                raise ValueError(f"only adding attributes is supported while creating a topic: {item!r}")
        else:
            raise ValueError(f"bad attribute {item!r}: it must start with + (set) or - (remove)")
        key = key.strip()
        if key in seen:
            raise ValueError(f"attribute {key} given twice")
        seen.add(key)
        check = _CHECKS.get(key)
        if check is None:
            raise ValueError(f"unsupported attribute key: {key} (rmq supports {', '.join(SUPPORTED)})")
        if op == "+":
            out[key] = check(value)
        elif key in out:
            del out[key]
        else:
            raise ValueError(f"attempt to delete a nonexistent attribute: {key}")
    return out


def attributes_text(attributes: Mapping[str, str]) -> str:
    """``+k=v,...``: the header that sets `attributes` (sorted)."""
    return ",".join(f"+{k}={v}" for k, v in sorted(attributes.items()))


def retention_ms(attributes: Mapping[str, str]) -> int | None:
    """The topic's ``retention.hours`` in ms, or None when it has none (or a value that is not valid,
    which the broker never stores)."""
    value = attributes.get(RETENTION_HOURS)
    if value is None:
        return None
    try:
        hours = float(_check_retention(value))
    except ValueError:
        return None
    return max(1, round(hours * 3_600_000))
