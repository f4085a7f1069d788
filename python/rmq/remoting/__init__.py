"""The RocketMQ remoting layer: command model, sans-I/O codec, asyncio server and client.

Layers, each importing only the ones above it: ``command`` (data) -> ``codec`` (bytes, no I/O) and
``headers`` (typed ext fields) -> ``dispatcher`` (code -> processor, response rules) -> ``channel`` (one
connection) -> ``server`` / ``client``.
"""

from rmq.remoting.client import RemotingClient
from rmq.remoting.command import RemotingCommand, create_request, create_response
from rmq.remoting.context import Processor, RequestContext
from rmq.remoting.errors import (
    FrameError,
    HeaderError,
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from rmq.remoting.server import RemotingServer

__all__ = [
    "FrameError",
    "HeaderError",
    "Processor",
    "RemotingClient",
    "RemotingCommand",
    "RemotingConnectError",
    "RemotingError",
    "RemotingSendRequestError",
    "RemotingServer",
    "RemotingTimeoutError",
    "RequestContext",
    "create_request",
    "create_response",
]
