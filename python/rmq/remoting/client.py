"""RemotingClient: one pooled connection per ``host:port``, many requests in flight on each.

::

    client = RemotingClient()
    client.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_ids_changed)  # broker -> client requests
    response = await client.invoke("127.0.0.1:9876", create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                   {"topic": "T"}), timeout_ms=3000)
    await client.close()

``RemotingClient(rpc_hook=f)`` calls ``f(request)`` on every request it sends, just before sending (how
ACL credentials sign requests: :class:`rmq.acl.RequestSigner`).
``RemotingClient(tls=TlsClientSettings(enable=True))`` connects with TLS (RocketMQ's ``tls.enable``;
see :mod:`rmq.remoting.tls`).

A connection that closes is dropped from the pool; the next call to that address reconnects. Errors are
:class:`RemotingConnectError` (cannot connect), :class:`RemotingTimeoutError` (no answer in time) and
:class:`RemotingSendRequestError` (the connection failed while the request was outstanding).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from rmq.remoting.channel import Channel, OpaqueSource
from rmq.remoting.codec import DEFAULT_MAX_FRAME_LENGTH
from rmq.remoting.command import RemotingCommand
from rmq.remoting.context import Processor
from rmq.remoting.dispatcher import DEFAULT_MAX_IN_FLIGHT, Dispatcher
from rmq.remoting.errors import RemotingConnectError
from rmq.remoting.tls import TlsClientSettings

__all__ = ["RemotingClient", "invoke_sync", "parse_addr"]

log = logging.getLogger(__name__)


def parse_addr(addr: str) -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` -> ``(host, port)``."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"bad address {addr!r}, expected host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


class RemotingClient:
    def __init__(
        self,
        *,
        connect_timeout_ms: int = 3000,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        rpc_hook: Callable[[RemotingCommand], object] | None = None,
        tls: TlsClientSettings | None = None,
    ) -> None:
        self.rpc_hook = rpc_hook
        self.tls = tls
        self._ssl = tls.context() if tls is not None else None
        self.connect_timeout_ms = connect_timeout_ms
        self.max_frame_length = max_frame_length
        self.dispatcher = Dispatcher(max_in_flight=max_in_flight, answer_unsupported=True)
        self._next_opaque = OpaqueSource()
        self._channels: dict[str, Channel] = {}
        self._connecting: dict[str, asyncio.Task[Channel]] = {}
        self._closed = False

    def register(self, code: int, processor: Processor) -> None:
        """Handle requests the peer sends us on our connections (e.g. codes 39, 40, 220 from a broker)."""
        self.dispatcher.register(code, processor)

    def register_default(self, processor: Processor | None) -> None:
        self.dispatcher.register_default(processor)

    @property
    def channels(self) -> dict[str, Channel]:
        """Open connections by address (a snapshot)."""
        return {addr: ch for addr, ch in self._channels.items() if not ch.is_closed}

    async def get_channel(self, addr: str) -> Channel:
        """The open connection to ``addr``, connecting if needed (concurrent callers share one attempt)."""
        channel = self._channels.get(addr)
        if channel is not None and not channel.is_closed:
            return channel
        if self._closed:
            raise RemotingConnectError(f"client is closed; cannot connect to {addr}")
        task = self._connecting.get(addr)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._connect(addr))
            self._connecting[addr] = task

            def done(_: asyncio.Task[Channel]) -> None:
                if self._connecting.get(addr) is task:
                    del self._connecting[addr]

            task.add_done_callback(done)
        return await asyncio.shield(task)

    async def _connect(self, addr: str) -> Channel:
        try:
            host, port = parse_addr(addr)
        except ValueError as exc:
            raise RemotingConnectError(str(exc)) from None
        loop = asyncio.get_running_loop()

        def factory() -> Channel:
            return Channel(
                self.dispatcher,
                self._next_opaque,
                max_frame_length=self.max_frame_length,
                on_close=lambda ch: self._forget(addr, ch),
            )

        try:
            _, channel = await asyncio.wait_for(
                loop.create_connection(factory, host, port, ssl=self._ssl),
                self.connect_timeout_ms / 1000.0,
            )
        except TimeoutError:
            raise RemotingConnectError(
                f"connect to {addr} timed out after {self.connect_timeout_ms} ms"
            ) from None
        except OSError as exc:
            raise RemotingConnectError(f"cannot connect to {addr}: {exc}") from exc
        if self._closed:
            channel.close()
            raise RemotingConnectError(f"client closed while connecting to {addr}")
        self._channels[addr] = channel
        log.debug("connected to %s (channel %d)", addr, channel.channel_id)
        return channel

    def _forget(self, addr: str, channel: Channel) -> None:
        if self._channels.get(addr) is channel:
            del self._channels[addr]

    async def invoke(self, addr: str, request: RemotingCommand, timeout_ms: int = 3000) -> RemotingCommand:
        """Send ``request`` to ``addr`` and await the response."""
        channel = self._channels.get(addr)
        if channel is None or channel.is_closed:
            channel = await self.get_channel(addr)
        if self.rpc_hook is not None:
            self.rpc_hook(request)
        return await channel.send_request(request, timeout_ms)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        """Send ``request`` with the oneway flag; returns once it is handed to the transport."""
        channel = await self.get_channel(addr)
        if self.rpc_hook is not None:
            self.rpc_hook(request)
        channel.send_oneway(request)

    def close_channel(self, addr: str) -> None:
        channel = self._channels.pop(addr, None)
        if channel is not None:
            channel.close()

    async def close(self) -> None:
        self._closed = True
        connecting = list(self._connecting.values())
        if connecting:  # each closes its fresh channel itself once it sees the client closed
            await asyncio.gather(*connecting, return_exceptions=True)
        channels = list(self._channels.values())
        self._channels.clear()
        if channels:
            await asyncio.gather(*(ch.close_and_wait() for ch in channels))
        await self.dispatcher.cancel_all()

    async def __aenter__(self) -> RemotingClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def invoke_sync(addr: str, request: RemotingCommand, timeout_ms: int = 3000) -> RemotingCommand:
    """One request from synchronous code (scripts, tools): connect, send, await the response, close.

    Runs its own event loop, so it must not be called from inside a running one.
    """

    async def call() -> RemotingCommand:
        async with RemotingClient(connect_timeout_ms=timeout_ms) as client:
            return await client.invoke(addr, request, timeout_ms)

    return asyncio.run(call())
