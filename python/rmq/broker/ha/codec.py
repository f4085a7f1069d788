"""The HA protocol's two messages, without I/O: the slave's offset report (8 bytes big-endian) and the
master's transfer frame (8-byte physical offset, 4-byte body size, body; size 0 is a heartbeat)."""

from __future__ import annotations

import struct

__all__ = [
    "FRAME_HEADER",
    "OFFSET_REPORT",
    "frame_header",
    "offset_report",
    "parse_frame_header",
    "parse_offset",
]

_OFFSET = struct.Struct(">q")
_HEADER = struct.Struct(">qi")

OFFSET_REPORT = _OFFSET.size
"""Bytes of a slave's offset report (8)."""
FRAME_HEADER = _HEADER.size
"""Bytes of a transfer frame's header (12)."""


def offset_report(offset: int) -> bytes:
    return _OFFSET.pack(offset)


def parse_offset(data: bytes) -> int:
    return int(_OFFSET.unpack(data)[0])


def frame_header(offset: int, size: int) -> bytes:
    return _HEADER.pack(offset, size)


def parse_frame_header(data: bytes) -> tuple[int, int]:
    offset, size = _HEADER.unpack(data)
    return int(offset), int(size)
