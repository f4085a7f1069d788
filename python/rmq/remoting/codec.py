"""Sans-I/O codec for RemotingCommand frames (REMOTING.md §1.1 to §1.3). No asyncio here.

Frame layout::

    int32 length          = 4 + H + B  (does not count itself)
    int32 header word     = serialize type << 24 | H
    H bytes header        JSON (type 0) or ROCKETMQ binary (type 1)
    B bytes body

Writing: :func:`encode_parts` returns ``(prefix, body)`` -- the length, header word and header in one
``bytes`` plus the body untouched -- so a transport can ``writelines`` a large body without copying it;
:func:`encode` joins them.

Reading: :class:`FrameDecoder` takes bytes as they arrive and returns whole commands; malformed input raises
:class:`FrameError` (a ``ValueError``), after which the decoder must be discarded with its connection.

JSON headers are decoded by orjson, falling back to the fastjson-tolerant parser. ``extFields`` values that
arrive as JSON numbers or booleans (the C++ client sends some) are turned into strings (decimal,
``"true"``/``"false"``), ``null`` values are dropped, unknown header keys are ignored, and ``language`` may
be a name or an ordinal (unknown names become ``OTHER``).
"""

from __future__ import annotations

import struct
from typing import Any, Final

import orjson

from rmq.common import fastjson
from rmq.common.codes import LanguageCode
from rmq.remoting.command import RemotingCommand, new_command
from rmq.remoting.errors import FrameError

__all__ = [
    "DEFAULT_MAX_FRAME_LENGTH",
    "FrameDecoder",
    "FrameError",
    "decode",
    "decode_binary_header",
    "decode_json_header",
    "encode",
    "encode_binary_header",
    "encode_header",
    "encode_json_header",
    "encode_parts",
]

DEFAULT_MAX_FRAME_LENGTH: Final = 16 * 1024 * 1024
"""Largest frame accepted, counting the 4-byte length prefix (Java's ``frameMaxLength``)."""
MAX_HEADER_LENGTH: Final = 0xFFFFFF

_JSON: Final = 0
_ROCKETMQ: Final = 1
_LANG_NAMES: Final = tuple(m.name for m in sorted(LanguageCode))
_LANG_BY_NAME: Final = {m.name: int(m) for m in LanguageCode}
_LANG_OTHER: Final = int(LanguageCode.OTHER)
_LANG_JAVA: Final = int(LanguageCode.JAVA)

_PREFIX = struct.Struct(">iI")
_INT = struct.Struct(">i")
_UINT = struct.Struct(">I")
_SHORT = struct.Struct(">h")
_BIN_FIXED = struct.Struct(">hBhii")  # code, language, version, opaque, flag


# --- encoding -----------------------------------------------------------------------------------------------


def encode_json_header(cmd: RemotingCommand) -> bytes:
    lang = cmd.language
    header: dict[str, Any] = {
        "code": cmd.code,
        "flag": cmd.flag,
        "language": _LANG_NAMES[lang] if 0 <= lang < len(_LANG_NAMES) else "OTHER",
        "opaque": cmd.opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": cmd.version,
    }
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    ext = cmd.ext_fields
    if ext:
        for v in ext.values():
            if type(v) is not str:
                ext = _stringify_ext(ext)
                break
        header["extFields"] = ext
    return orjson.dumps(header)


def _stringify_ext(ext: dict[str, Any]) -> dict[str, str]:
    """Ext field values must travel as JSON strings (the C++ client ignores anything else, §8.1)."""
    out: dict[str, str] = {}
    for k, v in ext.items():
        sv = _ext_value(v)
        if sv is not None:
            out[str(k)] = sv
    return out


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """The ROCKETMQ binary header (§1.3); empty strings are not representable and are left out."""
    try:
        parts = [_BIN_FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag)]
        remark = cmd.remark.encode("utf-8") if cmd.remark else b""
        parts.append(_INT.pack(len(remark)))
        parts.append(remark)
        entries: list[bytes] = []
        for k, v in _stringify_ext(cmd.ext_fields).items():
            kb = k.encode("utf-8")
            vb = v.encode("utf-8")
            if kb and vb:
                entries.append(_SHORT.pack(len(kb)))
                entries.append(kb)
                entries.append(_INT.pack(len(vb)))
                entries.append(vb)
        ext = b"".join(entries)
        parts.append(_INT.pack(len(ext)))
        parts.append(ext)
    except struct.error as exc:
        raise ValueError(f"command does not fit the binary header: {exc}") from None
    return b"".join(parts)


