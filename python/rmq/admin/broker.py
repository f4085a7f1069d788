"""Cluster and broker commands: clusterList, brokerStatus, getBrokerConfig, updateBrokerConfig, statsAll,
and the store housekeeping requests cleanExpiredCQ, cleanUnusedTopic and deleteExpiredCommitLog."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import click

from rmq.admin.base import Out, admin_command
from rmq.client.admin_ext import Admin
from rmq.client.errors import MQClientError
from rmq.remoting import RemotingError

__all__: list[str] = []


def _check_target(broker_addr: str | None, cluster: str | None) -> None:
    if bool(broker_addr) == bool(cluster):
        raise click.UsageError("give exactly one of -b brokerAddr and -c clusterName")


async def _addrs(admin: Admin, broker_addr: str | None, cluster: str | None) -> list[str]:
    _check_target(broker_addr, cluster)
    if broker_addr:
        return [broker_addr]
    return [b.addr for b in await admin.masters(cluster)]


def _first_float(text: str | None) -> float:
    try:
        return float((text or "0").split(" ")[0])
    except ValueError:
        return 0.0


def _int(table: dict[str, str], key: str) -> int:
    try:
        return int(table.get(key) or 0)
    except ValueError:
        return 0


@click.option("-m", "--moreStats", "more", is_flag=True, help="Messages in and out yesterday and today.")
@admin_command("clusterList", "The clusters, their brokers and each broker's load.")
async def cluster_list(admin: Admin, out: Out, more: bool) -> None:
    info = await admin.cluster_info()
    rows: list[dict[str, Any]] = []
    for cluster, names in sorted(info.cluster_addr_table.items()):
        for name in sorted(names):
            bd = info.broker_addr_table.get(name)
            for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                try:
                    t = await admin.broker_runtime_info(addr)
                except (MQClientError, RemotingError, OSError) as exc:
                    click.echo(f"rmqadmin clusterList: no runtime info of {addr}: {exc}", err=True)
                    t = {}
                earliest = _int(t, "earliestMessageTimeStamp")
                rows.append(
                    {
                        "cluster": cluster,
                        "brokerName": name,
                        "brokerId": bid,
                        "addr": addr,
                        "version": t.get("brokerVersionDesc", ""),
                        "inTps": _first_float(t.get("putTps")),
                        "outTps": _first_float(t.get("getTransferedTps")),
                        "sendQueue": t.get("sendThreadPoolQueueSize", ""),
                        "sendWaitMs": t.get("sendThreadPoolQueueHeadWaitTimeMills", ""),
                        "pullQueue": t.get("pullThreadPoolQueueSize", ""),
                        "pullWaitMs": t.get("pullThreadPoolQueueHeadWaitTimeMills", ""),
                        "pageCacheLockMs": t.get("pageCacheLockTimeMills", ""),
                        "hours": (time.time() * 1000 - earliest) / 3_600_000 if earliest > 0 else 0.0,
                        "space": float(t.get("commitLogDiskRatio") or 0.0),
                        "inTotalYest": _int(t, "msgPutTotalTodayMorning")
                        - _int(t, "msgPutTotalYesterdayMorning"),
                        "outTotalYest": _int(t, "msgGetTotalTodayMorning")
                        - _int(t, "msgGetTotalYesterdayMorning"),
                        "inTotalToday": _int(t, "msgPutTotalTodayNow") - _int(t, "msgPutTotalTodayMorning"),
                        "outTotalToday": _int(t, "msgGetTotalTodayNow") - _int(t, "msgGetTotalTodayMorning"),
                    }
                )
    if more:
        out.table(
            "%-16s  %-32s %14s %14s %14s %14s",
            (
                "#Cluster Name",
                "#Broker Name",
                "#InTotalYest",
                "#OutTotalYest",
                "#InTotalToday",
                "#OutTotalToday",
            ),
            (
                (
                    r["cluster"],
                    r["brokerName"],
                    r["inTotalYest"],
                    r["outTotalYest"],
                    r["inTotalToday"],
                    r["outTotalToday"],
                )
                for r in rows
            ),
        )
    else:
        out.table(
            "%-16s  %-22s  %-4s  %-22s %-16s %19s %19s %10s %5s %6s",
            (
                "#Cluster Name",
                "#Broker Name",
                "#BID",
                "#Addr",
                "#Version",
                "#InTPS(LOAD)",
                "#OutTPS(LOAD)",
                "#PCWait(ms)",
                "#Hour",
                "#SPACE",
            ),
            (
                (
                    r["cluster"],
                    r["brokerName"],
                    r["brokerId"],
                    r["addr"],
                    r["version"],
                    f"{r['inTps']:9.2f}({r['sendQueue']},{r['sendWaitMs']}ms)",
                    f"{r['outTps']:9.2f}({r['pullQueue']},{r['pullWaitMs']}ms)",
                    r["pageCacheLockMs"],
                    f"{r['hours']:2.2f}",
                    f"{r['space']:.4f}",
                )
                for r in rows
            ),
        )
    out.data(rows)


@click.option("-b", "--brokerAddr", "broker_addr", help="Broker address.")
@click.option("-c", "--clusterName", "cluster", help="Every master of this cluster.")
@admin_command("brokerStatus", "A broker's runtime statistics (its KV table).")
async def broker_status(admin: Admin, out: Out, broker_addr: str | None, cluster: str | None) -> None:
    addrs = await _addrs(admin, broker_addr, cluster)
    tables = {}
    for addr in addrs:
        table = await admin.broker_runtime_info(addr)
        tables[addr] = table
        for k, v in sorted(table.items()):
            out.line(f"{addr:<24} {k:<32}: {v}" if cluster else f"{k:<32}: {v}")
    out.data(tables)


@click.option("-b", "--brokerAddr", "broker_addr", help="Broker address.")
@click.option("-c", "--clusterName", "cluster", help="Every master of this cluster.")
@admin_command("getBrokerConfig", "A broker's configuration properties.")
async def get_broker_config(admin: Admin, out: Out, broker_addr: str | None, cluster: str | None) -> None:
    addrs = await _addrs(admin, broker_addr, cluster)
    configs = {}
    for addr in addrs:
        props = await admin.broker_config(addr)
        configs[addr] = props
        out.line(f"============{addr}============")
        if not props:
            out.line(f"Broker[{addr}] has no config property!")
        for k, v in sorted(props.items()):
            out.line(f"{k:<50}=  {v}")
        out.line()
    out.data(configs)


@click.option("-b", "--brokerAddr", "broker_addr", help="Broker address.")
@click.option("-c", "--clusterName", "cluster", help="Every master of this cluster.")
@click.option("-k", "--key", required=True, help="Property name.")
@click.option("-v", "--value", required=True, help="Property value.")
@admin_command("updateBrokerConfig", "Change a broker property at run time.")
async def update_broker_config(
    admin: Admin, out: Out, broker_addr: str | None, cluster: str | None, key: str, value: str
) -> None:
    addrs = await _addrs(admin, broker_addr, cluster)
    for addr in addrs:
        await admin.update_broker_config(addr, {key: value})
        out.line(f"update broker config success, {addr}")
    out.data({"brokers": addrs, "key": key, "value": value})


@click.option(
    "-a", "--activeTopic", "active", is_flag=True, help="Only topics with traffic in the last 24 h."
)
@click.option("-t", "--topic", help="Only this topic.")
@admin_command("statsAll", "Per topic and consuming group: backlog, TPS in/out, messages in/out in 24 h.")
async def stats_all(admin: Admin, out: Out, active: bool, topic: str | None) -> None:
    rows = await admin.stats_all(topic=topic, active_only=active)
    fmt = "%-64s  %-64s %12s %11s %11s %14s %14s"
    out.table(
        fmt,
        ("#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour"),
        (
            (
                t,
                g,
                acc,
                f"{in_tps:.2f}",
                "" if out_tps is None else f"{out_tps:.2f}",
                in_n,
                "NO_CONSUMER" if out_n is None else out_n,
            )
            for t, g, acc, in_tps, out_tps, in_n, out_n in rows
        ),
    )
    out.data([r.to_dict() for r in rows])


async def _housekeeping(
    admin: Admin,
    out: Out,
    broker_addr: str | None,
    cluster: str | None,
    request: Callable[[str], Awaitable[None]],
) -> None:
    """One store housekeeping request to ``-b``, to every master of ``-c``, or (neither, as mqadmin) to every
    master of every cluster; ``success`` as mqadmin prints it."""
    if broker_addr and cluster:
        raise click.UsageError("give at most one of -b brokerAddr and -c clusterName")
    addrs = [broker_addr] if broker_addr else [b.addr for b in await admin.masters(cluster)]
    for addr in addrs:
        await request(addr)
    out.line("success")
    out.data({"brokers": addrs, "success": True})


@click.option("-b", "--brokerAddr", "broker_addr", help="Broker address.")
@click.option("-c", "--cluster", "cluster", help="Every master of this cluster (default: of every cluster).")
@admin_command("cleanExpiredCQ", "Clean expired ConsumeQueues on brokers.")
async def clean_expired_cq(admin: Admin, out: Out, broker_addr: str | None, cluster: str | None) -> None:
    await _housekeeping(admin, out, broker_addr, cluster, admin.clean_expired_consume_queue)


@click.option("-b", "--brokerAddr", "broker_addr", help="Broker address.")
@click.option("-c", "--cluster", "cluster", help="Every master of this cluster (default: of every cluster).")
@admin_command("cleanUnusedTopic", "Clean the ConsumeQueues of topics brokers have no config for.")
async def clean_unused_topic(admin: Admin, out: Out, broker_addr: str | None, cluster: str | None) -> None:
    await _housekeeping(admin, out, broker_addr, cluster, admin.clean_unused_topic)


@click.option("-b", "--brokerAddr", "broker_addr", help="Broker address.")
@click.option("-c", "--cluster", "cluster", help="Every master of this cluster (default: of every cluster).")
@admin_command("deleteExpiredCommitLog", "Delete expired CommitLog files on brokers.")
async def delete_expired_commit_log(
    admin: Admin, out: Out, broker_addr: str | None, cluster: str | None
) -> None:
    await _housekeeping(admin, out, broker_addr, cluster, admin.delete_expired_commit_log)
