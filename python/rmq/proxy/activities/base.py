"""What every activity shares: the caller of a call, its ACL checks, the proxy's endpoints."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import grpc

from rmq.client.results import SendStatus
from rmq.proxy.auth import Authenticator
from rmq.proxy.brokers import Brokers
from rmq.proxy.clients import ClientRegistry, Session
from rmq.proxy.pb import d

if TYPE_CHECKING:
    from rmq._store import TlsFront

log = logging.getLogger("rmq.proxy")

DEFAULT_INVISIBLE_MS = 30_000
DEFAULT_POLL_MS = 20_000
MAX_POLL_MS = 30_000
RECEIVE_BATCH_MAX = 32
# Apache's default CustomizedRetryPolicy of a consumer group: the wait before each next attempt.
RETRY_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)

SEND_STATUS_CODE = {
    SendStatus.SEND_OK: d.Code.OK,
    SendStatus.FLUSH_DISK_TIMEOUT: d.Code.MASTER_PERSISTENCE_TIMEOUT,
    SendStatus.FLUSH_SLAVE_TIMEOUT: d.Code.SLAVE_PERSISTENCE_TIMEOUT,
    SendStatus.SLAVE_NOT_AVAILABLE: d.Code.HA_NOT_AVAILABLE,
}


def call_meta(context: grpc.aio.ServicerContext) -> dict[str, str]:
    return {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}


_FRONT_PEER = "unix-abstract:"


def peer_host(context: grpc.aio.ServicerContext, front: TlsFront | None = None) -> str:
    """``host:port`` of the caller; behind the gRPC port's `front` (which grpcio sees as a loopback
    peer), the client the front serves on that connection."""
    peer = context.peer() or ""  # ipv4:127.0.0.1:5555 / ipv6:[::1]:5555 / unix-abstract:<name>
    if front is not None and peer.startswith(_FRONT_PEER):
        return front.peer_of(peer[len(_FRONT_PEER) :]) or ""
    _, _, rest = peer.partition(":")
    return rest


class Activity:
    """The state the handlers share (set by :class:`~rmq.proxy.service.MessagingService`)."""

    brokers: Brokers
    registry: ClientRegistry
    auth: Authenticator | None
    front: TlsFront | None = None
    """The gRPC port's front, when the port takes TLS and plaintext clients (:mod:`rmq.proxy.server`)."""

    def _caller(self, context: grpc.aio.ServicerContext) -> tuple[Session | None, dict[str, str]]:
        meta = call_meta(context)
        if self.auth is not None:
            self.auth.authenticate(meta, peer_host(context, self.front))
        cid = meta.get("x-mq-client-id")
        sess = None
        if cid:
            sess = self.registry.session(cid)
            sess.remote_addr = peer_host(context, self.front)
            sess.language = meta.get("x-mq-language", sess.language)
            sess.version = meta.get("x-mq-client-version", sess.version)
        return sess, meta

    def _check(self, meta: dict[str, str], kind: str, name: str, perm: str) -> None:
        if self.auth is not None:
            self.auth.authorize(meta, kind, name, perm)

    @staticmethod
    def _endpoints(request_endpoints: d.Endpoints, context: grpc.aio.ServicerContext) -> d.Endpoints:
        if request_endpoints.addresses:
            return request_endpoints
        host = context.host() if hasattr(context, "host") else ""
        return d.Endpoints(
            scheme=d.AddressScheme.IPv4, addresses=[d.Address(host=host or "127.0.0.1", port=0)]
        )
