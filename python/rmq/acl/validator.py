"""The server-side ACL check: which resources a request needs, and whether its signer may have them.

:class:`AccessValidator` is installed as a server dispatcher's guard: it runs before any processor and
answers a refused request itself with NO_PERMISSION (16), the remark naming what is missing (the access
key, the resource and the permission; never a secret or a signature).

Per request code (RocketMQ's ``PlainAccessValidator.parse``; a group ``g`` is also the topic ``%RETRY%g``):

* SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE: the topic, PUB (to ``%RETRY%g``: group ``g``, SUB);
  RocketMQ checks nothing for a batch, rmq checks it like a single send;
* PULL_MESSAGE / LITE_PULL_MESSAGE: the topic and the consumer group, SUB;
* QUERY_MESSAGE: the topic, SUB; CONSUMER_SEND_MSG_BACK, GET_CONSUMER_LIST_BY_GROUP, UNREGISTER_CLIENT: the
  group, SUB (and, for CONSUMER_SEND_MSG_BACK, not checked by RocketMQ: once the record at its offset is
  read, that record's topic, SUB, by :meth:`AccessValidator.check_read`); UPDATE_CONSUMER_OFFSET (and,
  in rmq, QUERY_CONSUMER_OFFSET): the group and the topic, SUB;
* HEART_BEAT: every consumer group in the body and every topic it subscribes to, SUB;
* LOCK_BATCH_MQ / UNLOCK_BATCH_MQ (not checked by RocketMQ): the body's group and its queues' topics, SUB;
* :data:`ADMIN_CODES`: an admin account, whatever the address (RocketMQ lets global white-list addresses
  do anything, and checks only five admin codes);
* VIEW_MESSAGE_BY_ID (not checked by RocketMQ): a valid signature, then, once the message is read, its
  topic, SUB (:meth:`AccessValidator.check_read`, called by the processor);
* END_TRANSACTION (not checked by RocketMQ): a valid signature, then, once the half message at its offset
  is read, PUB on the topic the commit would write it to;
* every other code: a valid signature of any account.

Where RocketMQ lets the global white list skip every check, rmq does too except for admin codes. An
account's ``whiteRemoteAddress`` spares that account the signature (as in RocketMQ) but not its
permissions (RocketMQ skips both).

Signatures are compared in constant time (:func:`hmac.compare_digest`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from rmq.acl.rules import PUB, SUB, Account, AclConfigError, AclRules, allows, parse_rules, perm_name
from rmq.acl.signing import ACCESS_KEY, SIGNATURE, UNIQUE_KEY_QUERY, calc_signature, signed_content
from rmq.common import fastjson
from rmq.common.codes import (
    ACK_MESSAGE,
    BATCH_ACK_MESSAGE,
    CHANGE_MESSAGE_INVISIBLETIME,
    POP_MESSAGE,
    RequestCode,
    ResponseCode,
)
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.context import RequestContext

__all__ = ["ADMIN_CODES", "AccessValidator", "Requirement", "required_resources"]

log = logging.getLogger(__name__)

RETRY_PREFIX: Final = "%RETRY%"
TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
_NO_PERMISSION: Final = int(ResponseCode.NO_PERMISSION)
_LOG_WINDOW_S: Final = 10
_LOG_DISTINCT: Final = 100

RC = RequestCode
ADMIN_CODES: Final[frozenset[int]] = frozenset(
    int(c)
    for c in (
        # RocketMQ 4.9's five
        RC.UPDATE_AND_CREATE_TOPIC,
        RC.UPDATE_BROKER_CONFIG,
        RC.DELETE_TOPIC_IN_BROKER,
        RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RC.DELETE_SUBSCRIPTIONGROUP,
        # and every other request that changes a broker's or a name server's state for everyone
        RC.TRIGGER_DELETE_FILES,
        RC.UPDATE_AND_CREATE_ACL_CONFIG,
        RC.DELETE_ACL_CONFIG,
        RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
        RC.PUT_KV_CONFIG,
        RC.DELETE_KV_CONFIG,
        RC.REGISTER_BROKER,
        RC.UNREGISTER_BROKER,
        RC.WIPE_WRITE_PERM_OF_BROKER,
        RC.ADD_WRITE_PERM_OF_BROKER,
        RC.DELETE_TOPIC_IN_NAMESRV,
        RC.SUSPEND_CONSUMER,
        RC.RESUME_CONSUMER,
        RC.RESET_CONSUMER_OFFSET_IN_CONSUMER,
        RC.RESET_CONSUMER_OFFSET_IN_BROKER,
        RC.ADJUST_CONSUMER_THREAD_POOL,
        RC.INVOKE_BROKER_TO_RESET_OFFSET,
        RC.REGISTER_FILTER_SERVER,
        RC.REGISTER_MESSAGE_FILTER_CLASS,
        RC.CLEAN_EXPIRED_CONSUMEQUEUE,
        RC.CLONE_GROUP_OFFSET,
        RC.CLEAN_UNUSED_TOPIC,
        RC.UPDATE_NAMESRV_CONFIG,
        RC.RESUME_CHECK_HALF_MESSAGE,
        RC.DELETE_EXPIRED_COMMITLOG,
        217,  # REGISTER_TOPIC_IN_NAMESRV
    )
)

Requirement = tuple[str, str, int]
"""``(kind, name, permission)``: kind is ``"topic"`` or ``"group"``."""


def _topic(name: str | None, perm: int) -> list[Requirement]:
    if not name:
        return []
    if name.startswith(RETRY_PREFIX):
        return [("group", name[len(RETRY_PREFIX) :], SUB)]
    return [("topic", name, perm)]


def _group(name: str | None) -> list[Requirement]:
    return [("group", name, SUB)] if name else []


def _send(ext: dict[str, str]) -> list[Requirement]:
    return _topic(ext.get("b") or ext.get("topic"), PUB)


def _heartbeat(request: RemotingCommand) -> list[Requirement]:
    if not request.body:
        return []
    data = fastjson.loads(bytes(request.body))
    if not isinstance(data, dict):
        raise ValueError("heartbeat body is not a JSON object")
    out: list[Requirement] = []
    for cd in data.get("consumerDataSet") or []:
        if not isinstance(cd, dict):
            raise ValueError("heartbeat consumer data is not a JSON object")
        out += _group(str(cd.get("groupName") or ""))
        for sd in cd.get("subscriptionDataSet") or []:
            if not isinstance(sd, dict):
                raise ValueError("heartbeat subscription is not a JSON object")
            out += _topic(str(sd.get("topic") or ""), SUB)
    return out


def _locks(request: RemotingCommand) -> list[Requirement]:
    if not request.body:
        return []
    data = fastjson.loads(bytes(request.body))
    if not isinstance(data, dict):
        raise ValueError("lock body is not a JSON object")
    out = _group(str(data.get("consumerGroup") or ""))
    for mq in data.get("mqSet") or []:
        if not isinstance(mq, dict):
            raise ValueError("lock body's message queue is not a JSON object")
        out += _topic(str(mq.get("topic") or ""), SUB)
    return out


def _pop_topic(name: str | None, group: str | None) -> list[Requirement]:
    """A POP request's topic: a POP retry topic (``%RETRY%<group>_<topic>`` or ``+``) needs SUB on the
    topic it retries (its group is checked anyway), any other topic as a pull's."""
    if name and group:
        for sep in ("_", "+"):
            prefix = f"{RETRY_PREFIX}{group}{sep}"
            if name.startswith(prefix):
                return _topic(name[len(prefix) :], SUB)
    return _topic(name, SUB)


