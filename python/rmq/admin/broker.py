"""Cluster and broker commands: clusterList, brokerStatus, getBrokerConfig, updateBrokerConfig, statsAll,
the store housekeeping requests cleanExpiredCQ, cleanUnusedTopic and deleteExpiredCommitLog, and the send
probes sendMsgStatus and clusterRT (messages to the topic every broker has under its own name)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Awaitable, Callable
from typing import Any

import click

from rmq.admin.base import Out, admin_command
from rmq.admin.message import avg_rt
from rmq.client.admin_ext import Admin, AdminNotFoundError
from rmq.client.errors import MQClientError
from rmq.client.message import Message
from rmq.client.producer.producer import Producer
from rmq.client.results import SendResult
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


def send_result_text(r: SendResult) -> str:
    """Java's ``SendResult.toString()``."""
    return (
        f"SendResult [sendStatus={r.send_status.name}, msgId={r.msg_id}, offsetMsgId={r.offset_msg_id}, "
        f"messageQueue={r.message_queue}, queueOffset={r.queue_offset}]"
    )


@click.option("-b", "--brokerName", "broker_name", required=True, help="Broker name (its own topic).")
@click.option("-s", "--messageSize", "size", type=click.IntRange(0), default=128, show_default=True)
@click.option("-c", "--count", type=click.IntRange(0), default=50, show_default=True, help="Messages.")
@admin_command("sendMsgStatus", "Send messages to a broker's own topic; each send's time and result.")
async def send_msg_status(admin: Admin, out: Out, broker_name: str, size: int, count: int) -> None:
    topic = broker_name.strip()

    def body(n: int) -> bytes:  # mqadmin's body: "hello jodie" once per 11 bytes asked for
        return b"hello jodie" * ((n + 10) // 11)

    sends = []
    async with admin.producer("PID_SMSC") as producer:
        await producer.send(Message(topic, body(16)))
        for _ in range(count):
            began = time.monotonic()
            result = await producer.send(Message(topic, body(size)))
            ms = int((time.monotonic() - began) * 1000)
            out.line(f"rt={ms}ms, SendResult={send_result_text(result)}")
            mq = result.message_queue
            sends.append(
                {
                    "rtMs": ms,
                    "sendStatus": result.send_status.name,
                    "msgId": result.msg_id,
                    "offsetMsgId": result.offset_msg_id,
                    "brokerName": mq.broker_name,
                    "queueId": mq.queue_id,
                    "queueOffset": result.queue_offset,
                }
            )
    out.data({"brokerName": topic, "sends": sends})


async def _send_round(producer: Producer, topic: str, size: int, amount: int) -> tuple[float, int, int]:
    """``amount`` sends of ``size`` bytes to ``topic``: ms spent on all but the first, successes, failures."""
    elapsed, ok, failed = 0.0, 0, 0
    for i in range(amount):
        began = time.monotonic()
        try:
            await producer.send(Message(topic, b"a" * size))
            ok += 1
        except (MQClientError, RemotingError, OSError, TimeoutError):
            failed += 1
        if i:
            elapsed += int((time.monotonic() - began) * 1000)
    return elapsed, ok, failed


@click.option(
    "-a", "--amount", type=click.IntRange(1), default=100, show_default=True, help="Messages a round."
)
@click.option("-s", "--size", type=click.IntRange(0), default=128, show_default=True, help="Body bytes.")
@click.option("-c", "--cluster", help="Only this cluster (default: every cluster).")
@click.option(
    "-p", "--printLog", "print_log", type=click.BOOL, default=False, help="true: time|room|cluster|broker|rt"
)
@click.option("-m", "--machineRoom", "machine_room", default="noname", show_default=True)
@click.option(
    "-i", "--interval", type=click.IntRange(0), default=10, show_default=True, help="Seconds between rounds."
)
@click.option(
    "--rounds",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="Stop after N rounds (0: never, as mqadmin).",
)
@admin_command(
    "clusterRT", "Send to every broker's own topic, round after round; each broker's average send time."
)
async def cluster_rt(
    admin: Admin,
    out: Out,
    amount: int,
    size: int,
    cluster: str | None,
    print_log: bool,
    machine_room: str,
    interval: int,
    rounds: int,
) -> None:
    info = await admin.cluster_info()
    clusters = [cluster.strip()] if cluster else sorted(info.cluster_addr_table)
    if cluster and cluster.strip() not in info.cluster_addr_table:
        raise AdminNotFoundError(f"cluster [{cluster.strip()}] not exist")
    if not print_log:
        out.table(
            "%-24s  %-24s  %-4s  %-8s  %-8s",
            ("#Cluster Name", "#Broker Name", "#RT", "#successCount", "#failCount"),
            [],
        )
    rows = []
    done = 0
    async with admin.producer(f"PID_CLUSTER_RT_{int(time.time() * 1000)}") as producer:
        while True:
            for c in clusters:
                for broker_name in sorted(info.cluster_addr_table[c]):
                    elapsed, ok, failed = await _send_round(producer, broker_name, size, amount)
                    rt = avg_rt(elapsed, amount)
                    if print_log:
                        # mqadmin's log line: China time, the RT rounded to whole ms
                        now = dt.datetime.now(dt.timezone(dt.timedelta(hours=8))).strftime(
                            "%Y-%m-%d %H:%M:%S"
                        )
                        whole = round(elapsed / (amount - 1)) if amount > 1 else "NaN"
                        out.line(f"{now}|{machine_room}|{c}|{broker_name}|{whole}")
                    else:
                        out.line(f"{c:<24}  {broker_name:<24}  {rt:<8}  {ok:<16}  {failed}")
                    rows.append(
                        {
                            "round": done + 1,
                            "cluster": c,
                            "brokerName": broker_name,
                            "rtMs": rt,
                            "successCount": ok,
                            "failCount": failed,
                        }
                    )
            done += 1
            if rounds and done >= rounds:
                break
            await asyncio.sleep(interval)
    out.data(rows)
