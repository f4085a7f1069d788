"""VIEW_BROKER_STATS_DATA (315): a count over the last minute, hour and day, as ``BrokerStatsData`` (sum,
tps, avgpt per window). The stats ``mqadmin statsAll`` asks for are answered:

* ``TOPIC_PUT_NUMS`` (key: topic): messages stored to the topic, counted from the store itself (per queue,
  the messages stored since the window's start), so the count is exact, survives a restart and includes
  the network thread's fast sends; avgpt (messages per request) is not known there and is 0.
* ``GROUP_GET_NUMS`` (key: ``topic@group``): messages the group pulled from the topic since start, in
  buckets (:mod:`rmq.broker.stats`); avgpt is messages per pull.

Any other stats name, a topic this broker does not have or a group that pulled nothing from the topic is
answered SYSTEM_ERROR ``The stats <name> <key> not exist``, as by Apache's broker. Apache samples its
counters every 10 s from the next whole minute, so right after a burst Apache still reports 0 where rmq
already counts it.
"""

from __future__ import annotations

import time
from typing import Final

from rmq.broker.services import BrokerServices
from rmq.broker.stats import DAY_MS, HOUR_MS, MINUTE_MS, WindowSum
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.context import Processor, RequestContext
from rmq.remoting.headers import header_str

__all__ = ["GROUP_GET_NUMS", "TOPIC_PUT_NUMS", "StatsProcessors"]

TOPIC_PUT_NUMS: Final = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS: Final = "GROUP_GET_NUMS"
_WINDOWS: Final = (("statsMinute", MINUTE_MS), ("statsHour", HOUR_MS), ("statsDay", DAY_MS))


class StatsProcessors:
    def __init__(self, services: BrokerServices) -> None:
        self.s = services

    def table(self) -> dict[int, Processor]:
        return {RequestCode.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data}

    def view_broker_stats_data(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        name, key = header_str(f, "statsName"), header_str(f, "statsKey")
        self.s.drain_pulls()
        now = int(time.time() * 1000)
        sums: list[WindowSum] | None = None
        if name == TOPIC_PUT_NUMS:
            sums = self._topic_puts(key, now)
        elif name == GROUP_GET_NUMS and key in self.s.group_gets:
            sums = [self.s.group_gets.window(key, w, now) for _, w in _WINDOWS]
        if sums is None:
            return create_response(
                request, ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist"
            )
        body = {
            field: {
                "avgpt": ws.sum / ws.times if ws.times else 0.0,
                "sum": ws.sum,
                "tps": ws.sum * 1000 / window,
            }
            for (field, window), ws in zip(_WINDOWS, sums, strict=True)
        }
        return create_response(request, body=fastjson.dumps(body))

    def _topic_puts(self, topic: str, now: int) -> list[WindowSum] | None:
        tc = self.s.topics.get(topic)
        if tc is None:
            return None
        store = self.s.store
        out = []
        for _, window in _WINDOWS:
            n = 0
            for qid in range(max(tc.write_queue_nums, tc.read_queue_nums)):
                n += store.max_offset(topic, qid) - store.offset_by_time(topic, qid, now - window)
            out.append(WindowSum(n, 0))
        return out
