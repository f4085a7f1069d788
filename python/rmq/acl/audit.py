"""The admin audit log: every change a broker or name server made on request, who asked, and what came of it.

:class:`AdminAudit` is installed as a server dispatcher's :attr:`~rmq.remoting.dispatcher.Dispatcher.audit`.
For every request of :data:`~rmq.acl.validator.ADMIN_CODES` (the requests that change a broker's or a name
server's state for everyone: topics, groups, broker and name server config, offsets, write permission, KV
config, ACL rules, file deletion, ...) that a processor answered, it logs one line to the ``rmq.audit``
logger: the request's name and code, the caller's address and access key (``-`` without ACL), its
arguments, and the result -- INFO when it succeeded, WARNING with the remark when it did not::

    admin change UPDATE_AND_CREATE_TOPIC (17) from 127.0.0.1:50412 accessKey=rmqadmin:
    topic=Orders readQueueNums=8 writeQueueNums=8 perm=6 ... -> SUCCESS

Arguments are the request's header fields, and what its body says where the body is the change itself (a
broker or name server config's properties, a subscription group's JSON); any other body is given by its
size. Secrets are masked (``******``, as the ACL's answers mask them): every field or property whose name
holds ``secret``, ``password`` or ``credential``, and the signature. Not logged: REGISTER_BROKER and
REGISTER_TOPIC_IN_NAMESRV (brokers send them every 30 s), the admin-only reads of the ACL configuration
(52, 54), and requests the ACL check refused (they never reach a processor; the validator logs those).
"""

from __future__ import annotations

import logging
from typing import Final

from rmq.acl.signing import ACCESS_KEY, SIGNATURE
from rmq.acl.validator import ADMIN_CODES, SECRET_MASK
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand
from rmq.remoting.context import RequestContext

__all__ = ["AUDITED_CODES", "AdminAudit", "describe_arguments", "mask"]

log = logging.getLogger("rmq.audit")

_PERIODIC: Final = frozenset({int(RequestCode.REGISTER_BROKER), 217})  # 217: REGISTER_TOPIC_IN_NAMESRV
_READS: Final = frozenset(
    {int(RequestCode.GET_BROKER_CLUSTER_ACL_INFO), int(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)}
)  # admin-only, but they change nothing
AUDITED_CODES: Final[frozenset[int]] = ADMIN_CODES - _PERIODIC - _READS
"""The request codes whose answers are logged."""

_SECRET_WORDS: Final = ("secret", "password", "credential")
_PROPERTIES_BODY: Final = frozenset(
    {int(RequestCode.UPDATE_BROKER_CONFIG), int(RequestCode.UPDATE_NAMESRV_CONFIG)}
)
_JSON_BODY: Final = frozenset({int(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)})
_MAX_BODY_TEXT: Final = 1024
MASK: Final = SECRET_MASK


def mask(name: str, value: str) -> str:
    """``value``, or the mask when ``name`` names a secret."""
    lowered = name.lower()
    return MASK if any(w in lowered for w in _SECRET_WORDS) else value


def _properties(text: str) -> str:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        out.append(f"{key.strip()}={mask(key, value.strip())}" if sep else line)
    return " ".join(out)


def _json(text: str) -> str:
    if any(w in text.lower() for w in _SECRET_WORDS):
        return f"<{len(text)} bytes of JSON naming a secret>"
    return text if len(text) <= _MAX_BODY_TEXT else text[:_MAX_BODY_TEXT] + "..."


def describe_arguments(request: RemotingCommand) -> str:
    """The request's arguments as ``name=value`` pairs, secrets masked."""
    parts = [
        f"{k}={mask(k, v)}" for k, v in sorted(request.ext_fields.items()) if k not in (ACCESS_KEY, SIGNATURE)
    ]
    body = bytes(request.body) if request.body else b""
    if body:
        text = body.decode("utf-8", "replace")
        if request.code in _PROPERTIES_BODY:
            parts.append(f"body: {_properties(text)}")
        elif request.code in _JSON_BODY:
            parts.append(f"body: {_json(text)}")
        else:
            parts.append(f"body: {len(body)} bytes")
    return " ".join(parts) if parts else "(no arguments)"


def _code_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return "REGISTER_TOPIC_IN_NAMESRV" if code == 217 else "REQUEST"


def _result_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return "CODE"


class AdminAudit:
    """The dispatcher hook: logs the answered admin changes (see the module's doc)."""

    def __init__(self, codes: frozenset[int] = AUDITED_CODES) -> None:
        self.codes = codes
        self.logged = 0

    def __call__(self, ctx: RequestContext, request: RemotingCommand, response: RemotingCommand) -> None:
        if request.code not in self.codes:
            return
        self.logged += 1
        ok = response.code == ResponseCode.SUCCESS
        result = f"{_result_name(response.code)} ({response.code})"
        if not ok and response.remark:
            result += f": {response.remark}"
        log.log(
            logging.INFO if ok else logging.WARNING,
            "admin change %s (%d) from %s accessKey=%s: %s -> %s",
            _code_name(request.code),
            request.code,
            ctx.remote_addr,
            request.ext_fields.get(ACCESS_KEY) or "-",
            describe_arguments(request),
            result if not ok else "SUCCESS",
        )
