"""Consumer and producer group commands: updateSubGroup, deleteSubGroup, consumerProgress,
consumerConnection, producerConnection, resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset,
getConsumerConfig, consumerStatus, startMonitoring."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

import click

from rmq.admin.base import Out, admin_command, human_ms, parse_time
from rmq.client.admin_ext import RETRY_GROUP_TOPIC_PREFIX, Admin, AdminNotFoundError
from rmq.client.admin_types import ConsumerConnection, ConsumeStats, RollbackStats, SubscriptionGroupConfig
from rmq.client.errors import MQClientError
from rmq.client.message import MessageQueue
from rmq.remoting import RemotingError

__all__: list[str] = []


def _targets_check(broker_addr: str | None, cluster: str | None) -> None:
    if bool(broker_addr) == bool(cluster):
        raise click.UsageError("give exactly one of -b brokerAddr and -c clusterName")


async def _addrs(admin: Admin, broker_addr: str | None, cluster: str | None) -> list[str]:
    _targets_check(broker_addr, cluster)
    if broker_addr:
        return [broker_addr]
    return [b.addr for b in await admin.masters(cluster)]


def group_attributes(text: str | None) -> dict[str, str]:
    """``+k=v,-k`` as the update's attribute map (``{"+k": "v", "-k": ""}``, the keys mqadmin 5.x sends)."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        op, body = item[:1], item[1:]
        key, eq, value = body.partition("=")
        if op == "+" and key and eq and value:
            out[f"+{key.strip()}"] = value.strip()
        elif op == "-" and key and not eq:
            out[f"-{key.strip()}"] = ""
        else:
            raise click.BadParameter(
                f"{item!r}: expected +key=value (set) or -key (remove)", param_hint="--attributes"
            )
    return out


def group_config_text(c: SubscriptionGroupConfig) -> str:
    d = c.to_dict()
    return (
        "SubscriptionGroupConfig ["
        + ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in d.items())
        + "]"
    )


@click.option("-b", "--brokerAddr", "broker_addr", help="On this broker.")
@click.option("-c", "--clusterName", "cluster", help="On every master of this cluster.")
@click.option("-g", "--groupName", "group", required=True, help="Consumer group name.")
@click.option("-s", "--consumeEnable", "consume_enable", type=click.BOOL, default=True, show_default=True)
@click.option("-m", "--consumeFromMinEnable", "from_min", type=click.BOOL, default=False, show_default=True)
@click.option(
    "-d", "--consumeBroadcastEnable", "broadcast", type=click.BOOL, default=False, show_default=True
)
@click.option("-q", "--retryQueueNums", "retry_queues", type=click.IntRange(0), default=1, show_default=True)
@click.option("-r", "--retryMaxTimes", "retry_max", type=click.IntRange(-1), default=16, show_default=True)
@click.option("-i", "--brokerId", "broker_id", type=click.IntRange(0), default=0, show_default=True)
@click.option(
    "-w",
    "--whichBrokerWhenConsumeSlowly",
    "slow_broker",
    type=click.IntRange(0),
    default=1,
    show_default=True,
)
@click.option("-a", "--notifyConsumerIdsChanged", "notify", type=click.BOOL, default=True, show_default=True)
@click.option(
    "-o",
    "--consumeMessageOrderly",
    "orderly",
    type=click.BOOL,
    default=False,
    show_default=True,
    help="RocketMQ 5.x: a FIFO group (its 5.x consumers get its messages in order).",
)
@click.option(
    "--attributes",
    "attributes",
    help="RocketMQ 5.x group attributes as mqadmin takes them: +key=value to set, -key to remove,"
    " comma-separated (e.g. +lite.bind.topic=ParentTopic makes a lite group).",
)
@admin_command("updateSubGroup", "Create a subscription group or update its configuration.")
async def update_sub_group(
    admin: Admin,
    out: Out,
    broker_addr: str | None,
    cluster: str | None,
    group: str,
    consume_enable: bool,
    from_min: bool,
    broadcast: bool,
    retry_queues: int,
    retry_max: int,
    broker_id: int,
    slow_broker: int,
    notify: bool,
    orderly: bool,
    attributes: str | None,
) -> None:
    cfg = SubscriptionGroupConfig(
        group,
        consume_enable,
        from_min,
        broadcast,
        retry_queues,
        retry_max,
        broker_id,
        slow_broker,
        notify,
        orderly,
        group_attributes(attributes),
    )
    addrs = await _addrs(admin, broker_addr, cluster)
    for addr in addrs:
        await admin.create_subscription_group(addr, cfg)
        out.line(f"create subscription group to {addr} success.")
    out.line(group_config_text(cfg))
    out.data({"brokers": addrs, "groupConfig": cfg.to_dict()})


