"""Message commands: queryMsgById, queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset, printMsg,
printMsgByQueue, sendMessage, consumeMessage, queryMsgTraceById, checkMsgSendRT."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import click

from rmq.admin.base import Out, admin_command, human_ms, parse_time
from rmq.client.admin import LONG_MAX
from rmq.client.admin_ext import Admin, AdminNotFoundError
from rmq.client.errors import MQClientError
from rmq.client.message import Message, MessageExt, MessageQueue
from rmq.common.codes import TRACE_TOPIC, PermName
from rmq.remoting import RemotingError

__all__ = ["message_dict"]

_BATCH = 32


def _body_text(msg: MessageExt, charset: str = "utf-8") -> str:
    return msg.body.decode(charset, "replace")


def message_dict(msg: MessageExt) -> dict[str, Any]:
    return {
        "msgId": msg.msg_id,
        "offsetMsgId": msg.offset_msg_id,
        "topic": msg.topic,
        "tags": msg.tags,
        "keys": msg.keys,
        "brokerName": msg.broker_name,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset,
        "reconsumeTimes": msg.reconsume_times,
        "bornTimestamp": msg.born_timestamp,
        "storeTimestamp": msg.store_timestamp,
        "bornHost": msg.born_host,
        "storeHost": msg.store_host,
        "sysFlag": msg.sys_flag,
        "properties": dict(sorted(msg.properties.items())),
        "body": _body_text(msg),
        "bodyLength": len(msg.body),
    }


def _java(value: object) -> str:
    """``value`` as Java's string concatenation prints it (``null`` for a missing one)."""
    return "null" if value is None else str(value)


def _detail(out: Out, msg: MessageExt) -> None:
    """The block ``mqadmin queryMsgById`` prints (the body itself instead of a file path)."""
    props = ", ".join(f"{k}={v}" for k, v in sorted(msg.properties.items()))
    for label, value in (
        ("OffsetID:", msg.offset_msg_id),
        ("Topic:", msg.topic),
        ("Tags:", f"[{_java(msg.tags)}]"),
        ("Keys:", f"[{_java(msg.keys)}]"),
        ("Queue ID:", msg.queue_id),
        ("Queue Offset:", msg.queue_offset),
        ("CommitLog Offset:", msg.commit_log_offset),
        ("Reconsume Times:", msg.reconsume_times),
        ("Born Timestamp:", human_ms(msg.born_timestamp)),
        ("Store Timestamp:", human_ms(msg.store_timestamp)),
        ("Born Host:", msg.born_host),
        ("Store Host:", msg.store_host),
        ("System Flag:", msg.sys_flag),
        ("Properties:", "{" + props + "}"),
        ("Message Body:", _body_text(msg)),
    ):
        out.line(f"{label:<20} {value}")


def _one_line(msg: MessageExt, charset: str = "utf-8", print_body: bool = True) -> str:
    """``MSGID: <id> MessageExt [...] BODY: <body>`` as ``printMsg`` / ``consumeMessage`` print a message."""
    ext = (
        f"MessageExt [brokerName={msg.broker_name}, queueId={msg.queue_id}, queueOffset={msg.queue_offset}, "
        f"storeTimestamp={msg.store_timestamp}, storeHost={msg.store_host}, "
        f"commitLogOffset={msg.commit_log_offset}, reconsumeTimes={msg.reconsume_times}, topic={msg.topic}, "
        f"properties={{{', '.join(f'{k}={v}' for k, v in sorted(msg.properties.items()))}}}]"
    )
    body = _body_text(msg, charset) if print_body else "NOT PRINT BODY"
    return f"MSGID: {msg.msg_id} {ext} BODY: {body}"


@click.option("-i", "--msgId", "msg_ids", required=True, help="Offset message id(s), separated by commas.")
@click.option("-t", "--topic", help="Also look the id up as a client (unique) id of this topic.")
@admin_command("queryMsgById", "A message by its offset message id.")
async def query_msg_by_id(admin: Admin, out: Out, msg_ids: str, topic: str | None) -> None:
    found = []
    for msg_id in (m.strip() for m in msg_ids.split(",") if m.strip()):
        msg = await admin.view_message(msg_id, topic=topic)
        _detail(out, msg)
        out.line()
        found.append(message_dict(msg))
    out.data(found)


