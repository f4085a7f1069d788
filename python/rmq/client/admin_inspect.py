"""The admin API's views of brokers and name servers beyond topics and groups (mixed into
:class:`rmq.client.Admin`): a broker's consume stats of every group (GET_BROKER_CONSUME_STATS, 317), its
producers (GET_ALL_PRODUCER_INFO, 328), a ConsumeQueue's units (QUERY_CONSUME_QUEUE, 321), its system topics
(305), its whole topic and subscription group tables, and the name servers' own config
(GET_NAMESRV_CONFIG 319 / UPDATE_NAMESRV_CONFIG 318). Answers of rmq and Apache RocketMQ brokers alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rmq.client.admin_types import mq_keyed
from rmq.client.errors import MQClientError
from rmq.client.instance import ClientInstance
from rmq.common.codes import RequestCode
from rmq.remoting import RemotingError
from rmq.remoting.command import RemotingCommand

__all__ = ["AdminInspectMixin", "BrokerConsumeRow"]


@dataclass(frozen=True, slots=True)
class BrokerConsumeRow:
    """One queue of one group's topic in ``brokerConsumeStats``."""

    topic: str
    group: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "group": self.group,
            "brokerName": self.broker_name,
            "queueId": self.queue_id,
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "diff": self.diff,
            "lastTimestamp": self.last_timestamp,
        }


def _properties(text: bytes | None) -> dict[str, str]:
    props: dict[str, str] = {}
    for line in (text or b"").decode("utf-8", "replace").splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "!")):
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


