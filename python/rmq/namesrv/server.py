"""NameServer: the composition root wiring route table, KV config, processors and a RemotingServer.

Embedded (a broker process can run one in-process)::

    ns = NameServer(kv_config_path=None)      # None: KV config in memory only
    await ns.start("127.0.0.1", 0)            # port 0 -> any free port, see ns.port
    ...
    await ns.stop()

Every ``scan_interval_s`` (10 s) brokers silent for ``broker_expiry_ms`` (120 s) are dropped and their
connections closed; a broker's routes also go as soon as the connection it registered over closes.

A registration that would move a live brokerName/brokerId to another address is refused (NO_PERMISSION, a
rate-limited WARN naming both addresses) until the old one unregisters, its connection closes or it expires;
``broker_takeover_allowed=True`` lets it through, as Apache's name server does (see
:mod:`rmq.namesrv.route_table`).

With ``acl=`` (an :class:`rmq.acl.AccessValidator`), every request needs a valid signature of an account
of that file (or a globally white-listed address), and the writes -- REGISTER_BROKER, UNREGISTER_BROKER,
PUT_KV_CONFIG, DELETE_KV_CONFIG, DELETE_TOPIC_IN_NAMESRV, WIPE/ADD_WRITE_PERM_OF_BROKER,
UPDATE_NAMESRV_CONFIG -- an admin account; the file is reloaded on change (``acl_reload``).

Unknown request codes are answered with REQUEST_CODE_NOT_SUPPORTED (3). A 4.9.8 name server answers nothing,
which leaves the caller waiting for its timeout; an immediate error is friendlier and no client relies on
the silence.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

from rmq.acl import AccessValidator
from rmq.acl.audit import AdminAudit
from rmq.common.metrics import MetricsExporter
from rmq.common.service import PeriodicTask
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.kv_config import KVConfigManager
from rmq.namesrv.metrics import NamesrvCollector
from rmq.namesrv.processors import NamesrvProcessors
from rmq.namesrv.route_table import DEFAULT_BROKER_EXPIRY_MS, RouteInfoManager, now_ms
from rmq.remoting.channel import Channel
from rmq.remoting.latency import RpcLatency
from rmq.remoting.server import RemotingServer
from rmq.remoting.tls import TlsServerSettings

__all__ = ["DEFAULT_PORT", "NameServer"]

log = logging.getLogger(__name__)

DEFAULT_PORT = 9876


class NameServer:
    def __init__(
        self,
        *,
        kv_config_path: str | os.PathLike[str] | None = None,
        broker_expiry_ms: int = DEFAULT_BROKER_EXPIRY_MS,
        scan_interval_s: float = 10.0,
        idle_timeout_s: float | None = 120.0,
        clock: Callable[[], int] = now_ms,
        acl: AccessValidator | None = None,
        acl_reload: bool = True,
        tls: TlsServerSettings | None = None,
        broker_takeover_allowed: bool = False,
    ) -> None:
        self.routes = RouteInfoManager(
            clock=clock, broker_expiry_ms=broker_expiry_ms, broker_takeover_allowed=broker_takeover_allowed
        )
        self.kv = KVConfigManager(kv_config_path)
        self.config = NamesrvConfig(
            kv_config_path=None if kv_config_path is None else str(kv_config_path),
            server_channel_max_idle_time_seconds=None if idle_timeout_s is None else int(idle_timeout_s),
            scan_not_active_broker_interval=int(scan_interval_s * 1000),
        )
        self.processors = NamesrvProcessors(self.routes, self.kv, self.config)
        self.remoting = RemotingServer(
            name="namesrv", answer_unsupported=True, idle_timeout_s=idle_timeout_s, tls=tls
        )
        for code, processor in self.processors.table().items():
            self.remoting.register(code, processor)
        self.remoting.add_close_listener(self._on_channel_closed)
        self._metrics: MetricsExporter | None = None
        self._scan = PeriodicTask(
            "namesrv-scan-not-active-broker", scan_interval_s, self.scan_not_active_brokers
        )
        self.acl = acl
        self.remoting.dispatcher.audit = AdminAudit()
        self._acl_reload: PeriodicTask | None = None
        if acl is not None:
            self.remoting.dispatcher.guard = acl.guard
            if acl_reload:
                self._acl_reload = PeriodicTask("namesrv-acl-file-reload", 1.0, acl.reload_if_changed)

    @property
    def port(self) -> int:
        return self.remoting.port

    @property
    def addr(self) -> str:
        """``host:port`` to give clients (``127.0.0.1`` when listening on every interface)."""
        host = self.remoting.host
        if host in ("", "0.0.0.0", "::"):
            host = "127.0.0.1"
        return f"{host}:{self.port}"

    async def start(self, host: str = "0.0.0.0", port: int = DEFAULT_PORT) -> None:
        self.kv.load()
        await self.remoting.start(host, port)
        self.config.listen_port = self.port
        self._scan.start()
        if self._acl_reload is not None:
            self._acl_reload.start()

    @property
    def metrics_port(self) -> int:
        """The port metrics are served on (0: not served)."""
        return self._metrics.port if self._metrics is not None else 0

    def serve_metrics(self, host: str, port: int) -> int:
        """Serve Prometheus metrics on ``host:port`` (0: any free port) from now on (requests are timed from
        here); returns the bound port. Call after :meth:`start`."""
        self.remoting.dispatcher.latency = RpcLatency()
        collector = NamesrvCollector(self.routes, self.remoting.dispatcher, self.addr)
        self._metrics = MetricsExporter(collector.collect, "name server")
        self._metrics.start(host, port)
        return self._metrics.port

    async def stop(self) -> None:
        if self._metrics is not None:
            exporter, self._metrics = self._metrics, None
            await asyncio.get_running_loop().run_in_executor(None, exporter.stop)
        await self._scan.stop()
        if self._acl_reload is not None:
            await self._acl_reload.stop()
        await self.remoting.stop()

    def scan_not_active_brokers(self) -> int:
        """Drop silent brokers and close their connections; returns how many were dropped."""
        self.processors.refusals.tick()
        expired = self.routes.scan_not_active()
        for addr, live in expired:
            log.warning("broker %s expired: nothing heard for %d ms", addr, self.routes.broker_expiry_ms)
            if live.channel_id is not None:
                self.remoting.close_channel(live.channel_id)
        return len(expired)

    def _on_channel_closed(self, channel: Channel) -> None:
        for addr in self.routes.on_channel_destroyed(channel.channel_id):
            log.info("broker %s removed: its connection %s closed", addr, channel.remote_addr)
