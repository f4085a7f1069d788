"""The rest of Apache ``mqadmin`` 4.9.8's 56 commands against rmq and the Apache 4.9.7 broker (the first ones:
``tests/peers/test_mqadmin.py``, whose fixture, helpers and normalization this module uses with a state of
its own): each command runs against both, and prints the same facts, or the difference is asserted with its
reason. :func:`test_every_command_is_covered` holds the list of all 56 to mqadmin's own.

The request codes these commands added to rmq: GET_BROKER_CONSUME_STATS (317), GET_ALL_PRODUCER_INFO (328),
GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305), QUERY_CONSUME_QUEUE (321), CONSUME_MESSAGE_DIRECTLY (309) on the
broker, GET_NAMESRV_CONFIG (319) and UPDATE_NAMESRV_CONFIG (318) on the name server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.peers import mqadmin as peer_mqadmin
from tests.peers import test_mqadmin as base
from tests.peers.apache import DRIVER_JVM, JAVA_OPENS
from tests.peers.conftest import BROKERS, Peers, unique
from tests.peers.test_mqadmin import QUEUES, Admin, rows

admin = base.admin  # the same module-scoped state as test_mqadmin.py's, made afresh for this module

# --- which test compares which command -------------------------------------------------------------------

IN_TEST_MQADMIN = {
    "updateTopic",
    "deleteTopic",
    "updateSubGroup",
    "deleteSubGroup",
    "updateBrokerConfig",
    "updateTopicPerm",
    "topicRoute",
    "topicStatus",
    "topicClusterList",
    "brokerStatus",
    "queryMsgById",
    "queryMsgByKey",
    "queryMsgByUniqueKey",
    "queryMsgByOffset",
    "printMsg",
    "producerConnection",
    "consumerConnection",
    "consumerProgress",
    "consumerStatus",
    "cloneGroupOffset",
    "clusterList",
    "topicList",
    "wipeWritePerm",
    "addWritePerm",
    "resetOffsetByTime",
    "cleanExpiredCQ",
    "deleteExpiredCommitLog",
    "cleanUnusedTopic",
    "statsAll",
    "getBrokerConfig",
}
IN_THIS_MODULE = {
    "brokerConsumeStats",
    "producer",
    "getNamesrvConfig",
    "updateNamesrvConfig",
    "queryCq",
    "exportMetadata",
    "exportConfigs",
    "exportMetrics",
    "queryMsgTraceById",
    "printMsgByQueue",
    "sendMsgStatus",
    "updateKvConfig",
    "deleteKvConfig",
    "skipAccumulatedMessage",
    "updateOrderConf",
    "startMonitoring",
    "allocateMQ",
    "checkMsgSendRT",
    "clusterRT",
    "getConsumerConfig",
    "sendMessage",
    "consumeMessage",
}
# The ACL commands (UPDATE_AND_CREATE_ACL_CONFIG 50, DELETE_ACL_CONFIG 51, GET_BROKER_CLUSTER_ACL_INFO 52,
# UPDATE_GLOBAL_WHITE_ADDRS_CONFIG 53) need brokers with ACL on; they are compared with the ACL work
# (issue 28 leaves them to the ACL issue), not against these peers, which run without ACL.
ACL_COMMANDS = {"updateAclConfig", "deleteAclConfig", "clusterAclConfigVersion", "updateGlobalWhiteAddr"}


def test_every_command_is_covered(peers: Peers) -> None:
    """mqadmin's own list (``mqadmin`` without arguments) is exactly the commands the two modules compare
    and the ACL ones."""
    home = peer_mqadmin._home(peers.home / "mqadmin-list")
    argv = ["java", *DRIVER_JVM, *JAVA_OPENS, f"-Duser.home={home / 'user'}", "-cp", f"{peers.libs.client}/*"]
    proc = subprocess.run(
        [*argv, peer_mqadmin.MQADMIN],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=dict(os.environ, ROCKETMQ_HOME=str(home / "rocketmq")),
        cwd=home,
    )
    listed = {m.group(1) for m in re.finditer(r"^ {3}(\w+)\s", proc.stdout, re.MULTILINE)}
    assert len(listed) == 56, proc.stdout + proc.stderr
    assert listed == IN_TEST_MQADMIN | IN_THIS_MODULE | ACL_COMMANDS
    assert not IN_TEST_MQADMIN & IN_THIS_MODULE


# --- helpers ---------------------------------------------------------------------------------------------


def request(admin: Admin, broker: str, code: RequestCode, fields: dict[str, str] | None = None) -> Any:
    return invoke_sync(admin.broker_addr(broker), create_request(code, fields or {}), 10_000)


def namesrv_request(admin: Admin, broker: str, code: RequestCode, body: bytes | None = None) -> Any:
    return invoke_sync(admin.peers.namesrv(broker), create_request(code, {}, body), 10_000)


def run_each_args(admin: Admin, make: Any) -> dict[str, peer_mqadmin.Run]:
    """A command whose arguments differ by broker: ``make(broker)`` gives them."""
    return admin.run_each({b: list(make(b)) for b in BROKERS})


def normalized(admin: Admin, runs: dict[str, peer_mqadmin.Run]) -> dict[str, str]:
    return {b: admin.norm[b](r.ok().out) for b, r in runs.items()}


# --- broker views: 317, 328, 321, 309 ---------------------------------------------------------------------


def test_broker_consume_stats(admin: Admin) -> None:
    """brokerConsumeStats (317): the module's group's rows are the same on both (each queue: 2 of 2
    consumed). The "Diff Total" is over every group of the broker, and the session's other tests leave
    different groups on each, so it is checked against the broker's own answer instead."""
    runs = run_each_args(admin, lambda b: ["brokerConsumeStats", "-b", admin.broker_addr(b)])
    out = normalized(admin, runs)
    mine = {b: sorted(r for r in rows(o) if len(r) > 2 and r[1] == admin.group) for b, o in out.items()}
    assert mine["rmq"] == mine["apache"]
    assert [r[:7] for r in mine["rmq"]] == [
        [admin.topic, admin.group, "broker-a", str(q), "2", "2", "0"] for q in range(QUEUES)
    ]
    for b in BROKERS:
        body = fastjson.loads(
            bytes(request(admin, b, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"}).body)
        )
        assert body["brokerAddr"] == admin.broker_addr(b)
        groups = {g for entry in body["consumeStatsList"] for g in entry}
        assert admin.group in groups, b
        total = re.search(r"Diff Total: (\d+)", out[b])
        assert total is not None and int(total.group(1)) == body["totalDiff"], b
        # isOrder: only order topics (the module's topic is not one): the group is listed with no stats.
        ordered = fastjson.loads(
            bytes(request(admin, b, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "true"}).body)
        )
        assert {admin.group: []} in ordered["consumeStatsList"], b


def test_producer(admin: Admin) -> None:
    """producer (328): every producer connection by group; the module's producer group holds one instance
    on both, reported alike (client id, remote address, language, version, last heartbeat)."""
    runs = run_each_args(admin, lambda b: ["producer", "-b", admin.broker_addr(b)])
    out = normalized(admin, runs)
    mine = {b: [line for line in o.splitlines() if f"({admin.pgroup})" in line] for b, o in out.items()}
    assert mine["rmq"] == mine["apache"]
    assert len(mine["rmq"]) == 1
    assert re.fullmatch(
        rf"producer group \({admin.pgroup}\) instance : <clientId>,remoteIP=/<clientAddr>, "
        r"language=JAVA, version=\d+, lastUpdateTimestamp=<ms>",
        mine["rmq"][0],
    ), mine["rmq"][0]


def _cq(admin: Admin, *extra: str) -> dict[str, str]:
    runs = run_each_args(
        admin,
        lambda b: ["queryCq", "-t", admin.topic, "-q", "1", "-i", "0", "-b", admin.broker_addr(b), *extra],
    )
    # queryCq prints its failures' stack traces and exits 0: the output is checked, not Run.ok().
    out = {b: admin.norm[b](r.out) for b, r in runs.items()}
    # Where each message sits in its CommitLog (the session's other tests wrote different amounts before).
    out = {b: re.sub(r"physicOffset=\d+", "physicOffset=<phyOffset>", o) for b, o in out.items()}
    # A subscription's version is the time the consumer made it.
    return {b: re.sub(r'"subVersion":\d+', '"subVersion":<ms>', o) for b, o in out.items()}


def test_query_cq(admin: Admin) -> None:
    """queryCq (321): the queue's bounds and units (CommitLog offset, size, tags code) are the same but for
    where the messages sit in each CommitLog; with -g, the group's subscription of the topic."""
    out = _cq(admin)
    assert out["rmq"] == out["apache"]
    assert "max: 2, min: 0" in out["rmq"] and out["rmq"].count("ConsumeQueueData{") == 2
    tags_code = str(sum(ord(c) * 31 ** (3 - i) for i, c in enumerate("TagA")))  # Java's "TagA".hashCode()
    assert f"tagsCode={tags_code}, extendDataJson='null', bitMap='null', eval=false, msg='null'" in out["rmq"]
    with_group = _cq(admin, "-g", admin.group)
    assert with_group["rmq"] == with_group["apache"]
    assert '"subString":"*"' in with_group["rmq"] and "Filter data:\nnull" in with_group["rmq"]


@pytest.mark.parametrize(
    ("queue", "index", "remark"),
    [(9, 0, "9@{topic} is not exist!"), (1, 5, "")],
)
def test_query_cq_missing(admin: Admin, queue: int, index: int, remark: str) -> None:
    """A queue the broker does not have: SYSTEM_ERROR naming it on both; an index past the queue's end:
    SUCCESS with no body and the remark saying so."""
    fields = {"topic": admin.topic, "queueId": str(queue), "index": str(index), "count": "10"}
    for b in BROKERS:
        response = request(admin, b, RequestCode.QUERY_CONSUME_QUEUE, fields)
        if remark:
            assert (response.code, response.remark) == (
                ResponseCode.SYSTEM_ERROR,
                remark.format(topic=admin.topic),
            ), b
        else:
            assert response.code == ResponseCode.SUCCESS and response.body is None, b
            assert response.remark == f"Index {index} of {queue}@{admin.topic} is not exist!", b


def test_query_msg_by_id_consume_directly(admin: Admin) -> None:
    """queryMsgById -g -d: the broker forwards the message to the named consumer (309) to consume it once;
    its result is the same on both."""
    state = {b: admin.held[b].state for b in BROKERS}
    runs = run_each_args(
        admin,
        lambda b: [
            "queryMsgById",
            "-i",
            admin.sent(b, 3)["offsetMsgId"],
            "-g",
            admin.group,
            "-d",
            state[b]["clientId"],
        ],
    )
    out = normalized(admin, runs)
    out = {b: re.sub(r"spentTimeMills=\d+", "spentTimeMills=<ms>", o) for b, o in out.items()}
    assert out["rmq"] == out["apache"]
    assert "consumeResult=CR_SUCCESS" in out["rmq"]


# --- name server config: 319, 318 -------------------------------------------------------------------------


def _namesrv_config(admin: Admin) -> dict[str, dict[str, str]]:
    out = admin.ok("getNamesrvConfig")
    line = re.compile(r"^(\w+)\s+=  (.*)$", re.MULTILINE)
    return {b: dict(line.findall(o)) for b, o in out.items()}


def test_get_namesrv_config(admin: Admin) -> None:
    """getNamesrvConfig (319): rmq lists what it has of Apache's NamesrvConfig and NettyServerConfig
    properties, with the same values but the port and one on purpose: rmq serves a route's orderTopicConf
    from the KV config by default (orderMessageEnable true; a 4.9 name server needs it set). Its own:
    scanNotActiveBrokerInterval (RocketMQ 5's name). Apache lists a kvConfigPath always; rmq's broker runs
    its name server with the KV config in memory, so has none to list."""
    conf = _namesrv_config(admin)
    assert set(conf["rmq"]) - set(conf["apache"]) == {"scanNotActiveBrokerInterval"}
    shared = set(conf["rmq"]) & set(conf["apache"])
    assert shared == {"listenPort", "orderMessageEnable", "serverChannelMaxIdleTimeSeconds"}
    assert {k for k in shared if conf["rmq"][k] != conf["apache"][k]} == {"listenPort", "orderMessageEnable"}
    for b in BROKERS:
        assert conf[b]["listenPort"] == admin.peers.namesrv(b).rsplit(":", 1)[1], b
    assert (conf["rmq"]["orderMessageEnable"], conf["apache"]["orderMessageEnable"]) == ("true", "false")
    assert "kvConfigPath" in conf["apache"]


def _namesrv_props(admin: Admin, broker: str) -> dict[str, str]:
    """GET_NAMESRV_CONFIG (319) asked directly (cheaper than a run of mqadmin)."""
    response = namesrv_request(admin, broker, RequestCode.GET_NAMESRV_CONFIG)
    assert response.code == ResponseCode.SUCCESS, broker
    lines = bytes(response.body).decode().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def _order_conf(admin: Admin, broker: str, topic: str) -> str | None:
    fields = {"topic": topic}
    request_ = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, fields)
    response = invoke_sync(admin.peers.namesrv(broker), request_, 10_000)
    assert response.code == ResponseCode.SUCCESS, broker
    value = fastjson.loads_tolerant(bytes(response.body)).get("orderTopicConf")
    return None if value is None else str(value)


