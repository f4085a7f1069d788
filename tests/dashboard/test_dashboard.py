"""The dashboard's JSON API (:mod:`rmq.dashboard`) against a real broker serving it on ``dashboardPort``
(``conftest.py``'s world), checked against what rmq's own client sent, consumed and reads back; the
read-only mode, the HTTP edges, ``rmqadmin dashboard`` and the broker properties."""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner
from rmq.admin import cli
from rmq.client.sync import Admin
from rmq.dashboard import Dashboard

from tests.dashboard.world import (
    FIRST,
    JSON_BODY,
    MORE,
    TRACE_SENT_AT,
    World,
    dlq_message,
    eventually,
    group_flags,
    http_json,
    name,
)


def test_cluster_page_data(world: World) -> None:
    status, data = world.get("/api/cluster")
    assert status == 200
    (row,) = [b for b in data["brokers"] if b["addr"] == world.broker.broker_addr]
    assert (row["cluster"], row["brokerName"], row["role"], row["brokerId"]) == (
        world.cluster,
        world.broker_name,
        "MASTER",
        0,
    )
    assert 0.0 < row["diskRatio"] < 1.0
    assert row["msgPutToday"] >= FIRST + MORE + 1
    status, overview = world.get("/api/overview")
    assert overview == {"namesrvAddr": world.ns, "admin": True}


def test_rates_sampled(world: World) -> None:
    samples = eventually(
        lambda: [s for s in world.get("/api/rates")[1]["samples"] if s["put"] > 0], "a sample with sends"
    )
    assert all(s["put"] >= 0 and s["get"] >= 0 for s in samples)


