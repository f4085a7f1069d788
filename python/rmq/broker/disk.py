"""How full the store's disk is, and how much the store holds: one rule behind every figure the broker shows.

The store acts on the used share of the file system holding the CommitLog (retention's
``diskMaxUsedSpaceRatio``, the write refusal at ``diskSpaceWarningLevelRatio``), counted as ``df`` and
RocketMQ count it: used blocks over used plus available ones, the blocks reserved for root left out
(``rust/store/src/disk.rs``). :func:`disk_used_ratio` is that rule; the metric
``rocketmq_storage_disk_ratio``, ``brokerStatus`` / ``clusterList``'s ``commitLogDiskRatio`` (and so the
dashboard) and the statistics log line all show it. :func:`store_bytes` is what the store's own files take
on disk, the metric ``rocketmq_storage_size`` (Apache's 5.x broker reports the file system's used bytes
there instead; a Grafana panel that wants those has node_exporter's figures).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator

from rmq.broker.config import BrokerConfig

__all__ = [
    "commitlog_dir",
    "commitlog_disk_ratio",
    "disk_used_ratio",
    "percent_up",
    "store_bytes",
    "store_dirs",
]

_STAT_BLOCK = 512
"""``st_blocks`` counts 512-byte units on Linux whatever the file system's block size."""


def disk_used_ratio(path: str) -> float | None:
    """The used share (0..1) of the file system holding ``path`` (or its nearest existing parent), as the
    store counts it; None when it cannot be read."""
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    used = st.f_blocks - st.f_bfree
    entire = used + st.f_bavail
    return used / entire if entire > 0 else None


def commitlog_dir(config: BrokerConfig) -> str:
    return os.path.expanduser(
        config.store.get("storePathCommitLog") or os.path.join(config.store_root, "commitlog")
    )


def commitlog_disk_ratio(config: BrokerConfig) -> float | None:
    """:func:`disk_used_ratio` of the CommitLog's file system: what the store acts on."""
    return disk_used_ratio(commitlog_dir(config))


def percent_up(ratio: float | None) -> str:
    """``ratio`` rounded up to a whole percent, as RocketMQ's ``commitLogDiskRatio`` (``-1``: unknown)."""
    return "-1" if ratio is None else str(math.ceil(ratio * 100 - 1e-9) / 100)


def store_dirs(config: BrokerConfig) -> list[str]:
    """The directories the store writes: its root, and the CommitLog, ConsumeQueue and index directories
    where ``storePathCommitLog`` / ``storePathConsumeQueue`` / ``storePathIndex`` move them elsewhere."""
    root = os.path.realpath(config.store_root)
    out = [root]
    for key in ("storePathCommitLog", "storePathConsumeQueue", "storePathIndex"):
        moved = config.store.get(key)
        if not moved:
            continue
        path = os.path.realpath(os.path.expanduser(moved))
        if not any(path == d or path.startswith(d + os.sep) for d in out):
            out = [d for d in out if not d.startswith(path + os.sep)] + [path]
    return out


def _files(directory: str) -> Iterator[os.DirEntry[str]]:
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                yield from _files(entry.path)
            elif entry.is_file(follow_symlinks=False):
                yield entry
        except OSError:
            continue


def store_bytes(config: BrokerConfig) -> int:
    """Bytes the store's files take on disk (allocated blocks: a CommitLog file reserved ahead of the
    appender counts what it reserved, a sparse one only what was written)."""
    total = 0
    for directory in store_dirs(config):
        for entry in _files(directory):
            try:
                total += entry.stat(follow_symlinks=False).st_blocks * _STAT_BLOCK
            except OSError:
                continue
    return total
