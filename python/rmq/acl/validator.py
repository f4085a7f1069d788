"""The server-side ACL check: which resources a request needs, and whether its signer may have them.

:class:`AccessValidator` is installed as a server dispatcher's guard: it runs before any processor and
answers a refused request itself with NO_PERMISSION (16), the remark naming what is missing (the access
key, the resource and the permission; never a secret or a signature).

Per request code (RocketMQ's ``PlainAccessValidator.parse``; a group ``g`` is also the topic ``%RETRY%g``):

* SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE: the topic the send stores to (``topic`` of a
  SEND_MESSAGE, ``b`` of the others), PUB (to ``%RETRY%g``: group ``g``, SUB); RocketMQ checks nothing for a
  batch, rmq checks it like a single send;
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

import copy
import hashlib
import hmac
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from rmq.acl.rules import (
    PUB,
    SUB,
    Account,
    AclConfigError,
    AclRules,
    AddressPattern,
    DataVersion,
    allows,
    dump_raw,
    load_raw,
    merge_rules,
    parse_perm,
    perm_name,
    rules_of,
    write_atomically,
)
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

__all__ = [
    "ADMIN_CODES",
    "SECRET_MASK",
    "AccessValidator",
    "AccountChange",
    "AclChangeError",
    "AclFile",
    "FastSendAccount",
    "Requirement",
    "fast_send_rules",
    "public_account",
    "required_resources",
]

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
        # what the ACL files hold (RocketMQ lets any account read them)
        RC.GET_BROKER_CLUSTER_ACL_INFO,
        RC.GET_BROKER_CLUSTER_ACL_CONFIG,
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


def _send(ext: dict[str, str], key: str) -> list[Requirement]:
    # The field the send processor stores to (a SEND_MESSAGE's ``b`` is not its topic).
    return _topic(ext.get(key), PUB)


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
    RC.SEND_MESSAGE: lambda r, e: _send(e, "topic"),
    RC.SEND_MESSAGE_V2: lambda r, e: _send(e, "b"),
    RC.SEND_BATCH_MESSAGE: lambda r, e: _send(e, "b"),
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


FastSendAccount = tuple[str, str, bool, list[tuple[str, bool]]]
"""An account as the network thread's send fast path checks it: ``(access_key, secret_key, default_pub,
[(topic, pub), ...])``."""


def fast_send_rules(rules: AclRules) -> list[FastSendAccount]:
    """What the network thread needs to take a signed send itself (``NetServer.set_acl_rules``): per
    account, its secret key and whether it may PUB on a topic, by default and per topic, as
    :meth:`AccessValidator.check` decides it for a send (an admin account without resource permissions may
    PUB anywhere; every account may PUB to the trace topic). The network thread takes a send only when its
    signature checks out and the account may PUB on its topic; it leaves everything else (unknown keys,
    denials, white-listed addresses, retry topics) to :meth:`AccessValidator.guard`. A key that is not valid
    UTF-8 is left out (its sends go to Python)."""
    out: list[FastSendAccount] = []
    for ak, account in rules.accounts.items():
        try:
            ak.encode("utf-8")
            account.secret_key.encode("utf-8")
        except UnicodeEncodeError:
            continue
        if account.admin and not account.has_resource_perms:
            out.append((ak, account.secret_key, True, []))
            continue
        topics = [(name, allows(PUB, perm)) for name, perm in account.topic_perms.items()]
        topics.append((TRACE_TOPIC, True))  # last: it wins over a topicPerms entry, as in _check_perms
        out.append((ak, account.secret_key, allows(PUB, account.default_topic_perm), topics))
    return out


def _short(text: str, limit: int = 64) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _host(remote_addr: str) -> str:
    host, sep, _port = remote_addr.rpartition(":")
    return (host if sep else remote_addr).strip("[]")


# --- the ACL files and their changes -----------------------------------------------------------------

SECRET_MASK: Final = "******"
"""What stands for a secret key wherever one would be shown (logs, remarks, GET_BROKER_CLUSTER_ACL_CONFIG)."""
MIN_KEY_LENGTH: Final = 7
"""RocketMQ's ``AclConstants``: an access key and a secret key must be longer than 6 characters."""


class AclChangeError(ValueError):
    """An ACL admin request that cannot be done as asked (nothing was written); the message says why and
    never holds a secret key."""


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()


