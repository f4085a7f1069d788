"""Message ids: the client's ``UNIQ_KEY`` (REMOTING.md §5.2, ``MessageClientIDSetter``) and the local IP.

Layout (16 bytes = 32 uppercase hex characters on IPv4; 28 / 56 on IPv6): client IP, pid as a short, a
per-process random word (Java: the class loader's hash code), milliseconds since the start of the current
month (int), a 16-bit counter. The first three parts are a fixed per-process prefix.
"""

from __future__ import annotations

import ipaddress
import os
import random
import socket
import struct
import time
from datetime import datetime

__all__ = ["create_uniq_id", "local_ip", "reserve_uniq_ids", "uniq_id_ip", "uniq_id_timestamp"]


def local_ip() -> str:
    """A non-loopback IPv4 address of this host if there is one (the client id and UNIQ_KEY use it)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("8.8.8.8", 80))  # UDP: no packet is sent, only the route is looked up
            ip = str(s.getsockname()[0])
            if ip and not ip.startswith("0."):
                return ip
    except OSError:
        pass
    try:
        ip = socket.gethostbyname(socket.gethostname())
        if ip:
            return ip
    except OSError:
        pass
    return "127.0.0.1"


class _UniqIdGenerator:
    """``MessageClientIDSetter``: fixed hex prefix (ip, pid, random word) + time-in-month + counter."""

    def __init__(self, ip: str | None = None, pid: int | None = None) -> None:
        try:
            ip_bytes = ipaddress.ip_address(ip or local_ip()).packed
        except ValueError:
            ip_bytes = struct.pack(">I", int(time.time() * 1000) & 0xFFFFFFFF)  # Java's createFakeIP
        pid = os.getpid() if pid is None else pid
        fixed = ip_bytes + struct.pack(">hi", _to_short(pid), random.getrandbits(31))
        self.prefix = fixed.hex().upper()
        self._counter = 0
        self._start_ms = 0
        self._next_start_ms = 0

    def _set_start_time(self, now_ms: int) -> None:
        now = datetime.fromtimestamp(now_ms / 1000.0)
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        nxt = (
            start.replace(year=start.year + 1, month=1)
            if start.month == 12
            else start.replace(month=start.month + 1)
        )
        self._start_ms = int(start.timestamp() * 1000)
        self._next_start_ms = int(nxt.timestamp() * 1000)

    def _base(self) -> str:
        now = int(time.time() * 1000)
        if now >= self._next_start_ms:
            self._set_start_time(now)
        diff = now - self._start_ms
        if -1_000_000 < diff < 0:  # clock stepped back (NTP)
            diff = 0
        return f"{self.prefix}{diff & 0xFFFFFFFF:08X}"

    def __call__(self) -> str:
        counter = self._counter
        self._counter = (counter + 1) & 0xFFFF
        return f"{self._base()}{counter:04X}"

    def reserve(self, n: int) -> tuple[str, int]:
        """`n` ids made at once: the ids are `base` + the 4 hex digits of ``(counter + i) & 0xFFFF``."""
        counter = self._counter
        self._counter = (counter + n) & 0xFFFF
        return self._base(), counter


def _to_short(value: int) -> int:
    value &= 0xFFFF
    return value - 0x10000 if value & 0x8000 else value


_uniq_id = _UniqIdGenerator()


def create_uniq_id() -> str:
    """A new ``UNIQ_KEY`` (32 uppercase hex characters on an IPv4 host)."""
    return _uniq_id()


def reserve_uniq_ids(n: int) -> tuple[str, int]:
    """`n` new ``UNIQ_KEY``s as ``(base, counter)``: id `i` is `base` followed by
    ``f"{(counter + i) & 0xFFFF:04X}"`` (for encoders that write the ids themselves)."""
    return _uniq_id.reserve(n)


def uniq_id_ip(uniq_id: str) -> str:
    """The client IP encoded in a ``UNIQ_KEY`` (``MessageClientIDSetter.getIPStrFromID``)."""
    ip_hex = uniq_id[: len(uniq_id) - 24]  # the fixed tail is pid 4 + word 8 + time 8 + counter 4 hex chars
    return str(ipaddress.ip_address(bytes.fromhex(ip_hex)))


def uniq_id_timestamp(uniq_id: str) -> int:
    """When a ``UNIQ_KEY`` was created (ms), assuming this or last month (``getNearlyTimeFromID``)."""
    diff = int(uniq_id[-12:-4], 16)
    now = datetime.now()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    start_ms = int(start.timestamp() * 1000)
    now_ms = int(now.timestamp() * 1000)
    if start_ms + diff > now_ms + 1000:  # created last month
        prev = (
            start.replace(year=start.year - 1, month=12)
            if start.month == 1
            else start.replace(month=start.month - 1)
        )
        start_ms = int(prev.timestamp() * 1000)
    return start_ms + diff
