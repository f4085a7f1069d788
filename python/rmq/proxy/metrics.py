"""What the gRPC endpoint's metrics are made of: how long each call took to be answered (per RPC, the
answer's status code and long polling, in 5.x's ``rocketmq_rpc_latency`` buckets) and which 5.x clients are
connected. The broker hosting the endpoint exports them with its own, labelled ``protocol_type="grpc"``
(:mod:`rmq.broker.metrics_collector`); nothing here imports Prometheus.

The MessagingService answers a refusal inside its response (``status``), not as a gRPC error, so the code
recorded is the response's status code (``ok``, ``message_not_found``, ``forbidden``...); a call that ended
with a gRPC error (cancelled, an exception) is recorded as ``grpc_<its gRPC status>``. Telemetry, a stream
that lives as long as the client, is not timed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from rmq.proxy.pb import d
from rmq.remoting.latency import LatencyTable

__all__ = ["GrpcLatency", "LatencyInterceptor", "status_name"]

_LONG_POLLING = frozenset({"ReceiveMessage"})
_UNTIMED = frozenset({"Telemetry"})
_CODE_NAMES = {v: k.lower() for k, v in d.Code.items()}


def status_name(response: Any) -> str:
    """The lower-case name of a MessagingService response's status code (``ok``...)."""
    status = getattr(response, "status", None)
    if status is None:
        return "ok"
    return _CODE_NAMES.get(status.code, str(status.code))


class GrpcLatency(LatencyTable[tuple[str, str, bool]]):
    """Per (RPC name, answer's code, long polling). Written on the endpoint's event loop, read from the
    metrics exporter's thread."""

    def __init__(self) -> None:
        super().__init__()
        self.front_sends: Callable[[], list[tuple[str, str, list[float]]]] | None = None
        """The calls the gRPC port's front answered itself, per RPC and code (its ``send_latency``)."""

    def record(self, rpc: str, code: str, seconds: float) -> None:
        self.add((rpc, code, rpc in _LONG_POLLING), seconds)

    def rows(self) -> list[tuple[tuple[str, str, bool], list[float]]]:
        rows = super().rows()
        if self.front_sends is None:
            return rows
        merged = dict(rows)
        for rpc, code, counts in self.front_sends():
            key = (rpc, code, rpc in _LONG_POLLING)
            mine = merged.get(key)
            merged[key] = counts if mine is None else [a + b for a, b in zip(mine, counts, strict=True)]
        return list(merged.items())


class LatencyInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Times every unary and server-streaming call into ``latency`` (the streaming call's code: its first
    response carrying a status)."""

    def __init__(self, latency: GrpcLatency) -> None:
        self.latency = latency

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        rpc = str(details.method).rsplit("/", 1)[-1]
        if handler is None or rpc in _UNTIMED:
            return handler
        record = self.latency.record
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                start, code = time.perf_counter(), "grpc_unknown"
                try:
                    response = await inner(request, context)
                    code = status_name(response)
                    return response
                except BaseException as e:
                    code = _error_name(e)
                    raise
                finally:
                    record(rpc, code, time.perf_counter() - start)

            return grpc.unary_unary_rpc_method_handler(
                unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            inner_stream = handler.unary_stream

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                start, code = time.perf_counter(), ""
                try:
                    async for response in inner_stream(request, context):
                        if not code and response.HasField("status"):
                            code = status_name(response)
                        yield response
                except BaseException as e:
                    code = code or _error_name(e)
                    raise
                finally:
                    record(rpc, code or "ok", time.perf_counter() - start)

            return grpc.unary_stream_rpc_method_handler(
                stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler


def _error_name(e: BaseException) -> str:
    if isinstance(e, asyncio.CancelledError):
        return "grpc_cancelled"
    if isinstance(e, grpc.aio.AbortError):
        return "grpc_aborted"
    return "grpc_internal"
