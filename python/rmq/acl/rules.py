"""``plain_acl.yml``: RocketMQ ACL 1.0's rules file, parsed into immutable :class:`AclRules`.

Format (RocketMQ 4.9's ``distribution/conf/plain_acl.yml``)::

    globalWhiteRemoteAddresses: [10.10.103.*, 192.168.0.*]
    accounts:
      - accessKey: RocketMQ
        secretKey: 12345678
        whiteRemoteAddress:            # optional: from these addresses no signature is needed
        admin: false
        defaultTopicPerm: DENY         # DENY | PUB | SUB | PUB|SUB (absent: DENY)
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]
    dataVersion:                       # written by the ACL admin requests (absent: counter 0)
      - {counter: 3, timestamp: 1700000000000}

Address patterns (RocketMQ's): blank (matches nothing), ``*`` / ``*.*.*.*`` (everything), one IPv4 or
IPv6 address, a comma list of addresses, ``192.168.1.{1,2,3}``, and IPv4 with ``*`` or ``a-b`` in a
segment (``192.168.*.*``, ``10.1.1.1-100``).

Stricter than RocketMQ, so that a typo never opens (or silently closes) the door: an unknown permission
word, a malformed ``resource=PERM`` entry, a bad address pattern, a missing key or a duplicate access key
makes the whole file invalid (:class:`AclConfigError`), instead of being read as DENY or skipped.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "ANY",
    "DENY",
    "PUB",
    "SUB",
    "Account",
    "AclConfigError",
    "AclRules",
    "AddressPattern",
    "DataVersion",
    "dump_raw",
    "load_raw",
    "load_rules",
    "merge_rules",
    "parse_perm",
    "parse_rules",
    "perm_name",
    "write_atomically",
]

DENY = 1
ANY = 2
PUB = 4
SUB = 8

_PERM_WORDS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}


class AclConfigError(ValueError):
    """``plain_acl.yml`` cannot be read or is not valid; the message says where."""


def parse_perm(text: object, where: str) -> int:
    word = str(text).strip().upper().replace(" ", "")
    if word not in _PERM_WORDS:
        raise AclConfigError(f"{where}: {text!r} is not DENY, PUB, SUB or PUB|SUB")
    return _PERM_WORDS[word]


def perm_name(perm: int) -> str:
    if perm & DENY:
        return "DENY"
    return "|".join(n for n, bit in (("PUB", PUB), ("SUB", SUB)) if perm & bit) or "DENY"


def allows(needed: int, owned: int) -> bool:
    """RocketMQ's Permission.checkPermission: DENY wins; ANY needs PUB or SUB; else the bits overlap."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


_SEGMENT = re.compile(r"^(\*|\d{1,3}|\d{1,3}-\d{1,3})$")


@dataclass(frozen=True)
class AddressPattern:
    """A white-list pattern. ``match`` takes the peer's host (no port)."""

    text: str
    everything: bool = False
    exact: frozenset[str] = frozenset()
    ranges: tuple[tuple[int, int], ...] | None = None  # four IPv4 segment ranges

    @classmethod
    def parse(cls, raw: object, where: str) -> AddressPattern:
        text = "" if raw is None else str(raw).strip()
        if not text:
            return cls(text)
        if text in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
            return cls(text, everything=True)
        if text.endswith("}"):
            head, brace, tail = text.partition("{")
            if not brace or not head or head[-1] not in ".:":
                raise AclConfigError(f"{where}: bad address pattern {text!r}")
            items = [head + part.strip() for part in tail[:-1].split(",") if part.strip()]
            return cls(text, exact=frozenset(_one_address(a, where) for a in items))
        if "," in text:
            items = [a.strip() for a in text.split(",") if a.strip()]
            return cls(text, exact=frozenset(_one_address(a, where) for a in items))
        if ("*" in text or "-" in text) and ":" not in text:
            parts = text.split(".")
            if len(parts) != 4 or not all(_SEGMENT.match(p) for p in parts):
                raise AclConfigError(f"{where}: bad address pattern {text!r}")
            ranges = []
            for p in parts:
                if p == "*":
                    lo, hi = 0, 255
                elif "-" in p:
                    a, b = p.split("-")
                    lo, hi = int(a), int(b)
                else:
                    lo = hi = int(p)
                if not 0 <= lo <= hi <= 255:
                    raise AclConfigError(f"{where}: bad address pattern {text!r}")
                ranges.append((lo, hi))
            return cls(text, ranges=tuple(ranges))
        return cls(text, exact=frozenset({_one_address(text, where)}))

    def match(self, host: str) -> bool:
        if self.everything:
            return True
        if self.ranges is not None:
            parts = host.split(".")
            if len(parts) != 4 or not all(p.isdigit() and len(p) <= 3 for p in parts):
                return False
            return all(lo <= int(p) <= hi for p, (lo, hi) in zip(parts, self.ranges, strict=True))
        if not self.exact:
            return False
        try:
            return str(ipaddress.ip_address(host.strip("[]"))) in self.exact
        except ValueError:
            return False


