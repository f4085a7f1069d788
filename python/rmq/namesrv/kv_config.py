"""The name server's KV config: namespace -> key -> value, persisted as JSON (Java ``KVConfigManager``).

File format (Java ``KVConfigSerializeWrapper``)::

    {"configTable": {"ORDER_TOPIC_CONFIG": {"TopicA": "broker-a:4;broker-b:4"}}}

Every change rewrites the whole file atomically: write ``<path>.tmp``, fsync, rename over ``<path>``. With
``path=None`` the table lives in memory only. The file is small and changes are rare admin operations, so
the write happens inline on the event loop.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from rmq.common import fastjson

__all__ = ["KVConfigManager", "default_kv_config_path"]

log = logging.getLogger(__name__)


def default_kv_config_path() -> Path:
    """Java's default: ``$HOME/namesrv/kvConfig.json``."""
    return Path.home() / "namesrv" / "kvConfig.json"


class KVConfigManager:
    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        """Read the file if it exists (a missing file is an empty table; a corrupt one is an error)."""
        if self.path is None or not self.path.exists():
            return
        data = self.path.read_bytes()
        if not data.strip():
            return
        doc = fastjson.loads(data)
        table = doc.get("configTable") if isinstance(doc, dict) else None
        if not isinstance(table, dict):
            raise ValueError(f"{self.path}: no configTable object")
        for namespace, entries in table.items():
            if isinstance(entries, dict):
                self._table[str(namespace)] = {str(k): str(v) for k, v in entries.items() if v is not None}
        log.info("loaded KV config from %s (%d namespaces)", self.path, len(self._table))

    def put(self, namespace: str, key: str, value: str) -> None:
        self._table.setdefault(namespace, {})[key] = value
        self.persist()

    def get(self, namespace: str, key: str) -> str | None:
        entries = self._table.get(namespace)
        return entries.get(key) if entries is not None else None

    def delete(self, namespace: str, key: str) -> None:
        entries = self._table.get(namespace)
        if entries is not None and entries.pop(key, None) is not None:
            self.persist()

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of one namespace, or ``None`` if it was never created (an emptied one stays, as in Java)."""
        entries = self._table.get(namespace)
        return dict(entries) if entries is not None else None

    def kv_list_json(self, namespace: str) -> bytes | None:
        """The namespace as a KVTable body ``{"table": {...}}``, or ``None``."""
        entries = self._table.get(namespace)
        return fastjson.dumps({"table": entries}) if entries is not None else None

    def persist(self) -> None:
        if self.path is None:
            return
        data = fastjson.dumps({"configTable": self._table})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        try:
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dir_fd)
        except OSError:
            pass
        finally:
            os.close(dir_fd)