@click.option("-b", "--brokerAddr", "broker_addr", help="On this broker.")
@click.option("-c", "--clusterName", "cluster", help="On every master of this cluster.")
@click.option("-g", "--groupName", "group", required=True, help="Consumer group name.")
@click.option(
    "-r",
    "--removeOffset",
    "remove_offset",
    type=click.BOOL,
    default=False,
    show_default=True,
    help="Also remove the group's consumer offsets.",
)
@admin_command("deleteSubGroup", "Delete a subscription group (and with -r true its offsets).")
async def delete_sub_group(
    admin: Admin, out: Out, broker_addr: str | None, cluster: str | None, group: str, remove_offset: bool
) -> None:
    addrs = await _addrs(admin, broker_addr, cluster)
    for addr in addrs:
        await admin.delete_subscription_group(addr, group, remove_offset=remove_offset)
        out.line(f"delete subscription group [{group}] from broker [{addr}] success.")
    out.data({"group": group, "brokers": addrs, "removeOffset": remove_offset})


def _type_desc(consume_type: str) -> str:
    return {"CONSUME_ACTIVELY": "PULL", "CONSUME_PASSIVELY": "PUSH", "CONSUME_POP": "POP"}.get(
        consume_type, ""
    )


@click.option("-g", "--groupName", "group", help="Consumer group (without it: one line per group).")
@click.option(
    "-s", "--showClientIP", "show_ip", type=click.BOOL, default=False, help="true: the client IP per queue."
)
@admin_command("consumerProgress", "A group's broker offset, consumer offset and lag (#Diff) per queue.")
async def consumer_progress(admin: Admin, out: Out, group: str | None, show_ip: bool) -> None:
    if group:
        stats = await admin.consume_stats(group)
        ips: dict[MessageQueue, str] = {}
        if show_ip:
            try:
                ips = await admin.queue_allocation(group)
            except (MQClientError, RemotingError, OSError) as exc:  # offline: N/A, as mqadmin shows it
                click.echo(f"rmqadmin consumerProgress: no client IPs: {exc}", err=True)
        rows = stats.rows()
        header = [
            "#Topic",
            "#Broker Name",
            "#QID",
            "#Broker Offset",
            "#Consumer Offset",
            "#Diff",
            "#LastTime",
        ]
        fmt = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s"
        if show_ip:
            header.insert(5, "#Client IP")
            fmt = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s  %s"
        table = []
        for r in rows:
            row: list[object] = [
                r.mq.topic,
                r.mq.broker_name,
                r.mq.queue_id,
                r.broker_offset,
                r.consumer_offset,
            ]
            if show_ip:
                row.append(ips.get(r.mq, "N/A"))
            row += [r.diff, human_ms(r.last_timestamp, millis=False) or "N/A"]
            table.append(row)
        out.table(fmt, header, table)
        out.line()
        out.line(f"Consume TPS: {stats.consume_tps:.2f}")
        out.line(f"Diff Total: {stats.diff_total}")
        data = {"group": group, **stats.to_dict()}
        if show_ip:
            for r, d in zip(rows, data["offsets"], strict=True):
                d["clientIp"] = ips.get(r.mq)
        out.data(data)
        return
    groups = [
        t[len(RETRY_GROUP_TOPIC_PREFIX) :]
        for t in await admin.topic_list()
        if t.startswith(RETRY_GROUP_TOPIC_PREFIX)
    ]
    rows = []
    for g in groups:
        stats: ConsumeStats | None = None
        cc: ConsumerConnection | None = None
        try:
            stats = await admin.consume_stats(g)
        except (MQClientError, RemotingError, OSError):
            pass
        try:
            cc = await admin.consumer_connection(g)
        except (MQClientError, RemotingError, OSError):
            pass
        count = len(cc.connections) if cc else 0
        version = min(cc.connections, key=lambda c: c.version).version_desc if cc and count else "OFFLINE"
        rows.append(
            (
                g,
                count,
                version,
                _type_desc(cc.consume_type) if cc else "",
                cc.message_model if cc else "",
                int(stats.consume_tps) if stats else 0,
                stats.diff_total if stats else 0,
            )
        )
    out.table(
        "%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s",
        ("#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total"),
        rows,
    )
    keys = ("group", "count", "version", "type", "model", "tps", "diffTotal")
    out.data([dict(zip(keys, r, strict=True)) for r in rows])


