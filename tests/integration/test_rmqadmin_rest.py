"""``rmqadmin``'s remaining mqadmin commands (topicClusterList, updateTopicPerm, wipeWritePerm, addWritePerm,
updateKvConfig, deleteKvConfig, updateOrderConf, getConsumerConfig, cloneGroupOffset, skipAccumulatedMessage,
allocateMQ, printMsgByQueue, consumerStatus, queryMsgTraceById, sendMsgStatus, checkMsgSendRT, clusterRT,
startMonitoring) against a real broker (``python -m rmq.broker`` with its name server): each command's effect
read back through another command or the admin API, and its refusals' exit codes."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from rmq.admin import Exit, cli
from rmq.admin.group import process_queue_report
from rmq.client import Admin as AsyncAdmin
from rmq.client import ConsumeConcurrentlyStatus, Message, MessageQueue
from rmq.client.errors import OffsetNotFoundError
from rmq.client.sync import Admin, Producer
from rmq.common.codes import NAMESPACE_ORDER_TOPIC_CONFIG

from tests.integration import test_rmqadmin as base
from tests.integration.test_rmqadmin import QUEUES, Cluster, eventually, name, send_keyed
from tests.peers.test_mqadmin_more import ACL_COMMANDS, IN_TEST_MQADMIN, IN_THIS_MODULE

broker = base.broker  # a broker of this module's own
admin = base.admin


def ok_json(admin: Cluster, *argv: str) -> Any:
    """The command's JSON if it succeeded, else None (for eventually)."""
    r = admin.run(*argv, as_json=True)
    return r.code == 0 and r.json


def route_perms(admin: Cluster, topic: str) -> list[int]:
    return [q["perm"] for q in admin.ok("topicRoute", "-t", topic, as_json=True)["queueDatas"]]


def offsets(admin: Cluster, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """queue id -> (broker offset, consumer offset) of ``group`` on ``topic``."""
    rows = admin.ok("consumerProgress", "-g", group, as_json=True)["offsets"]
    return {r["queueId"]: (r["brokerOffset"], r["consumerOffset"]) for r in rows if r["topic"] == topic}


async def commit(admin: Cluster, group: str, topic: str, offset: int) -> None:
    async with AsyncAdmin(namesrv_addr=admin.namesrv) as a:
        for q in range(QUEUES):
            mq = MessageQueue(topic, admin.broker_name, q)
            await a.instance.api.update_consumer_offset(admin.addr, group, mq, offset)


# --- topics ---------------------------------------------------------------------------------------------


def test_topic_cluster_list(admin: Cluster) -> None:
    topic = admin.topic()
    assert admin.ok("topicClusterList", "-t", topic) == f"{admin.cluster}\n"
    assert admin.ok("topicClusterList", "-t", topic, as_json=True) == [admin.cluster]
    assert admin.run("topicClusterList", "-t", name("none")).code == Exit.NOT_FOUND
    assert admin.run("topicClusterList").code == Exit.USAGE


def test_update_topic_perm(admin: Cluster) -> None:
    topic = admin.topic()
    out = admin.ok("updateTopicPerm", "-b", admin.addr, "-t", topic, "-p", "4")
    assert out.splitlines() == [
        f"update topic perm from 6 to 4 in {admin.addr} success.",
        f"TopicConfig [topicName={topic}, readQueueNums={QUEUES}, writeQueueNums={QUEUES}, perm=R--, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false].",
    ]
    eventually(lambda: route_perms(admin, topic) == [4], "the route's perm 4")
    assert admin.ok("updateTopicPerm", "-b", admin.addr, "-t", topic, "-p", "4") == (
        "new perm equals to the old one!\n"
    )
    out = admin.ok("updateTopicPerm", "-c", admin.cluster, "-t", topic, "-p", "6", as_json=True)
    assert out["changes"] == [{"brokerAddr": admin.addr, "oldPerm": 4, "perm": 6}]
    eventually(lambda: route_perms(admin, topic) == [6], "the route's perm 6")
    with Admin(namesrv_addr=admin.namesrv) as a:  # the queue counts are kept
        assert {(t.mq.queue_id) for t in a.topic_stats(topic)} == set(range(QUEUES))
    assert admin.run("updateTopicPerm", "-b", "127.0.0.1:1", "-t", topic, "-p", "6").code == Exit.NOT_FOUND
    assert admin.run("updateTopicPerm", "-c", admin.cluster, "-t", topic).code == Exit.USAGE  # no -p
    assert admin.run("updateTopicPerm", "-t", topic, "-p", "6").code == Exit.USAGE  # neither -b nor -c
    assert admin.run("updateTopicPerm", "-c", admin.cluster, "-t", name("none"), "-p", "6").code == (
        Exit.NOT_FOUND
    )


def test_update_order_conf(admin: Cluster) -> None:
    topic = name("T")
    conf = f"{admin.broker_name}:4"
    out = admin.ok("updateOrderConf", "-t", topic, "-m", "put", "-v", conf)
    assert out == f"update orderConf success. topic=[{topic}], orderConf=[{conf}]\n"
    with Admin(namesrv_addr=admin.namesrv) as a:  # the name server's own record
        assert a.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic) == conf
    out = admin.ok("updateOrderConf", "-t", topic, "-m", "get")
    assert out == f"get orderConf success. topic=[{topic}], orderConf=[{conf}]\n"
    assert admin.ok("updateOrderConf", "-t", topic, "-m", "get", as_json=True) == {
        "topic": topic,
        "orderConf": conf,
    }
    assert (
        admin.ok("updateOrderConf", "-t", topic, "-m", "delete")
        == f"delete orderConf success. topic=[{topic}]\n"
    )
    missing = admin.run("updateOrderConf", "-t", topic, "-m", "get")
    assert missing.code == Exit.NOT_FOUND and "CODE: 22" in missing.err
    assert admin.run("updateOrderConf", "-t", topic, "-m", "put").code == Exit.USAGE  # no -v
    assert admin.run("updateOrderConf", "-t", topic, "-m", "post").code == Exit.USAGE


