"""The store's repair journal, as the broker shows it: each recovery step, repair and refusal the
store made is logged (WARN for repairs and refusals) and listed in GET_BROKER_RUNTIME_INFO.

The store records events itself (it never calls Python); the broker drains the new ones into its
log right after opening the store and then every second.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

log = logging.getLogger("rmq.store")

Event = tuple[int, str, str, str]


class JournalSource(Protocol):
    def journal(self) -> list[Event]: ...
    def take_new_journal_events(self) -> list[Event]: ...


def log_new_events(store: JournalSource) -> int:
    """Log the events recorded since the last call; returns how many."""
    events = store.take_new_journal_events()
    for _ms, level, kind, message in events:
        log.log(logging.WARNING if level == "WARN" else logging.INFO, "store %s: %s", kind, message)
    return len(events)


def runtime_info(store: JournalSource) -> dict[str, str]:
    """Runtime-info entries: the number of repairs and one line per repair (warnings only),
    kept until the next start after a clean shutdown."""
    repairs = [e for e in store.journal() if e[1] == "WARN"]
    table = {"storeRepairCount": str(len(repairs))}
    for i, (ms, _level, kind, message) in enumerate(repairs):
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))
        table[f"storeRepair{i:03d}"] = f"{when} {kind}: {message}"
    return table
