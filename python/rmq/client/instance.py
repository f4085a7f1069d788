"""ClientInstance: what the producers and consumers of one client id share (``MQClientInstance.java``).

One instance per event loop and client id (``ip@pid`` by default, see :class:`ClientConfig`), obtained with
:func:`get_instance`. It owns:

* the connections (one :class:`RemotingClient`) and the request API (:class:`MQClientAPI`);
* the route cache: ``topic -> TopicRouteData`` and ``brokerName -> {brokerId: addr}``, refreshed from the
  name servers every 30 s for every topic a member uses, and on demand (:meth:`update_topic_route`);
* heartbeats to every broker of those routes every 30 s (masters only when no consumer is registered);
* the consumers' periodic work: offset persistence every 5 s, rebalance every 20 s and on
  NOTIFY_CONSUMER_IDS_CHANGED (:meth:`rebalance_immediately`);
* the handlers for broker -> client requests: NOTIFY_CONSUMER_IDS_CHANGED (40), CHECK_TRANSACTION_STATE
  (39, handed to the producer of the message's group), GET_CONSUMER_RUNNING_INFO (307),
  RESET_CONSUMER_CLIENT_OFFSET (220) and GET_CONSUMER_STATUS_FROM_CLIENT (221).

Producers and consumers register by group and unregister on shutdown (UNREGISTER_CLIENT to every broker);
the instance shuts itself down when the last one leaves.
"""

from __future__ import annotations

import asyncio
import logging
import random
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from rmq.client.api import MQClientAPI
from rmq.client.config import ClientConfig
from rmq.client.errors import MQClientError, NoRouteError, TopicNotExistError
from rmq.client.heartbeat import ConsumerData, HeartbeatData
from rmq.client.message import MessageExt, MessageQueue
from rmq.client.processors import ClientRemotingProcessor
from rmq.client.route import TopicPublishInfo, publish_info, subscribe_queues
from rmq.common.codes import (
    CLIENT_INNER_PRODUCER_GROUP,
    MASTER_ID,
)
from rmq.common.route import TopicRouteData
from rmq.common.service import PeriodicTask
from rmq.remoting import RemotingClient, RemotingError

__all__ = ["ClientInstance", "ConsumerMember", "ProducerMember", "get_instance"]

log = logging.getLogger(__name__)

_instances: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, ClientInstance]] = (
    weakref.WeakKeyDictionary()
)


class ProducerMember(Protocol):
    """What the instance needs from a producer."""

    group: str

    def publish_topics(self) -> Iterable[str]: ...
    def is_publish_topic_need_update(self, topic: str) -> bool: ...
    def update_publish_info(self, topic: str, info: TopicPublishInfo) -> None: ...
    def check_transaction_state(self, addr: str, msg: MessageExt, header: Mapping[str, str]) -> None: ...


class ConsumerMember(Protocol):
    """What the instance needs from a consumer (push or lite pull)."""

    group: str

    def consumer_data(self) -> ConsumerData: ...
    def subscribed_topics(self) -> Iterable[str]: ...
    def is_subscribe_topic_need_update(self, topic: str) -> bool: ...
    def update_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None: ...
    async def do_rebalance(self) -> None: ...
    async def persist_consumer_offset(self) -> None: ...
    def running_info(self) -> dict[str, Any]: ...
    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None: ...
    def consume_status(self, topic: str) -> dict[MessageQueue, int]: ...


def get_instance(config: ClientConfig) -> ClientInstance:
    """The running loop's instance for ``config.client_id()``, created on first use."""
    loop = asyncio.get_running_loop()
    by_id = _instances.setdefault(loop, {})
    cid = config.client_id()
    instance = by_id.get(cid)
    if instance is not None and not instance.is_shut_down:
        if instance.config.credentials_id() != config.credentials_id():
            raise MQClientError(
                f"client id {cid} already runs with other ACL credentials or TLS settings; give this client "
                "its own instance_name",
                10004,
            )
    if instance is None or instance.is_shut_down:
        instance = ClientInstance(config, cid)
        by_id[cid] = instance
    return instance


