"""The master's HA service (RocketMQ's HAService + HAConnection): listens on `haListenPort`, streams the
CommitLog to every connected slave from the offset it reports, and tracks the highest offset a slave
acknowledged (`push2SlaveMaxOffset`), which SYNC_MASTER answers wait for.

A slave starting empty (offset 0) gets the master's log from the start of its last CommitLog file, as
RocketMQ's master sends. A slave reporting an offset past the master's end (it holds data the master
lost, e.g. after an unclean master restart) is refused with a warning naming both offsets, so it is
never streamed to at a wrong offset; so is one whose offset lies past both where the master's log
ended when it started and what it streamed to slaves since (its tail was written by this master before
an unclean restart lost it, and the offsets now hold other messages here, however far this log grew:
accepting it would diverge it silently); so is one asking for data the master already deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from rmq.broker.ha.codec import OFFSET_REPORT, frame_header, parse_offset
from rmq.broker.persist import load_json, persist_json
from rmq.store import AsyncStore, MessageStore

__all__ = ["HAMaster", "HASettings"]

log = logging.getLogger(__name__)

# Read this much of the CommitLog at a time, sent as frames of at most `haTransferBatchSize`.
_READ_AHEAD = 1 << 20


class HASettings:
    """The HA properties (RocketMQ's names), in seconds and bytes."""

    def __init__(
        self,
        *,
        heartbeat_s: float = 5.0,
        housekeeping_s: float = 20.0,
        batch_size: int = 32 * 1024,
        fallbehind_max: int = 256 * 1024 * 1024,
        commitlog_file_size: int = 1 << 30,
    ) -> None:
        self.heartbeat_s = heartbeat_s
        self.housekeeping_s = housekeeping_s
        self.batch_size = batch_size
        self.fallbehind_max = fallbehind_max
        self.commitlog_file_size = commitlog_file_size


class _SlaveConnection:
    """One connected slave: a reader of its offset reports and a writer of CommitLog frames."""

    def __init__(
        self,
        master: HAMaster,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.master = master
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.request_offset = -1
        self.ack_offset = -1
        self.next_offset = -1
        self.wake = asyncio.Event()
        self._requested = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._read(), name=f"ha-read-{self.addr}"),
            loop.create_task(self._write(), name=f"ha-write-{self.addr}"),
        ]

    async def _read(self) -> None:
        try:
            while True:
                data = await asyncio.wait_for(
                    self.reader.readexactly(OFFSET_REPORT), self.master.settings.housekeeping_s
                )
                offset = parse_offset(data)
                if self._diverged(offset):
                    return
                self.ack_offset = offset
                if self.request_offset < 0:
                    self.request_offset = offset
                    log.info("HA: slave %s requests the CommitLog from offset %d", self.addr, offset)
                    self._requested.set()
                self.master.acked(offset)
        except TimeoutError:
            log.warning(
                "HA: slave %s sent nothing for %.0f s (haHousekeepingInterval): connection closed",
                self.addr,
                self.master.settings.housekeeping_s,
            )
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            log.info("HA: slave %s disconnected (%s)", self.addr, e.__class__.__name__)
        finally:
            self.close()

    def _diverged(self, offset: int) -> bool:
        """Whether a slave reporting `offset` holds a log that is not a prefix of this master's (warned
        about, with the offsets, and remembered in `haDivergedSlaves.json` across restarts)."""
        master = self.master
        master_max = master.store.commitlog_max_offset()
        if offset > master_max:
            log.warning(
                "HA: slave %s reports CommitLog offset %d, beyond this master's max offset %d: "
                "it holds %d bytes this master does not (an unclean master restart?); "
                "connection closed, nothing streamed to it",
                self.addr,
                offset,
                master_max,
                offset - master_max,
            )
        elif self.request_offset >= 0:
            return False
        elif offset > master.trusted_end():
            log.warning(
                "HA: slave %s reports CommitLog offset %d, beyond the %d bytes this master held when "
                "it started and the offset %d it streamed to slaves since: its log from offset %d "
                "holds %d bytes this master never sent it (written by this master before an unclean "
                "restart lost them, since overwritten here by other messages); connection closed, "
                "nothing streamed to it: it diverged, rebuild it from this master",
                self.addr,
                offset,
                master.recovered_end,
                master.streamed_max,
                master.trusted_end(),
                offset - master.trusted_end(),
            )
        elif offset in master.diverged:
            log.warning(
                "HA: slave %s reports CommitLog offset %d, where a slave ahead of this master was refused "
                "before (recorded in %s): its log is not a prefix of this master's; connection closed, "
                "nothing streamed to it: it diverged, rebuild it from this master (or remove the offset "
                "from that file)",
                self.addr,
                offset,
                master.diverged_path,
            )
            return True
        else:
            return False
        master.remember_diverged(offset)
        return True

    def _start_offset(self) -> int | None:
        store = self.master.store
        if self.request_offset == 0:
            top = store.commitlog_max_offset()
            return top - top % self.master.settings.commitlog_file_size
        low = store.commitlog_min_offset()
        if self.request_offset < low:
            log.warning(
                "HA: slave %s requests the CommitLog from offset %d, below this master's min offset %d "
                "(deleted by retention): connection closed, nothing streamed to it",
                self.addr,
                self.request_offset,
                low,
            )
            return None
        return self.request_offset

    async def _write(self) -> None:
        settings = self.master.settings
        store = self.master.store
        try:
            await self._requested.wait()
            start = self._start_offset()
            if start is None:
                self.close()
                return
            self.next_offset = start
            log.info("HA: streaming the CommitLog to slave %s from offset %d", self.addr, start)
            last_write = time.monotonic()
            while True:
                self.wake.clear()
                data = store.read_commitlog(self.next_offset, _READ_AHEAD)
                if data:
                    view = memoryview(data)
                    for i in range(0, len(view), settings.batch_size):
                        chunk = view[i : i + settings.batch_size]
                        self.writer.write(frame_header(self.next_offset, len(chunk)))
                        self.writer.write(chunk)
                        self.next_offset += len(chunk)
                    self.master.streamed_max = max(self.master.streamed_max, self.next_offset)
                    await self.writer.drain()
                    last_write = time.monotonic()
                    continue
                low = store.commitlog_min_offset()
                if self.next_offset < low:
                    log.warning(
                        "HA: slave %s needs the CommitLog from offset %d, deleted by retention (the log now "
                        "starts at %d): connection closed",
                        self.addr,
                        self.next_offset,
                        low,
                    )
                    return
                idle = time.monotonic() - last_write
                if idle >= settings.heartbeat_s:
                    self.writer.write(frame_header(self.next_offset, 0))
                    await self.writer.drain()
                    last_write = time.monotonic()
                    idle = 0.0
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), settings.heartbeat_s - idle)
        except (ConnectionError, OSError) as e:
            log.info("HA: writing to slave %s failed (%s)", self.addr, e)
        finally:
            self.close()

    def close(self) -> None:
        if self.master.remove(self):
            self.writer.close()
            current = asyncio.current_task()
            for t in self._tasks:
                if t is not current:
                    t.cancel()


