"""Topic commands: updateTopic, deleteTopic, topicList, topicRoute, topicStatus, topicClusterList,
updateTopicPerm, updateOrderConf, allocateMQ."""

from __future__ import annotations

import json

import click

from rmq.admin.base import Out, admin_command, human_ms
from rmq.client.admin_ext import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, Admin, AdminNotFoundError
from rmq.client.consumer.allocate.averagely import AllocateMessageQueueAveragely
from rmq.client.errors import MQClientError
from rmq.common.codes import MASTER_ID, NAMESPACE_ORDER_TOPIC_CONFIG, PermName
from rmq.common.route import TopicConfig
from rmq.common.topic_attributes import alter_attributes
from rmq.remoting import RemotingError

__all__ = ["perm_text", "topic_config_text"]


def perm_text(perm: int) -> str:
    """Java's ``PermName.perm2String``: ``6`` -> ``RW-``."""
    return (
        ("R" if perm & PermName.READ else "-")
        + ("W" if perm & PermName.WRITE else "-")
        + ("X" if perm & PermName.INHERIT else "-")
    )


def topic_config_text(tc: TopicConfig) -> str:
    return (
        f"TopicConfig [topicName={tc.topic_name}, readQueueNums={tc.read_queue_nums}, "
        f"writeQueueNums={tc.write_queue_nums}, perm={perm_text(tc.perm)}, "
        f"topicFilterType={tc.topic_filter_type}, topicSysFlag={tc.topic_sys_flag}, "
        f"order={str(tc.order).lower()}"
        + (
            ", attributes={" + ", ".join(f"{k}={v}" for k, v in sorted(tc.attributes.items())) + "}"
            if tc.attributes
            else ""
        )
        + "]"
    )


def _target(broker_addr: str | None, cluster: str | None) -> None:
    if bool(broker_addr) == bool(cluster):
        raise click.UsageError("give exactly one of -b brokerAddr and -c clusterName")


@click.option("-b", "--brokerAddr", "broker_addr", help="Create the topic on this broker.")
@click.option("-c", "--clusterName", "cluster", help="Create the topic on every master of this cluster.")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-r", "--readQueueNums", "read_queues", type=click.IntRange(1), default=8, show_default=True)
@click.option("-w", "--writeQueueNums", "write_queues", type=click.IntRange(1), default=8, show_default=True)
@click.option("-p", "--perm", type=click.IntRange(0, 7), default=6, show_default=True, help="2 W, 4 R, 6 RW.")
@click.option("-o", "--order", type=click.BOOL, default=False, show_default=True, help="Ordered topic.")
@click.option(
    "-a",
    "--attributes",
    help="Topic attributes as mqadmin 5.x takes them: +key=value to set, -key to remove, comma-separated;"
    " rmq knows retention.hours (e.g. +retention.hours=24). Without it an update keeps the topic's.",
)
@admin_command("updateTopic", "Create a topic or update its configuration.")
async def update_topic(
    admin: Admin,
    out: Out,
    broker_addr: str | None,
    cluster: str | None,
    topic: str,
    read_queues: int,
    write_queues: int,
    perm: int,
    order: bool,
    attributes: str | None,
) -> None:
    _target(broker_addr, cluster)
    tc = TopicConfig(topic, read_queues, write_queues, perm, order=order)
    if attributes and "-" not in attributes[:1] and ",-" not in attributes:
        try:  # set-only: refused here as the broker would refuse it (removals are for the broker to judge)
            tc.attributes = alter_attributes({}, attributes, create=True)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="'-a'") from None
    if broker_addr:
        await admin.create_topic(broker_addr, tc, attributes)
        addrs = [broker_addr]
    else:
        assert cluster is not None
        addrs = await admin.create_topic_in_cluster(cluster, tc, attributes)
    for addr in addrs:
        out.line(f"create topic to {addr} success.")
    out.line(topic_config_text(tc))
    out.data({"brokers": addrs, "topicConfig": tc.to_dict()})


