"""TopicConfigManager: the broker's topics, persisted to `config/topics.json` (REMOTING.md §7.1, §7.2).

A change costs O(1), not a rewrite of a table of thousands of topics: it is appended to the table's
:class:`~rmq.broker.change_journal.ChangeJournal` (one line, one `write`) and marks the table dirty;
:meth:`TopicConfigManager.persist_if_dirty`, run by the broker every ``PERSIST_INTERVAL_S``, writes
the whole table once for all the changes since the last write (in a worker thread, with the atomic
tmp + rename of :func:`persist_json`), then drops the journal it covers; the broker writes it once
more at shutdown. Loading replays the journal over the table, so a change survives a crash of the
process as soon as its request is answered, like RocketMQ's write of the whole file per change;
after a power loss the changes of the last ``PERSIST_INTERVAL_S`` may be lost (RocketMQ does not
fsync that file either).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import threading
from collections.abc import Callable

from rmq.broker.change_journal import ChangeJournal
from rmq.broker.persist import load_json, persist_json
from rmq.common import codes
from rmq.common.codes import PermName
from rmq.common.route import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from rmq.common.topic_attributes import RETENTION_HOURS, retention_ms

__all__ = ["PERSIST_INTERVAL_S", "TopicConfigManager"]

log = logging.getLogger(__name__)

PERSIST_INTERVAL_S = 0.2
"""Longest time a topic change waits to be written to `topics.json` (one write covers them all)."""


class TopicConfigManager:
    """Topics of this broker. `on_change(topic)` runs at once after `topic` is created, changed or
    deleted, and `on_change(None)` after a broker config change that applies to every topic (its
    permission): the one hook through which a change reaches the network thread's send fast path and
    the name servers."""

    def __init__(
        self,
        config_dir: str,
        *,
        cluster_name: str,
        broker_name: str,
        auto_create_topic: bool,
        default_queue_nums: int,
        cluster_topic_enable: bool = True,
        broker_topic_enable: bool = True,
        trace_topic_enable: bool = False,
    ) -> None:
        self.path = os.path.join(config_dir, "topics.json")
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.on_change: Callable[[str | None], None] | None = None
        self._dirty = False
        self._write_lock = threading.Lock()
        self._journal = ChangeJournal(self.path)
        self._system(codes.SELF_TEST_TOPIC, 1, 1)
        if auto_create_topic:
            self._system(
                codes.AUTO_CREATE_TOPIC_KEY_TOPIC,
                default_queue_nums,
                default_queue_nums,
                PermName.READ | PermName.WRITE | PermName.INHERIT,
            )
        self._system(codes.BENCHMARK_TOPIC, 1024, 1024)
        perm = PermName.INHERIT | (PermName.READ | PermName.WRITE if cluster_topic_enable else 0)
        self._system(cluster_name, 16, 16, perm)
        perm = PermName.INHERIT | (PermName.READ | PermName.WRITE if broker_topic_enable else 0)
        self._system(broker_name, 1, 1, perm)
        self._system(codes.OFFSET_MOVED_EVENT, 1, 1)
        self._system(codes.SCHEDULE_TOPIC, 18, 18)
        if trace_topic_enable:
            self._system(codes.TRACE_TOPIC, 1, 1)
        self._system(f"{cluster_name}_{codes.REPLY_TOPIC_POSTFIX}", 1, 1)

    def _system(self, name: str, read: int, write: int, perm: int = 6) -> None:
        self.table[name] = TopicConfig(name, read, write, perm)

    # --- persistence -------------------------------------------------------------------------------
    def load(self) -> None:
        """Read the table, then replay the changes journaled after its last write."""
        data = load_json(self.path)
        if data is not None:
            wrapper = TopicConfigSerializeWrapper.from_dict(data)
            self.table.update(wrapper.topic_config_table)
            self.data_version = wrapper.data_version
        replayed = 0
        for entry in self._journal.replay():
            topic, config = entry.get("topic"), entry.get("config")
            if not isinstance(topic, str):
                continue
            if config is None:
                self.table.pop(topic, None)
            else:
                try:
                    self.table[topic] = TopicConfig.from_dict(config, topic)
                except (KeyError, TypeError, ValueError) as e:
                    log.warning(
                        "skipped a journaled change of topic %s: bad config %r (%s)", topic, config, e
                    )
                    continue
            version = DataVersion.from_dict(entry.get("dataVersion") or {})
            if version.counter > self.data_version.counter:  # else the table already covers it
                self.data_version = version
            replayed += 1
        if replayed:
            log.info("replayed %d topic changes journaled after the last write of %s", replayed, self.path)
            self._dirty = True

    def persist(self) -> None:
        """Write the whole table now (at start and shutdown). A write that fails (a full disk)
        is logged and retried by the periodic writer; the change journal still holds the changes."""
        self._dirty = False
        sealed = self._journal.seal()
        try:
            self._write(self.wrapper(), sealed)
        except OSError as e:
            self._dirty = True
            log.warning("cannot write %s (%s); its changes stay journaled until it can be", self.path, e)

    async def persist_if_dirty(self) -> None:
        """Write the table if it changed since the last write. The snapshot is taken here, the
        encoding and the write run in a worker thread."""
        if not self._dirty:
            return
        self._dirty = False
        snapshot = self.wrapper()
        sealed = self._journal.seal()
        try:
            await asyncio.to_thread(self._write, snapshot, sealed)
        except OSError as e:
            self._dirty = True
            log.warning("cannot write %s (%s); retrying in %.1fs", self.path, e, PERSIST_INTERVAL_S)

    def _write(self, wrapper: TopicConfigSerializeWrapper, journaled: int) -> None:
        with self._write_lock:
            persist_json(self.path, wrapper.to_dict())
            self._journal.discard(journaled)

    def wrapper(self) -> TopicConfigSerializeWrapper:
        """A snapshot of the table and its data version."""
        return TopicConfigSerializeWrapper(dataclasses.replace(self.data_version), dict(self.table))

    def replace_all(self, wrapper: TopicConfigSerializeWrapper) -> bool:
        """Take a master's whole table (a slave's copy) if its data version differs from ours;
        returns whether it did."""
        if wrapper.data_version == self.data_version:
            return False
        self.table = dict(wrapper.topic_config_table)
        self.data_version = dataclasses.replace(wrapper.data_version)
        self.persist()
        if self.on_change is not None:
            self.on_change(None)
        return True

    def broker_config_changed(self) -> None:
        """The broker's run-time config changed: its permission applies to every topic as announced
        (a new data version, so the name servers take the next registration, as RocketMQ does)."""
        self._changed(None)

    def _changed(self, topic: str | None) -> None:
        self.data_version.next_version()
        if topic is not None:
            self._dirty = True
            tc = self.table.get(topic)
            entry = {"topic": topic, "config": tc.to_dict() if tc is not None else None}
            entry["dataVersion"] = self.data_version.to_dict()
            try:
                self._journal.append(entry)
            except OSError as e:
                log.warning(
                    "cannot journal the change of topic %s (%s); it is written with the table", topic, e
                )
        if self.on_change is not None:
            self.on_change(topic)

    # --- queries -----------------------------------------------------------------------------------
    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def __contains__(self, topic: str) -> bool:
        return topic in self.table

    def retention_ms(self, topic: str) -> int | None:
        """The topic's own retention (attribute ``retention.hours``) in ms, None without one; a value
        that is not valid (a hand-edited ``topics.json``) is logged and ignored."""
        tc = self.table.get(topic)
        if tc is None:
            return None
        ms = retention_ms(tc.attributes)
        if ms is None and RETENTION_HOURS in tc.attributes:
            log.warning(
                "topic %s: %s=%r is not a valid number of hours; the topic has no retention of its own",
                topic,
                RETENTION_HOURS,
                tc.attributes[RETENTION_HOURS],
            )
        return ms

    def retention_table(self) -> dict[str, int]:
        """Every topic with its own retention: topic -> ms."""
        return {
            t: ms
            for t, tc in self.table.items()
            if tc.attributes and (ms := self.retention_ms(t)) is not None
        }

    # --- changes -----------------------------------------------------------------------------------
    def create_in_send(
        self, topic: str, default_topic: str, queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """Auto-create `topic` from the template `default_topic` (TBW102), or None if impossible."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        template = self.table.get(default_topic)
        if template is None or not PermName.is_inherited(template.perm):
            return None
        nums = max(1, min(queue_nums, template.write_queue_nums))
        tc = TopicConfig(
            topic,
            nums,
            nums,
            template.perm & ~PermName.INHERIT,
            template.topic_filter_type,
            topic_sys_flag,
        )
        log.info("auto-created topic %s from %s with %d queues", topic, default_topic, nums)
        self.table[topic] = tc
        self._changed(topic)
        return tc

    def create_in_back(self, topic: str, queue_nums: int, perm: int = 6) -> TopicConfig:
        """Create a system-managed topic (retry, DLQ, transaction) if missing."""
        tc = self.table.get(topic)
        if tc is None:
            tc = TopicConfig(topic, queue_nums, queue_nums, perm)
            self.table[topic] = tc
            self._changed(topic)
        return tc

    def update(self, tc: TopicConfig) -> None:
        self.table[tc.topic_name] = tc
        self._changed(tc.topic_name)

    def apply_order_conf(self, order_topics: set[str]) -> list[str]:
        """The name servers' ORDER_TOPIC_CONFIG (its topics, from a registration's answer), as RocketMQ's
        broker applies it: a topic named there is ``order``, any other is not. Returns what changed
        (each change is logged)."""
        changed = []
        for name, tc in list(self.table.items()):
            order = name in order_topics
            if tc.order != order:
                self.update(dataclasses.replace(tc, order=order))
                changed.append(name)
                log.info("topic %s: order=%s, as the name servers' ORDER_TOPIC_CONFIG has it", name, order)
        return changed

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        self._changed(topic)
        return True
