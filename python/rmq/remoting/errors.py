"""The remoting layer's exception tree: everything derives from :class:`RemotingError`.

Protocol-level input errors (:class:`FrameError`, :class:`HeaderError`) are also ``ValueError``s.
"""

from __future__ import annotations

__all__ = [
    "FrameError",
    "HeaderError",
    "RemotingConnectError",
    "RemotingError",
    "RemotingSendRequestError",
    "RemotingTimeoutError",
]


class RemotingError(Exception):
    """Base of all remoting errors."""


class FrameError(RemotingError, ValueError):
    """Malformed bytes on a connection: the connection must be closed."""


class HeaderError(RemotingError, ValueError):
    """A request's ``extFields`` lack a required key or carry a value of the wrong type.

    Servers answer it with SYSTEM_ERROR (code 1) and the message as remark; it never closes the connection.
    """


class RemotingConnectError(RemotingError):
    """Could not connect to the remote address."""


class RemotingTimeoutError(RemotingError, TimeoutError):
    """No response arrived within the timeout."""


class RemotingSendRequestError(RemotingError):
    """The request could not be written, or the connection closed before its response arrived."""
