"""A blocking Remoting client: one socket per address, one request at a time, no event loop.

For code that runs where an asyncio loop is unwelcome or absent (Spark executors, the driver's planning
calls): :class:`BlockingClient` keeps one connection per ``host:port`` and sends a request, then reads
frames with the sans-I/O :class:`~rmq.remoting.codec.FrameDecoder` until the answer with the request's
``opaque`` arrives (requests the server sends meanwhile are ignored: this client registers no handler).

A connection that fails (refused, reset, timed out, bad frame) is closed and dropped; the next request to
that address opens a new one. Errors are the remoting layer's: :class:`RemotingConnectError` (could not
connect, or the TLS handshake failed), :class:`RemotingTimeoutError` (no answer in time),
:class:`RemotingSendRequestError` (the connection broke before the answer).

``rpc_hook`` is called on every request before it is sent (``rmq.acl.RequestSigner`` signs requests this
way); ``ssl_context`` turns TLS on for every connection (``rmq.remoting.tls.TlsClientSettings.context``).
Not thread-safe: use one client per thread.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable
from itertools import count

from rmq.remoting.codec import FrameDecoder, encode_parts
from rmq.remoting.command import RemotingCommand
from rmq.remoting.errors import (
    FrameError,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)

__all__ = ["BlockingClient", "BlockingConnection", "split_addr"]

_READ_CHUNK = 256 * 1024


def split_addr(addr: str) -> tuple[str, int]:
    """``"host:port"`` -> ``(host, port)``; a ValueError names the address otherwise."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"not a host:port address: {addr!r}")
    return host.strip("[]"), int(port)


class BlockingConnection:
    """One connected socket (plain or TLS) and its frame decoder."""

    def __init__(self, addr: str, connect_timeout_s: float, ssl_context: ssl.SSLContext | None) -> None:
        self.addr = addr
        host, port = split_addr(addr)
        try:
            sock = socket.create_connection((host, port), timeout=connect_timeout_s)
        except OSError as e:
            raise RemotingConnectError(f"cannot connect to {addr}: {e}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            try:
                sock = ssl_context.wrap_socket(
                    sock, server_hostname=host if ssl_context.check_hostname else None
                )
            except (OSError, ssl.SSLError) as e:
                sock.close()
                raise RemotingConnectError(f"TLS handshake with {addr} failed: {e}") from None
        self.sock: socket.socket = sock
        self.decoder = FrameDecoder()
        self._pending: list[RemotingCommand] = []

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, request: RemotingCommand, timeout_s: float) -> None:
        prefix, body = encode_parts(request)
        self.sock.settimeout(timeout_s)
        try:
            self.sock.sendall(prefix + bytes(body) if body else prefix)
        except TimeoutError:
            raise RemotingTimeoutError(f"sending to {self.addr} timed out") from None
        except OSError as e:
            raise RemotingSendRequestError(f"sending to {self.addr} failed: {e}") from None

    def receive(self, opaque: int, deadline: float) -> RemotingCommand:
        """The response with `opaque` (other frames are dropped)."""
        while True:
            for i, cmd in enumerate(self._pending):
                if cmd.is_response and cmd.opaque == opaque:
                    del self._pending[: i + 1]
                    return cmd
            self._pending.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise RemotingTimeoutError(f"no answer from {self.addr} in time")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(_READ_CHUNK)
            except TimeoutError:
                raise RemotingTimeoutError(f"no answer from {self.addr} in time") from None
            except OSError as e:
                raise RemotingSendRequestError(f"connection to {self.addr} failed: {e}") from None
            if not data:
                raise RemotingSendRequestError(f"{self.addr} closed the connection before answering")
            self._pending.extend(self.decoder.feed(data))


class BlockingClient:
    """Blocking requests to any number of addresses (see the module doc)."""

    def __init__(
        self,
        *,
        connect_timeout_ms: int = 3000,
        ssl_context: ssl.SSLContext | None = None,
        rpc_hook: Callable[[RemotingCommand], object] | None = None,
    ) -> None:
        self.connect_timeout_s = connect_timeout_ms / 1000
        self.ssl_context = ssl_context
        self.rpc_hook = rpc_hook
        self._conns: dict[str, BlockingConnection] = {}
        self._opaque = count(1)

    def invoke(self, addr: str, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        """Send `request` to `addr` and return its response."""
        request.opaque = next(self._opaque) & 0x7FFFFFFF
        if self.rpc_hook is not None:
            self.rpc_hook(request)
        conn = self._conns.get(addr)
        if conn is None:
            conn = self._conns[addr] = BlockingConnection(addr, self.connect_timeout_s, self.ssl_context)
        deadline = time.monotonic() + timeout_ms / 1000
        try:
            conn.send(request, max(0.001, deadline - time.monotonic()))
            return conn.receive(request.opaque, deadline)
        except (RemotingTimeoutError, RemotingSendRequestError, FrameError):
            self.drop(addr)
            raise

    def drop(self, addr: str) -> None:
        """Close the connection to `addr`, if any."""
        conn = self._conns.pop(addr, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for addr in list(self._conns):
            self.drop(addr)

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
