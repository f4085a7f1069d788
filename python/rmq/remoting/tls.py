"""TLS on the remoting port, as RocketMQ 4.x does it.

Server side (:class:`TlsServerSettings`), RocketMQ's ``tls.server.*`` properties:

* ``mode``: ``disabled`` (plain TCP only), ``permissive`` (each new connection is looked at: a first byte of
  0x16 — a TLS ClientHello — starts TLS, anything else is served in plain text) or ``enforcing`` (a plaintext
  connection is refused and closed, logged as a warning).
* ``cert_path`` / ``key_path`` (PEM; ``key_password`` for an encrypted key), ``trust_cert_path`` (PEM CA
  bundle client certificates are checked against) and ``need_client_auth``: ``none``, ``optional`` (a client
  certificate, when sent, must verify) or ``require`` (a client without a valid certificate is refused).

Client side (:class:`TlsClientSettings`): ``enable`` (RocketMQ's ``tls.enable``), ``trust_cert_path`` with
``verify_server`` (``tls.client.authServer``; RocketMQ's default, too, is not to check the server), and
``cert_path`` / ``key_path`` for servers that ask for a client certificate.

The server side is :class:`TlsGate`, the first protocol of each accepted connection: it reads the first
bytes, then either hands the connection to its :class:`~rmq.remoting.channel.Channel` in plain text or runs
TLS itself over memory BIOs (so the ClientHello already read is not lost, and a failed handshake is logged
with its reason) and gives the Channel a :class:`TlsTransport`.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from rmq.remoting.channel import Channel, format_addr

__all__ = [
    "TLS_MODES",
    "TlsClientSettings",
    "TlsConfigError",
    "TlsGate",
    "TlsServerSettings",
    "TlsTransport",
    "client_auth_modes",
]

log = logging.getLogger(__name__)

TLS_MODES: Final = ("disabled", "permissive", "enforcing")
_CLIENT_AUTH: Final = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}
_HANDSHAKE_RECORD: Final = 0x16  # TLS record type of a ClientHello
_READ_CHUNK: Final = 256 * 1024


def client_auth_modes() -> tuple[str, ...]:
    return tuple(_CLIENT_AUTH)


class TlsConfigError(ValueError):
    """A TLS setting is unknown or a certificate / key cannot be loaded."""


@dataclass
class TlsServerSettings:
    mode: str = "disabled"
    cert_path: str = ""
    key_path: str = ""
    key_password: str = ""
    trust_cert_path: str = ""
    need_client_auth: str = "none"
    handshake_timeout_s: float = 10.0
    """How long a new connection may take to send its first byte and finish the handshake."""

    @property
    def enabled(self) -> bool:
        return self.mode != "disabled"

    def validate(self) -> None:
        if self.mode not in TLS_MODES:
            raise TlsConfigError(f"tls.server.mode: {self.mode!r} is not one of {', '.join(TLS_MODES)}")
        if self.need_client_auth not in _CLIENT_AUTH:
            raise TlsConfigError(
                f"tls.server.need.client.auth: {self.need_client_auth!r} is not one of "
                f"{', '.join(_CLIENT_AUTH)}"
            )
        if self.enabled and not (self.cert_path and self.key_path):
            raise TlsConfigError(
                f"tls.server.mode={self.mode} needs tls.server.certPath and tls.server.keyPath"
            )
        if self.enabled and self.need_client_auth != "none" and not self.trust_cert_path:
            raise TlsConfigError(
                f"tls.server.need.client.auth={self.need_client_auth} needs tls.server.trustCertPath"
            )

    def context(self) -> ssl.SSLContext:
        """The server's SSL context (raises :class:`TlsConfigError` naming the file that failed)."""
        self.validate()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            ctx.load_cert_chain(self.cert_path, self.key_path, self.key_password or None)
        except (OSError, ssl.SSLError) as e:
            raise TlsConfigError(
                f"cannot load tls.server.certPath={self.cert_path!r} / keyPath={self.key_path!r}: {e}"
            ) from None
        if self.trust_cert_path:
            try:
                ctx.load_verify_locations(self.trust_cert_path)
            except (OSError, ssl.SSLError) as e:
                raise TlsConfigError(
                    f"cannot load tls.server.trustCertPath={self.trust_cert_path!r}: {e}"
                ) from None
        ctx.verify_mode = _CLIENT_AUTH[self.need_client_auth]
        return ctx


@dataclass
class TlsClientSettings:
    enable: bool = False
    trust_cert_path: str = ""
    verify_server: bool = False
    cert_path: str = ""
    key_path: str = ""
    key_password: str = ""

    def context(self) -> ssl.SSLContext | None:
        """The client's SSL context, or None when TLS is off."""
        if not self.enable:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        # Brokers are addressed by IP as the name server hands them out: the certificate is checked
        # against the trusted CAs, not against a host name.
        ctx.check_hostname = False
        if self.verify_server:
            try:
                if self.trust_cert_path:
                    ctx.load_verify_locations(self.trust_cert_path)
                else:
                    ctx.load_default_certs()
            except (OSError, ssl.SSLError) as e:
                raise TlsConfigError(
                    f"cannot load tls.client.trustCertPath={self.trust_cert_path!r}: {e}"
                ) from None
            ctx.verify_mode = ssl.CERT_REQUIRED
        else:
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_path or self.key_path:
            try:
                ctx.load_cert_chain(self.cert_path, self.key_path or None, self.key_password or None)
            except (OSError, ssl.SSLError) as e:
                raise TlsConfigError(
                    f"cannot load tls.client.certPath={self.cert_path!r} / keyPath={self.key_path!r}: {e}"
                ) from None
        return ctx


