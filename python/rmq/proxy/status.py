"""gRPC status of the 5.x protocol: the ``Status`` every response carries, and the error that becomes one.

An activity raises :class:`ProxyError` with a 5.x ``Code`` and a message; the service turns it into the
response's ``status`` (the RPC itself succeeds, as Apache's proxy answers). A Remoting response code from a
broker maps to the nearest 5.x code (:func:`from_remoting`), its remark kept as the message.
"""

from __future__ import annotations

from rmq.common.codes import ResponseCode
from rmq.proxy.pb import d


class ProxyError(Exception):
    """A request the proxy answers with a non-OK ``Status``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def ok() -> d.Status:
    return d.Status(code=d.Code.OK, message="OK")


def status(code: int, message: str) -> d.Status:
    return d.Status(code=code, message=message)


_REMOTING_TO_V2: dict[int, int] = {
    int(ResponseCode.TOPIC_NOT_EXIST): d.Code.TOPIC_NOT_FOUND,
    int(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST): d.Code.CONSUMER_GROUP_NOT_FOUND,
    int(ResponseCode.NO_PERMISSION): d.Code.FORBIDDEN,
    int(ResponseCode.MESSAGE_ILLEGAL): d.Code.BAD_REQUEST,
    int(ResponseCode.SYSTEM_BUSY): d.Code.TOO_MANY_REQUESTS,
    int(ResponseCode.SERVICE_NOT_AVAILABLE): d.Code.INTERNAL_SERVER_ERROR,
    int(ResponseCode.SUBSCRIPTION_NOT_EXIST): d.Code.NOT_FOUND,
    int(ResponseCode.SUBSCRIPTION_NOT_LATEST): d.Code.BAD_REQUEST,
    int(ResponseCode.SUBSCRIPTION_PARSE_FAILED): d.Code.ILLEGAL_FILTER_EXPRESSION,
    int(ResponseCode.REQUEST_CODE_NOT_SUPPORTED): d.Code.NOT_IMPLEMENTED,
}


def from_remoting(code: int, remark: str | None, what: str) -> ProxyError:
    """The error for a broker's non-success Remoting answer to ``what``."""
    v2 = _REMOTING_TO_V2.get(code, d.Code.INTERNAL_SERVER_ERROR)
    return ProxyError(v2, f"{what}: broker answered code {code}: {remark or ''}".rstrip(": "))
