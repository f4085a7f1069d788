"""Type stub of the native store module (built from rust/python)."""

from typing import Literal

from typing_extensions import Buffer

GetStatus = Literal[
    "FOUND",
    "NO_MATCHED_MESSAGE",
    "MESSAGE_WAS_REMOVING",
    "OFFSET_FOUND_NULL",
    "OFFSET_OVERFLOW_BADLY",
    "OFFSET_OVERFLOW_ONE",
    "OFFSET_TOO_SMALL",
    "NO_MATCHED_LOGIC_QUEUE",
    "NO_MESSAGE_IN_QUEUE",
]

PutResult = tuple[str, int, int, int, int]
"""(offset_msg_id, queue_offset, physical_offset, size, store_timestamp)"""

RecordTuple = tuple[str, int, int, int, int, int, int, str, int, str, int, int, bytes, str, int, int]
"""(topic, queue_id, queue_offset, physical_offset, sys_flag, flag, born_timestamp, born_host,
store_timestamp, store_host, reconsume_times, prepared_transaction_offset, body, properties,
store_size, body_crc)"""

class StoreError(Exception): ...
class StoreIOError(StoreError): ...
class CorruptStoreError(StoreError): ...
class MessageIllegalError(StoreError): ...
class DiskFullError(StoreError): ...
class FlushTimeoutError(StoreError): ...
class StoreShutDownError(StoreError): ...
class StoreConfigError(StoreError): ...
class StoreNotFoundError(StoreError): ...
class StoreLockedError(StoreError): ...
class SlaveStoreError(StoreError): ...
class ReplicaOffsetError(StoreError): ...
class StoreBusyError(StoreError): ...

class MessageStore:
    def __init__(self, config: dict[str, str | int | bool] | None = None) -> None: ...
    @staticmethod
    def config_keys() -> list[str]: ...
    def put(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        properties: bytes = b"",
        flag: int = 0,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str = "127.0.0.1:0",
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
    ) -> PutResult: ...
    def put_batch(
        self,
        topic: str,
        queue_id: int,
        batch_body: bytes,
        extra_properties: bytes = b"",
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str = "127.0.0.1:0",
        reconsume_times: int = 0,
    ) -> list[PutResult]: ...
    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msgs: int = 32,
        tag_codes: list[int] | None = None,
        max_bytes: int = 0,
        sql_filter: Sql92Filter | None = None,
        filter_key: str | None = None,
    ) -> tuple[GetStatus, int, int, int, bytes, int]: ...
    def read_op_records(
        self, topic: str, queue_id: int, offset: int, max_msgs: int = 256
    ) -> tuple[GetStatus, int, int, list[int]]: ...
    def register_filter(self, topic: str, key: str, filter: Sql92Filter) -> None: ...
    def unregister_filter(self, topic: str, key: str) -> None: ...
    def lookup(self, offset: int) -> bytes | None: ...
    def query_by_key(
        self, topic: str, key: str, max_num: int, begin: int, end: int
    ) -> tuple[list[bytes], int, int]: ...
    def min_offset(self, topic: str, queue_id: int) -> int: ...
    def max_offset(self, topic: str, queue_id: int) -> int: ...
    def offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int: ...
    def earliest_message_time(self, topic: str, queue_id: int) -> int: ...
    def store_time_at(self, topic: str, queue_id: int, offset: int) -> int | None: ...
    def earliest_store_time(self) -> int: ...
    def commitlog_min_offset(self) -> int: ...
    def commitlog_max_offset(self) -> int: ...
    def read_commitlog(self, offset: int, max_len: int) -> bytes | None: ...
    def append_commitlog(self, offset: int, data: bytes) -> int: ...
    def set_slave(self, slave: bool) -> None: ...
    def is_slave(self) -> bool: ...
    def flushed_offset(self) -> int: ...
    def dispatched_offset(self) -> int: ...
    def wait_flushed(self, offset: int, timeout_ms: int) -> None: ...
    def wait_dispatched(self, offset: int, timeout_ms: int) -> bool: ...
    def flush_notify_fd(self) -> int: ...
    def drain_flush_notifications(self) -> int: ...
    def dispatch_notify_fd(self) -> int: ...
    def drain_dispatch_notifications(self) -> int: ...
    def queues(self) -> list[tuple[str, int]]: ...
    def delete_topic(self, topic: str) -> None: ...
    def clean_unused_topics(self, keep: list[str]) -> list[str]: ...
    def clean_expired_queues(self) -> list[tuple[str, int]]: ...
    def delete_files_manually(self) -> None: ...
    def delete_expired_files(self, reserved_ms: int, force: bool = False) -> int: ...
    def set_topic_retention(self, topic: str, reserved_ms: int | None) -> None: ...
    def replace_topic_retention(self, table: dict[str, int]) -> None: ...
    def topic_retention(self) -> list[tuple[str, int]]: ...
    def expire_topics(self) -> list[tuple[str, int, int, int, int]]: ...
    def put_lock_held_ms(self) -> int: ...
    def is_disk_full(self) -> bool: ...
    def recovery_report(self) -> dict[str, str | int | float]: ...
    def journal(self) -> list[tuple[int, str, str, str]]: ...
    def take_new_journal_events(self) -> list[tuple[int, str, str, str]]: ...
    def stats(self) -> dict[str, int]: ...
    @property
    def store_host(self) -> str: ...
    @property
    def root(self) -> str: ...
    def shutdown(self) -> None: ...
    def is_shut_down(self) -> bool: ...

