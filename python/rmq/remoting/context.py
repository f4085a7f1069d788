"""What a processor sees of its connection: :class:`RequestContext`, and the :data:`Processor` signature.

A processor is ``processor(ctx, request) -> RemotingCommand | None`` -- a plain function (called inline,
no task), an ``async def`` (one task per request), or a plain function that returns an awaitable for its slow
path (the fast path stays task-free). ``None`` means "no response now": the processor keeps ``ctx`` and
answers later with ``ctx.send_response(create_response(request, ...))`` (long polling), or never (oneway
semantics).

Processors never see sockets; tests drive them with any object that has these members.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeAlias

from rmq.remoting.command import RemotingCommand

__all__ = ["CloseCallback", "Processor", "ProcessorResult", "RequestContext"]


class RequestContext(Protocol):
    """The connection a request arrived on (implemented by :class:`rmq.remoting.channel.Channel`)."""

    @property
    def channel_id(self) -> int:
        """Process-wide unique, stable id of the connection."""
        ...

    @property
    def remote_addr(self) -> str:
        """The peer as ``ip:port``."""
        ...

    @property
    def is_closed(self) -> bool: ...

    @property
    def last_seen(self) -> float:
        """``time.monotonic()`` of the last bytes received."""
        ...

    @property
    def received_at(self) -> float:
        """``time.monotonic()`` when the request being handled was read from its socket (by the network
        thread or the event loop): how long it waited is ``time.monotonic() - received_at``."""
        ...

    @property
    def waiting(self) -> int:
        """Requests read with the one being handled and still waiting behind it on this connection."""
        ...

    @property
    def attributes(self) -> dict[str, Any]:
        """Free per-connection storage for the owner (e.g. the client id learned from a heartbeat)."""
        ...

    def send_response(self, response: RemotingCommand) -> bool:
        """Write a response; ``False`` if the connection is already closed (the response is dropped)."""
        ...

    async def send_request(self, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        """Send a request to the peer over this connection and await its response."""
        ...

    def send_oneway(self, request: RemotingCommand) -> None:
        """Send a request with the oneway flag set; no response is expected."""
        ...

    def add_close_callback(self, callback: CloseCallback) -> None:
        """Call ``callback(ctx)`` once when the connection closes (immediately if it already has)."""
        ...

    def close(self) -> None: ...


ProcessorResult: TypeAlias = RemotingCommand | Awaitable[RemotingCommand | None] | None
Processor: TypeAlias = Callable[[RequestContext, RemotingCommand], ProcessorResult]
CloseCallback: TypeAlias = Callable[[RequestContext], object]
