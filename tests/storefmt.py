"""An independent reader of RocketMQ 4.9 store files, written from REMOTING.md §4–§6.

It shares no code with rmq: tests use it to check that what rmq writes is laid out and
encoded as Apache RocketMQ would write it.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass, field

MAGIC_MESSAGE = 0xDAA320A7
MAGIC_BLANK = 0xCBD43194
CQ_UNIT = 20
INDEX_HEADER = 40


def java_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (h * 31 + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def parse_properties(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for seg in text.split("\x02"):
        i = seg.find("\x01")
        if i > 0 and i < len(seg) - 1:
            out[seg[:i]] = seg[i + 1 :]
    return out


@dataclass
class Record:
    total_size: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: dict[str, str] = field(default_factory=dict)
    raw_properties: str = ""


def _host(buf: bytes, pos: int, v6: bool) -> tuple[tuple[str, int], int]:
    n = 16 if v6 else 4
    ip = buf[pos : pos + n]
    text = ":".join(ip[i : i + 2].hex() for i in range(0, 16, 2)) if v6 else ".".join(map(str, ip))
    (port,) = struct.unpack_from(">i", buf, pos + n)
    return (text, port), pos + n + 4


def decode_record(buf: bytes, pos: int = 0) -> Record:
    total, magic = struct.unpack_from(">iI", buf, pos)
    if magic != MAGIC_MESSAGE:
        raise ValueError(f"bad magic {magic:#x} at {pos}")
    crc, qid, flag, qoff, phys, sysflag, born_ts = struct.unpack_from(">iiiqqiq", buf, pos + 8)
    p = pos + 48
    born, p = _host(buf, p, bool(sysflag & 0x10))
    (store_ts,) = struct.unpack_from(">q", buf, p)
    store, p = _host(buf, p + 8, bool(sysflag & 0x20))
    reconsume, prep, body_len = struct.unpack_from(">iqi", buf, p)
    p += 16
    body = bytes(buf[p : p + body_len])
    p += body_len
    tlen = buf[p]
    topic = bytes(buf[p + 1 : p + 1 + tlen]).decode()
    p += 1 + tlen
    (plen,) = struct.unpack_from(">h", buf, p)
    props = bytes(buf[p + 2 : p + 2 + plen]).decode()
    p += 2 + plen
    if p - pos != total:
        raise ValueError(f"record at {pos}: fields sum to {p - pos}, TOTALSIZE {total}")
    if zlib.crc32(body) & 0x7FFFFFFF != crc:
        raise ValueError(f"record at {pos}: body CRC mismatch")
    return Record(
        total,
        crc,
        qid,
        flag,
        qoff,
        phys,
        sysflag,
        born_ts,
        born,
        store_ts,
        store,
        reconsume,
        prep,
        body,
        topic,
        parse_properties(props),
        props,
    )


def segment_names(directory: str) -> list[str]:
    names = sorted(os.listdir(directory))
    for n in names:
        if len(n) != 20 or not n.isdigit():
            raise ValueError(f"{directory}/{n} is not a 20-digit segment name")
    return names


def read_commitlog(directory: str, file_size: int) -> list[Record]:
    """Every record of a CommitLog directory, checking names, sizes and blank markers."""
    out: list[Record] = []
    names = segment_names(directory)
    for i, name in enumerate(names):
        base = int(name)
        if base % file_size:
            raise ValueError(f"{name} is not a multiple of the file size")
        if i and base != int(names[i - 1]) + file_size:
            raise ValueError(f"{name} does not follow {names[i - 1]}")
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        if len(data) != file_size:
            raise ValueError(f"{name} is {len(data)} bytes, expected {file_size}")
        pos = 0
        while pos + 8 <= len(data):
            total, magic = struct.unpack_from(">iI", data, pos)
            if magic == MAGIC_BLANK:
                if total != len(data) - pos:
                    raise ValueError(f"{name}: blank at {pos} says {total} bytes remain")
                break
            if magic != MAGIC_MESSAGE:
                break  # end of written data
            rec = decode_record(data, pos)
            if rec.physical_offset != base + pos:
                raise ValueError(f"record at {base + pos} claims offset {rec.physical_offset}")
            out.append(rec)
            pos += total
    return out


def read_consume_queue(directory: str, file_size: int) -> tuple[int, list[tuple[int, int, int]]]:
    """(first logical offset, units) of one queue; a unit is (commitlog offset, size, tags code).

    Placeholder units (offset 0, size 0x7FFFFFFF) are returned as they are on disk.
    """
    names = segment_names(directory)
    if not names:
        return 0, []
    first = int(names[0]) // CQ_UNIT
    units: list[tuple[int, int, int]] = []
    for i, name in enumerate(names):
        if int(name) != int(names[0]) + i * file_size:
            raise ValueError(f"{directory}/{name} is out of sequence")
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        if len(data) != file_size:
            raise ValueError(f"{name} is {len(data)} bytes, expected {file_size}")
        for pos in range(0, len(data), CQ_UNIT):
            off, size, tags = struct.unpack_from(">qiq", data, pos)
            if off == 0 and size == 0 and tags == 0:
                return first, units
            units.append((off, size, tags))
    return first, units


@dataclass
class IndexEntry:
    key_hash: int
    phy_offset: int
    time_diff: int
    prev: int


@dataclass
class IndexFileView:
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int
    slots: list[int]
    entries: list[IndexEntry]


def read_index_file(path: str, slot_num: int, index_num: int) -> IndexFileView:
    with open(path, "rb") as f:
        data = f.read()
    expected = INDEX_HEADER + slot_num * 4 + index_num * 20
    if len(data) != expected:
        raise ValueError(f"{path} is {len(data)} bytes, expected {expected}")
    bt, et, bp, ep, hsc, ic = struct.unpack_from(">qqqqii", data, 0)
    slots = list(struct.unpack_from(f">{slot_num}i", data, INDEX_HEADER))
    base = INDEX_HEADER + slot_num * 4
    entries = [IndexEntry(*struct.unpack_from(">iqii", data, base + n * 20)) for n in range(ic)]
    return IndexFileView(bt, et, bp, ep, hsc, ic, slots, entries)


def index_key_hash(key: str) -> int:
    h = java_hash(key)
    return 0 if h == -(1 << 31) else abs(h)


def index_lookup(view: IndexFileView, key: str, slot_num: int) -> list[int]:
    """Physical offsets of `key` in one index file, newest first."""
    kh = index_key_hash(key)
    n = view.slots[kh % slot_num]
    out = []
    steps = 0
    while 0 < n < view.index_count and steps <= view.index_count:
        e = view.entries[n]
        if e.key_hash == kh:
            out.append(e.phy_offset)
        n = e.prev
        steps += 1
    return out


def read_checkpoint(path: str) -> tuple[int, int, int]:
    with open(path, "rb") as f:
        data = f.read()
    if len(data) != 4096:
        raise ValueError(f"checkpoint is {len(data)} bytes, expected 4096")
    return struct.unpack_from(">qqq", data, 0)
