"""The client's exceptions, and the response-code -> exception registry.

::

    MQClientError                  client-side failure (``response_code``: a ResponseCode or ClientErrorCode)
    ├── MQBrokerError              the broker / name server answered a non-success ``code`` + ``remark``
    │   ├── SystemError_ (1), SystemBusyError (2), RequestCodeNotSupportedError (3), ...
    │   ├── NoMessageError (208)   also raised by the client when a message lookup finds nothing
    │   └── one subclass per response code, see :data:`BROKER_ERRORS`
    ├── MessageIllegalError        the message failed validation before the wire (also ValueError)
    ├── NoRouteError               no route for a topic, or the broker of a queue is unknown
    ├── RequestTimeoutError        an operation ran out of its time budget (also TimeoutError)
    └── ClientStateError           used before ``start()`` or after ``shutdown()``

Transport errors from :mod:`rmq.remoting` (``RemotingConnectError``, ``RemotingTimeoutError`` -- a
``TimeoutError`` --, ``RemotingSendRequestError``) pass through single requests unchanged; the producer's
retry loop turns a final transport failure into ``RequestTimeoutError`` or ``MQClientError``.

``broker_error(code, remark, addr)`` builds the registered subclass for a code (unknown codes give a plain
:class:`MQBrokerError`); ``@register_broker_error(code)`` adds a class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

from rmq.common.codes import ResponseCode

__all__ = [
    "BROKER_ERRORS",
    "ClientErrorCode",
    "ClientStateError",
    "ConsumerNotOnlineError",
    "FlowControlError",
    "MQBrokerError",
    "MQClientError",
    "MessageIllegalBrokerError",
    "MessageIllegalError",
    "NoMessageError",
    "NoPermissionError",
    "NoRouteError",
    "OffsetNotFoundError",
    "PullOffsetMovedError",
    "RequestCodeNotSupportedError",
    "RequestTimeoutError",
    "ServiceNotAvailableError",
    "SubscriptionGroupNotExistError",
    "SubscriptionNotExistError",
    "SubscriptionNotLatestError",
    "SubscriptionParseFailedError",
    "SystemBusyError",
    "SystemError_",
    "TopicNotExistError",
    "TransactionFailedError",
    "VersionNotSupportedError",
    "broker_error",
    "register_broker_error",
]


class ClientErrorCode:
    """``CL/common/ClientErrorCode.java``: codes of failures that never reached a broker."""

    CONNECT_BROKER_EXCEPTION: Final = 10001
    ACCESS_BROKER_TIMEOUT: Final = 10002
    BROKER_NOT_EXIST_EXCEPTION: Final = 10003
    NO_NAME_SERVER_EXCEPTION: Final = 10004
    NOT_FOUND_TOPIC_EXCEPTION: Final = 10005
    REQUEST_TIMEOUT_EXCEPTION: Final = 10006
    CREATE_REPLY_MESSAGE_EXCEPTION: Final = 10007


class MQClientError(Exception):
    """Base of the client's errors. ``response_code`` is a ResponseCode or ClientErrorCode, or ``None``."""

    def __init__(self, message: str, response_code: int | None = None) -> None:
        super().__init__(message)
        self.response_code = response_code


class ClientStateError(MQClientError):
    """The producer/consumer is not running (not started yet, or shut down)."""


class NoRouteError(MQClientError):
    """No route for a topic (``No route info of this topic``) or no address for a broker name."""

    def __init__(self, message: str, response_code: int | None = ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION):
        super().__init__(message, response_code)


class RequestTimeoutError(MQClientError, TimeoutError):
    """An operation (e.g. a send with its retries) did not complete within its timeout."""

    def __init__(self, message: str, response_code: int | None = ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION):
        super().__init__(message, response_code)


class MessageIllegalError(MQClientError, ValueError):
    """Client-side validation failed (``Validators.checkMessage`` / ``checkTopic``): code 13."""

    def __init__(self, message: str) -> None:
        super().__init__(message, int(ResponseCode.MESSAGE_ILLEGAL))


