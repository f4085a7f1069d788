"""Reader options and pushed-down predicates, as one picklable read specification.

Options (case-insensitive; ``load(path)`` sets ``path``):

========================= ============================================================================
``path``                  the store root (``storePathRootDir``): ``commitlog/``, ``consumequeue/``, ...
``commitlogDir``          the CommitLog directory when it is not ``<path>/commitlog`` (``storePathCommitLog``)
``topics``                comma-separated topics to read
``queueIds``              comma-separated queue ids to read
``startOffset``           first CommitLog offset (records starting at or after it)
``endOffset``             CommitLog offset to stop before
``startTime``/``endTime`` store-time range ``[start, end)``: epoch ms or ISO-8601 (naive = UTC)
``includeSystemTopics``   ``false`` drops rows of system topics (half messages, schedule, ...); default true
``visibleOnly``           ``true`` keeps only rows a consumer of a user topic receives; default false
``checkCRC``              verify every body CRC (default true); a record whose CRC fails is damage
``decompress``            inflate bodies stored compressed (sysflag COMPRESSED; default true)
``sliceSize``             bytes per scan partition (default ``128m``, or ``256m`` when no body nor
                          properties are read and ``512m`` when no column is; ``k``/``m``/``g`` suffixes)
``batchSize``             rows per Arrow batch (default 16384)
``columns``               comma-separated columns the DataFrame has (default: all); only those are
                          decoded, and an empty list reads no column at all, only how many rows there
                          are (``count(*)``). Spark's Python data source API does not prune columns,
                          so this (or a user schema) is how a query that needs few columns reads few
``pushdown``              ``auto`` (default), ``scan`` or ``consumequeue``: how topic/queue predicates read
``pushFilters``           ``false`` turns off Spark filter pushdown for this source (default true)
``failOnDataLoss``        raise when planned CommitLog files were deleted meanwhile, at a damaged record
                          (naming file and offset) and at a compressed body that does not inflate
                          (default true); ``false`` skips to the next intact record / reads a null body
``startingOffsets``       streaming: ``earliest`` (default), ``latest`` or a CommitLog offset
``maxRecordsPerTrigger``  streaming: at most this many rows per micro-batch
========================= ============================================================================
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rmq import _store

__all__ = ["FilterSpec", "ReadSpec", "parse_options", "parse_size", "parse_time_ms"]

Range = tuple[int, int]


def _intersect(a: Range | None, b: Range | None) -> Range | None:
    if a is None:
        return b
    if b is None:
        return a
    return (max(a[0], b[0]), min(a[1], b[1]))


def _and_set(a: tuple[Any, ...] | None, b: Iterable[Any] | None) -> tuple[Any, ...] | None:
    if b is None:
        return a
    bs = tuple(sorted(set(b)))
    if a is None:
        return bs
    return tuple(x for x in a if x in set(bs))


def _and_flag(a: bool | None, b: bool | None) -> bool | None:
    """AND of two equality conditions on a boolean; a contradiction becomes an impossible range."""
    if a is None or b is None or a == b:
        return a if b is None else b
    raise _Contradiction


class _Contradiction(Exception):
    pass


@dataclass(frozen=True)
class FilterSpec:
    """Conditions on rows (ANDed), as ``rmq._store.ReadFilter`` takes them; picklable."""

    topics: tuple[str, ...] | None = None
    queue_ids: tuple[int, ...] | None = None
    queue_offset: Range | None = None
    commitlog_offset: Range | None = None
    store_time: Range | None = None
    born_time: Range | None = None
    tags: tuple[str, ...] | None = None
    system_topic: bool | None = None
    prepared: bool | None = None
    visible: bool | None = None

    def and_(self, **conds: Any) -> FilterSpec:
        """This spec ANDed with more conditions (same keyword names)."""
        changes: dict[str, Any] = {}
        try:
            for k, v in conds.items():
                cur = getattr(self, k)
                if k in ("topics", "queue_ids", "tags"):
                    changes[k] = _and_set(cur, v)
                elif k in ("system_topic", "prepared", "visible"):
                    changes[k] = _and_flag(cur, v)
                else:
                    changes[k] = _intersect(cur, v)
        except _Contradiction:
            return dataclasses.replace(self, queue_offset=(0, 0))
        return dataclasses.replace(self, **changes)

    def build(self) -> _store.ReadFilter:
        kwargs = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for k in ("topics", "queue_ids", "tags"):
            if kwargs[k] is not None:
                kwargs[k] = list(kwargs[k])
        return _store.ReadFilter(**kwargs)


@dataclass(frozen=True)
class ReadSpec:
    """Everything a partition needs to read: where the store is and what to keep."""

    path: str
    commitlog_dir: str | None = None
    check_crc: bool = True
    decompress: bool = True
    slice_size: int = 128 << 20
    # No sliceSize option: the batch reader sizes partitions by the columns read (`auto_slice_size`).
    auto_slice: bool = False
    batch_rows: int = 16384
    batch_bytes: int = 64 << 20
    pushdown: str = "auto"
    push_filters: bool = True
    fail_on_data_loss: bool = True
    starting_offsets: str = "earliest"
    max_records_per_trigger: int | None = None
    filter: FilterSpec = FilterSpec()

    def open(self) -> _store.StoreReader:
        """A fresh read-only view of the store (one per worker process and partition)."""
        return _store.StoreReader(self.path, self.commitlog_dir, self.check_crc)


_SIZE_SUFFIX = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text: str) -> int:
    """``"128m"`` -> 134217728; plain numbers are bytes."""
    s = text.strip().lower().removesuffix("b")
    mult = _SIZE_SUFFIX.get(s[-1:], 1)
    return int(s[:-1] if mult > 1 else s) * mult


def parse_time_ms(value: str | int | float | dt.datetime) -> int:
    """Epoch ms from ms, or from an ISO-8601 string or datetime (naive means UTC)."""
    if isinstance(value, dt.datetime):
        d = value
    elif isinstance(value, (int, float)):
        return int(value)
    else:
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        d = dt.datetime.fromisoformat(text)
    if d.tzinfo is None:
        d = d.replace(tzinfo=dt.UTC)
    return int(d.timestamp() * 1000)


def _bool(text: str, key: str) -> bool:
    t = text.strip().lower()
    if t in ("true", "1", "yes"):
        return True
    if t in ("false", "0", "no"):
        return False
    raise ValueError(f"option {key} must be true or false, not {text!r}")


def _csv(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


_I64_MAX = (1 << 63) - 1
_I64_MIN = -(1 << 63)


def parse_options(options: Mapping[str, str]) -> ReadSpec:
    """A read spec from data source options (see the module doc)."""
    o = {str(k).lower(): str(v) for k, v in options.items()}
    known = {
        "path",
        "paths",
        "commitlogdir",
        "topics",
        "queueids",
        "startoffset",
        "endoffset",
        "starttime",
        "endtime",
        "includesystemtopics",
        "visibleonly",
        "checkcrc",
        "decompress",
        "slicesize",
        "batchsize",
        "columns",
        "pushdown",
        "pushfilters",
        "failondataloss",
        "startingoffsets",
        "maxrecordspertrigger",
    }
    unknown = sorted(set(o) - known)
    if unknown:
        from rmq.spark.network.options import NETWORK_OPTIONS

        networked = [k for k in unknown if k in NETWORK_OPTIONS]
        hint = (
            f" ({', '.join(networked)}: options of the network source,"
            " which takes nameServer and no store path)"
            if networked
            else ""
        )
        raise ValueError(f"unknown rocketmq option(s): {', '.join(unknown)}{hint}")
    path = o.get("path")
    if not path:
        raise ValueError('no store directory: use spark.read.format("rocketmq").load("/path/to/store")')
    f = FilterSpec()
    if "topics" in o:
        f = f.and_(topics=_csv(o["topics"]))
    if "queueids" in o:
        f = f.and_(queue_ids=[int(q) for q in _csv(o["queueids"])])
    if "startoffset" in o or "endoffset" in o:
        f = f.and_(commitlog_offset=(int(o.get("startoffset", _I64_MIN)), int(o.get("endoffset", _I64_MAX))))
    if "starttime" in o or "endtime" in o:
        lo = parse_time_ms(o["starttime"]) if "starttime" in o else _I64_MIN
        hi = parse_time_ms(o["endtime"]) if "endtime" in o else _I64_MAX
        f = f.and_(store_time=(lo, hi))
    if not _bool(o.get("includesystemtopics", "true"), "includeSystemTopics"):
        f = f.and_(system_topic=False)
    if _bool(o.get("visibleonly", "false"), "visibleOnly"):
        f = f.and_(visible=True)
    pushdown = o.get("pushdown", "auto").strip().lower()
    if pushdown not in ("auto", "scan", "consumequeue"):
        raise ValueError(f"option pushdown must be auto, scan or consumequeue, not {pushdown!r}")
    starting = o.get("startingoffsets", "earliest").strip().lower()
    if starting not in ("earliest", "latest") and not starting.isdigit():
        raise ValueError(f"option startingOffsets must be earliest, latest or an offset, not {starting!r}")
    max_trigger = int(o["maxrecordspertrigger"]) if "maxrecordspertrigger" in o else None
    if max_trigger is not None and max_trigger <= 0:
        raise ValueError("option maxRecordsPerTrigger must be positive")
    return ReadSpec(
        path=path,
        commitlog_dir=o.get("commitlogdir"),
        check_crc=_bool(o.get("checkcrc", "true"), "checkCRC"),
        decompress=_bool(o.get("decompress", "true"), "decompress"),
        slice_size=parse_size(o.get("slicesize", "128m")),
        auto_slice="slicesize" not in o,
        batch_rows=max(1, int(o.get("batchsize", "16384"))),
        pushdown=pushdown,
        push_filters=_bool(o.get("pushfilters", "true"), "pushFilters"),
        fail_on_data_loss=_bool(o.get("failondataloss", "true"), "failOnDataLoss"),
        starting_offsets=starting,
        max_records_per_trigger=max_trigger,
        filter=f,
    )
