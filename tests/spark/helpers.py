"""Helpers of the PySpark reader tests: what a test store holds and how to read it without Spark."""

from __future__ import annotations

import hashlib
import time
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
