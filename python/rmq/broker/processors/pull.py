"""PULL_MESSAGE (11) with tag filtering, commit-offset piggyback and long polling (REMOTING.md §3.2,
§7.3). The response body is the stored records exactly as the store returns them.

LITE_PULL_MESSAGE (361) is the same request under the code 5.x clients use when the sysFlag carries the
lite-pull bit: same header, same answers, held for long polling only when its suspend bit asks for it."""

from __future__ import annotations

import os
import struct
import time

from rmq.broker.long_polling import HeldPull
from rmq.broker.services import BrokerServices
from rmq.broker.subscription import (
    SqlNotEnabledError,
    SubscriptionData,
    SubscriptionParseError,
    parse_subscription,
)
from rmq.broker.subscription_group import SubscriptionGroupConfig
from rmq.common.codes import MASTER_ID, PermName, PullSysFlag, ResponseCode
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.context import RequestContext
from rmq.remoting.headers import header_int, header_long, header_str

__all__ = ["PullProcessor"]

_FOUND = "FOUND"
# store status -> (response code, how nextBeginOffset is chosen is the store's answer)
_NO_NEW = ResponseCode.PULL_NOT_FOUND
_RETRY = ResponseCode.PULL_RETRY_IMMEDIATELY
_MOVED = ResponseCode.PULL_OFFSET_MOVED

_RECORD_SIZE = struct.Struct(">i")
_PHYSICAL_OFFSET = struct.Struct(">q")
_PHYSICAL_OFFSET_AT = 28
"""Where a stored record's physical offset is: after total size, magic, body CRC, queue id, flag (4 bytes
each) and queue offset (8)."""


def total_physical_memory() -> int:
    """The machine's RAM in bytes (Java's StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE); 0 if unknown."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def last_physical_offset(body: bytes) -> int:
    """The CommitLog offset of the last record of a pull answer's body (-1: none)."""
    pos, last, end = 0, -1, len(body)
    while pos + _PHYSICAL_OFFSET_AT + 8 <= end:
        size = _RECORD_SIZE.unpack_from(body, pos)[0]
        if size <= 0:
            break
        last = _PHYSICAL_OFFSET.unpack_from(body, pos + _PHYSICAL_OFFSET_AT)[0]
        pos += size
    return last