class MQBrokerError(MQClientError):
    """A non-success response: ``code`` and ``remark`` exactly as received, ``addr`` of the responder."""

    code: int

    def __init__(self, code: int, remark: str | None, addr: str | None = None) -> None:
        self.code = code
        self.remark = remark or ""
        self.addr = addr
        where = f" BROKER: {addr}" if addr else ""
        super().__init__(f"CODE: {code}{where} DESC: {self.remark}", code)

    def __reduce__(self) -> tuple[Callable[..., MQBrokerError], tuple[int, str, str | None]]:
        return broker_error, (self.code, self.remark, self.addr)


BROKER_ERRORS: dict[int, type[MQBrokerError]] = {}
"""Response code -> exception class."""

_E = TypeVar("_E", bound=type[MQBrokerError])


def register_broker_error(code: int) -> Callable[[_E], _E]:
    """Class decorator: raise ``cls`` for responses with ``code``."""

    def deco(cls: _E) -> _E:
        if int(code) in BROKER_ERRORS:
            raise ValueError(f"response code {code} already mapped to {BROKER_ERRORS[int(code)].__name__}")
        BROKER_ERRORS[int(code)] = cls
        return cls

    return deco


def broker_error(code: int, remark: str | None, addr: str | None = None) -> MQBrokerError:
    """The exception for a non-success response ``code`` (a plain :class:`MQBrokerError` if unmapped)."""
    return BROKER_ERRORS.get(code, MQBrokerError)(code, remark, addr)


@register_broker_error(ResponseCode.SYSTEM_ERROR)
class SystemError_(MQBrokerError):
    """1: the broker failed (bad topic name, store error, processor exception, ``[PC_SYNCHRONIZED]``)."""


@register_broker_error(ResponseCode.SYSTEM_BUSY)
class SystemBusyError(MQBrokerError):
    """2: flow control (``[REJECTREQUEST]`` / ``[OVERLOAD]``)."""


@register_broker_error(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
class RequestCodeNotSupportedError(MQBrokerError):
    """3: the peer does not implement the request."""


@register_broker_error(ResponseCode.TRANSACTION_FAILED)
class TransactionFailedError(MQBrokerError):
    """4."""


@register_broker_error(ResponseCode.MESSAGE_ILLEGAL)
class MessageIllegalBrokerError(MQBrokerError):
    """13: the broker rejected the message (size, topic length, properties length)."""


@register_broker_error(ResponseCode.SERVICE_NOT_AVAILABLE)
class ServiceNotAvailableError(MQBrokerError):
    """14: disk full, slave, or shutting down."""


@register_broker_error(ResponseCode.VERSION_NOT_SUPPORTED)
class VersionNotSupportedError(MQBrokerError):
    """15."""


@register_broker_error(ResponseCode.NO_PERMISSION)
class NoPermissionError(MQBrokerError):
    """16: broker or topic not writable/readable, or a reserved topic."""


@register_broker_error(ResponseCode.TOPIC_NOT_EXIST)
class TopicNotExistError(MQBrokerError):
    """17: unknown topic (and auto-creation impossible)."""


@register_broker_error(ResponseCode.PULL_OFFSET_MOVED)
class PullOffsetMovedError(MQBrokerError):
    """21, where it is an error rather than a pull status."""


@register_broker_error(ResponseCode.QUERY_NOT_FOUND)
class OffsetNotFoundError(MQBrokerError):
    """22: QUERY_CONSUMER_OFFSET has no stored offset (the group's first start), or a query found nothing."""


@register_broker_error(ResponseCode.SUBSCRIPTION_PARSE_FAILED)
class SubscriptionParseFailedError(MQBrokerError):
    """23."""


@register_broker_error(ResponseCode.SUBSCRIPTION_NOT_EXIST)
class SubscriptionNotExistError(MQBrokerError):
    """24."""


@register_broker_error(ResponseCode.SUBSCRIPTION_NOT_LATEST)
class SubscriptionNotLatestError(MQBrokerError):
    """25."""


@register_broker_error(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)
class SubscriptionGroupNotExistError(MQBrokerError):
    """26."""


@register_broker_error(ResponseCode.CONSUMER_NOT_ONLINE)
class ConsumerNotOnlineError(MQBrokerError):
    """206."""


@register_broker_error(ResponseCode.NO_MESSAGE)
class NoMessageError(MQBrokerError):
    """208: a message lookup (view by id, query by key or unique key) found nothing."""


@register_broker_error(ResponseCode.FLOW_CONTROL)
class FlowControlError(MQBrokerError):
    """215."""