def _pop(ext: dict[str, str]) -> list[Requirement]:
    group = ext.get("consumerGroup")
    return _pop_topic(ext.get("topic"), group) + _group(group)


def _batch_ack(request: RemotingCommand) -> list[Requirement]:
    """BATCH_ACK_MESSAGE: SUB on each ack's group and topic (its retry mark says which topic)."""
    if not request.body:
        return []
    data = fastjson.loads(bytes(request.body))
    if not isinstance(data, dict):
        raise ValueError("batch ack body is not a JSON object")
    out: list[Requirement] = []
    for a in data.get("acks") or []:
        if not isinstance(a, dict):
            raise ValueError("a batch ack is not a JSON object")
        group = str(a.get("c") or a.get("consumerGroup") or "")
        out += _group(group) + _topic(str(a.get("t") or a.get("topic") or ""), SUB)
    return out


_EXTRACTORS: Final[dict[int, Callable[[RemotingCommand, dict[str, str]], list[Requirement]]]] = {
    RC.SEND_MESSAGE: lambda r, e: _send(e),
    RC.SEND_MESSAGE_V2: lambda r, e: _send(e),
    RC.SEND_BATCH_MESSAGE: lambda r, e: _send(e),
    RC.CONSUMER_SEND_MSG_BACK: lambda r, e: _group(e.get("group")),
    RC.PULL_MESSAGE: lambda r, e: _topic(e.get("topic"), SUB) + _group(e.get("consumerGroup")),
    RC.LITE_PULL_MESSAGE: lambda r, e: _topic(e.get("topic"), SUB) + _group(e.get("consumerGroup")),
    RC.QUERY_MESSAGE: lambda r, e: _topic(e.get("topic"), SUB),
    RC.HEART_BEAT: lambda r, e: _heartbeat(r),
    RC.UNREGISTER_CLIENT: lambda r, e: _group(e.get("consumerGroup")),
    RC.GET_CONSUMER_LIST_BY_GROUP: lambda r, e: _group(e.get("consumerGroup")),
    RC.UPDATE_CONSUMER_OFFSET: lambda r, e: _group(e.get("consumerGroup")) + _topic(e.get("topic"), SUB),
    RC.QUERY_CONSUMER_OFFSET: lambda r, e: _group(e.get("consumerGroup")) + _topic(e.get("topic"), SUB),
    RC.LOCK_BATCH_MQ: lambda r, e: _locks(r),
    RC.UNLOCK_BATCH_MQ: lambda r, e: _locks(r),
    POP_MESSAGE: lambda r, e: _pop(e),
    ACK_MESSAGE: lambda r, e: _pop(e),
    CHANGE_MESSAGE_INVISIBLETIME: lambda r, e: _pop(e),
    BATCH_ACK_MESSAGE: lambda r, e: _batch_ack(r),
}


