"""Where the stored records in a run of CommitLog bytes start and end (a pull answer's body, a slice of a
CommitLog file, a whole file read with ``binaryFile``).

Each record begins with its total size (int32, big-endian, counting itself) and a magic code; a run ends
at its last byte, at a size of 0 (the zeros of a file's unwritten tail) or at the blank magic that fills
the end of a CommitLog file. Anything else that does not fit (a size too small for a record header, or
one that runs past the end) is an error naming the byte position: a run is never cut short quietly.
"""

from __future__ import annotations

import struct
from array import array

__all__ = [
    "BLANK_MAGIC_CODE",
    "QUEUE_OFFSET_AT",
    "RecordRunError",
    "queue_offset_of",
    "record_offsets",
    "record_spans",
]

BLANK_MAGIC_CODE = 0xCBD43194
"""The magic of the filler record at the end of a CommitLog file."""
_MIN_RECORD = 4 + 4 + 4 + 4 + 4 + 8 + 8
"""Total size, magic, body CRC, queue id, flag, queue offset, physical offset: no record is shorter."""
QUEUE_OFFSET_AT = 20
"""Where a record's queue offset (int64) is."""
_HEAD = struct.Struct(">iI")
_QOFF = struct.Struct(">q")


class RecordRunError(ValueError):
    """Bytes that do not divide into whole stored records."""


def record_spans(data: bytes | memoryview, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """``(position, size)`` of every record in ``data[start:end]`` (see the module doc)."""
    stop = len(data) if end is None else end
    pos = start
    out: list[tuple[int, int]] = []
    while pos < stop:
        if stop - pos < 8:
            if any(bytes(data[pos:stop])):
                raise RecordRunError(f"{stop - pos} bytes at byte {pos - start} are too short for a record")
            break
        size, magic = _HEAD.unpack_from(data, pos)
        if size == 0 or magic == BLANK_MAGIC_CODE:
            break
        if size < _MIN_RECORD or pos + size > stop:
            raise RecordRunError(
                f"the record at byte {pos - start} claims {size} bytes, but {stop - pos} are left"
                f" (a record needs at least {_MIN_RECORD}): not whole stored records"
            )
        out.append((pos, size))
        pos += size
    return out


def record_offsets(spans: list[tuple[int, int]], base: int = 0) -> bytes:
    """The int32 little-endian Arrow offsets of a binary array whose values are `spans` of one buffer
    that starts at `base` (the spans must be contiguous)."""
    offs = array("i", [p - base for p, _ in spans])
    offs.append((spans[-1][0] + spans[-1][1] - base) if spans else 0)
    if offs.itemsize != 4:  # pragma: no cover - every platform Spark runs on
        raise AssertionError("array('i') is not 32-bit here")
    return offs.tobytes() if struct.pack("=i", 1) == struct.pack("<i", 1) else _swap(offs)


def _swap(offs: array) -> bytes:  # type: ignore[type-arg]
    offs.byteswap()
    return offs.tobytes()


def queue_offset_of(data: bytes | memoryview, pos: int) -> int:
    """The queue offset of the record at `pos`."""
    return int(_QOFF.unpack_from(data, pos + QUEUE_OFFSET_AT)[0])