class HAMaster:
    """Accepts slaves on the HA port; `push2slave_max` is the highest offset a slave acknowledged."""

    def __init__(
        self, store: MessageStore, astore: AsyncStore, settings: HASettings, diverged_path: str | None = None
    ) -> None:
        """`diverged_path`: the JSON file remembering the offsets of slaves refused as diverged, so a
        later run whose log grew past them refuses them still (None: remembered in memory only)."""
        self.store = store
        self.astore = astore
        self.settings = settings
        self.push2slave_max = 0
        self.recovered_end = store.commitlog_max_offset()
        """Where the CommitLog ended when this master started: a slave may hold all of it."""
        self.streamed_max = 0
        """The highest offset this master streamed a slave to since it started."""
        self.diverged_path = diverged_path
        loaded = load_json(diverged_path) if diverged_path else None
        self.diverged: set[int] = {int(o) for o in loaded} if isinstance(loaded, list) else set()
        """Offsets of slaves refused as diverged (a refused slave appends nothing: it reports the
        same offset again)."""
        self.connections: set[_SlaveConnection] = set()
        self._server: asyncio.Server | None = None
        self._ack_listeners: list[Callable[[int], None]] = []
        self._slave_listeners: list[Callable[[bool], None]] = []

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._accept, host, port)
        self.astore.dispatched.add_listener(self._on_dispatch)
        log.info("HA: master listening on %s:%d", host, self.port)

    def add_ack_listener(self, listener: Callable[[int], None]) -> None:
        """Call `listener(push2slave_max)` whenever a slave acknowledges a higher offset."""
        self._ack_listeners.append(listener)

    def add_slave_listener(self, listener: Callable[[bool], None]) -> None:
        """Call `listener(connected)` whenever whether a slave is connected changes (and once now)."""
        self._slave_listeners.append(listener)
        listener(bool(self.connections))

    def _slaves_changed(self, before: bool) -> None:
        now = bool(self.connections)
        if now != before:
            for listener in self._slave_listeners:
                listener(now)

    def trusted_end(self) -> int:
        """The highest offset a connecting slave's log may end at and still be a prefix of this master's:
        what this master held when it started, or streamed to a slave since. A slave ending beyond it holds
        bytes this master did not send (an unclean restart lost them), even once this log grows past it."""
        return max(self.recovered_end, self.streamed_max)

    def remember_diverged(self, offset: int) -> None:
        if offset in self.diverged:
            return
        self.diverged.add(offset)
        if self.diverged_path:
            persist_json(self.diverged_path, sorted(self.diverged))

    def is_slave_ok(self, master_put_where: int) -> bool:
        """A slave is connected and no more than `haSlaveFallbehindMax` behind `master_put_where`."""
        behind = master_put_where - self.push2slave_max
        return bool(self.connections) and behind < self.settings.fallbehind_max

    def notify(self) -> None:
        """New CommitLog data: wake every connection's writer."""
        for c in self.connections:
            c.wake.set()

    def acked(self, offset: int) -> None:
        if offset > self.push2slave_max:
            self.push2slave_max = offset
            for listener in self._ack_listeners:
                listener(offset)

    def _on_dispatch(self) -> bool:
        self.notify()
        return bool(self.connections)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _SlaveConnection(self, reader, writer)
        log.info("HA: slave %s connected", conn.addr)
        before = bool(self.connections)
        self.connections.add(conn)
        self._slaves_changed(before)
        conn.start()
        # Every dispatch round (appends by either send path) wakes the writers.
        self.astore.dispatched.watch()

    def remove(self, conn: _SlaveConnection) -> bool:
        if conn in self.connections:
            self.connections.discard(conn)
            self._slaves_changed(True)
            return True
        return False

    def status(self) -> dict[str, object]:
        """For runtime info: the slaves and what they acknowledged."""
        return {
            "slaves": [(c.addr, c.ack_offset) for c in self.connections],
            "push2SlaveMaxOffset": self.push2slave_max,
        }

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for c in list(self.connections):
            c.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