def decode_records(buffer: bytes, check_crc: bool = False) -> list[RecordTuple]: ...
def java_string_hash(s: str) -> int: ...
def check_store_config(config: dict[str, str]) -> None: ...
def offset_msg_id(store_host: str, offset: int) -> str: ...
def decode_offset_msg_id(msg_id: str) -> tuple[str, int]: ...
def encode_batch_body(items: list[tuple[int, bytes, bytes]]) -> bytes: ...

_Column = tuple[Buffer, Buffer, Buffer | None, int, int]

def encode_row_batches(
    body: _Column,
    tags: _Column | None,
    keys: _Column | None,
    uniq_base: str,
    counter: int,
    max_rows: int,
    max_bytes: int,
    max_body: int,
) -> list[tuple[bytes, int, int, str]]: ...

# SQL92 filtering (rust/python/src/filter.rs over rmq-filter).

from typing import final  # noqa: E402

class FilterSyntaxError(ValueError):
    kind: str
    offset: int
    line: int
    column: int
    detail: str

@final
class Sql92Filter:
    def __new__(cls, expression: str) -> Sql92Filter: ...
    @property
    def expression(self) -> str: ...
    @property
    def property_names(self) -> list[str]: ...
    def canonical(self) -> str: ...
    def matches(self, properties: bytes | str | dict[str, str]) -> bool: ...

@final
class FilterSet:
    def __new__(cls, max_error_rate: int = 20, expected: int = 32) -> FilterSet: ...
    @property
    def m(self) -> int: ...
    @property
    def k(self) -> int: ...
    def register(self, key: str, filter: Sql92Filter) -> list[int]: ...
    def unregister(self, key: str) -> bool: ...
    def keys(self) -> list[str]: ...
    def bitmap(self, properties: bytes | str) -> bytes: ...
    def may_match(self, key: str, bitmap: bytes) -> bool: ...
    def __len__(self) -> int: ...
    def __contains__(self, key: str, /) -> bool: ...

def compile_sql92(expression: str) -> Sql92Filter: ...
def bloom_shape(max_error_rate: int = 20, expected: int = 32) -> tuple[int, int]: ...
def bloom_bits(key: str, m: int, k: int) -> list[int]: ...
def bloom_may_match(bits: list[int], m: int, bitmap: bytes) -> bool: ...

# Read-only columnar reads of a store directory (rust/python/src/reader.rs over rmq-reader),
# used by rmq.spark. Buffers are Arrow layouts; see rust/reader/src/columns.rs.

from typing import Any  # noqa: E402

@final
class ColumnBuffer:
    """A reader buffer lent through the buffer protocol (read-only, no copy)."""

    def __len__(self) -> int: ...

_Buffers = list[list[ColumnBuffer | None]]
# (row, sysflag, commitlog offset) of each row whose body is stored compressed
_Compressed = list[tuple[int, int, int]]
# (file, offset, bytes skipped, description) of each damaged range passed over (skip_damage)
_Damage = list[tuple[str, int, int, str]]
# (rows, buffers per column, compressed, next, done, records_seen, bytes_seen, damage)
_ReadBatch = tuple[int, _Buffers, _Compressed, int, bool, int, int, _Damage]

