"""Registration with the name servers (RocketMQ's BrokerOuterAPI): REGISTER_BROKER with the full
topic table to every name server at start, every `registerNameServerPeriod` and after a topic
change; UNREGISTER_BROKER at shutdown."""

from __future__ import annotations

import asyncio
import logging
import zlib

from rmq.broker.config import BrokerConfig
from rmq.broker.topic_config import TopicConfigManager
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.route import RegisterBrokerBody
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import create_request
from rmq.remoting.errors import RemotingError

__all__ = ["NameServerRegistration"]

log = logging.getLogger(__name__)


class NameServerRegistration:
    def __init__(self, config: BrokerConfig, topics: TopicConfigManager, client: RemotingClient) -> None:
        self.config = config
        self.topics = topics
        self.client = client
        self._pending: asyncio.Task[None] | None = None
        self._dirty = False

    def _header(self) -> dict[str, str]:
        c = self.config
        return {
            "brokerName": c.broker_name,
            "brokerAddr": c.broker_addr,
            "clusterName": c.broker_cluster_name,
            "haServerAddr": f"{c.broker_ip1}:{c.listen_port + 1}",
            "brokerId": str(c.broker_id),
        }

    async def register_all(self) -> int:
        """Register with every name server; returns how many accepted."""
        body = RegisterBrokerBody(self.topics.wrapper()).encode(False)
        header = self._header()
        header["compressed"] = "false"
        header["bodyCrc32"] = str(zlib.crc32(body) & 0x7FFFFFFF)
        ok = 0
        for addr in self.config.namesrv_list():
            req = create_request(RequestCode.REGISTER_BROKER, dict(header), body)
            try:
                resp = await self.client.invoke(addr, req, 6000)
            except (RemotingError, OSError) as e:
                log.warning("register to name server %s failed: %s", addr, e)
                continue
            if resp.code == ResponseCode.SUCCESS:
                ok += 1
            else:
                log.warning("name server %s refused registration: %s %s", addr, resp.code, resp.remark)
        return ok

    def register_soon(self) -> None:
        """Schedule a registration (after a topic change); coalesces bursts.

        A change made while a registration is already on the wire (its body taken before the change) is
        registered again right after it, so no change waits for the periodic registration.
        """
        self._dirty = True
        if self._pending is not None and not self._pending.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return

        async def run() -> None:
            while self._dirty:
                await asyncio.sleep(0)
                self._dirty = False  # register_all takes its body before its first await
                await self.register_all()

        self._pending = loop.create_task(run())

    async def settled(self) -> None:
        """Wait until every scheduled registration has reached the name servers (or failed)."""
        while self._pending is not None and not self._pending.done():
            await asyncio.shield(self._pending)

    async def unregister_all(self) -> None:
        header = self._header()
        header.pop("haServerAddr")
        for addr in self.config.namesrv_list():
            try:
                await self.client.invoke(
                    addr, create_request(RequestCode.UNREGISTER_BROKER, dict(header)), 3000
                )
            except (RemotingError, OSError) as e:
                log.info("unregister from %s failed: %s", addr, e)
