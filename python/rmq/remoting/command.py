"""The RemotingCommand: one request or response, as data only (REMOTING.md §1).

Encoding lives in :mod:`rmq.remoting.codec`, typed header access in :mod:`rmq.remoting.headers`.
``code`` and ``language`` are plain ``int``s (compare them with ``RequestCode`` / ``ResponseCode`` /
``LanguageCode`` members, which are ``IntEnum``s); ``ext_fields`` is always a ``dict[str, str]``.
"""

from __future__ import annotations

from rmq.common.codes import FLAG_ONEWAY, FLAG_RESPONSE, RMQ_VERSION, LanguageCode, SerializeType

__all__ = ["RemotingCommand", "create_request", "create_response", "new_command"]

_JSON = int(SerializeType.JSON)
_JAVA = int(LanguageCode.JAVA)


class RemotingCommand:
    """A remoting frame's content: fixed header fields, string ext fields and an optional body.

    ``serialize_type`` is 0 (JSON header) or 1 (ROCKETMQ binary header); a response uses the request's type.
    """

    __slots__ = (
        "body",
        "code",
        "ext_fields",
        "flag",
        "language",
        "opaque",
        "remark",
        "serialize_type",
        "version",
    )

    def __init__(
        self,
        code: int,
        *,
        language: int = _JAVA,
        version: int = RMQ_VERSION,
        opaque: int = 0,
        flag: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes | memoryview | None = None,
        serialize_type: int = _JSON,
    ) -> None:
        self.code = code
        self.language = language
        self.version = version
        self.opaque = opaque
        self.flag = flag
        self.remark = remark
        self.ext_fields: dict[str, str] = {} if ext_fields is None else ext_fields
        self.body = body
        self.serialize_type = serialize_type

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def mark_oneway(self) -> None:
        self.flag |= FLAG_ONEWAY

    def mark_response(self) -> None:
        self.flag |= FLAG_RESPONSE

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        return (
            self.code == other.code
            and self.language == other.language
            and self.version == other.version
            and self.opaque == other.opaque
            and self.flag == other.flag
            and self.remark == other.remark
            and self.ext_fields == other.ext_fields
            and (bytes(self.body) if self.body is not None else None)
            == (bytes(other.body) if other.body is not None else None)
            and self.serialize_type == other.serialize_type
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        kind = (
            "response" if self.flag & FLAG_RESPONSE else ("oneway" if self.flag & FLAG_ONEWAY else "request")
        )
        body = "None" if self.body is None else f"<{len(self.body)} bytes>"
        return (
            f"RemotingCommand({kind} code={self.code} opaque={self.opaque} flag={self.flag} "
            f"lang={self.language} ver={self.version} remark={self.remark!r} ext={self.ext_fields!r} "
            f"body={body} ser={self.serialize_type})"
        )


_new = object.__new__


def new_command(
    code: int,
    language: int,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: dict[str, str],
    body: bytes | memoryview | None,
    serialize_type: int,
) -> RemotingCommand:
    """Positional fast constructor for hot paths (codec, ``create_response``): ~4x cheaper than keywords."""
    cmd: RemotingCommand = _new(RemotingCommand)
    cmd.code = code
    cmd.language = language
    cmd.version = version
    cmd.opaque = opaque
    cmd.flag = flag
    cmd.remark = remark
    cmd.ext_fields = ext_fields
    cmd.body = body
    cmd.serialize_type = serialize_type
    return cmd


def create_request(
    code: int,
    ext_fields: dict[str, str] | None = None,
    body: bytes | memoryview | None = None,
    *,
    language: int = _JAVA,
    version: int = RMQ_VERSION,
    serialize_type: int = _JSON,
    oneway: bool = False,
) -> RemotingCommand:
    """A request; its ``opaque`` is assigned by the connection that sends it."""
    return RemotingCommand(
        code,
        language=language,
        version=version,
        flag=FLAG_ONEWAY if oneway else 0,
        ext_fields=ext_fields,
        body=body,
        serialize_type=serialize_type,
    )


def create_response(
    request: RemotingCommand,
    code: int = 0,
    remark: str | None = None,
    ext_fields: dict[str, str] | None = None,
    body: bytes | memoryview | None = None,
    *,
    language: int = _JAVA,
    version: int = RMQ_VERSION,
) -> RemotingCommand:
    """The response to ``request``: same opaque and serialize type, response flag set."""
    return new_command(
        code,
        language,
        version,
        request.opaque,
        FLAG_RESPONSE,
        remark,
        {} if ext_fields is None else ext_fields,
        body,
        request.serialize_type,
    )
