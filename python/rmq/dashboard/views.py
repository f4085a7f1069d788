"""What each dashboard page shows, as JSON-ready dicts built from :class:`rmq.client.Admin` calls.

No HTTP here: :mod:`rmq.dashboard.server` maps requests to these coroutines and their errors to statuses.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from typing import Any, Final

from rmq.admin.base import Exit, exit_code_of
from rmq.admin.message import message_dict as admin_message_dict
from rmq.admin.message import message_traces
from rmq.client.admin_acl import PlainAccessConfig
from rmq.client.admin_ext import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, Admin, AdminNotFoundError
from rmq.client.admin_types import SubscriptionGroupConfig
from rmq.client.errors import ConsumerNotOnlineError, MQClientError
from rmq.client.message import RESERVED_PROPERTIES, Message, MessageExt, MessageQueue
from rmq.common.codes import MASTER_ID, MessageConst, PermName
from rmq.common.route import TopicConfig
from rmq.common.topic import check_group, check_topic
from rmq.remoting import RemotingError

__all__ = [
    "SECRET_MASK",
    "SYSTEM_TOPICS",
    "acl",
    "add_write_perm",
    "cluster",
    "delete_acl_account",
    "delete_group",
    "delete_topic",
    "group_detail",
    "groups",
    "message_dict",
    "message_trace",
    "producers",
    "resend_dlq",
    "search_by_time",
    "topic_detail",
    "topic_kind",
    "topics",
    "update_acl_account",
    "update_global_white_addrs",
    "update_group",
    "update_topic",
    "wipe_write_perm",
    "write_perms",
]

log = logging.getLogger(__name__)

SYSTEM_TOPICS: Final = frozenset(
    {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "OFFSET_MOVED_EVENT",
        "SELF_TEST_TOPIC",
        "BenchmarkTest",
    }
)
SEARCH_BATCH: Final = 32
GROUP_CONCURRENCY: Final = 16
"""Groups whose members and lag the groups page asks for at once."""
_SOFT_ERRORS = (MQClientError, RemotingError, OSError, TimeoutError)


def _first_float(text: str | None) -> float:
    try:
        return float((text or "0").split(" ")[0])
    except ValueError:
        return 0.0


def topic_kind(topic: str, cluster_names: frozenset[str] | set[str] = frozenset()) -> str:
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "retry"
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return "dlq"
    if topic in SYSTEM_TOPICS or topic in cluster_names or topic.startswith("rmq_sys_"):
        return "system"
    if topic.endswith("_REPLY_TOPIC") and topic.removesuffix("_REPLY_TOPIC") in cluster_names:
        return "system"
    return "normal"


def message_dict(msg: MessageExt, *, with_body: bool = True) -> dict[str, Any]:
    """The message as ``rmqadmin --json`` shows it, with the body Base64-encoded (bytes, not text)."""
    out = admin_message_dict(msg)
    del out["sysFlag"], out["body"]
    if with_body:
        out["body"] = base64.b64encode(msg.body).decode("ascii")
    return out


# --- cluster ----------------------------------------------------------------------------------------------


async def runtime_rates(admin: Admin) -> tuple[float, float]:
    """Messages stored and sent to consumers per second, summed over the masters (last 10 s)."""
    put = get = 0.0
    for ref in await admin.masters():
        try:
            t = await admin.broker_runtime_info(ref.addr)
        except _SOFT_ERRORS as exc:
            log.debug("dashboard: no runtime info of %s: %s", ref.addr, exc)
            continue
        put += _first_float(t.get("putTps"))
        get += _first_float(t.get("getTransferedTps"))
    return put, get


async def cluster(admin: Admin) -> dict[str, Any]:
    info = await admin.cluster_info()
    brokers = []
    for cluster_name, names in sorted(info.cluster_addr_table.items()):
        for name in sorted(names):
            bd = info.broker_addr_table.get(name)
            for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                row: dict[str, Any] = {
                    "cluster": cluster_name,
                    "brokerName": name,
                    "brokerId": bid,
                    "role": "MASTER" if bid == 0 else "SLAVE",
                    "addr": addr,
                }
                try:
                    t = await admin.broker_runtime_info(addr)
                except _SOFT_ERRORS as exc:
                    row["error"] = str(exc)
                    brokers.append(row)
                    continue
                row.update(
                    version=t.get("brokerVersionDesc", ""),
                    putTps=_first_float(t.get("putTps")),
                    getTps=_first_float(t.get("getTransferedTps")),
                    diskRatio=float(t.get("commitLogDiskRatio") or 0.0),
                    diskFull=t.get("diskFull") == "true",
                    commitLogMaxOffset=int(t.get("commitLogMaxOffset") or 0),
                    msgPutToday=int(t.get("msgPutTotalTodayNow") or 0)
                    - int(t.get("msgPutTotalTodayMorning") or 0),
                    msgGetToday=int(t.get("msgGetTotalTodayNow") or 0)
                    - int(t.get("msgGetTotalTodayMorning") or 0),
                    bootTimestamp=int(t.get("bootTimestamp") or 0),
                    runtime=t.get("runtime", ""),
                )
                row.update(_pop_and_grpc(t))
                brokers.append(row)
    return {"clusters": sorted(info.cluster_addr_table), "brokers": brokers}


def _pop_and_grpc(t: dict[str, str]) -> dict[str, int | None]:
    """A broker's POP and gRPC figures from its runtime info (rmq's own keys; None where a broker has
    none, as an Apache broker): messages popped and neither acked nor revived, revive records not yet
    done with and how late the oldest due checkpoint is, 5.x producers and consumers connected."""

    def num(key: str) -> int | None:
        v = t.get(key)
        try:
            return None if v is None else int(v)
        except ValueError:
            return None

    return {
        "popInflight": num("popInflightMessages"),
        "reviveBehindRecords": num("popReviveBehindRecords"),
        "reviveBehindMs": num("popReviveBehindMs"),
        "grpcProducers": num("grpcProducers"),
        "grpcConsumers": num("grpcConsumers"),
    }


# --- topics -----------------------------------------------------------------------------------------------


async def topics(admin: Admin) -> dict[str, Any]:
    info = await admin.cluster_info()
    names = set(info.cluster_addr_table) | set(info.broker_addr_table)
    return {"topics": [{"topic": t, "kind": topic_kind(t, names)} for t in await admin.topic_list()]}


async def topic_detail(admin: Admin, topic: str) -> dict[str, Any]:
    route = await admin.topic_route(topic)
    queues = [o.to_dict() for o in await admin.topic_stats(topic)]
    in_tps = 0.0
    masters = [bd.broker_addrs[MASTER_ID] for bd in route.broker_datas if MASTER_ID in bd.broker_addrs]
    for addr in masters:
        try:
            in_tps += (await admin.view_broker_stats(addr, "TOPIC_PUT_NUMS", topic)).minute.tps
        except _SOFT_ERRORS:
            pass  # nothing sent to the topic on this broker yet
    try:
        consumers = await admin.topic_consumed_by(topic)
    except _SOFT_ERRORS:
        consumers = []
    order = False
    for addr in masters[:1]:  # the order flag is in the topic config only (the update form shows it)
        try:
            order = bool((await admin.topic_configs(addr)).get(topic, {}).get("order"))
        except _SOFT_ERRORS:
            pass
    return {
        "topic": topic,
        "order": order,
        "inTps": in_tps,
        "queues": queues,
        "totalMessages": sum(q["maxOffset"] - q["minOffset"] for q in queues),
        "route": {
            "brokers": [
                {
                    "brokerName": bd.broker_name,
                    "cluster": bd.cluster,
                    "addrs": {str(k): v for k, v in bd.broker_addrs.items()},
                }
                for bd in sorted(route.broker_datas, key=lambda b: b.broker_name)
            ],
            "queues": [
                {
                    "brokerName": qd.broker_name,
                    "readQueueNums": qd.read_queue_nums,
                    "writeQueueNums": qd.write_queue_nums,
                    "perm": qd.perm,
                }
                for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)
            ],
        },
        "consumerGroups": consumers,
    }


# --- consumer groups --------------------------------------------------------------------------------------


async def groups(admin: Admin) -> dict[str, Any]:
    names: set[str] = set()
    for ref in await admin.masters():
        try:
            names |= set(await admin.subscription_groups(ref.addr))
        except _SOFT_ERRORS as exc:
            log.debug("dashboard: no groups of %s: %s", ref.addr, exc)
    gate = asyncio.Semaphore(GROUP_CONCURRENCY)

    async def row(name: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "group": name,
            "members": 0,
            "diffTotal": None,
            "inflight": None,
            "consumeTps": 0.0,
        }
        async with gate:
            try:
                out["members"] = len((await admin.consumer_connection(name)).connections)
            except _SOFT_ERRORS:
                pass  # none online
            try:
                stats = await admin.consume_stats(name)
                out["diffTotal"] = stats.diff_total
                out["inflight"] = stats.inflight_total
                out["consumeTps"] = stats.consume_tps
            except _SOFT_ERRORS:
                pass  # nothing consumed yet
        return out

    rows = await asyncio.gather(*(row(name) for name in sorted(names)))
    return {"groups": rows}


async def group_detail(admin: Admin, group: str) -> dict[str, Any]:
    out: dict[str, Any] = {"group": group, "online": False, "members": [], "subscriptions": {}}
    try:
        conn = await admin.consumer_connection(group)
        out.update(
            online=True,
            members=[c.to_dict() for c in conn.connections],
            subscriptions=dict(sorted(conn.subscriptions.items())),
            messageModel=conn.message_model,
            consumeType=conn.consume_type,
            consumeFromWhere=conn.consume_from_where,
        )
    except ConsumerNotOnlineError:
        pass
    out["config"] = await group_config(admin, group)
    try:
        stats = await admin.consume_stats(group)
    except _SOFT_ERRORS as exc:
        out["stats"] = None
        out["statsError"] = str(exc)
    else:
        out["stats"] = stats.to_dict()
    return out


# --- producers --------------------------------------------------------------------------------------------


async def producers(admin: Admin) -> dict[str, Any]:
    """Every master's producer connections by group (GET_ALL_PRODUCER_INFO, as ``rmqadmin producer``): one
    row per connection; a group with none still gets a row (no client id), a master that does not answer
    an ``errors`` entry."""
    rows: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    for ref in await admin.masters():
        try:
            by_group = await admin.producer_info(ref.addr)
        except _SOFT_ERRORS as exc:
            errors.append({"brokerName": ref.broker_name, "addr": ref.addr, "error": str(exc)})
            continue
        where = {"cluster": ref.cluster, "brokerName": ref.broker_name, "brokerAddr": ref.addr}
        for group, conns in by_group.items():
            for c in conns or [{}]:
                rows.append(
                    {
                        **where,
                        "group": group,
                        "clientId": str(c.get("clientId") or ""),
                        "clientAddr": str(c.get("remoteIP") or "").lstrip("/"),
                        "language": str(c.get("language") or ""),
                        "version": str(c.get("version") or ""),
                        "lastUpdateTimestamp": int(c.get("lastUpdateTimestamp") or 0),
                    }
                )
    return {"producers": rows, "errors": errors}


# --- messages ---------------------------------------------------------------------------------------------


async def search_by_time(admin: Admin, topic: str, begin_ms: int, end_ms: int, limit: int) -> dict[str, Any]:
    """Messages of ``topic`` stored in ``[begin_ms, end_ms)``, every queue read from the offset of
    ``begin_ms`` to the offset of ``end_ms`` (the broker's SEARCH_OFFSET_BY_TIMESTAMP), at most ``limit``,
    newest first (without bodies; the detail view loads one)."""
    found: list[MessageExt] = []
    truncated = False
    for mq, _ in await admin.queues(topic):
        lo, hi = await admin.min_max_offset(mq.topic, mq.broker_name, mq.queue_id)
        start = max(lo, await admin.offset_by_time(mq.topic, mq.broker_name, mq.queue_id, begin_ms))
        stop = min(hi, await admin.offset_by_time(mq.topic, mq.broker_name, mq.queue_id, end_ms) + 1)
        offset = start
        while offset < stop:
            batch, next_offset = await admin.pull(mq.topic, mq.broker_name, mq.queue_id, offset, SEARCH_BATCH)
            found += [m for m in batch if begin_ms <= m.store_timestamp < end_ms]
            if next_offset <= offset:
                break
            offset = next_offset
    found.sort(key=lambda m: (m.store_timestamp, m.queue_offset), reverse=True)
    if len(found) > limit:
        found, truncated = found[:limit], True
    return {"messages": [message_dict(m, with_body=False) for m in found], "truncated": truncated}


async def search_by_key(admin: Admin, topic: str, key: str, limit: int) -> dict[str, Any]:
    result = await admin.query_message(topic, key, limit)
    return {"messages": [message_dict(m, with_body=False) for m in result.messages], "truncated": False}


async def message(admin: Admin, topic: str | None, msg_id: str) -> dict[str, Any]:
    """One message by offset message id, or (with ``topic``) by client (unique) message id."""
    out = message_dict(await admin.view_message(msg_id, topic=topic or None))
    if not out["brokerName"]:  # VIEW_MESSAGE_BY_ID answers the record only: name the broker by its address
        info = await admin.cluster_info()
        out["brokerName"] = next(
            (
                name
                for name, bd in sorted(info.broker_addr_table.items())
                if out["storeHost"] in bd.broker_addrs.values()
            ),
            "",
        )
    return out


async def message_trace(admin: Admin, msg_id: str, trace_topic: str) -> dict[str, Any]:
    """The message's trace records in ``trace_topic`` (what clients with message trace on write: Pub,
    SubBefore, SubAfter; as ``rmqadmin queryMsgTraceById``, which shows Pub and SubAfter), oldest first;
    none (message trace off, the topic missing): an empty list."""
    try:
        traces = await message_traces(admin, msg_id, trace_topic, sub_before=True)
    except _SOFT_ERRORS as exc:
        if exit_code_of(exc) != Exit.NOT_FOUND:
            raise
        traces = []
    traces.sort(key=lambda v: (v["timestamp"], v["type"] != "Pub"))
    return {"msgId": msg_id, "traceTopic": trace_topic, "traces": traces}


# --- admin actions ----------------------------------------------------------------------------------------


async def reset_offset(admin: Admin, group: str, topic: str, timestamp_ms: int) -> dict[str, Any]:
    table, via_consumers = await admin.reset_offset_by_time(topic, group, timestamp_ms)
    return {
        "offsets": [{**_mq(mq), "offset": off} for mq, off in sorted(table.items())],
        "consumersNotified": via_consumers,
    }


def _mq(mq: MessageQueue) -> dict[str, Any]:
    return {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}


async def resend_dlq(admin: Admin, dlq_topic: str, msg_id: str) -> dict[str, Any]:
    """Send a copy of a dead-letter message to the topic it was first sent to (its ``RETRY_TOPIC``
    property), with its body, tags, keys and user properties; the broker's own properties (retry and
    delay bookkeeping, the old ``UNIQ_KEY``) are dropped, so it is a new message with a new id. Every group
    subscribing that topic receives it."""
    if not dlq_topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        raise ValueError(f"{dlq_topic!r} is not a dead-letter topic (%DLQ%<group>)")
    dead = await admin.view_message(msg_id, topic=dlq_topic)
    if dead.topic != dlq_topic:
        raise ValueError(f"message {msg_id} is of topic {dead.topic}, not {dlq_topic}")
    origin = dead.properties.get(MessageConst.RETRY_TOPIC)
    if not origin or origin.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
        raise ValueError(f"message {msg_id} names no original topic (property RETRY_TOPIC={origin!r})")
    user = {k: v for k, v in dead.properties.items() if k not in RESERVED_PROPERTIES}
    copy = Message(origin, dead.body, tags=dead.tags, keys=dead.keys or None, properties=user, flag=dead.flag)
    result = await admin.send_message(copy)
    log.info(
        "dashboard: resent dead-letter message %s of %s to %s as %s",
        msg_id,
        dlq_topic,
        origin,
        result.msg_id,
    )
    return {
        "topic": origin,
        "msgId": result.msg_id,
        "offsetMsgId": result.offset_msg_id,
        "sendStatus": result.send_status.name,
        "resentAt": int(time.time() * 1000),
    }


def _field(body: dict[str, Any], key: str, kind: type, default: Any = None, lo: int = 0, hi: int = 0) -> Any:
    """``body[key]`` of JSON type ``kind`` (an int within ``[lo, hi]``); ``default`` when absent (``None``:
    required). :class:`ValueError` naming the field otherwise."""
    value = body.get(key, default)
    if value is None:
        raise ValueError(f"missing field {key!r}")
    if kind is int and (isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi):
        raise ValueError(f"field {key}={value!r} is not a whole number in [{lo}, {hi}]")
    if not isinstance(value, kind):
        raise ValueError(f"field {key}={value!r} is not a {kind.__name__}")
    return value


def _name(body: dict[str, Any], key: str, check: Any) -> str:
    value = _field(body, key, str).strip()
    problem = check(value)
    if problem:
        raise ValueError(f"{key} {value!r}: {problem}")
    return str(value)


async def _masters(admin: Admin, body: dict[str, Any]) -> list[str]:
    """The master addresses of the body's ``cluster`` (default: every cluster)."""
    cluster = _field(body, "cluster", str, "").strip()
    return [ref.addr for ref in await admin.masters(cluster or None)]


