"""JSON as the Java side of RocketMQ writes and reads it (REMOTING.md §3.9).

``loads`` is a tolerant reader: strict JSON goes through orjson (the fast path); anything orjson rejects is
re-read by a small recursive-descent parser that also accepts what Java's fastjson writes or accepts:

* unquoted numeric map keys ``{0:"a",1:"b"}`` -> ``int`` keys (``{0: "a", 1: "b"}``);
  note that a *quoted* numeric key stays a ``str`` (``{"0": "a"}``), so readers of such maps normalise with
  ``int(key)``;
* unquoted identifier keys ``{name:"a"}`` -> ``str`` keys;
* object (and array) map keys ``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}`` -> the key becomes an
  :class:`ObjectKey`, a hashable tuple of ``(name, value)`` pairs sorted by name (nested objects are
  ObjectKeys, arrays are tuples); ``key.as_dict()`` gives the mapping back;
* single-quoted strings, trailing commas, numbers with a Java type suffix (``1L``), big integers.

``dumps`` writes strict JSON with orjson: non-``str`` keys are converted to strings (``0`` -> ``"0"``).
``dumps_with_object_keys`` additionally writes :class:`ObjectKey` keys the way fastjson does (the key object
itself followed by ``:``); that form is not JSON and is only meant for Java readers of
``Map<MessageQueue, ...>`` bodies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any, NoReturn

import orjson

__all__ = ["FastjsonDecodeError", "ObjectKey", "dumps", "dumps_with_object_keys", "loads", "loads_tolerant"]


class FastjsonDecodeError(ValueError):
    """The input is not JSON, not even by fastjson's relaxed rules."""


class ObjectKey(tuple):  # type: ignore[type-arg]
    """A JSON object used as a map key: ``(name, value)`` pairs sorted by name; hashable and immutable."""

    __slots__ = ()

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> ObjectKey:
        return cls(sorted((str(k), _freeze(v)) for k, v in mapping.items()))

    def as_dict(self) -> dict[str, Any]:
        return {k: _thaw(v) for k, v in self}

    def __repr__(self) -> str:
        return f"ObjectKey({self.as_dict()!r})"


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return ObjectKey.from_mapping(value)
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, ObjectKey):
        return value.as_dict()
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


# --- reading ------------------------------------------------------------------------------------------------


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON, accepting fastjson's non-standard forms (see the module doc)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    return loads_tolerant(data)


def loads_tolerant(data: bytes | bytearray | memoryview | str) -> Any:
    """The relaxed parser alone (no orjson fast path)."""
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FastjsonDecodeError(f"invalid UTF-8 in JSON text: {exc}") from None
    parser = _Parser(text)
    try:
        value = parser.value()
        parser.skip_ws()
        if parser.pos != len(text):
            parser.fail("trailing data")
    except RecursionError:
        raise FastjsonDecodeError("JSON nested too deeply") from None
    return value


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?([LlSsBbFfDd])?")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_SINGLE_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'", re.DOTALL)
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0"}
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None}


def _unescape(match: re.Match[str]) -> str:
    esc = match.group(1)
    if len(esc) == 5:
        return chr(int(esc[1:], 16))
    return _SIMPLE_ESCAPES.get(esc, esc)