def test_update_namesrv_config_and_order_conf(admin: Admin) -> None:
    """updateNamesrvConfig (318) of orderMessageEnable, and updateOrderConf (the ORDER_TOPIC_CONFIG KV
    config): a route carries the order conf exactly while orderMessageEnable is on, on both."""
    before = {b: _namesrv_props(admin, b)["orderMessageEnable"] for b in BROKERS}
    topic = admin.topic
    try:
        out = admin.same("updateOrderConf", "-t", topic, "-v", "broker-a:4", "-m", "put")
        assert out == f"update orderConf success. topic=[{topic}], orderConf=[broker-a:4]"
        out = admin.same("updateOrderConf", "-t", topic, "-m", "get")
        assert out == f"get orderConf success. topic=[{topic}], orderConf=[broker-a:4]"
        for value in ("true", "false"):
            out = admin.same("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", value)
            assert out == f"update name server config success![<namesrv>]\norderMessageEnable : {value}"
            for b in BROKERS:
                assert _namesrv_props(admin, b)["orderMessageEnable"] == value, b
                assert _order_conf(admin, b, topic) == ("broker-a:4" if value == "true" else None), (b, value)
    finally:
        for b, value in before.items():
            body = f"orderMessageEnable={value}\n".encode()
            assert (
                namesrv_request(admin, b, RequestCode.UPDATE_NAMESRV_CONFIG, body).code
                == ResponseCode.SUCCESS
            )
        out = admin.same("updateOrderConf", "-t", topic, "-m", "delete")
    assert out == f"delete orderConf success. topic=[{topic}]"