@final
class ReadFilter:
    def __new__(
        cls,
        *,
        topics: list[str] | None = None,
        queue_ids: list[int] | None = None,
        queue_offset: tuple[int, int] | None = None,
        commitlog_offset: tuple[int, int] | None = None,
        store_time: tuple[int, int] | None = None,
        born_time: tuple[int, int] | None = None,
        tags: list[str] | None = None,
        system_topic: bool | None = None,
        prepared: bool | None = None,
        visible: bool | None = None,
    ) -> ReadFilter: ...
    def is_unsatisfiable(self) -> bool: ...

@final
class StoreReader:
    def __new__(cls, root: str, commitlog_dir: str | None = None, check_crc: bool = True) -> StoreReader: ...
    def committed_end(self, hint: int | None = None) -> int: ...
    def min_offset(self) -> int: ...
    def is_live(self) -> bool: ...
    def queues(self) -> list[tuple[str, int]]: ...
    def plan(
        self, filter: ReadFilter, committed_end: int, slice_size: int, mode: str
    ) -> tuple[str, list[Any], int, int, int]: ...
    def scan(
        self,
        split: tuple[int, int, bool],
        start: int,
        filter: ReadFilter,
        columns: list[str],
        max_rows: int = 8192,
        max_bytes: int = 67108864,
        skip_damage: bool = False,
    ) -> _ReadBatch: ...
    def read_queue(
        self,
        split: tuple[str, int, int, int],
        start: int,
        committed_end: int,
        filter: ReadFilter,
        columns: list[str],
        max_rows: int = 8192,
        max_bytes: int = 67108864,
        skip_damage: bool = False,
    ) -> _ReadBatch: ...
    def advance(self, start: int, end: int, n: int, filter: ReadFilter) -> tuple[int, int]: ...

def reader_columns() -> list[tuple[str, str, bool]]: ...
def decode_record_buffers(
    validity: bytes | None,
    offsets: bytes,
    data: bytes,
    offset: int,
    length: int,
    columns: list[str],
    check_crc: bool = False,
) -> tuple[int, _Buffers, bytes | None, _Compressed]: ...
def properties_map_buffers(
    validity: bytes | None, offsets: bytes, data: bytes, offset: int, length: int
) -> list[ColumnBuffer | None]: ...

NetEvent = (
    tuple[Literal[0], int, str, str]  # a connection opened: conn, peer, local
    | tuple[Literal[1], int, bytes, float]  # whole frames for the event loop, read at (time.monotonic())
    | tuple[Literal[2], int, None, None]  # a connection closed
    | tuple[Literal[3], int, str, str]  # refused by TLS: conn, peer, reason (a close follows)
)

SIZE_BOUNDS: list[int]
"""Message size histogram bounds of the fast path's counters, bytes (RocketMQ 5.x's)."""
LATENCY_BOUNDS_MS: list[int]
"""Answer latency histogram bounds of the fast path's counters, milliseconds (RocketMQ 5.x's)."""