def encode_header(cmd: RemotingCommand) -> bytes:
    if cmd.serialize_type == _ROCKETMQ:
        return encode_binary_header(cmd)
    if cmd.serialize_type == _JSON:
        return encode_json_header(cmd)
    raise ValueError(f"unknown serialize type {cmd.serialize_type}")


def encode_parts(cmd: RemotingCommand) -> tuple[bytes, bytes | memoryview | None]:
    """``(prefix, body)``: prefix = length + header word + header; body as given (maybe ``None``)."""
    header = encode_header(cmd)
    hlen = len(header)
    if hlen > MAX_HEADER_LENGTH:
        raise ValueError(f"header too long: {hlen} bytes")
    body = cmd.body
    blen = len(body) if body is not None else 0
    return _PREFIX.pack(4 + hlen + blen, (cmd.serialize_type << 24) | hlen) + header, body


def encode(cmd: RemotingCommand) -> bytes:
    """The whole frame as one ``bytes``."""
    prefix, body = encode_parts(cmd)
    return prefix + body if body else prefix


# --- decoding -----------------------------------------------------------------------------------------------


_INT_MIN = -(2**31)
_INT_MAX = 2**31 - 1


def _int_field(header: dict[Any, Any], key: str, default: int) -> int:
    value = header.get(key)
    if type(value) is int:
        return value
    if value is None:
        return default
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    elif isinstance(value, float) and value.is_integer():
        return int(value)
    raise FrameError(f"bad header field {key!r}: {value!r}")


