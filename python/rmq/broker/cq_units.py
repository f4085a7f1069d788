"""Read a ConsumeQueue's units as they are on disk, for ``mqadmin queryCq`` (QUERY_CONSUME_QUEUE, 321).

The native store serves messages, not its index units, so this reads the queue's files directly: the layout
is RocketMQ's (``rust/store/src/consume_queue.rs``): ``<consumequeue dir>/<topic>/<queueId>/``, files named
by the 20-digit byte offset of their first unit, each ``mappedFileSizeConsumeQueue`` bytes, one 20-byte
unit per message (CommitLog offset i64, size i32, tags code i64, big-endian). Reads stop at the queue's
published end (:meth:`MessageStore.max_offset`), so a unit being written is never read, and at the end of
the file holding the first unit asked for, as RocketMQ's ``getIndexBuffer`` does.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Final

from rmq.broker.config import BrokerConfig

__all__ = ["CQ_UNIT_SIZE", "DEFAULT_CQ_FILE_SIZE", "CqUnit", "read_units"]

CQ_UNIT_SIZE: Final = 20
DEFAULT_CQ_FILE_SIZE: Final = 300_000 * CQ_UNIT_SIZE
_UNIT: Final = struct.Struct(">qiq")


@dataclass(frozen=True)
class CqUnit:
    physic_offset: int
    physic_size: int
    tags_code: int


def queue_dir(config: BrokerConfig, topic: str, queue_id: int) -> str:
    root = config.store.get("storePathConsumeQueue") or os.path.join(config.store_root, "consumequeue")
    return os.path.join(str(root), topic, str(queue_id))


def file_size(config: BrokerConfig) -> int:
    return int(config.store.get("mappedFileSizeConsumeQueue", DEFAULT_CQ_FILE_SIZE))


def read_units(
    config: BrokerConfig, topic: str, queue_id: int, index: int, count: int, end: int
) -> list[CqUnit]:
    """Up to ``count`` units from logical offset ``index``, none at or past ``end`` (the queue's max offset)
    nor past the end of the file that holds ``index``; ``[]`` if that file is gone."""
    size = file_size(config)
    per_file = size // CQ_UNIT_SIZE
    first = index // per_file * size
    n = max(0, min(count, end - index, per_file - index % per_file))
    if n == 0:
        return []
    path = os.path.join(queue_dir(config, topic, queue_id), f"{first:020d}")
    try:
        with open(path, "rb") as f:
            data = os.pread(f.fileno(), n * CQ_UNIT_SIZE, index % per_file * CQ_UNIT_SIZE)
    except FileNotFoundError:
        return []
    return [CqUnit(*_UNIT.unpack_from(data, i)) for i in range(0, len(data) - CQ_UNIT_SIZE + 1, CQ_UNIT_SIZE)]
