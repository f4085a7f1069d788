"""A RemotingServer whose sockets live in Rust: the broker's network thread (``rmq._store.NetServer``).

The network thread accepts connections, reads and frames their bytes and answers the SEND fast path
(SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE to topics the broker vetted, as the Java and C++
clients send them) without Python; ``NetServer.fast_send_stats()`` counts what it took and declined.
Every other frame reaches the event loop as an event and is handled exactly as on the asyncio server:
each connection is a :class:`~rmq.remoting.channel.Channel` whose transport is a
:class:`NativeTransport`, so processors, the dispatcher, request/response matching and close callbacks
are the same code.

With ``tls`` (:class:`~rmq.remoting.tls.TlsServerSettings`, permissive or enforcing) the network thread
runs TLS itself (rustls): it sniffs each new connection's first byte as the asyncio server does, encrypts
and decrypts in the thread, and the fast path answers TLS sends as it answers plain ones. Connections it
refuses arrive as events and are logged here. It takes no encrypted private key (``key_password``).

The event loop watches the thread's eventfd, takes the waiting events (open / frames / closed), handles them
in order and acknowledges them; until then the thread sends later frames of those connections to Python too,
so a fast-path send never overtakes a request Python is still handling.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from rmq import _store
from rmq.remoting.channel import Channel
from rmq.remoting.server import RemotingServer
from rmq.remoting.tls import TlsConfigError

__all__ = ["NativeRemotingServer", "NativeTransport"]

log = logging.getLogger(__name__)

_OPEN, _DATA, _CLOSED, _REFUSED = 0, 1, 2, 3


def _split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


class NativeTransport:
    """What a :class:`Channel` uses of ``asyncio.Transport``, over one connection of the network thread."""

    __slots__ = ("_closing", "_conn", "_local", "_net", "_peer")

    def __init__(self, net: _store.NetServer, conn: int, peer: str, local: str) -> None:
        self._net = net
        self._conn = conn
        self._peer = _split_addr(peer)
        self._local = _split_addr(local)
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._net.write(self._conn, [data])

    def writelines(self, parts: Iterable[bytes | bytearray | memoryview]) -> None:
        self._net.write(self._conn, list(parts))

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._net.close(self._conn)

    def abort(self) -> None:
        self._closing = True
        self._net.abort(self._conn)

    def is_closing(self) -> bool:
        return self._closing

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return self._peer
        if name == "sockname":
            return self._local
        return default

    def get_write_buffer_size(self) -> int:
        return self._net.write_buffer_size(self._conn)

    # The network thread stops reading a congested connection by itself.
    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class NativeRemotingServer(RemotingServer):
    """:class:`RemotingServer` with the sockets in the network thread and the SEND fast path."""

    def __init__(self, *, flush_timeout_ms: int = 5000, spin_us: int = 50, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._flush_timeout_ms = flush_timeout_ms
        self._spin_us = spin_us
        self._net: _store.NetServer | None = None
        self._by_conn: dict[int, Channel] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def net(self) -> _store.NetServer | None:
        """The network thread (for :meth:`enable_fast_send` and the fast path's topic list)."""
        return self._net

    @property
    def is_serving(self) -> bool:
        return self._net is not None

    async def start(self, host: str = "0.0.0.0", port: int = 0, *, reuse_address: bool = True) -> None:
        if self._net is not None:
            raise RuntimeError(f"{self.name} already started")
        self._loop = asyncio.get_running_loop()
        tls = None
        if self.tls is not None:
            t = self.tls
            t.validate()
            tls = (t.mode, t.cert_path, t.key_path, t.trust_cert_path, t.need_client_auth)
        try:
            self._net = _store.NetServer(
                host, port, self.max_frame_length, self._flush_timeout_ms, tls, self._spin_us
            )
        except ValueError as e:
            raise TlsConfigError(str(e)) from None
        self._port = self._net.port
        self._host = host
        self._loop.add_reader(self._net.event_fd(), self._pump)
        self._start_idle_sweep()
        mode = f", tls.server.mode={self.tls.mode}" if self.tls is not None else ""
        spin = f"polls {self._spin_us} µs before sleeping" if self._spin_us else "sleeps at once"
        log.info("%s listening on %s:%d (network thread, %s%s)", self.name, host, self._port, spin, mode)

    def enable_fast_send(
        self,
        store: _store.MessageStore,
        *,
        cluster_name: str,
        region_id: str,
        trace_on: bool,
        max_body: int,
        version: int,
        sync_master: tuple[int, int] | None = None,
        acl: bool = False,
        fast_failure: tuple[int, int] | None = None,
    ) -> None:
        """`sync_master`: ``(haSlaveFallbehindMax, slaveTimeout ms)`` on a SYNC_MASTER (its answers wait
        for a slave: report acks with ``net.set_replicated``, slaves with ``net.set_slave_connected``).
        `acl`: ACL on; the fast path takes a send only once its signature and PUB permission check out
        against the rules ``net.set_acl_rules`` pushes (none until then: every send goes to Python).
        `fast_failure`: ``(waitTimeMillsInSendQueue, osPageCacheBusyTimeOutMills)`` (None: off); a send read
        longer ago, or met while the put lock is held longer, is left to Python, which answers SYSTEM_BUSY."""
        assert self._net is not None, "start() first"
        self._net.enable_fast_send(
            store, cluster_name, region_id, trace_on, max_body, version, sync_master, acl, fast_failure
        )

    async def stop(self) -> None:
        net = self._net
        if net is None:
            return
        await self._stop_idle_sweep()
        channels = list(self._by_conn.values())
        for channel in channels:
            channel.close()
        await self.dispatcher.cancel_all()
        if channels:
            await asyncio.gather(*(ch.close_and_wait(self.close_timeout_s) for ch in channels))
        assert self._loop is not None
        self._loop.remove_reader(net.event_fd())
        await self._loop.run_in_executor(None, net.shutdown)
        self._pump_with(net)
        self._net = None
        log.info("%s stopped (port %d)", self.name, self._port)

    def sweep_idle(self, now: float | None = None) -> int:
        net = self._net
        if net is not None:
            for conn, channel in self._by_conn.items():
                seen = net.last_seen(conn)
                if seen is not None and seen > channel.last_seen:
                    channel.last_seen = seen
        return super().sweep_idle(now)

    def _pump(self) -> None:
        if self._net is not None:
            self._pump_with(self._net)

    def _pump_with(self, net: _store.NetServer) -> None:
        events = net.take_events()
        chans = self._by_conn
        try:
            for kind, conn, a, b in events:
                if kind == _DATA:
                    channel = chans.get(conn)
                    if channel is not None:
                        channel.data_received(a, b)
                elif kind == _REFUSED:
                    self._count_refused(b, a)
                elif kind == _OPEN:
                    channel = self._make_channel()
                    chans[conn] = channel
                    channel.connection_made(NativeTransport(net, conn, a, b))
                else:
                    channel = chans.pop(conn, None)
                    if channel is not None:
                        channel.connection_lost(None)
        except Exception:
            log.exception("%s: handling network events failed", self.name)
        finally:
            net.ack()
