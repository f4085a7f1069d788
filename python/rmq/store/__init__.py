"""The message store: the Rust core (`rmq._store`) plus asyncio-friendly waiting.

`MessageStore` is the native store. `AsyncStore` wraps one for an event loop: it watches the
store's flush and dispatch eventfds with `loop.add_reader`, so awaiting durability of an
offset (SYNC_FLUSH group commit) or the dispatch of new records (long polling) costs one
loop wake-up per flush or dispatch round, never a thread per waiter.
"""

from rmq._store import (
    CorruptStoreError,
    DiskFullError,
    FlushTimeoutError,
    MessageIllegalError,
    MessageStore,
    ReplicaOffsetError,
    SlaveStoreError,
    StoreBusyError,
    StoreConfigError,
    StoreError,
    StoreIOError,
    StoreLockedError,
    StoreNotFoundError,
    StoreShutDownError,
    decode_offset_msg_id,
    decode_records,
    encode_batch_body,
    java_string_hash,
    offset_msg_id,
)
from rmq.store.aio import AsyncStore, OffsetWaiters

__all__ = [
    "AsyncStore",
    "CorruptStoreError",
    "DiskFullError",
    "FlushTimeoutError",
    "MessageIllegalError",
    "MessageStore",
    "OffsetWaiters",
    "ReplicaOffsetError",
    "SlaveStoreError",
    "StoreBusyError",
    "StoreConfigError",
    "StoreError",
    "StoreIOError",
    "StoreLockedError",
    "StoreNotFoundError",
    "StoreShutDownError",
    "decode_offset_msg_id",
    "decode_records",
    "encode_batch_body",
    "java_string_hash",
    "offset_msg_id",
]
