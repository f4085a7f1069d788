"""A minimal HTTP/1.1 server on asyncio streams: what the dashboard needs and nothing more.

It reads one request at a time per connection (request line, headers, a ``Content-Length`` body of at most
:data:`MAX_BODY` bytes; no chunked uploads), hands a :class:`Request` to the handler and writes the
:class:`Response` it returns. Connections are kept alive (HTTP/1.1) until the client closes, asks to
close, or stays idle for :data:`IDLE_TIMEOUT_S`. A malformed request gets 400 and the connection is
closed; a handler that raises gets 500 (logged with its traceback).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

from rmq.common import fastjson

__all__ = ["HttpServer", "Request", "Response"]

log = logging.getLogger(__name__)

MAX_HEADER_LINE: Final = 8192
MAX_HEADERS: Final = 100
MAX_BODY: Final = 1 << 20
IDLE_TIMEOUT_S: Final = 30.0


@dataclass(slots=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes = b""
    peer: str = ""
    """The caller's ``host:port``."""

    def json(self) -> dict[str, Any]:
        """The body as a JSON object; :class:`ValueError` if it is not one."""
        try:
            value = fastjson.loads(self.body or b"{}")
        except ValueError as exc:
            raise ValueError(f"the request body is not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValueError("the request body must be a JSON object")
        return value


@dataclass(slots=True)
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    def with_header(self, name: str, value: str) -> Response:
        self.headers[name] = value
        return self

    @classmethod
    def json(cls, value: Any, status: int = 200) -> Response:
        return cls(status, fastjson.dumps(value))

    @classmethod
    def error(cls, status: int, message: str) -> Response:
        return cls.json({"error": message, "status": status}, status)


Handler = Callable[[Request], Awaitable[Response]]


class _BadRequest(Exception):
    pass


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise _BadRequest("header line too long") from None
    if len(line) > MAX_HEADER_LINE:
        raise _BadRequest("header line too long")
    return line.rstrip(b"\r\n")


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """The next request, ``None`` at a clean end of stream."""
    try:
        first = await _read_line(reader)
    except asyncio.IncompleteReadError:
        return None
    parts = first.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(f"bad request line {first[:80]!r}")
    method, target, version = parts
    headers: dict[str, str] = {"_version": version}
    for _ in range(MAX_HEADERS + 1):
        line = await _read_line(reader)
        if not line:
            break
        name, sep, value = line.decode("latin-1").partition(":")
        if not sep:
            raise _BadRequest(f"bad header line {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    else:
        raise _BadRequest("too many headers")
    if "transfer-encoding" in headers:
        raise _BadRequest("chunked request bodies are not supported")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        raise _BadRequest("bad Content-Length") from None
    if not 0 <= length <= MAX_BODY:
        raise _BadRequest(f"request body of {length} bytes (at most {MAX_BODY})")
    body = await reader.readexactly(length) if length else b""
    url = urlsplit(target)
    return Request(method.upper(), url.path, dict(parse_qsl(url.query)), headers, body)


def _encode(response: Response, keep_alive: bool) -> bytes:
    try:
        reason = HTTPStatus(response.status).phrase
    except ValueError:
        reason = ""
    head = [
        f"HTTP/1.1 {response.status} {reason}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        "Cache-Control: no-store",
        "X-Content-Type-Options: nosniff",
        f"Connection: {'keep-alive' if keep_alive else 'close'}",
        *(f"{k}: {v}" for k, v in response.headers.items()),
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + response.body


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer or "")


class HttpServer:
    """Serves ``handler`` on ``host:port`` (0: any free port, see :attr:`port`)."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            return 0
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._serve, host, port, limit=MAX_HEADER_LINE * 2)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._conns):
                task.cancel()
            await asyncio.gather(*self._conns, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conns.add(task)
        try:
            while True:
                try:
                    async with asyncio.timeout(IDLE_TIMEOUT_S):
                        request = await read_request(reader)
                except _BadRequest as exc:
                    writer.write(_encode(Response.error(400, str(exc)), keep_alive=False))
                    await writer.drain()
                    return
                except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                    return
                if request is None:
                    return
                request.peer = _peer(writer)
                try:
                    response = await self.handler(request)
                except Exception:
                    log.exception("dashboard: %s %s failed", request.method, request.path)
                    response = Response.error(500, "internal error (see the server log)")
                keep_alive = (
                    request.headers.get("connection", "").lower() != "close"
                    and request.headers["_version"] == "HTTP/1.1"
                )
                writer.write(_encode(response, keep_alive))
                await writer.drain()
                if not keep_alive:
                    return
        except ConnectionError:
            return
        finally:
            if task is not None:
                self._conns.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()
