"""Typed outcomes: SendStatus / SendResult (``CL/producer/SendResult.java``, REMOTING.md §3.1),
PullStatus / PullResult (``CL/consumer/PullResult.java``, §3.2, §7.3) and QueryResult
(``CL/QueryResult.java``, §3.4)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from rmq.client.message import MessageExt, MessageQueue, decode_messages
from rmq.common.codes import ResponseCode

__all__ = [
    "PullResult",
    "PullStatus",
    "QueryResult",
    "SendResult",
    "SendStatus",
    "pull_status_of",
    "send_status_of",
]


class SendStatus(Enum):
    SEND_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3


_STATUS_BY_CODE = {
    int(ResponseCode.SUCCESS): SendStatus.SEND_OK,
    int(ResponseCode.FLUSH_DISK_TIMEOUT): SendStatus.FLUSH_DISK_TIMEOUT,
    int(ResponseCode.FLUSH_SLAVE_TIMEOUT): SendStatus.FLUSH_SLAVE_TIMEOUT,
    int(ResponseCode.SLAVE_NOT_AVAILABLE): SendStatus.SLAVE_NOT_AVAILABLE,
}


def send_status_of(code: int) -> SendStatus | None:
    """The status of a send response code; ``None`` means the code is an error."""
    return _STATUS_BY_CODE.get(code)


@dataclass(slots=True)
class SendResult:
    """What a broker answered to a send.

    ``msg_id`` is the client id (``UNIQ_KEY``; comma-joined for a batch), ``offset_msg_id`` the broker's
    offset id(s), ``queue_offset`` the consume-queue offset (of the first message of a batch).
    """

    send_status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str | None = None
    trace_on: bool = True

    @property
    def ok(self) -> bool:
        return self.send_status is SendStatus.SEND_OK


class PullStatus(Enum):
    FOUND = 0
    NO_NEW_MSG = 1
    NO_MATCHED_MSG = 2
    OFFSET_ILLEGAL = 3


_PULL_STATUS = {
    int(ResponseCode.SUCCESS): PullStatus.FOUND,
    int(ResponseCode.PULL_NOT_FOUND): PullStatus.NO_NEW_MSG,
    int(ResponseCode.PULL_RETRY_IMMEDIATELY): PullStatus.NO_MATCHED_MSG,
    int(ResponseCode.PULL_OFFSET_MOVED): PullStatus.OFFSET_ILLEGAL,
}


def pull_status_of(code: int) -> PullStatus | None:
    """The status of a pull response code (0, 19, 20, 21); ``None`` means the code is an error."""
    return _PULL_STATUS.get(code)


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    body: bytes | memoryview | None = None

    def messages(self, broker_name: str) -> list[MessageExt]:
        """The decoded messages of a FOUND result (with MIN_OFFSET / MAX_OFFSET and the broker name)."""
        if self.status is not PullStatus.FOUND or not self.body:
            return []
        return decode_messages(self.body, broker_name, self.min_offset, self.max_offset)


@dataclass(slots=True)
class QueryResult:
    """Messages found by QUERY_MESSAGE; ``index_last_update_timestamp`` is the newest index update time
    (ms) of the brokers that answered."""

    index_last_update_timestamp: int
    messages: list[MessageExt]
