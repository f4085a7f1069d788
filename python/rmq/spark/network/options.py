"""Options of the network source (``nameServer`` given, no store path), as one picklable spec.

========================= ============================================================================
``nameServer``            name server addresses, ``host:port``, ``;``-separated (required)
``topics``                comma-separated topics to read, or
``topicPattern``          a regular expression: every topic the name server lists that it matches
                          whole (system topics such as ``%RETRY%...`` / ``RMQ_SYS_...`` excluded)
``startingOffsets``       ``earliest`` (batch default), ``latest`` (streaming default) or JSON
                          ``{"topic":{"broker":{"queueId":offset}}}`` (-2 earliest, -1 latest; queues
                          it does not name start at earliest)
``endingOffsets``         batch only: ``latest`` (default), ``earliest`` or JSON as above (queues it
                          does not name end at latest)
``startingTimestamp``     the first offset of each queue whose message was stored at or after this time
                          (epoch ms or ISO-8601, naive = UTC; RocketMQ's search-offset-by-time);
                          overrides startingOffsets
``endingTimestamp``       batch only: likewise the end of each queue
``minPartitions``         split long queue ranges until there are at least this many partitions
``maxOffsetsPerTrigger``  streaming: at most this many offsets (messages) per micro-batch, shared out
                          over the queues by their backlog
``minOffsetsPerTrigger``  streaming: wait for this many new offsets before a micro-batch, unless
``maxTriggerDelay``       streaming: ... this long has passed since the last one (default ``15m``;
                          ``500ms``, ``30s``, ``5m``, ``1h`` or plain milliseconds)
``failOnDataLoss``        ``true`` (default): an offset retention deleted before it was read is an error
                          naming topic, broker, queue and offsets; ``false`` skips it, logged and counted
``subExpression``         a filter the broker evaluates: tags (``TagA || TagB``, default ``*``) or SQL92
``expressionType``        ``TAG`` (default) or ``SQL92`` (the broker needs enablePropertyFilter=true)
``consumerGroup``         the group the pulls name; streaming commits each batch's end offsets to it
                          (UPDATE_CONSUMER_OFFSET), so ``consumerProgress`` shows the lag (default
                          ``rmq-spark-reader``, never committed to)
``accessKey``/``secretKey`` ACL credentials (``securityToken`` too, if the account has one)
``tls``                   ``true``: every connection is TLS; ``tlsCa`` (PEM CAs, the servers'
                          certificates are then checked; ``tlsVerify`` forces the check on or off),
                          ``tlsCert``/``tlsKey`` (this client's certificate, when the server asks)
``pullBatchSize``         messages asked for per pull request (default 32, at most 1024)
``pullTimeoutMs``         time for one request to answer (default 10000); also for a queue that stays
                          behind its planned end (a slave catching up) before the read fails
``columns``               as the store source, and ``broker_name``
``batchSize``             rows per Arrow batch (default 16384)
``checkCRC``/``decompress`` as the store source (checkCRC default false: the broker checked them)
========================= ============================================================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from rmq.spark.options import parse_time_ms

__all__ = [
    "DEFAULT_GROUP",
    "NETWORK_OPTIONS",
    "NetworkSpec",
    "OffsetSpec",
    "is_network",
    "parse_duration_ms",
    "parse_network_options",
]

DEFAULT_GROUP = "rmq-spark-reader"

NETWORK_OPTIONS = frozenset(
    {
        *("nameserver", "topics", "topicpattern", "startingoffsets", "endingoffsets"),
        *("startingtimestamp", "endingtimestamp", "minpartitions", "maxoffsetspertrigger"),
        *("minoffsetspertrigger", "maxtriggerdelay", "failondataloss", "subexpression"),
        *("expressiontype", "consumergroup", "accesskey", "secretkey", "securitytoken", "tls"),
        *("tlsca", "tlsverify", "tlscert", "tlskey", "pullbatchsize", "pulltimeoutms", "columns"),
        *("batchsize", "checkcrc", "decompress"),
    }
)
"""Options the network source takes (lower case)."""

OffsetSpec = str | dict[str, dict[str, dict[int, int]]]
"""``"earliest"``, ``"latest"`` or ``{topic: {broker: {queue id: offset}}}`` (-2 earliest, -1 latest)."""

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(frozen=True)
class NetworkSpec:
    """Everything the driver and the executors need to read a cluster."""

    name_servers: tuple[str, ...]
    topics: tuple[str, ...] | None = None
    topic_pattern: str | None = None
    starting: OffsetSpec = "earliest"
    starting_given: bool = False
    ending: OffsetSpec = "latest"
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    fail_on_data_loss: bool = True
    sub_expression: str = "*"
    expression_type: str = "TAG"
    consumer_group: str = DEFAULT_GROUP
    commit_group: bool = False
    access_key: str | None = None
    secret_key: str | None = None
    security_token: str | None = None
    tls: bool = False
    tls_ca: str | None = None
    tls_verify: bool | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    pull_batch_size: int = 32
    pull_timeout_ms: int = 10_000
    batch_rows: int = 16384
    check_crc: bool = False
    decompress: bool = True

    def describe(self) -> str:
        what = ",".join(self.topics) if self.topics is not None else f"/{self.topic_pattern}/"
        return f"{what} at {';'.join(self.name_servers)}"


def is_network(options: Mapping[str, Any]) -> bool:
    """Whether the options ask for the network source (a ``nameServer`` option)."""
    return any(str(k).lower() == "nameserver" for k in options)


def parse_duration_ms(text: str, key: str) -> int:
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"option {key} must be a duration such as 500ms, 30s, 5m or 1h, not {text!r}")
    return int(m.group(1)) * _UNIT_MS[(m.group(2) or "ms").lower()]


def _bool(text: str, key: str) -> bool:
    t = text.strip().lower()
    if t in ("true", "1", "yes"):
        return True
    if t in ("false", "0", "no"):
        return False
    raise ValueError(f"option {key} must be true or false, not {text!r}")


def _positive(o: dict[str, str], key: str, name: str, hi: int | None = None) -> int | None:
    if key not in o:
        return None
    try:
        n = int(o[key].strip())
    except ValueError:
        raise ValueError(f"option {name} must be a positive integer, not {o[key]!r}") from None
    if n <= 0 or (hi is not None and n > hi):
        bound = f" at most {hi}" if hi is not None else ""
        raise ValueError(f"option {name} must be a positive integer{bound}, not {o[key]!r}")
    return n


def _offsets(text: str, key: str) -> OffsetSpec:
    t = text.strip()
    if t.lower() in ("earliest", "latest"):
        return t.lower()
    try:
        data = orjson.loads(t)
    except orjson.JSONDecodeError as e:
        raise ValueError(
            f'option {key} must be earliest, latest or JSON {{"topic":{{"broker":{{"queueId":offset}}}}}},'
            f" not {text!r} ({e})"
        ) from None
    out: dict[str, dict[str, dict[int, int]]] = {}
    if not isinstance(data, dict):
        raise ValueError(f'option {key}: JSON must be {{"topic":{{"broker":{{"queueId":offset}}}}}}')
    for topic, brokers in data.items():
        if not isinstance(brokers, dict):
            raise ValueError(f"option {key}: topic {topic!r} must map broker names to queues")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise ValueError(f"option {key}: {topic}/{broker} must map queue ids to offsets")
            for qid, off in queues.items():
                if not str(qid).lstrip("-").isdigit() or int(qid) < 0:
                    raise ValueError(f"option {key}: {topic}/{broker}: {qid!r} is not a queue id")
                if isinstance(off, bool) or not isinstance(off, int) or off < -2:
                    raise ValueError(
                        f"option {key}: {topic}/{broker}/{qid}: {off!r} is not an offset"
                        " (-2 earliest, -1 latest)"
                    )
                out.setdefault(topic, {}).setdefault(broker, {})[int(qid)] = off
    return out


def _time(o: dict[str, str], key: str, name: str) -> int | None:
    if key not in o:
        return None
    try:
        return parse_time_ms(o[key])
    except ValueError:
        raise ValueError(f"option {name} must be epoch ms or ISO-8601, not {o[key]!r}") from None


def parse_network_options(options: Mapping[str, Any], streaming: bool = False) -> NetworkSpec:
    """The spec of a network read (see the module doc); a ValueError names the option at fault."""
    o = {str(k).lower(): str(v) for k, v in options.items()}
    if o.get("path") or o.get("paths"):
        raise ValueError(
            "option nameServer reads over the network and a store path reads the files: give one of them"
        )
    o.pop("path", None)
    o.pop("paths", None)
    unknown = sorted(set(o) - NETWORK_OPTIONS)
    if unknown:
        raise ValueError(
            f"unknown rocketmq option(s) for the network source: {', '.join(unknown)}"
            f" (options: {', '.join(sorted(NETWORK_OPTIONS))})"
        )
    servers = tuple(a.strip() for a in o.get("nameserver", "").split(";") if a.strip())
    if not servers:
        raise ValueError("option nameServer is empty: give host:port[;host:port...]")
    for a in servers:
        host, sep, port = a.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"option nameServer: {a!r} is not host:port")
    if ("topics" in o) == ("topicpattern" in o):
        raise ValueError("give exactly one of the options topics and topicPattern")
    topics = None
    pattern = None
    if "topics" in o:
        topics = tuple(dict.fromkeys(t.strip() for t in o["topics"].split(",") if t.strip()))
        if not topics:
            raise ValueError("option topics is empty")
    else:
        pattern = o["topicpattern"]
        try:
            re.compile(pattern)
        except re.error as e:
            raise ValueError(f"option topicPattern is not a regular expression: {e}") from None
    if streaming and ("endingoffsets" in o or "endingtimestamp" in o):
        raise ValueError("options endingOffsets / endingTimestamp are for batch reads; a stream has no end")
    expression_type = o.get("expressiontype", "TAG").strip().upper()
    if expression_type not in ("TAG", "SQL92"):
        raise ValueError(f"option expressionType must be TAG or SQL92, not {o['expressiontype']!r}")
    sub = o.get("subexpression", "*").strip() or "*"
    if expression_type == "SQL92" and sub == "*":
        raise ValueError("option expressionType=SQL92 needs a subExpression")
    access, secret = o.get("accesskey"), o.get("secretkey")
    if bool(access) != bool(secret):
        raise ValueError("options accessKey and secretKey go together")
    group = o.get("consumergroup", "").strip()
    delay = parse_duration_ms(o["maxtriggerdelay"], "maxTriggerDelay") if "maxtriggerdelay" in o else None
    if delay is not None and "minoffsetspertrigger" not in o:
        raise ValueError("option maxTriggerDelay needs minOffsetsPerTrigger")
    return NetworkSpec(
        name_servers=servers,
        topics=topics,
        topic_pattern=pattern,
        starting=_offsets(o["startingoffsets"], "startingOffsets")
        if "startingoffsets" in o
        else ("latest" if streaming else "earliest"),
        starting_given="startingoffsets" in o,
        ending=_offsets(o["endingoffsets"], "endingOffsets") if "endingoffsets" in o else "latest",
        starting_timestamp=_time(o, "startingtimestamp", "startingTimestamp"),
        ending_timestamp=_time(o, "endingtimestamp", "endingTimestamp"),
        min_partitions=_positive(o, "minpartitions", "minPartitions"),
        max_offsets_per_trigger=_positive(o, "maxoffsetspertrigger", "maxOffsetsPerTrigger"),
        min_offsets_per_trigger=_positive(o, "minoffsetspertrigger", "minOffsetsPerTrigger"),
        max_trigger_delay_ms=delay if delay is not None else 15 * 60_000,
        fail_on_data_loss=_bool(o.get("failondataloss", "true"), "failOnDataLoss"),
        sub_expression=sub,
        expression_type=expression_type,
        consumer_group=group or DEFAULT_GROUP,
        commit_group=bool(group),
        access_key=access or None,
        secret_key=secret or None,
        security_token=o.get("securitytoken") or None,
        tls=_bool(o.get("tls", "false"), "tls"),
        tls_ca=o.get("tlsca") or None,
        tls_verify=_bool(o["tlsverify"], "tlsVerify") if "tlsverify" in o else None,
        tls_cert=o.get("tlscert") or None,
        tls_key=o.get("tlskey") or None,
        pull_batch_size=_positive(o, "pullbatchsize", "pullBatchSize", 1024) or 32,
        pull_timeout_ms=_positive(o, "pulltimeoutms", "pullTimeoutMs") or 10_000,
        batch_rows=_positive(o, "batchsize", "batchSize") or 16384,
        check_crc=_bool(o.get("checkcrc", "false"), "checkCRC"),
        decompress=_bool(o.get("decompress", "true"), "decompress"),
    )
