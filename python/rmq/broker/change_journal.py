"""An append-only journal of changes to a config table, between two writes of the whole table.

Files `<path>.journal.<seq>` (seq counts up from 1), one JSON object per line, appended with one
`write` per change: O(1) per change, and a line written survives a crash of the process (it is in
the page cache; the whole-table write that later covers it is fsynced). To write the table, the
owner :meth:`seals <ChangeJournal.seal>` the journal (later changes go to the next file), writes the
table, then :meth:`discards <ChangeJournal.discard>` the files the table now covers. Loading reads
the table, then :meth:`replays <ChangeJournal.replay>` every journal file in order; an entry may
already be in the table (a crash between the write and the discard), so entries must be idempotent
(set or remove a key). A torn last line (a crash in the middle of a write) is skipped with a warning.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import orjson

__all__ = ["ChangeJournal"]

log = logging.getLogger(__name__)


class ChangeJournal:
    def __init__(self, path: str) -> None:
        self.dir = os.path.dirname(path)
        self.prefix = os.path.basename(path) + ".journal."
        self._seq = max((seq for seq, _ in self._files()), default=0) + 1
        self._fd: int | None = None

    def _files(self) -> list[tuple[int, str]]:
        try:
            names = os.listdir(self.dir)
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        for name in names:
            if name.startswith(self.prefix) and name[len(self.prefix) :].isdigit():
                out.append((int(name[len(self.prefix) :]), os.path.join(self.dir, name)))
        return sorted(out)

    def replay(self) -> Iterator[dict[str, Any]]:
        """Every entry of every journal file, oldest first."""
        for _, path in self._files():
            with open(path, "rb") as f:
                lines = f.read().split(b"\n")
            for i, line in enumerate(lines):
                if not line.strip():
                    continue
                try:
                    entry = orjson.loads(line)
                except orjson.JSONDecodeError:
                    log.warning(
                        "%s: skipped unreadable line %d of %d (%d bytes)", path, i + 1, len(lines), len(line)
                    )
                    continue
                if isinstance(entry, dict):
                    yield entry

    def append(self, entry: dict[str, Any]) -> None:
        """Append one entry (raises OSError when it cannot)."""
        if self._fd is None:
            os.makedirs(self.dir, exist_ok=True)
            path = os.path.join(self.dir, f"{self.prefix}{self._seq}")
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, orjson.dumps(entry) + b"\n")

    def seal(self) -> int:
        """Close the current file: later entries go to the next. Returns the last sealed sequence
        number, for :meth:`discard` once the table covering it is written."""
        self.close()
        sealed = self._seq
        self._seq += 1
        return sealed

    def discard(self, upto: int) -> None:
        """Remove the files up to sequence `upto` (their changes are in the table written)."""
        for seq, path in self._files():
            if seq <= upto:
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
