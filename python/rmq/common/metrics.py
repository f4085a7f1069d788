"""What the broker's and the name server's Prometheus exporters share: RocketMQ 5.x's metric and label
names, the request latency histogram every dispatcher keeps (``rocketmq_rpc_latency``), and the HTTP
exporter (``prometheus_client`` with its own registry, served from a thread).

Counting is plain integer arithmetic in dicts on the event loop; the exporter's thread reads copies of
them when it is scraped (``list(d.items())`` is one step under the GIL), so nothing on a request's path
takes a lock or builds a label set.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.latency import LATENCY_BOUNDS_MS

__all__ = [
    "LATENCY_BOUNDS_MS",
    "MetricsExporter",
    "histogram",
    "request_code_name",
    "response_code_name",
    "rpc_latency_family",
]

log = logging.getLogger(__name__)

# Label names (RocketMQ 5.x's BrokerMetricsConstant / RemotingMetricsConstant / DefaultStoreMetricsConstant).
CLUSTER: Final = "cluster"
NODE_TYPE: Final = "node_type"
NODE_ID: Final = "node_id"
TOPIC: Final = "topic"
CONSUMER_GROUP: Final = "consumer_group"
MESSAGE_TYPE: Final = "message_type"
IS_RETRY: Final = "is_retry"
IS_SYSTEM: Final = "is_system"
PROTOCOL_TYPE: Final = "protocol_type"
REQUEST_CODE: Final = "request_code"
RESPONSE_CODE: Final = "response_code"
IS_LONG_POLLING: Final = "is_long_polling"
PROTOCOL_REMOTING: Final = "remoting"
PROTOCOL_GRPC: Final = "grpc"


_REQUEST_NAMES = {int(c): c.name.lower() for c in RequestCode}
_RESPONSE_NAMES = {int(c): c.name.lower() for c in ResponseCode}


def request_code_name(code: int) -> str:
    """The request code as 5.x labels it: its constant's name in lower case, else the number."""
    return _REQUEST_NAMES.get(code) or str(code)


def response_code_name(code: int) -> str:
    return _RESPONSE_NAMES.get(code) or str(code)


def histogram(
    family: HistogramMetricFamily,
    labels: list[str],
    bounds: tuple[int, ...],
    counts: Iterable[int],
    total: float,
) -> None:
    """Add one labelled histogram from per-bucket (not cumulative) ``counts``, the last one overflow."""
    cumulative, buckets = 0, []
    for bound, n in zip((*[str(float(b)) for b in bounds], "+Inf"), counts, strict=True):
        cumulative += n
        buckets.append((bound, cumulative))
    family.add_metric(labels, buckets, total)


def rpc_latency_family(
    const: dict[str, str],
    rows: Iterable[tuple[int, int, bool, list[int], float]],
    grpc_rows: Iterable[tuple[tuple[str, str, bool], list[float]]] = (),
) -> HistogramMetricFamily:
    """``rocketmq_rpc_latency`` from ``(code, response, long polling, bucket counts, sum ms)`` rows, those
    with the same labels added up (the Python path's and the network thread's), and the gRPC endpoint's
    ``((rpc, answer's code, long polling), [bucket counts..., sum ms])`` rows (``protocol_type="grpc"``,
    ``request_code`` the RPC's name in lower case)."""
    merged: dict[tuple[int, int, bool], list[float]] = {}
    for code, response, lp, counts, total in rows:
        row = merged.setdefault((code, response, lp), [0] * (len(LATENCY_BOUNDS_MS) + 2))
        for i, n in enumerate(counts):
            row[i] += n
        row[-1] += total
    names = [*const, PROTOCOL_TYPE, REQUEST_CODE, RESPONSE_CODE, IS_LONG_POLLING]
    fam = HistogramMetricFamily("rocketmq_rpc_latency", "Rpc latency (milliseconds)", labels=names, unit="")
    for (code, response, lp), row in sorted(merged.items()):
        values = [
            *const.values(),
            PROTOCOL_REMOTING,
            request_code_name(code),
            response_code_name(response),
            "true" if lp else "false",
        ]
        histogram(fam, values, LATENCY_BOUNDS_MS, [int(n) for n in row[:-1]], row[-1])
    for (rpc, answer, lp), row in sorted(grpc_rows):
        values = [*const.values(), PROTOCOL_GRPC, rpc.lower(), answer, "true" if lp else "false"]
        histogram(fam, values, LATENCY_BOUNDS_MS, [int(n) for n in row[:-1]], row[-1])
    return fam


class _Collect(Collector):
    def __init__(self, collect: Callable[[], Iterator[Metric]], what: str) -> None:
        self._collect = collect
        self._what = what

    def collect(self) -> Iterator[Metric]:
        try:
            yield from self._collect()
        except Exception:
            # A scrape must not take the exporter down; what was not read is missing from this scrape.
            log.exception("%s metrics: collecting failed", self._what)


class MetricsExporter:
    """Serves ``/metrics`` (Prometheus text format) on ``host:port`` from a thread, reading ``collect()``
    at every scrape. ``port`` 0 picks a free port; :attr:`port` is the bound one."""

    def __init__(self, collect: Callable[[], Iterator[Metric]], what: str) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collect(collect, what))
        self.what = what
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_port) if self._server is not None else 0

    def start(self, host: str, port: int) -> None:
        try:
            self._server, self._thread = start_http_server(port, host, self.registry)
        except OSError as e:
            raise OSError(e.errno, f"cannot serve {self.what} metrics on {host}:{port}: {e.strerror}") from e
        log.info("%s metrics (Prometheus) served on http://%s:%d/metrics", self.what, host, self.port)

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
