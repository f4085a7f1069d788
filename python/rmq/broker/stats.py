"""Message counts over time: per-key counts over the last minute, hour and day (what
VIEW_BROKER_STATS_DATA reports), and the broker's put / get rates of the runtime info.

A :class:`WindowCounter` keeps, per key, three rings of buckets: 10-second buckets for the last minute,
1-minute buckets for the last hour and 1-hour buckets for the last day. :meth:`WindowCounter.add` adds to
the current bucket of each ring; :meth:`WindowCounter.window` sums the buckets that started within the
window (so a window's sum can include up to one bucket's width more than the exact window). A key costs at
most 7 + 61 + 25 buckets, whatever the message rate.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Final

__all__ = ["DAY_MS", "HOUR_MS", "MINUTE_MS", "RateSampler", "WindowCounter", "WindowSum"]

MINUTE_MS: Final = 60_000
HOUR_MS: Final = 3_600_000
DAY_MS: Final = 86_400_000
# (window, bucket width) of each ring.
_RINGS: Final = ((MINUTE_MS, 10_000), (HOUR_MS, MINUTE_MS), (DAY_MS, HOUR_MS))


@dataclass(frozen=True)
class WindowSum:
    sum: int
    times: int
    """How many :meth:`WindowCounter.add` calls made ``sum``."""


@dataclass
class _Rings:
    # One deque of [bucket start ms, sum, times] per ring.
    rings: tuple[deque[list[int]], ...] = field(default_factory=lambda: tuple(deque() for _ in _RINGS))


class WindowCounter:
    def __init__(self) -> None:
        self._keys: dict[str, _Rings] = {}

    def add(self, key: str, n: int, now_ms: int | None = None) -> None:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        rings = self._keys.get(key)
        if rings is None:
            rings = self._keys[key] = _Rings()
        for ring, (window, width) in zip(rings.rings, _RINGS, strict=True):
            start = now - now % width
            if ring and ring[-1][0] == start:
                ring[-1][1] += n
                ring[-1][2] += 1
            else:
                ring.append([start, n, 1])
            while ring and ring[0][0] <= now - window - width:
                ring.popleft()

    def forget(self, *, topic: str | None = None, group: str | None = None) -> int:
        """Drop the ``topic@group`` keys of a deleted topic or group (as Apache drops their stats); returns
        how many. Neither name can hold an ``@``."""
        gone = [
            k
            for k in self._keys
            if (topic is not None and k.partition("@")[0] == topic)
            or (group is not None and k.partition("@")[2] == group)
        ]
        for k in gone:
            del self._keys[k]
        return len(gone)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def window(self, key: str, window_ms: int, now_ms: int | None = None) -> WindowSum:
        """The count of ``key`` in the last ``window_ms`` (MINUTE_MS, HOUR_MS or DAY_MS)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        rings = self._keys.get(key)
        if rings is None:
            return WindowSum(0, 0)
        index = [w for w, _ in _RINGS].index(window_ms)
        width = _RINGS[index][1]
        total = times = 0
        for start, n, t in rings.rings[index]:
            if start > now - window_ms - width:
                total += n
                times += t
        return WindowSum(total, times)


class RateSampler:
    """A running total sampled about once a second (:meth:`sample`); :meth:`text` gives its rate per second
    over the last 10 s, 1 min and 10 min, as Apache's runtime info (``putTps``, ``getTransferedTps``...)."""

    WINDOWS_S: Final = (10, 60, 600)

    def __init__(self) -> None:
        self._samples: deque[tuple[int, int]] = deque(maxlen=self.WINDOWS_S[-1] + 2)

    def sample(self, total: int, now_ms: int | None = None) -> None:
        self._samples.append((int(time.time() * 1000) if now_ms is None else now_ms, total))

    def rate(self, window_s: int) -> float:
        """Per second, from the newest sample back to the oldest one within ``window_s`` (0 with fewer
        than two samples)."""
        if len(self._samples) < 2:
            return 0.0
        last_ms, last = self._samples[-1]
        first_ms, first = next((t, v) for t, v in self._samples if t >= last_ms - window_s * 1000)
        if last_ms <= first_ms:
            return 0.0
        return (last - first) * 1000 / (last_ms - first_ms)

    def text(self) -> str:
        return " ".join(str(self.rate(w)) for w in self.WINDOWS_S)