@click.option("-g", "--consumerGroup", "group", required=True, help="Consumer group name.")
@admin_command("consumerConnection", "The online clients of a consumer group and their subscriptions.")
async def consumer_connection(admin: Admin, out: Out, group: str) -> None:
    cc = await admin.consumer_connection(group)
    out.table(
        "%-36s %-22s %-10s %s",
        ("#ClientId", "#ClientAddr", "#Language", "#Version"),
        ((c.client_id, c.client_addr, c.language, c.version_desc) for c in cc.connections),
    )
    out.line()
    out.line("Below is subscription:")
    out.table("%-20s %s", ("#Topic", "#SubExpression"), sorted(cc.subscriptions.items()))
    out.line()
    out.line(f"ConsumeType: {cc.consume_type}")
    out.line(f"MessageModel: {cc.message_model}")
    out.line(f"ConsumeFromWhere: {cc.consume_from_where}")
    out.data({"group": group, **cc.to_dict()})


@click.option("-g", "--producerGroup", "group", required=True, help="Producer group name.")
@click.option("-t", "--topic", required=True, help="A topic the group sends to (finds its brokers).")
@admin_command("producerConnection", "The connected clients of a producer group.")
async def producer_connection(admin: Admin, out: Out, group: str, topic: str) -> None:
    conns = await admin.producer_connection(group, topic)
    if not conns:
        raise AdminNotFoundError(f"no producer of group {group} connected to the brokers of {topic}")
    for i, c in enumerate(conns, 1):
        out.line(f"{i:04d}  {c.client_id:<32} {c.client_addr:<22} {c.language:<8} {c.version_desc}".rstrip())
    out.data({"group": group, "connections": [c.to_dict() for c in conns]})


@click.option("-g", "--group", required=True, help="Consumer group name.")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option(
    "-s",
    "--timestamp",
    "when",
    required=True,
    help="now | epoch ms | yyyy-MM-dd#HH:mm:ss:SSS (local time); -1 for the end of each queue.",
)
@click.option(
    "-f", "--force", type=click.BOOL, default=True, show_default=True, help="false: only move offsets back."
)
@click.option("-c", "--cplus", is_flag=True, help="Reset a C++ client's offsets (its body form).")
@admin_command("resetOffsetByTime", "Move a group's offsets of a topic to a point in time.")
async def reset_offset_by_time(
    admin: Admin, out: Out, group: str, topic: str, when: str, force: bool, cplus: bool
) -> None:
    ts = parse_time(when)
    rollback: list[RollbackStats] = []
    table, online = await admin.reset_offset_by_time(
        topic, group, ts, force=force, cplus=cplus, rollback=rollback
    )
    who = "group" if online else "consumerGroup"  # mqadmin's two wordings: told the consumers / set offsets
    out.line(
        f"rollback consumer offset by specified {who}[{group}], topic[{topic}], force[{str(force).lower()}], "
        f"timestamp(string)[{when}], timestamp(long)[{ts}]"
    )
    _print_reset(out, table, online, rollback)
    out.data(_reset_data(group, topic, table, online, rollback) | {"timestamp": ts})


