"""One TCP connection carrying RemotingCommands in both directions (an ``asyncio.Protocol``).

The channel only frames bytes and matches responses to requests by ``opaque``: incoming requests go to the
owner's :class:`~rmq.remoting.dispatcher.Dispatcher`, incoming responses resolve the future of the request
this side sent. Server and client connections are the same class; a broker sends NOTIFY_CONSUMER_IDS_CHANGED
or CHECK_TRANSACTION_STATE over a client's connection exactly as a client sends PULL_MESSAGE over it.

A channel is the :class:`~rmq.remoting.context.RequestContext` its processors receive.

Malformed bytes close the connection (Java does the same). Pending requests fail with
:class:`RemotingSendRequestError` when the connection closes and with :class:`RemotingTimeoutError` when no
response comes in time. With ``pause_reading_when_congested`` (servers), a peer that stops reading our
responses stops being read from until the transport's write buffer drains.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from typing import Any, Final, cast

from rmq.common.codes import FLAG_ONEWAY, FLAG_RESPONSE, ResponseCode
from rmq.remoting.codec import DEFAULT_MAX_FRAME_LENGTH, FrameDecoder, encode_parts
from rmq.remoting.command import RemotingCommand, new_command
from rmq.remoting.context import CloseCallback
from rmq.remoting.dispatcher import Dispatcher
from rmq.remoting.errors import FrameError, RemotingSendRequestError, RemotingTimeoutError

__all__ = ["Channel", "OpaqueSource"]

log = logging.getLogger(__name__)

_channel_ids = itertools.count(1)
_monotonic = time.monotonic
_SYSTEM_ERROR: Final = int(ResponseCode.SYSTEM_ERROR)
_JOIN_BODY_BELOW: Final = 64 * 1024  # smaller bodies are joined to the prefix: one write, one syscall


class OpaqueSource:
    """Request ids for one requester: 0, 1, 2, ... masked to 31 bits (never negative, like the C++ client)."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = 0

    def __call__(self) -> int:
        value = self._next
        self._next = (value + 1) & 0x7FFFFFFF
        return value


def format_addr(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer) if peer else ""


