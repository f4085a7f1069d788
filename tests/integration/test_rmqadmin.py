"""``rmqadmin`` against a real broker (``python -m rmq.broker``): every command, its table and its ``--json``
checked against state set up with rmq's own client, and its exit codes. The commands run in-process
(click's CliRunner); one test runs the installed ``rmqadmin`` console script as a real subprocess.

``tests/peers/test_rmqadmin_apache.py`` runs these tests once more against an Apache RocketMQ broker; where a
fact differs by broker the test says so (``is_apache``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import rmq
from click.testing import CliRunner
from rmq.admin import Exit, cli
from rmq.client import Admin as AsyncAdmin
from rmq.client import (
    AdminNotFoundError,
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageExt,
    MessageQueue,
)
from rmq.client.errors import TopicNotExistError
from rmq.client.sync import Admin, Producer, PushConsumer
from rmq.common.route import TopicConfig

from tests.brokerproc import BrokerProcess, start_broker

QUEUES = 4


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory.mktemp("rmqadmin"), "autoCreateSubscriptionGroup=true")
    yield proc
    proc.stop()


def name(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{time.monotonic_ns()}"


def is_apache(broker: Any) -> bool:
    return type(broker).__name__ == "ApacheBroker"


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out)


@dataclass
class Cluster:
    namesrv: str
    addr: str
    cluster: str
    broker_name: str

    def run(self, command: str, *args: str, as_json: bool = False) -> Run:
        argv = [command, "-n", self.namesrv, *args, *(["--json"] if as_json else [])]
        result = CliRunner().invoke(cli, argv, catch_exceptions=False)
        return Run(result.exit_code, result.stdout, result.stderr)

    def ok(self, command: str, *args: str, as_json: bool = False) -> Any:
        r = self.run(command, *args, as_json=as_json)
        assert r.code == 0, f"{command} {args}: exit {r.code}\n{r.out}\n{r.err}"
        return r.json if as_json else r.out

    def topic(self, queues: int = QUEUES) -> str:
        t = name("T")
        self.ok("updateTopic", "-c", self.cluster, "-t", t, "-r", str(queues), "-w", str(queues))
        return t


@pytest.fixture(scope="module")
def admin(broker: Any) -> Cluster:
    with Admin(namesrv_addr=broker.namesrv_addr) as a:  # the blocking admin API, as a Python caller uses it
        (master,) = [m for m in a.masters() if m.addr == broker.broker_addr]
    return Cluster(broker.namesrv_addr, broker.broker_addr, master.cluster, master.broker_name)


def eventually(check: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    """Retry ``check`` until it returns a true value: for the broker's asynchronous index and stats, which
    no client can await."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def send_keyed(ns: str, topic: str, broker_name: str, count: int, group: str | None = None) -> list[Any]:
    """``count`` messages, message i to queue i % QUEUES with key ``k<i>`` and tag ``tag<i % 2>``."""
    with Producer(group or name("pg"), namesrv_addr=ns) as producer:
        results = [
            producer.send(
                Message(topic, f"{topic}#{i}".encode(), tags=f"tag{i % 2}", keys=[f"k{i}", "all"]),
                mq=MessageQueue(topic, broker_name, i % QUEUES),
            )
            for i in range(count)
        ]
    # The broker dispatches to its consume queues after the send returns: wait until they hold every message.
    ends = {r.message_queue.queue_id: r.queue_offset + 1 for r in results}
    with Admin(namesrv_addr=ns) as admin:
        eventually(
            lambda: all(
                ends.get(t.mq.queue_id, t.max_offset) <= t.max_offset for t in admin.topic_stats(topic)
            ),
            "the consume queues",
        )
    return results


# --- the console script and the Python API --------------------------------------------------------------


