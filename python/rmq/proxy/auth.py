"""ACL for the 5.x clients: their HMAC ``authorization`` header checked against rmq's ACL rules.

A 5.x client signs each call with ``authorization: MQv2-HMAC-SHA1 Credential=<accessKey>,
SignedHeaders=x-mq-date-time, Signature=<hex HmacSHA1(secretKey, x-mq-date-time)>``. The account is the one
of that access key in the broker's ACL file (``python/rmq/acl``, the same rules the Remoting port checks, read
through one validator so a reload reaches both); a globally white-listed address needs no signature, as on
Remoting. Topic and group permissions are the account's (PUB to send, SUB to receive and ack).
"""

from __future__ import annotations

import hashlib
import hmac
import logging

from rmq.acl.rules import PUB, SUB, allows, perm_name
from rmq.acl.validator import AccessValidator
from rmq.proxy.pb import d
from rmq.proxy.status import ProxyError

log = logging.getLogger("rmq.proxy")

_PERMS = {"PUB": PUB, "SUB": SUB}


def parse_authorization(value: str) -> tuple[str, str, str]:
    """``(algorithm, access key, signature)`` of an ``authorization`` header."""
    algorithm, _, rest = value.strip().partition(" ")
    fields = {}
    for part in rest.split(","):
        key, _, val = part.strip().partition("=")
        fields[key] = val
    if "Credential" not in fields or "Signature" not in fields:
        raise ProxyError(d.Code.UNAUTHORIZED, "authorization header lacks Credential or Signature")
    return algorithm, fields["Credential"].split("/")[0], fields["Signature"]


class Authenticator:
    def __init__(self, validator: AccessValidator) -> None:
        self.validator = validator

    def authenticate(self, meta: dict[str, str], host: str) -> None:
        """Raise UNAUTHORIZED unless the call is signed by a known account (or comes from a white address);
        each refusal is logged with the caller and why."""
        try:
            self._authenticate(meta, host)
        except ProxyError as e:
            log.warning(
                "5.x call from %s (client %s) refused: %s", host, meta.get("x-mq-client-id", "?"), e.message
            )
            raise

    def _authenticate(self, meta: dict[str, str], host: str) -> None:
        self.validator.reload_if_changed()
        rules = self.validator.rules
        ip = host.rsplit(":", 1)[0].strip("[]")
        header = meta.get("authorization")
        if not header:
            if rules.globally_white(ip):
                return
            raise ProxyError(d.Code.UNAUTHORIZED, "ACL is on: the call carries no authorization header")
        algorithm, ak, signature = parse_authorization(header)
        account = rules.accounts.get(ak)
        if account is None:
            raise ProxyError(d.Code.UNAUTHORIZED, f"no account for access key {ak!r}")
        if algorithm != "MQv2-HMAC-SHA1":
            raise ProxyError(d.Code.UNAUTHORIZED, f"unsupported signature algorithm {algorithm!r}")
        date_time = meta.get("x-mq-date-time", "")
        want = hmac.new(account.secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()
        if not hmac.compare_digest(want.lower(), signature.lower()):
            raise ProxyError(d.Code.UNAUTHORIZED, f"signature mismatch for access key {ak}")

    def authorize(self, meta: dict[str, str], kind: str, name: str, perm: str) -> None:
        header = meta.get("authorization")
        if not header:
            return  # a white address, let through by authenticate
        _, ak, _ = parse_authorization(header)
        account = self.validator.rules.accounts.get(ak)
        if account is None:
            raise ProxyError(d.Code.UNAUTHORIZED, f"no account for access key {ak!r}")
        if account.admin and not account.has_resource_perms:
            return
        needed = _PERMS[perm]
        owned = account.perm_for(kind, name)
        if not allows(needed, owned):
            has = f"accessKey={ak} has {perm_name(owned)}"
            why = f"no permission for {kind}:{name}: needs {perm_name(needed)}, {has}"
            log.warning("5.x call (client %s) refused: %s", meta.get("x-mq-client-id", "?"), why)
            raise ProxyError(d.Code.FORBIDDEN, why)