class AdminInspectMixin:
    timeout_ms: int

    async def _call(
        self,
        addr: str | None,
        code: int,
        fields: Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        language: int | None = None,
    ) -> RemotingCommand:
        raise NotImplementedError

    @staticmethod
    def _body(response: RemotingCommand) -> Any:
        raise NotImplementedError

    @property
    def instance(self) -> ClientInstance:
        raise NotImplementedError

    def _namesrv_addrs(self) -> list[str]:
        return list(self.instance.api.namesrv_addrs)

    # --- brokers ----------------------------------------------------------------------------------------

    async def broker_consume_stats(
        self, addr: str, *, order_only: bool = False
    ) -> tuple[list[BrokerConsumeRow], int]:
        """GET_BROKER_CONSUME_STATS (317): every queue of every group's topics on the broker (``order_only``:
        order topics only), and the broker's total of broker minus consumer offsets."""
        body = self._body(
            await self._call(
                addr, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "true" if order_only else "false"}
            )
        )
        rows = []
        for per_group in body.get("consumeStatsList") or ():
            for group, stats_list in per_group.items():
                for stats in stats_list or ():
                    for mq, w in mq_keyed(stats.get("offsetTable")).items():
                        rows.append(
                            BrokerConsumeRow(
                                mq.topic,
                                str(group),
                                mq.broker_name,
                                mq.queue_id,
                                int(w.get("brokerOffset", 0)),
                                int(w.get("consumerOffset", 0)),
                                int(w.get("lastTimestamp", 0)),
                            )
                        )
        rows.sort(key=lambda r: (r.topic, r.broker_name, r.queue_id, r.group))
        return rows, int(body.get("totalDiff", 0))

    async def producer_info(self, addr: str) -> dict[str, list[dict[str, Any]]]:
        """GET_ALL_PRODUCER_INFO (328): the broker's producer connections by group (``clientId``,
        ``remoteIP``, ``language``, ``version``, ``lastUpdateTimestamp``)."""
        data = self._body(await self._call(addr, RequestCode.GET_ALL_PRODUCER_INFO)).get("data") or {}
        return {str(g): [dict(p) for p in (items or ())] for g, items in sorted(data.items())}

    async def query_consume_queue(
        self, addr: str, topic: str, queue_id: int, index: int, count: int = 10, group: str | None = None
    ) -> tuple[dict[str, Any], str | None]:
        """QUERY_CONSUME_QUEUE (321): the queue's ``minQueueIndex`` / ``maxQueueIndex``, its units from
        ``index`` (``queueData``) and, with ``group``, its ``subscriptionData`` / ``filterData``; an index
        the broker does not hold answers no body and a remark (returned second)."""
        fields = {"topic": topic, "queueId": str(queue_id), "index": str(index), "count": str(count)}
        if group:
            fields["consumerGroup"] = group
        response = await self._call(addr, RequestCode.QUERY_CONSUME_QUEUE, fields)
        return self._body(response), response.remark

    async def system_topics(self, addr: str) -> list[str]:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305)."""
        body = self._body(await self._call(addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))
        return sorted(str(t) for t in body.get("topicList") or ())

    async def topic_configs(self, addr: str) -> dict[str, dict[str, Any]]:
        """GET_ALL_TOPIC_CONFIG (21): the broker's topic config table."""
        body = self._body(await self._call(addr, RequestCode.GET_ALL_TOPIC_CONFIG))
        return {str(k): dict(v) for k, v in (body.get("topicConfigTable") or {}).items()}

    async def subscription_group_configs(self, addr: str) -> dict[str, dict[str, Any]]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): the broker's subscription group table."""
        body = self._body(await self._call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        return {str(k): dict(v) for k, v in (body.get("subscriptionGroupTable") or {}).items()}

    # --- name servers -----------------------------------------------------------------------------------

    async def namesrv_config(self, addrs: list[str] | None = None) -> dict[str, dict[str, str]]:
        """GET_NAMESRV_CONFIG (319) of each name server (default: every one configured)."""
        out = {}
        for addr in addrs or self._namesrv_addrs():
            out[addr] = _properties((await self._call(addr, RequestCode.GET_NAMESRV_CONFIG)).body)
        return out

    async def update_namesrv_config(
        self, properties: Mapping[str, str], addrs: list[str] | None = None
    ) -> None:
        """UPDATE_NAMESRV_CONFIG (318) on each name server (default: every one configured); every one is
        asked, then the last refusal raises."""
        body = "".join(f"{k}={v}\n" for k, v in properties.items()).encode()
        refused: Exception | None = None
        for addr in addrs or self._namesrv_addrs():
            try:
                await self._call(addr, RequestCode.UPDATE_NAMESRV_CONFIG, None, body)
            except (MQClientError, RemotingError, OSError) as exc:  # the others are still asked (as mqadmin)
                refused = exc
        if refused is not None:
            raise refused

    async def put_kv_config(self, namespace: str, key: str, value: str) -> list[str]:
        """PUT_KV_CONFIG (100) on every name server; their addresses."""
        addrs = self._namesrv_addrs()
        for addr in addrs:
            await self._call(
                addr, RequestCode.PUT_KV_CONFIG, {"namespace": namespace, "key": key, "value": value}
            )
        return addrs

    async def get_kv_config(self, namespace: str, key: str) -> str:
        """GET_KV_CONFIG (101) from the name servers; a missing key raises
        :class:`~rmq.client.errors.OffsetNotFoundError` (22, QUERY_NOT_FOUND)."""
        response = await self._call(None, RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key})
        return response.ext_fields.get("value", "")

    async def delete_kv_config(self, namespace: str, key: str) -> list[str]:
        """DELETE_KV_CONFIG (102) on every name server; their addresses."""
        addrs = self._namesrv_addrs()
        for addr in addrs:
            await self._call(addr, RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})
        return addrs

    async def wipe_write_perm_of_broker(self, namesrv_addr: str, broker_name: str) -> int:
        """WIPE_WRITE_PERM_OF_BROKER (205) on one name server: the broker's queues lose write permission in
        its routes; how many topics changed."""
        response = await self._call(
            namesrv_addr, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": broker_name}
        )
        return int(response.ext_fields.get("wipeTopicCount") or 0)

    async def add_write_perm_of_broker(self, namesrv_addr: str, broker_name: str) -> int:
        """ADD_WRITE_PERM_OF_BROKER (327) on one name server: the broker's queues get write permission back
        in its routes; how many topics changed."""
        response = await self._call(
            namesrv_addr, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": broker_name}
        )
        return int(response.ext_fields.get("addTopicCount") or 0)
