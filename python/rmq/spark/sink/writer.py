"""The batch and streaming writers of the ``rocketmq`` format (see :mod:`rmq.spark.sink`)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from rmq.spark.sink.columnar import columnar, send_columnar
from rmq.spark.sink.columns import SinkColumnError, SinkColumns, rows_of
from rmq.spark.sink.commit import (
    ROLLBACK,
    TaskCommit,
    half_maker,
    read_record,
    record_of,
    state_in,
    write_record,
)
from rmq.spark.sink.options import SinkOptions, parse_sink_options
from rmq.spark.sink.send import Sent, end_halves, plain, producer_for, send_rows

__all__ = ["RocketMQStreamWriter", "RocketMQWriter"]

log = logging.getLogger(__name__)

BATCH_ID_PROPERTY = "streaming.sql.batchId"
"""The local property Spark's micro-batch execution gives every task of a batch."""


def _prepare(
    options: dict[str, str], schema: StructType, overwrite: bool, streaming: bool
) -> tuple[SinkOptions, SinkColumns]:
    if overwrite:
        raise SinkColumnError("rocketmq sink: a topic can only be appended to; use mode('append')")
    opts = parse_sink_options(options, streaming)
    cols = SinkColumns.check(schema, opts.topic)
    if opts.exactly_once and ("delay_level" in cols.names or "deliver_time_ms" in cols.names):
        raise SinkColumnError(
            "rocketmq sink: columns 'delay_level' and 'deliver_time_ms' cannot be used with"
            " deliveryGuarantee=exactly_once (RocketMQ does not delay transactional messages)"
        )
    return opts, cols


def _write(
    opts: SinkOptions, cols: SinkColumns, batches: Iterator[pa.RecordBatch], batch_id: int | None
) -> TaskCommit:
    token = uuid.uuid4().hex
    if (
        opts.sink_dir is not None
        and batch_id is not None
        and read_record(opts.sink_dir, batch_id) is not None
    ):
        # A re-run of a batch the sink committed before the driver died: its rows are in the topic.
        skipped = sum(b.num_rows for b in batches)
        log.info(
            "rocketmq sink: batch %d was committed before; its %d rows are not sent again", batch_id, skipped
        )
        return TaskCommit(token, batch_id, 0, skipped=True)
    producer = producer_for(opts)
    sent = Sent(tries={}, halves=[] if opts.exactly_once else None)
    make = (
        half_maker(opts.producer_group, opts.sink_dir, batch_id, token, opts.check_immunity_s)
        if opts.exactly_once
        else plain
    )
    try:
        if columnar(opts, cols):
            for batch in batches:
                send_columnar(producer, opts, cols, batch, sent)
        else:
            for rows in rows_of(cols, batches):
                send_rows(producer, opts, rows, make, sent)
    except BaseException:
        if sent.halves:
            # A failed task attempt is never in a commit record: its halves can only be rolled back.
            log.warning("rocketmq sink: task failed; rolling back its %d half messages", len(sent.halves))
            end_halves(producer, [(h, ROLLBACK) for h in sent.halves])
        raise
    return TaskCommit(token, batch_id, sent.rows, sent.tries or {}, sent.halves or [])


def _commits(messages: list[WriterCommitMessage | None]) -> list[TaskCommit]:
    return [m for m in messages if isinstance(m, TaskCommit)]


def _finish(opts: SinkOptions, commits: list[TaskCommit], batch_id: int | None, abort: bool) -> None:
    """Decide every half of the tasks' commits by the commit protocol and tell the brokers."""
    if not opts.exactly_once:
        return
    if opts.sink_dir is not None and batch_id is not None:
        if not abort and not write_record(opts.sink_dir, batch_id, record_of(commits)):
            log.warning(
                "rocketmq sink: batch %d has a commit record already; it stays the decision", batch_id
            )
        record = read_record(opts.sink_dir, batch_id)
    else:
        record = None if abort else {"tasks": record_of(commits)}  # a batch job: its commit decides
    ends = [
        (h, ROLLBACK if record is None else state_in(record, c.token, h.seq, h.attempt))
        for c in commits
        for h in c.halves
    ]
    if ends:
        end_halves(producer_for(opts), ends)
    states = [s.name for _h, s in ends]
    log.info(
        "rocketmq sink: batch %s %s: %d half messages, %d committed, %d rolled back",
        batch_id,
        "aborted" if abort else "committed",
        len(ends),
        states.count("COMMIT_MESSAGE"),
        states.count("ROLLBACK_MESSAGE"),
    )


class RocketMQWriter(DataSourceArrowWriter):
    """``df.write.format("rocketmq")``: each task sends its rows; with exactly-once the job's commit
    commits their half messages and its abort rolls them back."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        self.opts, self.cols = _prepare(options, schema, overwrite, streaming=False)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:  # type: ignore[override]
        return _write(self.opts, self.cols, iterator, None)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        _finish(self.opts, _commits(messages), None, abort=False)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        _finish(self.opts, _commits(messages), None, abort=True)


class RocketMQStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("rocketmq")``: per micro-batch as :class:`RocketMQWriter`; with
    exactly-once the batch's commit record in the checkpoint decides (:mod:`rmq.spark.sink.commit`)."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        self.opts, self.cols = _prepare(options, schema, overwrite, streaming=True)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:  # type: ignore[override]
        batch_id = None
        ctx = TaskContext.get()
        raw = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
        if raw is not None:
            batch_id = int(raw)
        elif self.opts.exactly_once:
            raise RuntimeError(
                "rocketmq sink: exactly_once needs Spark's micro-batch id in the task"
                f" ({BATCH_ID_PROPERTY}); continuous processing is not supported"
            )
        return _write(self.opts, self.cols, iterator, batch_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        _finish(self.opts, _commits(messages), batchId, abort=False)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        _finish(self.opts, _commits(messages), batchId, abort=True)
