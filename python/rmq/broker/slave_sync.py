"""What a slave copies from its master besides the CommitLog (RocketMQ's SlaveSynchronize), when the
master is learned and every 10 s: the topic table (GET_ALL_TOPIC_CONFIG, 21) and the subscription groups
(GET_ALL_SUBSCRIPTIONGROUP_CONFIG, 201), each taken whole when its data version differs from the slave's;
the consumer offsets (GET_ALL_CONSUMER_OFFSET, 43), each ``topic@group`` of the master's replacing the
slave's (offsets only the slave has stay, as RocketMQ's ``putAll``); the delay-level offsets
(GET_ALL_DELAY_OFFSET, 45). So the slave serves pulls of the master's topics by its groups, from the
offsets its consumers committed. Offsets consumers commit to the slave while the master is away are
the slave's until the next copy; the master takes the consumers' own offsets when it is back (their
offset stores commit to the master again), and the next copy overwrites the slave's."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from rmq.broker.consumer_offset import ConsumerOffsetManager
from rmq.broker.schedule import ScheduleService
from rmq.broker.subscription_group import SubscriptionGroupManager
from rmq.broker.topic_config import TopicConfigManager
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.route import TopicConfigSerializeWrapper
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import create_request
from rmq.remoting.errors import RemotingError

__all__ = ["SYNC_INTERVAL_S", "SlaveSynchronize"]

log = logging.getLogger(__name__)

SYNC_INTERVAL_S = 10.0
"""How often a slave copies its master's configs (RocketMQ 4.7 and later: every 10 s; 60 s before)."""


class SlaveSynchronize:
    def __init__(
        self,
        client: RemotingClient,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        schedule: ScheduleService,
    ) -> None:
        self.client = client
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.schedule = schedule
        self.master_addr: str | None = None
        self.copies = 0
        """Complete copies made (every part taken or found unchanged)."""

    def set_master_addr(self, addr: str | None) -> bool:
        """The master's address as the name server answered; returns whether it changed."""
        if addr and addr != self.master_addr:
            self.master_addr = addr
            return True
        return False

    async def sync_all(self) -> None:
        addr = self.master_addr
        if not addr:
            return
        parts: list[tuple[int, str, Callable[[bytes], None]]] = [
            (RequestCode.GET_ALL_TOPIC_CONFIG, "topic table", self._topics),
            (RequestCode.GET_ALL_CONSUMER_OFFSET, "consumer offsets", self._offsets),
            (RequestCode.GET_ALL_DELAY_OFFSET, "delay offsets", self._delay_offsets),
            (RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, "subscription groups", self._groups),
        ]
        ok = 0
        for code, what, take in parts:
            ok += await self._copy(addr, code, what, take)
        if ok == len(parts):
            self.copies += 1

    async def _copy(self, addr: str, code: int, what: str, take: Callable[[bytes], None]) -> bool:
        try:
            resp = await self.client.invoke(addr, create_request(code, {}), 5000)
        except (RemotingError, OSError) as e:
            log.warning("slave: cannot copy the %s from master %s: %s", what, addr, e)
            return False
        if resp.code != ResponseCode.SUCCESS or not resp.body:
            log.warning("slave: master %s refused its %s: %s %s", addr, what, resp.code, resp.remark)
            return False
        try:
            take(bytes(resp.body))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            log.warning("slave: the %s master %s sent is malformed, not taken: %s", what, addr, e)
            return False
        return True

    def _topics(self, body: bytes) -> None:
        wrapper = TopicConfigSerializeWrapper.from_json(body)
        if self.topics.replace_all(wrapper):
            log.info(
                "slave: copied %d topics from master %s", len(wrapper.topic_config_table), self.master_addr
            )

    def _offsets(self, body: bytes) -> None:
        n = self.offsets.take_all(_table(body, "offsetTable"))
        self.offsets.persist()
        log.info("slave: copied the consumer offsets of %d topic@group from master %s", n, self.master_addr)

    def _delay_offsets(self, body: bytes) -> None:
        self.schedule.take_all(_table(body, "offsetTable"))

    def _groups(self, body: bytes) -> None:
        data = fastjson.loads(body)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        if self.groups.replace_all(data):
            log.info(
                "slave: copied %d subscription groups from master %s",
                len(self.groups.table),
                self.master_addr,
            )


def _table(body: bytes, key: str) -> dict[Any, Any]:
    data = fastjson.loads(body)
    table = data.get(key) if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise ValueError(f"no {key} object")
    return table