class NetServer:
    """The broker's network thread (see rmq.remoting.native)."""

    def __init__(
        self,
        host: str,
        port: int,
        max_frame: int = ...,
        flush_timeout_ms: int = 5000,
        tls: tuple[str, str, str, str, str] | None = None,
        spin_us: int = 50,
    ) -> None:
        """``tls``: (mode, cert_path, key_path, trust_cert_path, need_client_auth); ValueError when
        the files do not load. ``spin_us``: how long the thread polls before it sleeps while
        requests arrive steadily (0: sleeps at once)."""
    @property
    def port(self) -> int: ...
    def event_fd(self) -> int: ...
    def take_events(self) -> list[NetEvent]: ...
    def ack(self) -> None: ...
    def write(self, conn: int, parts: list[bytes | bytearray | memoryview]) -> bool: ...
    def close(self, conn: int) -> None: ...
    def abort(self, conn: int) -> None: ...
    def write_buffer_size(self, conn: int) -> int: ...
    def last_seen(self, conn: int) -> float | None: ...
    def enable_fast_send(
        self,
        store: MessageStore,
        cluster_name: str,
        region_id: str,
        trace_on: bool,
        max_body: int,
        version: int,
        sync_master: tuple[int, int] | None = None,
        acl: bool = False,
        fast_failure: tuple[int, int] | None = None,
    ) -> None:
        """``fast_failure``: ``(waitTimeMillsInSendQueue, osPageCacheBusyTimeOutMills)`` with
        ``brokerFastFailureEnable`` on: a send read longer ago, or met while an append has held the put lock
        longer, is left to Python, which answers it SYSTEM_BUSY (counted as declined ``busy``).
        ``sync_master``: ``(haSlaveFallbehindMax, slaveTimeout ms)`` on a SYNC_MASTER, whose fast-path
        answers wait for a slave's ack (reported with :meth:`set_replicated`) or are refused
        SLAVE_NOT_AVAILABLE / FLUSH_SLAVE_TIMEOUT as the Python path refuses them. ``acl``: ACL on, a send
        is taken only when its signature and PUB permission check out against the rules
        :meth:`set_acl_rules` pushes (none until then: every send goes to Python)."""
    def set_acl_rules(self, accounts: list[tuple[str, str, bool, list[tuple[str, bool]]]]) -> None:
        """ACL on: the rules the fast path checks sends against, per account ``(access_key, secret_key,
        default_pub, [(topic, pub), ...])`` (``rmq.acl.validator.fast_send_rules``); replaces the rules in
        force. ValueError unless the fast path was enabled with ``acl=True``."""
    def fast_send_acl_stats(self) -> tuple[int, int, int, int] | None:
        """ACL on: ``(checked, declined, loads, accounts)``: sends taken after the fast path checked their
        signature and permission, sends that check left to Python, times rules were pushed, accounts in
        force; None with ACL off."""
    def set_replicated(self, offset: int) -> None:
        """SYNC_MASTER: a slave acknowledged the CommitLog up to ``offset`` (once per higher ack)."""
    def set_slave_connected(self, connected: bool) -> None:
        """SYNC_MASTER: whether a slave is connected (when it changes)."""
    def take_replica_report(self) -> tuple[int, int, int, int, int] | None:
        """SYNC_MASTER: ``(timeouts, no_slave, lagging, lag_end, lag_acked)``: the fast path's
        FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE answers (no slave, slave lagging) since the last call,
        and the last lagging one's record end and the slave's ack then; None unless SYNC_MASTER."""
    def allow_topic(self, topic: str, read_queues: int, write_queues: int, multi_tag: bool) -> None: ...
    def allow_half(self) -> None:
        """Let transactional half messages to vetted topics take the fast path (RMQ_SYS_TRANS_HALF_TOPIC
        exists and the broker takes transactional messages); forgotten with the vetted topics."""
    def allow_pull(
        self,
        group: str,
        topic: str,
        read_queues: int,
        tag_codes: list[int] | None,
        sub_version: int,
        suggest: int,
        sql_filter: Sql92Filter | None = None,
    ) -> None:
        """Let pulls of ``group`` on ``topic`` that find messages take the network thread's fast path (an
        SQL92 subscription's compiled ``sql_filter`` shared with it)."""
    def allow_pull_lite(self, group: str, topic: str, read_queues: int, suggest: int) -> None:
        """Let pulls of ``group`` on ``topic`` carrying their own tag subscription take the fast path."""
    def set_pull_holding(self, on: bool) -> None:
        """Hold vetted pulls that find nothing new in the network thread (long polling) until a message
        arrives or their suspend time is over; off: the Python path holds them."""
    def forget_pull_group(self, group: str) -> None: ...
    def allow_end_transaction(self) -> None:
        """Let END_TRANSACTION requests take the network thread's fast path (the op topic exists)."""
    def tx_claim(self, half_offset: int) -> bool:
        """Claim the right to decide a half offset: False if the fast path decided it or it is settled."""
    def tx_release(self, half_offset: int) -> None: ...
    def tx_floor(self, floor: int) -> None:
        """Every half offset below ``floor`` is settled: the claims below it are dropped."""
    def end_transaction_stats(self) -> tuple[int, int, int, int]:
        """``(commits, rollbacks, commits stored without their op record, claims held)``."""
    def take_pulls(self) -> list[tuple[str, str, int, int, int, int, int, int | None]]:
        """What the PULL fast path served since the last call: ``(group, topic, queue_id, requests,
        messages, bytes, next_begin_offset, commit_offset or None)`` per queue."""
    def forget_topic(self, topic: str) -> None: ...
    def forget_topics(self) -> None: ...
    def fast_puts(self) -> int: ...
    def fast_batch_uniq_keys_dropped(self) -> int:
        """Batches whose own (batch-level) UNIQ_KEY the fast path dropped, each message keeping its own."""
    def wakeups(self) -> int:
        """Times the network thread woke up with events to handle."""
    def spun_ms(self) -> int:
        """Milliseconds the network thread spent polling for requests instead of sleeping."""
    def fast_send_stats(self) -> tuple[int, int, list[tuple[str, int]]]: ...
    def fast_send_metrics(
        self,
    ) -> tuple[list[tuple[str, str, int, int, list[int]]], list[tuple[int, int, list[int], int, bool]]]:
        """``(topics, latency)``: per topic and message type (``normal``; ``transaction``, half messages)
        ``(topic, message_type, messages, bytes, sizes)`` the fast path stored (sizes
        per bucket of :data:`SIZE_BOUNDS`, then larger; not cumulative), and per request and response code
        ``(code, response, buckets, sum_us, long_polling)`` it answered (per bucket of
        :data:`LATENCY_BOUNDS_MS`; ``long_polling``: answers to pulls it held, their wait included)."""
    def shutdown(self) -> None: ...

