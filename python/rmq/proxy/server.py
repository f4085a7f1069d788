"""The gRPC server of the proxy (grpcio's asyncio server), and its run in a thread of a broker process.

:class:`ProxyServer` wires the parts: the client registry, the Remoting side towards the brokers, the
MessagingService handlers, TLS and ACL.

TLS as RocketMQ's proxy serves it: with a certificate, ``enforcing`` (TLS clients only; grpcio's own TLS)
or ``permissive`` (TLS and plaintext clients on the one port); without one, TLS test mode (on by default,
as RocketMQ's ``tlsTestModeEnable``): TLS with a certificate made at start, and plaintext. grpcio serves a
port in one way only, so where both are taken the port is the Rust front (:class:`rmq._store.TlsFront`),
which serves TLS and plaintext clients' HTTP/2 and passes every call on to grpcio, listening on an abstract
Unix socket, but for plain sends, receives and acks, which it answers itself in Rust straight to the brokers
(:meth:`ProxyServer._fast_sends`: what it needs is handed over here); the official 5.x Java client, which
connects over TLS unless told otherwise and trusts any certificate, then connects unchanged.
``python -m rmq.proxy`` runs it on its own; :class:`ProxyThread` runs it beside a broker in one process
("local": the proxy reaches that broker over loopback Remoting, through the name server like any other), on
its own event loop so the broker's loop never waits on gRPC.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc

from rmq.acl.validator import AccessValidator
from rmq.proxy.auth import Authenticator
from rmq.proxy.brokers import Brokers
from rmq.proxy.clients import ClientRegistry
from rmq.proxy.messages import HIDDEN_NAMES, SYSTEM_NAMES
from rmq.proxy.metrics import GrpcLatency, LatencyInterceptor
from rmq.proxy.pb import d, g
from rmq.proxy.pop import Handle
from rmq.proxy.route import TopicView
from rmq.proxy.service import MessagingService
from rmq.proxy.status import ProxyError
from rmq.remoting.tls import TlsClientSettings

if TYPE_CHECKING:
    from rmq._store import TlsFront

log = logging.getLogger("rmq.proxy")

DEFAULT_GRPC_PORT = 8081
FRONT_SYNC_S = 0.5
"""How often the front hears of the endpoint's consumers (a new one's receives stay the endpoint's until then)
and hands it the messages due for the dead-letter queue."""


@dataclass(slots=True)
class ProxyConfig:
    namesrv_addrs: list[str]
    host: str = "0.0.0.0"
    port: int = DEFAULT_GRPC_PORT
    tls_cert_path: str = ""
    """Serve TLS with this PEM certificate (chain) and ``tls_key_path`` (an unencrypted PEM key)."""
    tls_key_path: str = ""
    tls_trust_cert_path: str = ""
    """With ``tls_require_client_auth``: the PEM CAs a client certificate must chain to."""
    tls_require_client_auth: bool = False
    tls_mode: str = "enforcing"
    """With a certificate: ``enforcing`` serves TLS clients only, ``permissive`` TLS and plaintext ones."""
    tls_test_mode: bool = True
    """Without a certificate: serve TLS too, with a certificate made at start, beside plaintext (RocketMQ's
    TLS test mode); ``False``: plaintext only."""
    remoting_tls: TlsClientSettings | None = None
    """TLS of the proxy's own Remoting connections to name servers and brokers."""
    acl: AccessValidator | None = None
    rpc_hook: object = None
    """Signs the proxy's Remoting requests (an ACL account of the brokers)."""
    fast_send: bool = True
    """Let the gRPC port's front (when the port has one) send plain messages itself, in Rust, straight to
    the brokers over Remoting, instead of passing each SendMessage to grpcio (not with ACL, a signing
    account or TLS towards the brokers: those sends stay with the endpoint)."""


