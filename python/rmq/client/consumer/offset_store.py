"""Consumer offset stores (``CL/consumer/store/*.java``).

* :class:`RemoteBrokerOffsetStore` (CLUSTERING): offsets live on the broker of each queue. Reads query
  QUERY_CONSUMER_OFFSET (22 = the group never committed there -> -1); the in-memory table is sent with
  UPDATE_CONSUMER_OFFSET, oneway every 5 s (:meth:`persist_all`) and acknowledged at shutdown.
* :class:`LocalFileOffsetStore` (BROADCASTING): ``<dir>/<clientId>/<group>/offsets.json`` in the Java
  client's format ``{"offsetTable":{<MessageQueue>:offset}}`` (fastjson object keys), written to a temp file
  and renamed, with a ``.bak`` copy of the previous version; the default directory is
  ``$ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR`` or ``~/.rocketmq_offsets`` as in Java.

Offsets are "the next offset to consume". ``update_offset(mq, offset, increase_only=True)`` never moves an
offset backwards (what concurrent consumption commits); seeks and resets pass ``increase_only=False``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from rmq.client.errors import MQClientError, NoRouteError, OffsetNotFoundError
from rmq.client.message import MessageQueue
from rmq.common import fastjson
from rmq.remoting import RemotingError

if TYPE_CHECKING:
    from rmq.client.instance import ClientInstance

__all__ = ["LocalFileOffsetStore", "OffsetStore", "ReadOffsetType", "RemoteBrokerOffsetStore"]

log = logging.getLogger(__name__)


class ReadOffsetType(Enum):
    READ_FROM_MEMORY = 0
    READ_FROM_STORE = 1
    MEMORY_FIRST_THEN_STORE = 2


class OffsetStore(Protocol):
    def load(self) -> None: ...
    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None: ...
    async def read_offset(self, mq: MessageQueue, kind: ReadOffsetType) -> int: ...
    async def persist_all(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None: ...
    async def persist(self, mq: MessageQueue, *, oneway: bool = True) -> None: ...
    def remove_offset(self, mq: MessageQueue) -> None: ...
    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]: ...


class _MemoryTable:
    def __init__(self) -> None:
        self.offset_table: dict[MessageQueue, int] = {}

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        old = self.offset_table.get(mq)
        if old is None or not increase_only or offset > old:
            self.offset_table[mq] = offset

    def remove_offset(self, mq: MessageQueue) -> None:
        self.offset_table.pop(mq, None)

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        return {mq: off for mq, off in self.offset_table.items() if topic is None or mq.topic == topic}


class RemoteBrokerOffsetStore(_MemoryTable):
    def __init__(self, instance: ClientInstance, group: str) -> None:
        super().__init__()
        self.instance = instance
        self.group = group

    def load(self) -> None:
        pass

    async def read_offset(self, mq: MessageQueue, kind: ReadOffsetType) -> int:
        """-1: no offset; -2: the broker could not be asked (``readOffset`` of Java)."""
        if kind is not ReadOffsetType.READ_FROM_STORE:
            offset = self.offset_table.get(mq)
            if offset is not None:
                return offset
            if kind is ReadOffsetType.READ_FROM_MEMORY:
                return -1
        try:
            offset = await self.fetch_offset_from_broker(mq)
        except OffsetNotFoundError:
            return -1
        except (RemotingError, MQClientError) as exc:
            log.warning("fetchConsumeOffsetFromBroker of %s failed: %s", mq, exc)
            return -2
        self.update_offset(mq, offset, False)
        return offset

    async def _addr(self, mq: MessageQueue) -> str:
        """The master of ``mq``'s broker; when the name server no longer has it (it died), a slave of the
        group (as Java's RemoteBrokerOffsetStore asks), so offsets are read and committed there
        meanwhile and the master is asked again once it is back."""
        found = self.instance.find_broker_addr_in_subscribe(mq.broker_name, 0, True)
        if found is None:
            await self.instance.update_topic_route(mq.topic)
            found = self.instance.find_broker_addr_in_subscribe(mq.broker_name, 0, False)
        if found is None:
            raise NoRouteError(f"The broker[{mq.broker_name}] not exist", 10003)
        return found[0]

    async def fetch_offset_from_broker(self, mq: MessageQueue) -> int:
        addr = await self._addr(mq)
        return await self.instance.api.query_consumer_offset(addr, self.group, mq, self.instance.timeout_ms)

    async def update_offset_to_broker(self, mq: MessageQueue, offset: int, *, oneway: bool = True) -> None:
        addr = await self._addr(mq)
        await self.instance.api.update_consumer_offset(
            addr, self.group, mq, offset, oneway=oneway, timeout_ms=self.instance.timeout_ms
        )

    async def persist_all(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None:
        mq_set = set(mqs)
        for mq, offset in list(self.offset_table.items()):
            if mq in mq_set:
                try:
                    await self.update_offset_to_broker(mq, offset, oneway=oneway)
                except (RemotingError, MQClientError) as exc:
                    log.warning("updateConsumeOffsetToBroker %s offset %d failed: %s", mq, offset, exc)
            else:
                # No longer ours (rebalanced away): forget it so a stale value is never written later.
                self.offset_table.pop(mq, None)

    async def persist(self, mq: MessageQueue, *, oneway: bool = True) -> None:
        offset = self.offset_table.get(mq)
        if offset is None:
            return
        try:
            await self.update_offset_to_broker(mq, offset, oneway=oneway)
        except (RemotingError, MQClientError) as exc:
            log.warning("updateConsumeOffsetToBroker %s offset %d failed: %s", mq, offset, exc)


def default_local_offset_dir() -> Path:
    env = os.environ.get("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR")
    return Path(env) if env else Path.home() / ".rocketmq_offsets"


class LocalFileOffsetStore(_MemoryTable):
    def __init__(self, client_id: str, group: str, store_dir: str | Path | None = None) -> None:
        super().__init__()
        self.group = group
        base = Path(store_dir) if store_dir is not None else default_local_offset_dir()
        self.path = base / client_id / group / "offsets.json"

    def _read_file(self, path: Path) -> dict[MessageQueue, int] | None:
        try:
            text = path.read_bytes()
        except FileNotFoundError:
            return None
        if not text.strip():
            return None
        data = fastjson.loads(text) or {}
        table: dict[MessageQueue, int] = {}
        for key, value in (data.get("offsetTable") or {}).items():
            mapping = key.as_dict() if isinstance(key, fastjson.ObjectKey) else fastjson.loads(key)
            table[MessageQueue.from_dict(mapping)] = int(value)
        return table

    def read_local(self) -> dict[MessageQueue, int]:
        """The file's table; the ``.bak`` copy if the file is missing, empty or unreadable."""
        try:
            table = self._read_file(self.path)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("cannot read %s (%s); trying the backup", self.path, exc)
            table = None
        if table is None:
            try:
                table = self._read_file(self.path.with_name(self.path.name + ".bak"))
            except (ValueError, KeyError, TypeError) as exc:
                raise MQClientError(
                    f"readLocalOffset Exception, maybe fastjson version too low: {exc}"
                ) from exc
        return table or {}

    def load(self) -> None:
        for mq, offset in self.read_local().items():
            self.offset_table[mq] = offset

    async def read_offset(self, mq: MessageQueue, kind: ReadOffsetType) -> int:
        if kind is not ReadOffsetType.READ_FROM_STORE:
            offset = self.offset_table.get(mq)
            if offset is not None:
                return offset
            if kind is ReadOffsetType.READ_FROM_MEMORY:
                return -1
        try:
            stored = self.read_local().get(mq)
        except MQClientError:
            return -1
        if stored is None:
            return -1
        self.update_offset(mq, stored, False)
        return stored

    def write(self, mqs: Iterable[MessageQueue] | None = None) -> None:
        """Write the offsets of ``mqs`` (all when ``None``) atomically, keeping a ``.bak`` of the old file."""
        mq_set = None if mqs is None else set(mqs)
        table = {
            fastjson.ObjectKey.from_mapping(mq.to_dict()): off
            for mq, off in self.offset_table.items()
            if mq_set is None or mq in mq_set
        }
        data = fastjson.dumps_with_object_keys({"offsetTable": table})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if self.path.exists():
            os.replace(self.path, self.path.with_name(self.path.name + ".bak"))
        os.replace(tmp, self.path)

    async def persist_all(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None:
        mq_list = list(mqs)
        if mq_list:
            self.write(mq_list)

    async def persist(self, mq: MessageQueue, *, oneway: bool = True) -> None:
        pass  # Java persists the local file only in persistAll