def _one_address(text: str, where: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise AclConfigError(f"{where}: {text!r} is not an IP address") from None


@dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str = field(repr=False)
    white_address: AddressPattern
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    topic_perms: Mapping[str, int]
    group_perms: Mapping[str, int]

    def perm_for(self, kind: str, name: str) -> int:
        if kind == "topic":
            return self.topic_perms.get(name, self.default_topic_perm)
        return self.group_perms.get(name, self.default_group_perm)

    @property
    def has_resource_perms(self) -> bool:
        return bool(self.topic_perms or self.group_perms)


@dataclass(frozen=True)
class DataVersion:
    """A rules file's version, kept in the file as RocketMQ writes it::

        dataVersion:
        - counter: 3
          timestamp: 1700000000000

    A file without one is at counter 0, stamped when it was loaded (as RocketMQ does)."""

    counter: int
    timestamp: int

    def next(self) -> DataVersion:
        return DataVersion(self.counter + 1, int(time.time() * 1000))

    def to_json(self) -> dict[str, int]:
        """RocketMQ's ``DataVersion`` as fastjson writes it (fields in name order)."""
        return {"counter": self.counter, "timestamp": self.timestamp}


@dataclass(frozen=True)
class AclRules:
    """One consistent version of the rules (one file, or every file of a broker merged)."""

    global_white: tuple[AddressPattern, ...]
    accounts: Mapping[str, Account]
    source: str = ""
    version: DataVersion | None = None
    """The file's ``dataVersion`` (``None``: it has none)."""

    def globally_white(self, host: str) -> bool:
        return any(p.match(host) for p in self.global_white)


def _bool(value: Any, where: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise AclConfigError(f"{where}: {value!r} is not true or false")


def _perm_list(value: Any, where: str) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, list):
        raise AclConfigError(f"{where}: expected a list of resource=PERM entries")
    out: dict[str, int] = {}
    for i, entry in enumerate(value):
        parts = [p.strip() for p in str(entry).split("=") if p.strip()]
        if len(parts) != 2:
            raise AclConfigError(f"{where}[{i}]: {entry!r} is not resource=PERM")
        out[parts[0]] = parse_perm(parts[1], f"{where}[{i}]")
    return out


def _text(value: Any) -> str:
    # YAML reads secretKey: 12345678 as a number; RocketMQ takes it as the string it spells.
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).strip()


def _version(value: Any, source: str) -> DataVersion | None:
    if value is None:
        return None
    first = value[0] if isinstance(value, list) and value else value
    if not isinstance(first, dict):
        raise AclConfigError(f"{source}: dataVersion must be a list of {{counter, timestamp}}")
    try:
        return DataVersion(int(first.get("counter") or 0), int(first.get("timestamp") or 0))
    except (TypeError, ValueError):
        raise AclConfigError(f"{source}: dataVersion's counter and timestamp must be numbers") from None


def _yaml_problem(e: yaml.YAMLError) -> str:
    """What is wrong and where, without the excerpt of the file PyYAML quotes (it may be a secret key)."""
    if isinstance(e, yaml.MarkedYAMLError):
        mark = e.problem_mark or e.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"{e.context + ', ' if e.context else ''}{e.problem or 'cannot parse'}{where}"
    return type(e).__name__


def load_raw(text: str, source: str, *, allow_empty: bool = False) -> dict[str, Any]:
    """A rules file as the YAML mapping it holds (to be edited and written back by :func:`dump_raw`);
    ``allow_empty``: an empty file is an empty mapping."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise AclConfigError(f"{source}: not valid YAML: {_yaml_problem(e)}") from None
    if data is None and allow_empty:
        return {}
    if not isinstance(data, dict):
        raise AclConfigError(f"{source}: expected a mapping with globalWhiteRemoteAddresses and accounts")
    return data


def dump_raw(data: Mapping[str, Any]) -> str:
    """The YAML text of an edited rules mapping (its keys in their order; comments are not kept, as
    RocketMQ's own rewrite keeps none)."""
    return yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True, default_flow_style=False)