@dataclass(frozen=True)
class AclFile:
    """One rules file as loaded: its bytes' digest, its rules, and the mapping it holds (what a rewrite
    starts from)."""

    path: Path
    digest: bytes
    rules: AclRules
    raw: dict[str, Any]
    loaded_ms: int

    @classmethod
    def read(cls, path: Path, data: bytes, *, main: bool) -> AclFile:
        """Parse a file's bytes (:class:`AclConfigError` when invalid); a directory file may be empty."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise AclConfigError(f"{path}: not UTF-8 ({e})") from None
        raw = load_raw(text, str(path), allow_empty=not main)
        rules = rules_of(raw, str(path))
        return cls(path, hashlib.sha256(data).digest(), rules, raw, int(time.time() * 1000))

    @property
    def version(self) -> DataVersion:
        """The file's ``dataVersion``; without one, counter 0 stamped when it was loaded (as RocketMQ)."""
        return self.rules.version or DataVersion(0, self.loaded_ms)


_GONE: Final = b"gone"


@dataclass
class _Watch:
    pending: bytes | None = None
    rejected: bytes | None = None


def _perm_entries(entries: list[str], where: str) -> None:
    for i, entry in enumerate(entries):
        parts = [p.strip() for p in entry.split("=") if p.strip()]
        if len(parts) != 2:
            raise AclChangeError(f"{where}[{i}]: {_short(entry)!r} is not resource=PERM (e.g. topicA=SUB)")
        try:
            parse_perm(parts[1], f"{where}[{i}]")
        except AclConfigError as e:
            raise AclChangeError(str(e)) from None


@dataclass
class AccountChange:
    """An UPDATE_AND_CREATE_ACL_CONFIG request's account (RocketMQ's ``PlainAccessConfig``): ``None`` keeps
    what the file holds; ``admin`` is always written."""

    access_key: str
    secret_key: str = field(repr=False)
    admin: bool = False
    white_remote_address: str | None = None
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: list[str] | None = None
    group_perms: list[str] | None = None

    def check(self) -> None:
        """RocketMQ's checks (both keys longer than 6 characters, ``resource=PERM`` entries) and rmq's (a
        permission word, an address pattern): :class:`AclChangeError` naming what is wrong."""
        if not self.access_key:
            raise AclChangeError("accessKey is required")
        if len(self.access_key) < MIN_KEY_LENGTH:
            raise AclChangeError(
                f"accessKey={_short(self.access_key)} is {len(self.access_key)} characters: "
                f"it must be at least {MIN_KEY_LENGTH}"
            )
        if not self.secret_key:
            raise AclChangeError(f"secretKey is required (accessKey={_short(self.access_key)})")
        if len(self.secret_key) < MIN_KEY_LENGTH:
            raise AclChangeError(
                f"secretKey of accessKey={_short(self.access_key)} is {len(self.secret_key)} characters: "
                f"it must be at least {MIN_KEY_LENGTH}"
            )
        for name, value in (
            ("defaultTopicPerm", self.default_topic_perm),
            ("defaultGroupPerm", self.default_group_perm),
        ):
            if value:
                try:
                    parse_perm(value, name)
                except AclConfigError as e:
                    raise AclChangeError(str(e)) from None
        _perm_entries(self.topic_perms or [], "topicPerms")
        _perm_entries(self.group_perms or [], "groupPerms")
        if self.white_remote_address is not None:
            try:
                AddressPattern.parse(self.white_remote_address, "whiteRemoteAddress")
            except AclConfigError as e:
                raise AclChangeError(str(e)) from None

    def apply(self, account: dict[str, Any]) -> None:
        """Write this change into a file's account mapping (a new one: empty)."""
        account["accessKey"] = self.access_key
        account["secretKey"] = self.secret_key
        if self.white_remote_address is not None:
            account["whiteRemoteAddress"] = self.white_remote_address
        account["admin"] = self.admin
        if self.default_topic_perm:
            account["defaultTopicPerm"] = self.default_topic_perm
        if self.default_group_perm:
            account["defaultGroupPerm"] = self.default_group_perm
        if self.topic_perms is not None:
            account["topicPerms"] = list(self.topic_perms)
        if self.group_perms is not None:
            account["groupPerms"] = list(self.group_perms)

    def describe(self) -> str:
        """What the change sets, for the log (the secret key masked)."""
        parts = [f"secretKey={SECRET_MASK}", f"admin={'true' if self.admin else 'false'}"]
        for name, value in (
            ("whiteRemoteAddress", self.white_remote_address),
            ("defaultTopicPerm", self.default_topic_perm),
            ("defaultGroupPerm", self.default_group_perm),
            ("topicPerms", self.topic_perms),
            ("groupPerms", self.group_perms),
        ):
            if value is not None:
                parts.append(f"{name}={value}")
        return ", ".join(parts)