class Channel(asyncio.Protocol):
    def __init__(
        self,
        dispatcher: Dispatcher,
        next_opaque: Callable[[], int],
        *,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        pause_reading_when_congested: bool = False,
        on_open: Callable[[Channel], object] | None = None,
        on_close: Callable[[Channel], object] | None = None,
    ) -> None:
        self.channel_id: int = next(_channel_ids)
        self.remote_addr: str = ""
        self.local_addr: str = ""
        self.last_seen: float = _monotonic()
        self.received_at: float = self.last_seen
        """``time.monotonic()`` when the request being dispatched was read (see :class:`RequestContext`)."""
        self.waiting = 0
        """Requests of that read still waiting behind it."""
        self.attributes: dict[str, Any] = {}
        self._dispatcher = dispatcher
        self._next_opaque = next_opaque
        self._decoder = FrameDecoder(max_frame_length)
        self._pause_reading_when_congested = pause_reading_when_congested
        self._on_open = on_open
        self._on_close = on_close
        self._transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._close_callbacks: list[Callable[[Channel], object]] = []
        self._closed = False
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._closed_future: asyncio.Future[None] | None = None
        # Outgoing frames are gathered and written together: everything produced while handling
        # one read (or one loop iteration) leaves in one writelines call, not a send per frame.
        self._out: list[bytes | memoryview] = []
        self._flush_scheduled = False
        self._in_read = False

    # --- asyncio.Protocol ---------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement the interface without subclassing asyncio.Transport.
        self._transport = cast(asyncio.Transport, transport)
        self._loop = asyncio.get_running_loop()
        self.remote_addr = format_addr(transport.get_extra_info("peername"))
        self.local_addr = format_addr(transport.get_extra_info("sockname"))
        if self._on_open is not None:
            self._on_open(self)

    def data_received(self, data: bytes, read_at: float | None = None) -> None:
        """`read_at`: ``time.monotonic()`` when the bytes were read off the socket, if earlier than now
        (the network thread's events); the requests in them count as waiting since then."""
        self.last_seen = _monotonic()
        self.received_at = self.last_seen if read_at is None else read_at
        try:
            commands = self._decoder.feed(data)
        except FrameError as exc:
            log.warning("closing %s: malformed frame: %s", self.remote_addr, exc)
            self.close()
            return
        dispatch = self._dispatcher.dispatch
        self._in_read = True
        try:
            left = len(commands)
            for cmd in commands:
                if self._closed:
                    break
                left -= 1
                self.waiting = left
                if cmd.flag & FLAG_RESPONSE:
                    fut = self._pending.pop(cmd.opaque, None)
                    if fut is not None:
                        if not fut.done():
                            fut.set_result(cmd)
                    else:
                        log.debug(
                            "dropping response with unknown opaque %s from %s", cmd.opaque, self.remote_addr
                        )
                else:
                    dispatch(self, cmd)
        finally:
            self._in_read = False
            if self._out:
                self._flush_out()

    def eof_received(self) -> bool | None:
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._transport = None
        if self._pending:
            pending, self._pending = self._pending, {}
            for opaque, fut in pending.items():
                if not fut.done():
                    fut.set_exception(
                        RemotingSendRequestError(
                            f"connection to {self.remote_addr} closed before the response to opaque {opaque}"
                        )
                    )
        self._wake_drain_waiters()
        callbacks, self._close_callbacks = self._close_callbacks, []
        if self._on_close is not None:
            callbacks.insert(0, self._on_close)
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("close callback failed for %s", self.remote_addr)
        if self._closed_future is not None and not self._closed_future.done():
            self._closed_future.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True
        if self._pause_reading_when_congested and self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._pause_reading_when_congested and self._transport is not None:
            self._transport.resume_reading()
        self._wake_drain_waiters()

    # --- RequestContext -----------------------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def pending_requests(self) -> int:
        """Requests sent over this channel still waiting for their response."""
        return len(self._pending)

    @property
    def write_buffer_size(self) -> int:
        """Bytes written but not yet handed to the kernel."""
        return self._transport.get_write_buffer_size() if self._transport is not None else 0

    def send_response(self, response: RemotingCommand) -> bool:
        if self._closed or self._transport is None:
            log.debug(
                "dropping response opaque %s: connection to %s is closed", response.opaque, self.remote_addr
            )
            return False
        try:
            self._write(response)
        except Exception as exc:  # a processor built a command the codec cannot encode
            log.error("cannot encode response to code %s for %s: %s", response.code, self.remote_addr, exc)
            fallback = new_command(
                _SYSTEM_ERROR,
                response.language,
                response.version,
                response.opaque,
                FLAG_RESPONSE,
                f"cannot encode response: {exc}",
                {},
                None,
                0,
            )
            try:
                self._write(fallback)
            except Exception:
                # Not even an error answer can be encoded: drop this connection only.
                self.abort()
                return False
        return True

    async def send_request(self, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        """Send ``request`` (its opaque is assigned here) and await the matching response."""
        if self._write_paused and not self._closed:
            await self._drain()
        if self._closed or self._transport is None:
            raise RemotingSendRequestError(f"connection to {self.remote_addr} is closed")
        loop = self._loop
        assert loop is not None
        opaque = self._next_opaque()
        request.opaque = opaque
        request.flag &= ~FLAG_RESPONSE
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        self._pending[opaque] = fut
        try:
            self._write(request)
        except Exception as exc:
            self._pending.pop(opaque, None)
            raise RemotingSendRequestError(f"cannot send to {self.remote_addr}: {exc}") from exc
        timer = loop.call_later(timeout_ms / 1000.0, self._expire, opaque, timeout_ms)
        try:
            return await fut
        finally:
            timer.cancel()
            self._pending.pop(opaque, None)

    def send_oneway(self, request: RemotingCommand) -> None:
        if self._closed or self._transport is None:
            raise RemotingSendRequestError(f"connection to {self.remote_addr} is closed")
        request.opaque = self._next_opaque()
        request.flag = (request.flag | FLAG_ONEWAY) & ~FLAG_RESPONSE
        self._write(request)

    def add_close_callback(self, callback: CloseCallback) -> None:
        if self._closed:
            callback(self)
        else:
            self._close_callbacks.append(callback)

    def close(self) -> None:
        if self._transport is not None:
            if self._out:
                self._flush_out()
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    async def close_and_wait(self, timeout_s: float = 5.0) -> None:
        """Close gracefully (pending writes are flushed); abort if that takes longer than ``timeout_s``."""
        self.close()
        try:
            await asyncio.wait_for(self.wait_closed(), timeout_s)
        except TimeoutError:
            log.warning("connection to %s did not close within %.1f s; aborting", self.remote_addr, timeout_s)
            self.abort()
            await self.wait_closed()

    async def wait_closed(self) -> None:
        if self._closed:
            return
        if self._closed_future is None:
            assert self._loop is not None
            self._closed_future = self._loop.create_future()
        await asyncio.shield(self._closed_future)

    # --- internals ----------------------------------------------------------------------------------------

    def _write(self, cmd: RemotingCommand) -> None:
        prefix, body = encode_parts(cmd)
        assert self._transport is not None
        out = self._out
        out.append(prefix)
        if body:
            out.append(body)
        if not self._in_read and not self._flush_scheduled:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush_out)

    def _flush_out(self) -> None:
        self._flush_scheduled = False
        out, self._out = self._out, []
        transport = self._transport
        if transport is None or not out:
            return
        if len(out) == 1:
            transport.write(out[0])
        elif sum(len(b) for b in out) < _JOIN_BODY_BELOW:
            transport.write(b"".join(out))
        else:
            transport.writelines(out)

    def _expire(self, opaque: int, timeout_ms: int) -> None:
        fut = self._pending.pop(opaque, None)
        if fut is not None and not fut.done():
            fut.set_exception(
                RemotingTimeoutError(
                    f"no response from {self.remote_addr} within {timeout_ms} ms (opaque {opaque})"
                )
            )

    async def _drain(self) -> None:
        assert self._loop is not None
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._drain_waiters.append(waiter)
        await waiter

    def _wake_drain_waiters(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Channel #{self.channel_id} {self.local_addr} -> {self.remote_addr} {state}>"