def _print_reset(
    out: Out, table: dict[MessageQueue, int], online: bool, rollback: list[RollbackStats]
) -> None:
    """The offsets a reset set, as mqadmin prints them: told to online consumers, three columns;
    set in the brokers (no consumer online), each queue's rollback stats."""
    if online:
        rows = [(mq.broker_name[:32], mq.queue_id, off) for mq, off in sorted(table.items())]
        out.table("%-40s  %-40s  %-40s", ("#brokerName", "#queueId", "#offset"), rows)
        return
    out.table(
        "%-20s  %-20s  %-20s  %-20s  %-20s  %-20s",
        (
            "#brokerName",
            "#queueId",
            "#brokerOffset",
            "#consumerOffset",
            "#timestampOffset",
            "#rollbackOffset",
        ),
        ((r.broker_name[:32], *dataclasses.astuple(r)[1:]) for r in rollback),
    )


def _reset_data(
    group: str, topic: str, table: dict[MessageQueue, int], online: bool, rollback: list[RollbackStats]
) -> dict[str, Any]:
    return {
        "group": group,
        "topic": topic,
        "consumersNotified": online,
        "offsets": [
            {"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": off}
            for mq, off in sorted(table.items())
        ],
        **({} if online else {"rollbackStats": [r.to_dict() for r in rollback]}),
    }


@click.option("-g", "--group", required=True, help="Consumer group name.")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option(
    "-f", "--force", type=click.BOOL, default=True, show_default=True, help="false: only move offsets back."
)
@admin_command("skipAccumulatedMessage", "Move a group's offsets of a topic to the end of each queue.")
async def skip_accumulated_message(admin: Admin, out: Out, group: str, topic: str, force: bool) -> None:
    group, topic = group.strip(), topic.strip()
    rollback: list[RollbackStats] = []
    table, online = await admin.reset_offset_by_time(topic, group, -1, force=force, rollback=rollback)
    _print_reset(out, table, online, rollback)
    out.data(_reset_data(group, topic, table, online, rollback))


@click.option("-s", "--srcGroup", "src", required=True, help="Copy the offsets of this group...")
@click.option("-d", "--destGroup", "dest", required=True, help="...to this group.")
@click.option("-t", "--topic", required=True, help="Of this topic.")
@click.option("-o", "--offline", help="Accepted as mqadmin accepts it (unused).")
@admin_command("cloneGroupOffset", "Copy one group's consumer offsets of a topic to another group.")
async def clone_group_offset(
    admin: Admin, out: Out, src: str, dest: str, topic: str, offline: str | None
) -> None:
    src, dest, topic = src.strip(), dest.strip(), topic.strip()
    stats = await admin.consume_stats(src, topic)  # as mqadmin: the source's consumer offset of each queue
    addrs = {mq: addr for mq, addr in await admin.queues(topic)}
    api = admin.instance.api
    copied = []
    for row in stats.rows():
        addr = addrs.get(row.mq)
        if addr is None or row.consumer_offset < 0:
            continue
        await api.update_consumer_offset(addr, dest, row.mq, row.consumer_offset, timeout_ms=admin.timeout_ms)
        copied.append(
            {"brokerName": row.mq.broker_name, "queueId": row.mq.queue_id, "offset": row.consumer_offset}
        )
    if not copied:
        raise AdminNotFoundError(f"group {src} has no committed offset of topic {topic}: nothing to clone")
    out.line(f"clone group offset success. srcGroup[{src}], destGroup=[{dest}], topic[{topic}]")
    out.data({"srcGroup": src, "destGroup": dest, "topic": topic, "offsets": copied})


# SubscriptionGroupConfig's fields in the order of Java's class (getConsumerConfig prints them so).
_GROUP_FIELDS = (
    "groupName",
    "consumeEnable",
    "consumeFromMinEnable",
    "consumeBroadcastEnable",
    "retryQueueNums",
    "retryMaxTimes",
    "brokerId",
    "whichBrokerWhenConsumeSlowly",
    "notifyConsumerIdsChangedEnable",
)


