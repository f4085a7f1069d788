"""One coroutine per request a client sends (``CL/impl/MQClientAPIImpl.java``).

Each builds the request header exactly as the Java client does (REMOTING.md §3), awaits the response on the
shared :class:`~rmq.remoting.RemotingClient` and turns a non-success code into the registered
:class:`~rmq.client.errors.MQBrokerError` subclass. Transport errors pass through. Name-server requests try
the configured name servers in turn, starting from the last one that answered.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any, Final

from rmq.client.errors import broker_error
from rmq.client.heartbeat import ExpressionType, HeartbeatData, SubscriptionData
from rmq.client.message import MessageExt, MessageQueue, decode_messages
from rmq.client.results import (
    PullResult,
    PullStatus,
    QueryResult,
    SendResult,
    pull_status_of,
    send_status_of,
)
from rmq.common import fastjson
from rmq.common.codes import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    UNIQUE_MSG_QUERY_FLAG,
    RequestCode,
    ResponseCode,
)
from rmq.common.route import TopicConfig, TopicRouteData
from rmq.common.topic_attributes import attributes_text
from rmq.remoting import (
    RemotingClient,
    RemotingCommand,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    create_request,
)
from rmq.remoting.headers import bool_text, header_int, header_long

__all__ = ["MQClientAPI"]

_SUCCESS: Final = int(ResponseCode.SUCCESS)


def _check(response: RemotingCommand, addr: str) -> RemotingCommand:
    if response.code != _SUCCESS:
        raise broker_error(response.code, response.remark, addr)
    return response


def _json_body(response: RemotingCommand) -> Any:
    if not response.body:
        return None
    return fastjson.loads(response.body)


class MQClientAPI:
    def __init__(self, remoting: RemotingClient, namesrv_addrs: list[str], language: int) -> None:
        self.remoting = remoting
        self.language = language
        self.namesrv_addrs = list(namesrv_addrs)
        self._ns_index = random.randrange(len(self.namesrv_addrs)) if self.namesrv_addrs else 0

    def request(
        self, code: int, fields: dict[str, str] | None = None, body: bytes | None = None
    ) -> RemotingCommand:
        return create_request(code, fields, body, language=self.language)

    async def invoke(self, addr: str, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        return await self.remoting.invoke(addr, request, timeout_ms)

    async def invoke_namesrv(self, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        """Send to the current name server; on a transport failure try the next ones once each."""
        addrs = self.namesrv_addrs
        if not addrs:
            raise RemotingConnectError("no name server address configured")
        last: Exception | None = None
        for i in range(len(addrs)):
            index = (self._ns_index + i) % len(addrs)
            try:
                response = await self.remoting.invoke(addrs[index], request, timeout_ms)
            except (RemotingConnectError, RemotingSendRequestError, RemotingTimeoutError) as exc:
                last = exc
                continue
            self._ns_index = index
            return response
        assert last is not None
        raise last

    # --- name server ----------------------------------------------------------------------------------

    async def get_route(self, topic: str, timeout_ms: int = 3000) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC; raises :class:`TopicNotExistError` (17) for an unknown topic."""
        request = self.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        response = await self.invoke_namesrv(request, timeout_ms)
        if response.code != _SUCCESS:
            raise broker_error(response.code, response.remark, None)
        if not response.body:
            raise broker_error(int(ResponseCode.TOPIC_NOT_EXIST), f"empty route for {topic}", None)
        return TopicRouteData.from_json(response.body)

    # --- producer -------------------------------------------------------------------------------------

    async def send_message(
        self,
        addr: str,
        broker_name: str,
        *,
        producer_group: str,
        topic: str,
        queue_id: int,
        sys_flag: int,
        born_timestamp: int,
        flag: int,
        properties: str,
        body: bytes,
        uniq_id: str,
        reconsume_times: int = 0,
        max_reconsume_times: int | None = None,
        batch: bool = False,
        default_topic: str = AUTO_CREATE_TOPIC_KEY_TOPIC,
        default_topic_queue_nums: int = 4,
        timeout_ms: int = 3000,
        oneway: bool = False,
    ) -> SendResult | None:
        """SEND_MESSAGE_V2 (310) or SEND_BATCH_MESSAGE (320) with the V2 one-letter header (a..n).

        Returns ``None`` for a oneway send. Codes 0/10/11/12 give a result; others raise.
        """
        fields = {
            "a": producer_group,
            "b": topic,
            "c": default_topic,
            "d": str(default_topic_queue_nums),
            "e": str(queue_id),
            "f": str(sys_flag),
            "g": str(born_timestamp),
            "h": str(flag),
            "i": properties,
            "j": str(reconsume_times),
            "k": "false",
            "m": bool_text(batch),
            "n": broker_name,
        }
        if max_reconsume_times is not None:
            fields["l"] = str(max_reconsume_times)
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        request = create_request(code, fields, body, language=self.language)
        if oneway:
            await self.remoting.invoke_oneway(addr, request)
            return None
        response = await self.remoting.invoke(addr, request, timeout_ms)
        status = send_status_of(response.code)
        if status is None:
            raise broker_error(response.code, response.remark, addr)
        ext = response.ext_fields
        return SendResult(
            send_status=status,
            msg_id=uniq_id,
            offset_msg_id=ext.get("msgId", ""),
            message_queue=MessageQueue(topic, broker_name, header_int(ext, "queueId", queue_id)),
            queue_offset=header_long(ext, "queueOffset", -1),
            transaction_id=ext.get("transactionId"),
            region_id=ext.get("MSG_REGION"),
            trace_on=ext.get("TRACE_ON") != "false",
        )

    async def end_transaction(
        self,
        addr: str,
        *,
        producer_group: str,
        tran_state_table_offset: int,
        commit_log_offset: int,
        commit_or_rollback: int,
        msg_id: str,
        transaction_id: str | None,
        from_transaction_check: bool = False,
        remark: str | None = None,
        broker_name: str | None = None,
    ) -> None:
        """END_TRANSACTION (37), oneway like the Java producer."""
        fields = {
            "producerGroup": producer_group,
            "tranStateTableOffset": str(tran_state_table_offset),
            "commitLogOffset": str(commit_log_offset),
            "commitOrRollback": str(commit_or_rollback),
            "fromTransactionCheck": bool_text(from_transaction_check),
            "msgId": msg_id,
        }
        if transaction_id is not None:
            fields["transactionId"] = transaction_id
        if broker_name:
            fields["bname"] = broker_name
        request = self.request(RequestCode.END_TRANSACTION, fields)
        request.remark = remark
        await self.remoting.invoke_oneway(addr, request)

    # --- consumer -------------------------------------------------------------------------------------

    async def pull_message(
        self,
        addr: str,
        *,
        consumer_group: str,
        mq: MessageQueue,
        queue_offset: int,
        max_msg_nums: int,
        sys_flag: int,
        commit_offset: int,
        suspend_timeout_ms: int,
        sub_version: int,
        subscription: str | None,
        expression_type: str = ExpressionType.TAG,
        timeout_ms: int = 30_000,
    ) -> PullResult:
        """PULL_MESSAGE (11). Codes 0/19/20/21 give a :class:`PullResult`; others raise."""
        fields = {
            "consumerGroup": consumer_group,
            "topic": mq.topic,
            "queueId": str(mq.queue_id),
            "queueOffset": str(queue_offset),
            "maxMsgNums": str(max_msg_nums),
            "sysFlag": str(sys_flag),
            "commitOffset": str(commit_offset),
            "suspendTimeoutMillis": str(suspend_timeout_ms),
            "subVersion": str(sub_version),
            "expressionType": expression_type,
            "bname": mq.broker_name,
        }
        if subscription is not None:
            fields["subscription"] = subscription
        response = await self.remoting.invoke(
            addr, self.request(RequestCode.PULL_MESSAGE, fields), timeout_ms
        )
        status = pull_status_of(response.code)
        if status is None:
            raise broker_error(response.code, response.remark, addr)
        ext = response.ext_fields
        return PullResult(
            status,
            header_long(ext, "nextBeginOffset"),
            header_long(ext, "minOffset"),
            header_long(ext, "maxOffset"),
            header_long(ext, "suggestWhichBrokerId", 0),
            response.body if status is PullStatus.FOUND else None,
        )

    async def query_consumer_offset(
        self, addr: str, group: str, mq: MessageQueue, timeout_ms: int = 3000
    ) -> int:
        """QUERY_CONSUMER_OFFSET (14); raises :class:`OffsetNotFoundError` (22) when the group has none."""
        fields = {
            "consumerGroup": group,
            "topic": mq.topic,
            "queueId": str(mq.queue_id),
            "bname": mq.broker_name,
        }
        response = _check(
            await self.invoke(addr, self.request(RequestCode.QUERY_CONSUMER_OFFSET, fields), timeout_ms), addr
        )
        return header_long(response.ext_fields, "offset")

    async def update_consumer_offset(
        self,
        addr: str,
        group: str,
        mq: MessageQueue,
        offset: int,
        *,
        oneway: bool = False,
        timeout_ms: int = 3000,
    ) -> None:
        """UPDATE_CONSUMER_OFFSET (15), oneway (periodic persist) or acknowledged."""
        fields = {
            "consumerGroup": group,
            "topic": mq.topic,
            "queueId": str(mq.queue_id),
            "commitOffset": str(offset),
            "bname": mq.broker_name,
        }
        request = self.request(RequestCode.UPDATE_CONSUMER_OFFSET, fields)
        if oneway:
            await self.remoting.invoke_oneway(addr, request)
        else:
            _check(await self.invoke(addr, request, timeout_ms), addr)

    async def _offset_query(
        self, code: int, addr: str, mq: MessageQueue, timeout_ms: int, **extra: str
    ) -> int:
        fields = {"topic": mq.topic, "queueId": str(mq.queue_id), "bname": mq.broker_name, **extra}
        response = _check(await self.invoke(addr, self.request(code, fields), timeout_ms), addr)
        key = "timestamp" if code == RequestCode.GET_EARLIEST_MSG_STORETIME else "offset"
        return header_long(response.ext_fields, key)

    async def get_max_offset(self, addr: str, mq: MessageQueue, timeout_ms: int = 3000) -> int:
        """GET_MAX_OFFSET (30): the next offset to be written."""
        return await self._offset_query(RequestCode.GET_MAX_OFFSET, addr, mq, timeout_ms)

    async def get_min_offset(self, addr: str, mq: MessageQueue, timeout_ms: int = 3000) -> int:
        return await self._offset_query(RequestCode.GET_MIN_OFFSET, addr, mq, timeout_ms)

    async def get_earliest_msg_store_time(self, addr: str, mq: MessageQueue, timeout_ms: int = 3000) -> int:
        return await self._offset_query(RequestCode.GET_EARLIEST_MSG_STORETIME, addr, mq, timeout_ms)

    async def search_offset(
        self, addr: str, mq: MessageQueue, timestamp_ms: int, timeout_ms: int = 3000
    ) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP (29)."""
        return await self._offset_query(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, addr, mq, timeout_ms, timestamp=str(timestamp_ms)
        )

    async def heartbeat(self, addr: str, data: HeartbeatData, timeout_ms: int = 3000) -> int:
        """HEART_BEAT (34); returns the broker's version from the response."""
        request = self.request(RequestCode.HEART_BEAT, None, fastjson.dumps(data.to_dict()))
        response = _check(await self.invoke(addr, request, timeout_ms), addr)
        return response.version

    async def unregister_client(
        self,
        addr: str,
        client_id: str,
        *,
        producer_group: str | None = None,
        consumer_group: str | None = None,
        timeout_ms: int = 3000,
    ) -> None:
        """UNREGISTER_CLIENT (35)."""
        fields = {"clientID": client_id}
        if producer_group is not None:
            fields["producerGroup"] = producer_group
        if consumer_group is not None:
            fields["consumerGroup"] = consumer_group
        _check(await self.invoke(addr, self.request(RequestCode.UNREGISTER_CLIENT, fields), timeout_ms), addr)

    async def check_client_config(
        self, addr: str, group: str, client_id: str, subscription: SubscriptionData, timeout_ms: int = 3000
    ) -> None:
        """CHECK_CLIENT_CONFIG (46): does the broker accept this (SQL92) subscription?"""
        body = {"clientId": client_id, "group": group, "subscriptionData": subscription.to_dict()}
        request = self.request(RequestCode.CHECK_CLIENT_CONFIG, None, fastjson.dumps(body))
        _check(await self.invoke(addr, request, timeout_ms), addr)

    async def get_consumer_id_list(self, addr: str, group: str, timeout_ms: int = 3000) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP (38)."""
        request = self.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
        response = _check(await self.invoke(addr, request, timeout_ms), addr)
        data = _json_body(response) or {}
        return [str(c) for c in data.get("consumerIdList") or ()]

    @staticmethod
    def _mq_set_body(group: str, client_id: str, mqs: Iterable[MessageQueue]) -> bytes:
        return fastjson.dumps(
            {"consumerGroup": group, "clientId": client_id, "mqSet": [mq.to_dict() for mq in mqs]}
        )

    async def lock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue], timeout_ms: int = 1000
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ (41): the subset of ``mqs`` now locked for this client."""
        request = self.request(RequestCode.LOCK_BATCH_MQ, None, self._mq_set_body(group, client_id, mqs))
        response = _check(await self.invoke(addr, request, timeout_ms), addr)
        data = _json_body(response) or {}
        return {MessageQueue.from_dict(d) for d in data.get("lockOKMQSet") or ()}

    async def unlock_batch_mq(
        self,
        addr: str,
        group: str,
        client_id: str,
        mqs: Iterable[MessageQueue],
        *,
        oneway: bool = False,
        timeout_ms: int = 1000,
    ) -> None:
        """UNLOCK_BATCH_MQ (42)."""
        request = self.request(RequestCode.UNLOCK_BATCH_MQ, None, self._mq_set_body(group, client_id, mqs))
        if oneway:
            await self.remoting.invoke_oneway(addr, request)
        else:
            _check(await self.invoke(addr, request, timeout_ms), addr)

    async def consumer_send_msg_back(
        self,
        addr: str,
        msg: MessageExt,
        group: str,
        delay_level: int,
        max_reconsume_times: int,
        timeout_ms: int = 5000,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK (36): the broker re-sends the stored message to ``%RETRY%group`` (§7.6)."""
        fields = {
            "offset": str(msg.commit_log_offset),
            "group": group,
            "delayLevel": str(delay_level),
            "originMsgId": msg.msg_id,
            "originTopic": msg.topic,
            "unitMode": "false",
            "maxReconsumeTimes": str(max_reconsume_times),
        }
        if msg.broker_name:
            fields["bname"] = msg.broker_name
        request = self.request(RequestCode.CONSUMER_SEND_MSG_BACK, fields)
        _check(await self.invoke(addr, request, timeout_ms), addr)

    # --- admin helpers --------------------------------------------------------------------------------

    async def create_topic(
        self,
        addr: str,
        config: TopicConfig,
        default_topic: str = AUTO_CREATE_TOPIC_KEY_TOPIC,
        timeout_ms: int = 3000,
        attributes: str | None = None,
    ) -> None:
        """UPDATE_AND_CREATE_TOPIC (17) on one broker (what ``mqadmin updateTopic`` sends). `attributes`:
        5.x's ``+key=value,-key`` changes (default: set the config's attributes, if it has any; none
        keeps the topic's)."""
        if attributes is None and config.attributes:
            attributes = attributes_text(config.attributes)
        fields = {
            "topic": config.topic_name,
            "defaultTopic": default_topic,
            "readQueueNums": str(config.read_queue_nums),
            "writeQueueNums": str(config.write_queue_nums),
            "perm": str(config.perm),
            "topicFilterType": config.topic_filter_type,
            "topicSysFlag": str(config.topic_sys_flag),
            "order": bool_text(config.order),
        }
        if attributes:
            fields["attributes"] = attributes
        request = self.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        _check(await self.invoke(addr, request, timeout_ms), addr)

    # --- message lookup (MQAdmin) ----------------------------------------------------------------------

    async def view_message(
        self, addr: str, commit_log_offset: int, timeout_ms: int = 3000, broker_name: str | None = None
    ) -> MessageExt:
        """VIEW_MESSAGE_BY_ID (33) by commitlog offset; the broker answers 1 if there is no record there."""
        request = self.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(commit_log_offset)})
        response = _check(await self.invoke(addr, request, timeout_ms), addr)
        messages = decode_messages(response.body or b"", broker_name)
        if not messages:
            raise broker_error(int(ResponseCode.SYSTEM_ERROR), "empty VIEW_MESSAGE_BY_ID body", addr)
        return messages[0]

    async def query_message(
        self,
        addr: str,
        *,
        topic: str,
        key: str,
        max_num: int,
        begin_timestamp: int,
        end_timestamp: int,
        unique_key: bool = False,
        timeout_ms: int = 9000,
        broker_name: str | None = None,
    ) -> QueryResult:
        """QUERY_MESSAGE (12) on one broker: the records its index holds for ``key`` (a ``KEYS`` entry, or
        the ``UNIQ_KEY`` with ``unique_key``) stored between the timestamps. The broker matches index
        hashes only: callers filter the records. Nothing found (22) gives an empty result."""
        fields = {
            "topic": topic,
            "key": key,
            "maxNum": str(max_num),
            "beginTimestamp": str(begin_timestamp),
            "endTimestamp": str(end_timestamp),
            UNIQUE_MSG_QUERY_FLAG: bool_text(unique_key),
        }
        response = await self.invoke(addr, self.request(RequestCode.QUERY_MESSAGE, fields), timeout_ms)
        ext = response.ext_fields
        last_update = header_long(ext, "indexLastUpdateTimestamp", 0)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return QueryResult(last_update, [])
        _check(response, addr)
        return QueryResult(last_update, decode_messages(response.body or b"", broker_name))