class TlsTransport:
    """What a :class:`Channel` uses of ``asyncio.Transport``, over one TLS session of a :class:`TlsGate`."""

    __slots__ = ("_gate",)

    def __init__(self, gate: TlsGate) -> None:
        self._gate = gate

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._gate.encrypt((data,))

    def writelines(self, parts: Iterable[bytes | bytearray | memoryview]) -> None:
        self._gate.encrypt(parts)

    def close(self) -> None:
        self._gate.close_tls()

    def abort(self) -> None:
        self._gate.raw.abort()

    def is_closing(self) -> bool:
        return self._gate.raw.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        sslobj = self._gate.sslobj
        if name == "ssl_object":
            return sslobj
        if name == "peercert":
            return sslobj.getpeercert() if sslobj is not None else default
        if name == "cipher":
            return sslobj.cipher() if sslobj is not None else default
        return self._gate.raw.get_extra_info(name, default)

    def get_write_buffer_size(self) -> int:
        return self._gate.raw.get_write_buffer_size()

    def pause_reading(self) -> None:
        self._gate.raw.pause_reading()

    def resume_reading(self) -> None:
        self._gate.raw.resume_reading()


class TlsGate(asyncio.Protocol):
    """The first protocol of an accepted connection while TLS is on: sniffs, then plain or TLS."""

    def __init__(
        self,
        channel: Channel,
        settings: TlsServerSettings,
        context: ssl.SSLContext,
        on_refused: Callable[[str, str], object] | None = None,
    ) -> None:
        self.channel = channel
        self.settings = settings
        self.context = context
        self.raw: asyncio.Transport = None  # type: ignore[assignment]
        self.sslobj: ssl.SSLObject | None = None
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self._opened = False  # the Channel has its transport
        self._peer = ""
        self._timer: asyncio.TimerHandle | None = None
        self._on_refused = on_refused

    # --- asyncio.Protocol ---------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.raw = transport  # type: ignore[assignment]
        self._peer = format_addr(transport.get_extra_info("peername"))
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.settings.handshake_timeout_s, self._timed_out)

    def data_received(self, data: bytes) -> None:
        if self.sslobj is None:
            if data[0] != _HANDSHAKE_RECORD:
                self._plain(data)
                return
            self.sslobj = self.context.wrap_bio(self._in, self._out, server_side=True)
        self._in.write(data)
        if not self._opened and not self._handshake():
            return
        self._decrypt()

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        if self._opened:
            self.channel.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._opened:
            self.channel.pause_writing()

    def resume_writing(self) -> None:
        if self._opened:
            self.channel.resume_writing()

    # --- TLS ----------------------------------------------------------------------------------------------

    def encrypt(self, parts: Iterable[bytes | bytearray | memoryview]) -> None:
        sslobj = self.sslobj
        if sslobj is None or self.raw.is_closing():
            return
        try:
            for part in parts:
                if part:
                    sslobj.write(part)
        except ssl.SSLError as e:  # the session is gone (the peer's alert): this connection only
            log.warning("closing TLS connection to %s: cannot write: %s", self._peer, e.reason or e)
            self.raw.abort()
            return
        self._flush()

    def close_tls(self) -> None:
        if self.raw.is_closing():
            return
        if self.sslobj is not None:
            try:
                self.sslobj.unwrap()  # close_notify
            except (ssl.SSLError, ValueError):
                pass
            self._flush()
        self.raw.close()

    def _plain(self, data: bytes) -> None:
        if self.settings.mode != "permissive":
            self._refuse("a plaintext connection (tls.server.mode=enforcing)")
            return
        self._cancel_timer()
        self._opened = True
        self.raw.set_protocol(self.channel)  # plain from here on: the Channel reads the socket itself
        self.channel.connection_made(self.raw)
        self.channel.data_received(data)

    def _handshake(self) -> bool:
        assert self.sslobj is not None
        try:
            self.sslobj.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return False
        except ssl.SSLError as e:
            self._flush()  # the alert tells the client why
            self._refuse(f"a TLS handshake that failed: {e.reason or e}")
            return False
        self._flush()
        self._cancel_timer()
        self._opened = True
        self.channel.connection_made(TlsTransport(self))  # type: ignore[arg-type]
        return True

    def _decrypt(self) -> None:
        assert self.sslobj is not None
        chunks = []
        closed = False
        while True:
            try:
                chunk = self.sslobj.read(_READ_CHUNK)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                closed = True
                break
            except ssl.SSLError as e:
                log.warning("closing TLS connection from %s: %s", self._peer, e.reason or e)
                self.raw.abort()
                return
            if not chunk:
                closed = True
                break
            chunks.append(chunk)
        self._flush()  # session tickets, key updates
        if chunks:
            self.channel.data_received(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        if closed:
            self.close_tls()

    def _flush(self) -> None:
        if self._out.pending:
            self.raw.write(self._out.read())

    def _refuse(self, what: str) -> None:
        self._cancel_timer()
        if self._on_refused is not None:
            self._on_refused(what, self._peer)  # counts and logs (rate-limited)
        else:
            log.warning("refusing %s from %s", what, self._peer)
        self.raw.close()

    def _timed_out(self) -> None:
        self._timer = None
        if not self._opened:
            self._refuse(
                f"a connection that did not finish the TLS handshake within "
                f"{self.settings.handshake_timeout_s:g} s"
            )

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
