"""Export commands: exportMetadata (topic and subscription group configs), exportConfigs (the cluster's
scale and chosen broker properties) and exportMetrics (per broker load and versions), each written as one
JSON file under ``-f`` (default ``/tmp/rocketmq/export``), in the shape Apache's mqadmin writes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Final

import click

from rmq.admin.base import Out, admin_command
from rmq.client.admin_ext import Admin
from rmq.client.errors import MQClientError
from rmq.common import codes
from rmq.common.codes import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from rmq.remoting import RemotingError

__all__: list[str] = []

DEFAULT_DIR: Final = "/tmp/rocketmq/export"
# DefaultMQAdminExtImpl.SYSTEM_GROUP_SET of 4.9.8: groups an export leaves out (with CID_RMQ_SYS_*).
SYSTEM_GROUPS: Final = frozenset(
    {
        "DEFAULT_CONSUMER",
        "DEFAULT_PRODUCER",
        codes.TOOLS_CONSUMER_GROUP,
        "FILTERSRV_CONSUMER",
        "__MONITOR_CONSUMER",
        codes.CLIENT_INNER_PRODUCER_GROUP,
        codes.SELF_TEST_PRODUCER_GROUP,
        codes.SELF_TEST_CONSUMER_GROUP,
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_ONSAPI_PULL",
        codes.CID_SYS_RMQ_TRANS,
    }
)
# ExportConfigsCommand's chosen broker properties.
CONFIG_KEYS: Final = (
    "brokerClusterName",
    "brokerId",
    "brokerName",
    "brokerRole",
    "fileReservedTime",
    "filterServerNums",
    "flushDiskType",
    "maxMessageSize",
    "messageDelayLevel",
    "msgTraceTopicName",
    "slaveReadEnable",
    "traceOn",
    "traceTopicEnable",
    "useTLS",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
)


def _write(path: Path, data: Any, out: Out) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent="\t", ensure_ascii=False))
    out.line(f"export {path} success")
    out.data({"path": str(path)})


async def _user_topics(admin: Admin, addr: str, special: bool) -> dict[str, dict[str, Any]]:
    """The broker's topics but its system ones (and retry / dead-letter topics unless ``special``)."""
    system = set(await admin.system_topics(addr))
    return {
        t: c
        for t, c in (await admin.topic_configs(addr)).items()
        if t not in system
        and (special or not t.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)))
    }


async def _user_groups(admin: Admin, addr: str) -> dict[str, dict[str, Any]]:
    return {
        g: c
        for g, c in (await admin.subscription_group_configs(addr)).items()
        if g not in SYSTEM_GROUPS and not g.startswith(codes.CID_RMQ_SYS_PREFIX)
    }


@click.option("-c", "--clusterName", "cluster", help="The cluster to export.")
@click.option("-b", "--brokerAddr", "broker_addr", help="One broker to export (with -t or -g).")
@click.option("-f", "--filePath", "file_path", default=DEFAULT_DIR, show_default=True, help="Directory.")
@click.option("-t", "--topic", "topics_only", is_flag=True, help="Only the topic configs.")
@click.option("-g", "--subscriptionGroup", "groups_only", is_flag=True, help="Only the subscription groups.")
@click.option("-s", "--specialTopic", "special", is_flag=True, help="Also retry and dead-letter topics.")
@admin_command("exportMetadata", "Write the topic and subscription group configs to a JSON file.")
async def export_metadata(
    admin: Admin,
    out: Out,
    cluster: str | None,
    broker_addr: str | None,
    file_path: str,
    topics_only: bool,
    groups_only: bool,
    special: bool,
) -> None:
    base = Path(file_path)
    if broker_addr:
        if topics_only:
            topics = await _user_topics(admin, broker_addr, special)
            _write(base / "topic.json", {"topicConfigTable": topics}, out)
        elif groups_only:
            groups = await _user_groups(admin, broker_addr)
            _write(base / "subscriptionGroup.json", {"subscriptionGroupTable": groups}, out)
        else:
            raise click.UsageError("with -b give -t (topics) or -g (subscription groups)")
        return
    if not cluster:
        raise click.UsageError("give -c clusterName or -b brokerAddr")
    topic_table: dict[str, dict[str, Any]] = {}
    group_table: dict[str, dict[str, Any]] = {}
    for ref in await admin.masters(cluster):
        # A topic or group on several brokers: its queues added up, as mqadmin does.
        for t, c in (await _user_topics(admin, ref.addr, special)).items():
            if t in topic_table:
                c["readQueueNums"] = int(c.get("readQueueNums", 0)) + int(
                    topic_table[t].get("readQueueNums", 0)
                )
                c["writeQueueNums"] = int(c.get("writeQueueNums", 0)) + int(
                    topic_table[t].get("writeQueueNums", 0)
                )
            topic_table[t] = c
        for g, c in (await _user_groups(admin, ref.addr)).items():
            if g in group_table:
                c["retryQueueNums"] = int(c.get("retryQueueNums", 0)) + int(
                    group_table[g].get("retryQueueNums", 0)
                )
            group_table[g] = c
    result: dict[str, Any] = {}
    if topics_only:
        result["topicConfigTable"], name = topic_table, "topic.json"
    elif groups_only:
        result["subscriptionGroupTable"], name = group_table, "subscriptionGroup.json"
    else:
        result.update(topicConfigTable=topic_table, subscriptionGroupTable=group_table)
        name = "metadata.json"
    result["exportTime"] = int(time.time() * 1000)
    _write(base / name, result, out)


