"""The name server's Prometheus metrics. RocketMQ 5.x's name server exports none, so these names are rmq's
own, in the same ``rocketmq_`` style and with the same node labels (``node_type="nameserver"``, ``node_id``
its ``host:port``): the clusters, broker groups, live broker addresses (with how long ago each one last
registered), topics and routes it holds, and ``rocketmq_rpc_latency`` of the requests it answered.

Computed when scraped, in the exporter's thread, from copies of the route table's dicts.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from rmq.common import metrics as m
from rmq.namesrv.route_table import RouteInfoManager
from rmq.remoting.dispatcher import Dispatcher

__all__ = ["NamesrvCollector"]


class NamesrvCollector:
    def __init__(self, routes: RouteInfoManager, dispatcher: Dispatcher, node_id: str) -> None:
        self.routes = routes
        self.dispatcher = dispatcher
        self.const = {m.NODE_TYPE: "nameserver", m.NODE_ID: node_id}

    def _gauge(self, name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=[*self.const, *labels])

    def collect(self) -> Iterator[Metric]:
        r = self.routes
        const = list(self.const.values())
        brokers = list(r.broker_addr_table.values())
        live = dict(list(r.broker_live_table.items()))

        fam = self._gauge("rocketmq_namesrv_clusters", "Clusters with registered brokers", [])
        fam.add_metric(const, len(list(r.cluster_addr_table)))
        yield fam

        fam = self._gauge(
            "rocketmq_namesrv_brokers",
            "Registered broker addresses per broker group",
            ["broker_cluster", "broker_name"],
        )
        for b in sorted(brokers, key=lambda b: b.broker_name):
            fam.add_metric([*const, b.cluster, b.broker_name], len(list(b.broker_addrs)))
        yield fam

        now = r.clock()
        fam = self._gauge(
            "rocketmq_namesrv_broker_heartbeat_age",
            "Milliseconds since the broker at this address last registered",
            ["broker_addr"],
        )
        for addr, info in sorted(live.items()):
            fam.add_metric([*const, addr], max(now - info.last_update_ms, 0))
        yield fam

        topics = dict(list(r.topic_queue_table.items()))
        fam = self._gauge("rocketmq_namesrv_topics", "Topics with a route", [])
        fam.add_metric(const, len(topics))
        yield fam
        fam = self._gauge(
            "rocketmq_namesrv_routes",
            "Routes: (topic, broker group) pairs, per broker group",
            ["broker_name"],
        )
        per_broker: dict[str, int] = {}
        for queues in topics.values():
            for name in list(queues):
                per_broker[name] = per_broker.get(name, 0) + 1
        for name, n in sorted(per_broker.items()):
            fam.add_metric([*const, name], n)
        yield fam

        rows = [
            (c, resp, lp, [int(n) for n in row[:-1]], row[-1]) for (c, resp, lp), row in self._latency_rows()
        ]
        yield m.rpc_latency_family(self.const, rows)

    def _latency_rows(self) -> list[tuple[tuple[int, int, bool], list[float]]]:
        lat = self.dispatcher.latency
        return lat.rows() if lat is not None else []
