"""The metrics' pure parts: message types, ``metricsLabel``, the latency histogram, bucket bounds shared with
the network thread, and the broker's metrics properties."""

from __future__ import annotations

import pytest
from prometheus_client.core import HistogramMetricFamily
from rmq import _store
from rmq.broker.config import BrokerConfig, ConfigError
from rmq.broker.metrics import SIZE_BOUNDS, BrokerMetrics, message_type, parse_metrics_label
from rmq.common.metrics import histogram, request_code_name, response_code_name
from rmq.remoting.latency import LATENCY_BOUNDS_MS, RpcLatency


def test_bounds_are_the_network_threads() -> None:
    assert list(SIZE_BOUNDS) == _store.SIZE_BOUNDS
    assert list(LATENCY_BOUNDS_MS) == _store.LATENCY_BOUNDS_MS


def test_message_type_as_rocketmq_5_tells_them_apart() -> None:
    assert message_type("") == "normal"
    assert message_type("KEYS\x01k\x02TAGS\x01t") == "normal"
    assert message_type("TRAN_MSG\x01true\x02PGROUP\x01g") == "transaction"
    assert message_type("DELAY\x013") == "delay"
    assert message_type("TIMER_DELAY_SEC\x0110") == "delay"
    assert message_type("__SHARDINGKEY\x01k") == "fifo"


def test_metrics_label() -> None:
    assert parse_metrics_label("") == {}
    assert parse_metrics_label("env:prod, dc:eu-1") == {"env": "prod", "dc": "eu-1"}
    for bad in ("a", "a:b:c", "1x:y", "cluster:x"):
        with pytest.raises(ValueError, match="metricsLabel"):
            parse_metrics_label(bad)


def test_rpc_latency_buckets_and_histogram_family() -> None:
    lat = RpcLatency()
    lat.record(310, 0, 0.0004)
    lat.record(310, 0, 0.002)
    lat.record(11, 0, 20.0, long_polling=True)
    rows = dict(lat.rows())
    assert rows[(310, 0, False)][:-1] == [1, 1, 0, 0, 0, 0, 0, 0]
    assert rows[(310, 0, False)][-1] == pytest.approx(2.4)
    assert rows[(11, 0, True)][:-1] == [0] * 7 + [1]
    fam = HistogramMetricFamily("h", "h", labels=["x"])
    histogram(fam, ["a"], (1, 2), [1, 2, 3], 9.0)
    got = {(s.name, s.labels.get("le")): s.value for s in fam.samples}
    assert got[("h_bucket", "1.0")] == 1 and got[("h_bucket", "2.0")] == 3 and got[("h_bucket", "+Inf")] == 6
    assert got[("h_count", None)] == 6 and got[("h_sum", None)] == 9.0


def test_code_names_are_rocketmqs_lower_case() -> None:
    assert request_code_name(310) == "send_message_v2"
    assert request_code_name(99999) == "99999"
    assert response_code_name(0) == "success"


def test_broker_metrics_count_sizes() -> None:
    m = BrokerMetrics()
    m.put("T", "normal", [100, 5000])
    m.got("T", "g", 1, 2, 5100, 7)
    assert m.messages_in[("T", "normal")] == [2, 5100, 1, 0, 1, 0, 0, 0, 0]
    assert m.messages_out[("T", "g")] == [2, 5100]
    assert m.pulled[("g", "T", 1)] == 7


def test_metrics_properties() -> None:
    cfg = BrokerConfig()
    assert cfg.metrics_exporter_type == "DISABLE" and cfg.metrics_prom_exporter_port == 5557
    cfg.set("metricsExporterType", "PROM")
    cfg.set("metricsPromExporterPort", "0")
    cfg.set("metricsPromExporterHost", "127.0.0.1")
    cfg.validate()
    props = cfg.properties()
    assert props["metricsExporterType"] == "PROM" and props["metricsPromExporterPort"] == "0"
    for key, value, why in (
        ("metricsExporterType", "LOG", "not implemented by rmq"),
        ("metricsExporterType", "prom", "rmq takes DISABLE, PROM"),
        ("metricsPromExporterPort", "65536", "not a TCP port"),
        ("metricsLabel", "x", "not key:value"),
    ):
        with pytest.raises(ConfigError, match=why):
            BrokerConfig().set(key, value)
    cfg.metrics_exporter_type = "OTLP_GRPC"
    with pytest.raises(ConfigError, match="not implemented by rmq"):
        cfg.validate()