@click.option("-c", "--clusterName", "cluster", required=True, help="The cluster to export.")
@click.option("-f", "--filePath", "file_path", default=DEFAULT_DIR, show_default=True, help="Directory.")
@admin_command("exportConfigs", "Write the cluster's scale and chosen broker properties to configs.json.")
async def export_configs(admin: Admin, out: Out, cluster: str, file_path: str) -> None:
    info = await admin.cluster_info()
    masters = slaves = 0
    broker_configs: dict[str, dict[str, str | None]] = {}
    for ref in await admin.masters(cluster):
        props = await admin.broker_config(ref.addr)
        masters += 1
        bd = info.broker_addr_table.get(ref.broker_name)
        slaves += len([bid for bid in (bd.broker_addrs if bd else {}) if bid != 0])
        broker_configs[props.get("brokerName", ref.broker_name)] = {k: props.get(k) for k in CONFIG_KEYS}
    result = {
        "brokerConfigs": broker_configs,
        "clusterScale": {
            "namesrvSize": len(admin.instance.api.namesrv_addrs),
            "masterBrokerSize": masters,
            "slaveBrokerSize": slaves,
        },
    }
    _write(Path(file_path) / "configs.json", result, out)


def _first_number(text: str | None) -> float:
    try:
        return float((text or "0").split(" ")[0])
    except ValueError:
        return 0.0


def _long(table: dict[str, str], key: str) -> int:
    try:
        return int(table.get(key) or 0)
    except ValueError:
        return 0


async def _put_stats(admin: Admin, addr: str, topic: str) -> tuple[float, int]:
    """TOPIC_PUT_NUMS of a topic: (tps of the last minute, messages of the last 24 hours); zeros when the
    broker has no such stats (as mqadmin takes a refusal)."""
    try:
        stats = await admin.view_broker_stats(addr, "TOPIC_PUT_NUMS", topic)
    except MQClientError:
        return 0.0, 0
    return stats.minute.tps, stats.sum_24h()


@click.option("-c", "--clusterName", "cluster", required=True, help="The cluster to export.")
@click.option("-f", "--filePath", "file_path", default=DEFAULT_DIR, show_default=True, help="Directory.")
@admin_command("exportMetrics", "Write each broker's load, counts and client versions to metrics.json.")
async def export_metrics(admin: Admin, out: Out, cluster: str, file_path: str) -> None:
    total_tps = dict.fromkeys(
        ("totalNormalInTps", "totalNormalOutTps", "totalTransInTps", "totalScheduleInTps"), 0.0
    )
    total_day = dict.fromkeys(
        ("normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum", "scheduleOneDayInNum"), 0
    )
    report: dict[str, Any] = {}
    for ref in await admin.masters(cluster):
        addr = ref.addr
        table = await admin.broker_runtime_info(addr)
        props = await admin.broker_config(addr)
        groups = await _user_groups(admin, addr)
        topics = await _user_topics(admin, addr, False)
        trans_tps, trans_day = await _put_stats(admin, addr, codes.TRANS_HALF_TOPIC)
        sched_tps, sched_day = await _put_stats(admin, addr, codes.SCHEDULE_TOPIC)
        tps = {
            "normalInTps": _first_number(table.get("putTps")),
            "normalOutTps": _first_number(table.get("getTransferedTps")),
            "transInTps": trans_tps,
            "scheduleInTps": sched_tps,
        }
        day = {
            "normalOneDayInNum": _long(table, "msgPutTotalTodayMorning")
            - _long(table, "msgPutTotalYesterdayMorning"),
            "normalOneDayOutNum": _long(table, "msgGetTotalTodayMorning")
            - _long(table, "msgGetTotalYesterdayMorning"),
            "transOneDayInNum": trans_day,
            "scheduleOneDayInNum": sched_day,
        }
        for (tk, tv), (dk, dv) in zip(tps.items(), day.items(), strict=True):
            total_tps["total" + tk[0].upper() + tk[1:]] += tv
            total_day[dk] += dv
        clients: set[str] = set()
        for group in groups:
            try:
                cc = await admin.consumer_connection(group)
            except (MQClientError, RemotingError, OSError):
                continue  # offline: no clients to count (as mqadmin skips it)
            clients |= {f"{c.language}%{c.version_desc}" for c in cc.connections}
        report[ref.broker_name] = {
            "runtimeEnv": {
                "cpuNum": props.get("clientCallbackExecutorThreads"),
                "totalMemKBytes": table.get("totalMemKBytes"),
            },
            "runtimeQuota": {
                "diskRatio": {
                    "commitLogDiskRatio": table.get("commitLogDiskRatio"),
                    "consumeQueueDiskRatio": table.get("consumeQueueDiskRatio"),
                },
                "tps": tps,
                "oneDayNum": day,
                "messageAverageSize": table.get("putMessageAverageSize"),
                "topicSize": len(topics),
                "groupSize": len(groups),
            },
            "runtimeVersion": {"rocketmqVersion": codes.RMQ_VERSION_DESC, "clientInfo": sorted(clients)},
        }
    result = {"evaluateReport": report, "totalData": {"totalTps": total_tps, "totalOneDayNum": total_day}}
    _write(Path(file_path) / "metrics.json", result, out)