def test_console_script_subprocess(admin: Cluster) -> None:
    script = Path(sys.executable).with_name("rmqadmin")
    version = subprocess.run([script, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == f"rmqadmin, version {rmq.__version__}"
    run = subprocess.run(
        [script, "clusterList", "-n", admin.namesrv, "--json"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    rows = json.loads(run.stdout)
    assert [(r["cluster"], r["brokerName"], r["addr"]) for r in rows if r["addr"] == admin.addr] == [
        (admin.cluster, admin.broker_name, admin.addr)
    ]
    module = subprocess.run([sys.executable, "-m", "rmq.admin", "--version"], capture_output=True, text=True)
    assert module.stdout == version.stdout
    missing = subprocess.run(
        [script, "topicStatus", "-n", admin.namesrv, "-t", name("none")], capture_output=True
    )
    assert missing.returncode == Exit.NOT_FOUND


# --- cluster and brokers --------------------------------------------------------------------------------


def test_cluster_list_and_broker_status(admin: Cluster) -> None:
    table = admin.ok("clusterList")
    assert table.splitlines()[0].split()[:5] == ["#Cluster", "Name", "#Broker", "Name", "#BID"]
    (row,) = [line for line in table.splitlines() if admin.addr in line]
    assert row.split()[:4] == [admin.cluster, admin.broker_name, "0", admin.addr]
    more = admin.ok("clusterList", "-m")
    assert "#InTotalToday" in more and admin.broker_name in more

    status = admin.ok("brokerStatus", "-b", admin.addr, as_json=True)[admin.addr]
    assert status["brokerVersionDesc"].startswith("V4_9_")
    assert int(status["msgPutTotalTodayNow"]) >= 0
    lines = admin.ok("brokerStatus", "-c", admin.cluster)
    assert f"{admin.addr} " in lines and "brokerVersionDesc" in lines


def test_broker_config(admin: Cluster) -> None:
    config = admin.ok("getBrokerConfig", "-b", admin.addr, as_json=True)[admin.addr]
    assert config["brokerName"] == admin.broker_name
    before = config["defaultQueryMaxNum"]
    try:
        out = admin.ok("updateBrokerConfig", "-b", admin.addr, "-k", "defaultQueryMaxNum", "-v", "33")
        assert out.strip() == f"update broker config success, {admin.addr}"
        table = admin.ok("getBrokerConfig", "-c", admin.cluster)
        assert f"{'defaultQueryMaxNum':<50}=  33" in table.splitlines()
    finally:
        admin.ok("updateBrokerConfig", "-c", admin.cluster, "-k", "defaultQueryMaxNum", "-v", before)


# --- topics ---------------------------------------------------------------------------------------------


def test_topic_lifecycle(admin: Cluster) -> None:
    topic = name("T")
    made = admin.ok("updateTopic", "-c", admin.cluster, "-t", topic, "-r", "4", "-w", "4", as_json=True)
    assert made == {
        "brokers": [admin.addr],
        "topicConfig": {
            "order": False,
            "perm": 6,
            "readQueueNums": 4,
            "topicFilterType": "SINGLE_TAG",
            "topicName": topic,
            "topicSysFlag": 0,
            "writeQueueNums": 4,
        },
    }
    text = admin.ok("updateTopic", "-b", admin.addr, "-t", topic, "-r", "4", "-w", "4", "-p", "6")
    assert text.splitlines() == [
        f"create topic to {admin.addr} success.",
        f"TopicConfig [topicName={topic}, readQueueNums=4, writeQueueNums=4, perm=RW-, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]",
    ]
    assert topic in admin.ok("topicList", as_json=True)
    assert topic in admin.ok("topicList").splitlines()
    clustered = admin.ok("topicList", "-c", as_json=True)
    assert {"cluster": admin.cluster, "topic": topic, "group": ""} in clustered

    route = admin.ok("topicRoute", "-t", topic, as_json=True)
    assert [
        (q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]
    ] == [(admin.broker_name, 4, 4, 6)]
    assert json.loads(admin.ok("topicRoute", "-t", topic)) == route  # the default output is the route's JSON
    listed = admin.ok("topicRoute", "-t", topic, "-l").splitlines()
    assert listed[1].split() == [admin.cluster, admin.broker_name, f"{{0={admin.addr}}}", "4", "4", "6"]
    assert listed[-1].split() == ["Total:", "1", "4", "4"]

    status = admin.ok("topicStatus", "-t", topic, as_json=True)
    assert [(r["brokerName"], r["queueId"], r["minOffset"], r["maxOffset"]) for r in status] == [
        (admin.broker_name, i, 0, 0) for i in range(4)
    ]

    out = admin.ok("deleteTopic", "-t", topic, "-c", admin.cluster)
    assert out.splitlines() == [
        f"delete topic [{topic}] from cluster [{admin.cluster}] success.",
        f"delete topic [{topic}] from NameServer success.",
    ]
    assert admin.run("topicRoute", "-t", topic).code == Exit.NOT_FOUND
    assert topic not in admin.ok("topicList", as_json=True)
    assert admin.run("deleteTopic", "-t", topic, "-c", admin.cluster).code == Exit.NOT_FOUND


# --- messages -------------------------------------------------------------------------------------------


def test_messages(admin: Cluster, broker: Any) -> None:
    topic = admin.topic()
    sent = send_keyed(admin.namesrv, topic, admin.broker_name, 8)

    status = admin.ok("topicStatus", "-t", topic, as_json=True)
    assert [(r["queueId"], r["minOffset"], r["maxOffset"]) for r in status] == [(i, 0, 2) for i in range(4)]
    assert all(r["lastUpdateTimestamp"] > 0 for r in status)
    table = admin.ok("topicStatus", "-t", topic).splitlines()
    assert table[0].split()[:4] == ["#Broker", "Name", "#QID", "#Min"]
    assert [line.split()[:4] for line in table[1:]] == [
        [admin.broker_name, str(i), "0", "2"] for i in range(4)
    ]

    # by key: the broker's index is built asynchronously
    r5 = sent[5]
    by_key = eventually(
        lambda: (lambda r: r.json if r.code == 0 else None)(
            admin.run("queryMsgByKey", "-t", topic, "-k", "k5", as_json=True)
        ),
        "the key index",
    )
    assert [(m["msgId"], m["queueId"], m["queueOffset"], m["body"]) for m in by_key] == [
        (r5.msg_id, 1, 1, f"{topic}#5")
    ]
    rows = admin.ok("queryMsgByKey", "-t", topic, "-k", "k5").splitlines()
    assert rows[0].split() == ["#Message", "ID", "#QID", "#Offset"]
    assert rows[1].split() == [r5.msg_id, "1", "1"]
    everything = eventually(
        lambda: (lambda r: len(r) == 8 and r)(
            admin.ok("queryMsgByKey", "-t", topic, "-k", "all", as_json=True)
        ),
        "all 8 keyed messages in the index",
    )
    assert sorted(m["body"] for m in everything) == sorted(f"{topic}#{i}" for i in range(8))
    assert admin.run("queryMsgByKey", "-t", topic, "-k", "nokey").code == Exit.NOT_FOUND

    # by id
    (msg,) = admin.ok("queryMsgById", "-i", r5.offset_msg_id, as_json=True)
    assert (msg["msgId"], msg["offsetMsgId"], msg["body"], msg["tags"], msg["queueId"]) == (
        r5.msg_id,
        r5.offset_msg_id,
        f"{topic}#5",
        "tag1",
        1,
    )
    detail = admin.ok("queryMsgById", "-i", r5.offset_msg_id).splitlines()
    assert f"{'OffsetID:':<20} {r5.offset_msg_id}" in detail
    assert f"{'Topic:':<20} {topic}" in detail
    assert f"{'Keys:':<20} [k5 all]" in detail
    assert f"{'Queue Offset:':<20} 1" in detail
    assert f"{'Message Body:':<20} {topic}#5" in detail
    assert admin.run("queryMsgById", "-i", "0" * 32).code == Exit.NOT_FOUND
    (by_unique,) = admin.ok("queryMsgByUniqueKey", "-i", r5.msg_id, "-t", topic, as_json=True)
    assert by_unique["offsetMsgId"] == r5.offset_msg_id
    assert f"{'Message Body:':<20} {topic}#5" in admin.ok("queryMsgByUniqueKey", "-i", r5.msg_id, "-t", topic)

    # by offset, printMsg, consumeMessage
    at = admin.ok(
        "queryMsgByOffset", "-t", topic, "-b", admin.broker_name, "-i", "1", "-o", "1", as_json=True
    )
    assert (at["msgId"], at["body"]) == (r5.msg_id, f"{topic}#5")
    missing = admin.run("queryMsgByOffset", "-t", topic, "-b", admin.broker_name, "-i", "1", "-o", "2")
    assert missing.code == Exit.NOT_FOUND
    printed = admin.ok("printMsg", "-t", topic, as_json=True)
    assert [m["body"] for m in printed] == [f"{topic}#{q + 4 * n}" for q in range(4) for n in range(2)]
    text = admin.ok("printMsg", "-t", topic)
    assert (
        f"minOffset=0, maxOffset=2, MessageQueue [topic={topic}, brokerName={admin.broker_name}, queueId=3]"
        in text
    )
    assert (
        sum(
            line.startswith(f"MSGID: {r5.msg_id} ") and line.endswith(f"BODY: {topic}#5")
            for line in text.splitlines()
        )
        == 1
    )
    # Properties print as Java's map does, not as a Python dict.
    line = next(x for x in text.splitlines() if x.startswith(f"MSGID: {r5.msg_id} "))
    assert "properties={" in line and "'" not in line.split("properties=", 1)[1], line
    tagged = admin.ok("printMsg", "-t", topic, "-s", "tag0", as_json=True)
    assert sorted(m["body"] for m in tagged) == sorted(f"{topic}#{i}" for i in range(0, 8, 2))

    sent_row = admin.ok(
        "sendMessage",
        "-t",
        topic,
        "-p",
        "hello",
        "-k",
        "kk",
        "-c",
        "tagA",
        "-b",
        admin.broker_name,
        "-i",
        "2",
        as_json=True,
    )
    assert (sent_row["sendStatus"], sent_row["queueId"], sent_row["queueOffset"]) == ("SEND_OK", 2, 2)
    consumed = admin.ok(
        "consumeMessage", "-t", topic, "-b", admin.broker_name, "-i", "2", "-o", "1", as_json=True
    )
    assert [(m["body"], m["tags"], m["keys"], m["msgId"]) for m in consumed] == [
        (f"{topic}#6", "tag0", "k6 all", sent[6].msg_id),
        ("hello", "tagA", "kk", sent_row["msgId"]),
    ]
    table = admin.ok("sendMessage", "-t", topic, "-p", "again").splitlines()
    assert table[0].split() == ["#Broker", "Name", "#QID", "#Send", "Result", "#MsgId"]
    assert table[1].split()[0] == admin.broker_name and table[1].split()[2] == "SEND_OK"
    limited = admin.ok("consumeMessage", "-t", topic, "-c", "3", as_json=True)
    assert len(limited) == 3
    assert len(admin.ok("consumeMessage", "-t", topic, as_json=True)) == 10


# --- groups ---------------------------------------------------------------------------------------------


class Collector:
    def __init__(self, expect: int) -> None:
        self.bodies: list[bytes] = []
        self.expect = expect
        self.done = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        with self.lock:
            self.bodies += [m.body for m in msgs]
            if len(self.bodies) >= self.expect:
                self.done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def push_consumer(ns: str, group: str, topic: str, collector: Collector) -> PushConsumer:
    consumer = PushConsumer(
        group,
        client_config=ClientConfig(namesrv_addr=ns, instance_name=name("admin-test")),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(collector)
    consumer.start()
    return consumer


def test_consumer_progress_connection_and_reset(admin: Cluster, broker: Any) -> None:
    topic = admin.topic()
    group = name("cg")
    send_keyed(admin.namesrv, topic, admin.broker_name, 8)
    first = Collector(8)
    consumer = push_consumer(admin.namesrv, group, topic, first)
    try:
        assert first.done.wait(60)
        conn = eventually(
            lambda: (lambda r: r.code == 0 and r.json)(
                admin.run("consumerConnection", "-g", group, as_json=True)
            ),
            "the consumer's heartbeat",
        )
        assert len(conn["connections"]) == 1
        assert conn["connections"][0]["language"] == "PYTHON"
        assert conn["subscriptions"] == {topic: "*"} or topic in conn["subscriptions"]
        assert (conn["consumeType"], conn["messageModel"]) == ("CONSUME_PASSIVELY", "CLUSTERING")
        text = admin.ok("consumerConnection", "-g", group)
        assert text.splitlines()[0].split() == ["#ClientId", "#ClientAddr", "#Language", "#Version"]
        assert (
            "Below is subscription:" in text
            and f"{topic:<20} *" in text
            and "MessageModel: CLUSTERING" in text
        )
        client_ip = conn["connections"][0]["clientId"].split("@")[0]

        def with_ips() -> Any:
            r = admin.run("consumerProgress", "-g", group, "-s", "true", as_json=True)
            mine = [o for o in r.json["offsets"] if o["topic"] == topic] if r.code == 0 else []
            return len(mine) == QUEUES and mine

        ipped = eventually(with_ips, "the committed offsets")
        assert [o["clientIp"] for o in ipped] == [client_ip] * QUEUES
        table = admin.ok("consumerProgress", "-g", group, "-s", "true").splitlines()
        assert "#Client IP" in table[0]
        assert all(client_ip in line for line in table if line.startswith(topic))
    finally:
        consumer.shutdown()  # commits the offsets: 2 per queue
    assert admin.run("consumerConnection", "-g", group).code == Exit.NOT_FOUND

    send_keyed(admin.namesrv, topic, admin.broker_name, 4)  # one more per queue: lag 1 each
    progress = admin.ok("consumerProgress", "-g", group, as_json=True)
    rows = [
        (o["topic"], o["queueId"], o["brokerOffset"], o["consumerOffset"], o["diff"])
        for o in progress["offsets"]
        if o["topic"] == topic
    ]
    assert rows == [(topic, i, 3, 2, 1) for i in range(4)]
    assert progress["diffTotal"] == 4
    table = admin.ok("consumerProgress", "-g", group).splitlines()
    assert table[0].split() == [
        "#Topic",
        "#Broker",
        "Name",
        "#QID",
        "#Broker",
        "Offset",
        "#Consumer",
        "Offset",
        "#Diff",
        "#LastTime",
    ]
    mine = [line.split()[:6] for line in table if line.startswith(topic)]
    assert mine == [[topic, admin.broker_name, str(i), "3", "2", "1"] for i in range(4)]
    assert "Diff Total: 4" in table
    groups = admin.ok("consumerProgress", as_json=True)
    assert {
        "group": group,
        "count": 0,
        "version": "OFFLINE",
        "type": "",
        "model": "",
        "diffTotal": 4,
    }.items() <= next(g for g in groups if g["group"] == group).items()
    assert admin.run("consumerProgress", "-g", name("nogroup")).code == Exit.NOT_FOUND

    # no consumer online: the offsets are set in the broker
    reset = admin.ok("resetOffsetByTime", "-g", group, "-t", topic, "-s", "0", as_json=True)
    assert reset["consumersNotified"] is False
    assert [(o["queueId"], o["offset"]) for o in reset["offsets"]] == [(i, 0) for i in range(4)]
    after = admin.ok("consumerProgress", "-g", group, as_json=True)
    assert [(o["consumerOffset"], o["diff"]) for o in after["offsets"] if o["topic"] == topic] == [(0, 3)] * 4
    text = admin.ok("resetOffsetByTime", "-g", group, "-t", topic, "-s", "now")
    assert text.splitlines()[0].startswith(  # mqadmin's wording when it sets the offsets itself
        f"rollback consumer offset by specified consumerGroup[{group}], topic[{topic}]"
    )
    header = "#brokerName #queueId #brokerOffset #consumerOffset #timestampOffset #rollbackOffset"
    assert text.splitlines()[1].split() == header.split()
    # The offset of a time after the last message: rmq answers the queue's end (3), Apache's broker the last
    # message's offset (2); mqadmin reads SEARCH_OFFSET_BY_TIMESTAMP the same way, so it shows the same.
    now_offset = "2" if is_apache(broker) else "3"
    assert [line.split() for line in text.splitlines()[2:]] == [
        [admin.broker_name, str(i), "3", "0", now_offset, now_offset] for i in range(4)
    ]
    end = admin.ok("resetOffsetByTime", "-g", group, "-t", topic, "-s", "-1", as_json=True)  # -1: the end
    assert [o["offset"] for o in end["offsets"]] == [3] * 4
    assert admin.ok("consumerProgress", "-g", group, as_json=True)["diffTotal"] == 0

    # a consumer online: the broker tells it, and it consumes everything again
    again = Collector(12)
    consumer = push_consumer(admin.namesrv, group, topic, again)
    try:
        eventually(lambda: admin.run("consumerConnection", "-g", group).code == 0, "the consumer's heartbeat")
        eventually(
            lambda: sum(mq.topic == topic for mq in consumer.impl.rebalance.process_queue_table) == QUEUES,
            "the rebalance",
        )
        reset = admin.ok("resetOffsetByTime", "-g", group, "-t", topic, "-s", "0", as_json=True)
        assert reset["consumersNotified"] is True
        assert [(o["queueId"], o["offset"]) for o in reset["offsets"]] == [(i, 0) for i in range(4)]
        assert again.done.wait(60)
        assert sorted(again.bodies) == sorted(f"{topic}#{i}".encode() for i in [*range(8), *range(4)])
    finally:
        consumer.shutdown()


def test_producer_connection(admin: Cluster) -> None:
    topic = admin.topic()
    group = name("pg")
    config = ClientConfig(
        namesrv_addr=admin.namesrv, instance_name=name("p"), heartbeat_broker_interval_ms=200
    )
    with Producer(group, client_config=config) as producer:
        producer.send(Message(topic, b"x"))  # the producer learns the broker, and heartbeats to it
        found = eventually(
            lambda: (lambda r: r.code == 0 and r.json)(
                admin.run("producerConnection", "-g", group, "-t", topic, as_json=True)
            ),
            "the producer's heartbeat",
        )
        (conn,) = found["connections"]
        assert conn["language"] == "PYTHON" and conn["versionDesc"] == "V4_9_8"
        line = admin.ok("producerConnection", "-g", group, "-t", topic).strip()
        assert line.startswith("0001  ") and line.split()[1:] == [
            conn["clientId"],
            conn["clientAddr"],
            "PYTHON",
            "V4_9_8",
        ]
    assert admin.run("producerConnection", "-g", group, "-t", topic).code == Exit.NOT_FOUND


def test_subscription_groups(admin: Cluster, broker: Any) -> None:
    group = name("sg")
    made = admin.ok("updateSubGroup", "-c", admin.cluster, "-g", group, "-r", "5", "-q", "2", as_json=True)
    assert made["brokers"] == [admin.addr]
    assert (made["groupConfig"]["retryMaxTimes"], made["groupConfig"]["retryQueueNums"]) == (5, 2)
    text = admin.ok("updateSubGroup", "-b", admin.addr, "-g", group, "-r", "6").splitlines()
    assert text[0] == f"create subscription group to {admin.addr} success."
    assert text[1].startswith(f"SubscriptionGroupConfig [groupName={group}, consumeEnable=true, ")
    assert group in subscription_groups(admin.addr)
    assert subscription_groups(admin.addr)[group]["retryMaxTimes"] == 6
    # 5.x's group settings: orderly, and attributes set and removed as mqadmin 5.x's --attributes (an Apache
    # 4.9 broker knows neither).
    if not is_apache(broker):
        admin.ok(
            "updateSubGroup",
            "-b",
            admin.addr,
            "-g",
            group,
            "-o",
            "true",
            "--attributes",
            "+lite.bind.topic=P,+lite.sub.client.quota=5",
        )
        cfg = subscription_groups(admin.addr)[group]
        assert (cfg["consumeMessageOrderly"], cfg["attributes"]) == (
            True,
            {"lite.bind.topic": "P", "lite.sub.client.quota": "5"},
        )
        admin.ok("updateSubGroup", "-b", admin.addr, "-g", group, "--attributes", "-lite.sub.client.quota")
        cfg = subscription_groups(admin.addr)[group]
        assert ("consumeMessageOrderly" in cfg, cfg["attributes"]) == (False, {"lite.bind.topic": "P"})
        unknown = admin.run("updateSubGroup", "-b", admin.addr, "-g", group, "--attributes", "+x=1")
        assert unknown.code != 0 and "unsupported group attribute 'x'" in unknown.out + unknown.err
        bad = admin.run("updateSubGroup", "-b", admin.addr, "-g", group, "--attributes", "lite.bind.topic=P")
        assert bad.code != 0 and "expected +key=value (set) or -key (remove)" in bad.err
    out = admin.ok("deleteSubGroup", "-c", admin.cluster, "-g", group, "-r", "true")
    assert out.strip() == f"delete subscription group [{group}] from broker [{admin.addr}] success."
    assert group not in subscription_groups(admin.addr)


def subscription_groups(addr: str) -> dict[str, Any]:
    from rmq.common import fastjson
    from rmq.common.codes import RequestCode
    from rmq.remoting import create_request
    from rmq.remoting.client import invoke_sync

    response = invoke_sync(addr, create_request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG), 10_000)
    return dict(fastjson.loads(response.body)["subscriptionGroupTable"])


def test_stats_all(admin: Cluster, broker: Any) -> None:
    topic = admin.topic()
    group = name("cg")
    send_keyed(admin.namesrv, topic, admin.broker_name, 8)
    collector = Collector(8)
    consumer = push_consumer(admin.namesrv, group, topic, collector)
    try:
        assert collector.done.wait(60)
    finally:
        consumer.shutdown()
    send_keyed(admin.namesrv, topic, admin.broker_name, 4)
    rows = admin.ok("statsAll", "-t", topic, as_json=True)
    (row,) = [r for r in rows if r["group"] == group]
    assert (row["topic"], row["accumulation"]) == (topic, 4)
    if not is_apache(broker):
        # Apache samples its counters every 10 s (minute) / 10 min (hour): its figures lag behind.
        assert (row["inMsg24Hour"], row["outMsg24Hour"]) == (12, 8)
    table = admin.ok("statsAll", "-t", topic).splitlines()
    assert table[0].split() == [
        "#Topic",
        "#Consumer",
        "Group",
        "#Accumulation",
        "#InTPS",
        "#OutTPS",
        "#InMsg24Hour",
        "#OutMsg24Hour",
    ]
    assert [line.split()[:3] for line in table[1:]] == [[topic, group, "4"]]
    lonely = admin.topic()
    (alone,) = admin.ok("statsAll", "-t", lonely, as_json=True)
    assert (alone["group"], alone["outMsg24Hour"]) == ("", None)
    assert admin.ok("statsAll", "-t", lonely).splitlines()[1].split()[-1] == "NO_CONSUMER"
    everything = admin.ok("statsAll", as_json=True)
    assert {r["topic"] for r in everything} >= {topic, lonely}


# --- exit codes -----------------------------------------------------------------------------------------


def test_exit_codes(admin: Cluster) -> None:
    assert admin.run("topicStatus").code == Exit.USAGE  # -t missing
    assert admin.run("updateTopic", "-t", name("T")).code == Exit.USAGE  # neither -b nor -c
    assert admin.run("resetOffsetByTime", "-g", "g", "-t", "t", "-s", "yesterday").code == Exit.USAGE
    no_ns = CliRunner(env={"NAMESRV_ADDR": ""}).invoke(cli, ["topicList"])
    assert no_ns.exit_code == Exit.USAGE and "no name server" in no_ns.stderr
    unreachable = CliRunner().invoke(cli, ["topicList", "-n", "127.0.0.1:1", "--timeout", "1000"])
    assert unreachable.exit_code == Exit.CONNECTION, unreachable.output
    assert "failed (connection)" in unreachable.stderr
    assert admin.run("topicStatus", "-t", name("none")).code == Exit.NOT_FOUND
    assert admin.run("updateTopic", "-c", name("nocluster"), "-t", name("T")).code == Exit.NOT_FOUND
    refused = admin.run("updateTopic", "-b", admin.addr, "-t", "bad topic!")
    assert refused.code == Exit.BROKER_ERROR
    assert "failed (broker error)" in refused.err and "CODE: 1" in refused.err


def test_store_housekeeping_requests(admin: Cluster) -> None:
    # Each broker takes the request; with nothing expired and every topic configured, nothing is removed
    # (what each does to a store: tests/broker/test_store_housekeeping.py).
    for command in ("cleanExpiredCQ", "cleanUnusedTopic", "deleteExpiredCommitLog"):
        assert admin.ok(command, "-b", admin.addr).strip() == "success", command
        assert admin.ok(command, "-c", admin.cluster).strip() == "success", command
        assert admin.ok(command, "-b", admin.addr, as_json=True) == {"brokers": [admin.addr], "success": True}
    assert admin.run("cleanUnusedTopic", "-b", admin.addr, "-c", admin.cluster).code == Exit.USAGE
    assert admin.run("cleanExpiredCQ", "-c", name("nocluster")).code == Exit.NOT_FOUND


# --- the asyncio admin API, as Python programs use it ---------------------------------------------------


async def test_python_admin_api(admin: Cluster) -> None:
    async with AsyncAdmin(namesrv_addr=admin.namesrv) as a:
        topic = name("T")
        assert await a.create_topic_in_cluster(admin.cluster, TopicConfig(topic, 2, 2)) == [admin.addr]
        assert topic in await a.topic_list()
        assert [(t.mq.queue_id, t.max_offset) for t in await a.topic_stats(topic)] == [(0, 0), (1, 0)]
        sent = await a.send_message(
            Message(topic, b"py", keys="pk"), broker_name=admin.broker_name, queue_id=1
        )
        assert (sent.message_queue.queue_id, sent.queue_offset) == (1, 0)
        seen = await a.view_message(sent.offset_msg_id)
        assert (seen.body, seen.keys, seen.msg_id) == (b"py", "pk", sent.msg_id)
        with pytest.raises(AdminNotFoundError):
            await a.consume_stats(name("g"))
        with pytest.raises(TopicNotExistError):
            await a.topic_route(name("none"))
        with pytest.raises(AdminNotFoundError):
            await a.masters(name("nocluster"))
        assert await a.delete_topic(topic, admin.cluster) == [admin.addr]
        assert topic not in await a.topic_list()


def test_mqadmin_command_names_help_and_a_closed_pipe(admin: Cluster) -> None:
    """Names are found whatever their case, as mqadmin finds them; ``help CMD``; ``| head`` ends quietly."""
    assert admin.run("TOPICLIST").code == 0 and admin.run("topiclist").out == admin.run("topicList").out
    helped = CliRunner().invoke(cli, ["help", "updatetopic"])
    assert helped.exit_code == 0 and "updateTopic [OPTIONS]" in helped.stdout and "--topic" in helped.stdout
    assert "topicList" in CliRunner().invoke(cli, ["help"]).stdout
    assert CliRunner().invoke(cli, ["help", "noSuchCommand"]).exit_code == 2
    # A reader that closed its end before rmqadmin wrote (what `| head -1` does to a long listing).
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "rmq.admin", "topicList", "-n", admin.namesrv],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