def parse_rules(text: str, source: str = "plain_acl.yml", *, allow_empty: bool = False) -> AclRules:
    """Parse a whole rules file; any problem raises :class:`AclConfigError` naming where. ``allow_empty``:
    an empty file holds no rules (a file of the ``conf/acl/`` directory may be empty)."""
    return rules_of(load_raw(text, source, allow_empty=allow_empty), source)


def rules_of(data: Mapping[str, Any], source: str) -> AclRules:
    """The rules of a parsed rules mapping (see :func:`parse_rules`)."""
    white_raw = data.get("globalWhiteRemoteAddresses")
    white_raw = [] if white_raw is None else white_raw
    if not isinstance(white_raw, list):
        raise AclConfigError(f"{source}: globalWhiteRemoteAddresses must be a list")
    white = tuple(
        AddressPattern.parse(a, f"{source}: globalWhiteRemoteAddresses[{i}]") for i, a in enumerate(white_raw)
    )
    accounts_raw = data.get("accounts")
    accounts_raw = [] if accounts_raw is None else accounts_raw
    if not isinstance(accounts_raw, list):
        raise AclConfigError(f"{source}: accounts must be a list")
    accounts: dict[str, Account] = {}
    for i, raw in enumerate(accounts_raw):
        where = f"{source}: accounts[{i}]"
        if not isinstance(raw, dict):
            raise AclConfigError(f"{where}: expected a mapping")
        ak = _text(raw.get("accessKey"))
        sk = _text(raw.get("secretKey"))
        if not ak or not sk:
            raise AclConfigError(f"{where}: accessKey and secretKey are required")
        if ak in accounts:
            raise AclConfigError(f"{where}: accessKey {ak!r} is defined twice")
        accounts[ak] = Account(
            access_key=ak,
            secret_key=sk,
            white_address=AddressPattern.parse(raw.get("whiteRemoteAddress"), f"{where}.whiteRemoteAddress"),
            admin=_bool(raw.get("admin"), f"{where}.admin"),
            default_topic_perm=(
                parse_perm(raw["defaultTopicPerm"], f"{where}.defaultTopicPerm")
                if raw.get("defaultTopicPerm") is not None
                else DENY
            ),
            default_group_perm=(
                parse_perm(raw["defaultGroupPerm"], f"{where}.defaultGroupPerm")
                if raw.get("defaultGroupPerm") is not None
                else DENY
            ),
            topic_perms=_perm_list(raw.get("topicPerms"), f"{where}.topicPerms"),
            group_perms=_perm_list(raw.get("groupPerms"), f"{where}.groupPerms"),
        )
    return AclRules(white, accounts, source, _version(data.get("dataVersion"), source))


def merge_rules(files: Sequence[AclRules], source: str) -> AclRules:
    """The rules of several files as one: every file's global white list, and every file's accounts. An
    access key defined in two files makes the set invalid (RocketMQ keeps the first one it happens to
    read and logs a WARN; rmq refuses, so that which secret counts never depends on a directory order)."""
    white: list[AddressPattern] = []
    accounts: dict[str, Account] = {}
    seen: dict[str, str] = {}
    for rules in files:
        white += rules.global_white
        for ak, account in rules.accounts.items():
            if ak in seen:
                raise AclConfigError(f"accessKey {ak!r} is defined in both {seen[ak]} and {rules.source}")
            seen[ak] = rules.source
            accounts[ak] = account
    return AclRules(tuple(white), accounts, source, files[0].version if files else None)


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` all at once: a temp file beside it (a dot name no rules scan reads),
    flushed to disk, renamed over ``path``; the file's permission bits are kept. A reader sees the old
    file or the new one, never a part."""
    try:
        mode: int | None = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def load_rules(path: str | Path) -> AclRules:
    """Read and parse the file at ``path`` (missing or unreadable: :class:`AclConfigError`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AclConfigError(f"ACL file {path} does not exist") from None
    except (OSError, UnicodeError) as e:
        raise AclConfigError(f"cannot read ACL file {path}: {e}") from None
    return parse_rules(text, str(path))