class _Parser:
    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> NoReturn:
        snippet = self.text[self.pos : self.pos + 20]
        raise FastjsonDecodeError(f"{what} at char {self.pos}: {snippet!r}")

    def skip_ws(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def value(self) -> Any:
        self.skip_ws()
        text = self.text
        if self.pos >= len(text):
            return self.fail("unexpected end of JSON text")
        ch = text[self.pos]
        if ch == "{":
            return self.obj()
        if ch == "[":
            return self.array()
        if ch == '"':
            try:
                s, self.pos = scanstring(text, self.pos + 1, False)
            except ValueError as exc:
                raise FastjsonDecodeError(str(exc)) from None
            return s
        if ch == "'":
            return self.single_quoted()
        m = _NUMBER.match(text, self.pos)
        if m is not None:
            self.pos = m.end()
            return self.number(m)
        m = _IDENT.match(text, self.pos)
        if m is not None and m.group(0) in _LITERALS:
            self.pos = m.end()
            return _LITERALS[m.group(0)]
        return self.fail("unexpected character")

    @staticmethod
    def number(m: re.Match[str]) -> int | float:
        raw = m.group(0)
        suffix = m.group(1)
        if suffix:
            raw = raw[:-1]
        if suffix in ("F", "f", "D", "d") or "." in raw or "e" in raw or "E" in raw:
            return float(raw)
        return int(raw)

    def single_quoted(self) -> str:
        m = _SINGLE_QUOTED.match(self.text, self.pos)
        if m is None:
            return self.fail("unterminated string")
        self.pos = m.end()
        return _ESCAPE.sub(_unescape, m.group(1))

    def key(self) -> Any:
        text = self.text
        ch = text[self.pos]
        if ch == "{":
            return ObjectKey.from_mapping(self.obj())
        if ch == "[":
            return _freeze(self.array())
        if ch == '"' or ch == "'":
            return self.value()
        m = _NUMBER.match(text, self.pos)
        if m is not None:
            self.pos = m.end()
            return self.number(m)
        m = _IDENT.match(text, self.pos)
        if m is not None:
            self.pos = m.end()
            return m.group(0)
        return self.fail("expected an object key")

    def obj(self) -> dict[Any, Any]:
        text = self.text
        self.pos += 1  # '{'
        result: dict[Any, Any] = {}
        while True:
            self.skip_ws()
            if self.pos >= len(text):
                return self.fail("unterminated object")
            if text[self.pos] == "}":
                self.pos += 1
                return result
            k = self.key()
            self.skip_ws()
            if self.pos >= len(text) or text[self.pos] != ":":
                return self.fail("expected ':'")
            self.pos += 1
            result[k] = self.value()
            self.skip_ws()
            if self.pos >= len(text):
                return self.fail("unterminated object")
            ch = text[self.pos]
            if ch == ",":
                self.pos += 1
            elif ch != "}":
                return self.fail("expected ',' or '}'")

    def array(self) -> list[Any]:
        text = self.text
        self.pos += 1  # '['
        result: list[Any] = []
        while True:
            self.skip_ws()
            if self.pos >= len(text):
                return self.fail("unterminated array")
            if text[self.pos] == "]":
                self.pos += 1
                return result
            result.append(self.value())
            self.skip_ws()
            if self.pos >= len(text):
                return self.fail("unterminated array")
            ch = text[self.pos]
            if ch == ",":
                self.pos += 1
            elif ch != "]":
                return self.fail("expected ',' or ']'")


# --- writing ------------------------------------------------------------------------------------------------

_DUMPS_OPTIONS = orjson.OPT_NON_STR_KEYS


def dumps(obj: Any) -> bytes:
    """Strict JSON (UTF-8 bytes); non-``str`` map keys are written as strings."""
    return orjson.dumps(obj, option=_DUMPS_OPTIONS)


def _key_text(key: Any) -> str:
    if key is None or isinstance(key, bool):
        return orjson.dumps(key).decode()
    if isinstance(key, int):
        return str(int(key))
    return str(key)


def dumps_with_object_keys(obj: Any) -> bytes:
    """Like :func:`dumps`, but :class:`ObjectKey` map keys are written as objects (fastjson's form)."""
    if isinstance(obj, dict):
        parts = []
        for k, v in obj.items():
            if isinstance(k, ObjectKey):
                kb = dumps_with_object_keys(k.as_dict())
            elif isinstance(k, str):
                kb = orjson.dumps(k)
            else:
                kb = orjson.dumps(_key_text(k))
            parts.append(kb + b":" + dumps_with_object_keys(v))
        return b"{" + b",".join(parts) + b"}"
    if isinstance(obj, (list, tuple)) and not isinstance(obj, ObjectKey):
        return b"[" + b",".join(dumps_with_object_keys(v) for v in obj) + b"]"
    if isinstance(obj, ObjectKey):
        return dumps_with_object_keys(obj.as_dict())
    return orjson.dumps(obj, option=_DUMPS_OPTIONS)