def _java_text(value: Any) -> str:
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


@click.option("-g", "--groupName", "group", required=True, help="Subscription group name.")
@admin_command("getConsumerConfig", "A subscription group's config on every broker that has it.")
async def get_consumer_config(admin: Admin, out: Out, group: str) -> None:
    group = group.strip()
    info = await admin.cluster_info()
    found = []
    for broker_name, bd in sorted(info.broker_addr_table.items()):
        addr = bd.master_addr() or next(iter(bd.broker_addrs.values()), None)
        if addr is None:
            continue
        config = (await admin.subscription_group_configs(addr)).get(group)
        if config is None:
            continue
        cluster = next((c for c, names in info.cluster_addr_table.items() if broker_name in names), None)
        found.append({"cluster": cluster, "brokerName": broker_name, "brokerAddr": addr, "config": config})
    if not found:
        raise AdminNotFoundError(f"no broker has subscription group {group}")
    for f in found:
        out.line(
            f"============================={f['cluster']}:{f['brokerName']}============================="
        )
        config = f["config"]
        keys = [k for k in _GROUP_FIELDS if k in config] + [k for k in config if k not in _GROUP_FIELDS]
        for k in keys:
            out.line(f"{k:<40}=  {_java_text(config[k])}")
    out.data(found)


def running_info_text(info: dict[str, Any]) -> str:
    """Java's ``ConsumerRunningInfo.formatString``: a client's properties, subscriptions, offsets, process
    queues and rates."""
    lines = ["#Consumer Properties#"]
    lines += [f"{k:<40}: {v}" for k, v in sorted((info.get("properties") or {}).items())]
    lines += ["", "", "#Consumer Subscription#"]
    for i, sub in enumerate(info.get("subscriptionSet") or (), 1):
        lines.append(
            f"{i:03d} Topic: {sub.get('topic', ''):<40} "
            f"ClassFilter: {_java_text(bool(sub.get('classFilterMode'))):<8} "
            f"SubExpression: {sub.get('subString', '')}"
        )
    mq_table: dict[MessageQueue, Any] = info.get("mqTable") or {}
    queue_columns = f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  "
    lines += ["", "", "#Consumer Offset#", queue_columns + "#Consumer Offset"]
    for mq, pq in sorted(mq_table.items()):
        lines.append(f"{mq.topic:<32}  {mq.broker_name:<32}  {mq.queue_id:<4}  {pq.get('commitOffset', 0)}")
    lines += ["", "", "#Consumer MQ Detail#", queue_columns + "#ProcessQueueInfo"]
    for mq, pq in sorted(mq_table.items()):
        detail = ", ".join(f"{k}={_java_text(v)}" for k, v in pq.items())
        lines.append(f"{mq.topic:<64}  {mq.broker_name:<32}  {mq.queue_id:<4}  ProcessQueueInfo [{detail}]")
    lines += [
        "",
        "",
        "#Consumer RT&TPS#",
        f"{'#Topic':<64}  {'#Pull RT':>14} {'#Pull TPS':>14} {'#Consume RT':>14} {'#ConsumeOK TPS':>14}"
        f" {'#ConsumeFailed TPS':>18} {'#ConsumeFailedMsgsInHour':>25}",
    ]
    for topic, st in sorted((info.get("statusTable") or {}).items()):
        lines.append(
            f"{topic:<32}  {float(st.get('pullRT', 0)):14.2f} {float(st.get('pullTPS', 0)):14.2f}"
            f" {float(st.get('consumeRT', 0)):14.2f} {float(st.get('consumeOKTPS', 0)):14.2f}"
            f" {float(st.get('consumeFailedTPS', 0)):18.2f} {int(st.get('consumeFailedMsgs', 0)):25d}"
        )
    if info.get("jstack"):
        lines += ["", "", "#Consumer jstack#", str(info["jstack"])]
    return "\n".join(lines) + "\n"