def test_allocate_mq(admin: Cluster) -> None:
    topic = admin.topic()
    out = admin.ok("allocateMQ", "-t", topic, "-i", "10.0.0.1,10.0.0.2")
    result = json.loads(out)["result"]
    assert {ip: [q["queueId"] for q in qs] for ip, qs in result.items()} == {
        "10.0.0.1": [0, 1],
        "10.0.0.2": [2, 3],
    }
    assert result["10.0.0.1"][0] == {"brokerName": admin.broker_name, "queueId": 0, "topic": topic}
    three = admin.ok("allocateMQ", "-t", topic, "-i", "a,b,c", as_json=True)["result"]
    assert [len(three[c]) for c in "abc"] == [2, 1, 1]
    assert admin.run("allocateMQ", "-t", name("none"), "-i", "a").code == Exit.NOT_FOUND


# --- name servers ---------------------------------------------------------------------------------------


def test_wipe_and_add_write_perm(admin: Cluster) -> None:
    topic = admin.topic()
    try:
        out = admin.ok("wipeWritePerm", "-b", admin.broker_name)
        prefix = f"wipe write perm of broker[{admin.broker_name}] in name server[{admin.namesrv}] OK, "
        assert out.startswith(prefix) and int(out[len(prefix) :]) >= 1, out
        assert route_perms(admin, topic) == [4]
    finally:
        data = admin.ok("addWritePerm", "-b", admin.broker_name, as_json=True)
    (row,) = data["namesrvs"]
    assert row["namesrvAddr"] == admin.namesrv and row["topicCount"] >= 1
    assert route_perms(admin, topic) == [6]
    assert admin.run("wipeWritePerm").code == Exit.USAGE


def test_update_and_delete_kv_config(admin: Cluster) -> None:
    ns, key = name("ns"), name("k")
    out = admin.ok("updateKvConfig", "-s", ns, "-k", key, "-v", "v1")
    assert out == "create or update kv config to namespace success.\n"
    with Admin(namesrv_addr=admin.namesrv) as a:
        assert a.get_kv_config(ns, key) == "v1"
        admin.ok("updateKvConfig", "-s", ns, "-k", key, "-v", "v2")
        assert a.get_kv_config(ns, key) == "v2"
        assert admin.ok("deleteKvConfig", "-s", ns, "-k", key) == "delete kv config from namespace success.\n"
        with pytest.raises(OffsetNotFoundError):
            a.get_kv_config(ns, key)
    assert admin.run("updateKvConfig", "-s", ns, "-k", key).code == Exit.USAGE  # no -v


# --- groups and offsets ---------------------------------------------------------------------------------


