"""Apache ``mqadmin`` (rocketmq-tools 4.9.8, ``MQAdminStartup``) against rmq and against the Apache 4.9.7
broker: each command runs against both (concurrently), and its output must carry the same facts.

The state the commands look at is the same on both: ``rmqpeer.AdminSetup hold`` (tests/peers/mqadmin.py)
creates a topic with 4 queues, sends 8 keyed messages to known queues and keeps a producer and a push
consumer (which consumed everything and committed) connected for the whole module. What legitimately
differs is normalized away (:class:`Normalizer`): addresses, client ids, timestamps and the message ids
each broker gave the messages. Where a command's facts differ for a reason, the test says which and why.
The tests run in file order: the read-only commands first, then those that change state.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.peers.conftest import BROKERS, Peers, unique
from tests.peers.mqadmin import Held, Run, hold_state, mqadmin, mqadmin_both

QUEUES = 4
COUNT = 8


class Normalizer:
    """Replaces what differs between two brokers holding the same messages by a placeholder."""

    def __init__(self, broker_addr: str, namesrv_addr: str, sent: list[dict[str, Any]]) -> None:
        self.subs: list[tuple[str, str]] = [(broker_addr, "<broker>"), (namesrv_addr, "<namesrv>")]
        for i, row in enumerate(sent):
            self.subs += [(row["msgId"], f"<msgId{i}>"), (row["offsetMsgId"], f"<offsetMsgId{i}>")]

    def __call__(self, text: str) -> str:
        for old, new in self.subs:
            text = text.replace(old, new)
        text = re.sub(r"\S+@\d+#\d+", "<clientId>", text)  # ip@pid#nanotime
        text = re.sub(r"127\.0\.0\.1:\d+", "<clientAddr>", text)
        text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(,\d{3})?", "<time>", text)
        text = re.sub(r"(Timestamp=|timestamp=)\d+", r"\1<ms>", text)
        text = re.sub(r"^\d{13}/", "<ms>/", text, flags=re.MULTILINE)
        # Where a message sits in the CommitLog: other tests of the session write to one broker only
        # (the fast-path tests, for one), so the two logs hold different amounts before these messages.
        text = re.sub(r"(CommitLog Offset:\s+)\d+", r"\1<phyOffset>", text)
        text = re.sub(r"(commitLogOffset=)\d+", r"\1<phyOffset>", text)
        # A rate over the last minute: Apache samples it every 10 s, rmq counts it as it happens.
        text = re.sub(r"Consume TPS: \d+\.\d+", "Consume TPS: <tps>", text)
        # Column padding follows the lengths of what was replaced (two client ids can differ in length).
        text = re.sub(r" {2,}", "  ", text)
        return "\n".join(line.rstrip() for line in text.strip().splitlines())


@dataclass
class Admin:
    peers: Peers
    topic: str
    group: str
    pgroup: str
    held: dict[str, Held]
    norm: dict[str, Normalizer]

    def run(self, *args: str, plus: bool = False) -> dict[str, Run]:
        p = self.peers
        namesrvs = {b: p.namesrv(b) for b in BROKERS}
        return mqadmin_both(p.libs, p.home / "mqadmin", namesrvs, *args, classes=p.classes if plus else None)

    def run_each(self, args: dict[str, list[str]]) -> dict[str, Run]:
        """A command whose arguments differ by broker (a message id each broker gave), run against the
        brokers ``args`` names."""
        p = self.peers
        with ThreadPoolExecutor(max(1, len(args))) as pool:
            futures = {
                b: pool.submit(mqadmin, p.libs, p.home / "mqadmin" / b, p.namesrv(b), *args[b]) for b in args
            }
            return {b: f.result() for b, f in futures.items()}

    def ok(self, *args: str, plus: bool = False) -> dict[str, str]:
        """Both runs succeeded; their normalized outputs by broker."""
        return {b: self.norm[b](r.ok().out) for b, r in self.run(*args, plus=plus).items()}

    def same(self, *args: str, plus: bool = False, sort: bool = False) -> str:
        """Both runs succeeded with the same normalized output (lines sorted where a hash map's order
        decides them); that output."""
        out = self.ok(*args, plus=plus)
        if sort:
            out = {b: "\n".join(sorted(o.splitlines())) for b, o in out.items()}
        assert out["rmq"] == out["apache"], f"mqadmin {' '.join(args)}"
        return out["rmq"]

    def sent(self, broker: str, i: int) -> dict[str, Any]:
        return self.held[broker].state["sent"][i]

    def broker_addr(self, broker: str) -> str:
        return self.peers.rmq.broker_addr if broker == "rmq" else self.peers.apache.broker_addr


@pytest.fixture(scope="module")
def admin(peers: Peers) -> Iterator[Admin]:
    topic, group, pgroup = unique("AdmT"), unique("AdmG"), unique("AdmP")
    with ThreadPoolExecutor(len(BROKERS)) as pool:
        futures = {
            b: pool.submit(
                hold_state,
                peers.libs,
                peers.classes,
                peers.home / "mqadmin-hold" / b,
                namesrv=peers.namesrv(b),
                topic=topic,
                queues=QUEUES,
                count=COUNT,
                group=group,
                pgroup=pgroup,
            )
            for b in BROKERS
        }
        held = {}
        for b, f in futures.items():
            held[b] = f.result()
    addrs = {"rmq": peers.rmq.broker_addr, "apache": peers.apache.broker_addr}
    norm = {b: Normalizer(addrs[b], peers.namesrv(b), held[b].state["sent"]) for b in BROKERS}
    try:
        yield Admin(peers, topic, group, pgroup, held, norm)
    finally:
        for h in held.values():
            h.close()


def rows(text: str) -> list[list[str]]:
    """The data rows of a table mqadmin printed (header lines start with '#')."""
    return [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]


# --- read-only commands: the same normalized output -------------------------------------------------


@pytest.mark.parametrize(
    ("command", "fact"),
    [
        ("topicRoute -t {topic}", '"readQueueNums":4'),
        ("topicClusterList -t {topic}", "DefaultCluster"),
        ("consumerConnection -g {group}", "ConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET"),
        ("producerConnection -g {pgroup} -t {topic}", "<clientAddr>"),
        ("queryMsgByKey -t {topic} -k k5", "<msgId5>  1"),
        ("queryMsgByOffset -t {topic} -b broker-a -i 1 -o 1", "Keys:  [k5]"),
    ],
)
def test_same_output(admin: Admin, command: str, fact: str) -> None:
    args = command.format(topic=admin.topic, group=admin.group, pgroup=admin.pgroup).split()
    out = admin.same(*args)
    assert fact in out  # a fact of the state, not only a header or an empty answer


def test_topic_status_and_progress_facts(admin: Admin) -> None:
    status = rows(admin.same("topicStatus", "-t", admin.topic))
    assert [(r[0], r[1], r[2], r[3]) for r in status] == [
        ("broker-a", str(q), "0", "2") for q in range(QUEUES)
    ]
    progress = rows(admin.same("consumerProgress", "-g", admin.group))
    mine = sorted((r[2], r[3], r[4]) for r in progress if r[0] == admin.topic)
    assert mine == [(str(q), "2", "2") for q in range(QUEUES)]


def test_consumer_progress_of_all_groups(admin: Admin) -> None:
    """Without -g: one line per online group (the session's other tests may have other groups online on
    one broker only, so only this module's group is compared)."""
    out = admin.ok("consumerProgress")
    mine = {b: [r for r in rows(o) if r[0] == admin.group] for b, o in out.items()}
    assert mine["rmq"] == mine["apache"] == [[admin.group, "1", "V4_9_8", "PUSH", "CLUSTERING", "0", "0"]]


def test_get_consumer_status(admin: Admin) -> None:
    """getConsumerStatus (INVOKE_BROKER_TO_GET_CONSUMER_STATUS, 223): each consumer's offsets, asked by the
    broker (221). rocketmq-tools 4.9.8 ships the command but does not register it in MQAdminStartup, so it
    runs under rmqpeer.MQAdminPlus."""
    out = admin.same("getConsumerStatus", "-g", admin.group, "-t", admin.topic, plus=True, sort=True)
    assert sorted(r[1:] for r in rows(out) if r[0] == "<clientId>") == [
        ["broker-a", str(q), "2"] for q in range(QUEUES)
    ]


def test_consumer_status_running_info(admin: Admin) -> None:
    """consumerStatus: GET_CONSUMER_RUNNING_INFO (307) forwarded to the consumer; both brokers' consumers
    have the same subscription and a finished rebalance."""
    out = admin.same("consumerStatus", "-g", admin.group)
    assert "Same subscription in the same group of consumer" in out and "Rebalance OK" in out


@pytest.mark.parametrize("which", ["queryMsgById", "queryMsgByUniqueKey"])
def test_query_message_by_id(admin: Admin, which: str) -> None:
    """By offset message id (queryMsgById) and by the client's unique key (queryMsgByUniqueKey): the ids
    differ by broker, the message found is the same."""
    if which == "queryMsgById":
        args = {b: [which, "-i", admin.sent(b, 5)["offsetMsgId"]] for b in BROKERS}
    else:
        args = {b: [which, "-i", admin.sent(b, 5)["msgId"], "-t", admin.topic] for b in BROKERS}
    runs = admin.run_each(args)
    out = {b: admin.norm[b](r.ok().out) for b, r in runs.items()}
    assert out["rmq"] == out["apache"]
    assert "Keys:  [k5]" in out["rmq"] and "Queue Offset:  1" in out["rmq"]


def test_print_msg(admin: Admin) -> None:
    out = admin.same("printMsg", "-t", admin.topic, "-c", "UTF-8", "-d", "true")
    for i in range(COUNT):
        assert f"MSGID: <msgId{i}>" in out
        assert f"BODY: {admin.topic}#{i}" in out


def test_stats_all(admin: Admin) -> None:
    """statsAll -t: VIEW_BROKER_STATS_DATA (315) TOPIC_PUT_NUMS and GROUP_GET_NUMS, and the consume stats.
    The accumulation (a fact of the offsets) is the same. The rates and 24-hour counts are not compared
    between the two: Apache samples its counters every 10 s starting at the next whole minute after boot,
    so it prints 0 until its samples cover the sends, then 8; rmq counts from the store (puts) and per pull
    (gets) at once, so it prints 8 messages in and 8 out."""
    out = admin.ok("statsAll", "-t", admin.topic)
    line = {b: next(r for r in rows(o) if r[0] == admin.topic) for b, o in out.items()}
    assert line["rmq"][:3] == line["apache"][:3] == [admin.topic, admin.group, "0"]
    assert line["rmq"][5:] == [str(COUNT), str(COUNT)]
    assert line["apache"][5:] in ([str(COUNT), str(COUNT)], ["0", "0"])


def test_stats_data_unknown_stats_name_and_key(admin: Admin) -> None:
    """What statsAll swallows: a stats name or key the broker has not is SYSTEM_ERROR on both."""
    for stats_name, key in (("NO_SUCH_STATS", admin.topic), ("TOPIC_PUT_NUMS", "NoSuchTopic_x")):
        for b in BROKERS:
            request = create_request(
                RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": stats_name, "statsKey": key}
            )
            response = invoke_sync(admin.broker_addr(b), request, 10_000)
            assert (response.code, response.remark) == (
                ResponseCode.SYSTEM_ERROR,
                f"The stats <{stats_name}> <{key}> not exist",
            ), b


def test_cluster_list(admin: Admin) -> None:
    """clusterList: the same cluster, broker, id and address, no load queued, the same disk usage (both stores
    share one file system). Different by design: the version (rmq answers as the 4.9.8 its clients speak,
    the peer is 4.9.7) and #Hour, the age of the earliest message: Apache's broker reports
    earliestMessageTimeStamp -1 while its commit log holds less than 2 x maxMessageSize (it reads that much
    at the log's start), so its #Hour is the time since 1970; rmq reports the real earliest store time."""
    out = admin.ok("clusterList")
    row = {b: next(r for r in rows(o) if r[0] == "DefaultCluster") for b, o in out.items()}
    for b in BROKERS:
        cluster, name, bid, addr, _version, in_tps, out_tps, pc_wait, hour, _space = row[b]
        assert (cluster, name, bid, addr) == ("DefaultCluster", "broker-a", "0", "<broker>"), b
        assert re.fullmatch(r"\d+\.\d\d\(0,0ms\)", in_tps) and re.fullmatch(r"\d+\.\d\d\(0,0ms\)", out_tps), b
        assert pc_wait == "0", b
        assert float(hour) >= 0, b
    assert (row["rmq"][4], row["apache"][4]) == ("V4_9_8", "V4_9_7")
    assert float(row["rmq"][8]) < 1 < float(row["apache"][8])
    assert abs(float(row["rmq"][9]) - float(row["apache"][9])) <= 0.011


def test_broker_status(admin: Admin) -> None:
    """brokerStatus: rmq reports a subset of Apache's runtime-info keys (it has no thread pools' capacities,
    latency histograms or transient store pool), every key clusterList reads among them, plus its own
    store repairs, whether its disk is full, its send and pull fast paths' counts and its network thread's
    wake-ups; the counters both keep are there on both."""
    out = admin.ok("brokerStatus", "-c", "DefaultCluster")
    line = re.compile(r"^<broker>\s+(\S+?)\s*: ?(.*)$", re.MULTILINE)
    keys = {b: dict(line.findall(o)) for b, o in out.items()}
    rmq_only = {k for k in keys["rmq"] if k not in keys["apache"]}
    # rmq's own: store repairs, a full disk, what the network thread's send and pull fast paths took or
    # declined, how often the network thread woke up, the transaction service's floor and counters, POP's
    # in-flight messages and revive backlog, the gRPC endpoint's 5.x clients.
    own = re.compile(
        r"storeRepair\w+|diskFull|fastSend\w*|fastPull\w*|netThreadWakeups|netThreadSpinMillis|transaction[A-Z]\w*|pop[A-Z]\w*"
        r"|grpc[A-Z]\w*"
    )
    assert {"storeRepairCount", "diskFull"} <= rmq_only
    assert [k for k in rmq_only if not own.fullmatch(k)] == []
    for key in (
        "msgPutTotalTodayNow",
        "msgGetTotalTodayNow",
        "msgPutTotalTodayMorning",
        "msgGetTotalTodayMorning",
        "msgPutTotalYesterdayMorning",
        "msgGetTotalYesterdayMorning",
        "putTps",
        "getTransferedTps",
        "sendThreadPoolQueueSize",
        "pullThreadPoolQueueSize",
        "sendThreadPoolQueueHeadWaitTimeMills",
        "pullThreadPoolQueueHeadWaitTimeMills",
        "pageCacheLockTimeMills",
        "earliestMessageTimeStamp",
        "commitLogDiskRatio",
        "brokerVersionDesc",
        "commitLogMinOffset",
        "commitLogMaxOffset",
        "dispatchBehindBytes",
    ):
        assert key in keys["rmq"] and key in keys["apache"], key
    for b in BROKERS:
        assert int(keys[b]["msgPutTotalTodayNow"]) >= COUNT and int(keys[b]["msgGetTotalTodayNow"]) >= COUNT
        # Both started today (the test session): nothing counted at this or yesterday's morning.
        assert keys[b]["msgPutTotalTodayMorning"] == keys[b]["msgPutTotalYesterdayMorning"] == "0"


def test_get_broker_config(admin: Admin) -> None:
    """getBrokerConfig: every key rmq has (but its own, 5.x's and an unset one) Apache has too, with the
    same value, except the address and path ones. rmq lists only what it implements (Apache lists ~170
    keys)."""
    out = admin.ok("getBrokerConfig", "-c", "DefaultCluster")
    conf = {
        b: dict(
            line.split("=", 1) for line in o.splitlines() if " =  " in line or line.rstrip().endswith("=")
        )
        for b, o in out.items()
    }
    conf = {b: {k.strip(): v.strip() for k, v in c.items()} for b, c in conf.items()}
    rmq_only = {
        "logDir",
        "logFileCount",
        "logFileMaxSize",
        "statsLogInterval",
        "bindAddress",
        "channelExpiredTimeout",
        "diskSpaceWarningLevelRatio",
        "networkThread",
        "networkThreadSpinMicros",
        "serverMaxInFlight",
        "timerMaxDelaySec",
        "dashboardPort",
        "dashboardAdmin",
        "aclFilePath",
        "aclRequireTls",
        "brokerTakeoverAllowed",
        "grpcServerPort",
        "grpcFastSendEnable",
        # RocketMQ 5.x's names (the broker's own credentials, the Prometheus exporter)
        "innerClientAuthenticationCredentials",
        "metricsExporterType",
        "metricsLabel",
        "metricsPromExporterHost",
        "metricsPromExporterPort",
        # RocketMQ 5.x's POP settings
        "reviveQueueNum",
        "popFromRetryProbability",
        "enableRetryTopicV2",
        "maxPopPollingSize",
        # a 4.9 property Apache leaves out while unset (null); rmq lists it empty
        "haMasterAddress",
    }
    # RocketMQ reads its tls.* settings as JVM system properties, not broker config; rmq lists them.
    rmq_only |= {k for k in conf["rmq"] if k.startswith("tls.")}
    assert set(conf["rmq"]) - set(conf["apache"]) == rmq_only
    differ = {k for k in set(conf["rmq"]) - rmq_only if conf["rmq"][k] != conf["apache"][k]}
    # Ports and paths are each broker's own (namesrvAddr is normalized).
    assert differ == {"listenPort", "haListenPort", "storePathRootDir", "rocketmqHome"}


def test_topic_list(admin: Admin) -> None:
    """topicList: the same topics, but for the transaction half topics: Apache's transaction check (every
    transactionCheckInterval) creates RMQ_SYS_TRANS_HALF_TOPIC on its first scan, rmq at the first half
    message; and the 5.x topics rmq's broker makes when first used, POP's revive topic (at the first POP
    request) and the timer's ``rmq_sys_wheel_timer`` (at the first message with a delivery time): the 5.x
    client tests receive from and send delayed messages to the session's rmq broker; the 4.9.7 peer has
    neither. Topics the session's other tests made on one broker only (their names end in 8 or 10 hex digits)
    are left out."""
    out = admin.ok("topicList")
    own = re.compile(r"_[0-9a-f]{8}(?:[0-9a-f]{2})?$")
    topics = {
        b: {line.strip() for line in o.splitlines() if line.strip() and not own.search(line.strip())}
        for b, o in out.items()
    }
    for b in BROKERS:
        assert {admin.topic, f"%RETRY%{admin.group}"} <= {line.strip() for line in out[b].splitlines()}
    one_sided = {
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "rmq_sys_REVIVE_LOG_DefaultCluster",
        "rmq_sys_wheel_timer",
    }
    assert topics["rmq"] ^ topics["apache"] <= one_sided
    assert {"TBW102", "SCHEDULE_TOPIC_XXXX", "DefaultCluster", "broker-a"} <= topics["rmq"]


# --- commands that change state --------------------------------------------------------------------


def test_update_broker_config_allowed_key(admin: Admin) -> None:
    try:
        out = admin.same("updateBrokerConfig", "-c", "DefaultCluster", "-k", "defaultQueryMaxNum", "-v", "33")
        assert out == "update broker config success, <broker>"
        conf = admin.ok("getBrokerConfig", "-c", "DefaultCluster")
        for b in BROKERS:
            assert re.search(r"^defaultQueryMaxNum\s+=  33$", conf[b], re.MULTILINE), b
    finally:
        admin.same("updateBrokerConfig", "-c", "DefaultCluster", "-k", "defaultQueryMaxNum", "-v", "32")


@pytest.mark.parametrize(
    ("key", "value", "remark"),
    [
        ("noSuchKeyAtAll", "1", "unknown broker properties: noSuchKeyAtAll"),
        # A key rmq fixes at start; "04" is the default on both, so Apache's broker does not change.
        ("deleteWhen", "04", "these properties cannot be changed at run time: deleteWhen"),
    ],
)
def test_update_broker_config_refused_key(admin: Admin, key: str, value: str, remark: str) -> None:
    """rmq is stricter than Apache here, on purpose: Apache's broker says success to any key (it drops an
    unknown one silently; a store key it changes under the running store, a path included), rmq refuses the
    request and names the key. (No path key is tried: Apache would move the session's peer store.)"""
    runs = admin.run("updateBrokerConfig", "-c", "DefaultCluster", "-k", key, "-v", value)
    assert admin.norm["apache"](runs["apache"].ok().out) == "update broker config success, <broker>"
    assert runs["rmq"].code == 0  # mqadmin prints the broker's refusal and exits 0
    assert f"CODE: 1  DESC: {remark}" in runs["rmq"].out
    config = {
        b: bytes(
            invoke_sync(admin.broker_addr(b), create_request(RequestCode.GET_BROKER_CONFIG), 10_000).body
        )
        for b in BROKERS
    }
    # Apache: the unknown key is gone without a word, deleteWhen "changed" (to the value it had).
    assert (f"{key}={value}".encode() in config["apache"]) == (key == "deleteWhen")
    assert f"{key}=".encode() not in config["rmq"]  # rmq lists only keys it was given; neither was applied


def test_update_topic_and_delete_topic(admin: Admin) -> None:
    topic = unique("AdmNew")
    out = admin.same("updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "3", "-w", "3")
    assert f"TopicConfig [topicName={topic}, readQueueNums=3, writeQueueNums=3, perm=RW-" in out
    route = admin.same("topicRoute", "-t", topic)
    assert '"readQueueNums":3' in route and '"writeQueueNums":3' in route
    out = admin.same("deleteTopic", "-c", "DefaultCluster", "-t", topic)
    assert f"delete topic [{topic}] from NameServer success." in out
    runs = admin.run("topicRoute", "-t", topic)
    for b in BROKERS:
        assert f"No topic route info in name server for the topic: {topic}" in runs[b].out, b


@pytest.mark.parametrize("command", ["cleanExpiredCQ", "cleanUnusedTopic", "deleteExpiredCommitLog"])
def test_store_housekeeping_commands(admin: Admin, command: str) -> None:
    # Both brokers take the request (AdminBrokerProcessor answers SUCCESS); an unsupported request
    # code would print "false". What each does to a store: tests/broker/test_store_housekeeping.py.
    out = admin.same(command, "-c", "DefaultCluster")
    assert out.strip().endswith("success"), out


def test_update_and_delete_sub_group(admin: Admin) -> None:
    group = unique("AdmSG")
    out = admin.same("updateSubGroup", "-c", "DefaultCluster", "-g", group, "-r", "5", "-q", "2")
    assert f"SubscriptionGroupConfig [groupName={group}, consumeEnable=true" in out
    assert "retryQueueNums=2, retryMaxTimes=5" in out
    out = admin.same("deleteSubGroup", "-c", "DefaultCluster", "-g", group)
    assert (
        f"delete subscription group [{group}] from broker [<broker>] in cluster [DefaultCluster] success."
        in out
    )


def test_update_topic_perm(admin: Admin) -> None:
    try:
        out = admin.same("updateTopicPerm", "-c", "DefaultCluster", "-t", admin.topic, "-p", "4")
        assert out == "update topic perm from 6 to 4 in <broker> success."
        assert '"perm":4' in admin.same("topicRoute", "-t", admin.topic)
    finally:
        out = admin.same("updateTopicPerm", "-c", "DefaultCluster", "-t", admin.topic, "-p", "6")
    assert out == "update topic perm from 4 to 6 in <broker> success."


def test_wipe_and_add_write_perm(admin: Admin) -> None:
    """wipeWritePerm / addWritePerm (name server 205 / 327): the broker's topics lose and regain write in
    the route. Each prints how many topics it changed: every topic of the broker, which is the broker's own
    topic count (so it differs by the half topics topicList may differ by)."""
    topics = {
        b: len([line for line in o.splitlines() if line.strip()]) for b, o in admin.ok("topicList").items()
    }
    try:
        out = admin.ok("wipeWritePerm", "-b", "broker-a")
        for b in BROKERS:
            assert (
                out[b] == f"wipe write perm of broker[broker-a] in name server[<namesrv>] OK, {topics[b]}"
            ), b
        assert '"perm":4' in admin.same("topicRoute", "-t", admin.topic)
    finally:
        out = admin.ok("addWritePerm", "-b", "broker-a")
    for b in BROKERS:
        assert out[b] == f"add write perm of broker[broker-a] in name server[<namesrv>] OK, {topics[b]}", b
    assert '"perm":6' in admin.same("topicRoute", "-t", admin.topic)


def query_offsets(admin: Admin, broker: str, group: str) -> list[str | None]:
    out = []
    for q in range(QUEUES):
        fields = {"consumerGroup": group, "topic": admin.topic, "queueId": str(q)}
        response = invoke_sync(
            admin.broker_addr(broker), create_request(RequestCode.QUERY_CONSUMER_OFFSET, fields), 10_000
        )
        out.append(response.ext_fields.get("offset") if response.code == ResponseCode.SUCCESS else None)
    return out


def test_clone_group_offset(admin: Admin) -> None:
    """cloneGroupOffset: mqadmin 4.9.8 clones through UPDATE_CONSUMER_OFFSET per queue, from the source
    group's consume stats; the clone's offsets are then the source's on both."""
    dest = unique("AdmClone")
    out = admin.same("cloneGroupOffset", "-s", admin.group, "-d", dest, "-t", admin.topic)
    assert (
        out
        == f"clone group offset success. srcGroup[{admin.group}], destGroup=[{dest}], topic[{admin.topic}]"
    )
    for b in BROKERS:
        assert query_offsets(admin, b, dest) == ["2"] * QUEUES, b


def test_clone_group_offset_request(admin: Admin) -> None:
    """CLONE_GROUP_OFFSET (314) itself, which mqadmin does not send but DefaultMQAdminExt.cloneGroupOffset
    does: the same offsets on both."""
    dest = unique("AdmClone314")
    fields = {"srcGroup": admin.group, "destGroup": dest, "topic": admin.topic, "offline": "false"}
    for b in BROKERS:
        response = invoke_sync(
            admin.broker_addr(b), create_request(RequestCode.CLONE_GROUP_OFFSET, fields), 10_000
        )
        assert response.code == ResponseCode.SUCCESS, (b, response.remark)
        assert query_offsets(admin, b, dest) == ["2"] * QUEUES, b


def test_reset_offset_by_time_offline_group(admin: Admin) -> None:
    """resetOffsetByTime for a group with no consumer online: the broker answers 222 CONSUMER_NOT_ONLINE on
    both, and mqadmin falls back to committing the offsets itself (the old way), printing the rollback."""
    dest = unique("AdmOffline")
    # A group that consumed everything (offsets 2, its retry topic made) and went away.
    admin.peers.both("push", topic=admin.topic, group=dest, expect=COUNT)
    for b in BROKERS:
        assert query_offsets(admin, b, dest) == ["2"] * QUEUES, b
    out = admin.same("resetOffsetByTime", "-g", dest, "-t", admin.topic, "-s", "0", sort=True)
    assert len([r for r in rows(out) if r[:1] == ["broker-a"]]) == QUEUES
    for b in BROKERS:
        assert query_offsets(admin, b, dest) == ["0"] * QUEUES, b


def test_reset_offset_by_time_online_group(admin: Admin) -> None:
    """resetOffsetByTime (INVOKE_BROKER_TO_RESET_OFFSET, 222) for the online group: the broker works out the
    offsets of time 0 (each queue's first message) and has the consumer reset to them (220); the table
    printed is the same. The consumer then consumes everything again and commits (not awaited here)."""
    out = admin.same("resetOffsetByTime", "-g", admin.group, "-t", admin.topic, "-s", "0", sort=True)
    table = sorted(r for r in rows(out) if r[:1] == ["broker-a"])
    assert table == [["broker-a", str(q), "0"] for q in range(QUEUES)]
