"""The exactly-once commit protocol: what a half message carries, the commit record that decides a batch,
and the one :func:`decide` that both the driver and the broker's transaction check-back go by.

How a streaming batch goes (``deliveryGuarantee=exactly_once``):

1. Each task sends its rows as transactional half messages (``TRAN_MSG=true``, nothing visible yet).
   Every half carries ``RMQ_SPARK_SINK`` (the sink directory, ``<checkpoint>/rocketmq-sink``),
   ``RMQ_SPARK_BATCH`` (Spark's batch id), ``RMQ_SPARK_TASK`` (a token unique to this task attempt),
   ``RMQ_SPARK_SEQ`` (the row's index in the task) and ``RMQ_SPARK_TRY`` (which send of the row: a send
   that failed and was sent again may still have been stored, so each send is told apart). The task
   returns a :class:`TaskCommit`: its token, how many rows, which rows needed which try, and every half
   stored (broker, offsets, ids).
2. The driver's ``commit(messages, batchId)`` writes the **commit record**
   ``<sink dir>/commits/<batchId>`` (JSON: token -> rows and tries), created atomically and never
   overwritten: that file is the decision. Then it sends END_TRANSACTION COMMIT for every half listed.
3. A half is committed iff the record of its batch exists and lists its token, row and try
   (:func:`decide`); a half of a batch with a record that does not list it is rolled back; a half of a
   batch without a record yet is UNKNOW (the batch may still be running; the broker asks again).

Spark writes its own commit log (``<checkpoint>/commits/<batchId>``) only *after* the sink's commit
returns, so a driver that dies between the two re-runs the batch with the same id on restart. The
re-run finds the sink's record: its tasks send nothing and its commit does nothing (the first run's
halves are committed: by the driver before it died, or by the check-back, which reads the record). A
driver that dies before the record was written leaves halves nobody lists; the re-run sends the rows
again under new tokens and writes the record, and from then on the check-back rolls the orphans back.

Batch (non-streaming) writes have no checkpoint: the halves carry no batch, the job's commit (or
abort) is the decision, and a check-back answers UNKNOW (see the README for what that leaves).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from rmq.client.message import Message
from rmq.client.producer.transaction import LocalTransactionState
from rmq.common.codes import MessageConst

__all__ = [
    "PROP_BATCH",
    "PROP_SEQ",
    "PROP_SINK",
    "PROP_TASK",
    "PROP_TRY",
    "CheckListener",
    "Half",
    "MakeMessage",
    "TaskCommit",
    "committed_in",
    "decide",
    "half_maker",
    "read_record",
    "record_of",
    "state_in",
    "write_record",
]

log = logging.getLogger(__name__)

PROP_SINK = "RMQ_SPARK_SINK"
PROP_BATCH = "RMQ_SPARK_BATCH"
PROP_TASK = "RMQ_SPARK_TASK"
PROP_SEQ = "RMQ_SPARK_SEQ"
PROP_TRY = "RMQ_SPARK_TRY"

COMMITS = "commits"

COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW


@dataclass(frozen=True, slots=True)
class Half:
    """One stored half message: what END_TRANSACTION needs to name it."""

    topic: str
    broker_name: str
    queue_id: int
    table_offset: int
    commit_log_offset: int
    msg_id: str
    transaction_id: str | None
    seq: int
    attempt: int


@dataclass
class TaskCommit(WriterCommitMessage):
    """What one task sent: ``rows`` rows under ``token``; ``tries`` names the rows whose stored send was
    not the first (row -> try); ``halves`` the half messages (exactly-once only)."""

    token: str
    batch_id: int | None
    rows: int
    tries: dict[int, int] = field(default_factory=dict)
    halves: list[Half] = field(default_factory=list)
    skipped: bool = False
    """A re-run of a batch the sink had already committed: nothing was sent."""


def _record_path(sink_dir: str, batch_id: int) -> str:
    return os.path.join(sink_dir, COMMITS, str(batch_id))


def record_of(commits: Iterable[TaskCommit]) -> dict[str, Any]:
    """The commit record of a batch whose tasks returned `commits`."""
    return {
        c.token: {"rows": c.rows, "tries": {str(k): v for k, v in c.tries.items()}}
        for c in commits
        if not c.skipped
    }


def read_record(sink_dir: str, batch_id: int) -> dict[str, Any] | None:
    """The commit record of `batch_id`, or None when the batch is not committed (yet)."""
    try:
        with open(_record_path(sink_dir, batch_id), encoding="utf-8") as f:
            record: dict[str, Any] = json.load(f)
    except FileNotFoundError:
        return None
    return record


def write_record(sink_dir: str, batch_id: int, record: Mapping[str, Any]) -> bool:
    """Create the commit record of `batch_id` atomically (fsynced, then linked into place). False, and
    nothing written, when the batch already has one: the first record stays the decision."""
    directory = os.path.join(sink_dir, COMMITS)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{batch_id}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"tasks": record}, f)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, _record_path(sink_dir, batch_id))
        except FileExistsError:
            return False
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        return True
    finally:
        os.unlink(tmp)


def committed_in(record: Mapping[str, Any], token: str, seq: int, attempt: int) -> bool:
    """Whether the record lists the send `attempt` of row `seq` of task `token`."""
    task = record.get("tasks", {}).get(token)
    if task is None or not 0 <= seq < int(task["rows"]):
        return False
    return int(task["tries"].get(str(seq), 0)) == attempt


def state_in(record: Mapping[str, Any] | None, token: str, seq: int, attempt: int) -> LocalTransactionState:
    """The rule: no record yet -> UNKNOW; listed in the record -> COMMIT; else ROLLBACK."""
    if record is None:
        return UNKNOW
    return COMMIT if committed_in(record, token, seq, attempt) else ROLLBACK


def decide(props: Mapping[str, str]) -> LocalTransactionState:
    """The state of a half message, from its properties and the commit record of its batch."""
    sink_dir, batch = props.get(PROP_SINK), props.get(PROP_BATCH)
    token, seq, attempt = props.get(PROP_TASK), props.get(PROP_SEQ), props.get(PROP_TRY)
    if not sink_dir or batch is None or token is None or seq is None or attempt is None:
        return UNKNOW  # a batch write's half (the job decides) or not one of the sink's
    return state_in(read_record(sink_dir, int(batch)), token, int(seq), int(attempt))


class CheckListener:
    """The transaction listener of the sink's producers: answers CHECK_TRANSACTION_STATE by
    :func:`decide`. Half messages are sent directly (no local transaction runs in the producer)."""

    def execute_local_transaction(self, msg: Any, arg: Any) -> LocalTransactionState:
        return UNKNOW

    def check_local_transaction(self, msg: Any) -> LocalTransactionState:
        props = {
            name: msg.get_property(name) for name in (PROP_SINK, PROP_BATCH, PROP_TASK, PROP_SEQ, PROP_TRY)
        }
        state = decide({k: v for k, v in props.items() if v is not None})
        log.info(
            "rocketmq sink: check of half message %s (batch %s, task %s, row %s, try %s): %s",
            getattr(msg, "msg_id", "?"),
            props[PROP_BATCH],
            props[PROP_TASK],
            props[PROP_SEQ],
            props[PROP_TRY],
            state.name,
        )
        return state


MakeMessage = Callable[[Message, int, int], Message]
"""``(message, row, try) -> the message that try sends``."""


def half_maker(
    group: str, sink_dir: str | None, batch_id: int | None, token: str, immunity_s: int
) -> MakeMessage:
    """Exactly-once: each try a fresh half message naming its sink, batch, task, row and try."""

    def make(msg: Message, seq: int, attempt: int) -> Message:
        props = {k: v for k, v in msg.properties.items() if k != MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX}
        props[MessageConst.TRANSACTION_PREPARED] = "true"
        props[MessageConst.PRODUCER_GROUP] = group
        if sink_dir is not None and batch_id is not None:
            props[PROP_SINK] = sink_dir
            props[PROP_BATCH] = str(batch_id)
        props[MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(immunity_s)
        props[PROP_TASK] = token
        props[PROP_SEQ] = str(seq)
        props[PROP_TRY] = str(attempt)
        out = Message(msg.topic, msg.body, flag=msg.flag)
        out.properties.clear()
        out.properties.update(props)
        return out

    return make
