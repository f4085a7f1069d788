"""Prometheus metrics (``metricsExporterType=PROM``) scraped from a real broker and name server during real
traffic: sends through the Python path and the network thread's fast path, a batch, a delayed message, a
push consumer that consumes one of the two topics, then more sends nobody consumes. Figures are checked
against what was sent and consumed; no timing is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rmq.client import ClientConfig, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageExt
from rmq.client.sync import Admin, Producer, PushConsumer
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.brokerproc import BrokerProcess, start_broker
from tests.fastsend import fast_send_stats
from tests.peers.apache5 import wait_for_route
from tests.proxy.client5run import run_client5

Samples = list[tuple[str, dict[str, str], float]]

SEND_CODES = {"send_message", "send_message_v2", "send_batch_message"}


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return [(s.name, s.labels, s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples called ``name`` whose labels include ``labels``."""
    return sum(v for n, ls, v in samples if n == name and all(ls.get(k) == x for k, x in labels.items()))


def labelled(samples: Samples, name: str) -> list[dict[str, str]]:
    return [ls for n, ls, _ in samples if n == name]


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A standalone name server with ``--metrics-port 0``: (its address, its metrics port)."""
    logs = tmp_path_factory.mktemp("nslogs")
    args = [sys.executable, "-m", "rmq.namesrv", "--host", "127.0.0.1", "--port", "0"]
    args += ["--metrics-port", "0", "--log-dir", str(logs), "--kv-config", str(logs / "kv.json")]
    proc = subprocess.Popen(
        args, stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1")
    )
    assert proc.stderr is not None
    addr = metrics = None
    for line in proc.stderr:
        if "metrics (Prometheus) served on http://" in line:
            metrics = int(line.rsplit(":", 1)[1].split("/", 1)[0])
        if "listening on " in line:
            addr = line.rsplit("listening on ", 1)[1].split(",", 1)[0].strip()
        if addr and metrics:
            break
    assert addr and metrics, "the name server did not start"
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
    yield addr, metrics
    proc.terminate()
    proc.wait(20)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, namesrv: tuple[str, int]) -> Iterator[BrokerProcess]:
    proc = start_broker(
        tmp_path_factory.mktemp("metricsbroker"),
        "metricsExporterType=PROM",
        "metricsPromExporterPort=0",
        "metricsLabel=env:test",
        namesrv=namesrv[0],
    )
    yield proc
    proc.stop()


def push_consumer(namesrv_addr: str, group: str, topic: str, listener: Any, instance: str) -> PushConsumer:
    """A started push consumer of all of ``topic`` from its first offset, calling ``listener``."""
    consumer = PushConsumer(
        group,
        client_config=ClientConfig(namesrv_addr=namesrv_addr, instance_name=instance),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    return consumer


def name(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{time.monotonic_ns()}"


def test_broker_metrics_follow_traffic(broker: BrokerProcess, namesrv: tuple[str, int]) -> None:
    port = int(broker.ready["metrics"])
    ta, tb, group = name("TA"), name("TB"), name("cg")
    body = b"m" * 300
    fast_before = fast_send_stats(broker.broker_addr)
    sent_a = sent_b = requests = 0
    body_bytes_a = 0
    with Producer(name("pg"), namesrv_addr=broker.namesrv_addr) as producer:
        # The first send to a topic goes through Python (which vets it); the rest take the fast path.
        for _ in range(20):
            assert producer.send(Message(ta, body)).ok
        batch = [Message(ta, b"batch-%d" % i) for i in range(5)]
        assert producer.send(batch).ok
        sent_a, requests = 25, 21
        body_bytes_a = 20 * len(body) + sum(len(m.body) for m in batch)
        for _ in range(10):
            assert producer.send(Message(tb, b"b" * 2000)).ok
        delayed = Message(tb, b"later")
        delayed.delay_time_level = 1
        assert producer.send(delayed).ok
        sent_b, requests = 11, requests + 11
        # Two transactional half messages (never decided): the first parked by the Python path, the next by
        # the network thread; both are TB's transaction messages.
        for i in range(2):
            half = {"a": "PG_HALF", "b": tb, "c": "TBW102", "d": "4", "e": "0", "f": "4", "h": "0"}
            half.update({"g": str(int(time.time() * 1000)), "j": "0", "k": "false", "m": "false"})
            half["i"] = f"TRAN_MSG\x01true\x02PGROUP\x01PG_HALF\x02UNIQ_KEY\x01H{i}"
            r = invoke_sync(broker.broker_addr, create_request(RequestCode.SEND_MESSAGE_V2, half, b"h"), 5000)
            assert r.code == ResponseCode.SUCCESS, r.remark
        sent_b, requests = sent_b + 2, requests + 2
        fast = fast_send_stats(broker.broker_addr)
        assert fast["messages"] - fast_before["messages"] > 0, "no send took the fast path"

        # A push consumer takes everything in TA.
        received: list[MessageExt] = []
        done = threading.Event()

        def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
            received.extend(msgs)
            if len(received) >= sent_a:
                done.set()
            if msgs[0].body == b"batch-0":
                ctx.delay_level_when_next_consume = -1  # straight to the dead letter queue
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = push_consumer(broker.namesrv_addr, group, ta, listener, "metrics-push")
        try:
            assert done.wait(60)
            during = scrape(port)
        finally:
            consumer.shutdown()  # commits its offsets
        assert len(received) == sent_a
        # Connections: the consumer's, and its client's (CLIENT_INNER_PRODUCER) producer one; rmq's client
        # heartbeats once it knows a broker, so the producer's own connection may not be registered yet.
        assert value(during, "rocketmq_consumer_connections", consumer_group=group, consume_mode="push") >= 1
        assert (
            value(during, "rocketmq_producer_connections", language="python", protocol_type="remoting") >= 1
        )

        # More to TA, which nobody consumes now: the group lags by exactly these.
        more = 7
        for _ in range(more):
            assert producer.send(Message(ta, body)).ok
        sent_a, requests, body_bytes_a = sent_a + more, requests + more, body_bytes_a + more * len(body)

        deadline = time.monotonic() + 30
        while True:
            samples = scrape(port)
            lag = value(samples, "rocketmq_consumer_lag_messages", topic=ta, consumer_group=group)
            if lag == more or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # the offsets the consumer committed at shutdown are on their way
        assert lag == more

    node = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a", "env": "test"}
    # In: every message, whichever path stored it, under its topic and message type.
    assert value(samples, "rocketmq_messages_in_total", topic=ta, message_type="normal", **node) == sent_a
    assert value(samples, "rocketmq_messages_in_total", topic=tb, message_type="normal") == 10
    assert value(samples, "rocketmq_messages_in_total", topic=tb, message_type="delay") == 1
    assert value(samples, "rocketmq_messages_in_total", topic=tb, message_type="transaction") == 2
    assert value(samples, "rocketmq_messages_in_total", topic=tb) == sent_b
    assert value(samples, "rocketmq_throughput_in_total", topic=ta) > body_bytes_a  # records: body + header
    assert value(samples, "rocketmq_message_size_count", topic=ta) == sent_a
    assert value(samples, "rocketmq_message_size_bucket", topic=ta, le="1024.0") == sent_a
    assert value(samples, "rocketmq_message_size_bucket", topic=tb, message_type="normal", le="1024.0") == 0
    assert value(samples, "rocketmq_message_size_bucket", topic=tb, message_type="normal", le="4096.0") == 10
    assert value(samples, "rocketmq_message_size_sum", topic=ta) == value(
        samples, "rocketmq_throughput_in_total", topic=ta
    )

    # Out: what the group pulled, which is what it consumed.
    consumed = len(received)
    assert (
        value(samples, "rocketmq_messages_out_total", topic=ta, consumer_group=group, is_retry="false")
        == consumed
    )
    assert value(samples, "rocketmq_throughput_out_total", topic=ta, consumer_group=group) > 25 * 5
    assert value(samples, "rocketmq_messages_out_total", topic=tb) == 0
    assert value(samples, "rocketmq_send_to_dlq_messages_total", topic=ta, consumer_group=group) == 1

    # Lag: sent - consumed, all of it ready (pulled by nobody), none in flight.
    assert lag == sent_a - consumed
    assert value(samples, "rocketmq_consumer_ready_messages", topic=ta, consumer_group=group) == more
    assert value(samples, "rocketmq_consumer_inflight_messages", topic=ta, consumer_group=group) == 0
    assert labelled(samples, "rocketmq_consumer_lag_latency")
    assert value(samples, "rocketmq_consumer_lag_latency", topic=ta, consumer_group=group) >= 0

    # Request latency: every send request is in it once (fast path and Python path together), and the
    # consumer's pulls and heartbeats are there too.
    sends = sum(
        v
        for n, ls, v in samples
        if n == "rocketmq_rpc_latency_count"
        and ls["request_code"] in SEND_CODES
        and ls["response_code"] == "success"
    )
    assert sends == requests
    assert (
        value(samples, "rocketmq_rpc_latency_count", request_code="pull_message", protocol_type="remoting")
        >= 1
    )
    assert value(samples, "rocketmq_rpc_latency_count", request_code="heart_beat") >= 1
    assert {ls["is_long_polling"] for ls in labelled(samples, "rocketmq_rpc_latency_count")} <= {
        "true",
        "false",
    }

    # Storage, broker.
    assert value(samples, "rocketmq_storage_size", storage_type="local", storage_medium="disk") > 0
    assert 0 < value(samples, "rocketmq_storage_disk_ratio") <= 1
    assert value(samples, "rocketmq_storage_flush_behind_bytes") >= 0
    assert value(samples, "rocketmq_storage_dispatch_behind_bytes") >= 0
    assert value(samples, "rocketmq_broker_permission") == 6

    # The name server: the broker and its topics, and the requests it answered.
    ns = scrape(namesrv[1])
    assert value(ns, "rocketmq_namesrv_brokers", broker_name="broker-a", node_type="nameserver") == 1
    assert value(ns, "rocketmq_namesrv_clusters") == 1
    assert value(ns, "rocketmq_namesrv_topics") >= 2
    assert value(ns, "rocketmq_namesrv_routes", broker_name="broker-a") >= 2
    assert labelled(ns, "rocketmq_namesrv_broker_heartbeat_age")[0]["broker_addr"] == broker.broker_addr
    assert (
        value(ns, "rocketmq_rpc_latency_count", request_code="register_broker", response_code="success") >= 1
    )
    assert value(ns, "rocketmq_rpc_latency_count", request_code="get_routeinfo_by_topic") >= 2


def test_embedded_name_server_metrics(tmp_path: Path) -> None:
    proc = start_broker(tmp_path / "store", extra_args=["--namesrv-metrics-port", "0"])
    try:
        ns = scrape(int(proc.ready["namesrv_metrics"]))
        assert "metrics" not in proc.ready  # the broker's own are off by default
    finally:
        proc.stop()
    assert value(ns, "rocketmq_namesrv_brokers", broker_name="broker-a", broker_cluster="DefaultCluster") == 1
    assert value(ns, "rocketmq_rpc_latency_count", request_code="register_broker") >= 1


def test_bad_metrics_config_is_refused(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "rmq.broker", "--namesrv-port", "0", "-p", f"storePathRootDir={tmp_path}"]
    for prop, why in (
        ("metricsExporterType=OTLP_GRPC", "not implemented by rmq"),
        ("metricsPromExporterPort=70000", "not a TCP port"),
        ("metricsLabel=a:b:c", "is not key:value"),
    ):
        r = subprocess.run([*args, "-p", prop], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and why in r.stderr, (prop, r.stderr[-2000:])
    r = subprocess.run(
        [*args[:3], "-n", "127.0.0.1:9", "--namesrv-metrics-port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0 and "embedded name server" in r.stderr, r.stderr[-2000:]


def test_grpc_clients_and_calls_are_in_the_broker_metrics(broker: BrokerProcess) -> None:
    """The 5.x clients of the broker's gRPC endpoint: their calls in ``rocketmq_rpc_latency`` and a live
    consumer in ``rocketmq_consumer_connections``, both with ``protocol_type="grpc"``."""
    port, endpoints = int(broker.ready["metrics"]), f"127.0.0.1:{broker.ready['grpc']}"
    topic, group = name("T5m"), name("G5m")
    with Producer(name("pg"), namesrv_addr=broker.namesrv_addr) as producer:
        assert producer.send(Message(topic, b"made")).ok  # a 4.x send makes the topic
    wait_for_route(broker.namesrv_addr, topic)
    run_client5("send", endpoints=endpoints, topic=topic, messages=[{"body": "five"}])
    result: dict[str, Any] = {}
    consumer = threading.Thread(
        target=lambda: result.update(
            run_client5("consume", endpoints=endpoints, topic=topic, group=group, count=3, deadline=20)
        )
    )
    consumer.start()
    try:
        deadline = time.monotonic() + 30
        while True:
            samples = scrape(port)
            live = value(
                samples,
                "rocketmq_consumer_connections",
                protocol_type="grpc",
                consumer_group=group,
                consume_mode="pop",
            )
            received = value(
                samples,
                "rocketmq_rpc_latency_count",
                protocol_type="grpc",
                request_code="receivemessage",
                response_code="ok",
                is_long_polling="true",
            )
            if (live == 1 and received >= 1) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert live == 1 and received >= 1, [s for s in samples if s[1].get("protocol_type") == "grpc"]
        with Admin(namesrv_addr=broker.namesrv_addr) as admin:  # brokerStatus shows the live 5.x consumer
            status = admin.broker_runtime_info(broker.broker_addr)
        assert int(status["grpcConsumers"]) >= 1, status
        sends = value(
            samples,
            "rocketmq_rpc_latency_count",
            protocol_type="grpc",
            request_code="sendmessage",
            response_code="ok",
        )
        assert sends >= 1
        assert (
            value(samples, "rocketmq_rpc_latency_count", protocol_type="grpc", request_code="queryroute") >= 1
        )
    finally:
        consumer.join(60)
    assert sorted(r["body"] for r in result["received"]) == ["five", "made"]