def _route_key(route: TopicRouteData) -> Any:
    d = route.to_dict()
    d["queueDatas"] = sorted(d["queueDatas"], key=lambda q: q["brokerName"])
    d["brokerDatas"] = sorted(d["brokerDatas"], key=lambda b: b["brokerName"])
    return d


class ClientInstance:
    def __init__(self, config: ClientConfig, client_id: str | None = None) -> None:
        self.config = config
        self.client_id = client_id or config.client_id()
        self.remoting = RemotingClient(
            connect_timeout_ms=config.mq_client_api_timeout_ms,
            rpc_hook=config.signer(),
            tls=config.tls_settings(),
        )
        self.api = MQClientAPI(self.remoting, config.namesrv_list(), config.language)
        self.timeout_ms = config.mq_client_api_timeout_ms
        self.route_table: dict[str, TopicRouteData] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self.broker_version_table: dict[str, dict[str, int]] = {}
        self.producers: dict[str, ProducerMember] = {}
        self.consumers: dict[str, ConsumerMember] = {}
        self._route_lock = asyncio.Lock()
        self._heartbeat_lock = asyncio.Lock()
        self._started = False
        self.is_shut_down = False
        self._inner_producer: Any = None
        self._background: set[asyncio.Task[Any]] = set()
        self._tasks = [
            PeriodicTask(
                "client-route",
                config.poll_name_server_interval_ms / 1000,
                self.update_all_routes,
                initial_delay_s=0.01,
            ),
            PeriodicTask(
                "client-heartbeat",
                config.heartbeat_broker_interval_ms / 1000,
                self._heartbeat_tick,
                initial_delay_s=1,
            ),
            PeriodicTask(
                "client-persist-offset",
                config.persist_consumer_offset_interval_ms / 1000,
                self.persist_all_consumer_offsets,
                initial_delay_s=10,
            ),
        ]
        self._rebalance = PeriodicTask(
            "client-rebalance", config.rebalance_interval_ms / 1000, self.rebalance_all
        )
        ClientRemotingProcessor(self).register(self.remoting)

    # --- membership and lifecycle -----------------------------------------------------------------------

    def register_producer(self, producer: ProducerMember) -> None:
        if producer.group in self.producers:
            raise MQClientError(
                f"The producer group[{producer.group}] has been created before, specify another name"
            )
        self.producers[producer.group] = producer

    def register_consumer(self, consumer: ConsumerMember) -> None:
        if consumer.group in self.consumers:
            raise MQClientError(
                f"The consumer group[{consumer.group}] has been created before, specify another name"
            )
        self.consumers[consumer.group] = consumer

    def start(self) -> None:
        if self.is_shut_down:
            raise MQClientError(f"client instance {self.client_id} is shut down")
        if self._started:
            return
        self._started = True
        for task in self._tasks:
            task.start()
        self._rebalance.start()
        log.info("client instance %s started (name servers %s)", self.client_id, self.config.namesrv_addr)

    async def unregister_producer(self, group: str) -> None:
        if self.producers.pop(group, None) is not None:
            await self._unregister_client(producer_group=group)
        await self._shutdown_if_unused()

    async def unregister_consumer(self, group: str) -> None:
        if self.consumers.pop(group, None) is not None:
            await self._unregister_client(consumer_group=group)
        await self._shutdown_if_unused()

    async def _unregister_client(
        self, *, producer_group: str | None = None, consumer_group: str | None = None
    ) -> None:
        addrs = {addr for addrs in self.broker_addr_table.values() for addr in addrs.values()}

        async def one(addr: str) -> None:
            try:
                await self.api.unregister_client(
                    addr,
                    self.client_id,
                    producer_group=producer_group,
                    consumer_group=consumer_group,
                    timeout_ms=self.timeout_ms,
                )
            except (RemotingError, MQClientError) as exc:
                log.warning("unregister client %s from %s failed: %s", self.client_id, addr, exc)

        await asyncio.gather(*(one(a) for a in addrs))

    async def _shutdown_if_unused(self) -> None:
        inner = self._inner_producer
        others = [g for g in self.producers if inner is None or g != inner.group]
        if self.consumers or others:
            return
        if inner is not None:
            self._inner_producer = None
            await inner.shutdown()  # unregisters itself and calls back here
            return
        await self.shutdown()

    async def shutdown(self) -> None:
        if self.is_shut_down:
            return
        self.is_shut_down = True
        for task in [*self._tasks, self._rebalance]:
            await task.stop()
        for bg in list(self._background):
            bg.cancel()
        await self.remoting.close()
        by_id = _instances.get(asyncio.get_running_loop())
        if by_id is not None and by_id.get(self.client_id) is self:
            del by_id[self.client_id]
        log.info("client instance %s shut down", self.client_id)

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Run ``coro`` in the background, kept referenced until done, cancelled at shutdown."""
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def inner_producer(self) -> Any:
        """The instance's own producer (group ``CLIENT_INNER_PRODUCER``), for consumers' retry fallbacks."""
        if self._inner_producer is None:
            from rmq.client.producer.producer import Producer

            producer = Producer(CLIENT_INNER_PRODUCER_GROUP, client_config=self.config)
            self._inner_producer = producer
            await producer.start()
        return self._inner_producer

    # --- routes -----------------------------------------------------------------------------------------

    def _topics_in_use(self) -> set[str]:
        topics: set[str] = set()
        for c in list(self.consumers.values()):
            topics.update(c.subscribed_topics())
        for p in list(self.producers.values()):
            topics.update(p.publish_topics())
        return topics

    async def update_all_routes(self) -> None:
        for topic in self._topics_in_use():
            await self.update_topic_route(topic)

    def _need_update(self, topic: str) -> bool:
        return any(p.is_publish_topic_need_update(topic) for p in list(self.producers.values())) or any(
            c.is_subscribe_topic_need_update(topic) for c in list(self.consumers.values())
        )

    async def update_topic_route(
        self, topic: str, *, default_topic: str | None = None, default_queue_nums: int = 4
    ) -> bool:
        """Fetch ``topic``'s route and push it to every member if it changed; ``False`` if there is none.

        With ``default_topic`` (a producer sending to a topic the name server does not know) the route of
        ``default_topic`` (``TBW102``) is used with each queue count capped at ``default_queue_nums``.
        """
        async with self._route_lock:
            try:
                if default_topic is not None:
                    route = await self.api.get_route(default_topic, self.timeout_ms)
                    for qd in route.queue_datas:
                        n = min(default_queue_nums, qd.read_queue_nums)
                        qd.read_queue_nums = qd.write_queue_nums = n
                else:
                    route = await self.api.get_route(topic, self.timeout_ms)
            except TopicNotExistError:
                log.debug("no route for topic %s in the name server", default_topic or topic)
                return False
            except (RemotingError, MQClientError, ValueError) as exc:
                log.warning("updating the route of %s failed: %s", topic, exc)
                return False
            old = self.route_table.get(topic)
            if old is not None and _route_key(old) == _route_key(route) and not self._need_update(topic):
                return True
            for bd in route.broker_datas:
                self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)
            info = publish_info(topic, route)
            for p in list(self.producers.values()):
                p.update_publish_info(topic, info)
            mqs = subscribe_queues(topic, route)
            for c in list(self.consumers.values()):
                c.update_subscribe_info(topic, mqs)
            self.route_table[topic] = route
            log.info("route of %s updated: %s", topic, route.to_dict())
            return True

    def find_broker_addr_in_publish(self, broker_name: str) -> str | None:
        addrs = self.broker_addr_table.get(broker_name)
        return addrs.get(MASTER_ID) if addrs else None

    def find_broker_addr_in_subscribe(
        self, broker_name: str, broker_id: int = MASTER_ID, only_this_broker: bool = False
    ) -> tuple[str, bool] | None:
        """``(addr, is_slave)`` of ``broker_id`` of ``broker_name`` (``findBrokerAddressInSubscribe``)."""
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        slave = broker_id != MASTER_ID
        if addr is None and slave:
            addr = addrs.get(broker_id + 1)
        if addr is None and not only_this_broker:
            bid, addr = next(iter(addrs.items()))
            slave = bid != MASTER_ID
        return None if addr is None else (addr, slave)

    async def master_addr(self, mq: MessageQueue) -> str:
        """The master of ``mq``'s broker, refreshing the route once if it is unknown."""
        addr = self.find_broker_addr_in_publish(mq.broker_name)
        if addr is None:
            await self.update_topic_route(mq.topic)
            addr = self.find_broker_addr_in_publish(mq.broker_name)
        if addr is None:
            raise NoRouteError(f"The broker[{mq.broker_name}] not exist", 10003)
        return addr

    def find_broker_addr_by_topic(self, topic: str) -> str | None:
        route = self.route_table.get(topic)
        if route is None or not route.broker_datas:
            return None
        bd = random.choice(route.broker_datas)
        addr = bd.broker_addrs.get(MASTER_ID)
        if addr is None and bd.broker_addrs:
            addr = random.choice(list(bd.broker_addrs.values()))
        return addr

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str] | None:
        addr = self.find_broker_addr_by_topic(topic)
        if addr is None:
            await self.update_topic_route(topic)
            addr = self.find_broker_addr_by_topic(topic)
        if addr is None:
            return None
        try:
            return await self.api.get_consumer_id_list(addr, group, self.timeout_ms)
        except (RemotingError, MQClientError) as exc:
            log.warning("getConsumerIdListByGroup of %s from %s failed: %s", group, addr, exc)
            return None

    async def fetch_subscribe_message_queues(self, topic: str) -> set[MessageQueue]:
        """The readable queues of ``topic`` straight from the name server."""
        route = await self.api.get_route(topic, self.timeout_ms)
        mqs = subscribe_queues(topic, route)
        if not mqs:
            raise NoRouteError(f"Can not find Message Queue for this topic, {topic}")
        return mqs

    def broker_version(self, broker_name: str, addr: str) -> int:
        return self.broker_version_table.get(broker_name, {}).get(addr, 0)

    # --- heartbeat --------------------------------------------------------------------------------------

    def _clean_offline_brokers(self) -> None:
        live = {
            (bd.broker_name, addr)
            for route in self.route_table.values()
            for bd in route.broker_datas
            for addr in bd.broker_addrs.values()
        }
        for name in list(self.broker_addr_table):
            addrs = {bid: a for bid, a in self.broker_addr_table[name].items() if (name, a) in live}
            if addrs:
                self.broker_addr_table[name] = addrs
            else:
                del self.broker_addr_table[name]

    async def _heartbeat_tick(self) -> None:
        self._clean_offline_brokers()
        await self.send_heartbeat_to_all_brokers()

    def heartbeat_data(self) -> HeartbeatData:
        groups = list(self.producers)
        if CLIENT_INNER_PRODUCER_GROUP not in groups:
            groups.append(CLIENT_INNER_PRODUCER_GROUP)  # Java clients always list their inner producer
        return HeartbeatData(
            self.client_id, groups, [c.consumer_data() for c in list(self.consumers.values())]
        )

    async def send_heartbeat_to_all_brokers(self) -> None:
        async with self._heartbeat_lock:
            data = self.heartbeat_data()
            targets = [
                (name, addr)
                for name, addrs in list(self.broker_addr_table.items())
                for bid, addr in addrs.items()
                if data.consumers or bid == MASTER_ID
            ]

            async def one(name: str, addr: str) -> None:
                try:
                    version = await self.api.heartbeat(addr, data, self.timeout_ms)
                except (RemotingError, MQClientError) as exc:
                    log.warning("heartbeat to %s (%s) failed: %s", addr, name, exc)
                    return
                self.broker_version_table.setdefault(name, {})[addr] = version

            await asyncio.gather(*(one(n, a) for n, a in targets))

    # --- consumers' periodic work -----------------------------------------------------------------------

    async def persist_all_consumer_offsets(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.persist_consumer_offset()
            except Exception:
                log.exception("persisting the offsets of %s failed", consumer.group)

    async def rebalance_all(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.do_rebalance()
            except Exception:
                log.exception("rebalance of %s failed", consumer.group)

    def rebalance_immediately(self) -> None:
        self._rebalance.wakeup()