def test_get_consumer_config(admin: Cluster) -> None:
    group = name("cg")
    admin.ok("updateSubGroup", "-c", admin.cluster, "-g", group, "-r", "5", "-q", "2")
    out = admin.ok("getConsumerConfig", "-g", group).splitlines()
    assert (
        out[0]
        == f"============================={admin.cluster}:{admin.broker_name}============================="
    )
    assert f"{'groupName':<40}=  {group}" in out
    assert f"{'retryMaxTimes':<40}=  5" in out and f"{'retryQueueNums':<40}=  2" in out
    assert f"{'consumeEnable':<40}=  true" in out
    (found,) = admin.ok("getConsumerConfig", "-g", group, as_json=True)
    assert (found["cluster"], found["brokerName"], found["config"]["retryMaxTimes"]) == (
        admin.cluster,
        admin.broker_name,
        5,
    )
    assert admin.run("getConsumerConfig", "-g", name("none")).code == Exit.NOT_FOUND


def test_skip_accumulated_message_and_clone_group_offset(admin: Cluster) -> None:
    topic, src, dest = admin.topic(), name("src"), name("dest")
    send_keyed(admin.namesrv, topic, admin.broker_name, 2 * QUEUES)
    # The brokers reset only a group that has committed offsets (else code 1 "The consumer group <g> not
    # exist", as Apache's): the source group commits offset 0 of each queue, as a consumer starting would.
    asyncio.run(commit(admin, src, topic, 0))
    assert offsets(admin, src, topic) == {q: (2, 0) for q in range(QUEUES)}
    # no consumer online: mqadmin's rollback table (queue end, offset before, offset of the time, offset set)
    table = admin.ok("skipAccumulatedMessage", "-g", src, "-t", topic).splitlines()
    assert table[0].split()[2:] == ["#brokerOffset", "#consumerOffset", "#timestampOffset", "#rollbackOffset"]
    assert sorted(line.split() for line in table[1:]) == [
        [admin.broker_name, str(q), "2", "0", "2", "2"] for q in range(QUEUES)
    ]
    eventually(lambda: offsets(admin, src, topic) == {q: (2, 2) for q in range(QUEUES)}, "src at the end")

    send_keyed(admin.namesrv, topic, admin.broker_name, QUEUES)  # one more each: a backlog of 1 per queue
    assert offsets(admin, src, topic) == {q: (3, 2) for q in range(QUEUES)}
    out = admin.ok("cloneGroupOffset", "-s", src, "-d", dest, "-t", topic)
    assert out == f"clone group offset success. srcGroup[{src}], destGroup=[{dest}], topic[{topic}]\n"
    assert offsets(admin, dest, topic) == {q: (3, 2) for q in range(QUEUES)}

    data = admin.ok("skipAccumulatedMessage", "-g", dest, "-t", topic, as_json=True)
    assert {o["queueId"]: o["offset"] for o in data["offsets"]} == {q: 3 for q in range(QUEUES)}
    assert offsets(admin, dest, topic) == {q: (3, 3) for q in range(QUEUES)}
    assert offsets(admin, src, topic) == {q: (3, 2) for q in range(QUEUES)}  # the source is untouched
    assert admin.run("cloneGroupOffset", "-s", src, "-d", dest, "-t", name("none")).code == Exit.NOT_FOUND
    assert admin.run("skipAccumulatedMessage", "-g", src).code == Exit.USAGE  # no -t