async def update_topic(admin: Admin, body: dict[str, Any]) -> dict[str, Any]:
    """Create the topic, or update its queue counts, permission and order flag, on every master of
    ``cluster`` (default: of every cluster), as ``rmqadmin updateTopic -c``."""
    topic = _name(body, "topic", check_topic)
    config = TopicConfig(
        topic,
        _field(body, "readQueueNums", int, 8, 1, 1024),
        _field(body, "writeQueueNums", int, 8, 1, 1024),
        _field(body, "perm", int, 6, 0, 7),
        order=_field(body, "order", bool, False),
    )
    addrs = await _masters(admin, body)
    for addr in addrs:
        await admin.create_topic(addr, config)
    return {"topic": topic, "brokers": addrs, "topicConfig": config.to_dict()}


async def delete_topic(admin: Admin, body: dict[str, Any]) -> dict[str, Any]:
    """Delete the topic from the brokers of ``cluster`` (default: every cluster that serves it) and from
    the name servers, as ``rmqadmin deleteTopic``; an unknown topic is not found."""
    topic = _name(body, "topic", check_topic)
    route = await admin.topic_route(topic)
    cluster = _field(body, "cluster", str, "").strip()
    clusters = [cluster] if cluster else sorted({bd.cluster for bd in route.broker_datas})
    addrs = [addr for c in clusters for addr in await admin.delete_topic(topic, c)]
    return {"topic": topic, "brokers": addrs}


