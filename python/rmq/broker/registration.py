"""Registration with the name servers (RocketMQ's BrokerOuterAPI): REGISTER_BROKER with the full
topic table to every name server at start and every `registerNameServerPeriod`, and right after a
change; UNREGISTER_BROKER at shutdown.

After a topic change the registration carries only the topics changed since the last one (RocketMQ's
registerIncrementBrokerData: a name server adds or updates the topics it is sent and keeps the others),
so its cost does not grow with the table; after a broker config change it carries every topic. One
registration runs at a time; the changes made while it runs are sent together right after it (at
most one pending), so a burst of thousands of topic creations costs a few small registrations.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import zlib
from collections.abc import Callable

from rmq.broker.config import BrokerConfig
from rmq.broker.topic_config import TopicConfigManager
from rmq.common import fastjson
from rmq.common.codes import PermName, RequestCode, ResponseCode
from rmq.common.route import RegisterBrokerBody, TopicConfigSerializeWrapper
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
        self._runner: asyncio.Task[None] | None = None
        self._changed: set[str] = set()
        self._all_changed = False
        self._registered_with: set[str] = set()  # name servers whose last answer was a success
        self.on_answer: Callable[[dict[str, str]], None] | None = None
        """Called with a name server's answer to a registration (a slave learns its master's
        `haServerAddr` and `masterAddr` from it)."""

    def _header(self) -> dict[str, str]:
        c = self.config
        return {
            "brokerName": c.broker_name,
            "brokerAddr": c.broker_addr,
            "clusterName": c.broker_cluster_name,
            "haServerAddr": f"{c.broker_ip1}:{c.ha_port}",
            "brokerId": str(c.broker_id),
        }

    async def register_all(self, only: set[str] | None = None) -> int:
        """Register with every name server (with the topics in `only`, or all); returns how many
        accepted."""
        table = self._topic_table(only)
        body_topics = table.topic_config_table
        body = RegisterBrokerBody(table).encode(False)
        header = self._header()
        header["compressed"] = "false"
        header["bodyCrc32"] = str(zlib.crc32(body) & 0x7FFFFFFF)
        ok = 0
        for addr in self.config.namesrv_list():
            req = create_request(RequestCode.REGISTER_BROKER, dict(header), body)
            try:
                resp = await self.client.invoke(addr, req, 6000)
            except (RemotingError, OSError) as e:
                self._registered_with.discard(addr)
                log.warning("register to name server %s failed: %s", addr, e)
                continue
            if resp.code == ResponseCode.SUCCESS:
                ok += 1
                if addr not in self._registered_with:  # the first time, and again after a failure
                    self._registered_with.add(addr)
                    log.info("registered with name server %s (%d topics)", addr, len(body_topics))
                if self.on_answer is not None:
                    self.on_answer(dict(resp.ext_fields or {}))
                if resp.body:
                    self._order_conf(addr, resp.body)
            else:
                self._registered_with.discard(addr)
                log.warning("name server %s refused registration: %s %s", addr, resp.code, resp.remark)
        return ok

    def _order_conf(self, addr: str, body: bytes) -> None:
        """A registration's answer carries the name server's ORDER_TOPIC_CONFIG (a KVTable, present once
        that namespace exists): the topics' ``order`` follows it, as RocketMQ's broker does."""
        try:
            table = fastjson.loads(body).get("table")
        except (ValueError, AttributeError):
            log.warning("name server %s answered a registration with a body that is not a KVTable", addr)
            return
        if isinstance(table, dict):
            self.topics.apply_order_conf({str(t) for t in table})

    def _topic_table(self, only: set[str] | None = None) -> TopicConfigSerializeWrapper:
        """The topics as registered (those in `only` that still exist, or all): a broker that is not
        readable and writable announces its own permission as every topic's (as RocketMQ does), so
        clients stop sending or pulling."""
        if only is None:
            wrapper = self.topics.wrapper()
        else:
            table = self.topics.table
            found = {t: table[t] for t in only if t in table}
            wrapper = TopicConfigSerializeWrapper(dataclasses.replace(self.topics.data_version), found)
        perm = self.config.broker_permission
        if not (PermName.is_readable(perm) and PermName.is_writeable(perm)):
            wrapper.topic_config_table = {
                name: dataclasses.replace(tc, perm=perm) for name, tc in wrapper.topic_config_table.items()
            }
        return wrapper

    def register_soon(self, topic: str | None = None) -> None:
        """Register right after a change of `topic` (None: of the broker, every topic is sent)."""
        if topic is None:
            self._all_changed = True
        else:
            self._changed.add(topic)
        if self._runner is not None and not self._runner.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._runner = loop.create_task(self._run(), name="register-name-servers-soon")

    async def _run(self) -> None:
        while self._all_changed or self._changed:
            await asyncio.sleep(0)  # the other changes of this burst join
            only = None if self._all_changed else self._changed
            self._all_changed, self._changed = False, set()
            try:
                await self.register_all(only)
            except Exception:
                log.exception("registration with the name servers failed")

    async def close(self) -> None:
        """Cancel a pending registration (before unregistering at shutdown)."""
        self._all_changed, self._changed = False, set()
        runner = self._runner
        if runner is not None and not runner.done():
            runner.cancel()
            try:
                await runner
            except asyncio.CancelledError:
                pass

    async def settled(self) -> None:
        """Wait until every scheduled registration has reached the name servers (or failed)."""
        while self._runner is not None and not self._runner.done():
            await asyncio.shield(self._runner)

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