@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option(
    "-c", "--clusterName", "cluster", required=True, help="Delete from every master of this cluster."
)
@admin_command("deleteTopic", "Delete a topic from the brokers of a cluster and from the name servers.")
async def delete_topic(admin: Admin, out: Out, topic: str, cluster: str) -> None:
    await admin.topic_route(topic)  # an unknown topic is "not found", not a silent success
    addrs = await admin.delete_topic(topic, cluster)
    out.line(f"delete topic [{topic}] from cluster [{cluster}] success.")
    out.line(f"delete topic [{topic}] from NameServer success.")
    out.data({"topic": topic, "cluster": cluster, "brokers": addrs})


@click.option(
    "-c", "--clusterModel", "cluster_model", is_flag=True, help="Also the cluster and consuming groups."
)
@admin_command("topicList", "List the topics the name servers know.")
async def topic_list(admin: Admin, out: Out, cluster_model: bool) -> None:
    topics = await admin.topic_list()
    if not cluster_model:
        for t in topics:
            out.line(t)
        out.data(topics)
        return
    rows = []
    for t in topics:
        if t.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            continue
        cluster, groups = "", [""]
        try:
            route = await admin.topic_route(t)
            cluster = route.broker_datas[0].cluster if route.broker_datas else ""
            groups = await admin.topic_consumed_by(t) or [""]
        except (MQClientError, RemotingError, OSError):
            pass
        rows += [(cluster, t, g) for g in groups]
    out.table("%-20s  %-64s  %-64s", ("#Cluster Name", "#Topic", "#Consumer Group"), rows)
    out.data([{"cluster": c, "topic": t, "group": g} for c, t, g in rows])


@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-l", "--list", "as_list", is_flag=True, help="A table instead of the route's JSON.")
@admin_command("topicRoute", "The route of a topic: its brokers and queues.")
async def topic_route(admin: Admin, out: Out, topic: str, as_list: bool) -> None:
    route = await admin.topic_route(topic)
    out.data(route.to_dict())
    if not as_list:
        out.line(json.dumps(route.to_dict(), indent=2))
        return
    fmt = "%-45s %-32s %-50s %-10s %-11s %-5s"
    queues = {q.broker_name: q for q in route.queue_datas}
    rows = []
    total_r = total_w = 0
    for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
        q = queues.get(bd.broker_name)
        if q is None:
            continue
        total_r += q.read_queue_nums
        total_w += q.write_queue_nums
        addrs = "{" + ", ".join(f"{i}={a}" for i, a in sorted(bd.broker_addrs.items())) + "}"
        rows.append((bd.cluster, bd.broker_name, addrs, q.read_queue_nums, q.write_queue_nums, q.perm))
    out.table(
        fmt, ("#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm"), rows
    )
    out.line("-" * 158)
    out.line((fmt % ("Total:", len(queues), "", total_r, total_w, "")).rstrip())


@click.option("-t", "--topic", required=True, help="Topic name.")
@admin_command("topicStatus", "Min and max offset and last update time of each queue of a topic.")
async def topic_status(admin: Admin, out: Out, topic: str) -> None:
    rows = await admin.topic_stats(topic)
    out.table(
        "%-32s  %-4s  %-20s  %-20s    %s",
        ("#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"),
        (
            (r.mq.broker_name, r.mq.queue_id, r.min_offset, r.max_offset, human_ms(r.last_update_timestamp))
            for r in rows
        ),
    )
    out.data([r.to_dict() for r in rows])


@click.option("-t", "--topic", required=True, help="Topic name.")
@admin_command("topicClusterList", "The clusters that serve a topic.")
async def topic_cluster_list(admin: Admin, out: Out, topic: str) -> None:
    route = await admin.topic_route(topic.strip())
    names = {bd.broker_name for bd in route.broker_datas}
    info = await admin.cluster_info()
    clusters = sorted(c for c, brokers in info.cluster_addr_table.items() if names & set(brokers))
    for c in clusters:
        out.line(c)
    out.data(clusters)