async def update_group(admin: Admin, body: dict[str, Any]) -> dict[str, Any]:
    """Create the subscription group, or update its retry max times, consume enable and orderly flag, on
    every master of ``cluster`` (default: of every cluster); the fields not given keep the value each
    broker has (a new group: the defaults)."""
    group = _name(body, "group", check_group)
    changes = {
        attr: _field(body, key, kind, None, lo, hi)
        for key, attr, kind, lo, hi in (
            ("retryMaxTimes", "retry_max_times", int, -1, 1024),
            ("consumeEnable", "consume_enable", bool, 0, 0),
            ("consumeMessageOrderly", "consume_message_orderly", bool, 0, 0),
            ("consumeBroadcastEnable", "consume_broadcast_enable", bool, 0, 0),
        )
        if key in body
    }
    addrs = await _masters(admin, body)
    configs = []
    for addr in addrs:
        old = (await admin.subscription_group_configs(addr)).get(group)
        config = SubscriptionGroupConfig.from_dict(old) if old else SubscriptionGroupConfig(group)
        for attr, value in changes.items():
            setattr(config, attr, value)
        await admin.create_subscription_group(addr, config)
        configs.append(config.to_dict())
    return {"group": group, "brokers": addrs, "configs": configs}


async def delete_group(admin: Admin, body: dict[str, Any]) -> dict[str, Any]:
    """Delete the subscription group (and with ``removeOffset`` its offsets) from every master of
    ``cluster`` (default: of every cluster) that has it, as ``rmqadmin deleteSubGroup``; none has it: not
    found."""
    group = _name(body, "group", check_group)
    remove_offset = _field(body, "removeOffset", bool, False)
    addrs = [a for a in await _masters(admin, body) if group in await admin.subscription_groups(a)]
    if not addrs:
        raise AdminNotFoundError(f"no broker has the subscription group {group}")
    for addr in addrs:
        await admin.delete_subscription_group(addr, group, remove_offset=remove_offset)
    return {"group": group, "brokers": addrs, "removeOffset": remove_offset}


