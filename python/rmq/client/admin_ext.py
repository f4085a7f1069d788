"""The admin API (Java's ``DefaultMQAdminExt``): topics, groups, offsets, brokers, message lookup.

::

    async with Admin(namesrv_addr="127.0.0.1:9876") as admin:
        await admin.create_topic_in_cluster("DefaultCluster", TopicConfig("TopicA", 4, 4))
        stats = await admin.consume_stats("cg")            # lag per queue: stats.rows()[i].diff
        table, via_consumers = await admin.reset_offset_by_time("TopicA", "cg", ts_ms)

One implementation behind ``rmqadmin`` (:mod:`rmq.admin`) and Python callers alike (blocking twin:
:class:`rmq.client.sync.Admin`). It speaks the requests Apache's ``mqadmin`` sends, so it works against rmq
and Apache RocketMQ brokers. It keeps a private, never-started client instance (no heartbeat: the broker never
sees the admin as a producer or consumer); ``send_message`` starts a producer for the one send.

Errors: a broker's refusal raises its :class:`~rmq.client.errors.MQBrokerError` subclass; something asked
for that does not exist (a cluster, a group's consume stats, a message) raises :class:`AdminNotFoundError`
or :class:`~rmq.client.errors.NoMessageError`; transport errors pass through.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Mapping
from typing import Any, Final

from rmq.client.admin import MessageQueryMixin
from rmq.client.admin_acl import AclAdminMixin
from rmq.client.admin_inspect import AdminInspectMixin
from rmq.client.admin_messages import AdminNotFoundError, MessageReadMixin
from rmq.client.admin_types import (
    BrokerStatsData,
    Connection,
    ConsumerConnection,
    ConsumeStats,
    RollbackStats,
    SubscriptionGroupConfig,
    TopicOffset,
    mq_keyed,
)
from rmq.client.config import ClientConfig
from rmq.client.errors import (
    ConsumerNotOnlineError,
    MQBrokerError,
    MQClientError,
    SystemError_,
    TopicNotExistError,
    broker_error,
)
from rmq.client.instance import ClientInstance
from rmq.client.message import MessageQueue
from rmq.common import fastjson
from rmq.common.codes import MASTER_ID, LanguageCode, RequestCode, ResponseCode
from rmq.common.route import ClusterInfo, TopicConfig, TopicRouteData
from rmq.remoting import RemotingCommand
from rmq.remoting.headers import bool_text

__all__ = ["Admin", "AdminNotFoundError", "BrokerRef", "StatsRow"]

log = logging.getLogger(__name__)

RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
TOPIC_PUT_NUMS: Final = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS: Final = "GROUP_GET_NUMS"
_SUCCESS: Final = int(ResponseCode.SUCCESS)
_ids = itertools.count()


class BrokerRef(tuple[str, str, str]):
    """``(cluster, broker_name, master address)``."""

    @property
    def cluster(self) -> str:
        return self[0]

    @property
    def broker_name(self) -> str:
        return self[1]

    @property
    def addr(self) -> str:
        return self[2]


class StatsRow(tuple[str, str, int, float, float | None, int, int | None]):
    """One ``statsAll`` row: topic, group ('' if none), accumulation, in TPS, out TPS, in and out messages
    of the last 24 hours (out TPS and out count ``None`` when no group consumes the topic)."""

    def to_dict(self) -> dict[str, Any]:
        keys = ("topic", "group", "accumulation", "inTps", "outTps", "inMsg24Hour", "outMsg24Hour")
        return dict(zip(keys, self, strict=True))


class Admin(AdminInspectMixin, MessageReadMixin, MessageQueryMixin, AclAdminMixin):
    def __init__(
        self,
        *,
        namesrv_addr: str | None = None,
        client_config: ClientConfig | None = None,
        timeout_ms: int = 5000,
    ) -> None:
        self.config = ClientConfig.resolve(
            client_config, namesrv_addr, f"rmqadmin-{os.getpid()}-{next(_ids)}"
        )
        self.config.mq_client_api_timeout_ms = timeout_ms
        self.timeout_ms = timeout_ms
        self._instance: ClientInstance | None = None

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None:
            raise MQClientError("the admin is not started")
        return self._instance

    async def start(self) -> None:
        if self._instance is None:
            self._instance = ClientInstance(self.config)  # never started: no heartbeat, no timers

    async def shutdown(self) -> None:
        if self._instance is not None:
            await self._instance.shutdown()
            self._instance = None

    async def __aenter__(self) -> Admin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # --- plumbing ---------------------------------------------------------------------------------------

    async def _call(
        self,
        addr: str | None,
        code: int,
        fields: Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        language: int | None = None,
    ) -> RemotingCommand:
        """One request to ``addr`` (``None``: the name servers); a non-success answer raises."""
        api = self.instance.api
        request = api.request(code, dict(fields) if fields else None, body)
        if language is not None:
            request.language = language
        if addr is None:
            response = await api.invoke_namesrv(request, self.timeout_ms)
        else:
            response = await api.invoke(addr, request, self.timeout_ms)
        if response.code != _SUCCESS:
            raise broker_error(response.code, response.remark, addr)
        return response

    @staticmethod
    def _body(response: RemotingCommand) -> Any:
        return fastjson.loads(response.body) if response.body else {}

    # --- cluster and brokers ----------------------------------------------------------------------------

    async def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO (106) from the name server."""
        return ClusterInfo.from_json(
            (await self._call(None, RequestCode.GET_BROKER_CLUSTER_INFO)).body or b"{}"
        )

    async def masters(self, cluster: str | None = None) -> list[BrokerRef]:
        """The master of every broker (of ``cluster``), ordered by cluster and broker name."""
        info = await self.cluster_info()
        if cluster is not None and cluster not in info.cluster_addr_table:
            raise AdminNotFoundError(
                f"cluster {cluster!r} not found (clusters: {sorted(info.cluster_addr_table)})"
            )
        out = []
        for name_of_cluster, names in sorted(info.cluster_addr_table.items()):
            if cluster is not None and name_of_cluster != cluster:
                continue
            for name in sorted(names):
                bd = info.broker_addr_table.get(name)
                addr = bd.master_addr() if bd is not None else None
                if addr is not None:
                    out.append(BrokerRef((name_of_cluster, name, addr)))
        return out

    async def broker_runtime_info(self, addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO (28): the broker's ``KVTable``."""
        body = self._body(await self._call(addr, RequestCode.GET_BROKER_RUNTIME_INFO))
        return {str(k): str(v) for k, v in (body.get("table") or {}).items()}

    async def broker_config(self, addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG (26): the broker's properties."""
        text = (await self._call(addr, RequestCode.GET_BROKER_CONFIG)).body or b""
        props: dict[str, str] = {}
        for line in text.decode("utf-8", "replace").splitlines():
            if "=" in line and not line.lstrip().startswith("#"):
                key, _, value = line.partition("=")
                props[key.strip()] = value.strip()
        return props

    async def update_broker_config(self, addr: str, properties: Mapping[str, str]) -> None:
        """UPDATE_BROKER_CONFIG (25)."""
        body = "".join(f"{k}={v}\n" for k, v in properties.items()).encode()
        await self._call(addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)

    async def clean_expired_consume_queue(self, addr: str) -> None:
        """CLEAN_EXPIRED_CONSUMEQUEUE (306): the broker removes the ConsumeQueues whose messages are all
        deleted."""
        await self._call(addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)

    async def clean_unused_topic(self, addr: str) -> None:
        """CLEAN_UNUSED_TOPIC (316): the broker removes the ConsumeQueues of topics it has no config for."""
        await self._call(addr, RequestCode.CLEAN_UNUSED_TOPIC)

    async def delete_expired_commit_log(self, addr: str) -> None:
        """DELETE_EXPIRED_COMMITLOG (329): the broker's next retention rounds delete expired CommitLog files
        whatever the hour."""
        await self._call(addr, RequestCode.DELETE_EXPIRED_COMMITLOG)

    async def view_broker_stats(self, addr: str, name: str, key: str) -> BrokerStatsData:
        """VIEW_BROKER_STATS_DATA (315): ``TOPIC_PUT_NUMS`` of a topic, ``GROUP_GET_NUMS`` of topic@group."""
        response = await self._call(
            addr, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key}
        )
        return BrokerStatsData.from_body(self._body(response))

    # --- topics -----------------------------------------------------------------------------------------

    async def topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206), sorted."""
        body = self._body(await self._call(None, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        return sorted(str(t) for t in body.get("topicList") or ())

    async def topic_route(self, topic: str, namesrv_addr: str | None = None) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC (105) from the name servers (or the one at ``namesrv_addr``);
        :class:`TopicNotExistError` for an unknown topic."""
        if namesrv_addr is None:
            return await self.instance.api.get_route(topic, self.timeout_ms)
        response = await self._call(namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        return TopicRouteData.from_json(response.body or b"{}")

    async def _route_masters(self, topic: str) -> list[tuple[str, str]]:
        route = await self.topic_route(topic)
        out = []
        for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
            addr = bd.broker_addrs.get(MASTER_ID)
            if addr is not None:
                out.append((bd.broker_name, addr))
        return out

    async def topic_stats(self, topic: str) -> list[TopicOffset]:
        """GET_TOPIC_STATS_INFO (202) on every master of the topic: min/max offset per queue."""
        rows: list[TopicOffset] = []
        for _, addr in await self._route_masters(topic):
            body = self._body(await self._call(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}))
            rows += TopicOffset.table(body)
        return sorted(rows, key=lambda r: r.mq)

    async def create_topic(self, addr: str, config: TopicConfig, attributes: str | None = None) -> None:
        """UPDATE_AND_CREATE_TOPIC (17) on one broker; `attributes`: 5.x's ``+key=value,-key`` changes
        (default: the config's attributes)."""
        await self.instance.api.create_topic(addr, config, timeout_ms=self.timeout_ms, attributes=attributes)

    async def create_topic_in_cluster(
        self, cluster: str, config: TopicConfig, attributes: str | None = None
    ) -> list[str]:
        """The topic on every master of ``cluster``; their addresses."""
        addrs = [b.addr for b in await self.masters(cluster)]
        for addr in addrs:
            await self.create_topic(addr, config, attributes)
        return addrs

    async def delete_topic(self, topic: str, cluster: str) -> list[str]:
        """DELETE_TOPIC_IN_BROKER (215) on every master of ``cluster``, then DELETE_TOPIC_IN_NAMESRV (216) on
        every name server. The broker addresses."""
        addrs = [b.addr for b in await self.masters(cluster)]
        for addr in addrs:
            await self._call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        for ns in self.config.namesrv_list():
            await self._call(ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})
        return addrs

    async def topic_consumed_by(self, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO (300) on the topic's masters: the groups that consume it."""
        groups: set[str] = set()
        for _, addr in await self._route_masters(topic):
            body = self._body(
                await self._call(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
            )
            groups |= {str(g) for g in body.get("groupList") or ()}
        return sorted(groups)

    # --- subscription groups ----------------------------------------------------------------------------

    async def create_subscription_group(self, addr: str, config: SubscriptionGroupConfig) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) on one broker."""
        body = fastjson.dumps(config.to_dict())
        await self._call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)

    async def delete_subscription_group(self, addr: str, group: str, *, remove_offset: bool = False) -> None:
        """DELETE_SUBSCRIPTIONGROUP (207) on one broker (and its offsets with ``remove_offset``)."""
        fields = {"groupName": group, "removeOffset": bool_text(remove_offset)}
        await self._call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, fields)

    async def subscription_groups(self, addr: str) -> list[str]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) on one broker: the names of its subscription groups."""
        body = self._body(await self._call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        return sorted(str(g) for g in body.get("subscriptionGroupTable") or {})

    async def _group_brokers(self, group: str) -> list[tuple[str, str]]:
        """The masters that serve ``group``: its retry topic's route, else every master."""
        try:
            return await self._route_masters(RETRY_GROUP_TOPIC_PREFIX + group)
        except TopicNotExistError:
            return [(b.broker_name, b.addr) for b in await self.masters()]

    async def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """GET_CONSUME_STATS (208) on the group's brokers, merged: broker and consumer offset per queue.

        :class:`AdminNotFoundError` when no broker has an offset of the group (of ``topic``)."""
        stats = ConsumeStats()
        fields = {"consumerGroup": group}
        if topic is not None:
            fields["topic"] = topic
        for _, addr in await self._group_brokers(group):
            stats.merge_body(self._body(await self._call(addr, RequestCode.GET_CONSUME_STATS, fields)))
        if not stats.offsets:
            what = f" of topic {topic}" if topic else ""
            raise AdminNotFoundError(f"no consume stats of group {group}{what}: it has consumed nothing")
        return stats

    async def consumer_connection(self, group: str, addr: str | None = None) -> ConsumerConnection:
        """GET_CONSUMER_CONNECTION_LIST (203): the first broker of the group (or ``addr``) that knows its
        clients; :class:`ConsumerNotOnlineError` (206) when none does."""
        last: MQClientError | None = None
        targets = [addr] if addr else [a for _, a in await self._group_brokers(group)]
        for target in targets:
            try:
                response = await self._call(
                    target, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}
                )
            except ConsumerNotOnlineError as exc:
                last = exc
                continue
            return ConsumerConnection.from_body(self._body(response))
        raise last or broker_error(
            int(ResponseCode.CONSUMER_NOT_ONLINE), f"the consumer group[{group}] not online"
        )

    async def consumer_running_info(
        self, group: str, client_id: str, *, jstack: bool = False
    ) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO (307), which a broker of the group forwards to the client: its
        properties, subscriptions and ``mqTable`` (keyed by :class:`MessageQueue` here: the queues it
        consumes)."""
        fields = {"consumerGroup": group, "clientId": client_id, "jstackEnable": bool_text(jstack)}
        last: MQClientError | None = None
        for _, addr in await self._group_brokers(group):
            try:
                response = await self._call(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, fields)
            except MQBrokerError as exc:
                last = exc
                continue
            body = dict(self._body(response))
            body["mqTable"] = mq_keyed(body.get("mqTable"))
            return body
        raise last or AdminNotFoundError(f"no broker serves group {group}")

    async def queue_allocation(self, group: str) -> dict[MessageQueue, str]:
        """Which client IP consumes each queue of ``group`` (from each online client's running info)."""
        out: dict[MessageQueue, str] = {}
        for conn in (await self.consumer_connection(group)).connections:
            info = await self.consumer_running_info(group, conn.client_id)
            for mq in info["mqTable"]:
                out[mq] = conn.client_id.split("@", 1)[0]
        return out

    async def producer_connection(self, group: str, topic: str) -> list[Connection]:
        """GET_PRODUCER_CONNECTION_LIST (204) on the topic's masters: the group's producer clients (none: an
        empty list). Apache's broker answers 1 "the producer group[...] not exist" for a group without
        producers, rmq an empty set; both mean none here."""
        seen: dict[str, Connection] = {}
        for _, addr in await self._route_masters(topic):
            try:
                response = await self._call(
                    addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group}
                )
            except SystemError_ as exc:
                if "not exist" not in exc.remark:
                    raise
                continue
            body = self._body(response)
            for c in body.get("connectionSet") or ():
                conn = Connection.from_dict(c)
                seen.setdefault(conn.client_id, conn)
        return sorted(seen.values(), key=lambda c: c.client_id)

    # --- offsets ----------------------------------------------------------------------------------------

    async def reset_offset_by_time(
        self,
        topic: str,
        group: str,
        timestamp_ms: int,
        *,
        force: bool = True,
        cplus: bool = False,
        rollback: list[RollbackStats] | None = None,
    ) -> tuple[dict[MessageQueue, int], bool]:
        """Move ``group``'s offsets of ``topic`` to the first message stored at or after ``timestamp_ms``
        (``-1``: the end). ``force=False`` only moves offsets back.

        INVOKE_BROKER_TO_RESET_OFFSET (222) on every master: the brokers tell the online consumers. With no
        consumer online (206) the offsets are set in the brokers instead (offset by time, then
        UPDATE_CONSUMER_OFFSET per queue), as ``mqadmin`` does; then each queue's :class:`RollbackStats` is
        appended to ``rollback`` if given. Returns the offsets and whether online consumers were told."""
        fields = {"topic": topic, "group": group, "timestamp": str(timestamp_ms), "isForce": bool_text(force)}
        language = LanguageCode.CPP if cplus else None
        table: dict[MessageQueue, int] = {}
        masters = await self._route_masters(topic)
        try:
            for _, addr in masters:
                response = await self._call(
                    addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields, language=language
                )
                table.update(
                    {mq: int(v) for mq, v in mq_keyed(self._body(response).get("offsetTable")).items()}
                )
            return table, True
        except ConsumerNotOnlineError:
            log.info("reset offset of %s: no consumer online, setting the offsets in the brokers", group)
        api = self.instance.api
        for broker_name, addr in masters:
            for row in await self.topic_stats_of_broker(addr, topic):
                mq = MessageQueue(topic, broker_name, row.mq.queue_id)
                try:
                    committed = await api.query_consumer_offset(addr, group, mq, self.timeout_ms)
                except MQClientError:
                    committed = -1
                if timestamp_ms == -1:
                    target = row.max_offset
                else:
                    target = await api.search_offset(addr, mq, timestamp_ms, self.timeout_ms)
                if force or committed < 0 or target < committed:
                    await api.update_consumer_offset(addr, group, mq, target, timeout_ms=self.timeout_ms)
                    table[mq] = target
                else:
                    table[mq] = committed
                if rollback is not None:
                    rollback.append(
                        RollbackStats(broker_name, mq.queue_id, row.max_offset, committed, target, table[mq])
                    )
        return table, False

    async def topic_stats_of_broker(self, addr: str, topic: str) -> list[TopicOffset]:
        body = self._body(await self._call(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}))
        return TopicOffset.table(body)

    # --- statistics -------------------------------------------------------------------------------------

    async def stats_all(self, *, topic: str | None = None, active_only: bool = False) -> list[StatsRow]:
        """``mqadmin statsAll``: per topic (and consuming group) the backlog, the rates of the last minute and
        the counts of the last 24 hours, from VIEW_BROKER_STATS_DATA and GET_CONSUME_STATS."""
        topics = [topic] if topic else await self.topic_list()
        rows: list[StatsRow] = []
        for t in topics:
            if t.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
                continue
            try:
                rows += await self._stats_of_topic(t, active_only)
            except (MQClientError, OSError, TimeoutError) as exc:
                if topic:
                    raise
                log.debug("statsAll: topic %s skipped: %s", t, exc)
        return rows

    async def _stats_of_topic(self, topic: str, active_only: bool) -> list[StatsRow]:
        masters = await self._route_masters(topic)
        in_tps, in_count = 0.0, 0
        for _, addr in masters:
            try:
                data = await self.view_broker_stats(addr, TOPIC_PUT_NUMS, topic)
            except MQClientError:
                continue  # no stats of the topic on this broker yet
            in_tps += data.minute.tps
            in_count += data.sum_24h()
        groups = await self.topic_consumed_by(topic)
        rows = []
        for group in groups:
            out_tps, out_count = 0.0, 0
            for _, addr in masters:
                try:
                    data = await self.view_broker_stats(addr, GROUP_GET_NUMS, f"{topic}@{group}")
                except MQClientError:
                    continue
                out_tps += data.minute.tps
                out_count += data.sum_24h()
            try:
                backlog = max((await self.consume_stats(group, topic)).diff_total, 0)
            except MQClientError:
                backlog = 0
            if not active_only or in_count > 0 or out_count > 0:
                rows.append(StatsRow((topic, group, backlog, in_tps, out_tps, in_count, out_count)))
        if not groups and (not active_only or in_count > 0):
            rows.append(StatsRow((topic, "", 0, in_tps, None, in_count, None)))
        return rows
