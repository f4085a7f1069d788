"""The slave's HA client (RocketMQ's HAClient): connects to the master's HA port, reports its CommitLog
max offset (at connect, after each append, every `haSendHeartbeatInterval`), and appends the frames the
master streams verbatim at their offsets.

A frame whose offset is not where the slave's log ends is refused by the store; the slave then
disconnects with a warning naming both offsets and reconnects, reporting its offset again, so the
master resumes from it. The master's address is `haMasterAddress` or, without it, the `haServerAddr`
the name server answers to the slave's registration.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from rmq.broker.ha.codec import FRAME_HEADER, offset_report, parse_frame_header
from rmq.broker.ha.master import HASettings
from rmq.store import DiskFullError, MessageStore, ReplicaOffsetError, StoreConfigError, StoreShutDownError

__all__ = ["HAClient"]

log = logging.getLogger(__name__)

# Wait this long before connecting again after a failed or lost connection (RocketMQ's HAClient too).
_RECONNECT_S = 5.0


class HAClient:
    def __init__(self, store: MessageStore, settings: HASettings, master_address: str | None) -> None:
        self.store = store
        self.settings = settings
        self.master_address = master_address
        self.reported = -1
        self.connected = False
        self._address_changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-client")

    def update_master_address(self, addr: str | None) -> None:
        """The master's HA address as the name server answered (None or empty: none yet)."""
        if addr and addr != self.master_address:
            log.info("HA: master address %s (was %s)", addr, self.master_address)
            self.master_address = addr
            self._address_changed.set()

    async def _run(self) -> None:
        while True:
            addr = self.master_address
            if not addr:
                self._address_changed.clear()
                await self._address_changed.wait()
                continue
            try:
                await self._session(addr)
            except (OSError, asyncio.IncompleteReadError) as e:
                reason = str(e) or e.__class__.__name__
                log.warning("HA: connection to master %s lost or refused: %s", addr, reason)
            except Exception:
                log.exception("HA: replication from master %s failed", addr)
            self.connected = False
            self._address_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._address_changed.wait(), _RECONNECT_S)

    async def _session(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 3.0)
        self.connected = True
        heartbeat: asyncio.Task[None] | None = None
        try:
            start = self.store.commitlog_max_offset()
            log.info("HA: connected to master %s, requesting the CommitLog from offset %d", addr, start)
            self._report(writer, start)
            heartbeat = asyncio.get_running_loop().create_task(self._heartbeat(writer), name="ha-heartbeat")
            await self._receive(addr, reader, writer)
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
            writer.close()

    async def _receive(self, addr: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        store = self.store
        housekeeping = self.settings.housekeeping_s
        while True:
            try:
                head = await asyncio.wait_for(reader.readexactly(FRAME_HEADER), housekeeping)
            except TimeoutError:
                log.warning(
                    "HA: master %s sent nothing for %.0f s (haHousekeepingInterval): reconnecting",
                    addr,
                    housekeeping,
                )
                return
            offset, size = parse_frame_header(head)
            body = await reader.readexactly(size) if size > 0 else b""
            try:
                end = store.append_commitlog(offset, body)
            except ReplicaOffsetError as e:
                log.warning(
                    "HA: master %s pushed %d bytes at offset %d, not where this slave's log ends (%s): "
                    "disconnecting; the next connection resumes from this slave's offset",
                    addr,
                    size,
                    offset,
                    e,
                )
                return
            except (DiskFullError, StoreShutDownError, StoreConfigError) as e:
                log.warning(
                    "HA: cannot append %d replicated bytes at offset %d: %s; disconnecting", size, offset, e
                )
                return
            if end > self.reported:
                self._report(writer, end)

    def _report(self, writer: asyncio.StreamWriter, offset: int) -> None:
        writer.write(offset_report(offset))
        self.reported = offset

    async def _heartbeat(self, writer: asyncio.StreamWriter) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_s)
            self._report(writer, self.store.commitlog_max_offset())

    async def stop(self) -> None:
        task = self._task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