@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-k", "--msgKey", "key", required=True, help="Message key.")
@click.option("-b", "--beginTimestamp", "begin", type=int, default=0, help="Epoch ms (default: 0).")
@click.option("-e", "--endTimestamp", "end", type=int, default=LONG_MAX, help="Epoch ms (default: no end).")
@click.option("-c", "--maxNum", "max_num", type=click.IntRange(1), default=64, show_default=True)
@admin_command("queryMsgByKey", "The messages of a topic with a key.")
async def query_msg_by_key(
    admin: Admin, out: Out, topic: str, key: str, begin: int, end: int, max_num: int
) -> None:
    result = await admin.query_message(topic, key, max_num, begin, end)
    out.table(
        "%-50s %4s %40s",
        ("#Message ID", "#QID", "#Offset"),
        ((m.msg_id, m.queue_id, m.queue_offset) for m in result.messages),
    )
    out.data([message_dict(m) for m in result.messages])


@click.option("-i", "--msgId", "msg_id", required=True, help="The client (unique) message id.")
@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-a", "--showAll", "show_all", is_flag=True, help="Every stored copy, not only the first.")
@admin_command("queryMsgByUniqueKey", "A message by its client (unique) message id.")
async def query_msg_by_unique_key(admin: Admin, out: Out, msg_id: str, topic: str, show_all: bool) -> None:
    msgs = (await admin.query_message_by_unique_key(topic, msg_id)).messages
    if not show_all:
        msgs = msgs[:1]
    for msg in msgs:
        _detail(out, msg)
        out.line()
    out.data([message_dict(m) for m in msgs])


@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-b", "--brokerName", "broker_name", required=True, help="Broker name.")
@click.option("-i", "--queueId", "queue_id", type=click.IntRange(0), required=True, help="Queue id.")
@click.option("-o", "--offset", type=click.IntRange(0), required=True, help="Queue offset.")
@admin_command("queryMsgByOffset", "The message at one offset of one queue.")
async def query_msg_by_offset(
    admin: Admin, out: Out, topic: str, broker_name: str, queue_id: int, offset: int
) -> None:
    msgs, _ = await admin.pull(topic, broker_name, queue_id, offset, 1)
    if not msgs or msgs[0].queue_offset != offset:
        raise AdminNotFoundError(
            f"no message at offset {offset} of {MessageQueue(topic, broker_name, queue_id)}"
        )
    _detail(out, msgs[0])
    out.data(message_dict(msgs[0]))


async def _queue_range(
    admin: Admin, mq: MessageQueue, begin: int | None, end: int | None, offset: int | None
) -> tuple[int, int, int, int]:
    lo, hi = await admin.min_max_offset(mq.topic, mq.broker_name, mq.queue_id)
    start = offset if offset is not None else lo
    stop = hi
    if begin is not None:
        start = await admin.offset_by_time(mq.topic, mq.broker_name, mq.queue_id, begin)
    if end is not None:
        stop = await admin.offset_by_time(mq.topic, mq.broker_name, mq.queue_id, end)
    return lo, hi, max(start, lo), min(stop, hi)


async def _pull_range(
    admin: Admin, mq: MessageQueue, start: int, stop: int, limit: int, subscription: str = "*"
) -> list[MessageExt]:
    msgs: list[MessageExt] = []
    offset = start
    while offset < stop and len(msgs) < limit:
        batch, next_offset = await admin.pull(
            mq.topic,
            mq.broker_name,
            mq.queue_id,
            offset,
            min(_BATCH, stop - offset),
            subscription=subscription,
        )
        msgs += [m for m in batch if m.queue_offset < stop]
        if next_offset <= offset:
            break
        offset = next_offset
    return msgs[:limit]