@click.option("-b", "--brokerAddr", "broker_addr", help="On this broker (a master of the topic).")
@click.option("-c", "--clusterName", "cluster", help="On every master of this cluster.")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-p", "--perm", required=True, type=click.IntRange(0, 7), help="2 W, 4 R, 6 RW.")
@admin_command("updateTopicPerm", "Change a topic's permission (its queue counts are kept).")
async def update_topic_perm(
    admin: Admin, out: Out, broker_addr: str | None, cluster: str | None, topic: str, perm: int
) -> None:
    _target(broker_addr, cluster)
    topic = topic.strip()
    route = await admin.topic_route(topic)
    if not route.queue_datas:
        raise AdminNotFoundError(f"topic {topic} has no queues in its route")
    queues = {q.broker_name: q for q in route.queue_datas}
    if broker_addr:
        names = [bd.broker_name for bd in route.broker_datas if bd.broker_addrs.get(MASTER_ID) == broker_addr]
        if not names or names[0] not in queues:
            raise AdminNotFoundError(f"{broker_addr} is no master of a broker that serves topic {topic}")
        targets = [(broker_addr, queues[names[0]])]
    else:
        assert cluster is not None
        first = route.queue_datas[0]
        targets = [(b.addr, queues.get(b.broker_name, first)) for b in await admin.masters(cluster)]
    changes = []
    for addr, qd in targets:
        if broker_addr and qd.perm == perm:
            out.line("new perm equals to the old one!")
            out.data({"topic": topic, "changes": [], "perm": perm})
            return
        tc = TopicConfig(
            topic, qd.read_queue_nums, qd.write_queue_nums, perm, topic_sys_flag=qd.topic_sys_flag
        )
        await admin.create_topic(addr, tc)
        out.line(f"update topic perm from {qd.perm} to {perm} in {addr} success.")
        if broker_addr:
            out.line(f"{topic_config_text(tc)}.")
        changes.append({"brokerAddr": addr, "oldPerm": qd.perm, "perm": perm})
    out.data({"topic": topic, "changes": changes, "perm": perm})


@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-v", "--orderConf", "order_conf", help="put: brokerName1:queueNums;brokerName2:queueNums")
@click.option(
    "-m", "--method", required=True, type=click.Choice(["put", "get", "delete"]), help="What to do."
)
@admin_command("updateOrderConf", "Put, get or delete a topic's order conf on the name servers.")
async def update_order_conf(admin: Admin, out: Out, topic: str, order_conf: str | None, method: str) -> None:
    topic = topic.strip()
    if method == "get":
        conf = await admin.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
        out.line(f"get orderConf success. topic=[{topic}], orderConf=[{conf}]")
        out.data({"topic": topic, "orderConf": conf})
    elif method == "put":
        conf = (order_conf or "").strip()
        if not conf:
            raise click.UsageError("please set orderConf with option -v")
        await admin.put_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic, conf)
        out.line(f"update orderConf success. topic=[{topic}], orderConf=[{conf}]")
        out.data({"topic": topic, "orderConf": conf})
    else:
        await admin.delete_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
        out.line(f"delete orderConf success. topic=[{topic}]")
        out.data({"topic": topic, "deleted": True})


@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-i", "--ipList", "ip_list", required=True, help="Client IPs (ids), comma-separated.")
@admin_command("allocateMQ", "Which queues of a topic each client gets when the queues are shared averagely.")
async def allocate_mq(admin: Admin, out: Out, topic: str, ip_list: str) -> None:
    ips = ip_list.strip().split(",")
    mqs = sorted(mq for mq, _ in await admin.queues(topic.strip()))
    strategy = AllocateMessageQueueAveragely()
    result = {ip: [mq.to_dict() for mq in strategy.allocate("aa", ip, mqs, ips)] for ip in ips}
    # mqadmin prints the RebalanceResult as one line of JSON (its keys sorted)
    out.line(json.dumps({"result": result}, separators=(",", ":"), sort_keys=True))
    out.data({"result": result})