def process_queue_report(client_id: str, info: dict[str, Any], now_ms: int) -> list[str]:
    """Java's ``ConsumerRunningInfo.analyzeProcessQueue`` for a push consumer's queues: an orderly one that
    cannot lock (or unlock) its queue, a concurrent one with cached messages and no consume for a minute."""
    props = info.get("properties") or {}
    if props.get("PROP_CONSUME_TYPE") != "CONSUME_PASSIVELY":
        return []
    orderly = str(props.get("PROP_CONSUMEORDERLY", "")).lower() == "true"
    lines = []
    mq_table: dict[MessageQueue, Any] = info.get("mqTable") or {}
    for mq, pq in sorted(mq_table.items()):
        if orderly and not pq.get("locked"):
            ms = now_ms - int(pq.get("lastLockTimestamp") or 0)
            lines.append(f"{client_id} {mq} can't lock for a while, {ms}ms")
        elif orderly and pq.get("droped") and int(pq.get("tryUnlockTimes") or 0) > 0:
            lines.append(f"{client_id} {mq} unlock {pq['tryUnlockTimes']} times, still failed")
        elif not orderly:
            idle = now_ms - int(pq.get("lastConsumeTimestamp") or 0)
            if idle > 60_000 and int(pq.get("cachedMsgCount") or 0) > 0:
                lines.append(f"{client_id} {mq} can't consume for a while, maybe blocked, {idle}ms")
    return lines


def _subscriptions(info: dict[str, Any]) -> set[tuple[str, str]]:
    return {(str(s.get("topic")), str(s.get("subString"))) for s in info.get("subscriptionSet") or ()}


def _info_json(info: dict[str, Any]) -> dict[str, Any]:
    mq_table: dict[MessageQueue, Any] = info.get("mqTable") or {}
    return {
        **{k: v for k, v in info.items() if k != "mqTable"},
        "mqTable": [{**mq.to_dict(), **pq} for mq, pq in sorted(mq_table.items())],
    }


@click.option("-g", "--consumerGroup", "group", required=True, help="Consumer group name.")
@click.option("-i", "--clientId", "client_id", help="Only this client: its running info.")
@click.option("-b", "--brokerAddr", "broker_addr", help="Ask this broker for the group's clients.")
@click.option("-s", "--jstack", is_flag=True, help="Also the client's thread dump (Java clients).")
@admin_command(
    "consumerStatus",
    "The running info of a group's clients (each written to <now>/<clientId>, as mqadmin) and whether their"
    " subscriptions agree; with -i one client's, printed.",
)
async def consumer_status(
    admin: Admin, out: Out, group: str, client_id: str | None, broker_addr: str | None, jstack: bool
) -> None:
    group = group.strip()
    cc = await admin.consumer_connection(group, broker_addr.strip() if broker_addr else None)
    if client_id:
        info = await admin.consumer_running_info(group, client_id.strip(), jstack=jstack)
        out.line(running_info_text(info).rstrip("\n"))
        out.data(_info_json(info))
        return
    now = int(time.time() * 1000)
    infos: dict[str, dict[str, Any]] = {}
    rows = []
    for conn in sorted(cc.connections, key=lambda c: c.client_id):
        try:
            info = await admin.consumer_running_info(group, conn.client_id, jstack=jstack)
        except (MQClientError, RemotingError, OSError) as exc:
            click.echo(f"rmqadmin consumerStatus: no running info of {conn.client_id}: {exc}", err=True)
            continue
        path = Path(str(now)) / conn.client_id
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(running_info_text(info), encoding="utf-8")
        infos[conn.client_id] = info
        rows.append((len(rows) + 1, conn.client_id, conn.version_desc, str(path)))
    out.table("%-10s %-40s %-20s %s", ("#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile"), rows)
    same = len({frozenset(_subscriptions(i)) for i in infos.values()}) <= 1
    if infos:
        out.line()
        if same:
            out.line("Same subscription in the same group of consumer")
            out.line()
            out.line("Rebalance OK")
            for cid, info in sorted(infos.items()):
                for line in process_queue_report(cid, info, now):
                    out.line(line)
        else:
            out.line("WARN: Different subscription in the same group of consumer!!!")
    out.data(
        {
            "group": group,
            "sameSubscription": same,
            "clients": [
                {"clientId": cid, "version": v, "file": f, "runningInfo": _info_json(infos[cid])}
                for _, cid, v, f in rows
            ],
        }
    )