@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-c", "--charsetName", "charset", default="UTF-8", show_default=True, help="Body charset.")
@click.option("-s", "--subExpression", "sub", default="*", show_default=True, help="Tag expression.")
@click.option("-b", "--beginTimestamp", "begin", help="now | epoch ms | yyyy-MM-dd#HH:mm:ss:SSS")
@click.option("-e", "--endTimestamp", "end", help="now | epoch ms | yyyy-MM-dd#HH:mm:ss:SSS")
@click.option("-d", "--printBody", "print_body", type=click.BOOL, default=True, show_default=True)
@admin_command("printMsg", "Print every message of a topic (or of a time range).")
async def print_msg(
    admin: Admin,
    out: Out,
    topic: str,
    charset: str,
    sub: str,
    begin: str | None,
    end: str | None,
    print_body: bool,
) -> None:
    b = parse_time(begin) if begin else None
    e = parse_time(end) if end else None
    printed = []
    for mq, _ in await admin.queues(topic):
        lo, hi, start, stop = await _queue_range(admin, mq, b, e, None)
        out.line(f"minOffset={lo}, maxOffset={hi}, {mq}")
        msgs = await _pull_range(admin, mq, start, stop, LONG_MAX, sub)
        for msg in msgs:
            out.line(_one_line(msg, charset, print_body))
        printed += msgs
        out.line(f"{mq} print msg finished. status={'FOUND' if msgs else 'NO_NEW_MSG'}, offset={stop}")
        out.line("--------------------------------------------------------")
    out.data([message_dict(m) for m in printed])


@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-p", "--body", required=True, help="Message body (UTF-8).")
@click.option("-k", "--key", help="Message key(s), separated by spaces.")
@click.option("-c", "--tags", help="Message tag.")
@click.option("-b", "--broker", "broker_name", help="Send to this broker (with -i).")
@click.option("-i", "--qid", "queue_id", type=click.IntRange(0), help="Send to this queue (with -b).")
@admin_command("sendMessage", "Send one message.")
async def send_message(
    admin: Admin,
    out: Out,
    topic: str,
    body: str,
    key: str | None,
    tags: str | None,
    broker_name: str | None,
    queue_id: int | None,
) -> None:
    if (broker_name is None) != (queue_id is None):
        raise click.UsageError("-b broker and -i qid go together")
    msg = Message(topic, body.encode("utf-8"), tags=tags, keys=key.split() if key else None)
    result = await admin.send_message(msg, broker_name=broker_name, queue_id=queue_id)
    mq = result.message_queue
    out.table(
        "%-32s  %-4s  %-20s    %s",
        ("#Broker Name", "#QID", "#Send Result", "#MsgId"),
        [(mq.broker_name, mq.queue_id, result.send_status.name, result.msg_id)],
    )
    out.data(
        {
            "brokerName": mq.broker_name,
            "queueId": mq.queue_id,
            "queueOffset": result.queue_offset,
            "sendStatus": result.send_status.name,
            "msgId": result.msg_id,
            "offsetMsgId": result.offset_msg_id,
        }
    )


@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-b", "--brokerName", "broker_name", help="Only this broker's queue (with -i).")
@click.option("-i", "--queueId", "queue_id", type=click.IntRange(0), help="Only this queue (with -b).")
@click.option("-o", "--offset", type=click.IntRange(0), help="Start at this offset (with -b and -i).")
@click.option("-g", "--consumerGroup", "group", default="TOOLS_CONSUMER", show_default=True)
@click.option("-s", "--beginTimestamp", "begin", help="now | epoch ms | yyyy-MM-dd#HH:mm:ss:SSS")
@click.option("-e", "--endTimestamp", "end", help="now | epoch ms | yyyy-MM-dd#HH:mm:ss:SSS")
@click.option("-c", "--MessageNumber", "count", type=click.IntRange(1), default=128, show_default=True)
@admin_command("consumeMessage", "Read messages (commits no offset).")
async def consume_message(
    admin: Admin,
    out: Out,
    topic: str,
    broker_name: str | None,
    queue_id: int | None,
    offset: int | None,
    group: str,
    begin: str | None,
    end: str | None,
    count: int,
) -> None:
    if (broker_name is None) != (queue_id is None):
        raise click.UsageError("-b brokerName and -i queueId go together")
    if offset is not None and broker_name is None:
        raise click.UsageError("-o offset needs -b brokerName and -i queueId")
    b = parse_time(begin) if begin else None
    e = parse_time(end) if end else None
    if broker_name is not None and queue_id is not None:
        queues = [MessageQueue(topic, broker_name, queue_id)]
    else:
        queues = [mq for mq, _ in await admin.queues(topic)]
    consumed: list[MessageExt] = []
    for mq in queues:
        if len(consumed) >= count:
            break
        _, _, start, stop = await _queue_range(admin, mq, b, e, offset)
        msgs = await _pull_range(admin, mq, start, stop, count - len(consumed))
        if not msgs:
            out.line(f"{mq} no matched msg, offset={start}")
        for msg in msgs:
            out.line(_one_line(msg))
        consumed += msgs
    out.data([message_dict(m) for m in consumed])


