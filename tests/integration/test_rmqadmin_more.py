"""``rmqadmin``'s broker views, name server config and export commands (brokerConsumeStats, producer,
queryCq, getNamesrvConfig, updateNamesrvConfig, exportMetadata, exportConfigs, exportMetrics) against a real
broker (``python -m rmq.broker`` with its name server), with state set up by rmq's own client. The same
commands' request codes are compared with Apache's broker through Apache's mqadmin in
``tests/peers/test_mqadmin_more.py``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rmq.admin import Exit
from rmq.client import ClientConfig
from rmq.client.sync import Producer

from tests.integration import test_rmqadmin as base
from tests.integration.test_rmqadmin import (
    QUEUES,
    Cluster,
    Collector,
    eventually,
    name,
    push_consumer,
    send_keyed,
)

broker = base.broker  # a broker of this module's own
admin = base.admin

COUNT = 8


@pytest.fixture(scope="module")
def consumed(admin: Cluster) -> Iterator[tuple[str, str, str]]:
    """A topic with COUNT messages, a producer group online and a consumer group that consumed them all
    and stays online: (topic, group, producer group)."""
    topic, group, pgroup = admin.topic(), name("cg"), name("pg")
    send_keyed(admin.namesrv, topic, admin.broker_name, COUNT)
    producer = Producer(
        pgroup, client_config=ClientConfig(namesrv_addr=admin.namesrv, instance_name=name("p"))
    )
    producer.start()
    collector = Collector(COUNT)
    consumer = push_consumer(admin.namesrv, group, topic, collector)
    try:
        assert collector.done.wait(60)
        eventually(
            lambda: all(
                r["consumerOffset"] == COUNT // QUEUES
                for r in admin.ok("consumerProgress", "-g", group, as_json=True)["offsets"]
                if r["topic"] == topic
            ),
            "the group's committed offsets",
            timeout=90,
        )
        yield topic, group, pgroup
    finally:
        consumer.shutdown()
        producer.shutdown()


def test_broker_consume_stats(admin: Cluster, consumed: tuple[str, str, str]) -> None:
    topic, group, _ = consumed
    table = admin.ok("brokerConsumeStats", "-b", admin.addr)
    assert table.splitlines()[0].split()[:3] == ["#Topic", "#Group", "#Broker"]
    mine = sorted(line.split()[:7] for line in table.splitlines() if f" {group} " in f" {line} ")
    assert mine == [[topic, group, admin.broker_name, str(q), "2", "2", "0"] for q in range(QUEUES)]
    assert re.search(r"^Diff Total: \d+$", table, re.MULTILINE)
    data = admin.ok("brokerConsumeStats", "-b", admin.addr, as_json=True)
    assert data["brokerAddr"] == admin.addr
    assert {(r["topic"], r["queueId"], r["diff"]) for r in data["rows"] if r["group"] == group} == {
        (topic, q, 0) for q in range(QUEUES)
    }
    # -l: only queues at least this far behind; -o true: order topics only (this one is not).
    assert not [
        r
        for r in admin.ok("brokerConsumeStats", "-b", admin.addr, "-l", "1", as_json=True)["rows"]
        if r["group"] == group
    ]
    assert not [
        r
        for r in admin.ok("brokerConsumeStats", "-b", admin.addr, "-o", "true", as_json=True)["rows"]
        if r["group"] == group
    ]


def test_producer(admin: Cluster, consumed: tuple[str, str, str]) -> None:
    _, _, pgroup = consumed
    out = admin.ok("producer", "-b", admin.addr)
    (line,) = [line for line in out.splitlines() if f"({pgroup})" in line]
    assert re.fullmatch(
        rf"producer group \({pgroup}\) instance : clientId=\S+,remoteIP=/127\.0\.0\.1:\d+, language=PYTHON, "
        r"version=\d+, lastUpdateTimestamp=\d+",
        line,
    ), line
    data = admin.ok("producer", "-b", admin.addr, as_json=True)
    (p,) = data[pgroup]
    assert p["language"] == "PYTHON" and p["remoteIP"].startswith("/127.0.0.1:")


def test_query_cq(admin: Cluster, consumed: tuple[str, str, str]) -> None:
    topic, group, _ = consumed
    out = admin.ok("queryCq", "-t", topic, "-q", "1", "-i", "0", "-g", group)
    assert "max: 2, min: 0" in out and out.count("ConsumeQueueData{") == 2
    assert "Filter data: \nnull" in out and '"subString": "*"' in out
    data = admin.ok("queryCq", "-t", topic, "-q", "1", "-i", "1", "-c", "5", "-b", admin.addr, as_json=True)
    (unit,) = data["queueData"]
    assert unit["physicSize"] > 0 and unit["physicOffset"] >= 0 and data["maxQueueIndex"] == 2
    # The message at that CommitLog offset is the queue's second (message 5: queue 1, offset 1).
    msg = admin.ok(
        "queryMsgByOffset", "-t", topic, "-b", admin.broker_name, "-i", "1", "-o", "1", as_json=True
    )
    assert msg["commitLogOffset"] == unit["physicOffset"]
    missing = admin.run("queryCq", "-t", topic, "-q", "1", "-i", "7", "-b", admin.addr)
    assert missing.code == Exit.NOT_FOUND and f"Index 7 of 1@{topic} is not exist!" in missing.err
    no_queue = admin.run("queryCq", "-t", topic, "-q", "9", "-i", "0", "-b", admin.addr)
    assert no_queue.code == Exit.BROKER_ERROR and f"9@{topic} is not exist!" in no_queue.err


def test_namesrv_config(admin: Cluster) -> None:
    out = admin.ok("getNamesrvConfig")
    assert out.splitlines()[0] == f"============{admin.namesrv}============"
    conf = admin.ok("getNamesrvConfig", as_json=True)[admin.namesrv]
    assert conf["listenPort"] == admin.namesrv.rsplit(":", 1)[1]
    assert conf["orderMessageEnable"] == "true"
    try:
        out = admin.ok("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false")
        assert out.splitlines() == [
            f"update name server config success![{admin.namesrv}]",
            "orderMessageEnable : false",
        ]
        assert admin.ok("getNamesrvConfig", as_json=True)[admin.namesrv]["orderMessageEnable"] == "false"
    finally:
        admin.ok("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    for key, value, remark in (
        ("kvConfigPath", "/tmp/x", "Can not update config path"),
        ("listenPort", "1", "these properties cannot be changed at run time: listenPort"),
        ("serverWorkerThreads", "4", "not implemented by rmq: serverWorkerThreads"),
        ("noSuchKey", "1", "unknown name server properties: noSuchKey"),
        ("orderMessageEnable", "maybe", "orderMessageEnable: 'maybe' is not a boolean (true or false)"),
    ):
        refused = admin.run("updateNamesrvConfig", "-k", key, "-v", value)
        assert refused.code == Exit.BROKER_ERROR and remark in refused.err, (key, refused.err)
    assert admin.ok("getNamesrvConfig", as_json=True)[admin.namesrv]["orderMessageEnable"] == "true"


def _exported(out: str) -> Any:
    found = re.fullmatch(r"export (\S+) success", out.strip())
    assert found is not None, out
    return json.loads(Path(found.group(1)).read_text())


def test_export_metadata(admin: Cluster, consumed: tuple[str, str, str], tmp_path: Path) -> None:
    topic, group, _ = consumed
    data = _exported(admin.ok("exportMetadata", "-c", admin.cluster, "-f", str(tmp_path / "all")))
    assert set(data) == {"topicConfigTable", "subscriptionGroupTable", "exportTime"}
    assert data["topicConfigTable"][topic]["readQueueNums"] == QUEUES
    assert data["subscriptionGroupTable"][group]["groupName"] == group
    assert "TBW102" not in data["topicConfigTable"] and f"%RETRY%{group}" not in data["topicConfigTable"]
    special = _exported(
        admin.ok("exportMetadata", "-c", admin.cluster, "-s", "-t", "-f", str(tmp_path / "s"))
    )
    assert (
        set(special) == {"topicConfigTable", "exportTime"}
        and f"%RETRY%{group}" in special["topicConfigTable"]
    )
    groups = _exported(admin.ok("exportMetadata", "-b", admin.addr, "-g", "-f", str(tmp_path / "g")))
    assert (
        group in groups["subscriptionGroupTable"] and "TOOLS_CONSUMER" not in groups["subscriptionGroupTable"]
    )
    assert admin.run("exportMetadata", "-b", admin.addr, "-f", str(tmp_path)).code == Exit.USAGE


def test_export_configs_and_metrics(admin: Cluster, consumed: tuple[str, str, str], tmp_path: Path) -> None:
    configs = _exported(admin.ok("exportConfigs", "-c", admin.cluster, "-f", str(tmp_path)))
    assert configs["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0}
    conf = configs["brokerConfigs"][admin.broker_name]
    assert conf["brokerName"] == admin.broker_name and conf["brokerRole"] == "ASYNC_MASTER"
    metrics = _exported(admin.ok("exportMetrics", "-c", admin.cluster, "-f", str(tmp_path)))
    report = metrics["evaluateReport"][admin.broker_name]
    assert report["runtimeQuota"]["topicSize"] >= 1 and report["runtimeQuota"]["groupSize"] >= 1
    assert report["runtimeQuota"]["oneDayNum"]["normalOneDayInNum"] == 0  # the broker started today
    assert any(c.startswith("PYTHON%") for c in report["runtimeVersion"]["clientInfo"])
    assert set(metrics["totalData"]["totalTps"]) == {
        "totalNormalInTps",
        "totalNormalOutTps",
        "totalTransInTps",
        "totalScheduleInTps",
    }
    assert admin.run("exportConfigs", "-c", name("nocluster"), "-f", str(tmp_path)).code == Exit.NOT_FOUND
