"""Helpers of the PySpark reader tests: what a test store holds and how to read it without Spark."""

from __future__ import annotations

import hashlib
import ipaddress
import struct
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmq import _store
from rmq.spark.options import parse_options
from rmq.spark.schema import ReadColumns, spark_schema
from rmq.spark.source import plan_partitions, read_partition

COMMITLOG_FILE_SIZE = 64 * 1024


@dataclass
class Sent:
    """What the producer sent and the broker answered for one message."""

    topic: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    uniq_key: str
    body: bytes
    tags: str | None = None
    keys: str | None = None
    user_properties: dict[str, str] = field(default_factory=dict)


@dataclass
class WrittenStore:
    root: Path
    sent: list[Sent]
    committed: bytes
    rolled_back: bytes
    fingerprint: dict[str, Any]


def fingerprint(root: Path) -> dict[str, Any]:
    """Size and mtime of every file, and a digest of the CommitLog and the checkpoint."""
    out: dict[str, Any] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            key = str(p.relative_to(root))
            out[key] = (st.st_size, st.st_mtime_ns)
            if key.startswith("commitlog") or key == "checkpoint":
                out[key + "#sha256"] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def read_rows(path: Path, **options: str) -> list[dict[str, Any]]:
    """Every row of a store read in-process (no Spark): the data source's own partitions and decode."""
    spec = parse_options({"path": str(path), **options})
    cols = ReadColumns(spark_schema())
    _kind, parts = plan_partitions(spec)
    return [row for p in parts for b in read_partition(spec, cols, p) for row in b.to_pylist()]


def offset_of(offset_msg_id: str) -> int:
    return _store.decode_offset_msg_id(offset_msg_id)[1]


def wait_for(cond: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


GIB = 1 << 30
CQ_FILE = 6_000_000
MAGIC, BLANK = 0xDAA320A7, 0xCBD43194
STORE_HOST = ("10.1.2.3", 10911)


def host(addr: tuple[str, int]) -> bytes:
    return ipaddress.ip_address(addr[0]).packed + struct.pack(">i", addr[1])


def record(
    offset: int,
    topic: str,
    queue_id: int,
    queue_offset: int,
    body: bytes,
    props: dict[str, str],
    sys_flag: int = 0,
    born: tuple[str, int] = ("192.168.0.7", 40000),
    prepared_offset: int = 0,
    store_ts: int = 1_700_000_000_000,
) -> bytes:
    if ":" in born[0]:
        sys_flag |= 0x10
    p = "\x02".join(f"{k}\x01{v}" for k, v in props.items()).encode()
    t = topic.encode()
    total = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + len(host(born)) + 8 + 8 + 4 + 8 + 4 + len(body)
    total += 1 + len(t) + 2 + len(p)
    crc = zlib.crc32(body) & 0x7FFFFFFF
    born_ts = store_ts - 5
    out = struct.pack(">iIiiiqqiq", total, MAGIC, crc, queue_id, 0, queue_offset, offset, sys_flag, born_ts)
    out += host(born) + struct.pack(">q", store_ts) + host(STORE_HOST)
    out += struct.pack(">iqi", 0, prepared_offset, len(body)) + body
    out += bytes([len(t)]) + t + struct.pack(">h", len(p)) + p
    assert len(out) == total
    return out


class Store:
    """A store laid out byte by byte as Apache RocketMQ 4.9 writes it (REMOTING.md §4, §6; no rmq
    code): sparse CommitLog files of `file_size` bytes, ConsumeQueues, checkpoint, config/."""

    def __init__(self, root: Path, file_size: int = GIB) -> None:
        self.root = root
        self.file_size = file_size
        (root / "commitlog").mkdir(parents=True)
        self.files: dict[int, bytearray] = {}
        self.pos = 0
        self.units: dict[tuple[str, int], list[tuple[int, int]]] = {}

    def put(
        self, topic: str, queue_id: int, body: bytes, props: dict[str, str], **kw: int | tuple[str, int]
    ) -> int:
        """Append a record (rolling over to the next file when it does not fit); its offset."""
        qo = len(self.units.get((topic, queue_id), []))
        rec = record(self.pos, topic, queue_id, qo, body, props, **kw)  # type: ignore[arg-type]
        if self.pos % self.file_size + len(rec) + 8 > self.file_size:
            self.close_file()
            rec = record(self.pos, topic, queue_id, qo, body, props, **kw)  # type: ignore[arg-type]
        off = self.pos
        base = off // self.file_size * self.file_size
        self.files.setdefault(base, bytearray())
        f = self.files[base]
        assert len(f) == off - base
        f += rec
        self.pos += len(rec)
        sys_flag = int(kw.get("sys_flag", 0))  # type: ignore[call-overload]
        if sys_flag & 0xC in (0, 0x8):  # only NOT_TYPE and COMMIT_TYPE are dispatched
            self.units.setdefault((topic, queue_id), []).append((off, len(rec)))
        return off

    def close_file(self) -> None:
        """What a 4.9 broker does when the next record does not fit: a blank, then the next file."""
        base = self.pos // self.file_size * self.file_size
        remaining = base + self.file_size - self.pos
        self.files[base] += struct.pack(">iI", remaining, BLANK)
        self.pos = base + self.file_size

    def write(self) -> None:
        for base, data in self.files.items():
            with open(self.root / "commitlog" / f"{base:020d}", "wb") as f:
                f.write(data)
                f.truncate(self.file_size)
        for (topic, qid), units in self.units.items():
            d = self.root / "consumequeue" / topic / str(qid)
            d.mkdir(parents=True)
            with open(d / f"{0:020d}", "wb") as f:
                for off, size in units:
                    f.write(struct.pack(">qiq", off, size, 0))
                f.truncate(CQ_FILE)
        checkpoint = struct.pack(">qqq", 1_700_000_000_000, 0, 0).ljust(4096, b"\0")
        (self.root / "checkpoint").write_bytes(checkpoint)
        (self.root / "config").mkdir()
