"""Sending a task's rows: one producer per process and sink configuration, kept between tasks (a Python
worker runs many tasks, and a live producer of an exactly-once sink's group is what the broker's
transaction check-back reaches), and the send loop with its retries.

Rows that name no queue go ``maxInFlight`` at a time; rows with ``queue_id`` or ``sharding_key`` go one
at a time in row order (a retry goes to the same queue before the next row), so each queue gets its rows
in the order of the task's input. At-least-once rows that name no queue go as RocketMQ batches of up to
``batchSize`` messages of one topic (at most ``BATCH_BYTES`` of bodies and properties; a row with a delay
level or a delivery time goes alone, as RocketMQ batches cannot carry them); a batch is sent again whole
after a failed send, which at-least-once allows. Exactly-once rows go one at a time: each is its own
transactional half message, which RocketMQ does not batch. A row (or batch) that cannot be sent after
``1 + retries`` sends fails the task: no row is dropped. Broker refusals that another send would not
change (no permission, no such topic, illegal message) fail at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from rmq._store import decode_offset_msg_id
from rmq.client import sync
from rmq.client.errors import MessageIllegalError, MQBrokerError, MQClientError, TopicNotExistError
from rmq.client.message import Message, MessageQueue
from rmq.client.producer.producer import Producer
from rmq.client.producer.selector import java_hash_code
from rmq.client.producer.transaction import LocalTransactionState
from rmq.client.results import SendResult
from rmq.common.codes import ResponseCode
from rmq.remoting import RemotingError
from rmq.spark.sink.columns import OutRow, SinkColumnError
from rmq.spark.sink.commit import CheckListener, Half, MakeMessage
from rmq.spark.sink.options import SinkOptions

__all__ = [
    "Sent",
    "SinkSendError",
    "SinkTopicError",
    "end_halves",
    "plain",
    "producer_for",
    "queues_of",
    "send_rows",
    "with_retries",
]

log = logging.getLogger(__name__)

T = TypeVar("T")


class SinkSendError(RuntimeError):
    """A row could not be sent (after its retries); the message names the topic and the cause."""


class SinkTopicError(SinkSendError):
    """The topic is unknown to the name servers, or they cannot be reached."""


_RETRYABLE = frozenset(
    int(c) for c in (ResponseCode.SYSTEM_ERROR, ResponseCode.SYSTEM_BUSY, ResponseCode.SERVICE_NOT_AVAILABLE)
)

BATCH_BYTES = 1 << 20
"""A batch's bodies and properties at most (the broker's ``maxMessageSize``, 4 MiB by default, bounds a
batch's whole body)."""

_lock = threading.Lock()
_producers: dict[tuple[str, str], sync.Producer] = {}
_topics: dict[tuple[str, str], list[MessageQueue]] = {}


def _instance_name(opts: SinkOptions) -> str:
    """One client instance per process and cluster + credentials (an instance talks to one name-server
    list with one set of credentials)."""
    ident = repr((opts.name_server, opts.client.credentials_id())).encode()
    return f"rmq-spark-sink-{os.getpid()}-{hashlib.sha1(ident).hexdigest()[:10]}"


def producer_for(opts: SinkOptions) -> sync.Producer:
    """This process's running producer for `opts` (transactional, answering checks, for exactly-once)."""
    name = _instance_name(opts)
    key = (name, opts.producer_group)
    with _lock:
        producer = _producers.get(key)
        if producer is not None:
            return producer
        config = opts.client.copy(instance_name=name)
        common = {
            "client_config": config,
            "send_msg_timeout_ms": opts.send_timeout_ms,
            "retry_times_when_send_failed": 0,  # the sink's loop retries (and tells sends apart)
            "retry_times_when_send_async_failed": 0,
        }
        if opts.exactly_once:
            producer = sync.TransactionProducer(opts.producer_group, CheckListener(), **common)
        else:
            producer = sync.Producer(opts.producer_group, **common)
        producer.start()
        _producers[key] = producer
        return producer


async def queues_of(producer: Producer, opts: SinkOptions, topic: str) -> list[MessageQueue]:
    """The writable queues of `topic` (ordered by broker name, then queue id); a clear error when the
    topic does not exist or the name servers cannot be reached."""
    key = (producer.client_config.instance_name, topic)
    queues = _topics.get(key)
    if queues is not None:
        return queues
    instance = producer.instance
    try:
        await instance.api.get_route(topic, opts.send_timeout_ms)
    except TopicNotExistError:
        raise SinkTopicError(
            f"rocketmq sink: topic {topic!r} does not exist on the cluster of name server {opts.name_server}"
            " (create it first, e.g. rmqadmin updateTopic)"
        ) from None
    except (RemotingError, MQClientError, OSError) as exc:
        raise SinkTopicError(
            f"rocketmq sink: cannot get the route of topic {topic!r} from name server {opts.name_server}"
            f" (option nameServer): {exc}"
        ) from exc
    queues = await producer.fetch_publish_message_queues(topic)
    if not queues:
        raise SinkTopicError(f"rocketmq sink: topic {topic!r} has no writable queue on a live master")
    _topics[key] = queues
    return queues


