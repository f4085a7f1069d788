"""The name server's route tables, no I/O (Java ``RouteInfoManager`` of 4.9.8, REMOTING.md §3.5, §7.8).

Tables::

    topic_queue_table    topic       -> {brokerName: QueueData}
    broker_addr_table    brokerName  -> BrokerData (cluster, {brokerId: addr})
    cluster_addr_table   clusterName -> {brokerName}
    broker_live_table    brokerAddr  -> BrokerLiveInfo (last update ms, data version, channel id, HA addr)
    filter_server_table  brokerAddr  -> [filter server addr]

Semantics kept from Java:

* a master (brokerId 0) re-registering with an unchanged data version does not rewrite its queue data (so a
  topic deleted on the name server stays deleted until the broker's topic table changes);
* a slave's registration never touches queue data; it learns its master's address and HA address;
* the same ``ip:port`` registered under a new brokerId (slave promoted to master) replaces the old id;
* removing a broker address (unregister, 120 s silence, connection closed) removes the broker name -- with its
  queue data and, if it was the last one, its cluster entry -- only when no address of that name is left.

Differences: a closed connection removes every broker registered over it (Java only the first it finds), and
there is no remote-address fallback. The clock is injectable (``clock() -> ms``) for tests.

Takeover protection (rmq only; off with ``broker_takeover_allowed=True``, Java's behaviour): a registration
that would move a brokerName/brokerId to another ``brokerAddr`` while the address registered there is live
(heard within ``broker_expiry_ms``) raises :class:`RegistrationRefused`, and so does an unregister of a live
registration sent over another connection than the one it was registered over (else anyone could
unregister a broker, then take its name). A broker re-registering its own address is always accepted, from
any connection (NAT); a master and its slaves differ by brokerId. The old registration ends -- and the name is
free -- when its broker unregisters, when the connection it registered over closes (a killed broker's
does at once) or after ``broker_expiry_ms`` of silence.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from rmq.common.codes import MASTER_ID, PermName, TopicSysFlag
from rmq.common.route import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)

__all__ = [
    "DEFAULT_BROKER_EXPIRY_MS",
    "BrokerLiveInfo",
    "RegisterBrokerResult",
    "RegistrationRefused",
    "RouteInfoManager",
]

DEFAULT_BROKER_EXPIRY_MS: Final = 120_000


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_ms: int
    data_version: DataVersion
    channel_id: int | None
    ha_server_addr: str | None


@dataclass(slots=True)
class RegisterBrokerResult:
    ha_server_addr: str | None = None
    master_addr: str | None = None


class RegistrationRefused(Exception):
    """A registration or unregistration refused to protect a live one (see the module's docstring)."""

    def __init__(self, remark: str, key: str, held_addr: str, held_age_ms: int) -> None:
        super().__init__(remark)
        self.remark = remark
        """The answer's remark (says what is refused, what holds the name and what would free it)."""
        self.key = key
        """What is refused, for a rate-limited log: request, brokerName, brokerId and the addresses."""
        self.held_addr = held_addr
        self.held_age_ms = held_age_ms


@dataclass(slots=True)
class SystemTopicList:
    topics: list[str] = field(default_factory=list)
    broker_addr: str | None = None


class RouteInfoManager:
    def __init__(
        self,
        *,
        clock: Callable[[], int] = now_ms,
        broker_expiry_ms: int = DEFAULT_BROKER_EXPIRY_MS,
        broker_takeover_allowed: bool = False,
    ) -> None:
        self.clock = clock
        self.broker_expiry_ms = broker_expiry_ms
        self.broker_takeover_allowed = broker_takeover_allowed
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}

    # --- registration -------------------------------------------------------------------------------------

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str | None,
        topic_config_wrapper: TopicConfigSerializeWrapper | None,
        filter_server_list: list[str] | None,
        channel_id: int | None,
    ) -> RegisterBrokerResult:
        """Register (or refresh) a broker; raises :class:`RegistrationRefused` (nothing changed) when it would
        take over a live registration of its brokerName/brokerId at another address."""
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None and not self.broker_takeover_allowed:
            held = broker_data.broker_addrs.get(broker_id)
            age = self._live_age(held) if held is not None and held != broker_addr else None
            if held is not None and age is not None:
                raise RegistrationRefused(
                    f"brokerName={broker_name} brokerId={broker_id} is registered live at {held} (heard "
                    f"{age} ms ago): {broker_addr} may take it over once {held} unregisters, the connection "
                    f"it registered over closes or it is silent for {self.broker_expiry_ms} ms "
                    "(name server brokerTakeoverAllowed=false)",
                    f"REGISTER_BROKER of {broker_name} id {broker_id} at {broker_addr} (held by {held})",
                    held,
                    age,
                )
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)

        register_first = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(cluster_name, broker_name, {})
            self.broker_addr_table[broker_name] = broker_data
        addrs = broker_data.broker_addrs
        # Slave promoted to master: the same ip:port must appear under one brokerId only.
        for old_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
            del addrs[old_id]
        old_addr = addrs.get(broker_id)
        addrs[broker_id] = broker_addr
        register_first = register_first or old_addr is None

        data_version = (
            topic_config_wrapper.data_version if topic_config_wrapper is not None else DataVersion()
        )
        if topic_config_wrapper is not None and broker_id == MASTER_ID:
            if register_first or self.is_broker_topic_config_changed(broker_addr, data_version):
                for tc in topic_config_wrapper.topic_config_table.values():
                    self.topic_queue_table.setdefault(tc.topic_name, {})[broker_name] = (
                        QueueData.from_topic_config(broker_name, tc)
                    )

        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            self.clock(),
            DataVersion(data_version.timestamp, data_version.counter),
            channel_id,
            ha_server_addr,
        )

        if filter_server_list is not None:
            if filter_server_list:
                self.filter_server_table[broker_addr] = list(filter_server_list)
            else:
                self.filter_server_table.pop(broker_addr, None)

        result = RegisterBrokerResult()
        if broker_id != MASTER_ID:
            master_addr = addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(master_addr)
                if master_live is not None:
                    result.ha_server_addr = master_live.ha_server_addr
                    result.master_addr = master_addr
        return result

    def unregister_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        channel_id: int | None = None,
    ) -> None:
        """Remove a broker address; with ``channel_id`` (the requesting connection) and takeover protection
        on, raises :class:`RegistrationRefused` (nothing changed) when a live registration this would remove
        -- ``broker_addr``'s or the one at brokerName/brokerId -- was made over another connection."""
        broker_data = self.broker_addr_table.get(broker_name)
        if channel_id is not None and not self.broker_takeover_allowed:
            held = broker_data.broker_addrs.get(broker_id) if broker_data is not None else None
            for addr in dict.fromkeys(a for a in (broker_addr, held) if a is not None):
                live = self.broker_live_table.get(addr)
                age = self._live_age(addr)
                if live is None or age is None or live.channel_id in (None, channel_id):
                    continue
                raise RegistrationRefused(
                    f"{addr} (brokerName={broker_name} brokerId={broker_id}) is registered live over another "
                    f"connection (heard {age} ms ago): only that connection may unregister it "
                    "(name server brokerTakeoverAllowed=false)",
                    f"UNREGISTER_BROKER of {broker_name} id {broker_id} at {broker_addr} (held by {addr})",
                    addr,
                    age,
                )
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        if broker_data is None:
            return
        broker_data.broker_addrs.pop(broker_id, None)
        if broker_data.broker_addrs:
            return
        del self.broker_addr_table[broker_name]
        names = self.cluster_addr_table.get(cluster_name)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self.cluster_addr_table[cluster_name]
        self._remove_topics_of(broker_name)

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        prev = self.query_broker_topic_config(broker_addr)
        return prev is None or prev != data_version

    def query_broker_topic_config(self, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(broker_addr)
        return live.data_version if live is not None else None

    def update_broker_info_update_timestamp(self, broker_addr: str, timestamp_ms: int | None = None) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_ms = self.clock() if timestamp_ms is None else timestamp_ms

    # --- liveness -----------------------------------------------------------------------------------------

    def _live_age(self, broker_addr: str) -> int | None:
        """Milliseconds since ``broker_addr`` was last heard, or None when it is not registered or expired
        (silent for longer than ``broker_expiry_ms``, not yet swept by :meth:`scan_not_active`)."""
        live = self.broker_live_table.get(broker_addr)
        if live is None:
            return None
        age = self.clock() - live.last_update_ms
        return age if age <= self.broker_expiry_ms else None

    def scan_not_active(self, now: int | None = None) -> list[tuple[str, BrokerLiveInfo]]:
        """Drop brokers silent for longer than ``broker_expiry_ms``; returns what was dropped.

        The caller closes the returned channels (Java closes them here; this module does no I/O).
        """
        now = self.clock() if now is None else now
        expired = [
            (addr, live)
            for addr, live in self.broker_live_table.items()
            if live.last_update_ms + self.broker_expiry_ms < now
        ]
        for addr, _ in expired:
            self.remove_broker_addr(addr)
        return expired

    def on_channel_destroyed(self, channel_id: int) -> list[str]:
        """A connection closed: drop every broker registered over it; returns their addresses."""
        addrs = [addr for addr, live in self.broker_live_table.items() if live.channel_id == channel_id]
        for addr in addrs:
            self.remove_broker_addr(addr)
        return addrs

    def remove_broker_addr(self, broker_addr: str) -> None:
        """Java ``onChannelDestroy`` once the address is known."""
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        emptied: list[str] = []
        for name, broker_data in list(self.broker_addr_table.items()):
            ids = [i for i, a in broker_data.broker_addrs.items() if a == broker_addr]
            if not ids:
                continue
            for i in ids:
                del broker_data.broker_addrs[i]
            if not broker_data.broker_addrs:
                del self.broker_addr_table[name]
                emptied.append(name)
        for name in emptied:
            for cluster, names in list(self.cluster_addr_table.items()):
                if name in names:
                    names.discard(name)
                    if not names:
                        del self.cluster_addr_table[cluster]
            self._remove_topics_of(name)

    def _remove_topics_of(self, broker_name: str) -> None:
        for topic, queue_datas in list(self.topic_queue_table.items()):
            queue_datas.pop(broker_name, None)
            if not queue_datas:
                del self.topic_queue_table[topic]

    # --- queries ------------------------------------------------------------------------------------------

    def pick_topic_route(self, topic: str) -> TopicRouteData | None:
        """The topic's route, or ``None`` when it has no queue data or none of its brokers is known."""
        queue_datas = self.topic_queue_table.get(topic)
        if not queue_datas:
            return None
        route = TopicRouteData(
            queue_datas=[
                QueueData(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
                for q in queue_datas.values()
            ]
        )
        for broker_name in queue_datas:
            broker_data = self.broker_addr_table.get(broker_name)
            if broker_data is None:
                continue
            clone = broker_data.copy()
            route.broker_datas.append(clone)
            if self.filter_server_table:
                for addr in clone.broker_addrs.values():
                    servers = self.filter_server_table.get(addr)
                    if servers is not None:
                        route.filter_server_table[addr] = list(servers)
        return route if route.broker_datas else None

    def get_all_cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            {name: bd.copy() for name, bd in self.broker_addr_table.items()},
            {cluster: set(names) for cluster, names in self.cluster_addr_table.items()},
        )

    def get_all_topics(self) -> list[str]:
        return list(self.topic_queue_table)

    def get_topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster, set())
        return [topic for topic, qds in self.topic_queue_table.items() if any(n in qds for n in names)]

    def get_system_topic_list(self) -> SystemTopicList:
        """Cluster names and broker names (the topics brokers create after them), plus one broker address."""
        result = SystemTopicList()
        for cluster, names in self.cluster_addr_table.items():
            result.topics.append(cluster)
            result.topics.extend(sorted(names))
        for broker_data in self.broker_addr_table.values():
            if broker_data.broker_addrs:
                result.broker_addr = next(iter(broker_data.broker_addrs.values()))
                break
        return result

    def _topics_where(self, predicate: Callable[[QueueData], bool]) -> list[str]:
        # Like Java: judge a topic by its first queue data only.
        return [t for t, qds in self.topic_queue_table.items() if qds and predicate(next(iter(qds.values())))]

    def get_unit_topics(self) -> list[str]:
        return self._topics_where(lambda q: bool(q.topic_sys_flag & TopicSysFlag.UNIT))

    def get_has_unit_sub_topics(self) -> list[str]:
        return self._topics_where(lambda q: bool(q.topic_sys_flag & TopicSysFlag.UNIT_SUB))

    def get_has_unit_sub_ununit_topics(self) -> list[str]:
        return self._topics_where(
            lambda q: (
                not q.topic_sys_flag & TopicSysFlag.UNIT and bool(q.topic_sys_flag & TopicSysFlag.UNIT_SUB)
            )
        )

    # --- admin --------------------------------------------------------------------------------------------

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """Remove the topic everywhere, or only from the brokers of ``cluster_name``."""
        if not cluster_name:
            self.topic_queue_table.pop(topic, None)
            return
        queue_datas = self.topic_queue_table.get(topic)
        names = self.cluster_addr_table.get(cluster_name)
        if queue_datas is None or not names:
            return
        for name in names:
            queue_datas.pop(name, None)
        if not queue_datas:
            del self.topic_queue_table[topic]

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """Clear PERM_WRITE on every topic of the broker; returns how many topics it has."""
        count = 0
        for queue_datas in self.topic_queue_table.values():
            qd = queue_datas.get(broker_name)
            if qd is not None:
                qd.perm &= ~PermName.WRITE
                count += 1
        return count

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        """Set every topic of the broker to READ|WRITE (Java's behaviour); returns how many topics it has."""
        count = 0
        for queue_datas in self.topic_queue_table.values():
            qd = queue_datas.get(broker_name)
            if qd is not None:
                qd.perm = PermName.READ | PermName.WRITE
                count += 1
        return count