class PullProcessor:
    def __init__(self, services: BrokerServices) -> None:
        self.s = services
        self.memory = total_physical_memory()

    def _suggest(self, gcfg: SubscriptionGroupConfig, found_body: bytes | None) -> int:
        """``suggestWhichBrokerId`` (RocketMQ's PullMessageProcessor): with ``slaveReadEnable``, the group's
        ``whichBrokerWhenConsumeSlowly`` when the records pulled lie further back from the CommitLog's end
        than ``accessMessageInMemoryMaxRatio`` of the RAM (no longer in memory: let a slave serve them),
        else the group's ``brokerId``; without it, the master. Only a FOUND answer is measured (RocketMQ
        also measures the units a filter skipped)."""
        cfg = self.s.config
        if not cfg.slave_read_enable:
            return MASTER_ID
        if found_body:
            last = last_physical_offset(found_body)
            memory = self.memory * cfg.access_message_in_memory_max_ratio // 100
            if last >= 0 and self.s.store.commitlog_max_offset() - last > memory:
                return gcfg.which_broker_when_consume_slowly
        return gcfg.broker_id

    def __call__(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        return self.process(ctx, request, allow_suspend=True)

    def resume(self, held: HeldPull) -> None:
        """Re-run a held pull (long-poll wake-up or timeout) and answer it."""
        try:
            response = self.process(held.ctx, held.request, allow_suspend=False)
        except Exception as e:  # answer rather than leave the client waiting 30 s
            response = create_response(held.request, ResponseCode.SYSTEM_ERROR, str(e))
        if response is not None and not held.request.is_oneway:
            held.ctx.send_response(response)
            self.s.metrics.rpc.record(
                held.request.code, response.code, time.perf_counter() - held.started, long_polling=True
            )

    def _subscription(
        self, request: RemotingCommand, group: str, topic: str, sys_flag: int
    ) -> SubscriptionData | RemotingCommand:
        f = request.ext_fields
        if sys_flag & PullSysFlag.SUBSCRIPTION:
            try:
                return parse_subscription(
                    topic,
                    f.get("subscription"),
                    f.get("expressionType"),
                    header_long(f, "subVersion", 0),
                    sql_enabled=self.s.config.enable_property_filter,
                )
            except SqlNotEnabledError as e:
                return create_response(request, ResponseCode.SYSTEM_ERROR, str(e))
            except SubscriptionParseError as e:
                return create_response(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(e))
        sub = self.s.consumers.subscription(group, topic)
        if sub is None:
            return create_response(
                request,
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's subscription not exist, group: {group}",
            )
        if sub.sql is not None and not self.s.config.enable_property_filter:
            return create_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                "The broker does not support consumer to filter message by SQL92",
            )
        if sub.sub_version < header_long(f, "subVersion", 0):
            return create_response(
                request, ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
            )
        return sub

    def process(
        self, ctx: RequestContext, request: RemotingCommand, allow_suspend: bool
    ) -> RemotingCommand | None:
        s = self.s
        f = request.ext_fields
        group = header_str(f, "consumerGroup")
        topic = header_str(f, "topic")
        queue_id = header_int(f, "queueId")
        offset = header_long(f, "queueOffset")
        max_msgs = header_int(f, "maxMsgNums", 32)
        sys_flag = header_int(f, "sysFlag", 0)

        if not PermName.is_readable(s.config.broker_permission):
            return create_response(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{s.config.broker_ip1}] pulling message is forbidden",
            )
        gcfg = s.groups.find(group)
        if gcfg is None:
            return create_response(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist",
            )
        if not gcfg.consume_enable:
            return create_response(
                request, ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}"
            )
        tc = s.topics.get(topic)
        if tc is None:
            return create_response(
                request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not PermName.is_readable(tc.perm):
            return create_response(
                request, ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden"
            )
        if queue_id < 0 or queue_id >= tc.read_queue_nums:
            return create_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                f"[{tc.read_queue_nums}] consumer:[{ctx.remote_addr}]",
            )
        sub = self._subscription(request, group, topic, sys_flag)
        if isinstance(sub, RemotingCommand):
            return sub

        if sub.sql is None:
            status, next_offset, min_off, max_off, body, count = s.store.get_message(
                topic, queue_id, offset, max(1, min(max_msgs, 1024)), sub.codes
            )
        else:
            status, next_offset, min_off, max_off, body, count = s.store.get_message(
                topic, queue_id, offset, max(1, min(max_msgs, 1024)), None, 0, sub.sql, f"{group}#{topic}"
            )
        s.counters.get_requests += 1
        if status == _FOUND:
            code = ResponseCode.SUCCESS
            s.counters.get_messages += count
            s.group_gets.add(f"{topic}@{group}", count)
            s.metrics.got(topic, group, queue_id, count, len(body), next_offset)
        elif status in ("NO_MATCHED_MESSAGE", "MESSAGE_WAS_REMOVING"):
            code = _RETRY
        elif status in ("NO_MATCHED_LOGIC_QUEUE", "NO_MESSAGE_IN_QUEUE"):
            code = _NO_NEW if offset == 0 else _MOVED
        elif status in ("OFFSET_OVERFLOW_ONE", "OFFSET_FOUND_NULL"):
            code = _NO_NEW
        else:  # OFFSET_TOO_SMALL, OFFSET_OVERFLOW_BADLY
            code = _MOVED

        if code == _NO_NEW and allow_suspend and sys_flag & PullSysFlag.SUSPEND:
            timeout = header_long(f, "suspendTimeoutMillis", 15000)
            if not s.config.long_polling_enable:
                timeout = s.config.short_polling_time_mills
            s.holds.hold(
                HeldPull(ctx, request, topic, queue_id, offset, started=time.perf_counter()), timeout
            )
            self._commit(request, group, topic, queue_id, sys_flag, allow_suspend)
            return None

        self._commit(request, group, topic, queue_id, sys_flag, allow_suspend)
        suggest = self._suggest(gcfg, body if code == ResponseCode.SUCCESS else None)
        if code == ResponseCode.SUCCESS and s.fast_send is not None:
            self._vet(group, topic, tc.read_queue_nums, sys_flag, sub, suggest)
        if code == _MOVED and s.config.is_slave and not s.config.offset_check_in_slave:
            # A slave may be behind its master: it does not move the consumer's offset, it sends the
            # consumer back to the group's broker (RocketMQ's "PULL_OFFSET_MOVED:none correction").
            code, suggest = _RETRY, gcfg.broker_id
        return create_response(
            request,
            code,
            status,
            {
                "suggestWhichBrokerId": str(suggest),
                "nextBeginOffset": str(next_offset),
                "minOffset": str(min_off),
                "maxOffset": str(max_off),
            },
            body if code == ResponseCode.SUCCESS else None,
        )

    def _vet(
        self, group: str, topic: str, read_queues: int, sys_flag: int, sub: SubscriptionData, suggest: int
    ) -> None:
        """Let the network thread answer this group's next pulls of ``topic`` that find messages; it leaves
        the others here (nothing new, offsets moved, a lite pull's expression that is not a plain tag one).
        A pull without its subscription is answered by the one the broker holds (an SQL92 one's compiled
        expression is shared); a lite pull consumer's, with its subscription, by the tags it carries.
        Only what it answers exactly as this processor would: no ACL, a master whose answers always
        suggest the same broker (no ``slaveReadEnable``). Readable broker and topic and a consuming group
        were checked on the way here; every change to them, to the group's config or to its subscription
        makes the network thread forget (the controller's hooks)."""
        cfg = self.s.config
        if (
            sys_flag & PullSysFlag.CLASS_FILTER
            or (sub.sql is not None and not cfg.enable_property_filter)
            or cfg.acl_enable
            or self.s.read_check is not None
            or cfg.is_slave
            or cfg.slave_read_enable
        ):
            return
        # Long polling of these pulls, too, in the network thread (RocketMQ's longPollingEnable; off: short
        # polling, which this processor does).
        self.s.fast_send.set_pull_holding(cfg.long_polling_enable)
        if sys_flag & PullSysFlag.SUBSCRIPTION:
            # A lite pull consumer's: the network thread reads the tag expression each request carries.
            self.s.fast_send.allow_pull_lite(group, topic, read_queues, suggest)
        else:
            fast = self.s.fast_send
            fast.allow_pull(group, topic, read_queues, sub.codes, sub.sub_version, suggest, sub.sql)

    def _commit(
        self, request: RemotingCommand, group: str, topic: str, queue_id: int, sys_flag: int, first: bool
    ) -> None:
        # A slave takes no offset a pull carries (RocketMQ's storeOffsetEnable): clients clear the flag for
        # a slave anyway, and a commit reaches a slave only by UPDATE_CONSUMER_OFFSET.
        if first and sys_flag & PullSysFlag.COMMIT_OFFSET and not self.s.config.is_slave:
            commit = header_long(request.ext_fields, "commitOffset", -1)
            if commit >= 0:
                self.s.offsets.commit(group, topic, queue_id, commit)