def test_update_namesrv_config_path_refused(admin: Admin) -> None:
    """A path property is refused on both: NO_PERMISSION, "Can not update config path" (kvConfigPath through
    mqadmin, configStorePath asked directly), and nothing changes."""
    runs = admin.run("updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/elsewhere")
    for b in BROKERS:
        assert "CODE: 16  DESC: Can not update config path" in runs[b].out, b
        response = namesrv_request(admin, b, RequestCode.UPDATE_NAMESRV_CONFIG, b"configStorePath=/tmp/x\n")
        assert (response.code, response.remark) == (ResponseCode.NO_PERMISSION, "Can not update config path")
        assert _namesrv_props(admin, b).get("kvConfigPath") != "/tmp/elsewhere", b


def test_update_namesrv_config_unknown_key(admin: Admin) -> None:
    """rmq is stricter here, on purpose (as for broker config): Apache's name server answers success to a
    key it has not (and drops it), rmq refuses it naming the key; neither lists it after."""
    runs = admin.run("updateNamesrvConfig", "-k", "noSuchNamesrvKey", "-v", "1")
    assert "update name server config success!" in runs["apache"].ok().out
    assert "CODE: 1  DESC: unknown name server properties: noSuchNamesrvKey" in runs["rmq"].out
    for b in BROKERS:
        assert "noSuchNamesrvKey" not in _namesrv_props(admin, b), b


