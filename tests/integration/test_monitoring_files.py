"""The Grafana dashboard and Prometheus alert rules shipped in ``rmq.monitoring``: every PromQL expression in
them (panel targets, template variables, alert rules) is parsed, and each metric it names, each label it
matches on, groups by or shows (``legendFormat``'s ``{{label}}``, annotations' ``$labels.label``) and each
literal label value it matches exactly is checked against what a real broker and name server serve, scraped
while real traffic (sends, a push consumer with one message sent to the DLQ) makes every family have samples.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rmq.client import ConsumeConcurrentlyStatus, Message, MessageExt
from rmq.client.sync import Producer
from rmq.monitoring import ALERT_RULES, GRAFANA_DASHBOARD, files

from tests.brokerproc import BrokerProcess, start_broker
from tests.integration.test_metrics import Samples, broker, name, namesrv, push_consumer, scrape  # noqa: F401 (fixtures)

# A PromQL token: a string, a range or subquery selector, a name, or an operator / punctuation character.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\[[^\]]*\]|[A-Za-z_:][A-Za-z0-9_:]*|=~|!~|!=|==|>=|<=|\S')
_AGGREGATORS = set("sum min max avg count stddev stdvar topk bottomk quantile group".split())
_MATCH_OPS = {"=", "!=", "=~", "!~"}


@dataclass
class Query:
    """What one PromQL expression uses."""

    expr: str
    metrics: set[str] = field(default_factory=set)
    matchers: list[tuple[str, str, str, str]] = field(default_factory=list)  # metric, label, op, value
    grouped: list[tuple[str, str]] = field(default_factory=list)  # metric, label (by / without)
    joined: set[str] = field(default_factory=set)  # on / ignoring / group_left / group_right labels
    by_lists: list[set[str]] = field(default_factory=list)


def parse(expr: str) -> Query:
    """The metric names (``rocketmq_…``, with any ``_bucket``/``_count``/``_sum``/``_total``), label
    matchers and grouping labels of ``expr``; each ``by``/``without`` is tied to the metrics it aggregates."""
    toks = _TOKEN.findall(expr)
    close: dict[int, int] = {}
    stack: list[int] = []
    for i, t in enumerate(toks):
        if t == "(":
            stack.append(i)
        elif t == ")":
            close[stack.pop()] = i
    assert not stack, f"unbalanced parentheses in {expr!r}"
    q = Query(expr)
    at: list[tuple[int, str]] = []  # (token index, metric)
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.startswith("rocketmq_"):
            q.metrics.add(t)
            at.append((i, t))
            if i + 1 < len(toks) and toks[i + 1] == "{":
                j = i + 2
                while toks[j] != "}":
                    if toks[j + 1] in _MATCH_OPS:
                        q.matchers.append((t, toks[j], toks[j + 1], json.loads(toks[j + 2])))
                        j += 3
                    else:
                        j += 1  # a comma
                i = j
        else:
            assert "rocketmq" not in t or t.startswith('"'), f"a name not parsed: {t!r} in {expr!r}"
        i += 1
    for i, t in enumerate(toks):
        if t not in ("by", "without", "on", "ignoring", "group_left", "group_right"):
            continue
        if i + 1 >= len(toks) or toks[i + 1] != "(":
            continue
        labels = {x for x in toks[i + 2 : close[i + 1]] if x != ","}
        if t in ("on", "ignoring", "group_left", "group_right"):
            q.joined |= labels
            continue
        if toks[i - 1] in _AGGREGATORS:  # sum by (x) (arg)
            start = close[i + 1] + 1
            span = (start, close[start])
        else:  # sum (arg) by (x)
            end = i - 1
            start = next(k for k, c in close.items() if c == end)
            span = (start, end)
        inside = [m for k, m in at if span[0] < k < span[1]]
        assert inside, f"{t} ({', '.join(sorted(labels))}) aggregates no rocketmq_ metric in {expr!r}"
        q.grouped += [(m, label) for m in inside for label in labels]
        if t == "by":
            q.by_lists.append(labels)
    return q


def dashboard_queries(dash: dict[str, Any]) -> list[tuple[str, Query, set[str]]]:
    """(where, query, labels shown) for every panel target and every template variable."""
    out = []
    panels = [*dash["panels"], *(p for row in dash["panels"] for p in row.get("panels", []))]
    for p in panels:
        for t in p.get("targets", []):
            shown = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", t.get("legendFormat", "")))
            out.append((f"panel {p['title']!r} {t['refId']}", parse(t["expr"]), shown))
    for v in dash["templating"]["list"]:
        m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", v["query"]["query"])
        assert m, v
        out.append((f"variable {v['name']}", parse(m.group(1)), {m.group(2)}))
    return out


def alert_queries(rules: dict[str, Any]) -> list[tuple[str, Query, set[str]]]:
    out = []
    for g in rules["groups"]:
        for r in g["rules"]:
            text = " ".join(r["annotations"].values())
            shown = set(re.findall(r"\$labels\.(\w+)", text))
            out.append((f"alert {r['alert']}", parse(r["expr"]), shown))
    return out


def load() -> tuple[dict[str, Any], dict[str, Any]]:
    paths = files()
    dash = json.loads(paths[GRAFANA_DASHBOARD].read_text())
    rules = yaml.safe_load(paths[ALERT_RULES].read_text())
    return dash, rules


def test_files_are_in_the_package_and_well_formed() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rmq.monitoring"], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert [Path(p).name for p in out] == [GRAFANA_DASHBOARD, ALERT_RULES]
    assert all(Path(p).is_file() for p in out)
    dash, rules = load()

    # Grafana: an importable dashboard asking for a Prometheus data source, with cluster / broker variables.
    assert dash["schemaVersion"] >= 39
    assert [(i["name"], i["pluginId"]) for i in dash["__inputs"]] == [("DS_PROMETHEUS", "prometheus")]
    assert [v["name"] for v in dash["templating"]["list"]] == ["cluster", "node_id"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        assert {"h", "w", "x", "y"} <= set(p["gridPos"]) and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${DS_PROMETHEUS}" and p["targets"], p["title"]
            assert all(t["datasource"]["uid"] == "${DS_PROMETHEUS}" for t in p["targets"])

    # Prometheus: groups of alerting rules, each with a duration, a severity and what to tell the operator.
    names = []
    for g in rules["groups"]:
        assert g["name"] and g["rules"]
        for r in g["rules"]:
            assert set(r) == {"alert", "expr", "for", "labels", "annotations"}, r
            assert re.fullmatch(r"\d+[smh]", r["for"]), r
            assert r["labels"]["severity"] in ("warning", "critical"), r
            assert r["annotations"]["summary"] and r["annotations"]["description"], r
            names.append(r["alert"])
    assert len(names) == len(set(names))

    # What the issue asks for: disk, lag, flush / dispatch / slave behind, a group losing a slave, DLQ growth,
    # busy refusals in the rules; and the dashboard's panels.
    alerting = set().union(*(q.metrics for _, q, _ in alert_queries(rules)))
    assert alerting >= {
        "rocketmq_storage_disk_ratio",
        "rocketmq_consumer_lag_messages",
        "rocketmq_consumer_lag_latency",
        "rocketmq_storage_flush_behind_bytes",
        "rocketmq_storage_dispatch_behind_bytes",
        "rocketmq_send_to_dlq_messages_total",
        "rocketmq_send_busy_refusals_total",
        "rocketmq_namesrv_brokers",
        "rocketmq_namesrv_broker_heartbeat_age",
        "rocketmq_ha_slave_behind_bytes",
    }
    shown = set().union(*(q.metrics for _, q, _ in dashboard_queries(dash)))
    assert shown >= {
        "rocketmq_messages_in_total",
        "rocketmq_messages_out_total",
        "rocketmq_rpc_latency_bucket",
        "rocketmq_consumer_lag_messages",
        "rocketmq_consumer_lag_latency",
        "rocketmq_consumer_inflight_messages",
        "rocketmq_consumer_ready_messages",
        "rocketmq_producer_connections",
        "rocketmq_consumer_connections",
        "rocketmq_storage_size",
        "rocketmq_storage_disk_ratio",
        "rocketmq_storage_flush_behind_bytes",
        "rocketmq_storage_dispatch_behind_bytes",
        "rocketmq_send_to_dlq_messages_total",
        "rocketmq_send_busy_refusals_total",
        "rocketmq_pop_revive_lag",
        "rocketmq_namesrv_brokers",
        "rocketmq_namesrv_topics",
    }


def served(samples: Samples) -> dict[str, dict[str, set[str]]]:
    """Sample name -> label -> the values seen."""
    out: dict[str, dict[str, set[str]]] = {}
    for n, labels, _ in samples:
        for k, v in labels.items():
            out.setdefault(n, {}).setdefault(k, set()).add(v)
        out.setdefault(n, {})
    return out


def test_every_query_uses_names_and_labels_the_broker_serves(
    broker: BrokerProcess,  # noqa: F811 (the fixture imported above)
    namesrv: tuple[str, int],  # noqa: F811
    tmp_path: Path,
) -> None:
    dash, rules = load()
    queries = dashboard_queries(dash) + alert_queries(rules)
    wanted = set().union(*(q.metrics for _, q, _ in queries))
    topic, group = name("TMon"), name("cgMon")
    received: list[MessageExt] = []

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        received.extend(msgs)
        if msgs[0].body == b"dead":
            ctx.delay_level_when_next_consume = -1  # straight to the dead letter queue
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    # A slave of the module's broker, so the master serves its replication gauges.
    slave = start_broker(tmp_path / "slave", "brokerRole=SLAVE", "brokerId=1", namesrv=broker.namesrv_addr)
    with Producer(name("pgMon"), namesrv_addr=broker.namesrv_addr) as producer:
        for body in (b"one", b"two", b"dead"):
            assert producer.send(Message(topic, body)).ok
        consumer = push_consumer(broker.namesrv_addr, group, topic, listener, "monitoring-push")
        try:
            # Until every family the files use has samples (the clients connected, the DLQ message counted).
            deadline = time.monotonic() + 60
            while True:
                table = served(scrape(int(broker.ready["metrics"])) + scrape(namesrv[1]))
                missing = wanted - set(table)
                if not missing or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
        finally:
            consumer.shutdown()
            slave.stop()
    assert len(received) >= 3
    unknown = sorted((where, m) for where, q, _ in queries for m in q.metrics if m not in table)
    assert not unknown, f"metrics not served by the broker or the name server: {unknown}"

    checked = 0
    for where, q, shown in queries:
        for m, label, op, val in q.matchers:
            assert label in table[m], f"{where}: {m} has no label {label!r} ({sorted(table[m])})"
            if op == "=":
                assert val in table[m][label], f"{where}: {m}{{{label}={val!r}}} matches nothing served"
            checked += 1
        for m, label in q.grouped:
            assert label in table[m], f"{where}: groups {m} by {label!r}, not its label ({sorted(table[m])})"
            checked += 1
        for m in q.metrics:
            assert q.joined <= set(table[m]), f"{where}: {m} lacks {q.joined - set(table[m])}"
            assert shown <= set(table[m]), f"{where}: shows {shown - set(table[m])}, not labels of {m}"
        for by in q.by_lists:
            assert shown <= by, f"{where}: shows {shown - by}, aggregated away by by ({', '.join(by)})"
    assert checked > 50