def test_consumer_status(admin: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    topic, group = admin.topic(), name("cg")
    send_keyed(admin.namesrv, topic, admin.broker_name, QUEUES)
    collector = base.Collector(QUEUES)
    consumer = base.push_consumer(admin.namesrv, group, topic, collector)
    monkeypatch.chdir(tmp_path)  # mqadmin writes each client's running info to <now>/<clientId> here
    try:
        assert collector.done.wait(60)
        conn = eventually(
            lambda: ok_json(admin, "consumerConnection", "-g", group), "the consumer's heartbeat"
        )
        (client_id,) = [c["clientId"] for c in conn["connections"]]
        out = admin.ok("consumerStatus", "-g", group).splitlines()
        assert out[0].split() == ["#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile"]
        index, cid, _version, path = out[1].split()
        assert (index, cid) == ("1", client_id)
        assert "Same subscription in the same group of consumer" in out and "Rebalance OK" in out
        text = (tmp_path / path).read_text()
        assert text.startswith("#Consumer Properties#\n") and "#Consumer RT&TPS#" in text
        assert f"Topic: {topic:<40} ClassFilter: false    SubExpression: *" in text
        held = [line.split() for line in text.split("#Consumer Offset#")[1].split("\n\n")[0].splitlines()[1:]]
        assert sorted((r[0], r[1], r[2]) for r in held if r[0] == topic) == [
            (topic, admin.broker_name, str(q)) for q in range(QUEUES)
        ]
        one = admin.ok("consumerStatus", "-g", group, "-i", client_id)
        assert one.startswith("#Consumer Properties#") and "#Consumer MQ Detail#" in one
        data = admin.ok("consumerStatus", "-g", group, "-b", admin.addr, as_json=True)
        assert data["sameSubscription"] and [c["clientId"] for c in data["clients"]] == [client_id]
        assert {
            q["queueId"] for q in data["clients"][0]["runningInfo"]["mqTable"] if q["topic"] == topic
        } == set(range(QUEUES))
    finally:
        consumer.shutdown()
    assert admin.run("consumerStatus", "-g", name("none")).code == Exit.NOT_FOUND  # no client online


# --- messages -------------------------------------------------------------------------------------------


def test_print_msg_by_queue(admin: Cluster) -> None:
    topic = admin.topic()
    send_keyed(admin.namesrv, topic, admin.broker_name, 4 * QUEUES)  # queue 1: messages 1, 5, 9, 13
    base_args = ("-t", topic, "-a", admin.broker_name, "-i", "1")
    assert admin.ok("printMsgByQueue", *base_args) == ""  # mqadmin prints nothing without -p or -f
    lines = admin.ok("printMsgByQueue", *base_args, "-p", "true", "-d", "true").splitlines()
    assert [line.rsplit(" BODY: ", 1)[1] for line in lines] == [f"{topic}#{i}" for i in (1, 5, 9, 13)]
    assert all(line.startswith("MSGID: ") and "queueId=1," in line for line in lines)
    hidden = admin.ok("printMsgByQueue", *base_args, "-p", "true")
    assert hidden.count("BODY: NOT PRINT BODY") == 4
    assert admin.ok("printMsgByQueue", *base_args, "-f", "true").splitlines() == [
        f"Tag: {'tag1':<30} Count: 4"
    ]
    zero = admin.ok(
        "printMsgByQueue", "-t", topic, "-a", admin.broker_name, "-i", "0", "-f", "true", "-s", "tag0"
    )
    assert zero.splitlines() == [f"Tag: {'tag0':<30} Count: 4"]
    data = admin.ok("printMsgByQueue", *base_args, "-p", "true", "-e", "1", as_json=True)
    assert data["messages"] == []  # -e: up to the offset of that time (1970: the first)
    data = admin.ok("printMsgByQueue", *base_args, "-p", "true", "-b", "1", as_json=True)
    assert [m["queueOffset"] for m in data["messages"]] == [0, 1, 2, 3]
    assert admin.run("printMsgByQueue", "-t", topic, "-a", admin.broker_name).code == Exit.USAGE  # no -i


def test_query_msg_trace_by_id(admin: Cluster) -> None:
    """A trace record in Java's format (what a Java client with message trace on writes to
    RMQ_SYS_TRACE_TOPIC, keyed by the traced message's ids): one Pub and one SubAfter of the message. Users
    cannot make the system topic itself (the broker refuses it as Apache's does): a trace topic of its own,
    as a client's customized trace topic, found with -t."""
    trace_topic = admin.topic(1)
    msg_id, offset_id, sent_at = (
        "7F00000100002A9F0000000000000001",
        "7F000001000022A90000000000000001",
        1_700_000_000_000,
    )
    pub = "\x01".join(
        [
            "Pub",
            str(sent_at),
            "DefaultRegion",
            "PG_T",
            "TopicT",
            msg_id,
            "tagA",
            "k1",
            "127.0.0.1:10911",
            "5",
            "3",
            "0",
            offset_id,
            "true",
            "10.1.1.1",
        ]
    )
    sub = "\x01".join(["SubAfter", "req1", msg_id, "12", "false", "k1", "0", str(sent_at + 1000), "CG_T"])
    other = "\x01".join(["SubAfter", "req2", "another", "1", "true", "k1", "0", str(sent_at), "CG_T"])
    body = "\x02".join([pub, sub, other]) + "\x02"
    with Producer(name("trace"), namesrv_addr=admin.namesrv) as producer:
        producer.send(Message(trace_topic, body.encode(), keys=[msg_id, offset_id]))
    data = eventually(
        lambda: ok_json(admin, "queryMsgTraceById", "-i", msg_id, "-t", trace_topic),
        "the trace message's index",
    )
    assert [(t["type"], t["group"], t["costTime"], t["status"]) for t in data["traces"]] == [
        ("Pub", "PG_T", 3, "success"),
        ("SubAfter", "CG_T", 12, "failed"),
    ]
    lines = admin.ok("queryMsgTraceById", "-i", msg_id, "-t", trace_topic).splitlines()
    assert lines[0].split() == [
        "#Type",
        "#ProducerGroup",
        "#ClientHost",
        "#SendTime",
        "#CostTimes",
        "#Status",
    ]
    assert lines[1].split()[:2] == ["Pub", "PG_T"] and lines[1].split()[-2:] == ["3ms", "success"]
    assert lines[3].split()[:2] == ["#Type", "#ConsumerGroup"]
    assert lines[4].split()[:2] == ["Sub", "CG_T"] and lines[4].split()[-2:] == ["12ms", "failed"]
    assert admin.run(
        "queryMsgTraceById", "-i", "0A0000000000000000000000000000FF", "-t", trace_topic
    ).code == (Exit.NOT_FOUND)
    # the default trace topic: RMQ_SYS_TRACE_TOPIC (none here: not found)
    assert admin.run("queryMsgTraceById", "-i", msg_id).code == Exit.NOT_FOUND


def test_check_msg_send_rt(admin: Cluster) -> None:
    topic = admin.topic()
    lines = admin.ok("checkMsgSendRT", "-t", topic, "-a", "6", "-s", "16").splitlines()
    assert lines[0].split() == ["#Broker", "Name", "#QID", "#Send", "Result", "#RT"]
    rows = [line.split() for line in lines[1:-1]]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (admin.broker_name, str(i % QUEUES), "true") for i in range(6)
    ]
    assert lines[-1].startswith("Avg RT: ") and float(lines[-1].split()[-1]) >= 0
    with Admin(namesrv_addr=admin.namesrv) as a:
        assert sorted(t.max_offset for t in a.topic_stats(topic)) == [1, 1, 2, 2]
    data = admin.ok("checkMsgSendRT", "-t", topic, "-a", "1", as_json=True)
    assert data["avgRtMs"] == "NaN" and [s["success"] for s in data["sends"]] == [True]
    assert admin.run("checkMsgSendRT", "-t", name("none"), "-a", "1").code == Exit.NOT_FOUND


