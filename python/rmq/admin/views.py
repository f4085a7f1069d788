"""Broker views: brokerConsumeStats (every group's lag on one broker), producer (its producer connections)
and queryCq (a ConsumeQueue's units)."""

from __future__ import annotations

import json

import click

from rmq.admin.base import Out, admin_command, human_ms
from rmq.client.admin_ext import Admin, AdminNotFoundError

__all__: list[str] = []


def _java(value: object) -> str:
    """A value as Java's string concatenation prints it (null, true, false)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@click.option("-b", "--brokerAddr", "broker_addr", required=True, help="Broker address.")
@click.option("-t", "--timeoutMillis", "timeout_millis", type=click.IntRange(1), help="Request timeout, ms.")
@click.option("-l", "--level", "level", type=int, default=0, show_default=True, help="Least diff printed.")
@click.option(
    "-o", "--order", "order", type=click.BOOL, default=False, help="Order topics only (true|false)."
)
@admin_command("brokerConsumeStats", "Every subscription group's consume progress on one broker.")
async def broker_consume_stats(
    admin: Admin, out: Out, broker_addr: str, timeout_millis: int | None, level: int, order: bool
) -> None:
    if timeout_millis is not None:
        admin.timeout_ms = timeout_millis
    rows, total = await admin.broker_consume_stats(broker_addr, order_only=order)
    # As mqadmin: queues whose diff reaches the level and that have been consumed from (a last time).
    shown = [r for r in rows if r.diff >= level and r.last_timestamp > 0]
    out.table(
        "%-64s  %-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s",
        (
            "#Topic",
            "#Group",
            "#Broker Name",
            "#QID",
            "#Broker Offset",
            "#Consumer Offset",
            "#Diff",
            "#LastTime",
        ),
        (
            (
                r.topic,
                r.group,
                r.broker_name,
                r.queue_id,
                r.broker_offset,
                r.consumer_offset,
                r.diff,
                human_ms(r.last_timestamp, millis=False),
            )
            for r in shown
        ),
    )
    out.line()
    out.line(f"Diff Total: {total}")
    out.data({"brokerAddr": broker_addr, "rows": [r.to_dict() for r in shown], "diffTotal": total})


@click.option("-b", "--broker", "broker_addr", required=True, help="Broker address.")
@admin_command("producer", "The producer instances connected to a broker, by group.")
async def producer(admin: Admin, out: Out, broker_addr: str) -> None:
    groups = await admin.producer_info(broker_addr)
    for group, items in groups.items():
        if not items:
            out.line(f"producer group ({group}) instances are empty")
        for p in items:
            out.line(
                f"producer group ({group}) instance : clientId={p.get('clientId')},"
                f"remoteIP={p.get('remoteIP')}, language={p.get('language')}, version={p.get('version')}, "
                f"lastUpdateTimestamp={p.get('lastUpdateTimestamp')}"
            )
    out.data(groups)


@click.option("-t", "--topic", required=True, help="Topic.")
@click.option("-q", "--queue", "queue_id", type=int, required=True, help="Queue id.")
@click.option("-i", "--index", "index", type=int, required=True, help="First queue offset to print.")
@click.option(
    "-c", "--count", "count", type=click.IntRange(1), default=10, show_default=True, help="How many."
)
@click.option("-b", "--broker", "broker_addr", help="Broker address (default: the topic's first master).")
@click.option("-g", "--consumer", "group", help="Consumer group: also its subscription of the topic.")
@admin_command("queryCq", "A ConsumeQueue's units (CommitLog offset, size, tags code) from an index.")
async def query_cq(
    admin: Admin,
    out: Out,
    topic: str,
    queue_id: int,
    index: int,
    count: int,
    broker_addr: str | None,
    group: str | None,
) -> None:
    if not broker_addr:
        route = await admin.topic_route(topic)
        addrs = [a for bd in route.broker_datas for bid, a in sorted(bd.broker_addrs.items()) if bid == 0]
        if not addrs:
            raise AdminNotFoundError(f"no master serves topic {topic}")
        broker_addr = addrs[0]
    body, remark = await admin.query_consume_queue(broker_addr, topic, queue_id, index, count, group)
    if not body:
        raise AdminNotFoundError(remark or f"index {index} of {queue_id}@{topic} not found")
    if body.get("subscriptionData") is not None:
        out.line("Subscription data: ")
        out.line(json.dumps(body["subscriptionData"], indent="\t", default=str))
        out.line("======================================")
    if body.get("filterData") is not None:
        out.line("Filter data: ")
        out.line(str(body["filterData"]))
        out.line("======================================")
    out.line("Queue data: ")
    out.line(f"max: {body.get('maxQueueIndex')}, min: {body.get('minQueueIndex')}")
    out.line("======================================")
    for i, unit in enumerate(body.get("queueData") or (), index):
        out.line(f"idx: {i}")
        out.line(
            f"ConsumeQueueData{{physicOffset={unit.get('physicOffset')}, "
            f"physicSize={unit.get('physicSize')}, "
            f"tagsCode={unit.get('tagsCode')}, extendDataJson='{_java(unit.get('extendDataJson'))}', "
            f"bitMap='{_java(unit.get('bitMap'))}', eval={_java(bool(unit.get('eval')))}, "
            f"msg='{_java(unit.get('msg'))}'}}"
        )
        out.line("======================================")
    out.data({"brokerAddr": broker_addr, **body})
