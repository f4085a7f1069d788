"""Java semantics the protocol depends on."""

from __future__ import annotations

__all__ = ["java_string_hash"]


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, as a signed int32.

    RocketMQ uses it for the consume-queue tags code of a message's ``TAGS`` property and for
    ``SubscriptionData.codeSet``. Characters outside the BMP count as two code units (a surrogate pair).
    """
    h = 0
    if s.isascii():
        for ch in s.encode("ascii"):
            h = (31 * h + ch) & 0xFFFFFFFF
    else:
        data = s.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(data), 2):
            h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h
