"""The web dashboard (:mod:`rmq.dashboard`) against a real broker (``python -m rmq.broker`` serving it on
``dashboardPort``): its JSON API checked against what rmq's own client sent, consumed and reads back, then
every page in headless Chromium (Debian's ``chromium``, driven by Playwright), with a screenshot of each
saved under ``target/dashboard-screenshots/`` (listed at the end of the pytest run).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from click.testing import CliRunner
from rmq.admin import cli
from rmq.client import ClientConfig, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageQueue
from rmq.client.sync import Admin, Producer, PushConsumer
from rmq.common.route import TopicConfig
from rmq.dashboard import Dashboard

from tests.brokerproc import BrokerProcess, start_broker

QUEUES = 4
FIRST = 8  # messages consumed by GROUP before it stops
MORE = 4  # messages sent after: a lag of 1 per queue
JSON_BODY = b'{"order": 1, "item": "book", "price": 12.5}'
SCREENSHOTS = Path(
    os.environ.get("RMQ_DASHBOARD_SCREENSHOTS")
    or Path(__file__).resolve().parents[2] / "target" / "dashboard-screenshots"
)


def name(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{time.monotonic_ns()}"


def eventually(check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """Retry ``check`` until it returns a true value: for the broker's asynchronous dispatch, index and
    retry handling, which no client can await."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except Exception:  # not there yet (no route, no message)
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@dataclass
class World:
    broker: BrokerProcess
    base: str
    cluster: str
    broker_name: str
    topic: str
    group: str
    reset_group: str
    dlq_topic: str
    dead_topic: str
    results: list[Any] = field(default_factory=list)

    @property
    def ns(self) -> str:
        return self.broker.namesrv_addr

    def get(self, path: str) -> tuple[int, Any]:
        return http_json(self.base + path)

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        return http_json(self.base + path, body)