async def group_config(admin: Admin, group: str) -> dict[str, Any] | None:
    """The group's subscription config on the first master that has it (``None``: no master has it)."""
    for ref in await admin.masters():
        try:
            config = (await admin.subscription_group_configs(ref.addr)).get(group)
        except _SOFT_ERRORS:
            continue
        if config:
            return config
    return None


# --- ACL --------------------------------------------------------------------------------------------------

SECRET_MASK: Final = "******"


async def acl(admin: Admin) -> dict[str, Any]:
    """Every master's ACL config as ``rmqadmin getAclConfig`` / ``clusterAclConfigVersion`` show it: the
    global white list, the accounts (their secret keys masked, whatever the broker sends) and each rules
    file's version; a broker with ACL off (or refusing) gets ``error`` instead."""
    brokers = []
    for ref in await admin.masters():
        row: dict[str, Any] = {"cluster": ref.cluster, "brokerName": ref.broker_name, "addr": ref.addr}
        try:
            versions = await admin.examine_broker_cluster_acl_version_info(ref.addr)
            config = await admin.examine_broker_cluster_acl_config(ref.addr)
        except _SOFT_ERRORS as exc:
            row.update(aclEnabled=False, error=str(exc))
            brokers.append(row)
            continue
        accounts = []
        for account in config.plain_access_configs:
            shown = account.to_json()
            if shown.get("secretKey"):
                shown["secretKey"] = SECRET_MASK
            accounts.append(shown)
        row.update(
            aclEnabled=True,
            globalWhiteAddrs=config.global_white_addrs,
            accounts=accounts,
            versions=[
                {"aclFilePath": path, "counter": counter, "timestamp": ts}
                for path, (counter, ts) in sorted(versions.all_versions.items())
            ],
        )
        brokers.append(row)
    return {"brokers": brokers, "aclEnabled": any(b["aclEnabled"] for b in brokers)}


