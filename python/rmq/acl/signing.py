"""Request signing as RocketMQ ACL 1.0 does it (the Java client's ``AclClientRPCHook``).

The signed content is the values of the request's ext fields, sorted by key as Java's ``TreeMap`` sorts
strings (UTF-16 code units), the ``Signature`` field itself left out, concatenated and UTF-8 encoded,
followed by the body. The signature is HmacSHA1 of that content under the secret key (UTF-8), Base64.
The client adds ``AccessKey`` (and ``SecurityToken`` when it has one) before signing, so both are signed.

A server leaves ``_UNIQUE_KEY_QUERY`` out of the content as well (Apache's ``PlainAccessValidator``);
:func:`signed_content` takes the keys to leave out.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping

from rmq.remoting.command import RemotingCommand

__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "UNIQUE_KEY_QUERY",
    "RequestSigner",
    "calc_signature",
    "signed_content",
]

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


def _java_order(key: str) -> bytes:
    # Java compares strings by UTF-16 code units; big-endian UTF-16 bytes sort the same way.
    return key.encode("utf-16-be", "surrogatepass")


def signed_content(
    ext_fields: Mapping[str, str],
    body: bytes | bytearray | memoryview | None,
    leave_out: Iterable[str] = (SIGNATURE,),
) -> bytes:
    """The bytes a signature covers: the ext field values sorted by key, then the body."""
    skip = set(leave_out)
    values = "".join(ext_fields[k] for k in sorted(ext_fields, key=_java_order) if k not in skip)
    head = values.encode("utf-8", "surrogatepass")
    return head + bytes(body) if body else head


def calc_signature(content: bytes, secret_key: str) -> str:
    """Base64 of HmacSHA1(``content``) under ``secret_key``."""
    mac = hmac.new(secret_key.encode("utf-8", "surrogatepass"), content, hashlib.sha1)
    return base64.b64encode(mac.digest()).decode("ascii")


class RequestSigner:
    """Signs a request in place with one account's credentials (an RPC hook for
    :class:`rmq.remoting.client.RemotingClient`)."""

    __slots__ = ("_secret_key", "access_key", "security_token")

    def __init__(self, access_key: str, secret_key: str, security_token: str | None = None) -> None:
        if not access_key or not secret_key:
            raise ValueError("ACL credentials need both an access key and a secret key")
        self.access_key = access_key
        self._secret_key = secret_key
        self.security_token = security_token or None

    def __call__(self, request: RemotingCommand) -> None:
        fields = request.ext_fields
        fields[ACCESS_KEY] = self.access_key
        if self.security_token is not None:
            fields[SECURITY_TOKEN] = self.security_token
        fields.pop(SIGNATURE, None)
        fields[SIGNATURE] = calc_signature(signed_content(fields, request.body), self._secret_key)

    def __repr__(self) -> str:  # never the secret
        return f"RequestSigner(access_key={self.access_key!r})"
