"""The proxy's side towards the brokers: one Remoting client, the requests each 5.x RPC becomes.

Apache's proxy calls this the message service; rmq's is "cluster" mode only — the brokers are found through
the name servers and spoken to over Remoting, whether they run in this process (``python -m rmq.broker``
serving gRPC too) or elsewhere (``python -m rmq.proxy``). It sends, ends transactions, pops, acks and changes
invisible times, keeps the brokers told of the proxy's producer and consumer groups (HEART_BEAT), and hands
each CHECK_TRANSACTION_STATE a broker sends to a callback.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rmq.client.api import MQClientAPI
from rmq.client.errors import MQBrokerError
from rmq.client.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    ExpressionType,
    HeartbeatData,
    MessageModel,
    build_subscription,
)
from rmq.client.message import MessageExt, decode_messages
from rmq.client.results import SendResult
from rmq.client.uniq_id import local_ip
from rmq.common import codes, fastjson
from rmq.common.codes import LanguageCode, MessageSysFlag, RequestCode, ResponseCode
from rmq.proxy import pop
from rmq.proxy.clients import ClientRegistry
from rmq.proxy.messages import POP_CK, Outgoing
from rmq.proxy.pb import d
from rmq.proxy.route import RouteCache, TopicView, select_queue
from rmq.proxy.status import ProxyError, from_remoting
from rmq.remoting import RemotingClient, RemotingError, create_request
from rmq.remoting.command import RemotingCommand
from rmq.remoting.context import RequestContext
from rmq.remoting.headers import bool_text
from rmq.remoting.tls import TlsClientSettings

log = logging.getLogger("rmq.proxy")

HEARTBEAT_INTERVAL_S = 10.0
"""How often the brokers hear of the proxy's groups (the 4.x clients' 30 s is too slow for a new producer's
transaction checks; a new group is announced at once anyway)."""

GROUP_CONFIG_TTL_S = 30.0
DEFAULT_RETRY_MAX_TIMES = 16
_JAVA = int(LanguageCode.JAVA)

CheckCallback = Callable[[str, MessageExt, dict[str, str]], None]


@dataclass(frozen=True, slots=True)
class TxRef:
    """What END_TRANSACTION needs of a half message; the 5.x ``transaction_id`` is its text."""

    addr: str
    commit_log_offset: int
    tran_state_offset: int
    uniq_id: str

    def __str__(self) -> str:
        return f"{self.uniq_id}|{self.addr}|{self.commit_log_offset}|{self.tran_state_offset}"

    @classmethod
    def parse(cls, text: str) -> TxRef:
        parts = text.split("|")
        if len(parts) != 4 or not parts[2].isdigit() or not parts[3].lstrip("-").isdigit():
            raise ProxyError(
                d.Code.INVALID_TRANSACTION_ID, f"transaction id {text!r} was not issued by this proxy"
            )
        return cls(parts[1], int(parts[2]), int(parts[3]), parts[0])


def commit_log_offset(offset_msg_id: str) -> int:
    """The CommitLog offset in an offset message id (its last 16 hex digits)."""
    try:
        return int(offset_msg_id[-16:], 16)
    except ValueError:
        return 0


class Brokers:
    def __init__(
        self,
        namesrv_addrs: list[str],
        registry: ClientRegistry,
        *,
        rpc_hook: object = None,
        tls: TlsClientSettings | None = None,
    ) -> None:
        self.remoting = RemotingClient(rpc_hook=rpc_hook, tls=tls)  # type: ignore[arg-type]
        self.api = MQClientAPI(self.remoting, namesrv_addrs, int(LanguageCode.JAVA))
        self.routes = RouteCache(self.api.get_route)
        self.registry = registry
        self.instance_id = f"{local_ip()}@proxy-{id(self):x}@{int(time.time() * 1000)}"
        self.on_check: CheckCallback | None = None
        self.remoting.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction_state)
        self._task: asyncio.Task[None] | None = None
        self._group_retry: dict[str, tuple[tuple[int, bool], float]] = {}

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._heartbeat_loop(), name="proxy-heartbeat")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self.remoting.close()

    # --- routes --------------------------------------------------------------------------------------

    async def view(self, topic: str) -> TopicView:
        return await self.routes.view(topic)

    async def addr_of(self, broker_name: str, topic: str) -> str:
        view = await self.routes.view(topic)
        addr = view.master(broker_name)
        if addr is None:
            view = await self.routes.view(topic, refresh=True)
            addr = view.master(broker_name)
        if addr is None:
            raise ProxyError(d.Code.NOT_FOUND, f"broker {broker_name} has no master serving topic {topic}")
        return addr

    # --- producer ------------------------------------------------------------------------------------

    async def send(self, msg: Outgoing, timeout_ms: int) -> tuple[SendResult, TxRef | None]:
        view = await self.routes.view(msg.topic)
        queue = select_queue(view, msg.message_group)
        try:
            result = await self.api.send_message(
                queue.addr,
                queue.broker_name,
                producer_group=msg.topic,
                topic=msg.topic,
                queue_id=queue.queue_id,
                sys_flag=msg.sys_flag,
                born_timestamp=int(time.time() * 1000),
                flag=0,
                properties=msg.encoded_properties(),
                body=msg.body,
                uniq_id=msg.message_id,
                timeout_ms=timeout_ms,
            )
        except MQBrokerError as e:
            if e.code == ResponseCode.TOPIC_NOT_EXIST:
                self.routes.forget(msg.topic)
            raise from_remoting(e.code, e.remark, f"send to {queue.broker_name}") from None
        except (RemotingError, OSError) as e:
            self.routes.forget(msg.topic)
            raise ProxyError(
                d.Code.PROXY_TIMEOUT, f"send to {queue.broker_name} ({queue.addr}): {e}"
            ) from None
        assert result is not None
        tx = None
        if msg.transactional:
            tx = TxRef(
                queue.addr, commit_log_offset(result.offset_msg_id), result.queue_offset, msg.message_id
            )
        return result, tx

    async def end_transaction(
        self, topic: str, tx: TxRef, commit: bool, from_check: bool, message_id: str
    ) -> None:
        kind = MessageSysFlag.TRANSACTION_COMMIT_TYPE if commit else MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
        try:
            await self.api.end_transaction(
                tx.addr,
                producer_group=topic,
                tran_state_table_offset=tx.tran_state_offset,
                commit_log_offset=tx.commit_log_offset,
                commit_or_rollback=kind,
                msg_id=message_id or tx.uniq_id,
                transaction_id=tx.uniq_id,
                from_transaction_check=from_check,
            )
        except (RemotingError, OSError) as e:
            raise ProxyError(d.Code.PROXY_TIMEOUT, f"end transaction at {tx.addr}: {e}") from None

    def _on_check_transaction_state(self, ctx: RequestContext, request: RemotingCommand) -> None:
        messages = decode_messages(request.body or b"")
        if not messages:
            log.warning("CHECK_TRANSACTION_STATE from %s without a message: ignored", ctx.remote_addr)
            return
        if self.on_check is not None:
            self.on_check(ctx.remote_addr, messages[0], dict(request.ext_fields))

    # --- consumer ------------------------------------------------------------------------------------

    async def pop(
        self,
        *,
        group: str,
        topic: str,
        broker_name: str,
        queue_id: int,
        batch: int,
        invisible_ms: int,
        poll_ms: int,
        filter_type: str,
        expression: str,
        fifo: bool,
        attempt_id: str | None,
    ) -> list[tuple[MessageExt, pop.Handle]]:
        """POP_MESSAGE: the messages found (none when the long poll ended empty), each with its handle."""
        addr = await self.addr_of(broker_name, topic)
        fields = {
            "consumerGroup": group,
            "topic": topic,
            "queueId": str(queue_id),
            "maxMsgNums": str(batch),
            "invisibleTime": str(invisible_ms),
            "pollTime": str(poll_ms),
            "bornTime": str(int(time.time() * 1000)),
            "initMode": "1",
            "expType": filter_type,
            "exp": expression,
            "order": bool_text(fifo),
        }
        if attempt_id:
            fields["attemptId"] = attempt_id
        request = create_request(codes.POP_MESSAGE, fields, language=int(LanguageCode.JAVA))
        try:
            response = await self.remoting.invoke(addr, request, poll_ms + 3000)
        except (RemotingError, OSError) as e:
            raise ProxyError(d.Code.PROXY_TIMEOUT, f"pop from {broker_name} ({addr}): {e}") from None
        if response.code in (
            ResponseCode.PULL_NOT_FOUND,
            pop.POLLING_TIMEOUT,
            pop.POLLING_FULL,
            ResponseCode.NO_MESSAGE,
        ):
            return []
        if response.code != ResponseCode.SUCCESS:
            raise from_remoting(response.code, response.remark, f"pop from {broker_name}")
        ext = response.ext_fields
        pop_time = int(ext.get("popTime", "0"))
        invisible = int(ext.get("invisibleTime", str(invisible_ms)))
        revive_qid = int(ext.get("reviveQid", "0"))
        start = pop.parse_offset_info(ext.get("startOffsetInfo"))
        offsets = pop.parse_offset_info(ext.get("msgOffsetInfo"))
        out = []
        for m in decode_messages(response.body or b"", broker_name):
            # A retry message's topic may be rewritten by the broker, which then gives its handle itself
            # (the POP_CK property, as Apache's client reads it).
            given = m.get_property(POP_CK)
            if given:
                try:
                    h = pop.Handle.parse(given)
                    out.append((m, dataclasses.replace(h, commit_log_offset=m.commit_log_offset)))
                    continue
                except ValueError:
                    log.warning("pop from %s: message %s has a bad POP_CK %r", broker_name, m.msg_id, given)
            mark = pop.retry_mark(m.topic)
            key = f"{mark}@{m.queue_id}"
            ck = start.get(key, [m.queue_offset])[0]
            qoff = m.queue_offset
            listed = offsets.get(key)
            if listed and qoff not in listed:
                log.warning(
                    "pop from %s: offset %d of %s not in msgOffsetInfo %s", broker_name, qoff, key, listed
                )
            handle = pop.Handle(
                ck, pop_time, invisible, revive_qid, mark, broker_name, m.queue_id, qoff, m.commit_log_offset
            )
            out.append((m, handle))
        return out

    async def ack(self, group: str, topic: str, handle: pop.Handle) -> None:
        addr = await self.addr_of(handle.broker_name, topic)
        fields = {
            "consumerGroup": group,
            "topic": pop.real_topic(topic, group, handle.retry),
            "queueId": str(handle.queue_id),
            "extraInfo": str(handle),
            "offset": str(handle.queue_offset),
        }
        await self._invoke_ok(addr, codes.ACK_MESSAGE, fields, f"ack at {handle.broker_name}")

    async def change_invisible(
        self, group: str, topic: str, handle: pop.Handle, invisible_ms: int
    ) -> pop.Handle:
        addr = await self.addr_of(handle.broker_name, topic)
        fields = {
            "consumerGroup": group,
            "topic": pop.real_topic(topic, group, handle.retry),
            "queueId": str(handle.queue_id),
            "extraInfo": str(handle),
            "offset": str(handle.queue_offset),
            "invisibleTime": str(invisible_ms),
        }
        response = await self._invoke_ok(
            addr, codes.CHANGE_MESSAGE_INVISIBLETIME, fields, f"change invisible time at {handle.broker_name}"
        )
        ext = response.ext_fields
        # The broker checkpoints the message alone now: its own offset starts the new handle (as Apache's
        # client builds it after CHANGE_MESSAGE_INVISIBLETIME).
        return pop.Handle(
            handle.queue_offset,
            int(ext.get("popTime", handle.pop_time)),
            int(ext.get("invisibleTime", invisible_ms)),
            int(ext.get("reviveQid", handle.revive_qid)),
            handle.retry,
            handle.broker_name,
            handle.queue_id,
            handle.queue_offset,
            handle.commit_log_offset,
        )

    async def forward_to_dlq(self, group: str, topic: str, handle: pop.Handle, message_id: str) -> None:
        """CONSUMER_SEND_MSG_BACK to the dead-letter queue (delay level -1), then ack (Apache's proxy)."""
        if handle.commit_log_offset < 0:
            raise ProxyError(d.Code.INVALID_RECEIPT_HANDLE, "the receipt handle carries no CommitLog offset")
        addr = await self.addr_of(handle.broker_name, topic)
        fields = {
            "offset": str(handle.commit_log_offset),
            "group": group,
            "delayLevel": "-1",
            "originMsgId": message_id,
            "originTopic": pop.real_topic(topic, group, handle.retry),
            "unitMode": "false",
            "maxReconsumeTimes": "0",
            "bname": handle.broker_name,
        }
        what = f"forward to the dead-letter queue at {handle.broker_name}"
        await self._invoke_ok(addr, RequestCode.CONSUMER_SEND_MSG_BACK, fields, what)
        await self.ack(group, topic, handle)
        log.info("message %s of %s (group %s) forwarded to the dead-letter queue", message_id, topic, group)

    async def group_config(self, group: str, topics: list[str]) -> tuple[int, bool]:
        """The group's ``retryMaxTimes`` and ``consumeMessageOrderly`` on a broker of ``topics`` (16 and
        false, RocketMQ's defaults, when unknown)."""
        cached = self._group_retry.get(group)
        if cached is not None and time.monotonic() - cached[1] < GROUP_CONFIG_TTL_S:
            return cached[0]
        value = (DEFAULT_RETRY_MAX_TIMES, False)
        for topic in topics:
            try:
                addrs = list((await self.routes.view(topic)).masters().values())
            except ProxyError:
                continue
            for addr in addrs:
                request = create_request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, None, language=_JAVA)
                try:
                    response = await self.remoting.invoke(addr, request, 3000)
                except (RemotingError, OSError) as e:
                    log.debug("group config of %s from %s: %s", group, addr, e)
                    continue
                if response.code != ResponseCode.SUCCESS or not response.body:
                    continue
                table = (fastjson.loads_tolerant(response.body) or {}).get("subscriptionGroupTable") or {}
                config = table.get(group)
                if isinstance(config, dict):
                    retry = int(config.get("retryMaxTimes", DEFAULT_RETRY_MAX_TIMES))
                    value = (retry, bool(config.get("consumeMessageOrderly", False)))
                break
            break
        self._group_retry[group] = (value, time.monotonic())
        return value

    async def _invoke_ok(self, addr: str, code: int, fields: dict[str, str], what: str) -> RemotingCommand:
        request = create_request(code, fields, language=int(LanguageCode.JAVA))
        try:
            response = await self.remoting.invoke(addr, request, 3000)
        except (RemotingError, OSError) as e:
            raise ProxyError(d.Code.PROXY_TIMEOUT, f"{what} ({addr}): {e}") from None
        if response.code != ResponseCode.SUCCESS:
            raise from_remoting(response.code, response.remark, what)
        return response

    # --- the brokers' view of the proxy's clients ----------------------------------------------------

    def heartbeat_data(self) -> HeartbeatData:
        consumers = []
        simple = self.registry.simple_consumer_groups()
        for group, subs in self.registry.consumer_groups().items():
            subscriptions = []
            for topic, f in subs.items():
                kind = ExpressionType.SQL92 if f.type == d.FilterType.SQL else ExpressionType.TAG
                subscriptions.append(build_subscription(topic, f.expression or "*", kind))
            consumers.append(
                ConsumerData(
                    group,
                    ConsumeType.CONSUME_ACTIVELY if group in simple else ConsumeType.CONSUME_PASSIVELY,
                    MessageModel.CLUSTERING,
                    ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                    subscriptions,
                )
            )
        return HeartbeatData(self.instance_id, sorted(self.registry.producer_groups()), consumers)

    async def heartbeat_all(self) -> None:
        data = self.heartbeat_data()
        if not data.producer_groups and not data.consumers:
            return
        topics = set(data.producer_groups) | {s.topic for c in data.consumers for s in c.subscriptions}
        addrs: set[str] = set()
        for topic in topics:
            try:
                addrs.update((await self.routes.view(topic)).masters().values())
            except ProxyError as e:
                log.debug("heartbeat: no route of %s: %s", topic, e.message)
        for addr in sorted(addrs):
            try:
                await self.api.heartbeat(addr, data)
            except (MQBrokerError, RemotingError, OSError) as e:
                log.warning("heartbeat to broker %s failed: %s", addr, e)

    async def _heartbeat_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self.registry.changed.wait(), HEARTBEAT_INTERVAL_S)
            except TimeoutError:
                pass
            self.registry.changed.clear()
            self.registry.expire()
            try:
                await self.heartbeat_all()
            except Exception:
                log.exception("proxy heartbeat round failed")


Awaiting = Awaitable[None]