@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-a", "--brokerName", "broker_name", required=True, help="Broker name.")
@click.option("-i", "--queueId", "queue_id", required=True, type=click.IntRange(0), help="Queue id.")
@click.option("-c", "--charsetName", "charset", default="UTF-8", show_default=True, help="Body charset.")
@click.option("-s", "--subExpression", "sub", default="*", show_default=True, help="Tag expression.")
@click.option("-b", "--beginTimestamp", "begin", help="now | epoch ms | yyyy-MM-dd#HH:mm:ss:SSS")
@click.option("-e", "--endTimestamp", "end", help="now | epoch ms | yyyy-MM-dd#HH:mm:ss:SSS")
@click.option("-p", "--printMsg", "print_msgs", type=click.BOOL, default=False, show_default=True)
@click.option("-d", "--printBody", "print_body", type=click.BOOL, default=False, show_default=True)
@click.option("-f", "--calculate", type=click.BOOL, default=False, show_default=True, help="Count by tag.")
@admin_command("printMsgByQueue", "Print (-p true) or count by tag (-f true) the messages of one queue.")
async def print_msg_by_queue(
    admin: Admin,
    out: Out,
    topic: str,
    broker_name: str,
    queue_id: int,
    charset: str,
    sub: str,
    begin: str | None,
    end: str | None,
    print_msgs: bool,
    print_body: bool,
    calculate: bool,
) -> None:
    mq = MessageQueue(topic.strip(), broker_name.strip(), queue_id)
    b = parse_time(begin) if begin else None
    e = parse_time(end) if end else None
    _, _, start, stop = await _queue_range(admin, mq, b, e, None)
    msgs = await _pull_range(admin, mq, start, stop, LONG_MAX, sub)
    if print_msgs:
        for msg in msgs:
            out.line(_one_line(msg, charset, print_body))
    tags = Counter(m.tags for m in msgs if m.tags and m.tags.strip())
    counts = sorted(tags.items(), key=lambda kv: -kv[1]) if calculate else []
    for tag, n in counts:
        out.line(f"Tag: {tag:<30} Count: {n}")
    out.data(
        {
            "queue": mq.to_dict(),
            "fromOffset": start,
            "toOffset": stop,
            "messages": [message_dict(m) for m in msgs] if print_msgs else len(msgs),
            **({"tags": dict(counts)} if calculate else {}),
        }
    )


# Java's trace data (TraceDataEncoder): records split by \x02, fields by \x01; the first field is the type.
_FIELD_SPLIT, _CONTENT_SPLIT = "\x02", "\x01"


def trace_views(msg_id: str, trace: MessageExt, *, sub_before: bool = False) -> list[dict[str, Any]]:
    """The Pub and SubAfter records of ``msg_id`` in one message of the trace topic (Java's
    ``TraceView.decodeFromTraceTransData``): type, group, client host, time, cost and status; with
    ``sub_before`` also the SubBefore records (a consumer's delivery before its listener ran: time, group,
    ``retryTimes``, no cost or status), which Java's view skips."""
    views = []
    client_host = trace.born_host.rpartition(":")[0] or trace.born_host
    for record in trace.body.decode("utf-8", "replace").split(_FIELD_SPLIT):
        f = record.split(_CONTENT_SPLIT)
        success: str | None = None
        try:
            if f[0] == "Pub" and len(f) >= 13 and f[5] == msg_id:
                success = f[12] if len(f) == 13 else f[13]
                view = {"type": "Pub", "group": f[3], "timestamp": int(f[1]), "costTime": int(f[10])}
            elif f[0] == "SubAfter" and len(f) >= 6 and f[2] == msg_id:
                success = f[4]
                view = {"type": "SubAfter", "group": f[8] if len(f) >= 9 else "", "costTime": int(f[3])}
                view["timestamp"] = int(f[7]) if len(f) >= 9 else 0
            elif sub_before and f[0] == "SubBefore" and len(f) >= 7 and f[5] == msg_id:
                view = {"type": "SubBefore", "group": f[3], "timestamp": int(f[1]), "retryTimes": int(f[6])}
            else:
                continue
        except ValueError:
            continue  # a record this reader cannot parse, as Java's would throw on it
        if success is not None:
            view["status"] = "success" if success.strip().lower() == "true" else "failed"
        view["clientHost"] = client_host
        views.append(view)
    return views