def _ext_value(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return str(value)
    return fastjson.dumps(value).decode("utf-8")


def _normalize_ext(ext: dict[Any, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in ext.items():
        sv = _ext_value(v)
        if sv is not None:
            out[k if isinstance(k, str) else str(k)] = sv
    return out


def decode_json_header(data: bytes | bytearray | memoryview) -> RemotingCommand:
    try:
        header = orjson.loads(data)
        strict = True
    except orjson.JSONDecodeError:
        try:
            header = fastjson.loads_tolerant(data)
        except ValueError as exc:
            raise FrameError(f"bad JSON header: {exc}") from None
        strict = False
    if type(header) is not dict:
        raise FrameError("JSON header is not an object")

    ext = header.get("extFields")
    if ext is None:
        ext = {}
    elif type(ext) is not dict:
        raise FrameError("extFields is not an object")
    elif strict:
        for v in ext.values():
            if type(v) is not str:
                ext = _normalize_ext(ext)
                break
    else:
        ext = _normalize_ext(ext)

    lang = header.get("language")
    if type(lang) is str:
        language = _LANG_BY_NAME.get(lang, _LANG_OTHER)
    elif lang is None:
        language = _LANG_JAVA
    else:
        language = _int_field(header, "language", _LANG_JAVA)

    remark = header.get("remark")
    if remark is not None and type(remark) is not str:
        remark = _ext_value(remark)

    code = header.get("code")
    version = header.get("version")
    opaque = header.get("opaque")
    flag = header.get("flag")
    if not (type(code) is int and type(version) is int and type(opaque) is int and type(flag) is int):
        code = _int_field(header, "code", 0)
        version = _int_field(header, "version", 0)
        opaque = _int_field(header, "opaque", 0)
        flag = _int_field(header, "flag", 0)
    # Java reads these as int: anything outside that range is a malformed frame.
    if not (
        _INT_MIN <= code <= _INT_MAX
        and _INT_MIN <= version <= _INT_MAX
        and _INT_MIN <= opaque <= _INT_MAX
        and _INT_MIN <= flag <= _INT_MAX
    ):
        raise FrameError("header code/version/opaque/flag outside the 32-bit int range")
    return new_command(code, language, version, opaque, flag, remark, ext, None, _JSON)


def _read_str(buf: Any, pos: int, n: int, end: int) -> str | None:
    if n < 0 or pos + n > end:
        raise FrameError("binary header string overruns the header")
    if n == 0:
        return None
    try:
        return str(buf[pos : pos + n], "utf-8")
    except UnicodeDecodeError as exc:
        raise FrameError(f"binary header string is not UTF-8: {exc}") from None


def decode_binary_header(
    buf: bytes | bytearray | memoryview, start: int = 0, end: int | None = None
) -> RemotingCommand:
    """Decode a ROCKETMQ binary header occupying ``buf[start:end]``."""
    if end is None:
        end = len(buf)
    if end - start < _BIN_FIXED.size + 8:
        raise FrameError("binary header too short")
    code, language, version, opaque, flag = _BIN_FIXED.unpack_from(buf, start)
    pos = start + _BIN_FIXED.size
    (n,) = _INT.unpack_from(buf, pos)
    pos += 4
    remark = _read_str(buf, pos, n, end)
    pos += n
    if pos + 4 > end:
        raise FrameError("binary header truncated before extFields")
    (ext_len,) = _INT.unpack_from(buf, pos)
    pos += 4
    if ext_len < 0 or pos + ext_len > end:
        raise FrameError("binary extFields overrun the header")
    ext_end = pos + ext_len
    ext: dict[str, str] = {}
    while pos < ext_end:
        if pos + 2 > ext_end:
            raise FrameError("binary extFields entry truncated")
        (kn,) = _SHORT.unpack_from(buf, pos)
        pos += 2
        key = _read_str(buf, pos, kn, ext_end)
        pos += kn
        if pos + 4 > ext_end:
            raise FrameError("binary extFields entry truncated")
        (vn,) = _INT.unpack_from(buf, pos)
        pos += 4
        value = _read_str(buf, pos, vn, ext_end)
        pos += vn
        if key is not None and value is not None:
            ext[key] = value
    return new_command(code, language, version, opaque, flag, remark, ext, None, _ROCKETMQ)


def _decode_frame(mv: memoryview, start: int, end: int) -> RemotingCommand:
    """Decode the frame content ``mv[start:end]`` (header word, header, body; no length prefix)."""
    (word,) = _UINT.unpack_from(mv, start)
    serialize_type = word >> 24
    hstart = start + 4
    hend = hstart + (word & 0xFFFFFF)
    if hend > end:
        raise FrameError(f"header length {word & 0xFFFFFF} exceeds the frame")
    if serialize_type == _JSON:
        cmd = decode_json_header(mv[hstart:hend])
    elif serialize_type == _ROCKETMQ:
        cmd = decode_binary_header(mv, hstart, hend)
    else:
        raise FrameError(f"unknown serialize type {serialize_type}")
    if hend < end:
        cmd.body = mv[hend:end].tobytes()
    return cmd


def decode(
    frame: bytes | bytearray | memoryview, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH
) -> RemotingCommand:
    """Decode exactly one whole frame (length prefix included)."""
    decoder = FrameDecoder(max_frame_length)
    cmds = decoder.feed(frame)
    if len(cmds) != 1 or decoder.buffered:
        raise FrameError(f"expected exactly one frame, got {len(cmds)} and {decoder.buffered} spare bytes")
    return cmds[0]


class FrameDecoder:
    """Incremental frame splitter + decoder for one connection.

    ``feed`` accepts any chunking (a byte at a time, several frames per chunk) and returns the commands
    completed by that chunk. Bodies are copied out as ``bytes``.
    """

    __slots__ = ("_buf", "_need", "max_frame_length")

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self.max_frame_length = max_frame_length
        self._buf = bytearray()
        self._need = 4  # bytes the buffer must hold before parsing is worth trying

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        buf = self._buf
        if buf:
            buf += data
            if len(buf) < self._need:
                return []
            src: bytes | bytearray | memoryview = buf
        else:
            if len(data) < 4:
                buf += data
                return []
            src = data
        out: list[RemotingCommand] = []
        pos = 0
        need = 4
        max_len = self.max_frame_length
        # No ``with``: after a FrameError a traceback may still hold a slice of ``mv``; release() would fail.
        mv = memoryview(src)
        n = len(mv)
        while n - pos >= 4:
            (length,) = _INT.unpack_from(mv, pos)
            if length < 4:
                raise FrameError(f"frame length {length} < 4")
            if length + 4 > max_len:
                raise FrameError(f"frame of {length + 4} bytes exceeds the limit of {max_len}")
            end = pos + 4 + length
            if end > n:
                need = length + 4
                break
            out.append(_decode_frame(mv, pos + 4, end))
            pos = end
        leftover = mv[pos:].tobytes() if src is not buf and pos < n else None
        mv.release()
        if src is buf:
            if pos:
                del buf[:pos]
        elif leftover:
            buf += leftover
        self._need = need
        return out
