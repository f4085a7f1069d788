"""Consumer and producer group commands: updateSubGroup, deleteSubGroup, consumerProgress,
consumerConnection, producerConnection, resetOffsetByTime."""

from __future__ import annotations

import click

from rmq.admin.base import Out, admin_command, human_ms, parse_time
from rmq.client.admin_ext import RETRY_GROUP_TOPIC_PREFIX, Admin, AdminNotFoundError
from rmq.client.admin_types import ConsumerConnection, ConsumeStats, SubscriptionGroupConfig
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
) -> None:
    cfg = SubscriptionGroupConfig(
        group, consume_enable, from_min, broadcast, retry_queues, retry_max, broker_id, slow_broker, notify
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
    table, online = await admin.reset_offset_by_time(topic, group, ts, force=force, cplus=cplus)
    out.line(
        f"rollback consumer offset by specified group[{group}], topic[{topic}], force[{str(force).lower()}], "
        f"timestamp(string)[{when}], timestamp(long)[{ts}]"
    )
    if not online:
        out.line("no consumer of the group is online: the offsets were set in the brokers")
    rows = sorted(table.items())
    out.table(
        "%-40s  %-40s  %-40s",
        ("#brokerName", "#queueId", "#offset"),
        ((mq.broker_name, mq.queue_id, off) for mq, off in rows),
    )
    out.data(
        {
            "group": group,
            "topic": topic,
            "timestamp": ts,
            "consumersNotified": online,
            "offsets": [
                {"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": off} for mq, off in rows
            ],
        }
    )