# --- exports ----------------------------------------------------------------------------------------------


def _export(admin: Admin, command: str, *args: str) -> dict[str, dict[str, Any]]:
    """Run an export command into a directory per broker; the JSON file it wrote, by broker."""
    dirs = {b: admin.peers.home / "exports" / unique(command) / b for b in BROKERS}
    runs = run_each_args(admin, lambda b: [command, "-c", "DefaultCluster", "-f", str(dirs[b]), *args])
    out = {}
    for b, r in runs.items():
        path = re.search(r"export (\S+) success", r.ok().out)
        assert path is not None, r.out
        out[b] = json.loads(Path(path.group(1)).read_text())
    return out


def test_export_metadata(admin: Admin) -> None:
    """exportMetadata (GET_ALL_TOPIC_CONFIG, GET_SYSTEM_TOPIC_LIST_FROM_BROKER 305,
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG): the module's topic and group are exported alike; system topics
    (305's list) are left out on both."""
    data = _export(admin, "exportMetadata")
    for b in BROKERS:
        assert set(data[b]) == {"topicConfigTable", "subscriptionGroupTable", "exportTime"}, b
        assert not {"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC"} & set(
            data[b]["topicConfigTable"]
        )
        assert not [t for t in data[b]["topicConfigTable"] if t.startswith("%RETRY%")], b
    topic = {b: data[b]["topicConfigTable"][admin.topic] for b in BROKERS}
    # `order` follows the name servers' ORDER_TOPIC_CONFIG at each broker's next registration (every 30 s,
    # on both): test_update_namesrv_config_and_order_conf sets and deletes it for this topic, so whether a
    # broker registered in between is timing, not a difference between them.
    for b in BROKERS:
        topic[b].pop("order", None)
    assert topic["rmq"] == topic["apache"]
    assert (topic["rmq"]["readQueueNums"], topic["rmq"]["writeQueueNums"]) == (QUEUES, QUEUES)
    group = {b: data[b]["subscriptionGroupTable"][admin.group] for b in BROKERS}
    assert group["rmq"] == group["apache"]
    for b in BROKERS:
        response = request(admin, b, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        assert response.code == ResponseCode.SUCCESS, b
        assert "TBW102" in json.loads(bytes(response.body))["topicList"], b


def test_export_configs(admin: Admin) -> None:
    """exportConfigs: the cluster's scale and the 16 broker properties it picks, the same on both (rmq lists
    filterServerNums, msgTraceTopicName and useTLS, fixed in rmq, for this command: mqadmin stops with a
    NullPointerException on a missing one)."""
    data = _export(admin, "exportConfigs")
    for b in BROKERS:
        assert data[b]["clusterScale"] == {"namesrvSize": 1, "masterBrokerSize": 1, "slaveBrokerSize": 0}, b
    conf = {b: data[b]["brokerConfigs"]["broker-a"] for b in BROKERS}
    assert conf["rmq"] == conf["apache"]
    assert len(conf["rmq"]) == 16 and conf["rmq"]["brokerRole"] == "ASYNC_MASTER"


def test_export_metrics(admin: Admin) -> None:
    """exportMetrics: the same report shape; the counts of the module's state on both (topics and groups
    differ by what the session's other tests made on one broker only, so only their presence is checked).
    Apache samples its rates every 10 s, rmq counts as it goes, so rates are not compared."""
    data = _export(admin, "exportMetrics")
    for b in BROKERS:
        report = data[b]["evaluateReport"]["broker-a"]
        assert set(report) == {"runtimeEnv", "runtimeQuota", "runtimeVersion"}, b
        quota = report["runtimeQuota"]
        assert set(quota) >= {"diskRatio", "tps", "oneDayNum", "topicSize", "groupSize"}, b
        assert quota["topicSize"] >= 1 and quota["groupSize"] >= 1, b
        assert report["runtimeVersion"]["rocketmqVersion"] == "V4_9_8", b  # mqadmin's own version
        assert "JAVA%V4_9_8" in report["runtimeVersion"]["clientInfo"], b
        assert set(data[b]["totalData"]) == {"totalTps", "totalOneDayNum"}, b


# --- KV config, consumer config, allocation ----------------------------------------------------------------


def test_update_and_delete_kv_config(admin: Admin) -> None:
    ns, key = unique("Ns"), "k1"
    out = admin.same("updateKvConfig", "-s", ns, "-k", key, "-v", "v1")
    assert out == "create or update kv config to namespace success."
    fields = {"namespace": ns, "key": key}
    for b in BROKERS:
        got = invoke_sync(admin.peers.namesrv(b), create_request(RequestCode.GET_KV_CONFIG, fields), 10_000)
        assert got.ext_fields.get("value") == "v1", b
    out = admin.same("deleteKvConfig", "-s", ns, "-k", key)
    assert out == "delete kv config from namespace success."
    for b in BROKERS:
        got = invoke_sync(admin.peers.namesrv(b), create_request(RequestCode.GET_KV_CONFIG, fields), 10_000)
        assert got.code == ResponseCode.QUERY_NOT_FOUND, b


def test_get_consumer_config(admin: Admin) -> None:
    """getConsumerConfig: the group's subscription group config as each broker holds it (auto-created by
    the consumer's heartbeat): the same fields and values."""
    out = admin.same("getConsumerConfig", "-g", admin.group, sort=True)
    assert re.search(rf"groupName\s+=  {admin.group}$", out, re.MULTILINE)
    assert re.search(r"retryMaxTimes\s+=  16$", out, re.MULTILINE)


def test_allocate_mq(admin: Admin) -> None:
    """allocateMQ: the route's queues averaged over the given client ids (computed by mqadmin from the
    route, which is the same)."""
    out = admin.same("allocateMQ", "-t", admin.topic, "-i", "10.0.0.1,10.0.0.2")
    result = json.loads(out)
    assert sorted(len(v) for v in result["result"].values()) == [2, 2]


# --- sending and consuming ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def send_topic(admin: Admin) -> str:
    """A topic of this module's send commands (so the held topic's offsets stay as set up)."""
    topic = unique("AdmSend")
    admin.same("updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2")
    return topic


def test_send_message_and_consume_message(admin: Admin, send_topic: str) -> None:
    """sendMessage to a chosen queue, then consumeMessage of that queue from offset 0 (a pull): the same
    send result but the message id, and the same message read back."""
    runs = admin.run(
        "sendMessage",
        "-t",
        send_topic,
        "-p",
        "hello",
        "-k",
        "key1",
        "-c",
        "TagS",
        "-b",
        "broker-a",
        "-i",
        "1",
    )
    out = {b: re.sub(r"[0-9A-F]{32,}", "<msgId>", admin.norm[b](r.ok().out)) for b, r in runs.items()}
    assert out["rmq"] == out["apache"]
    assert re.search(r"broker-a\s+1\s+SEND_OK\s+<msgId>", out["rmq"]), out["rmq"]
    runs = admin.run("consumeMessage", "-t", send_topic, "-b", "broker-a", "-i", "1", "-o", "0", "-c", "1")
    out = {b: re.sub(r"[0-9A-F]{32,}", "<msgId>", admin.norm[b](r.ok().out)) for b, r in runs.items()}
    out = {
        b: re.sub(r"(storeTimestamp|bornTimestamp|commitLogOffset)=\d+", r"\1=<n>", o) for b, o in out.items()
    }
    assert out["rmq"] == out["apache"]
    assert "Consume ok" in out["rmq"] and "keys=key1" in out["rmq"].replace("KEYS=key1", "keys=key1")


def test_print_msg_by_queue(admin: Admin) -> None:
    """printMsgByQueue of one queue, counted by tag and printed: the same messages."""
    out = admin.same(
        "printMsgByQueue",
        "-t",
        admin.topic,
        "-a",
        "broker-a",
        "-i",
        "1",
        "-p",
        "true",
        "-d",
        "true",
        "-f",
        "true",
    )
    assert "Tag: TagA" in out and "Count: 2" in out
    assert f"BODY: {admin.topic}#1" in out and f"BODY: {admin.topic}#5" in out


def test_send_msg_status(admin: Admin) -> None:
    """sendMsgStatus: sends to the topic named as the broker (each broker has it); SEND_OK each time. The
    round trip times and ids differ, only the outcome is compared."""
    runs = admin.run("sendMsgStatus", "-b", "broker-a", "-s", "64", "-c", "2")
    for b in BROKERS:
        out = runs[b].ok().out
        assert out.count("sendStatus=SEND_OK") == 2, (b, out)


def test_check_msg_send_rt(admin: Admin, send_topic: str) -> None:
    """checkMsgSendRT: every send succeeds on both (the table's times differ)."""
    runs = admin.run("checkMsgSendRT", "-t", send_topic, "-a", "4", "-s", "64")
    for b in BROKERS:
        out = runs[b].ok().out
        assert len(re.findall(r"^broker-a\s+\d+\s+true\s+\d+", out, re.MULTILINE)) == 4, (b, out)
        assert "Avg RT:" in out, b


def test_cluster_rt(admin: Admin) -> None:
    """clusterRT: per broker of the cluster, the send round trip; both brokers answer every send. It runs
    until stopped (-i seconds between rounds): the first round is read and the command stopped."""
    row_of = re.compile(r"^DefaultCluster\s+broker-a\s+(\S+)\s+(\S+)\s+(\S+)", re.MULTILINE)
    args = ["clusterRT", "-c", "DefaultCluster", "-a", "3", "-s", "64", "-i", "600"]
    outs = _run_a_while(admin, args, 60.0, until=row_of)
    for b in BROKERS:
        row = row_of.search(outs[b])
        assert row is not None, (b, outs[b])
        assert (row.group(2), row.group(3)) == ("3", "0"), (b, outs[b])  # sends that succeeded, failed


def test_skip_accumulated_message(admin: Admin) -> None:
    """skipAccumulatedMessage: offsets moved to each queue's end (the held group consumed everything, so
    the table shows where it already is); the same on both."""
    out = admin.same("skipAccumulatedMessage", "-g", admin.group, "-t", admin.topic, sort=True)
    table = sorted(r for r in rows(out) if r[:1] == ["broker-a"])
    assert table == [["broker-a", str(q), "2"] for q in range(QUEUES)]


def test_query_msg_trace_by_id(admin: Admin, send_topic: str) -> None:
    """sendMessage with message trace on, then queryMsgTraceById: both brokers keep the trace record
    (RMQ_SYS_TRACE_TOPIC, indexed by the message id) and the same Pub row comes back.

    The trace is sent after the message, asynchronously, by mqadmin's own trace producer, which gives it
    at most 500 ms to leave when the command exits (Apache's AsyncTraceDispatcher.flush); on a loaded
    machine the trace can die with the process on either broker. A broker that shows no trace for its
    message is sent a fresh traced message (three rounds at most), so the check is of the broker keeping
    and indexing what it was sent, not of the client's race."""
    ids: dict[str, str] = {}
    missing = list(BROKERS)
    traced: dict[str, peer_mqadmin.Run] = {}
    for _round in range(3):
        runs = admin.run_each(
            {b: ["sendMessage", "-t", send_topic, "-p", "traced", "-m", "true"] for b in missing}
        )
        for b in missing:
            found = re.search(r"SEND_OK\s+([0-9A-F]{32,})", runs[b].ok().out)
            assert found is not None, (b, runs[b].out)
            ids[b] = found.group(1)
        deadline = time.monotonic() + 20
        while True:
            traced.update(admin.run_each({b: ["queryMsgTraceById", "-i", ids[b]] for b in missing}))
            missing = [b for b in missing if "Pub" not in traced[b].out]
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(1)
        if not missing:
            break
    out = {b: r.ok().out for b, r in traced.items()}
    pub = {b: next(line.split() for line in o.splitlines() if line.startswith("Pub")) for b, o in out.items()}
    for b in BROKERS:
        # Pub, send time, region, producer group, cost, status
        assert pub[b][0] == "Pub" and pub[b][-1] == "success", (b, pub[b])


def _run_a_while(
    admin: Admin, args: list[str], seconds: float, until: re.Pattern[str] | None = None
) -> dict[str, str]:
    """Start a command that does not end by itself against both; stop it once both outputs match ``until``
    (at most ``seconds``), or after ``seconds`` without ``until``; the outputs (``<exited N>`` appended to
    one that ended by itself)."""
    procs, texts, readers = {}, {b: [] for b in BROKERS}, []
    for b in BROKERS:
        home = peer_mqadmin._home(admin.peers.home / "mqadmin-long" / b)
        argv = [
            "java",
            *DRIVER_JVM,
            *JAVA_OPENS,
            f"-Duser.home={home / 'user'}",
            f"-Drocketmq.client.logRoot={home / 'client-logs'}",
            "-cp",
            f"{admin.peers.libs.client}/*",
            peer_mqadmin.MQADMIN,
            *args,
            "-n",
            admin.peers.namesrv(b),
        ]
        env = dict(os.environ, ROCKETMQ_HOME=str(home / "rocketmq"))
        p = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=home
        )
        procs[b] = p
        stdout = p.stdout
        assert stdout is not None
        readers.append(threading.Thread(target=lambda f=stdout, t=texts[b]: t.extend(f), daemon=True))
        readers[-1].start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if until is not None and all(until.search("".join(texts[b])) for b in BROKERS):
            break
        time.sleep(0.2)
    out = {}
    for p in procs.values():
        p.kill()  # a process that ended by itself keeps its own exit code
        p.wait(30)
    for r in readers:
        r.join(30)
    for b, p in procs.items():
        out[b] = "".join(texts[b]) + ("" if p.returncode == -9 else f"\n<exited {p.returncode}>")
    return out


def test_start_monitoring(admin: Admin) -> None:
    """startMonitoring runs until stopped, reporting to its log only: the comparison is that it runs against
    both without a failure for a while."""
    outs = _run_a_while(admin, ["startMonitoring"], 8.0)
    for b in BROKERS:
        assert "<exited" not in outs[b] and not peer_mqadmin.FAILURE.search(outs[b]), (b, outs[b])