async def message_traces(
    admin: Admin, msg_id: str, trace_topic: str = TRACE_TOPIC, *, sub_before: bool = False
) -> list[dict[str, Any]]:
    """The trace records of ``msg_id`` (see :func:`trace_views`), from the trace topic's messages keyed by
    it (up to 64); none found raises the lookup's not-found error."""
    result = await admin.query_message(trace_topic.strip(), msg_id, 64, 0, int(time.time() * 1000))
    return [v for m in result.messages for v in trace_views(msg_id, m, sub_before=sub_before)]


def _trace_time(ms: int) -> str:
    return human_ms(ms, millis=False) or "1970-01-01 00:00:00"


def _trace_table(out: Out, kind: str, columns: tuple[str, str], views: list[dict[str, Any]]) -> None:
    out.table(
        "%-10s %-20s %-20s %-20s %-10s %-10s",
        ("#Type", columns[0], "#ClientHost", columns[1], "#CostTimes", "#Status"),
        (
            (
                kind,
                v["group"],
                v["clientHost"],
                _trace_time(v["timestamp"]),
                f"{v['costTime']}ms",
                v["status"],
            )
            for v in views
        ),
    )
    out.line()


@click.option("-i", "--msgId", "msg_id", required=True, help="The (client) message id that was traced.")
@click.option("-t", "--traceTopic", "trace_topic", default=TRACE_TOPIC, show_default=True)
@admin_command("queryMsgTraceById", "The send (Pub) and consume (Sub) traces of a message.")
async def query_msg_trace_by_id(admin: Admin, out: Out, msg_id: str, trace_topic: str) -> None:
    msg_id = msg_id.strip()
    views = await message_traces(admin, msg_id, trace_topic)
    subs: dict[str, list[dict[str, Any]]] = {}
    for v in views:
        if v["type"] == "Pub":
            _trace_table(out, "Pub", ("#ProducerGroup", "#SendTime"), [v])
        else:
            subs.setdefault(v["group"], []).append(v)
    for group_views in subs.values():
        _trace_table(out, "Sub", ("#ConsumerGroup", "#ConsumerTime"), group_views)
    out.data({"msgId": msg_id, "traceTopic": trace_topic, "traces": views})


def avg_rt(total_ms: float, amount: int) -> str:
    """Java's average of every send but the first (``NaN`` when there is only one)."""
    return f"{total_ms / (amount - 1):.2f}" if amount > 1 else "NaN"


@click.option("-t", "--topic", required=True, help="Topic name.")
@click.option("-a", "--amount", type=click.IntRange(1), default=100, show_default=True, help="Messages.")
@click.option("-s", "--size", type=click.IntRange(0), default=128, show_default=True, help="Body bytes.")
@admin_command(
    "checkMsgSendRT", "Send messages to the topic's queues in turn; each send's time and the average."
)
async def check_msg_send_rt(admin: Admin, out: Out, topic: str, amount: int, size: int) -> None:
    topic = topic.strip()
    route = await admin.topic_route(topic)
    queues = [
        MessageQueue(topic, qd.broker_name, i)
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)
        if qd.perm & PermName.WRITE
        for i in range(qd.write_queue_nums)
    ]
    if not queues:
        raise AdminNotFoundError(f"topic {topic} has no writable queue")
    fmt = "%-32s  %-4s  %-20s    %s"
    out.table(fmt, ("#Broker Name", "#QID", "#Send Result", "#RT"), [])
    rows = []
    elapsed = 0.0
    async with admin.producer(f"PID_RT_{int(time.time() * 1000)}") as producer:
        for i in range(amount):
            mq = queues[i % len(queues)]
            began = time.monotonic()
            try:
                await producer.send(Message(topic, b"a" * size), mq=mq)
                ok = True
            except (MQClientError, RemotingError, OSError, TimeoutError) as exc:
                ok = False
                click.echo(f"rmqadmin checkMsgSendRT: send to {mq} failed: {exc}", err=True)
            ms = int((time.monotonic() - began) * 1000)
            if i:
                elapsed += ms
            out.line((fmt % (mq.broker_name, mq.queue_id, str(ok).lower(), ms)).rstrip())
            rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id, "success": ok, "rtMs": ms})
    out.line(f"Avg RT: {avg_rt(elapsed, amount)}")
    out.data({"topic": topic, "sends": rows, "avgRtMs": avg_rt(elapsed, amount)})