async def _undone_msgs(admin: Admin, group: str) -> list[dict[str, Any]]:
    """Java's MonitorService.reportUndoneMsgs for an online group: per topic the messages not yet consumed,
    the most in one queue, and how far (ms of store time) the group is behind the newest message."""
    stats = await admin.consume_stats(group)
    await admin.consumer_connection(group)  # offline groups are not reported (ConsumerNotOnlineError)
    by_topic: dict[str, list[Any]] = {}
    for row in stats.rows():
        by_topic.setdefault(row.mq.topic, []).append(row)
    report = []
    for topic, rows in sorted(by_topic.items()):
        total = single = delay = 0
        for r in rows:
            diff = r.broker_offset - r.consumer_offset
            single = max(single, diff)
            total += max(diff, 0)
            if diff > 0 and r.last_timestamp > 0:
                newest, _ = await admin.pull(topic, r.mq.broker_name, r.mq.queue_id, r.broker_offset - 1, 1)
                if newest:
                    delay = max(delay, newest[0].store_timestamp - r.last_timestamp)
        report.append(
            {
                "consumerGroup": group,
                "topic": topic,
                "undoneMsgsTotal": total,
                "undoneMsgsSingleMQ": single,
                "undoneMsgsDelayTimeMills": delay,
            }
        )
    return report


async def _running_report(admin: Admin, group: str) -> tuple[bool, list[str]]:
    """Whether the group's clients subscribe alike, and their process-queue warnings (one line each)."""
    infos = {}
    for conn in (await admin.consumer_connection(group)).connections:
        infos[conn.client_id] = await admin.consumer_running_info(group, conn.client_id)
    now = int(time.time() * 1000)
    warnings = [line for cid, info in sorted(infos.items()) for line in process_queue_report(cid, info, now)]
    return len({frozenset(_subscriptions(i)) for i in infos.values()}) <= 1, warnings


@click.option(
    "--interval", type=click.IntRange(0), default=60, show_default=True, help="Seconds between rounds (rmq)."
)
@click.option(
    "--rounds", type=click.IntRange(0), default=0, show_default=True, help="Stop after N rounds (0: never)."
)
@admin_command(
    "startMonitoring",
    "Every round (mqadmin: each minute, until stopped), each online consumer group's undone messages per"
    " topic and whether its clients' subscriptions agree.",
)
async def start_monitoring(admin: Admin, out: Out, interval: int, rounds: int) -> None:
    done = 0
    report: list[dict[str, Any]] = []
    while True:
        out.line("=========================================beginRound")
        for topic in await admin.topic_list():
            if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                continue
            group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
            try:
                undone = await _undone_msgs(admin, group)
                same, warnings = await _running_report(admin, group)
            except (MQClientError, RemotingError, OSError):
                continue  # not online, or no consume stats: skipped as mqadmin skips it
            for u in undone:
                out.line(
                    f"reportUndoneMsgs: UndoneMsgs [consumerGroup={group}, topic={u['topic']}, "
                    f"undoneMsgsTotal={u['undoneMsgsTotal']}, undoneMsgsSingleMQ={u['undoneMsgsSingleMQ']}, "
                    f"undoneMsgsDelayTimeMills={u['undoneMsgsDelayTimeMills']}]"
                )
            if not same:
                out.line(f"reportConsumerRunningInfo: ConsumerGroup: {group}, Subscription different")
            for line in warnings:
                client_id = line.split(" ", 1)[0]
                out.line(f"reportConsumerRunningInfo: ConsumerGroup: {group}, ClientId: {client_id}, {line}")
            report.append(
                {
                    "round": done + 1,
                    "group": group,
                    "undoneMsgs": undone,
                    "sameSubscription": same,
                    "processQueueWarnings": warnings,
                }
            )
        out.line("=========================================endRound")
        done += 1
        if rounds and done >= rounds:
            break
        await asyncio.sleep(interval)
    out.data(report)