@dataclass(slots=True)
class Sent:
    """The rows of a task sent so far: which try of which row was stored, and the halves."""

    rows: int = 0
    tries: dict[int, int] | None = None
    halves: list[Half] | None = None


async def _target(producer: Producer, opts: SinkOptions, row: OutRow, seq: int) -> MessageQueue | None:
    topic = row.message.topic
    if row.queue_id is None and row.sharding_key is None:
        await queues_of(producer, opts, topic)
        return None
    queues = await queues_of(producer, opts, topic)
    if row.sharding_key is not None:
        return queues[abs(java_hash_code(row.sharding_key)) % len(queues)]
    assert row.queue_id is not None
    if row.broker_name is not None:
        mine = [q for q in queues if q.broker_name == row.broker_name]
        if not mine:
            raise SinkColumnError(
                f"rocketmq sink: row {seq}: topic {topic!r} has no writable queue"
                f" on broker {row.broker_name!r}"
            )
        queues = mine
    if row.queue_id >= len(queues):
        raise SinkColumnError(
            f"rocketmq sink: row {seq}: queue_id {row.queue_id} but topic {topic!r} has {len(queues)}"
            " writable queues" + (f" on broker {row.broker_name!r}" if row.broker_name else "")
        )
    return queues[row.queue_id]


async def with_retries(
    opts: SinkOptions, topic: str, what: str, send: Callable[[int], Awaitable[T]]
) -> tuple[T, int]:
    """``send(attempt)`` until it succeeds, at most ``1 + retries`` times; `what` ("row 5", "a batch of
    rows 0..31") names it in the errors. A refusal another send would not change fails at once."""
    last: BaseException | None = None
    for attempt in range(1 + opts.retries):
        try:
            return await send(attempt), attempt
        except MQBrokerError as exc:
            if exc.code not in _RETRYABLE:
                raise SinkSendError(
                    f"rocketmq sink: the broker refused {what} for topic {topic!r}: {exc}"
                ) from exc
            last = exc
        except MessageIllegalError as exc:
            raise SinkSendError(f"rocketmq sink: {what} for topic {topic!r}: {exc}") from exc
        except (TimeoutError, RemotingError, MQClientError, OSError) as exc:
            last = exc
        log.warning("rocketmq sink: send %d of %s to topic %s failed: %s", attempt + 1, what, topic, last)
    raise SinkSendError(
        f"rocketmq sink: {what} for topic {topic!r} not sent after {1 + opts.retries} sends"
        f" (option retries): {last}"
    ) from last


async def _send_one(
    producer: Producer, opts: SinkOptions, row: OutRow, seq: int, make: MakeMessage
) -> tuple[SendResult, int]:
    mq = await _target(producer, opts, row, seq)

    def send(attempt: int) -> Awaitable[SendResult]:
        return producer.send(make(row.message, seq, attempt), mq=mq)

    return await with_retries(opts, row.message.topic, f"row {seq}", send)


def _batchable(row: OutRow) -> bool:
    m = row.message
    return m.delay_time_level <= 0 and not m.is_timer_message


def _size(msg: Message) -> int:
    return len(msg.body) + sum(len(k) + len(v) + 2 for k, v in msg.properties.items())


def _batches(rows: list[OutRow], first_seq: int, most: int) -> list[tuple[int, list[OutRow]]]:
    """Consecutive rows of one topic grouped into batches of up to `most` rows and ``BATCH_BYTES``, each
    with the sequence number of its first row; a row that cannot be batched (or is bigger than
    ``BATCH_BYTES``) is a batch of its own."""
    out: list[tuple[int, list[OutRow]]] = []
    cur: list[OutRow] = []
    cur_bytes = 0
    start = first_seq
    for i, row in enumerate(rows):
        size = _size(row.message)
        alone = not _batchable(row) or size > BATCH_BYTES
        if cur and (
            alone
            or len(cur) >= most
            or cur_bytes + size > BATCH_BYTES
            or row.message.topic != cur[0].message.topic
        ):
            out.append((start, cur))
            cur, cur_bytes = [], 0
        if not cur:
            start = first_seq + i
        cur.append(row)
        cur_bytes += size
        if alone:
            out.append((start, cur))
            cur, cur_bytes = [], 0
    if cur:
        out.append((start, cur))
    return out


