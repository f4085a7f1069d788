"""Typed access to a command's ``extFields`` (REMOTING.md §1.2 "Header field -> typed value conversion").

Every value on the wire is a string. These helpers convert one key at a time and raise :class:`HeaderError`
(a ``ValueError``) naming the key when a required key is missing or a value does not parse; the server turns
that into a SYSTEM_ERROR response, never a dropped connection.

Booleans: ``"true"`` / ``"false"`` in any case, and also the C++ client's ``"1"`` / ``"0"`` (REMOTING.md §8.1,
§8.3 -- a deliberate difference from Java's ``Boolean.parseBoolean``, which reads ``"1"`` as false). Any other
text is an error.

Writing: :func:`bool_text` gives Java's ``String.valueOf(boolean)``; numbers are written with ``str()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypeVar, overload

from rmq.remoting.errors import HeaderError

__all__ = [
    "HeaderError",
    "bool_text",
    "header_bool",
    "header_int",
    "header_long",
    "header_str",
]

_T = TypeVar("_T")


class _Required:
    __slots__ = ()

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Final = _Required()
"""Default marker: the key must be present."""

_INT_MIN: Final = -(2**31)
_INT_MAX: Final = 2**31 - 1
_LONG_MIN: Final = -(2**63)
_LONG_MAX: Final = 2**63 - 1
_TRUE: Final = frozenset({"true", "1"})
_FALSE: Final = frozenset({"false", "0"})


def _missing(key: str) -> HeaderError:
    return HeaderError(f"the custom field <{key}> is null")


@overload
def header_str(fields: Mapping[str, str], key: str) -> str: ...
@overload
def header_str(fields: Mapping[str, str], key: str, default: _T) -> str | _T: ...
def header_str(fields: Mapping[str, str], key: str, default: object = REQUIRED) -> object:
    """The string value of ``key``; without ``default`` the key is required."""
    value = fields.get(key)
    if value is None:
        if default is REQUIRED:
            raise _missing(key)
        return default
    return value


def _parse_int(fields: Mapping[str, str], key: str, default: object, lo: int, hi: int, kind: str) -> object:
    value = fields.get(key)
    if value is None:
        if default is REQUIRED:
            raise _missing(key)
        return default
    try:
        # int() also accepts surrounding whitespace and "1_000"; Java's parseInt does not, nobody sends them.
        number = int(value)
    except ValueError:
        raise HeaderError(f"the custom field <{key}> is not {kind}: {value!r}") from None
    if not lo <= number <= hi:
        raise HeaderError(f"the custom field <{key}> is out of range for {kind}: {value!r}")
    return number


@overload
def header_int(fields: Mapping[str, str], key: str) -> int: ...
@overload
def header_int(fields: Mapping[str, str], key: str, default: _T) -> int | _T: ...
def header_int(fields: Mapping[str, str], key: str, default: object = REQUIRED) -> object:
    """A Java ``int`` (signed 32-bit) field."""
    return _parse_int(fields, key, default, _INT_MIN, _INT_MAX, "an int")


@overload
def header_long(fields: Mapping[str, str], key: str) -> int: ...
@overload
def header_long(fields: Mapping[str, str], key: str, default: _T) -> int | _T: ...
def header_long(fields: Mapping[str, str], key: str, default: object = REQUIRED) -> object:
    """A Java ``long`` (signed 64-bit) field."""
    return _parse_int(fields, key, default, _LONG_MIN, _LONG_MAX, "a long")


@overload
def header_bool(fields: Mapping[str, str], key: str) -> bool: ...
@overload
def header_bool(fields: Mapping[str, str], key: str, default: _T) -> bool | _T: ...
def header_bool(fields: Mapping[str, str], key: str, default: object = REQUIRED) -> object:
    """A boolean field: ``true``/``false`` (any case) or ``1``/``0``."""
    value = fields.get(key)
    low = value.strip().lower() if value is not None else ""
    if not low:
        # Absent, or empty (Java's parseBoolean("") is false; we treat it as absent).
        if default is REQUIRED:
            raise _missing(key)
        return default
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise HeaderError(f"the custom field <{key}> is not a boolean: {value!r}")


def bool_text(value: bool) -> str:
    """Java's ``String.valueOf(boolean)``."""
    return "true" if value else "false"
