"""What a slave copies from its master besides the CommitLog (RocketMQ's SlaveSynchronize): the topic
table (GET_ALL_TOPIC_CONFIG, 21) when the master is learned and every 60 s, so the slave serves pulls and
queries of the master's topics. Consumer offsets (43), delay offsets (45) and subscription groups (201)
are not copied yet."""

from __future__ import annotations

import logging

from rmq.broker.topic_config import TopicConfigManager
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.route import TopicConfigSerializeWrapper
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import create_request
from rmq.remoting.errors import RemotingError

__all__ = ["SYNC_INTERVAL_S", "SlaveSynchronize"]

log = logging.getLogger(__name__)

SYNC_INTERVAL_S = 60.0
"""How often a slave copies its master's configs (RocketMQ's 60 s)."""


class SlaveSynchronize:
    def __init__(self, client: RemotingClient, topics: TopicConfigManager) -> None:
        self.client = client
        self.topics = topics
        self.master_addr: str | None = None

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
        try:
            resp = await self.client.invoke(addr, create_request(RequestCode.GET_ALL_TOPIC_CONFIG, {}), 5000)
        except (RemotingError, OSError) as e:
            log.warning("slave: cannot copy the topic table from master %s: %s", addr, e)
            return
        if resp.code != ResponseCode.SUCCESS or not resp.body:
            log.warning("slave: master %s refused its topic table: %s %s", addr, resp.code, resp.remark)
            return
        wrapper = TopicConfigSerializeWrapper.from_json(bytes(resp.body))
        if self.topics.replace_all(wrapper):
            log.info("slave: copied %d topics from master %s", len(wrapper.topic_config_table), addr)