async def _every_broker(admin: Admin) -> list[str]:
    """Every broker, masters and slaves (each has its own rules files, as ``rmqadmin updateAclConfig -c``)."""
    info = await admin.cluster_info()
    return [
        addr
        for bd in sorted(info.broker_addr_table.values(), key=lambda b: b.broker_name)
        for _bid, addr in sorted(bd.broker_addrs.items())
    ]


def _perms(body: dict[str, Any], key: str) -> list[str] | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ValueError(f"field {key} must be a list of 'name=PERM' strings")
    out = [p.strip() for p in value if p.strip()]
    bad = [p for p in out if "=" not in p]
    if bad:
        raise ValueError(f"field {key}: {bad[0]!r} is not 'name=PERM'")
    return out


async def update_acl_account(admin: Admin, body: dict[str, Any]) -> dict[str, Any]:
    """Create or update an account on every broker, as ``rmqadmin updateAclConfig -c``; the fields not given
    keep each broker's value. The answer never holds the secret key."""
    access_key = _field(body, "accessKey", str).strip()
    secret_key = _field(body, "secretKey", str).strip()
    if not access_key:
        raise ValueError("missing field 'accessKey'")
    if len(secret_key) <= 6:
        raise ValueError("the secretKey must be more than 6 characters")
    optional = {
        key: (_field(body, key, str).strip() if body.get(key) is not None else None)
        for key in ("whiteRemoteAddress", "defaultTopicPerm", "defaultGroupPerm")
    }
    config = PlainAccessConfig(
        access_key=access_key,
        secret_key=secret_key,
        admin=_field(body, "admin", bool, False),
        white_remote_address=optional["whiteRemoteAddress"],
        default_topic_perm=optional["defaultTopicPerm"] or None,
        default_group_perm=optional["defaultGroupPerm"] or None,
        topic_perms=_perms(body, "topicPerms"),
        group_perms=_perms(body, "groupPerms"),
    )
    addrs = await _every_broker(admin)
    for addr in addrs:
        await admin.create_and_update_plain_access_config(addr, config)
    shown = config.to_json()
    shown.pop("secretKey", None)
    return {"accessKey": access_key, "brokers": addrs, "account": shown}


