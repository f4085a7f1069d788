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
from rmq.client.errors import MQBrokerError, OffsetNotFoundError
from rmq.client.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    ExpressionType,
    HeartbeatData,
    MessageModel,
    build_subscription,
)
from rmq.client.message import MessageExt, MessageQueue, decode_messages
from rmq.client.results import SendResult
from rmq.client.uniq_id import local_ip
from rmq.common import codes, fastjson
from rmq.common.codes import LanguageCode, MessageSysFlag, RequestCode, ResponseCode
from rmq.proxy import pop
from rmq.proxy.clients import ClientRegistry
from rmq.proxy.messages import POP_CK, Outgoing, lmq_name
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
class GroupInfo:
    """What the proxy reads of a consumer group's config on its brokers."""

    retry_max_times: int = DEFAULT_RETRY_MAX_TIMES
    orderly: bool = False
    found: bool = False
    """A broker of the topics has the group (else the rest are RocketMQ's defaults)."""
    attributes: tuple[tuple[str, str], ...] = ()

    @property
    def lite_bind_topic(self) -> str | None:
        """The parent topic of a lite group (RocketMQ 5.x attribute ``lite.bind.topic``)."""
        return dict(self.attributes).get("lite.bind.topic") or None

    def attribute_int(self, key: str, default: int) -> int:
        try:
            return int(dict(self.attributes).get(key, default))
        except ValueError:
            return default


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
        self._group_info: dict[str, tuple[GroupInfo, float]] = {}

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
        popped = await self._pop_call(addr, fields, attempt_id, poll_ms + 3000, f"pop from {broker_name}")
        if popped is None:
            return []
        response, pop_time, invisible, revive_qid = popped
        ext = response.ext_fields
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

    async def pop_lite(
        self,
        *,
        group: str,
        topic: str,
        lite_topics: list[str],
        broker_name: str,
        batch: int,
        invisible_ms: int,
        poll_ms: int,
        attempt_id: str | None,
    ) -> list[tuple[MessageExt, pop.Handle, str]]:
        """One orderly POP_MESSAGE of the LMQs of ``lite_topics`` on one broker (rmq's ``lmqs`` extension,
        long polling on all of them), as Apache's PopLite serves a lite consumer: one batch in flight per lite
        topic and group, a message not acked in time delivered again from the same offset. Each message comes
        with its handle (its LMQ offset) and lite topic, and shows its LMQ offset and deliveries before."""
        addr = await self.addr_of(broker_name, topic)
        lmqs = [lmq_name(topic, lite) for lite in lite_topics]
        fields = {
            "consumerGroup": group,
            # The first LMQ as the topic: a broker without the extension (Apache's) finds no such topic.
            "topic": lmqs[0],
            "queueId": "0",
            "maxMsgNums": str(batch),
            "invisibleTime": str(invisible_ms),
            "pollTime": str(poll_ms),
            "bornTime": str(int(time.time() * 1000)),
            "initMode": "1",
            "expType": "TAG",
            "exp": "*",
            "order": "true",
            "lmqs": ",".join(lmqs),
        }
        what = f"pop of {len(lmqs)} lite topics of {topic} from {broker_name}"
        unserved = f"{what}: the broker does not serve lite consumers (an rmq broker with enableLmq does)"
        try:
            popped = await self._pop_call(addr, fields, attempt_id, poll_ms + 3000, what, needs="lmqInfo")
        except ProxyError as e:
            if e.code == d.Code.TOPIC_NOT_FOUND:  # no LMQs there
                raise ProxyError(
                    d.Code.INTERNAL_SERVER_ERROR, f"{unserved}; it answered {e.message}"
                ) from None
            raise
        except KeyError:
            raise ProxyError(d.Code.INTERNAL_SERVER_ERROR, unserved) from None
        if popped is None:
            return []
        response, pop_time, invisible, revive_qid = popped
        info = response.ext_fields["lmqInfo"]
        where: list[tuple[str, int, int]] = []  # per record: lite topic, LMQ offset, deliveries before
        for entry in filter(None, info.split(";")):
            lmq, _, items = entry.partition(" ")
            lite = lmq.split("$", 2)[2]
            for item in items.split(","):
                offset, _, count = item.partition("/")
                where.append((lite, int(offset), int(count or 0)))
        messages = decode_messages(response.body or b"", broker_name)
        if len(where) != len(messages):
            log.warning("%s: %d messages, lmqInfo lists %d", what, len(messages), len(where))
        out = []
        for m, (lite, offset, count) in zip(messages, where, strict=False):
            m.queue_offset = offset  # the LMQ's offset, as Apache's proxy shows it
            m.reconsume_times = count
            handle = pop.Handle(
                0,
                pop_time,
                invisible,
                revive_qid,
                pop.NORMAL_TOPIC,
                broker_name,
                0,
                offset,
                m.commit_log_offset,
            )
            out.append((m, handle, lite))
        return out

    async def _pop_call(
        self,
        addr: str,
        fields: dict[str, str],
        attempt_id: str | None,
        timeout_ms: int,
        what: str,
        needs: str | None = None,
    ) -> tuple[RemotingCommand, int, int, int] | None:
        """POP_MESSAGE: the response with its pop time, invisible time and revive queue; None when nothing
        was found. KeyError when an answer (found or not) lacks the header ``needs``."""
        if attempt_id:
            fields["attemptId"] = attempt_id
        request = create_request(codes.POP_MESSAGE, fields, language=int(LanguageCode.JAVA))
        try:
            response = await self.remoting.invoke(addr, request, timeout_ms)
        except (RemotingError, OSError) as e:
            raise ProxyError(d.Code.PROXY_TIMEOUT, f"{what} ({addr}): {e}") from None
        answered = (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, pop.POLLING_TIMEOUT)
        if needs is not None and response.code in answered and needs not in response.ext_fields:
            raise KeyError(needs)
        if response.code in (
            ResponseCode.PULL_NOT_FOUND,
            pop.POLLING_TIMEOUT,
            pop.POLLING_FULL,
            ResponseCode.NO_MESSAGE,
        ):
            return None
        if response.code != ResponseCode.SUCCESS:
            raise from_remoting(response.code, response.remark, what)
        ext = response.ext_fields
        return (
            response,
            int(ext.get("popTime", "0")),
            int(ext.get("invisibleTime", fields["invisibleTime"])),
            int(ext.get("reviveQid", "0")),
        )

    async def lite_offsets(self, group: str, topic: str, lite_topic: str, option: d.OffsetOption) -> None:
        """Where ``group`` goes on in a lite topic it subscribes to, on every broker of ``topic`` (Apache's
        broker: MIN the first message, MAX after the last, OFFSET that offset, TAIL_N that many back from the
        group's committed offset when it has one; TIMESTAMP is not applied)."""
        lmq = lmq_name(topic, lite_topic)
        kind = option.WhichOneof("offset_type")
        view = await self.routes.view(topic)
        for broker_name, addr in view.masters().items():
            mq = MessageQueue(lmq, broker_name, 0)
            try:
                if kind == "policy" and option.policy == d.OffsetOption.Policy.LAST:
                    continue
                if kind == "policy" and option.policy == d.OffsetOption.Policy.MIN:
                    target = 0
                elif kind == "policy" and option.policy == d.OffsetOption.Policy.MAX:
                    target = await self.api.get_max_offset(addr, mq)
                elif kind == "offset":
                    target = max(0, option.offset)
                elif kind == "tail_n":
                    try:
                        committed = await self.api.query_consumer_offset(addr, group, mq)
                    except OffsetNotFoundError:
                        continue
                    target = max(0, committed - option.tail_n)
                else:
                    log.info(
                        "lite topic %s of group %s: offset option %s is not applied (as Apache's broker)",
                        lite_topic,
                        group,
                        kind,
                    )
                    return
                await self.api.update_consumer_offset(addr, group, mq, target)
                log.info(
                    "lite topic %s of group %s at %s starts at offset %d (%s)",
                    lite_topic,
                    group,
                    broker_name,
                    target,
                    kind,
                )
            except (MQBrokerError, RemotingError, OSError) as e:
                raise ProxyError(
                    d.Code.INTERNAL_SERVER_ERROR, f"offset of lite topic {lite_topic} at {broker_name}: {e}"
                ) from None

    async def ack(self, group: str, topic: str, handle: pop.Handle, lite_topic: str | None = None) -> None:
        addr = await self.addr_of(handle.broker_name, topic)
        fields = {
            "consumerGroup": group,
            "topic": lmq_name(topic, lite_topic)
            if lite_topic
            else pop.real_topic(topic, group, handle.retry),
            "queueId": str(handle.queue_id),
            "extraInfo": str(handle),
            "offset": str(handle.queue_offset),
        }
        await self._invoke_ok(addr, codes.ACK_MESSAGE, fields, f"ack at {handle.broker_name}")

    async def change_invisible(
        self, group: str, topic: str, handle: pop.Handle, invisible_ms: int, route_topic: str | None = None
    ) -> pop.Handle:
        addr = await self.addr_of(handle.broker_name, route_topic or topic)
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

    async def forward_to_dlq(
        self, group: str, topic: str, handle: pop.Handle, message_id: str, lite_topic: str | None = None
    ) -> None:
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
        await self.ack(group, topic, handle, lite_topic)
        log.info("message %s of %s (group %s) forwarded to the dead-letter queue", message_id, topic, group)

    async def group_config(self, group: str, topics: list[str]) -> GroupInfo:
        """The group's config on a broker of ``topics`` (RocketMQ's defaults when no broker has it)."""
        cached = self._group_info.get(group)
        if cached is not None and time.monotonic() - cached[1] < GROUP_CONFIG_TTL_S:
            return cached[0]
        value = GroupInfo()
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
                    attrs = config.get("attributes") or {}
                    value = GroupInfo(
                        int(config.get("retryMaxTimes", DEFAULT_RETRY_MAX_TIMES)),
                        bool(config.get("consumeMessageOrderly", False)),
                        True,
                        tuple(sorted((str(k), str(v)) for k, v in attrs.items()))
                        if isinstance(attrs, dict)
                        else (),
                    )
                break
            break
        if value.found:  # a group not there yet is looked for again at the next call
            self._group_info[group] = (value, time.monotonic())
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