# --- send probes --------------------------------------------------------------------------------------


def broker_topic_count(admin: Cluster) -> int:
    """Messages stored in the broker's own topic (named after the broker), which the send probes write to."""
    with Admin(namesrv_addr=admin.namesrv) as a:
        return sum(t.max_offset for t in a.topic_stats(admin.broker_name))


def test_send_msg_status(admin: Cluster) -> None:
    before = broker_topic_count(admin)
    lines = admin.ok("sendMsgStatus", "-b", admin.broker_name, "-c", "3", "-s", "20").splitlines()
    assert len(lines) == 3
    for line in lines:
        assert re.fullmatch(
            rf"rt=\d+ms, SendResult=SendResult \[sendStatus=SEND_OK, msgId=[0-9A-F]+, offsetMsgId=[0-9A-F]+, "
            rf"messageQueue=MessageQueue \[topic={admin.broker_name}, brokerName={admin.broker_name}, "
            rf"queueId=\d+\], queueOffset=\d+\]",
            line,
        ), line
    assert broker_topic_count(admin) == before + 4  # mqadmin's first, unprinted send, then -c 3
    data = admin.ok("sendMsgStatus", "-b", admin.broker_name, "-c", "1", as_json=True)
    assert [s["sendStatus"] for s in data["sends"]] == ["SEND_OK"]
    assert admin.run("sendMsgStatus", "-c", "1").code == Exit.USAGE  # no -b


def test_cluster_rt(admin: Cluster) -> None:
    before = broker_topic_count(admin)
    lines = admin.ok("clusterRT", "-a", "3", "--rounds", "1").splitlines()
    assert lines[0].split() == ["#Cluster", "Name", "#Broker", "Name", "#RT", "#successCount", "#failCount"]
    (row,) = [line.split() for line in lines[1:]]
    assert (row[0], row[1], row[3], row[4]) == (admin.cluster, admin.broker_name, "3", "0")
    float(row[2])
    assert broker_topic_count(admin) == before + 3
    logged = admin.ok(
        "clusterRT", "-a", "2", "-p", "true", "-m", "roomA", "-c", admin.cluster, "--rounds", "2", "-i", "0"
    )
    assert [line.split("|")[1:4] for line in logged.splitlines()] == [
        ["roomA", admin.cluster, admin.broker_name]
    ] * 2
    assert admin.run("clusterRT", "-c", name("none"), "--rounds", "1").code == Exit.NOT_FOUND