async def delete_acl_account(admin: Admin, body: dict[str, Any]) -> dict[str, Any]:
    """Delete the account from every broker, as ``rmqadmin deleteAclConfig -c``."""
    access_key = _field(body, "accessKey", str).strip()
    if not access_key:
        raise ValueError("missing field 'accessKey'")
    addrs = await _every_broker(admin)
    for addr in addrs:
        await admin.delete_plain_access_config(addr, access_key)
    return {"accessKey": access_key, "brokers": addrs}


async def update_global_white_addrs(admin: Admin, body: dict[str, Any]) -> dict[str, Any]:
    """Replace the global white list of every broker's main rules file, as ``rmqadmin
    updateGlobalWhiteAddr -c``."""
    value = _field(body, "globalWhiteAddrs", list)
    if not all(isinstance(a, str) for a in value):
        raise ValueError("field globalWhiteAddrs must be a list of address patterns")
    addresses = [a.strip() for a in value if a.strip()]
    addrs = await _every_broker(admin)
    for addr in addrs:
        await admin.update_global_white_addr_config(addr, addresses)
    return {"globalWhiteAddrs": addresses, "brokers": addrs}


# --- operations -------------------------------------------------------------------------------------------


async def write_perms(admin: Admin) -> dict[str, Any]:
    """Each broker's write permission as every name server's routes hold it, read from the route of the
    topic named after the broker, which each broker registers (``None``: unknown, that topic having neither
    read nor write permission, as with ``brokerTopicEnable=false``)."""
    info = await admin.cluster_info()
    namesrvs = list(admin.instance.api.namesrv_addrs)
    brokers = []
    for cluster_name, names in sorted(info.cluster_addr_table.items()):
        for broker_name in sorted(names):
            row: dict[str, Any] = {"cluster": cluster_name, "brokerName": broker_name, "namesrvs": []}
            for ns in namesrvs:
                try:
                    route = await admin.topic_route(broker_name, ns)
                    perms = [q.perm for q in route.queue_datas if q.broker_name == broker_name]
                    rw = PermName.READ | PermName.WRITE
                    # Neither read nor write: the topic is off (brokerTopicEnable=false), it tells nothing.
                    writable = (
                        None if not any(p & rw for p in perms) else all(p & PermName.WRITE for p in perms)
                    )
                    perm = perms[0] if perms else None
                    row["namesrvs"].append({"namesrvAddr": ns, "perm": perm, "writable": writable})
                except _SOFT_ERRORS as exc:
                    row["namesrvs"].append({"namesrvAddr": ns, "error": str(exc)})
            known = [n.get("writable") for n in row["namesrvs"] if n.get("writable") is not None]
            row["writable"] = all(known) if known else None
            brokers.append(row)
    return {"namesrvAddrs": namesrvs, "brokers": brokers}


async def _write_perm(admin: Admin, body: dict[str, Any], wipe: bool) -> dict[str, Any]:
    broker_name = _field(body, "brokerName", str).strip()
    if not broker_name:
        raise ValueError("missing field 'brokerName'")
    request = admin.wipe_write_perm_of_broker if wipe else admin.add_write_perm_of_broker
    namesrvs = list(admin.instance.api.namesrv_addrs)
    counts = {ns: await request(ns, broker_name) for ns in namesrvs}
    return {"brokerName": broker_name, "namesrvs": counts, "brokers": [broker_name]}


async def wipe_write_perm(admin: Admin, body: dict[str, Any]) -> dict[str, Any]:
    """Take write permission from the broker in every name server's routes (``rmqadmin wipeWritePerm``)."""
    return await _write_perm(admin, body, wipe=True)


async def add_write_perm(admin: Admin, body: dict[str, Any]) -> dict[str, Any]:
    """Give the broker write permission back in every name server's routes (``rmqadmin addWritePerm``)."""
    return await _write_perm(admin, body, wipe=False)