def test_topics_and_topic_detail(world: World) -> None:
    status, data = world.get("/api/topics")
    kinds = {t["topic"]: t["kind"] for t in data["topics"]}
    assert kinds[world.topic] == "normal"
    assert kinds[world.dlq_topic] == "dlq"
    assert kinds["TBW102"] == "system"
    status, t = world.get(f"/api/topic?topic={world.topic}")
    assert status == 200
    assert [(q["queueId"], q["minOffset"], q["maxOffset"]) for q in t["queues"]] == [
        (i, 0, 3) for i in range(4)
    ]
    assert t["totalMessages"] == FIRST + MORE
    assert t["route"]["queues"] == [
        {"brokerName": world.broker_name, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
    ]
    assert t["route"]["brokers"][0]["addrs"] == {"0": world.broker.broker_addr}
    assert world.group in t["consumerGroups"]
    assert world.get("/api/topic?topic=NoSuchTopic")[0] == 404
    assert world.get("/api/topic")[0] == 400


def test_group_lag_matches_consume_stats(world: World) -> None:
    with Admin(namesrv_addr=world.ns) as admin:
        stats = admin.consume_stats(world.group)
    status, g = world.get(f"/api/group?group={world.group}")
    assert status == 200
    assert g["stats"]["offsets"] == [o.to_dict() for o in stats.rows()]
    assert [
        (o["queueId"], o["brokerOffset"], o["consumerOffset"], o["diff"])
        for o in g["stats"]["offsets"]
        if o["topic"] == world.topic
    ] == [(i, 3, 2, 1) for i in range(4)]
    assert g["stats"]["diffTotal"] == MORE
    assert g["online"] is False and g["members"] == []
    status, groups = world.get("/api/groups")
    row = next(r for r in groups["groups"] if r["group"] == world.group)
    assert (row["members"], row["diffTotal"]) == (0, MORE)


def test_producers_page_data(world: World) -> None:
    def live() -> list[dict]:
        rows = world.get("/api/producers")[1]["producers"]
        return [r for r in rows if r["group"] == world.producer_group and r["clientId"]]

    (row,) = eventually(live, "the live producer's heartbeat")
    assert (row["clientId"], row["brokerName"], row["brokerAddr"], row["language"]) == (
        world.producer_client_id,
        world.broker_name,
        world.broker.broker_addr,
        "PYTHON",
    )
    assert row["clientAddr"].startswith("127.0.0.1:") and row["version"]
    assert row["lastUpdateTimestamp"] > 0
    assert world.get("/api/producers")[1]["errors"] == []


def test_message_search_by_time_key_and_id(world: World) -> None:
    status, found = world.get(
        f"/api/messages?topic={world.topic}&begin=0&end={int(time.time() * 1000) + 60_000}"
    )
    assert status == 200
    assert sorted(m["msgId"] for m in found["messages"]) == sorted(r.msg_id for r in world.results)
    assert "body" not in found["messages"][0]
    status, found = world.get(f"/api/messages?topic={world.topic}&begin=0&limit=5")
    assert len(found["messages"]) == 5 and found["truncated"] is True
    status, by_key = world.get(f"/api/messages?topic={world.topic}&key=k5")
    assert [m["msgId"] for m in by_key["messages"]] == [world.results[5].msg_id]
    first = world.results[0]
    for query in (f"id={first.offset_msg_id}", f"id={first.msg_id}&topic={world.topic}"):
        status, m = world.get(f"/api/message?{query}")
        assert status == 200, m
        assert base64.b64decode(m["body"]) == JSON_BODY
        assert (m["msgId"], m["tags"], m["keys"], m["queueId"], m["brokerName"]) == (
            first.msg_id,
            "tag0",
            "k0 all",
            0,
            world.broker_name,
        )
        assert m["properties"]["KEYS"] == "k0 all"
    assert world.get(f"/api/messages?topic={world.topic}&key=nokey")[0] == 404
    assert world.get(f"/api/messages?topic={world.topic}&begin=10&end=5")[0] == 400
    assert world.get("/api/message?id=00000000")[0] == 404


def test_message_trace(world: World) -> None:
    first = world.results[0]
    status, t = world.get(f"/api/trace?id={first.msg_id}")
    assert (status, t["traceTopic"]) == (200, "RMQ_SYS_TRACE_TOPIC"), t
    rows = [(v["type"], v["group"], v["timestamp"] - TRACE_SENT_AT, v.get("costTime")) for v in t["traces"]]
    assert rows == [
        ("Pub", "pg_traced", 0, 3),
        ("SubBefore", world.group, 500, None),
        ("SubAfter", world.group, 512, 12),
    ]
    assert [v.get("status") for v in t["traces"]] == ["success", None, "failed"]
    assert t["traces"][1]["retryTimes"] == 0
    assert all(v["clientHost"] == "127.0.0.1" for v in t["traces"])  # the trace message's born host
    # rmqadmin queryMsgTraceById reads the same records (Java's view: Pub and SubAfter only).
    args = ["queryMsgTraceById", "-n", world.ns, "-i", first.msg_id, "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["traces"] == [t["traces"][0], t["traces"][2]]
    status, t = world.get(f"/api/trace?id={world.results[1].msg_id}")
    assert (status, t["traces"]) == (200, [])  # no trace written: none, not an error
    assert world.get("/api/trace")[0] == 400


def test_reset_offset(world: World) -> None:
    group = world.reset_group
    status, r = world.post("/api/group/reset", {"group": group, "topic": world.topic, "timestamp": 0})
    assert status == 200, r
    assert r["consumersNotified"] is False
    assert [(o["queueId"], o["offset"]) for o in r["offsets"]] == [(i, 0) for i in range(4)]
    status, g = world.get(f"/api/group?group={group}")
    rows = [(o["consumerOffset"], o["diff"]) for o in g["stats"]["offsets"] if o["topic"] == world.topic]
    assert rows == [(0, 3)] * 4
    assert world.post("/api/group/reset", {"group": group})[0] == 400


def test_resend_dead_letter(world: World) -> None:
    dead = dlq_message(world)
    assert dead["properties"]["RETRY_TOPIC"] == world.dead_topic
    status, r = world.post("/api/dlq/resend", {"topic": world.dlq_topic, "msgId": dead["offsetMsgId"]})
    assert status == 200, r
    assert (r["topic"], r["sendStatus"]) == (world.dead_topic, "SEND_OK")
    status, copy = world.get(f"/api/message?id={r['offsetMsgId']}")
    assert (copy["topic"], copy["tags"], copy["keys"], base64.b64decode(copy["body"])) == (
        world.dead_topic,
        "refund",
        "dead-1",
        b"refund 42",
    )
    assert copy["properties"]["origin"] == "dashboard-test"
    assert copy["msgId"] != dead["msgId"] and "RETRY_TOPIC" not in copy["properties"]
    # Only dead-letter messages are resent.
    status, err = world.post(
        "/api/dlq/resend", {"topic": world.topic, "msgId": world.results[0].offset_msg_id}
    )
    assert status == 400 and "not a dead-letter topic" in err["error"]


def test_topic_create_update_delete(world: World) -> None:
    topic = name("Ops")
    body = {"topic": topic, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "order": True}
    status, r = world.post("/api/topic/update", body)
    assert status == 200, r
    assert (r["brokers"], r["topicConfig"]["order"]) == ([world.broker.broker_addr], True)
    status, t = world.get(f"/api/topic?topic={topic}")
    assert status == 200 and t["order"] is True
    assert [(q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in t["route"]["queues"]] == [(2, 2, 6)]
    status, r = world.post("/api/topic/update", {**body, "writeQueueNums": 3, "perm": 4, "order": False})
    assert status == 200, r
    status, t = world.get(f"/api/topic?topic={topic}")
    assert [(q["writeQueueNums"], q["perm"]) for q in t["route"]["queues"]] == [(3, 4)]
    assert t["order"] is False
    status, r = world.post("/api/topic/delete", {"topic": topic})
    assert (status, r["brokers"]) == (200, [world.broker.broker_addr])
    assert world.get(f"/api/topic?topic={topic}")[0] == 404
    assert topic not in [t["topic"] for t in world.get("/api/topics")[1]["topics"]]
    # Bad input: a clear 400 naming the field; an unknown topic or cluster: 404.
    for bad, words in (
        ({**body, "readQueueNums": 0}, "readQueueNums=0 is not a whole number in [1, 1024]"),
        ({**body, "topic": "bad name"}, "illegal characters"),
        ({**body, "order": "yes"}, "order='yes' is not a bool"),
        ({"readQueueNums": 1}, "missing field 'topic'"),
    ):
        status, err = world.post("/api/topic/update", bad)
        assert status == 400 and words in err["error"], err
    assert world.post("/api/topic/update", {**body, "cluster": "NoSuchCluster"})[0] == 404
    assert world.post("/api/topic/delete", {"topic": topic})[0] == 404


def test_group_create_update_delete(world: World) -> None:
    group = name("cgops")
    body = {"group": group, "retryMaxTimes": 3, "consumeEnable": False, "consumeMessageOrderly": True}
    status, r = world.post("/api/group/update", body)
    assert (status, r["brokers"]) == (200, [world.broker.broker_addr]), r
    status, g = world.get(f"/api/group?group={group}")
    config = g["config"]
    assert group_flags(config) == (
        3,
        False,
        True,
    )
    # An update changes the fields it names and keeps the others.
    status, r = world.post("/api/group/update", {"group": group, "retryMaxTimes": 5})
    assert status == 200, r
    config = world.get(f"/api/group?group={group}")[1]["config"]
    assert group_flags(config) == (
        5,
        False,
        True,
    )
    assert group in [g["group"] for g in world.get("/api/groups")[1]["groups"]]
    status, r = world.post("/api/group/delete", {"group": group, "removeOffset": True})
    assert (status, r["brokers"]) == (200, [world.broker.broker_addr]), r
    assert world.get(f"/api/group?group={group}")[1]["config"] is None
    assert group not in [g["group"] for g in world.get("/api/groups")[1]["groups"]]
    status, err = world.post("/api/group/delete", {"group": group})
    assert status == 404 and "no broker has the subscription group" in err["error"]
    status, err = world.post("/api/group/update", {"group": group, "retryMaxTimes": 2000})
    assert status == 400 and "retryMaxTimes=2000" in err["error"]


async def test_operations_logged(world: World, caplog: pytest.LogCaptureFixture) -> None:
    """Each admin change the dashboard asks for is logged: who asked, with what, and on which brokers it was
    done (the broker logs its own side)."""
    dashboard = Dashboard(namesrv_addr=world.ns, admin_enabled=True, sample_interval_s=60)
    await dashboard.start("127.0.0.1", 0)
    topic = name("Logged")
    try:
        base = dashboard.url.rstrip("/")
        with caplog.at_level(logging.INFO, logger="rmq.dashboard.server"):
            for path in ("/api/topic/update", "/api/topic/delete"):
                status, r = await asyncio.to_thread(http_json, base + path, {"topic": topic})
                assert status == 200, r
            status, r = await asyncio.to_thread(http_json, base + "/api/topic/update", {"topic": "x y"})
            assert status == 400
    finally:
        await dashboard.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "rmq.dashboard.server"]
    addr = world.broker.broker_addr
    for what in ("creating or updating a topic", "deleting a topic"):
        assert any(
            line.startswith(f"dashboard: {what} asked by 127.0.0.1:") and topic in line for line in lines
        )
        assert f"dashboard: {what} done on {addr}: {{'topic': '{topic}'}}" in lines
    assert any(
        "creating or updating a topic ({'topic': 'x y'}) failed: topic 'x y'" in line for line in lines
    )


async def test_read_only_dashboard(world: World) -> None:
    dashboard = Dashboard(namesrv_addr=world.ns, sample_interval_s=0.2)
    await dashboard.start("127.0.0.1", 0)
    try:
        base = dashboard.url.rstrip("/")
        status, overview = await asyncio.to_thread(http_json, base + "/api/overview")
        assert overview["admin"] is False
        status, cluster = await asyncio.to_thread(http_json, base + "/api/cluster")
        assert status == 200 and cluster["brokers"]
        for path, body in (
            ("/api/dlq/resend", {"topic": world.dlq_topic, "msgId": "x"}),
            ("/api/group/reset", {"group": world.group, "topic": world.topic, "timestamp": 0}),
            ("/api/topic/update", {"topic": "ReadOnlyTopic"}),
            ("/api/topic/delete", {"topic": world.topic}),
            ("/api/group/update", {"group": "ReadOnlyGroup"}),
            ("/api/group/delete", {"group": world.group}),
        ):
            status, err = await asyncio.to_thread(http_json, base + path, body)
            assert status == 403 and "admin" in err["error"]
        status, _ = await asyncio.to_thread(http_json, base + "/api/topic?topic=ReadOnlyTopic")
        assert status == 404  # refused, not made
    finally:
        await dashboard.stop()


def test_http_edges(world: World) -> None:
    host, port = "127.0.0.1", int(world.broker.ready["dashboard"])
    conn = http.client.HTTPConnection(host, port, timeout=10)  # keep-alive: two requests, one connection
    for path, status, kind in (
        ("/", 200, "text/html"),
        ("/static/app.js", 200, "text/javascript"),
        ("/static/../views.py", 404, "application/json"),
        ("/api/nothing", 404, "application/json"),
    ):
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        assert (resp.status, resp.getheader("Content-Type", "").split(";")[0]) == (status, kind), path
    conn.close()
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"NONSENSE\r\n\r\n")
        assert s.recv(1024).startswith(b"HTTP/1.1 400 ")
    assert http_json(world.base + "/api/cluster", {"x": 1})[0] == 405


def test_rmqadmin_dashboard_command(world: World) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmq.admin", "dashboard", "-n", world.ns, "--port", "0", "--login"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("rmqadmin dashboard: http://127.0.0.1:"), line
        assert "(login for admin actions)" in line
        url = line.split()[2]
        status, overview = http_json(url + "api/overview")
        assert (status, overview["admin"], overview["login"]) == (200, False, True)  # until a login
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert CliRunner().invoke(cli, ["dashboard", "--port", "99999", "-n", world.ns]).exit_code == 2


def test_dashboard_properties() -> None:
    from rmq.broker.config import BrokerConfig, ConfigError

    cfg = BrokerConfig()
    assert (cfg.dashboard_port, cfg.dashboard_admin) == (-1, False)  # off and read-only by default
    cfg.load([("-p", "dashboardPort", "8080"), ("-p", "dashboardAdmin", "true")])
    assert (cfg.dashboard_port, cfg.dashboard_admin) == (8080, True)
    assert cfg.properties()["dashboardPort"] == "8080"
    with pytest.raises(ConfigError, match="dashboardAdmin: 'maybe' is not true or false"):
        cfg.set("dashboardAdmin", "maybe")
    cfg.set("dashboardPort", "70000")
    with pytest.raises(ConfigError, match="dashboardPort: 70000 is not a TCP port"):
        cfg.validate()


def test_ops_write_perm_and_name_server_switch(world: World) -> None:
    status, ops = world.get("/api/ops")
    assert (status, ops["namesrvAddrs"]) == (200, [world.ns])
    (row,) = [b for b in ops["brokers"] if b["brokerName"] == world.broker_name]
    assert row["writable"] is True and row["namesrvs"][0]["perm"] & 2
    try:
        status, r = world.post("/api/ops/wipeWritePerm", {"brokerName": world.broker_name})
        assert status == 200 and r["namesrvs"][world.ns] >= 1, r
        (row,) = [b for b in world.get("/api/ops")[1]["brokers"] if b["brokerName"] == world.broker_name]
        assert row["writable"] is False and not row["namesrvs"][0]["perm"] & 2
    finally:
        status, r = world.post("/api/ops/addWritePerm", {"brokerName": world.broker_name})
    assert status == 200 and r["namesrvs"][world.ns] >= 1, r
    (row,) = [b for b in world.get("/api/ops")[1]["brokers"] if b["brokerName"] == world.broker_name]
    assert row["writable"] is True
    assert world.post("/api/ops/wipeWritePerm", {})[0] == 400
    # Name servers: each must answer before the switch.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: refused
        status, err = world.post("/api/ops/namesrv", {"namesrvAddr": f"{world.ns};{dead}"})
    assert status == 400 and f"name server {dead} does not answer" in err["error"], err
    assert world.post("/api/ops/namesrv", {"namesrvAddr": "nohostport"})[0] == 400
    port = world.ns.rsplit(":", 1)[1]
    other = f"localhost:{port}"
    status, r = world.post("/api/ops/namesrv", {"namesrvAddr": other})
    try:
        assert (status, r["namesrvAddr"], r["previous"]) == (200, other, world.ns), r
        assert world.get("/api/overview")[1]["namesrvAddr"] == other
        assert world.get("/api/ops")[1]["namesrvAddrs"] == [other]
        assert world.get("/api/cluster")[0] == 200
    finally:
        assert world.post("/api/ops/namesrv", {"namesrvAddr": world.ns})[0] == 200
    logged = "\n".join(world.broker.log)
    assert f"wiping a broker's write permission done on {world.broker_name}" in logged
    assert f"switching the name servers done on {other}" in logged
    assert f"name servers switched from {world.ns} to {other}" in logged


def test_acl_page_with_acl_off(world: World) -> None:
    status, data = world.get("/api/acl")
    assert status == 200 and data["aclEnabled"] is False
    (row,) = [b for b in data["brokers"] if b["addr"] == world.broker.broker_addr]
    assert "ACL is off" in row["error"], row


async def test_pop_group_in_flight_and_grpc_clients(world: World) -> None:
    """A POP consumer (5.x's way, over Remoting here) pops the topic's messages and keeps them invisible:
    the groups list, the group's page and the cluster's broker row show them in flight until acked; the
    broker row also carries the revive backlog and the 5.x (gRPC) client counts."""
    from tests.broker.popdriver import PopDriver

    group = name("popg")
    d = PopDriver(world.broker.broker_addr, world.broker_name)
    try:
        await d.create_group(group)
        popped = []
        deadline = time.monotonic() + 30
        while len(popped) < FIRST + MORE and time.monotonic() < deadline:
            popped += (await d.pop(group, world.topic, invisible_ms=300_000)).messages
        assert len(popped) == FIRST + MORE

        def fetch(path: str) -> dict:
            status, data = world.get(path)
            assert status == 200, data
            return data

        # in flight once the broker's revive service has read the pops' checkpoints
        g = await asyncio.to_thread(
            eventually,
            lambda: (x := fetch(f"/api/group?group={group}"))["stats"]["inflightTotal"] and x,
            "the checkpoints read by the revive service",
        )
        per_queue = {o["queueId"]: o["inflight"] for o in g["stats"]["offsets"] if o["topic"] == world.topic}
        assert g["stats"]["inflightTotal"] == FIRST + MORE and sum(per_queue.values()) == FIRST + MORE
        rows = (await asyncio.to_thread(fetch, "/api/groups"))["groups"]
        assert next(r for r in rows if r["group"] == group)["inflight"] == FIRST + MORE
        brokers = (await asyncio.to_thread(fetch, "/api/cluster"))["brokers"]
        (row,) = [b for b in brokers if b["addr"] == world.broker.broker_addr]
        assert row["popInflight"] >= FIRST + MORE
        assert row["reviveBehindRecords"] >= 0 and row["reviveBehindMs"] == 0  # nothing due for 300 s
        assert row["grpcProducers"] >= 0 and row["grpcConsumers"] >= 0

        assert (await d.batch_ack(popped)).code == 0
        await asyncio.to_thread(
            eventually,
            lambda: fetch(f"/api/group?group={group}")["stats"]["inflightTotal"] == 0,
            "the acks read by the revive service",
        )
    finally:
        await d.close()
