"""RemotingServer: listens, owns the accepted channels, dispatches their requests.

::

    server = RemotingServer()
    server.register(RequestCode.HEART_BEAT, heartbeat)   # processor(ctx, request) -> RemotingCommand | None
    await server.start("127.0.0.1", 0)                   # port 0: any free port, see server.port
    ...
    await server.stop()

Channels idle (nothing received) for ``idle_timeout_s`` (120 s, Java's ``serverChannelMaxIdleTimeSeconds``)
are closed by a sweep every ``idle_check_interval_s``. Close listeners registered with
:meth:`RemotingServer.add_close_listener` hear about every channel that closes (the name server drops the
broker behind it, the broker drops the channel's producers and consumers).

``RemotingServer(tls=TlsServerSettings(mode="enforcing", cert_path=..., key_path=...))`` serves TLS as
RocketMQ's ``tls.server.*`` properties describe (:mod:`rmq.remoting.tls`): each accepted connection starts
behind a :class:`~rmq.remoting.tls.TlsGate` that decides between plain text, TLS and refusal.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping

from rmq.common.ratelog import RefusalLog
from rmq.common.service import PeriodicTask
from rmq.remoting.channel import Channel, OpaqueSource
from rmq.remoting.codec import DEFAULT_MAX_FRAME_LENGTH
from rmq.remoting.context import Processor
from rmq.remoting.dispatcher import DEFAULT_MAX_IN_FLIGHT, Dispatcher
from rmq.remoting.tls import TlsGate, TlsServerSettings

__all__ = ["RemotingServer"]

log = logging.getLogger(__name__)


class RemotingServer:
    def __init__(
        self,
        *,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        answer_unsupported: bool = True,
        idle_timeout_s: float | None = 120.0,
        idle_check_interval_s: float = 10.0,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        close_timeout_s: float = 5.0,
        name: str = "remoting-server",
        tls: TlsServerSettings | None = None,
    ) -> None:
        self.name = name
        self.tls = tls if tls is not None and tls.enabled else None
        self.tls_refusals = RefusalLog(log, "connections")
        """Connections refused by TLS (plaintext under ``enforcing``, failed handshakes): counted, and logged
        at WARN with the peer's address, once per 10 s per reason and peer host (repeats summed)."""
        self.close_timeout_s = close_timeout_s
        self.dispatcher = Dispatcher(max_in_flight=max_in_flight, answer_unsupported=answer_unsupported)
        self.idle_timeout_s = idle_timeout_s
        self.max_frame_length = max_frame_length
        self._idle_check_interval_s = idle_check_interval_s
        self._channels: dict[int, Channel] = {}
        self._open_listeners: list[Callable[[Channel], object]] = []
        self._close_listeners: list[Callable[[Channel], object]] = []
        self._next_opaque = OpaqueSource()
        self._server: asyncio.Server | None = None
        self._idle_task: PeriodicTask | None = None
        self._port = 0
        self._host = ""

    # --- wiring -------------------------------------------------------------------------------------------

    def register(self, code: int, processor: Processor) -> None:
        self.dispatcher.register(code, processor)

    def register_default(self, processor: Processor | None) -> None:
        self.dispatcher.register_default(processor)

    def add_open_listener(self, listener: Callable[[Channel], object]) -> None:
        self._open_listeners.append(listener)

    def add_close_listener(self, listener: Callable[[Channel], object]) -> None:
        self._close_listeners.append(listener)

    # --- state --------------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (useful after ``start(port=0)``); 0 before start."""
        return self._port

    @property
    def host(self) -> str:
        return self._host

    @property
    def channels(self) -> Mapping[int, Channel]:
        """Open channels by channel id."""
        return self._channels

    def get_channel(self, channel_id: int) -> Channel | None:
        return self._channels.get(channel_id)

    def close_channel(self, channel_id: int) -> bool:
        channel = self._channels.get(channel_id)
        if channel is None:
            return False
        channel.close()
        return True

    @property
    def is_serving(self) -> bool:
        return self._server is not None

    # --- lifecycle ----------------------------------------------------------------------------------------

    async def start(self, host: str = "0.0.0.0", port: int = 0, *, reuse_address: bool = True) -> None:
        if self._server is not None:
            raise RuntimeError(f"{self.name} already started")
        loop = asyncio.get_running_loop()
        factory: Callable[[], asyncio.Protocol] = self._make_channel
        if self.tls is not None:
            settings, context = self.tls, self.tls.context()

            def factory() -> asyncio.Protocol:
                return TlsGate(self._make_channel(), settings, context, self._count_refused)

        self._server = await loop.create_server(
            factory, host, port, reuse_address=reuse_address, backlog=1024
        )
        sockets = self._server.sockets
        self._port = sockets[0].getsockname()[1] if sockets else port
        self._host = host
        self._start_idle_sweep()
        tls = f" (tls.server.mode={self.tls.mode})" if self.tls is not None else ""
        log.info("%s listening on %s:%d%s", self.name, host, self._port, tls)

    @property
    def tls_refused(self) -> int:
        """How many connections TLS refused so far."""
        return self.tls_refusals.count

    def _count_refused(self, what: str, peer: str) -> None:
        host = peer.rsplit(":", 1)[0] if peer.count(":") == 1 else peer
        self.tls_refusals.refused(f"{what} from {host}", "%s: refusing %s from %s", self.name, what, peer)

    def _start_idle_sweep(self) -> None:
        if self.idle_timeout_s is not None:
            self._idle_task = PeriodicTask(
                f"{self.name}-idle-sweep", self._idle_check_interval_s, self.sweep_idle
            )
            self._idle_task.start()

    async def _stop_idle_sweep(self) -> None:
        if self._idle_task is not None:
            await self._idle_task.stop()
            self._idle_task = None

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        await self._stop_idle_sweep()
        channels = list(self._channels.values())
        for channel in channels:
            channel.close()
        await self.dispatcher.cancel_all()
        if channels:
            await asyncio.gather(*(ch.close_and_wait(self.close_timeout_s) for ch in channels))
        await server.wait_closed()
        log.info("%s stopped (port %d)", self.name, self._port)

    def sweep_idle(self, now: float | None = None) -> int:
        """Close channels that received nothing for ``idle_timeout_s``; returns how many."""
        self.tls_refusals.tick()
        if self.idle_timeout_s is None:
            return 0
        now = time.monotonic() if now is None else now
        limit = now - self.idle_timeout_s
        expired = [ch for ch in self._channels.values() if ch.last_seen < limit]
        for channel in expired:
            log.info("closing idle channel %s (%s)", channel.channel_id, channel.remote_addr)
            channel.close()
        return len(expired)

    # --- internals ----------------------------------------------------------------------------------------

    def _make_channel(self) -> Channel:
        return Channel(
            self.dispatcher,
            self._next_opaque,
            max_frame_length=self.max_frame_length,
            pause_reading_when_congested=True,
            on_open=self._channel_opened,
            on_close=self._channel_closed,
        )

    def _channel_opened(self, channel: Channel) -> None:
        self._channels[channel.channel_id] = channel
        for listener in self._open_listeners:
            try:
                listener(channel)
            except Exception:
                log.exception("open listener failed for %s", channel.remote_addr)

    def _channel_closed(self, channel: Channel) -> None:
        self._channels.pop(channel.channel_id, None)
        for listener in self._close_listeners:
            try:
                listener(channel)
            except Exception:
                log.exception("close listener failed for %s", channel.remote_addr)