async def _send_batch(producer: Producer, opts: SinkOptions, rows: list[OutRow], first: int) -> None:
    """At-least-once: `rows` (one topic, batchable) as one RocketMQ batch, sent again whole on failure."""
    topic = rows[0].message.topic
    await queues_of(producer, opts, topic)  # a clear error for an unknown topic
    messages = [r.message for r in rows]

    def send(_attempt: int) -> Awaitable[SendResult]:
        return producer.send(messages)

    await with_retries(opts, topic, f"a batch of rows {first}..{first + len(rows) - 1}", send)


async def all_or_cancel(sends: Iterable[Coroutine[Any, Any, None]]) -> None:
    """Run `sends` concurrently and wait for every one; when one raises, cancel the others (none keeps
    sending rows after the task failed) and raise its error."""
    tasks = [asyncio.ensure_future(s) for s in sends]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()


async def _send_batches(producer: Producer, opts: SinkOptions, rows: list[OutRow], first_seq: int) -> None:
    batches = _batches(rows, first_seq, opts.batch_size)
    gate = asyncio.Semaphore(max(1, opts.max_in_flight // opts.batch_size))

    async def one(first: int, batch: list[OutRow]) -> None:
        async with gate:
            if len(batch) == 1:
                await _send_one(producer, opts, batch[0], first, plain)
            else:
                await _send_batch(producer, opts, batch, first)

    await all_or_cancel(one(first, b) for first, b in batches)


async def _send_rows(
    producer: Producer, opts: SinkOptions, rows: list[OutRow], first_seq: int, make: MakeMessage, sent: Sent
) -> None:
    def record(seq: int, result: SendResult, attempt: int) -> None:
        if attempt and sent.tries is not None:
            sent.tries[seq] = attempt
        if sent.halves is not None:
            mq = result.message_queue
            sent.halves.append(
                Half(
                    mq.topic,
                    mq.broker_name,
                    mq.queue_id,
                    result.queue_offset,
                    decode_offset_msg_id(result.offset_msg_id)[1],
                    result.msg_id,
                    result.transaction_id,
                    seq,
                    attempt,
                )
            )

    ordered = [r.queue_id is not None or r.sharding_key is not None for r in rows]
    if make is plain and opts.batch_size > 1 and not any(ordered):
        await _send_batches(producer, opts, rows, first_seq)
        return
    if any(ordered):
        for i, row in enumerate(rows):
            result, attempt = await _send_one(producer, opts, row, first_seq + i, make)
            record(first_seq + i, result, attempt)
        return
    gate = asyncio.Semaphore(opts.max_in_flight)

    async def one(i: int, row: OutRow) -> None:
        async with gate:
            result, attempt = await _send_one(producer, opts, row, first_seq + i, make)
        record(first_seq + i, result, attempt)

    await all_or_cancel(one(i, r) for i, r in enumerate(rows))


def send_rows(
    producer: sync.Producer, opts: SinkOptions, rows: list[OutRow], make: MakeMessage, sent: Sent
) -> None:
    """Send `rows` (the next rows of the task), blocking until each is stored; raises if one cannot be."""
    impl: Producer = producer.impl
    sync.run(_send_rows(impl, opts, rows, sent.rows, make, sent))
    sent.rows += len(rows)


def plain(msg: Message, seq: int, attempt: int) -> Message:
    """At-least-once: every try sends the row's message as it is."""
    return msg


async def _end(producer: Producer, ends: list[tuple[Half, LocalTransactionState]]) -> None:
    instance = producer.instance
    used: set[str] = set()
    for half, state in ends:
        if state is LocalTransactionState.UNKNOW:
            continue
        addr = await instance.master_addr(MessageQueue(half.topic, half.broker_name, half.queue_id))
        await instance.api.end_transaction(
            addr,
            producer_group=producer.group,
            tran_state_table_offset=half.table_offset,
            commit_log_offset=half.commit_log_offset,
            commit_or_rollback=state.value,
            msg_id=half.msg_id,
            transaction_id=half.transaction_id,
            from_transaction_check=False,
            broker_name=half.broker_name,
        )
        used.add(addr)
    # One-way requests are only handed to the connection; a request that waits for its answer on the same
    # connection (a heartbeat) returns after they have left this process, which may exit right after.
    data = instance.heartbeat_data()
    for addr in used:
        try:
            await instance.api.heartbeat(addr, data, producer.send_msg_timeout_ms)
        except (RemotingError, MQClientError) as exc:
            log.warning("rocketmq sink: broker %s did not answer after END_TRANSACTION: %s", addr, exc)


def end_halves(producer: sync.Producer, ends: list[tuple[Half, LocalTransactionState]]) -> None:
    """END_TRANSACTION (oneway, as the Java producer sends it) for each half with its decided state.
    One that is lost leaves its half to the broker's check-back, which reaches the same decision."""
    impl: Producer = producer.impl
    sync.run(_end(impl, ends))