class TlsFront:
    """The gRPC port's front (rust/net/src/front.rs): TLS and plaintext clients on ``host:port``, each
    connection passed on in plain text to the abstract Unix socket ``upstream`` (grpcio's
    ``unix-abstract:<upstream>``), from an abstract name of its own (``<upstream>.<n>``)."""

    def __init__(
        self,
        host: str,
        port: int,
        upstream: str,
        tls: tuple[str, str, str, str, str] | None = None,
        names: list[str] = ...,
    ) -> None:
        """``tls``: (mode, cert_path, key_path, trust_cert_path, need_client_auth) as for NetServer
        (ValueError when the files do not load); None: permissive with a self-signed certificate made
        now for ``names``. OSError when the port cannot be bound."""
    @property
    def port(self) -> int: ...
    def stats(self) -> dict[str, int]:
        """``tls``, ``plain``: connections served; ``refused``; ``open``: connections open now."""
    def take_refusals(self) -> list[str]:
        """Refusals since the last call (at most the last 256), each naming the peer and the cause."""
    def peer_of(self, name: str) -> str | None:
        """``host:port`` of the client behind the front's upstream connection bound to the abstract name
        ``name`` (grpcio's peer ``unix-abstract:<name>``)."""
    def enable_sends(self, on: bool, system_names: list[str]) -> None:
        """Answer SendMessage calls of plain messages in the front from now on (``on``), leaving to the
        endpoint every message with a user property named in ``system_names``; or pass every call on."""
    def route_sends(self, topic: str, queues: list[tuple[str, int, str]], masters: dict[str, str]) -> None:
        """The route of ``topic``: its writable queues as ``(broker_name, queue_id, master_addr)`` and its
        masters ``{broker_name: addr}`` (both empty: forgotten, its calls are passed on)."""
    def set_consumers(self, clients: dict[str, tuple[bool, int, bool]], hidden: list[str]) -> None:
        """The consumers the front may serve receives of, ``{client_id: (fifo, max_attempts, lite)}``
        (lite ones it passes on), and the property names a consumer is not shown."""
    def take_dead_letters(self) -> list[tuple[str, str, str, str]]:
        """``(group, topic, receipt_handle, message_id)`` of the messages the front's receives held back
        for the dead-letter queue since the last call."""
    def send_stats(self) -> dict[str, int]:
        """Calls answered by the front / passed on: ``served`` / ``passed_on`` (SendMessage),
        ``receive_served`` / ``receive_passed_on``, ``ack_served`` / ``ack_passed_on``; ``topics``."""
    def send_latency(self) -> list[tuple[str, str, list[float]]]:
        """Per RPC and status code name (``ok``...) of the calls the front answered: the count per
        ``rocketmq_rpc_latency`` bucket, then the sum in milliseconds."""
    def close(self) -> None: ...
