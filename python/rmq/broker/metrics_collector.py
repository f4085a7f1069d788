"""The broker's Prometheus metrics under RocketMQ 5.x's names and labels, computed when scraped.

Counters come from :class:`~rmq.broker.metrics.BrokerMetrics` (the Python path) plus the network thread's
own per-topic counters and latency histogram for the sends it answers without Python
(``NetServer.fast_send_metrics()``); gauges are read from the store, the offset table and the client
managers at scrape time. This runs in the exporter's thread: every dict of the event loop is copied
(``list(...)``) before it is walked, and the store's calls are thread-safe.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from rmq.broker.disk import commitlog_disk_ratio, store_bytes
from rmq.broker.metrics import SIZE_BOUNDS
from rmq.broker.services import BrokerServices
from rmq.common import metrics as m
from rmq.common.codes import (
    CID_RMQ_SYS_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    V3_4_9,
    V4_0_0,
    V4_6_0,
    V4_9_4,
    V4_9_8,
    LanguageCode,
)
from rmq.common.topic import is_system_topic
from rmq.remoting.dispatcher import Dispatcher

__all__ = ["BrokerCollector"]

_VERSIONS = {V3_4_9: "v3_4_9", V4_0_0: "v4_0_0", V4_6_0: "v4_6_0", V4_9_4: "v4_9_4", V4_9_8: "v4_9_8"}
_CONSUME_MODES = {"CONSUME_PASSIVELY": "push", "CONSUME_ACTIVELY": "pull", "CONSUME_POP": "pop"}


def _bool(v: bool) -> str:
    return "true" if v else "false"


def _language(code: int) -> str:
    try:
        return LanguageCode(code).name.lower()
    except ValueError:
        return "other"


def _is_system_group(group: str) -> bool:
    return group.lower().startswith(CID_RMQ_SYS_PREFIX.lower())


class BrokerCollector:
    """``collect()`` yields every family; ``fast_send`` is the network thread (or None)."""

    def __init__(
        self, services: BrokerServices, dispatcher: Dispatcher, extra_labels: dict[str, str]
    ) -> None:
        self.s = services
        self.dispatcher = dispatcher
        cfg = services.config
        self.const = {
            m.CLUSTER: cfg.broker_cluster_name,
            m.NODE_TYPE: "broker",
            m.NODE_ID: cfg.broker_name,
            **extra_labels,
        }

    def _family(self, kind: type[Any], name: str, doc: str, labels: list[str]) -> Any:
        return kind(name, doc, labels=[*self.const, *labels])

    def _values(self, *values: str) -> list[str]:
        return [*self.const.values(), *values]

    def collect(self) -> Iterator[Metric]:
        self.s.drain_pulls()
        fast = self.s.fast_send
        topics, latency = fast.fast_send_metrics() if fast is not None else ([], [])
        yield from self._messages_in(topics)
        yield from self._messages_out()
        yield self._rpc_latency(latency)
        yield from self._lag()
        yield from self._pop()
        yield from self._connections()
        yield from self._storage()
        yield from self._ha()
        yield from self._broker()

    # --- in -------------------------------------------------------------------------------------------------
    def _messages_in(self, fast_topics: list[tuple[str, str, int, int, list[int]]]) -> Iterator[Metric]:
        # (topic, message type) -> [messages, bytes, per size bucket...]
        rows: dict[tuple[str, str], list[int]] = {
            k: list(v) for k, v in list(self.s.metrics.messages_in.items())
        }
        for topic, mtype, messages, nbytes, sizes in fast_topics:
            if messages == 0:
                continue
            # The fast path takes plain messages and transactional half messages (it declines delayed and
            # timer ones).
            row = rows.setdefault((topic, mtype), [0] * (len(SIZE_BOUNDS) + 3))
            row[0] += messages
            row[1] += nbytes
            for i, n in enumerate(sizes):
                row[2 + i] += n
        labels = [m.TOPIC, m.MESSAGE_TYPE, m.IS_SYSTEM]
        msgs = self._family(
            CounterMetricFamily, "rocketmq_messages_in_total", "Total number of incoming messages", labels
        )
        tput = self._family(
            CounterMetricFamily,
            "rocketmq_throughput_in_total",
            "Total traffic of incoming messages (bytes)",
            labels,
        )
        size = self._family(
            HistogramMetricFamily, "rocketmq_message_size", "Incoming messages size (bytes)", labels
        )
        for (topic, mtype), row in sorted(rows.items()):
            values = self._values(topic, mtype, _bool(is_system_topic(topic)))
            msgs.add_metric(values, row[0])
            tput.add_metric(values, row[1])
            m.histogram(size, values, SIZE_BOUNDS, row[2:], row[1])
        yield from (msgs, tput, size)

    # --- out ------------------------------------------------------------------------------------------------
    def _messages_out(self) -> Iterator[Metric]:
        labels = [m.TOPIC, m.CONSUMER_GROUP, m.IS_RETRY, m.IS_SYSTEM]
        msgs = self._family(
            CounterMetricFamily, "rocketmq_messages_out_total", "Total number of outgoing messages", labels
        )
        tput = self._family(
            CounterMetricFamily,
            "rocketmq_throughput_out_total",
            "Total traffic of outgoing messages (bytes)",
            labels,
        )
        for (topic, group), (count, nbytes) in sorted(list(self.s.metrics.messages_out.items())):
            values = self._labels_tg(topic, group)
            msgs.add_metric(values, count)
            tput.add_metric(values, nbytes)
        yield from (msgs, tput)
        dlq = self._family(
            CounterMetricFamily,
            "rocketmq_send_to_dlq_messages_total",
            "Consumer send to DLQ messages",
            [m.TOPIC, m.CONSUMER_GROUP, m.IS_RETRY, m.IS_SYSTEM],
        )
        for (topic, group), n in sorted(list(self.s.metrics.to_dlq.items())):
            dlq.add_metric(self._labels_tg(topic, group), n)
        yield dlq

    def _labels_tg(self, topic: str, group: str) -> list[str]:
        return self._values(
            topic,
            group,
            _bool(topic.startswith(RETRY_GROUP_TOPIC_PREFIX)),
            _bool(is_system_topic(topic) or _is_system_group(group)),
        )

    # --- latency --------------------------------------------------------------------------------------------
    def _rpc_latency(self, fast_latency: list[tuple[int, int, list[int], int, bool]]) -> Metric:
        rows = [
            (c, r, lp, [int(n) for n in row[:-1]], row[-1]) for (c, r, lp), row in self.s.metrics.rpc.rows()
        ]
        rows += [(code, resp, lp, buckets, sum_us / 1000) for code, resp, buckets, sum_us, lp in fast_latency]
        endpoint = self.s.grpc_endpoint
        return m.rpc_latency_family(self.const, rows, endpoint.latency.rows() if endpoint is not None else ())

    # --- consumer lag ---------------------------------------------------------------------------------------
    def _lag_pairs(self) -> set[tuple[str, str]]:
        """(consumer group, topic) with committed offsets on this broker or an online subscription."""
        pairs = set()
        for key in list(self.s.offsets.table):
            topic, _, group = key.partition("@")
            pairs.add((group, topic))
        for group, info in list(self.s.consumers.groups.items()):
            if info.message_model == "BROADCASTING":
                continue  # their offsets live in the clients
            for topic in list(info.subscriptions):
                pairs.add((group, topic))
        return pairs

    def _lag(self) -> Iterator[Metric]:
        s = self.s
        store = s.store
        labels = [m.TOPIC, m.CONSUMER_GROUP, m.IS_RETRY, m.IS_SYSTEM]
        lag_msgs = self._family(
            GaugeMetricFamily, "rocketmq_consumer_lag_messages", "Consumer lag messages", labels
        )
        lag_ms = self._family(
            GaugeMetricFamily, "rocketmq_consumer_lag_latency", "Consumer lag time (milliseconds)", labels
        )
        inflight = self._family(
            GaugeMetricFamily, "rocketmq_consumer_inflight_messages", "Consumer inflight messages", labels
        )
        queueing = self._family(
            GaugeMetricFamily,
            "rocketmq_consumer_queueing_latency",
            "Consumer queueing time (milliseconds)",
            labels,
        )
        ready = self._family(
            GaugeMetricFamily, "rocketmq_consumer_ready_messages", "Consumer ready messages", labels
        )
        now = int(time.time() * 1000)
        pulled = dict(list(s.metrics.pulled.items()))
        # POP groups: the pop offset is the committed one, so what is popped and not yet acked is added
        # as in flight (and to the lag: not consumed yet).
        popped = s.pop_revive.inflight_by_group() if s.pop_revive is not None else {}
        for group, topic in sorted(self._lag_pairs()):
            tc = s.topics.table.get(topic)
            committed_by_queue = s.offsets.offsets_of(group, topic)
            queues = range(tc.read_queue_nums) if tc is not None else sorted(committed_by_queue)
            lag = fly = rdy = 0
            earliest_unconsumed = earliest_unpulled = 0
            for q in queues:
                committed = committed_by_queue.get(q, -1)
                if committed < 0:
                    continue  # nothing committed yet: where the group starts is the client's choice
                top = store.max_offset(topic, q)
                committed = min(committed, top)
                got = min(max(pulled.get((group, topic, q), committed), committed), top)
                lag += top - committed
                fly += got - committed
                rdy += top - got
                if top > committed:
                    t = store.store_time_at(topic, q, committed)
                    if t and (not earliest_unconsumed or t < earliest_unconsumed):
                        earliest_unconsumed = t
                if top > got:
                    t = store.store_time_at(topic, q, got)
                    if t and (not earliest_unpulled or t < earliest_unpulled):
                        earliest_unpulled = t
            pop_fly = popped.get((topic, group), 0)
            lag += pop_fly
            fly += pop_fly
            values = self._labels_tg(topic, group)
            lag_msgs.add_metric(values, lag)
            lag_ms.add_metric(values, now - earliest_unconsumed if earliest_unconsumed else 0)
            inflight.add_metric(values, fly)
            queueing.add_metric(values, now - earliest_unpulled if earliest_unpulled else 0)
            ready.add_metric(values, rdy)
        yield from (lag_msgs, lag_ms, inflight, queueing, ready)

    # --- POP -----------------------------------------------------------------------------------------------
    def _pop(self) -> Iterator[Metric]:
        """5.x's POP revive metrics (PopMetricsManager); none before POP is served."""
        revive = self.s.pop_revive
        if revive is None:
            return
        put = self._family(
            CounterMetricFamily,
            "rocketmq_pop_revive_in_message_total",
            "Total number of put message to revive topic",
            [m.CONSUMER_GROUP, m.TOPIC, "revive_message_type", "put_status"],
        )
        for (group, topic, kind), n in sorted(list(revive.put_counts.items())):
            put.add_metric(self._values(group, topic, kind, "PUT_OK"), n)
        got = self._family(
            CounterMetricFamily,
            "rocketmq_pop_revive_out_message_total",
            "Total number of get message from revive topic",
            [m.CONSUMER_GROUP, m.TOPIC, "queue_id", "revive_message_type"],
        )
        for (group, topic, q, kind), n in sorted(list(revive.read_counts.items())):
            got.add_metric(self._values(group, topic, str(q), kind), n)
        retry = self._family(
            CounterMetricFamily,
            "rocketmq_pop_revive_retry_messages_total",
            "Total number of put message to pop retry topic",
            [m.CONSUMER_GROUP, m.TOPIC, "put_status"],
        )
        for (group, topic), n in sorted(list(revive.retry_counts.items())):
            retry.add_metric(self._values(group, topic, "PUT_OK"), n)
        # 5.x's names: "lag" is the revive records behind, "latency" the milliseconds behind.
        lag = self._family(
            GaugeMetricFamily,
            "rocketmq_pop_revive_lag",
            "The processing lag of revive topic (records written, not yet done with)",
            ["queue_id"],
        )
        latency = self._family(
            GaugeMetricFamily,
            "rocketmq_pop_revive_latency",
            "The processing latency of revive topic (ms since its oldest pending checkpoint was due)",
            ["queue_id"],
        )
        for q, records, ms in revive.behind():
            lag.add_metric(self._values(str(q)), records)
            latency.add_metric(self._values(str(q)), ms)
        yield from (put, got, retry, lag, latency)

    # --- connections ----------------------------------------------------------------------------------------
    def _connections(self) -> Iterator[Metric]:
        s = self.s
        producers: dict[tuple[str, str], int] = {}
        for chans in list(s.producers.groups.values()):
            for ch in list(chans.values()):
                key = (_language(ch.language), _VERSIONS.get(ch.version, str(ch.version)))
                producers[key] = producers.get(key, 0) + 1
        fam = self._family(
            GaugeMetricFamily,
            "rocketmq_producer_connections",
            "Producer connections",
            ["language", "version", m.PROTOCOL_TYPE],
        )
        for (lang, version), n in sorted(producers.items()):
            fam.add_metric(self._values(lang, version, m.PROTOCOL_REMOTING), n)
        grpc_producers, grpc_consumers = self._grpc_clients()
        for (lang, version), n in sorted(grpc_producers.items()):
            fam.add_metric(self._values(lang, version, m.PROTOCOL_GRPC), n)
        yield fam
        consumers: dict[tuple[str, str, str, str], int] = {}
        for group, info in list(s.consumers.groups.items()):
            mode = _CONSUME_MODES.get(info.consume_type, info.consume_type.lower())
            for ch in list(info.channels.values()):
                key = (group, _language(ch.language), _VERSIONS.get(ch.version, str(ch.version)), mode)
                consumers[key] = consumers.get(key, 0) + 1
        fam = self._family(
            GaugeMetricFamily,
            "rocketmq_consumer_connections",
            "Consumer connections",
            [m.CONSUMER_GROUP, "language", "version", "consume_mode", m.PROTOCOL_TYPE, m.IS_SYSTEM],
        )
        for (group, lang, version, mode), n in sorted(consumers.items()):
            values = self._values(
                group, lang, version, mode, m.PROTOCOL_REMOTING, _bool(_is_system_group(group))
            )
            fam.add_metric(values, n)
        for (group, lang, version), n in sorted(grpc_consumers.items()):
            # 5.x clients receive by POP, whatever their kind (the endpoint turns receives into pops).
            values = self._values(
                group, lang, version, "pop", m.PROTOCOL_GRPC, _bool(_is_system_group(group))
            )
            fam.add_metric(values, n)
        yield fam

    def _grpc_clients(self) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str, str], int]]:
        """The 5.x clients of the gRPC endpoint this process serves. Their requests reach the broker through
        the endpoint's one Remoting client, which the remoting rows count (as a Java client)."""
        endpoint = self.s.grpc_endpoint
        return endpoint.registry.census() if endpoint is not None else ({}, {})

    # --- storage --------------------------------------------------------------------------------------------
    def _storage(self) -> Iterator[Metric]:
        store = self.s.store
        fam = self._family(
            GaugeMetricFamily,
            "rocketmq_storage_size",
            "Bytes the store's files take on disk (CommitLog, ConsumeQueues, index, checkpoint, config)",
            ["storage_type", "storage_medium"],
        )
        fam.add_metric(self._values("local", "disk"), store_bytes(self.s.config))
        yield fam
        ratio = commitlog_disk_ratio(self.s.config)
        if ratio is not None:
            fam = self._family(
                GaugeMetricFamily,
                "rocketmq_storage_disk_ratio",
                "Used share of the CommitLog's disk, as the store counts it for retention and write refusal "
                "(rmq's own)",
                [],
            )
            fam.add_metric(self._values(), ratio)
            yield fam
        end = store.commitlog_max_offset()
        for name, doc, behind in (
            (
                "rocketmq_storage_flush_behind_bytes",
                "Broker flush behind bytes",
                end - store.flushed_offset(),
            ),
            (
                "rocketmq_storage_dispatch_behind_bytes",
                "Broker dispatch behind bytes",
                end - store.dispatched_offset(),
            ),
        ):
            fam = self._family(GaugeMetricFamily, name, doc, [])
            fam.add_metric(self._values(), max(behind, 0))
            yield fam
        earliest = store.earliest_store_time()
        if earliest > 0:
            fam = self._family(
                GaugeMetricFamily,
                "rocketmq_storage_message_reserve_time",
                "Broker message reserve time (milliseconds)",
                [],
            )
            fam.add_metric(self._values(), int(time.time() * 1000) - earliest)
            yield fam

    # --- replication ----------------------------------------------------------------------------------------
    def _ha(self) -> Iterator[Metric]:
        """A master's slaves (rmq's own: RocketMQ 5.x serves no replication metric): how many are connected
        and, per slave, the CommitLog bytes it has not acknowledged yet."""
        ha = self.s.ha_master
        if ha is None:
            return
        slaves = [(c.addr, c.ack_offset) for c in list(ha.connections)]
        fam = self._family(
            GaugeMetricFamily, "rocketmq_ha_slaves", "Slaves connected to this master (rmq's own)", []
        )
        fam.add_metric(self._values(), len(slaves))
        yield fam
        end = self.s.store.commitlog_max_offset()
        fam = self._family(
            GaugeMetricFamily,
            "rocketmq_ha_slave_behind_bytes",
            "CommitLog bytes a connected slave has not acknowledged yet (rmq's own)",
            ["slave"],
        )
        for addr, acked in sorted(slaves):
            fam.add_metric(self._values(str(addr)), max(0, end - max(acked, 0)))
        yield fam

    # --- broker ---------------------------------------------------------------------------------------------
    def _broker(self) -> Iterator[Metric]:
        fam = self._family(GaugeMetricFamily, "rocketmq_broker_permission", "Broker permission", [])
        fam.add_metric(self._values(), self.s.config.broker_permission)
        yield fam
        fam = self._family(
            GaugeMetricFamily,
            "rocketmq_processor_watermark",
            "Requests the Python processors are working on (rmq has one event loop, no thread pools)",
            ["processor"],
        )
        fam.add_metric(self._values("dispatcher"), self.dispatcher.in_flight)
        yield fam
        fam = self._family(
            CounterMetricFamily,
            "rocketmq_send_busy_refusals_total",
            "Sends answered SYSTEM_BUSY and not stored (brokerFastFailureEnable): waited longer than "
            "waitTimeMillsInSendQueue, or met the put lock held longer than osPageCacheBusyTimeOutMills",
            ["reason"],
        )
        for reason, n in self.s.fast_failure.refused.items():
            fam.add_metric(self._values(reason), n)
        yield fam
        fast = self.s.fast_send
        if fast is not None:
            fam = self._family(
                CounterMetricFamily,
                "rocketmq_network_thread_polling_seconds",
                "Time the network thread polled for requests instead of sleeping (networkThreadSpinMicros): "
                "idle time counted in the broker's CPU time (rmq's own)",
                [],
            )
            fam.add_metric(self._values(), fast.spun_ms() / 1000)
            yield fam