def required_resources(request: RemotingCommand) -> list[Requirement]:
    """What ``request`` needs besides a valid signature (raises ``ValueError`` on a body it cannot read)."""
    extract = _EXTRACTORS.get(request.code)
    return extract(request, request.ext_fields) if extract is not None else []


def _short(text: str, limit: int = 64) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _host(remote_addr: str) -> str:
    host, sep, _port = remote_addr.rpartition(":")
    return (host if sep else remote_addr).strip("[]")


class AccessValidator:
    """The rules of one ``plain_acl.yml`` and the check against them.

    ``AccessValidator.from_file(path)`` raises :class:`AclConfigError` when the file is missing or invalid
    (a server must not start open). :meth:`reload_if_changed` (run every second by the owner) swaps in a
    changed file only once its content has stayed the same for two checks in a row and parses whole; a
    file that does not parse keeps the old rules and logs a WARN.
    """

    def __init__(self, rules: AclRules, path: str | Path | None = None) -> None:
        self.rules = rules
        self.path = Path(path) if path is not None else None
        self._loaded_digest: bytes | None = None
        self._pending_digest: bytes | None = None
        self._rejected_digest: bytes | None = None
        self.reloads = 0
        self.denied = 0
        self._log_window = 0.0
        self._repeats: dict[str, int] = {}
        self._suppressed = 0

    @classmethod
    def from_file(cls, path: str | Path) -> AccessValidator:
        path = Path(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise AclConfigError(f"ACL file {path} does not exist") from None
        except OSError as e:
            raise AclConfigError(f"cannot read ACL file {path}: {e}") from None
        rules = _parse_bytes(data, path)
        v = cls(rules, path)
        v._loaded_digest = hashlib.sha256(data).digest()
        log.info("ACL rules loaded from %s: %d accounts", path, len(rules.accounts))
        return v

    # --- reload ------------------------------------------------------------------------------------
    def reload_if_changed(self) -> bool:
        """Check the file once; returns True when new rules took effect."""
        if self.path is None:
            return False
        try:
            data = self.path.read_bytes()
        except OSError as e:
            if self._pending_digest != b"missing":
                log.warning("ACL file %s cannot be read (%s); keeping the rules loaded before", self.path, e)
            self._pending_digest = b"missing"
            return False
        digest = hashlib.sha256(data).digest()
        if digest == self._loaded_digest or digest == self._rejected_digest:
            self._pending_digest = None
            return False
        if digest != self._pending_digest:
            self._pending_digest = digest  # changed: wait until it stays the same (a writer may be busy)
            return False
        self._pending_digest = None
        try:
            rules = _parse_bytes(data, self.path)
        except AclConfigError as e:
            self._rejected_digest = digest
            log.warning("ACL file changed but is not valid; keeping the rules loaded before: %s", e)
            return False
        self.rules = rules
        self._loaded_digest = digest
        self._rejected_digest = None
        self.reloads += 1
        log.info("ACL rules reloaded from %s: %d accounts", self.path, len(rules.accounts))
        return True

    # --- the check ---------------------------------------------------------------------------------
    def check(self, remote_addr: str, request: RemotingCommand) -> str | None:
        """``None`` when ``request`` from ``remote_addr`` may go on, else why not."""
        rules = self.rules  # one version for the whole check, whatever a reload does meanwhile
        code = request.code
        host = _host(remote_addr)
        admin_code = code in ADMIN_CODES
        if not admin_code and rules.globally_white(host):
            return None
        ext = request.ext_fields
        ak = ext.get(ACCESS_KEY)
        if not ak:
            return f"No accessKey is configured (request code {code})"
        account = rules.accounts.get(ak)
        if account is None:
            return f"No acl config for accessKey={_short(ak)!r}"
        if admin_code or not account.white_address.match(host):
            reason = self._check_signature(account, request)
            if reason is not None:
                return reason
        if admin_code:
            if not account.admin:
                return f"Need admin permission for request code={code}, but accessKey={ak} is not admin"
            return None
        try:
            needed = required_resources(request)
        except (ValueError, TypeError, AttributeError) as e:
            return f"cannot read request code {code} to check its permissions: {_short(str(e), 120)}"
        return self._check_perms(account, needed)

    def _check_perms(self, account: Account, needed: list[Requirement]) -> str | None:
        if account.admin and not account.has_resource_perms:
            return None
        ak = account.access_key
        for kind, name, perm in needed:
            if kind == "topic" and name == TRACE_TOPIC and perm == PUB:
                continue  # RocketMQ lets every account write message traces
            owned = account.perm_for(kind, name)
            if not allows(perm, owned):
                return (
                    f"No permission for {kind}:{_short(name, 255)}: needs {perm_name(perm)}, "
                    f"accessKey={ak} has {perm_name(owned)}"
                )
        return None

    def check_read(
        self, remote_addr: str, request: RemotingCommand, topic: str, perm: int = SUB
    ) -> str | None:
        """After :meth:`check` let ``request`` through: may its account have ``perm`` on ``topic``? For the
        requests that name a record by its CommitLog offset, whose topic is known only once the record is
        read: VIEW_MESSAGE_BY_ID and CONSUMER_SEND_MSG_BACK (SUB on the record's topic; a retry topic
        ``%RETRY%g`` is group ``g``), END_TRANSACTION (PUB on the half message's real topic). RocketMQ checks
        none of them, so a send-back of another topic's record could be read from the group's retry topic.
        A refusal is counted and logged like one of :meth:`guard`'s."""
        rules = self.rules
        if rules.globally_white(_host(remote_addr)):
            return None
        account = rules.accounts.get(request.ext_fields.get(ACCESS_KEY) or "")
        if account is None:  # gone in a reload since the request was let through
            reason: str | None = "No acl config for this accessKey any more"
        else:
            reason = self._check_perms(account, _topic(topic, perm))
        if reason is not None:
            self.denied += 1
            self._log_denial(remote_addr, request.code, reason)
        return reason

    def _check_signature(self, account: Account, request: RemotingCommand) -> str | None:
        ext = request.ext_fields
        given = ext.get(SIGNATURE)
        if not given:
            return f"No Signature for accessKey={account.access_key}"
        given_b = given.encode("utf-8", "surrogatepass")
        content = signed_content(ext, request.body, (SIGNATURE, UNIQUE_KEY_QUERY))
        if hmac.compare_digest(calc_signature(content, account.secret_key).encode(), given_b):
            return None
        if UNIQUE_KEY_QUERY in ext:  # a client that signed the flag too (it is in its ext fields)
            content = signed_content(ext, request.body, (SIGNATURE,))
            if hmac.compare_digest(calc_signature(content, account.secret_key).encode(), given_b):
                return None
        return f"Check signature failed for accessKey={account.access_key}"

    def guard(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """The dispatcher hook: ``None`` lets the request through, else the NO_PERMISSION answer."""
        try:
            reason = self.check(ctx.remote_addr, request)
        except Exception as e:  # fail closed, never crash the connection
            log.exception("ACL check of request code %s failed", request.code)
            reason = f"ACL check failed: {type(e).__name__}"
        if reason is None:
            return None
        self.denied += 1
        self._log_denial(ctx.remote_addr, request.code, reason)
        return create_response(request, _NO_PERMISSION, reason)

    def _log_denial(self, remote: str, code: int, reason: str) -> None:
        """Each distinct refusal is logged once per 10 s window; repeats are counted and summed up when the
        window ends (a flood of bad requests cannot flood the log)."""
        now = time.monotonic()
        if now - self._log_window >= _LOG_WINDOW_S:
            self._flush_denials()
            self._log_window = now
        seen = self._repeats.get(reason)
        if seen is not None:
            self._repeats[reason] = seen + 1
        elif len(self._repeats) < _LOG_DISTINCT:
            self._repeats[reason] = 0
            log.warning("ACL refused request code %s from %s: %s", code, remote, reason)
        else:
            self._suppressed += 1

    def _flush_denials(self) -> None:
        for reason, more in self._repeats.items():
            if more:
                log.warning("ACL refused %d more requests in the last %d s: %s", more, _LOG_WINDOW_S, reason)
        if self._suppressed:
            log.warning("ACL refused %d more requests for other reasons (not logged)", self._suppressed)
        self._repeats.clear()
        self._suppressed = 0

    def stats(self) -> dict[str, Any]:
        return {"accounts": len(self.rules.accounts), "reloads": self.reloads, "denied": self.denied}


def _parse_bytes(data: bytes, path: Path) -> AclRules:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AclConfigError(f"{path}: not UTF-8 ({e})") from None
    return parse_rules(text, str(path))
