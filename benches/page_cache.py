"""The page cache's state at the start of a benchmark run, so two brokers measured one after the other meet
the same memory (issue 31).

A broker writes every message into new page-cache pages (CommitLog, ConsumeQueue, index). Where those pages
come from changes what a page costs:

* **free memory** (a fresh machine, or memory freed moments ago): on a virtual machine whose free memory is
  handed back to the hypervisor (virtio free page reporting), each new page is also a fault in the host,
  several microseconds a page — paid inside the broker (the page is zeroed on first touch);
* **reclaimed page cache** (the steady state of any broker that has run longer than RAM ÷ write rate, a few
  minutes here): the kernel evicts old clean pages (``kswapd``, or the writer itself) and reuses them.

Without control the state drifts within a run: the first broker's writes fill memory, deleting its store
frees memory that the hypervisor takes back only after a while, and the later runs meet whatever is left —
the rows then measure the order they ran in. :class:`Filler` puts every run in the steady state: before a
broker starts it reads a sparse file (no disk space) into the page cache until little memory is free, so
the broker's new pages come from reclaim, as on a long-running broker. :func:`reclaim_cpu` is the CPU time
of the kernel's reclaim threads, which run outside the broker's process and are reported beside it.
"""

from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")
CHUNK = 8 << 20
SPARSE_SIZE = 1 << 40  # a hole: reading it allocates page cache, never disk blocks


def meminfo(field: str) -> int:
    """A /proc/meminfo field in bytes."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name == field:
            return int(rest.split()[0]) * 1024
    raise KeyError(f"/proc/meminfo has no {field}")


class Filler:
    """Fills the page cache with the pages of a sparse file at ``path`` (clean, unused, first to be
    reclaimed) until at most ``keep_free`` bytes of memory are free."""

    def __init__(self, path: Path, keep_free: int = 3 << 30) -> None:
        self.path = path
        self.keep_free = keep_free
        self._at = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.truncate(SPARSE_SIZE)

    def top_up(self) -> int:
        """Read on from where the last call stopped until MemFree is at most ``keep_free``, or until
        reading more no longer lowers it (the kernel already reclaims as fast as pages are added: the
        cache is as full as it gets); the bytes read (0 when memory is already that full)."""
        read, stalled = 0, 0
        buf = bytearray(CHUNK)
        cap = meminfo("MemTotal")
        fd = os.open(self.path, os.O_RDONLY)
        try:
            free = meminfo("MemFree")
            while free > self.keep_free and stalled < 3 and read < cap:
                for _ in range(16):  # MemFree once per 128 MiB
                    if self._at + CHUNK > SPARSE_SIZE:
                        self._at = 0
                    n = os.preadv(fd, [buf], self._at)
                    self._at += n
                    read += n
                now = meminfo("MemFree")
                stalled = stalled + 1 if free - now < 32 << 20 else 0
                free = now
        finally:
            os.close(fd)
        return read

    def close(self) -> None:
        self.path.unlink(missing_ok=True)


def reclaim_cpu() -> float:
    """CPU seconds the kernel's page reclaim threads (``kswapd*``) have used since boot."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.find("(") + 1 : text.rfind(")")]
        if name.startswith("kswapd"):
            fields = text[text.rfind(")") + 2 :].split()
            total += (int(fields[11]) + int(fields[12])) / _TICKS
    return total
