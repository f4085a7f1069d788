"""The dashboard tests' world: a broker (``python -m rmq.broker``) serving an admin dashboard on
``dashboardPort``, a topic with messages (one JSON body), a group that consumed some of them (a lag of 1 per
queue), a group that consumed none (for resets), a dead-letter message and a producer that stays connected
(heartbeats every 0.5 s); and the helpers that read it."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rmq.client import ClientConfig, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageQueue
from rmq.client.sync import Admin, Producer, PushConsumer
from rmq.common.codes import TRACE_TOPIC
from rmq.common.route import TopicConfig

from tests.acl.aclenv import ADMIN, INNER, RULES
from tests.brokerproc import BrokerProcess, start_broker

QUEUES = 4
FIRST = 8  # messages consumed by GROUP before it stops
MORE = 4  # messages sent after: a lag of 1 per queue
JSON_BODY = b'{"order": 1, "item": "book", "price": 12.5}'
TRACE_SENT_AT = 1_700_000_000_000
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
    producer_group: str = ""
    producer_client_id: str = ""

    @property
    def ns(self) -> str:
        return self.broker.namesrv_addr

    def get(self, path: str) -> tuple[int, Any]:
        return http_json(self.base + path)

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        return http_json(self.base + path, body)


def http_json(url: str, body: Any = None, cookie: str = "") -> tuple[int, Any]:
    return http_json_cookie(url, body, cookie)[:2]


def http_json_cookie(url: str, body: Any = None, cookie: str = "") -> tuple[int, Any, str]:
    """The status, the JSON answer and the ``Set-Cookie`` header (``""``: none); ``cookie`` is sent."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **({"Cookie": cookie} if cookie else {})}
    req = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read()), resp.headers.get("Set-Cookie", "")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), exc.headers.get("Set-Cookie", "")


def login(base: str) -> str:
    """The session cookie of a login as the ACL admin account."""
    status, _, set_cookie = http_json_cookie(
        base + "/api/login", {"accessKey": ADMIN[0], "secretKey": ADMIN[1]}
    )
    assert status == 200
    return f"rmq_dashboard_session={SimpleCookie(set_cookie)['rmq_dashboard_session'].value}"


def running_acl_broker(base: Path) -> Iterator[BrokerProcess]:
    """A broker with ACL on (``tests/acl/aclenv.py``'s rules: ``rmqadmin`` an admin account, ``app`` not)
    serving its dashboard, which reads as the broker's inner (admin) account and wants a login for changes."""
    conf = base / "rocketmq" / "conf"
    conf.mkdir(parents=True)
    (conf / "plain_acl.yml").write_text(RULES)
    broker = start_broker(
        base / "store",
        "aclEnable=true",
        f"innerClientAuthenticationCredentials={INNER}",
        f"rocketmqHome={base / 'rocketmq'}",
        "dashboardPort=0",
    )
    try:
        yield broker
    finally:
        broker.stop()


def group_flags(config: dict[str, Any]) -> tuple[int, bool, bool]:
    """A subscription group config's retry max times, consume enable and orderly flag."""
    return config["retryMaxTimes"], config["consumeEnable"], config.get("consumeMessageOrderly", False)


def trace_body(msg_id: str, offset_id: str, sent_at: int, producer_group: str, group: str) -> bytes:
    """What a Java client with message trace on writes to RMQ_SYS_TRACE_TOPIC for one message
    (TraceDataEncoder: records split by \\x02, fields by \\x01): its Pub (sent in 3 ms), then the group's
    SubBefore and a failed SubAfter (12 ms), and a record of another message the reader skips."""
    records = [
        [
            *("Pub", str(sent_at), "DefaultRegion", producer_group, "T", msg_id, "tag0", "k0"),
            *("127.0.0.1:10911", "44", "3", "0", offset_id, "true", "10.1.1.1"),
        ],
        ["SubBefore", str(sent_at + 500), "DefaultRegion", group, "req1", msg_id, "0", "k0"],
        ["SubAfter", "req1", msg_id, "12", "false", "k0", "0", str(sent_at + 512), group],
        ["SubAfter", "req2", "another", "1", "true", "k1", "0", str(sent_at), group],
    ]
    return ("\x02".join("\x01".join(r) for r in records) + "\x02").encode()


def consume(ns: str, group: str, topic: str, want: int, status: ConsumeConcurrentlyStatus, **kw: Any) -> None:
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


def dlq_message(w: World) -> dict[str, Any]:
    status, found = w.get(f"/api/messages?topic={quote(w.dlq_topic, safe='')}&begin=0")
    assert status == 200 and len(found["messages"]) >= 1, found
    return found["messages"][0]


def running_world(store_dir: Path) -> Iterator[World]:
    """A broker serving an admin dashboard, with the messages, groups and dead letter the tests read."""
    broker = start_broker(
        store_dir,
        "autoCreateSubscriptionGroup=true",
        "dashboardPort=0",
        "dashboardAdmin=true",
        "traceTopicEnable=true",
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
                consume(ns, g, topic, FIRST, ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
            w.results += [send(i) for i in range(FIRST, FIRST + MORE)]
            # A message its group fails once with maxReconsumeTimes=0: straight to %DLQ%<group>.
            dead = Message(dead_topic, b"refund 42", tags="refund", keys=["dead-1"])
            dead.put_user_property("origin", "dashboard-test")
            producer.send(dead)
            # The first message's trace, as a Java client with message trace on writes it.
            first = w.results[0]
            trace = trace_body(first.msg_id, first.offset_msg_id, TRACE_SENT_AT, "pg_traced", group)
            producer.send(Message(TRACE_TOPIC, trace, keys=[first.msg_id, first.offset_msg_id]))
        dead_group = name("cgdead")
        consume(
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
            eventually(
                lambda: admin.query_message(TRACE_TOPIC, w.results[0].msg_id).messages, "the trace's index"
            )
        # A producer connected for the whole session (the producers page): one send teaches it the broker,
        # its next heartbeat registers it there.
        w.producer_group = name("pglive")
        live_config = ClientConfig(
            namesrv_addr=ns, instance_name=name("live"), heartbeat_broker_interval_ms=500
        )
        with Producer(w.producer_group, client_config=live_config) as live:
            live.send(Message(dead_topic, b"live", tags="live"))
            w.producer_client_id = live.impl.client_id
            yield w
    finally:
        broker.stop()