def http_json(url: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _consume(
    ns: str, group: str, topic: str, want: int, status: ConsumeConcurrentlyStatus, **kw: Any
) -> None:
    """Run a push consumer of ``group`` until it has seen ``want`` messages, then shut it down (which
    commits its offsets)."""
    seen: set[str] = set()
    done = threading.Event()

    def listener(msgs: list[Any], context: Any) -> ConsumeConcurrentlyStatus:
        seen.update(m.msg_id for m in msgs)
        if len(seen) >= want:
            done.set()
        return status

    consumer = PushConsumer(
        group,
        client_config=ClientConfig(namesrv_addr=ns, instance_name=name("dash")),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **kw,
    )
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        assert done.wait(60), f"{group} consumed {len(seen)} of {want} messages"
    finally:
        consumer.shutdown()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    broker = start_broker(
        tmp_path_factory.mktemp("dashboard"),
        "autoCreateSubscriptionGroup=true",
        "dashboardPort=0",
        "dashboardAdmin=true",
    )
    try:
        ns = broker.namesrv_addr
        topic, dead_topic, group = name("Orders"), name("Payments"), name("cg")
        with Admin(namesrv_addr=ns) as admin:
            (master,) = [m for m in admin.masters() if m.addr == broker.broker_addr]
            admin.create_topic_in_cluster(master.cluster, TopicConfig(topic, QUEUES, QUEUES))
            admin.create_topic_in_cluster(master.cluster, TopicConfig(dead_topic, 1, 1))
        w = World(
            broker,
            f"http://127.0.0.1:{broker.ready['dashboard']}",
            master.cluster,
            master.broker_name,
            topic,
            group,
            name("cgreset"),
            "",
            dead_topic,
        )
        with Producer(name("pg"), namesrv_addr=ns) as producer:

            def send(i: int) -> Any:
                body = JSON_BODY if i == 0 else f"order #{i}".encode()
                msg = Message(topic, body, tags=f"tag{i % 2}", keys=[f"k{i}", "all"])
                return producer.send(msg, mq=MessageQueue(topic, master.broker_name, i % QUEUES))

            w.results = [send(i) for i in range(FIRST)]
            for g in (group, w.reset_group):
                _consume(ns, g, topic, FIRST, ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
            w.results += [send(i) for i in range(FIRST, FIRST + MORE)]
            # A message its group fails once with maxReconsumeTimes=0: straight to %DLQ%<group>.
            dead = Message(dead_topic, b"refund 42", tags="refund", keys=["dead-1"])
            dead.put_user_property("origin", "dashboard-test")
            producer.send(dead)
        dead_group = name("cgdead")
        _consume(
            ns,
            dead_group,
            dead_topic,
            1,
            ConsumeConcurrentlyStatus.RECONSUME_LATER,
            max_reconsume_times=0,
        )
        w.dlq_topic = "%DLQ%" + dead_group
        with Admin(namesrv_addr=ns) as admin:
            eventually(
                lambda: sum(t.max_offset for t in admin.topic_stats(topic)) == FIRST + MORE,
                "the consume queues",
            )
            eventually(lambda: admin.topic_stats(w.dlq_topic)[0].max_offset == 1, "the dead-letter message")
        yield w
    finally:
        broker.stop()


def dlq_message(w: World) -> dict[str, Any]:
    status, found = w.get(f"/api/messages?topic={quote(w.dlq_topic, safe='')}&begin=0")
    assert status == 200 and len(found["messages"]) >= 1, found
    return found["messages"][0]


# --- the JSON API ---------------------------------------------------------------------------------------


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


async def test_read_only_dashboard(world: World) -> None:
    import asyncio

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
        ):
            status, err = await asyncio.to_thread(http_json, base + path, body)
            assert status == 403 and "admin" in err["error"]
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
        [sys.executable, "-m", "rmq.admin", "dashboard", "-n", world.ns, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("rmqadmin dashboard: http://127.0.0.1:"), line
        url = line.split()[2]
        status, overview = http_json(url + "api/overview")
        assert (status, overview["admin"]) == (200, False)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert CliRunner().invoke(cli, ["dashboard", "--port", "99999", "-n", world.ns]).exit_code == 2


# --- in a browser ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is not installed (scripts/test installs it: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1360, "height": 860})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    context.close()
    assert errors == [], f"JavaScript errors: {errors}"


def open_page(page: Any, w: World, route: str, loaded: str) -> None:
    page.goto(f"{w.base}/#/{route}")
    page.wait_for_selector(f'#app[data-loaded="{loaded}"]')


@pytest.fixture
def screenshot(page: Any, saved_screenshots: list[Path]) -> Callable[[str], None]:
    """Saves a full-page screenshot as ``<name>.png`` (conftest.py lists them at the end of the run)."""

    def save(name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        saved_screenshots.append(path)

    return save


def cells(page: Any, testid: str) -> list[list[str]]:
    return page.eval_on_selector_all(
        f'[data-testid="{testid}"] tbody tr',
        "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText.trim()))",
    )


def test_browser_cluster(world: World, page: Any, screenshot: Callable[[str], None]) -> None:
    open_page(page, world, "cluster", "cluster")
    rows = cells(page, "brokers")
    assert [r[:5] for r in rows] == [
        [world.cluster, world.broker_name, "0", "MASTER", world.broker.broker_addr]
    ]
    page.wait_for_selector('[data-testid="rate-chart"] path.put')
    assert page.inner_text("#mode") == "admin"
    screenshot("1-cluster")


def test_browser_topics(world: World, page: Any, screenshot: Callable[[str], None]) -> None:
    open_page(page, world, "topics", "topics")
    names = [r[0] for r in cells(page, "topics")]
    assert world.topic in names and world.dlq_topic in names and "TBW102" not in names
    page.check('input[data-kind="system"]')
    assert "TBW102" in [r[0] for r in cells(page, "topics")]
    page.fill("#topic-filter", world.topic)
    assert [r[0] for r in cells(page, "topics")] == [world.topic]
    screenshot("2-topics")
    page.click(f"text={world.topic}")
    page.wait_for_selector('#app[data-loaded="topic"]')
    assert page.inner_text('[data-testid="total-messages"]') == str(FIRST + MORE)
    assert [r[1:4] for r in cells(page, "topic-queues")] == [[str(i), "0", "3"] for i in range(4)]
    screenshot("3-topic")


def test_browser_group_lag_matches_consumer_progress(
    world: World, page: Any, screenshot: Callable[[str], None]
) -> None:
    # The rmqadmin console command itself (a subprocess: Playwright's loop runs in this thread).
    progress = subprocess.run(
        [sys.executable, "-m", "rmq.admin", "consumerProgress", "-n", world.ns, "-g", world.group, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert progress.returncode == 0, progress.stderr
    expected = [
        [
            o["topic"],
            o["brokerName"],
            str(o["queueId"]),
            str(o["brokerOffset"]),
            str(o["consumerOffset"]),
            str(o["diff"]),
        ]
        for o in json.loads(progress.stdout)["offsets"]
    ]
    open_page(page, world, "groups", "groups")
    row = next(r for r in cells(page, "groups") if r[0] == world.group)
    assert row[1:3] == ["0", str(MORE)]
    screenshot("4-groups")
    open_page(page, world, f"group/{world.group}", "group")
    assert [r[:6] for r in cells(page, "lag")] == expected
    assert page.inner_text('[data-testid="lag-total"]') == str(MORE)
    screenshot("5-group")
    # Reset offset (an admin dashboard), from the page: the reset group (at 0, test_reset_offset) to the end.
    open_page(page, world, f"group/{world.reset_group}", "group")
    page.select_option("#reset-form select[name=topic]", world.topic)
    page.fill("#reset-form input[name=time]", "2100-01-01T00:00:00")
    page.click("#reset-form button[type=submit]")
    page.wait_for_selector("#reset-result .ok")
    assert page.inner_text("#reset-result").strip() == "reset 4 queues"
    with Admin(namesrv_addr=world.ns) as admin:
        rows = admin.consume_stats(world.reset_group, world.topic).rows()
    assert [(o.consumer_offset, o.diff) for o in rows] == [(3, 0)] * 4


def test_browser_search_finds_sent_messages(
    world: World, page: Any, screenshot: Callable[[str], None]
) -> None:
    open_page(page, world, f"messages?topic={world.topic}", "messages")
    page.click("button[type=submit]")  # the last hour
    page.wait_for_selector('[data-testid="result-count"]')
    ids = [r[0] for r in cells(page, "results")]
    assert sorted(ids) == sorted(r.msg_id for r in world.results)
    page.select_option("select[name=by]", "key")
    page.fill("input[name=key]", "k5")
    page.click("button[type=submit]")
    page.wait_for_function(
        "n => document.querySelector('[data-testid=result-count]')?.innerText.startsWith(n)", arg="1 message"
    )
    assert [r[0] for r in cells(page, "results")] == [world.results[5].msg_id]
    screenshot("6-messages")
    page.select_option("select[name=by]", "id")
    page.fill("input[name=id]", world.results[0].msg_id)  # the client id, looked up in the topic
    page.click("button[type=submit]")
    page.wait_for_selector('#app[data-loaded="message"]')
    assert json.loads(page.inner_text('[data-testid="body"]')) == json.loads(JSON_BODY)
    assert "k0 all" in page.inner_text('[data-testid="message-detail"]')
    props = dict((r[0], r[1]) for r in cells(page, "properties"))
    assert props["TAGS"] == "tag0"
    screenshot("7-message")
    page.click("button[data-mode=hex]")
    assert page.inner_text('[data-testid="body"]').startswith("00000000  7b 22 6f 72")


def test_browser_resend_dead_letter(world: World, page: Any, screenshot: Callable[[str], None]) -> None:
    dead = dlq_message(world)
    open_page(page, world, f"message/{quote(world.dlq_topic, safe='')}/{dead['offsetMsgId']}", "message")
    page.click('[data-testid="resend"]')
    result = page.wait_for_selector('[data-testid="resend-result"]')
    assert result.inner_text().startswith(f"sent to {world.dead_topic} as ")
    screenshot("8-dead-letter")


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