def public_account(raw: dict[str, Any]) -> dict[str, Any]:
    """A file's account as GET_BROKER_CLUSTER_ACL_CONFIG shows it (RocketMQ's ``PlainAccessConfig`` JSON:
    the fields it has, in fastjson's name order), with the secret key masked."""
    out: dict[str, Any] = {"accessKey": _text(raw.get("accessKey"))}
    admin = raw.get("admin")
    out["admin"] = admin is True or _text(admin).lower() == "true"
    for name in ("defaultGroupPerm", "defaultTopicPerm"):
        if raw.get(name) is not None:
            out[name] = _text(raw[name])
    if isinstance(raw.get("groupPerms"), list):
        out["groupPerms"] = [str(p) for p in raw["groupPerms"]]
    out["secretKey"] = SECRET_MASK
    if isinstance(raw.get("topicPerms"), list):
        out["topicPerms"] = [str(p) for p in raw["topicPerms"]]
    if raw.get("whiteRemoteAddress") is not None:
        out["whiteRemoteAddress"] = _text(raw["whiteRemoteAddress"])
    return out


class AccessValidator:
    """The rules of a broker's ACL files and the check against them.

    The files: the main one (``plain_acl.yml``) and every ``*.yml`` / ``*.yaml`` under the ``acl/``
    directory beside it (RocketMQ 4.9.7's ``conf/acl/``; subdirectories too, dot files never), merged into
    one :class:`AclRules`. An access key may be defined in one file only.

    ``AccessValidator.from_file(path)`` raises :class:`AclConfigError` when the main file is missing or any
    file is invalid (a server must not start open). :meth:`reload_if_changed` (run every second by the
    owner) swaps in a changed file only once its content has stayed the same for two checks in a row and
    parses whole; a file that does not parse keeps that file's old rules and logs a WARN; a file added to
    the directory adds its rules (the same way), a file gone from it on two checks in a row removes them.

    The ACL admin requests (:mod:`rmq.broker.processors.acl_admin`) change the files through
    :meth:`update_account`, :meth:`delete_account` and :meth:`update_global_white`: each file is rewritten
    atomically, and the new rules take effect at once.
    """

    def __init__(
        self, rules: AclRules, path: str | Path | None = None, acl_dir: str | Path | None = None
    ) -> None:
        self.rules = rules
        self.path = Path(path) if path is not None else None
        self.acl_dir = Path(acl_dir) if acl_dir is not None else None
        self.files: dict[Path, AclFile] = {}
        """Every file read, by path: the main file first."""
        self._watch: dict[Path, _Watch] = {}
        self._lock = threading.RLock()
        self.reloads = 0
        self.denied = 0
        self._log_window = 0.0
        self._repeats: dict[str, int] = {}
        self._suppressed = 0
        self._listeners: list[Callable[[AclRules], None]] = []

    @classmethod
    def from_file(cls, path: str | Path, acl_dir: str | Path | None = None) -> AccessValidator:
        """Read the main file ``path`` and the files under ``acl_dir`` (default: the ``acl`` directory
        beside ``path``, as RocketMQ's ``conf/acl/`` beside ``conf/plain_acl.yml``)."""
        path = Path(path)
        v = cls(
            AclRules((), {}, str(path)), path, Path(acl_dir) if acl_dir is not None else path.parent / "acl"
        )
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise AclConfigError(f"ACL file {path} does not exist") from None
        except OSError as e:
            raise AclConfigError(f"cannot read ACL file {path}: {e}") from None
        files = {path: AclFile.read(path, data, main=True)}
        for extra in v._dir_files():
            try:
                files[extra] = AclFile.read(extra, extra.read_bytes(), main=False)
            except OSError as e:
                raise AclConfigError(f"cannot read ACL file {extra}: {e}") from None
        v.rules = merge_rules([f.rules for f in files.values()], str(path))
        v.files = files
        log.info(
            "ACL rules loaded from %s: %d accounts",
            ", ".join(str(p) for p in files),
            len(v.rules.accounts),
        )
        return v

    def add_rules_listener(self, listener: Callable[[AclRules], None]) -> None:
        """Call ``listener`` with the rules in force now, and again whenever new rules take effect (a reload
        of a changed file, an ACL admin request's change): how the network thread's send fast path gets the
        rules it checks signed sends against."""
        self._listeners.append(listener)
        listener(self.rules)

    def _rules_changed(self) -> None:
        for listener in self._listeners:
            try:
                listener(self.rules)
            except Exception:
                log.exception("ACL rules listener %r failed", listener)

    def _dir_files(self) -> list[Path]:
        """The rules files of the directory, in name order (temp and dot files left out)."""
        d = self.acl_dir
        if d is None or not d.is_dir():
            return []
        main = self.path.resolve() if self.path is not None else None
        out = []
        for p in sorted(d.rglob("*")):
            if p.suffix not in (".yml", ".yaml") or any(
                part.startswith(".") for part in p.relative_to(d).parts
            ):
                continue
            if p.is_file() and p.resolve() != main:
                out.append(p)
        return out

    def file_of(self, access_key: str) -> Path | None:
        """The file that defines ``access_key``."""
        for path, f in self.files.items():
            if access_key in f.rules.accounts:
                return path
        return None

    # --- reload ------------------------------------------------------------------------------------
    def reload_if_changed(self) -> bool:
        """Check the files once; returns True when new rules took effect."""
        if self.path is None:
            return False
        with self._lock:
            return self._reload()

    def _reload(self) -> bool:
        assert self.path is not None
        paths = [self.path, *self._dir_files()]
        changed = False
        for gone in [p for p in self.files if p not in paths and p != self.path]:
            w = self._watch.setdefault(gone, _Watch())
            if w.pending != _GONE:
                w.pending = _GONE  # gone: wait for the next check (a writer may be replacing it)
                continue
            f = self.files.pop(gone)
            self._watch.pop(gone, None)
            log.info(
                "ACL file %s is gone: its %d accounts and %d global white-list patterns no longer apply",
                gone,
                len(f.rules.accounts),
                len(f.rules.global_white),
            )
            changed = True
        for path in paths:
            w = self._watch.setdefault(path, _Watch())
            try:
                data = path.read_bytes()
            except OSError as e:
                if path == self.path and w.pending != b"missing":
                    log.warning("ACL file %s cannot be read (%s); keeping the rules loaded before", path, e)
                w.pending = b"missing"
                continue
            digest = hashlib.sha256(data).digest()
            loaded = self.files.get(path)
            if (loaded is not None and digest == loaded.digest) or digest == w.rejected:
                w.pending = None
                continue
            if digest != w.pending:
                w.pending = digest  # changed: wait until it stays the same (a writer may be busy)
                continue
            w.pending = None
            try:
                new = AclFile.read(path, data, main=path == self.path)
                self._merged({**self.files, path: new})
            except AclConfigError as e:
                w.rejected = digest
                log.warning("ACL file changed but is not valid; keeping the rules loaded before: %s", e)
                continue
            self.files[path] = new
            w.rejected = None
            changed = True
            log.info("ACL rules reloaded from %s: %d accounts in that file", path, len(new.rules.accounts))
        if changed:
            self.rules = self._merged(self.files)
            self.reloads += 1
            self._rules_changed()
        return changed

    def _merged(self, files: dict[Path, AclFile]) -> AclRules:
        ordered = [files[self.path]] if self.path in files else []
        ordered += [f for p, f in files.items() if p != self.path]
        return merge_rules([f.rules for f in ordered], str(self.path))

    # --- the admin requests ------------------------------------------------------------------------
    def versions(self) -> dict[str, DataVersion]:
        """Each file's version, by path (GET_BROKER_CLUSTER_ACL_INFO's ``allAclFileVersion``)."""
        return {str(p): f.version for p, f in self.files.items()}

    def main_version(self) -> DataVersion:
        """The main file's version (GET_BROKER_CLUSTER_ACL_INFO's ``version``)."""
        f = self.files.get(self.path) if self.path is not None else None
        return f.version if f is not None else DataVersion(0, 0)

    def all_config(self) -> tuple[list[str], list[dict[str, Any]]]:
        """Every file's global white list and accounts as the files hold them (for
        GET_BROKER_CLUSTER_ACL_CONFIG: the directory's files first, then the main file, as RocketMQ lists
        them), the secret keys masked."""
        white: list[str] = []
        accounts: list[dict[str, Any]] = []
        # RocketMQ's order: the directory's files, then the main file.
        for f in sorted(self.files.values(), key=lambda f: f.path == self.path):
            white += [str(a) for a in f.raw.get("globalWhiteRemoteAddresses") or []]
            for raw in f.raw.get("accounts") or []:
                if isinstance(raw, dict):
                    accounts.append(public_account(raw))
        return white, accounts

    def update_account(self, change: AccountChange, who: str) -> Path:
        """Create or update an account (UPDATE_AND_CREATE_ACL_CONFIG) as RocketMQ does: in the file that
        defines it, else in the main file; the fields ``change`` leaves ``None`` keep their value, ``admin``
        is always set. Raises :class:`AclChangeError` (nothing written) on invalid input."""
        change.check()
        with self._lock:
            target = self.file_of(change.access_key) or self._main()
            data = self._current_raw(target)
            accounts = data.get("accounts")
            if accounts is None:
                accounts = []
            if not isinstance(accounts, list):
                raise AclChangeError(f"{target}: accounts is not a list; not written")
            existing = next(
                (
                    a
                    for a in accounts
                    if isinstance(a, dict) and _text(a.get("accessKey")) == change.access_key
                ),
                None,
            )
            if existing is None:
                existing = {}
            else:
                accounts.remove(existing)  # an updated account moves to the end, as RocketMQ writes it
            accounts.append(existing)
            change.apply(existing)
            data["accounts"] = accounts
            what = "updated" if self.file_of(change.access_key) else "created"
            path = self._write(target, data)
        log.info(
            "ACL account %s %s in %s by %s: %s",
            change.access_key,
            what,
            path,
            who,
            change.describe(),
        )
        return path

    def delete_account(self, access_key: str, who: str) -> Path:
        """Delete an account from the file that defines it (DELETE_ACL_CONFIG)."""
        if not access_key:
            raise AclChangeError("accessKey is required")
        with self._lock:
            target = self.file_of(access_key)
            if target is None:
                raise AclChangeError(
                    f"no account with accessKey={_short(access_key)} in the ACL files; nothing deleted"
                )
            data = self._current_raw(target)
            accounts = data.get("accounts") or []
            kept = [
                a for a in accounts if not (isinstance(a, dict) and _text(a.get("accessKey")) == access_key)
            ]
            if len(kept) == len(accounts):
                raise AclChangeError(
                    f"{target} no longer defines accessKey={_short(access_key)}; nothing deleted"
                )
            data["accounts"] = kept
            path = self._write(target, data)
        log.info("ACL account %s deleted from %s by %s", access_key, path, who)
        return path

    def update_global_white(self, addresses: list[str], file: str | None, who: str) -> Path:
        """Replace a file's global white list (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG): ``file`` is one of the files
        read (its full path), or ``None`` / empty for the main file."""
        for i, a in enumerate(addresses):
            try:
                AddressPattern.parse(a, f"globalWhiteRemoteAddresses[{i}]")
            except AclConfigError as e:
                raise AclChangeError(str(e)) from None
        with self._lock:
            if file:
                target = next((p for p in self.files if str(p) == file or str(p.resolve()) == file), None)
                if target is None:
                    raise AclChangeError(
                        f"{_short(file, 200)} is not one of the ACL files this broker reads "
                        f"({', '.join(str(p) for p in self.files)}); nothing written"
                    )
            else:
                target = self._main()
            data = self._current_raw(target)
            data["globalWhiteRemoteAddresses"] = list(addresses)
            path = self._write(target, data)
        log.info("ACL global white list of %s set to %s by %s", path, addresses, who)
        return path

    def _main(self) -> Path:
        if self.path is None:
            raise AclChangeError("these rules were not read from a file")
        return self.path

    def _current_raw(self, path: Path) -> dict[str, Any]:
        """The file as it is on disk now (what a rewrite starts from), which must be what is loaded: a file
        changed since and not (yet) taken, or one that does not parse, is not written."""
        try:
            data = path.read_bytes()
        except OSError as e:
            raise AclChangeError(f"cannot read ACL file {path}: {e}; nothing written") from None
        loaded = self.files.get(path)
        if loaded is None or hashlib.sha256(data).digest() != loaded.digest:
            raise AclChangeError(
                f"ACL file {path} changed on disk and is not loaded yet (or is not valid); nothing written, "
                "try again once it is reloaded"
            )
        return copy.deepcopy(loaded.raw)

    def _write(self, path: Path, data: dict[str, Any]) -> Path:
        """Bump the file's version, check the result parses and merges, write it atomically, take it."""
        old = self.files[path]
        version = old.version.next()
        data.pop("dataVersion", None)
        data["dataVersion"] = [version.to_json()]
        text = dump_raw(data)
        try:
            new = AclFile.read(path, text.encode("utf-8"), main=path == self.path)
            merged = self._merged({**self.files, path: new})
        except AclConfigError as e:
            raise AclChangeError(f"{e}; nothing written") from None
        try:
            write_atomically(path, text)
        except OSError as e:
            log.error("ACL file %s could not be written: %s", path, e)
            raise AclChangeError(f"cannot write ACL file {path}: {e}") from None
        self.files[path] = new
        self.rules = merged
        self._watch.pop(path, None)
        self._rules_changed()
        if not any(a.admin for a in merged.accounts.values()):
            log.warning(
                "no admin account is left in the ACL files after this change to %s: no ACL admin request "
                "(nor topic or group change) can be made any more until a file is edited to add one",
                path,
            )
        return path

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
