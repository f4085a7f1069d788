"""Message lookup for producers and consumers (``MQAdmin`` / ``MQAdminImpl``, REMOTING.md §3.4, §5).

::

    msg = await producer.view_message(send_result.offset_msg_id)             # by offset message id
    msg = await producer.view_message(send_result.msg_id, topic="TopicA")     # offset id, else UNIQ_KEY
    msg = await producer.view_message_by_unique_key("TopicA", send_result.msg_id)
    result = await producer.query_message("TopicA", "order-1", 32, begin_ms, end_ms)   # by KEYS entry
    for m in result.messages: ...

* :meth:`~MessageQueryMixin.view_message` decodes the broker address and commitlog offset from an offset
  message id (§5.1: store host + port + offset) and sends VIEW_MESSAGE_BY_ID to that address.
* :meth:`~MessageQueryMixin.query_message` sends QUERY_MESSAGE to one address (the master if there is one) of
  every broker of the topic's route and keeps the records whose topic is ``topic`` and whose ``KEYS``
  contain ``key`` (the brokers match index hashes only); by unique key (``_UNIQUE_KEY_QUERY=true``, at
  most ``defaultQueryMaxNum`` records per broker) the records whose ``UNIQ_KEY`` is the key. Brokers
  that fail are skipped, like Java; messages come back ordered by store time.
* Nothing found raises :class:`~rmq.client.errors.NoMessageError` (208), as Java's ``MQClientException``
  with ``NO_MESSAGE``; a broker that has no record at a (well-formed) offset answers 1
  (:class:`~rmq.client.errors.SystemError_`).
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import TYPE_CHECKING, Final

from rmq._store import decode_offset_msg_id
from rmq.client.errors import MQClientError, NoRouteError, broker_error
from rmq.client.message import MessageExt
from rmq.client.results import QueryResult
from rmq.client.uniq_id import uniq_id_timestamp
from rmq.common.codes import MASTER_ID, ResponseCode
from rmq.remoting import RemotingError

if TYPE_CHECKING:
    from rmq.client.instance import ClientInstance

__all__ = ["MessageQueryMixin", "decode_message_id"]

log = logging.getLogger(__name__)

LONG_MAX: Final = 2**63 - 1
DEFAULT_QUERY_MAX_NUM: Final = 32
_NO_MESSAGE: Final = int(ResponseCode.NO_MESSAGE)


def _no_message(text: str) -> MQClientError:
    return broker_error(_NO_MESSAGE, text, None)


def decode_message_id(msg_id: str) -> tuple[str, int]:
    """``(host:port, commitlog offset)`` of an offset message id; :class:`NoMessageError` if ``msg_id`` is
    not one (a ``UNIQ_KEY`` has the same shape, but its "port" field is never a valid port)."""
    text = msg_id.strip()
    ip_chars = 8 if len(text) == 32 else 32
    try:
        port = int(text[ip_chars : ip_chars + 8], 16)
        if len(text) not in (32, 56) or not 0 < port <= 0xFFFF:
            raise ValueError(msg_id)
        addr, offset = decode_offset_msg_id(text)
    except ValueError:
        raise _no_message(
            f"query message by id finished, but no message: {msg_id!r} is no offset message id"
        ) from None
    return str(addr), int(offset)


class MessageQueryMixin:
    """The lookup methods of :class:`~rmq.client.Producer` and the consumers (they must be running)."""

    @property
    def instance(self) -> ClientInstance:
        raise NotImplementedError

    async def view_message(self, msg_id: str, *, topic: str | None = None) -> MessageExt:
        """The message with offset message id ``msg_id`` (VIEW_MESSAGE_BY_ID to the broker in the id).

        With ``topic``, an id that is not an offset id or cannot be viewed is looked up as a ``UNIQ_KEY`` of
        ``topic`` instead (Java's ``viewMessage(topic, msgId)``), so either id of a send result works.
        """
        instance = self.instance
        try:
            addr, offset = decode_message_id(msg_id)
            return await instance.api.view_message(addr, offset, instance.timeout_ms)
        except (RemotingError, MQClientError):
            if topic is None:
                raise
        return await self.view_message_by_unique_key(topic, msg_id)

    async def query_message(
        self,
        topic: str,
        key: str,
        max_num: int = DEFAULT_QUERY_MAX_NUM,
        begin_ms: int = 0,
        end_ms: int = LONG_MAX,
    ) -> QueryResult:
        """Messages of ``topic`` with ``key`` among their ``KEYS``, stored between ``begin_ms`` and
        ``end_ms`` (epoch ms; the broker index keeps whole seconds), at most ``max_num`` per broker."""
        return await self._query(topic, key, max_num, begin_ms, end_ms, unique_key=False)

    async def query_message_by_unique_key(
        self,
        topic: str,
        uniq_key: str,
        max_num: int = DEFAULT_QUERY_MAX_NUM,
        begin_ms: int | None = None,
        end_ms: int = LONG_MAX,
    ) -> QueryResult:
        """Messages of ``topic`` whose ``UNIQ_KEY`` (client message id) is ``uniq_key``; the time range
        starts by default 1 s before the creation time encoded in the id."""
        if begin_ms is None:
            try:
                begin_ms = max(0, uniq_id_timestamp(uniq_key) - 1000)
            except ValueError:
                begin_ms = 0
        return await self._query(topic, uniq_key, max_num, begin_ms, end_ms, unique_key=True)

    async def view_message_by_unique_key(self, topic: str, uniq_key: str) -> MessageExt:
        """The (earliest stored) message of ``topic`` with ``UNIQ_KEY`` ``uniq_key``."""
        return (await self.query_message_by_unique_key(topic, uniq_key)).messages[0]

    async def _query(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int, *, unique_key: bool
    ) -> QueryResult:
        instance = self.instance
        route = instance.route_table.get(topic)
        if route is None:
            await instance.update_topic_route(topic)
            route = instance.route_table.get(topic)
        targets: list[tuple[str, str]] = []
        for bd in route.broker_datas if route is not None else ():
            addr = bd.broker_addrs.get(MASTER_ID)
            if addr is None and bd.broker_addrs:
                addr = random.choice(list(bd.broker_addrs.values()))
            if addr is not None:
                targets.append((bd.broker_name, addr))
        if not targets:
            raise NoRouteError(f"The topic[{topic}] not matched route info")

        async def one(broker_name: str, addr: str) -> QueryResult | BaseException:
            try:
                return await instance.api.query_message(
                    addr,
                    topic=topic,
                    key=key,
                    max_num=max_num,
                    begin_timestamp=begin_ms,
                    end_timestamp=end_ms,
                    unique_key=unique_key,
                    timeout_ms=instance.timeout_ms * 3,
                    broker_name=broker_name,
                )
            except (RemotingError, MQClientError) as exc:
                log.warning("queryMessage of %s key %r on %s failed: %s", topic, key, addr, exc)
                return exc

        answers = await asyncio.gather(*(one(name, addr) for name, addr in targets))
        last_update = 0
        found: list[MessageExt] = []
        errors: list[BaseException] = []
        for answer in answers:
            if isinstance(answer, BaseException):
                errors.append(answer)
                continue
            last_update = max(last_update, answer.index_last_update_timestamp)
            for msg in answer.messages:
                if unique_key:
                    matched = msg.msg_id == key
                else:
                    matched = msg.topic == topic and key in msg.key_list
                if matched:
                    found.append(msg)
                else:
                    log.debug("queryMessage %r: skipping a record of another key (hash collision)", key)
        if not found:
            if errors and len(errors) == len(answers):
                raise errors[0]
            what = "uniqKey" if unique_key else "key"
            raise _no_message(f"query message by {what} {key!r} of topic {topic} finished, but no message.")
        found.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset))
        return QueryResult(last_update, found)
