"""Sink options, parsed once on the driver into one picklable :class:`SinkOptions`.

Options (case-insensitive):

=========================== ===========================================================================
``nameServer``              ``host:port;host:port`` of the name servers (required)
``topic``                   the topic of every row when the DataFrame has no ``topic`` column
``producerGroup``           the producer group (default ``rmq_spark_sink``; exactly-once: a batch write
                            ``rmq_spark_sink_eos``, a streaming query ``rmq_spark_eos_<id of the
                            checkpoint>``, so the broker's transaction checks reach its producers)
``deliveryGuarantee``       ``at_least_once`` (default) or ``exactly_once`` (transactional messages)
``sendTimeoutMs``           budget of one send including its retries (default 3000)
``retries``                 sends of a row after the first fails (default 2): another broker when the
                            row names no queue, the same queue when it does
``maxInFlight``             rows a task has in flight at once (default 256; rows that name a queue or a
                            sharding key go one at a time, in row order)
``batchSize``               at-least-once: rows that name no queue go as RocketMQ batches of up to this
                            many messages of one topic (default 128; 1: one message per send); exactly-once
                            sends each row alone (transactional messages are not batched)
``accessKey``/``secretKey`` ACL account; every request is signed (``securityToken`` optional)
``tls``                     ``true``: TLS to name servers and brokers; ``tlsCa``, ``tlsVerify``,
                            ``tlsCert``, ``tlsKey`` as :class:`rmq.client.config.ClientConfig`
``checkImmunitySec``        exactly-once: seconds the broker waits before it first asks about a half
                            message (``CHECK_IMMUNITY_TIME_IN_SECONDS``; default 60): a batch that runs
                            longer is asked about while running (answered UNKNOW), and its commit then
                            becomes visible only at the broker's next check
``checkpointLocation``      a streaming query's checkpoint (Spark passes it); exactly-once keeps its
                            commit records in ``<checkpointLocation>/rocketmq-sink/``
=========================== ===========================================================================
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from urllib.parse import urlparse

from rmq.client.config import ClientConfig

__all__ = ["DeliveryGuarantee", "SinkOptionError", "SinkOptions", "parse_sink_options"]


class SinkOptionError(ValueError):
    """A sink option is missing, unknown or malformed; the message names it."""


class DeliveryGuarantee(Enum):
    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


DEFAULT_GROUP = "rmq_spark_sink"
SINK_DIR = "rocketmq-sink"

_KNOWN = {
    "nameserver",
    "topic",
    "producergroup",
    "deliveryguarantee",
    "sendtimeoutms",
    "retries",
    "maxinflight",
    "batchsize",
    "accesskey",
    "secretkey",
    "securitytoken",
    "tls",
    "tlsca",
    "tlsverify",
    "tlscert",
    "tlskey",
    "checkpointlocation",
    "checkimmunitysec",
    "path",
}


@dataclass(frozen=True)
class SinkOptions:
    name_server: str
    topic: str | None
    producer_group: str
    guarantee: DeliveryGuarantee
    send_timeout_ms: int
    retries: int
    max_in_flight: int
    batch_size: int
    check_immunity_s: int
    client: ClientConfig
    sink_dir: str | None
    """Exactly-once streaming: the directory of this query's commit records (absolute, local path)."""

    @property
    def exactly_once(self) -> bool:
        return self.guarantee is DeliveryGuarantee.EXACTLY_ONCE


def _int(opts: Mapping[str, str], key: str, name: str, default: int, low: int) -> int:
    raw = opts.get(key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SinkOptionError(f"rocketmq sink option {name}={raw!r} is not an integer") from None
    if value < low:
        raise SinkOptionError(f"rocketmq sink option {name}={value} must be at least {low}")
    return value


def _bool(opts: Mapping[str, str], key: str, name: str) -> bool | None:
    raw = opts.get(key)
    if raw is None:
        return None
    if raw.strip().lower() in ("true", "1", "yes"):
        return True
    if raw.strip().lower() in ("false", "0", "no"):
        return False
    raise SinkOptionError(f"rocketmq sink option {name}={raw!r} is not true or false")


def checkpoint_dir(location: str) -> str:
    """The local path of a checkpoint location (a plain path or a ``file:`` URI)."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        path = parsed.path if parsed.scheme else location
        return os.path.abspath(path)
    raise SinkOptionError(
        f"rocketmq sink: deliveryGuarantee=exactly_once keeps its commit records beside the checkpoint, which"
        f" must be a path every executor mounts (a plain path or file: URI), not {location!r}"
    )


def parse_sink_options(options: Mapping[str, str], streaming: bool) -> SinkOptions:
    opts = {k.lower(): v for k, v in options.items()}
    unknown = sorted(k for k in options if k.lower() not in _KNOWN)
    if unknown:
        raise SinkOptionError(f"unknown rocketmq sink option(s): {', '.join(unknown)}")
    name_server = (opts.get("nameserver") or "").strip()
    if not name_server:
        raise SinkOptionError(
            "rocketmq sink: option nameServer is required (host:port of the name servers, ';'-separated)"
        )
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise SinkOptionError("rocketmq sink option topic is empty")
    raw_guarantee = (opts.get("deliveryguarantee") or "at_least_once").strip().lower()
    try:
        guarantee = DeliveryGuarantee(raw_guarantee)
    except ValueError:
        raise SinkOptionError(
            f"rocketmq sink option deliveryGuarantee={raw_guarantee!r}: use at_least_once or exactly_once"
        ) from None
    sink_dir = None
    if guarantee is DeliveryGuarantee.EXACTLY_ONCE and streaming:
        location = opts.get("checkpointlocation")
        if not location:
            raise SinkOptionError(
                "rocketmq sink: deliveryGuarantee=exactly_once in a streaming query needs"
                " .option('checkpointLocation', <path every executor mounts>) on writeStream"
            )
        sink_dir = os.path.join(checkpoint_dir(location), SINK_DIR)
    group = opts.get("producergroup")
    if not group:
        if sink_dir is not None:
            group = f"rmq_spark_eos_{hashlib.sha1(sink_dir.encode()).hexdigest()[:16]}"
        elif guarantee is DeliveryGuarantee.EXACTLY_ONCE:
            group = f"{DEFAULT_GROUP}_eos"  # transactional: not the plain producers' group
        else:
            group = DEFAULT_GROUP
    access_key, secret_key = opts.get("accesskey"), opts.get("secretkey")
    if bool(access_key) != bool(secret_key):
        raise SinkOptionError("rocketmq sink: options accessKey and secretKey go together")
    client = ClientConfig(
        namesrv_addr=name_server,
        access_key=access_key,
        secret_key=secret_key,
        security_token=opts.get("securitytoken"),
        tls=bool(_bool(opts, "tls", "tls")),
        tls_ca=opts.get("tlsca"),
        tls_verify=_bool(opts, "tlsverify", "tlsVerify"),
        tls_cert=opts.get("tlscert"),
        tls_key=opts.get("tlskey"),
    )
    return SinkOptions(
        name_server=name_server,
        topic=topic.strip() if topic else None,
        producer_group=group,
        guarantee=guarantee,
        send_timeout_ms=_int(opts, "sendtimeoutms", "sendTimeoutMs", 3000, 1),
        retries=_int(opts, "retries", "retries", 2, 0),
        max_in_flight=_int(opts, "maxinflight", "maxInFlight", 256, 1),
        batch_size=_int(opts, "batchsize", "batchSize", 128, 1),
        check_immunity_s=_int(opts, "checkimmunitysec", "checkImmunitySec", 60, 0),
        client=client,
        sink_dir=sink_dir,
    )