def read_until(proc: subprocess.Popen[str], done: Callable[[list[str]], bool], what: str) -> list[str]:
    """The lines of a command that does not end by itself, until ``done(lines)``; then it is stopped."""
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        while not done(lines):
            line = proc.stdout.readline()
            assert line, f"{what} ended: {proc.stderr.read() if proc.stderr else ''}"
            lines.append(line.rstrip("\n"))
    finally:
        proc.terminate()
        proc.wait(30)
    return lines


def test_cluster_rt_runs_until_stopped(admin: Cluster) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmq.admin", "clusterRT", "-n", admin.namesrv, "-a", "2", "-i", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = read_until(
        proc, lambda lines: len(lines) == 3, "clusterRT"
    )  # the header and two rounds: it goes on
    assert [line.split()[:2] for line in lines[1:]] == [[admin.cluster, admin.broker_name]] * 2


def test_start_monitoring(admin: Cluster) -> None:
    """An online group whose listener holds its messages: 4 undone, 1 per queue."""
    topic, group = admin.topic(), name("cg")
    release = threading.Event()
    held: list[int] = []

    def hold(msgs: list[Any], _: Any) -> ConsumeConcurrentlyStatus:
        held.extend(m.queue_id for m in msgs)
        release.wait(60)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = base.push_consumer(admin.namesrv, group, topic, hold)  # type: ignore[arg-type]
    try:
        send_keyed(admin.namesrv, topic, admin.broker_name, QUEUES)
        expected = (
            f"reportUndoneMsgs: UndoneMsgs [consumerGroup={group}, topic={topic}, undoneMsgsTotal={QUEUES}, "
            "undoneMsgsSingleMQ=1, undoneMsgsDelayTimeMills="
        )
        out = eventually(
            lambda: (lambda o: expected in o and o)(admin.ok("startMonitoring", "--rounds", "1")),
            "the group in a monitoring round",
        )
        lines = out.splitlines()
        assert lines[0].endswith("beginRound") and lines[-1].endswith("endRound")
        # The held queues, as a round a minute later would see them (the client's real running info)
        with Admin(namesrv_addr=admin.namesrv) as a:
            (conn,) = a.consumer_connection(group).connections
            info = a.consumer_running_info(group, conn.client_id)
        later = int(time.time() * 1000) + 61_000
        blocked = process_queue_report(conn.client_id, info, later)
        assert sorted(line.split("queueId=")[1].split("]")[0] for line in blocked if topic in line) == [
            str(q) for q in range(QUEUES)
        ]
        assert all("can't consume for a while, maybe blocked" in line for line in blocked)
        assert process_queue_report(conn.client_id, info, later - 61_000) == []  # nothing a minute idle now
        assert f"ConsumerGroup: {group}, Subscription different" not in out
        proc = subprocess.Popen(
            [sys.executable, "-m", "rmq.admin", "startMonitoring", "-n", admin.namesrv, "--interval", "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines = read_until(proc, lambda lines: sum("endRound" in x for x in lines) == 2, "startMonitoring")
        rounds = [line.split("=")[-1] for line in lines if "Round" in line]
        assert rounds == ["beginRound", "endRound", "beginRound", "endRound"]
        assert sum(line.startswith(expected) for line in lines) == 2
    finally:
        release.set()
        consumer.shutdown()


# --- the command set ------------------------------------------------------------------------------------


def test_every_mqadmin_command_is_a_command() -> None:
    """Apache mqadmin 4.9.8's 56 commands (the list its peer test reads from mqadmin itself) are all
    rmqadmin commands, found whatever their case, each with ``help``."""
    listed = set(cli.list_commands(click.Context(cli)))
    mqadmin = IN_TEST_MQADMIN | IN_THIS_MODULE | ACL_COMMANDS
    assert len(mqadmin) == 56 and mqadmin <= listed, sorted(mqadmin - listed)
    helped = CliRunner().invoke(cli, ["help", "SKIPACCUMULATEDMESSAGE"])
    assert helped.exit_code == 0 and "skipAccumulatedMessage [OPTIONS]" in helped.stdout
    assert "--force" in helped.stdout and "-g, --group" in helped.stdout
    assert "updateTopicPerm" in CliRunner().invoke(cli, ["--help"]).stdout
