"""A rate-limited WARN log for refusals a peer can repeat at will (a flood must not flood the log).

``RefusalLog(logger)`` logs the first refusal of each distinct key once per window (10 s), counts the
repeats, and sums them up in one line per key when a later refusal (or :meth:`flush`) finds the window
over; at most ``distinct`` keys are logged per window, the others only counted. ``count`` is the running
total of every refusal, logged or not.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

__all__ = ["RefusalLog"]

_WINDOW_S: Final = 10.0
_DISTINCT: Final = 100


class RefusalLog:
    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        *,
        window_s: float = _WINDOW_S,
        distinct: int = _DISTINCT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = logger
        self.what = what
        """Names the refusals in the summary lines (``"refused 3 more <what> in the last 10 s: <key>"``)."""
        self.window_s = window_s
        self.distinct = distinct
        self.clock = clock
        self.count = 0
        self._window_start: float | None = None
        self._repeats: dict[str, int] = {}
        self._suppressed = 0

    def refused(self, key: str, msg: str, *args: object) -> None:
        """Count one refusal; log ``msg % args`` as a WARN unless ``key`` was logged in this window."""
        self.count += 1
        now = self.clock()
        if self._window_start is None or now - self._window_start >= self.window_s:
            self.flush()
            self._window_start = now
        seen = self._repeats.get(key)
        if seen is not None:
            self._repeats[key] = seen + 1
        elif len(self._repeats) < self.distinct:
            self._repeats[key] = 0
            self.log.warning(msg + " (%d refused so far)", *args, self.count)
        else:
            self._suppressed += 1

    def flush(self) -> None:
        """Log the repeats counted so far and start a new window."""
        for key, more in self._repeats.items():
            if more:
                self.log.warning(
                    "refused %d more %s in the last %g s: %s", more, self.what, self.window_s, key
                )
        if self._suppressed:
            self.log.warning(
                "refused %d more %s for other reasons in the last %g s (not logged one by one)",
                self._suppressed,
                self.what,
                self.window_s,
            )
        self._repeats.clear()
        self._suppressed = 0
        self._window_start = None

    def tick(self) -> None:
        """For a periodic task: flush once the window is over, so the last repeats are not left unsaid."""
        if self._window_start is not None and self.clock() - self._window_start >= self.window_s:
            self.flush()
