"""Request dispatch: request code -> processor, and the server-side response rules (REMOTING.md §1.5).

Rules applied to every incoming request:

* ``max_in_flight`` asynchronous requests already running -> SYSTEM_BUSY (2), remark ``[REJECTREQUEST]...``
  (requests a processor parked by returning ``None`` do not count: they hold no task);
* unknown code and no default processor -> REQUEST_CODE_NOT_SUPPORTED (3), remark
  `` request type <code> not supported`` -- or no answer at all when ``answer_unsupported`` is false (what a
  4.9.8 name server does);
* the processor raises -> SYSTEM_ERROR (1) with the exception text as remark (a :class:`HeaderError` gives
  its own message, e.g. ``the custom field <topic> is null``), or the code the server mapped that exception
  type to with :meth:`Dispatcher.map_error` (a broker answers a full disk with SERVICE_NOT_AVAILABLE from
  every processor that writes);
* oneway requests (flag bit 1) never get an answer, not even the three above (Java still writes those; clients
  drop them anyway).

With :attr:`Dispatcher.latency` set (an :class:`~rmq.remoting.latency.RpcLatency`), every answer the
dispatcher sends is timed from the request's dispatch, per request and response code; a request a processor
parks (returns ``None``) is timed by whoever answers it later, if anyone.

A :attr:`Dispatcher.guard` (a server's access check, e.g. :class:`rmq.acl.AccessValidator`) runs before
the processor; when it returns a response, that is the answer (not sent for oneway requests) and the processor
never runs. A :attr:`Dispatcher.audit` (e.g. :class:`rmq.acl.audit.AdminAudit`) sees every request a
processor answered (or failed) with its answer, oneway requests included; a refusal is the guard's to log.

Processors come in three shapes (see :mod:`rmq.remoting.context`); the dispatcher looks at what a call
returns, so only awaitable results (``async def`` processors, or a plain processor's slow path) cost a task.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from rmq.common.codes import FLAG_ONEWAY, ResponseCode
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.context import Processor, RequestContext
from rmq.remoting.errors import HeaderError
from rmq.remoting.latency import RpcLatency

__all__ = ["DEFAULT_MAX_IN_FLIGHT", "Dispatcher"]

log = logging.getLogger(__name__)

DEFAULT_MAX_IN_FLIGHT: Final = 10_000
BUSY_REMARK: Final = "[REJECTREQUEST]system busy, start flow control for a while"

_SYSTEM_ERROR: Final = int(ResponseCode.SYSTEM_ERROR)
_SYSTEM_BUSY: Final = int(ResponseCode.SYSTEM_BUSY)
_NOT_SUPPORTED: Final = int(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)


_BAD_INPUT = (HeaderError, ValueError, TypeError, KeyError, AttributeError, OverflowError, UnicodeError)


def error_remark(exc: BaseException) -> str:
    if isinstance(exc, HeaderError):
        return str(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Dispatcher:
    """Maps request codes to processors and runs them for a server's (or client's) connections."""

    def __init__(
        self, *, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT, answer_unsupported: bool = True
    ) -> None:
        self._error_codes: dict[type[Exception], int] = {}
        self.max_in_flight = max_in_flight
        self.answer_unsupported = answer_unsupported
        self._table: dict[int, Processor] = {}
        self._default: Processor | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.latency: RpcLatency | None = None
        """Where answered requests are timed (None: not timed)."""
        self.guard: Callable[[RequestContext, RemotingCommand], RemotingCommand | None] | None = None
        """Runs before every processor; a response it returns refuses the request (None: no check)."""
        self.audit: Callable[[RequestContext, RemotingCommand, RemotingCommand], None] | None = None
        """Told of every request a processor answered, with the answer (None: nobody)."""

    def register(self, code: int, processor: Processor) -> None:
        self._table[int(code)] = processor

    def register_default(self, processor: Processor | None) -> None:
        """Processor for codes nobody registered (``None`` restores the built-in rule)."""
        self._default = processor

    @property
    def codes(self) -> frozenset[int]:
        """The request codes with a registered processor."""
        return frozenset(self._table)

    def processor_for(self, code: int) -> Processor | None:
        return self._table.get(code) or self._default

    @property
    def in_flight(self) -> int:
        """Asynchronous requests currently running."""
        return len(self._tasks)

    def dispatch(self, ctx: RequestContext, request: RemotingCommand) -> None:
        oneway = request.flag & FLAG_ONEWAY
        started = time.perf_counter() if self.latency is not None else 0.0
        if len(self._tasks) >= self.max_in_flight:
            if not oneway:
                ctx.send_response(create_response(request, _SYSTEM_BUSY, BUSY_REMARK))
            return
        if self.guard is not None:
            refusal = self.guard(ctx, request)
            if refusal is not None:
                if not oneway:
                    ctx.send_response(refusal)
                return
        entry = self._table.get(request.code) or self._default
        if entry is None:
            if self.answer_unsupported and not oneway:
                remark = f" request type {request.code} not supported"
                ctx.send_response(create_response(request, _NOT_SUPPORTED, remark))
            return
        try:
            result = entry(ctx, request)
        except Exception as exc:
            self._fail(ctx, request, exc, started)
            return
        if result is None:
            return
        if type(result) is RemotingCommand or isinstance(result, RemotingCommand):
            if not oneway:
                ctx.send_response(result)
                if self.latency is not None:
                    self.latency.record(request.code, result.code, time.perf_counter() - started)
            if self.audit is not None:
                self.audit(ctx, request, result)
        elif inspect.isawaitable(result):
            self._spawn(ctx, request, result, started)
        else:
            self._fail(ctx, request, TypeError(f"processor returned {type(result).__name__}"), started)

    def _spawn(
        self, ctx: RequestContext, request: RemotingCommand, awaitable: Awaitable[Any], started: float
    ) -> None:
        task = asyncio.get_running_loop().create_task(self._finish(ctx, request, awaitable, started))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(
        self, ctx: RequestContext, request: RemotingCommand, awaitable: Awaitable[Any], started: float
    ) -> None:
        try:
            result = await awaitable
        except Exception as exc:
            self._fail(ctx, request, exc, started)
            return
        if result is None:
            return
        if not isinstance(result, RemotingCommand):
            self._fail(ctx, request, TypeError(f"processor returned {type(result).__name__}"), started)
        else:
            if not request.flag & FLAG_ONEWAY:
                ctx.send_response(result)
                if self.latency is not None:
                    self.latency.record(request.code, result.code, time.perf_counter() - started)
            if self.audit is not None:
                self.audit(ctx, request, result)

    def map_error(self, exc_type: type[Exception], code: int) -> None:
        """Answer ``code`` (with the exception text as remark, and no traceback in the log) when a
        processor raises ``exc_type``: an expected refusal, such as a full disk."""
        self._error_codes[exc_type] = code

    def _fail(
        self, ctx: RequestContext, request: RemotingCommand, exc: Exception, started: float = 0.0
    ) -> None:
        mapped = next((c for t, c in self._error_codes.items() if isinstance(exc, t)), None)
        answered = mapped if mapped is not None else _SYSTEM_ERROR
        if self.audit is not None:
            remark = str(exc) if mapped is not None else error_remark(exc)
            self.audit(ctx, request, create_response(request, answered, remark))
        if self.latency is not None and not request.flag & FLAG_ONEWAY:
            self.latency.record(request.code, answered, time.perf_counter() - started)
        if mapped is not None:
            log.debug("code %s from %s refused: %s", request.code, ctx.remote_addr, exc)
            if not request.flag & FLAG_ONEWAY:
                ctx.send_response(create_response(request, mapped, str(exc)))
            return
        if isinstance(exc, _BAD_INPUT):
            # Malformed headers or bodies from the peer: answered with the reason, no traceback.
            log.info("bad request code %s from %s: %s", request.code, ctx.remote_addr, error_remark(exc))
        else:
            log.error("processor for code %s failed (from %s)", request.code, ctx.remote_addr, exc_info=exc)
        if not request.flag & FLAG_ONEWAY:
            ctx.send_response(create_response(request, _SYSTEM_ERROR, error_remark(exc)))

    async def cancel_all(self) -> None:
        """Cancel the running asynchronous requests and wait for them to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
