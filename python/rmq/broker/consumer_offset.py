"""ConsumerOffsetManager: committed offsets per `topic@group` and queue, persisted to
`config/consumerOffset.json` (REMOTING.md §6.6) every `flushConsumerOffsetInterval` and at shutdown."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from rmq.broker.persist import load_json, persist_json

__all__ = ["ConsumerOffsetManager"]

SEPARATOR = "@"


class ConsumerOffsetManager:
    def __init__(self, config_dir: str) -> None:
        self.path = os.path.join(config_dir, "consumerOffset.json")
        self._table: dict[str, dict[int, int]] = {}
        self._dirty = False
        self.drain: Callable[[], None] | None = None
        """Applies the commits the network thread's pull fast path took since the last call (through
        :meth:`commit_taken`); run before every read or write of the table, so they land in order."""

    @property
    def table(self) -> dict[str, dict[int, int]]:
        """``topic@group`` -> queue id -> committed offset, the fast path's commits applied."""
        if self.drain is not None:
            self.drain()
        return self._table

    def commit_taken(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """A commit the pull fast path took (applied by ``drain``, without draining again)."""
        self._table.setdefault(topic + SEPARATOR + group, {})[queue_id] = offset
        self._dirty = True

    def load(self) -> None:
        data = load_json(self.path)
        if not data:
            return
        for key, queues in (data.get("offsetTable") or {}).items():
            self._table[str(key)] = {int(q): int(o) for q, o in (queues or {}).items()}

    def persist(self) -> None:
        persist_json(self.path, self.to_dict())
        self._dirty = False

    def persist_if_dirty(self) -> None:
        if self.drain is not None:
            self.drain()
        if self._dirty:
            self.persist()

    def to_dict(self) -> dict[str, Any]:
        return {"offsetTable": {k: {str(q): o for q, o in v.items()} for k, v in self.table.items()}}

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = topic + SEPARATOR + group
        queues = self.table.get(key)
        if queues is None:
            queues = self.table[key] = {}
        queues[queue_id] = offset
        self._dirty = True

    def take_all(self, table: dict[str, Any]) -> int:
        """Take a master's offsets (a slave's copy, RocketMQ's ``putAll``): each ``topic@group`` the
        master has replaces ours, the others stay. ``table`` is GET_ALL_CONSUMER_OFFSET's
        ``offsetTable``; returns how many ``topic@group`` entries were taken."""
        current = self.table
        for key, queues in table.items():
            current[str(key)] = {int(q): int(o) for q, o in (queues or {}).items()}
        self._dirty = True
        return len(table)

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 if none."""
        queues = self.table.get(topic + SEPARATOR + group)
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def topics_of_group(self, group: str) -> set[str]:
        return {k.partition(SEPARATOR)[0] for k in self.table if k.partition(SEPARATOR)[2] == group}

    def clone(self, src: str, dest: str, topic: str) -> dict[int, int]:
        """Give ``dest`` the offsets ``src`` committed on ``topic`` (replacing ``dest``'s); returns them."""
        offsets = self.offsets_of(src, topic)
        if offsets:
            self.table[topic + SEPARATOR + dest] = dict(offsets)
            self._dirty = True
        return offsets

    def groups_of_topic(self, topic: str) -> set[str]:
        out = set()
        for key in self.table:
            t, _, g = key.partition(SEPARATOR)
            if t == topic:
                out.add(g)
        return out

    def offsets_of(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(topic + SEPARATOR + group, {}))

    def remove_group(self, group: str) -> None:
        for key in [k for k in self.table if k.endswith(SEPARATOR + group)]:
            del self.table[key]
        self._dirty = True

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self.table if k.startswith(topic + SEPARATOR)]:
            del self.table[key]
        self._dirty = True