class ProxyServer:
    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.registry = ClientRegistry()
        self.brokers = Brokers(
            config.namesrv_addrs, self.registry, rpc_hook=config.rpc_hook, tls=config.remoting_tls
        )
        auth = Authenticator(config.acl) if config.acl is not None else None
        self.service = MessagingService(self.brokers, self.registry, auth)
        self.latency = GrpcLatency()
        """How long each call took (the hosting broker exports it as ``rocketmq_rpc_latency``)."""
        self._server: grpc.aio.Server | None = None
        self.front: TlsFront | None = None
        """The port's front when it takes TLS and plaintext clients (see the module doc)."""
        self._refusals: asyncio.Task[None] | None = None
        self._front_sync: asyncio.Task[None] | None = None
        self.port = 0

    def _tls_way(self) -> str:
        """How the port serves: ``tls`` (grpcio, TLS only), ``front`` (TLS and plaintext) or ``plain``."""
        c = self.config
        if c.tls_mode not in ("enforcing", "permissive"):
            raise ValueError(f"gRPC TLS mode {c.tls_mode!r} is not enforcing or permissive")
        if c.tls_cert_path:
            return "tls" if c.tls_mode == "enforcing" else "front"
        return "front" if c.tls_test_mode else "plain"

    async def start(self) -> int:
        server = grpc.aio.server(interceptors=[LatencyInterceptor(self.latency)])
        g.add_MessagingServiceServicer_to_server(self.service, server)
        address = f"{self.config.host}:{self.config.port}"
        way = self._tls_way()
        if way == "tls":
            port = server.add_secure_port(address, self._credentials())
        elif way == "front":
            # grpcio behind the front, on an abstract Unix socket of this process (no TCP port on loopback;
            # each of the front's connections comes from a name of its own, mapped to its client).
            upstream = f"rmq-grpc-{os.getpid()}-{secrets.token_hex(6)}"
            port = server.add_insecure_port(f"unix-abstract:{upstream}")
        else:
            port = server.add_insecure_port(address)
        if port == 0:
            raise OSError(f"gRPC: cannot listen on {address}")
        await server.start()
        self._server = server
        if way == "front":
            try:
                self.front = self._start_front(upstream)
            except BaseException:
                await server.stop(None)
                self._server = None
                raise
            self.service.front = self.front
            self._fast_sends(self.front)
            self._refusals = asyncio.get_running_loop().create_task(self._log_refusals())
            port = self.front.port
        self.port = port
        self.brokers.start()
        test_mode = " (TLS test mode: a self-signed certificate made now)"
        if self.config.tls_cert_path:
            test_mode = ""
        log.info(
            "gRPC proxy (RocketMQ 5.x clients) listening on %s:%d%s%s, name servers %s",
            self.config.host,
            port,
            {
                "tls": " with TLS (TLS clients only)",
                "front": " with TLS and plaintext" + test_mode,
                "plain": " in plaintext",
            }[way],
            " with ACL" if self.config.acl is not None else "",
            ";".join(self.config.namesrv_addrs),
        )
        return port

    def _fast_sends(self, front: TlsFront) -> None:
        """Hand the front the writable queues of every topic the endpoint looks up, so it serves plain sends
        itself (what it leaves, and every refusal, still comes here)."""
        c = self.config
        if not c.fast_send or c.acl is not None or c.rpc_hook is not None or c.remoting_tls is not None:
            return
        front.enable_sends(True, sorted(SYSTEM_NAMES))

        def follow(topic: str, view: TopicView | None) -> None:
            if view is None:
                front.route_sends(topic, [], {})
                return
            queues = [(q.broker_name, q.queue_id, q.addr) for q in view.write_queues]
            front.route_sends(topic, queues, view.masters())

        self.brokers.routes.listen(follow)
        self.latency.front_sends = front.send_latency
        self._sync_front(front)
        self._front_sync = asyncio.get_running_loop().create_task(self._keep_front_told(front))

    def _sync_front(self, front: TlsFront) -> None:
        """Tell the front the consumers it may serve receives of (their group's order, their deliveries before
        the dead-letter queue); lite consumers stay the endpoint's."""
        consumers = {
            sess.client_id: (sess.fifo, sess.max_attempts, sess.is_lite)
            for sess in list(self.registry.sessions())
            if sess.client_type in (d.ClientType.PUSH_CONSUMER, d.ClientType.SIMPLE_CONSUMER) or sess.is_lite
        }
        front.set_consumers(consumers, sorted(HIDDEN_NAMES))

    async def _keep_front_told(self, front: TlsFront) -> None:
        """Every :data:`FRONT_SYNC_S`: the consumers to the front; the messages its receives held back for the
        dead-letter queue forwarded there (as the endpoint's own receives do)."""
        while self.front is front:
            try:
                self._sync_front(front)
                for group, topic, text, message_id in front.take_dead_letters():
                    try:
                        await self.brokers.forward_to_dlq(group, topic, Handle.parse(text), message_id)
                    except (ProxyError, ValueError) as e:
                        log.warning(
                            "message %s of %s could not go to the dead-letter queue: %s", message_id, topic, e
                        )
            except Exception:
                log.exception("gRPC port: telling the front of the consumers failed")
            await asyncio.sleep(FRONT_SYNC_S)

    def _start_front(self, upstream: str) -> TlsFront:
        from rmq._store import TlsFront

        c = self.config
        if c.tls_cert_path:
            auth = "require" if c.tls_require_client_auth else "none"
            tls = ("permissive", c.tls_cert_path, c.tls_key_path, c.tls_trust_cert_path, auth)
            try:
                return TlsFront(c.host, c.port, upstream, tls)
            except ValueError as e:
                raise OSError(f"gRPC TLS: {e}") from None
        names = ["localhost", "127.0.0.1"]
        if c.host not in ("", "0.0.0.0", "::", "localhost", "127.0.0.1"):
            names.append(c.host)
        return TlsFront(c.host, c.port, upstream, None, names)

    async def _log_refusals(self) -> None:
        """Log what the front refused (a failed handshake, a plaintext client where TLS is required), once a
        second."""
        while self.front is not None:
            for why in self.front.take_refusals():
                log.warning("gRPC port: connection refused or broken off: %s", why)
            await asyncio.sleep(1.0)

    def _credentials(self) -> grpc.ServerCredentials:
        c = self.config
        try:
            with open(c.tls_key_path, "rb") as f:
                key = f.read()
            with open(c.tls_cert_path, "rb") as f:
                cert = f.read()
            trust = None
            if c.tls_require_client_auth:
                with open(c.tls_trust_cert_path, "rb") as f:
                    trust = f.read()
        except OSError as e:
            raise OSError(f"gRPC TLS: cannot read {e.filename}: {e.strerror}") from None
        if b"ENCRYPTED" in key:
            raise OSError(
                f"gRPC TLS: {c.tls_key_path} is an encrypted key; the gRPC port needs an unencrypted one"
            )
        return grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=trust, require_client_auth=c.tls_require_client_auth
        )

    async def stop(self, grace: float = 1.0) -> None:
        for task in (self._refusals, self._front_sync):
            if task is not None:
                task.cancel()
        self._refusals = self._front_sync = None
        if self.front is not None:
            front, self.front = self.front, None
            for why in front.take_refusals():
                log.warning("gRPC port: connection refused or broken off: %s", why)
            stats = front.stats()
            sends = front.send_stats()
            front.close()
            log.info(
                "gRPC port closed: %d TLS and %d plaintext connections served, %d refused; answered by the "
                "port / passed on: SendMessage %d / %d, ReceiveMessage %d / %d, AckMessage %d / %d",
                stats["tls"],
                stats["plain"],
                stats["refused"],
                sends["served"],
                sends["passed_on"],
                sends["receive_served"],
                sends["receive_passed_on"],
                sends["ack_served"],
                sends["ack_passed_on"],
            )
        if self._server is not None:
            for sess in self.registry.sessions():
                self.registry.remove(sess.client_id, "proxy stopping")
            await self._server.stop(grace)
            self._server = None
        await self.brokers.close()


class ProxyThread:
    """A :class:`ProxyServer` on its own event loop in a daemon thread (the broker process's gRPC port)."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.port = 0
        self._loop = asyncio.SelectorEventLoop()  # grpcio's asyncio server, not the broker's uvloop
        self._server: ProxyServer | None = None
        self._thread = threading.Thread(target=self._run, name="rmq-grpc-proxy", daemon=True)
        self._started = threading.Event()
        self._error: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = ProxyServer(self.config)
            self.port = self._loop.run_until_complete(self._server.start())
        except BaseException as e:
            self._error = e
            self._started.set()
            return
        self._started.set()
        self._loop.run_forever()

    @property
    def server(self) -> ProxyServer | None:
        """The running endpoint (its client registry and call latency), None before it started."""
        return self._server

    def start(self, timeout: float = 30.0) -> int:
        self._thread.start()
        self._started.wait(timeout)
        if self._error is not None:
            raise self._error
        return self.port

    def stop(self, timeout: float = 10.0) -> None:
        if self._server is None or not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self._server.stop(), self._loop)
        try:
            fut.result(timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
