"""ClientConfig: what the producers and consumers of one :class:`~rmq.client.instance.ClientInstance` share.

Defaults are the Java client's (``CL/ClientConfig.java``). The name-server list comes from the argument, else
the environment variable ``NAMESRV_ADDR`` (Java also reads it), as ``host:port;host:port``.

With ``access_key`` and ``secret_key`` set, every request the clients send is signed as the Java client's
``AclClientRPCHook`` signs it (RocketMQ ACL 1.0), name servers included.

With ``tls=True`` every connection (name servers and brokers) is TLS, as the Java client's ``tls.enable``.
The server's certificate is checked against ``tls_ca`` when that is given (``tls_verify``: force the check
on or off); ``tls_cert`` / ``tls_key`` are this client's certificate for servers that require one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from rmq.acl.signing import RequestSigner
from rmq.client.errors import MQClientError
from rmq.client.uniq_id import local_ip
from rmq.common.codes import LanguageCode
from rmq.remoting.tls import TlsClientSettings

__all__ = ["DEFAULT_INSTANCE_NAME", "ClientConfig"]

DEFAULT_INSTANCE_NAME = "DEFAULT"


def _env_namesrv() -> str:
    return os.environ.get("NAMESRV_ADDR", "")


@dataclass
class ClientConfig:
    namesrv_addr: str = field(default_factory=_env_namesrv)
    """``host:port;host:port`` of the name servers."""
    client_ip: str = field(default_factory=local_ip)
    instance_name: str = DEFAULT_INSTANCE_NAME
    """``DEFAULT`` means the process id: every client of a process then shares one instance and client id."""
    unit_name: str | None = None
    poll_name_server_interval_ms: int = 30_000
    heartbeat_broker_interval_ms: int = 30_000
    persist_consumer_offset_interval_ms: int = 5_000
    rebalance_interval_ms: int = 20_000
    mq_client_api_timeout_ms: int = 3_000
    language: int = LanguageCode.PYTHON
    """Sent in every request header. ``PYTHON`` is known to every 4.x broker."""
    access_key: str | None = None
    """ACL account: with ``secret_key``, every request is signed (``AccessKey`` and ``Signature`` fields)."""
    secret_key: str | None = field(default=None, repr=False)
    security_token: str | None = field(default=None, repr=False)
    """Sent (and signed) as ``SecurityToken`` when set."""
    tls: bool = False
    """Connect to name servers and brokers with TLS."""
    tls_ca: str | None = None
    """PEM file of the CAs the servers' certificates must chain to."""
    tls_verify: bool | None = None
    """Check the server's certificate (default: when ``tls_ca`` is given; RocketMQ's default is not to)."""
    tls_cert: str | None = None
    """PEM certificate (chain) this client presents, for ``tls.server.need.client.auth``."""
    tls_key: str | None = None
    """PEM private key of ``tls_cert`` (may be omitted when ``tls_cert`` holds it too)."""

    def tls_settings(self) -> TlsClientSettings | None:
        """The TLS settings of every connection, or None when ``tls`` is off."""
        if not self.tls:
            return None
        verify = self.tls_verify if self.tls_verify is not None else bool(self.tls_ca)
        return TlsClientSettings(
            enable=True,
            trust_cert_path=self.tls_ca or "",
            verify_server=verify,
            cert_path=self.tls_cert or "",
            key_path=self.tls_key or "",
        )

    def signer(self) -> RequestSigner | None:
        """The request signer for the credentials, or None without them."""
        if not self.access_key and not self.secret_key:
            return None
        if not self.access_key or not self.secret_key:
            raise MQClientError("ACL credentials need both access_key and secret_key", 10004)
        return RequestSigner(self.access_key, self.secret_key, self.security_token)

    def credentials_id(self) -> tuple[object, ...]:
        """What two clients sharing one instance (one set of connections) must agree on."""
        return (
            self.access_key,
            self.secret_key,
            self.security_token,
            self.tls,
            self.tls_ca,
            self.tls_verify,
            self.tls_cert,
            self.tls_key,
        )

    def client_id(self) -> str:
        """``clientIP@instanceName[@unitName]``; instance name ``DEFAULT`` becomes the process id."""
        instance = str(os.getpid()) if self.instance_name == DEFAULT_INSTANCE_NAME else self.instance_name
        cid = f"{self.client_ip}@{instance}"
        if self.unit_name:
            cid += f"@{self.unit_name}"
        return cid

    def namesrv_list(self) -> list[str]:
        addrs = [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]
        if not addrs:
            raise MQClientError(
                "No name server address, set namesrv_addr (host:port;host:port) or NAMESRV_ADDR",
                10004,
            )
        return addrs

    def copy(self, **changes: object) -> ClientConfig:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def resolve(
        cls, config: ClientConfig | None, namesrv_addr: str | None, instance_name: str | None
    ) -> ClientConfig:
        """A private copy of ``config`` (or the defaults) with the two common options applied."""
        resolved = config.copy() if config is not None else cls()
        if namesrv_addr is not None:
            resolved.namesrv_addr = namesrv_addr
        if instance_name is not None:
            resolved.instance_name = instance_name
        return resolved
