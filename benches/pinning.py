"""CPU pinning for the benchmarks (issue 31 item 1): the broker and the load generator on disjoint CPU
sets, so a ratio between brokers compares brokers, and each side's CPU share over a window, so a row shows
which side was the bottleneck.

A process started inside :func:`pinned` inherits the CPU set (every thread it makes later, too); the
benchmark process itself returns to its own set afterwards.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

_TICKS = os.sysconf("SC_CLK_TCK")


def parse_cpus(spec: str) -> set[int]:
    """``"0"``, ``"0-1"``, ``"0,2-3"`` as a set of CPU numbers; a CPU this process may not use is an error."""
    out: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi or lo)
        except ValueError:
            raise ValueError(f"CPU list {spec!r}: {part!r} is not a number or a range") from None
        if first > last:
            raise ValueError(f"CPU list {spec!r}: range {part!r} runs backwards")
        out.update(range(first, last + 1))
    if not out:
        raise ValueError(f"CPU list {spec!r} names no CPU")
    allowed = os.sched_getaffinity(0)
    if not out <= allowed:
        missing = sorted(out - allowed)
        may = sorted(allowed)
        raise ValueError(f"CPU list {spec!r}: CPUs {missing} are not available (this process may use {may})")
    return out


def cpu_sets(broker: str | None, load: str | None) -> tuple[set[int] | None, set[int] | None]:
    """``--broker-cpus`` and ``--load-cpus`` parsed (None where not given); ValueError when either is bad
    or they overlap (a ratio of brokers needs the load kept off the broker's CPUs)."""
    b = parse_cpus(broker) if broker else None
    g = parse_cpus(load) if load else None
    if b and g and b & g:
        raise ValueError(f"--broker-cpus and --load-cpus overlap on {sorted(b & g)}")
    return b, g


def cpu_list(cpus: set[int] | None) -> str:
    """``0,2,3`` (``any`` for None)."""
    return ",".join(map(str, sorted(cpus))) if cpus else "any"


def pin_sentence(broker: set[int] | None, load: set[int] | None, servers: str, loads: str) -> str:
    """A RESULTS.md bullet saying how ``servers`` and ``loads`` (plural nouns) were pinned."""
    if broker is None and load is None:
        return f"- Not pinned: {servers} and {loads} share the cores as the scheduler places them.\n"
    return (
        f"- Pinned (`benches/pinning.py`): {servers} on CPU {cpu_list(broker)}, {loads} on CPU "
        f"{cpu_list(load)}; a server's CPU share near 100% per pinned CPU marks it as the row's bottleneck.\n"
    )


@contextmanager
def pinned(cpus: set[int] | None) -> Iterator[None]:
    """Run the block with this process on `cpus` (None: unchanged): processes it starts inherit them."""
    if cpus is None:
        yield
        return
    own = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, own)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (all its threads) so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14 and 15 of stat)


class CpuShare:
    """CPU share of some processes over a window: 1.0 is one CPU busy the whole time."""

    def __init__(self, *pids: int) -> None:
        self.pids = pids
        self.t0 = time.monotonic()
        self.c0 = [cpu_seconds(p) for p in pids]

    def shares(self) -> list[float]:
        wall = time.monotonic() - self.t0
        return [(cpu_seconds(p) - c) / wall for p, c in zip(self.pids, self.c0, strict=True)]
