"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) — REMOTING.md §3.1, §7.2, §7.6.

The hot path: header parsing, checks, one call into the store, the response. With SYNC_FLUSH the
response is sent when the group commit covering the record completes (no task per request).
"""

from __future__ import annotations

import logging
import random
import time
import zlib

from rmq.broker.metrics import message_type
from rmq.broker.records import parse_properties, properties_string
from rmq.broker.schedule import schedule_target
from rmq.broker.services import BrokerServices, socket_addr
from rmq.broker.timer import TIMER_KEYS, TIMER_TOPIC, TimerError, park_timer, timer_deliver_ms
from rmq.common import codes
from rmq.common.codes import MessageConst, MessageSysFlag, PermName, RequestCode, ResponseCode
from rmq.common.route import TopicConfig
from rmq.common.topic import check_topic
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.context import RequestContext
from rmq.remoting.headers import HeaderError
from rmq.store import (
    DiskFullError,
    MessageIllegalError,
    SlaveStoreError,
    StoreShutDownError,
)

__all__ = ["SendProcessor"]

log = logging.getLogger(__name__)

# SEND_MESSAGE_V2 one-letter keys -> V1 names.
_V2 = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
}
_SEP = "\x02"
_KV = "\x01"
_DELAY_KEY = MessageConst.DELAY_TIME_LEVEL + "\x01"
_TRAN_KEY = MessageConst.TRANSACTION_PREPARED + "\x01"
_TIMER_MARK = "TIMER_"
_WAIT_KEY = MessageConst.WAIT_STORE_MSG_OK + "\x01"
_UNIQ_KEY = MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX + "\x01"
_MAX_PROPERTIES = 32767


# What RocketMQ answers a send to a slave (SERVICE_NOT_AVAILABLE, from its store's checkStoreStatus).
_SLAVE_REMARK = (
    "service not available now. It may be caused by one of the following reasons: the broker's disk is full, "
    "messages are put to the slave, message store has been shut down, etc."
)
# Warn about SLAVE_NOT_AVAILABLE answers at most this often (with how many since the last warning).
_SLAVE_WARN_INTERVAL_S = 5.0

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1


def _int(fields: dict[str, str], key: str, default: int | None = None, limit: int = _INT_MAX) -> int:
    v = fields.get(key)
    if v is None or v == "":
        if default is None:
            raise HeaderError(f"the custom field <{key}> is null")
        return default
    try:
        n = int(v)
    except ValueError:
        raise HeaderError(f"the custom field <{key}> is not a number: {v!r}") from None
    if not -limit - 1 <= n <= limit:
        raise HeaderError(f"the custom field <{key}> is out of range: {v}")
    return n


def _bool(fields: dict[str, str], key: str) -> bool:
    v = fields.get(key)
    return v is not None and v.strip().lower() in ("true", "1")


def _inflate(data: bytes | memoryview, limit: int) -> bytes | None:
    d = zlib.decompressobj()
    try:
        out = d.decompress(bytes(data), limit + 1)
    except zlib.error:
        return None
    if len(out) > limit or not d.eof:
        return None
    return out


def remove_property(props: str, key: str) -> str:
    parts = [p for p in props.split(_SEP) if p and not p.startswith(key + _KV)]
    return _SEP.join(parts)


class SendProcessor:
    def __init__(self, services: BrokerServices) -> None:
        self.s = services
        cfg = services.config
        self._cluster_prop = MessageConst.CLUSTER + _KV + cfg.broker_cluster_name
        self._region = cfg.region_id
        self._trace = "true" if cfg.trace_on else "false"
        self._sync_flush = cfg.sync_flush
        self._max_body = cfg.max_message_size
        self._max_delay_level = len(services.delay_levels)
        self._batch_uniq_keys_dropped = 0
        self._uniq_warn_at = 1
        self._slave = cfg.is_slave
        self._sync_master = cfg.broker_role == "SYNC_MASTER"
        self._slave_not_available = 0
        self._slave_warned_at = 0.0
        self._slave_reason = ""
        self._refused_on_slave = 0
        self._refused_warned_at = 0.0
        self._fast_failure = services.fast_failure

    # --- entry --------------------------------------------------------------------------------------
    def __call__(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        busy = self._fast_failure.waited_too_long(ctx, request)
        if busy is not None:
            return busy
        fields = request.ext_fields
        if request.code == RequestCode.SEND_MESSAGE_V2 or request.code == RequestCode.SEND_BATCH_MESSAGE:
            h = {_V2[k]: v for k, v in fields.items() if k in _V2}
        else:
            h = fields
        batch = request.code == RequestCode.SEND_BATCH_MESSAGE or _bool(h, "batch")
        return self.send(ctx, request, h, batch)

    def _error(self, request: RemotingCommand, code: int, remark: str) -> RemotingCommand:
        return create_response(request, code, remark)

    # --- checks (AbstractSendMessageProcessor.msgCheck) --------------------------------------------
    def _topic_for_send(
        self, request: RemotingCommand, h: dict[str, str], topic: str, queue_id: int
    ) -> TopicConfig | RemotingCommand:
        s = self.s
        tc = s.topics.table.get(topic)
        if (
            tc is not None
            and s.config.broker_permission & PermName.WRITE
            and tc.perm & PermName.WRITE
            and queue_id < tc.read_queue_nums
            and queue_id < tc.write_queue_nums
            and topic not in codes.NOT_ALLOWED_SEND_TOPICS
        ):
            return tc  # the common case: a known, writable topic (its name was checked at creation)
        if not PermName.is_writeable(s.config.broker_permission):
            return self._error(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{s.config.broker_ip1}] sending message is forbidden",
            )
        # A name too long (> 127) is a SYSTEM_ERROR like an illegal one, as the Apache broker answers.
        bad = check_topic(topic)
        if bad is not None:
            return self._error(request, ResponseCode.SYSTEM_ERROR, bad)
        if topic in codes.NOT_ALLOWED_SEND_TOPICS:
            return self._error(
                request, ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        tc = s.topics.get(topic)
        if tc is None:
            if topic.startswith(codes.RETRY_GROUP_TOPIC_PREFIX):
                tc = s.topics.create_in_back(topic, 1)
            else:
                tc = s.topics.create_in_send(
                    topic,
                    h.get("defaultTopic") or codes.AUTO_CREATE_TOPIC_KEY_TOPIC,
                    _int(h, "defaultTopicQueueNums", 4),
                )
            if tc is None:
                return self._error(
                    request,
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please!",
                )
        if not PermName.is_writeable(tc.perm):
            return self._error(
                request, ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
            )
        if queue_id >= max(tc.read_queue_nums, tc.write_queue_nums):
            return self._error(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, {tc.topic_name} "
                f"read/write queues {tc.read_queue_nums}/{tc.write_queue_nums}",
            )
        return tc

    # --- the send -----------------------------------------------------------------------------------
    def send(
        self, ctx: RequestContext, request: RemotingCommand, h: dict[str, str], batch: bool
    ) -> RemotingCommand | None:
        s = self.s
        if self._slave:
            return self._refuse_on_slave(request)
        topic = h.get("topic")
        if not topic:
            raise HeaderError("the custom field <topic> is null")
        queue_id = _int(h, "queueId")
        sys_flag = _int(h, "sysFlag", 0)
        born_ts = _int(h, "bornTimestamp", 0, _LONG_MAX)
        flag = _int(h, "flag", 0)
        reconsume = _int(h, "reconsumeTimes", 0)
        props = h.get("properties") or ""
        body = request.body or b""

        tc = self._topic_for_send(request, h, topic, queue_id)
        if isinstance(tc, RemotingCommand):
            return tc
        sent_topic, mtype = topic, message_type(props)
        if s.fast_send is not None:
            self._vet(topic, tc)
        if queue_id < 0:
            queue_id = random.randrange(max(tc.write_queue_nums, 1))

        if len(body) > self._max_body:
            return self._error(
                request,
                ResponseCode.MESSAGE_ILLEGAL,
                f"message body size {len(body)} exceeds maxMessageSize {self._max_body}",
            )
        # An empty body is stored, as the Apache broker does (the Java client refuses to send one).

        if topic.startswith(codes.RETRY_GROUP_TOPIC_PREFIX):
            routed = self._route_retry(request, h, topic, queue_id, reconsume, props)
            if isinstance(routed, RemotingCommand):
                return routed
            topic, queue_id, props = routed

        response_qid = queue_id
        if not batch and props and (_DELAY_KEY in props or _TRAN_KEY in props or _TIMER_MARK in props):
            parked = self._park(request, topic, queue_id, sys_flag, props)
            if isinstance(parked, RemotingCommand):
                return parked
            topic, queue_id, sys_flag, props = parked

        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MessageSysFlag.MULTI_TAGS_FLAG
        wait = True
        if props:
            if props.endswith(_SEP):
                props = props.rstrip(_SEP)
            i = props.find(_WAIT_KEY)
            if i >= 0 and (i == 0 or props[i - 1] == _SEP):
                j = props.find(_SEP, i)
                wait = props[i + len(_WAIT_KEY) : j if j >= 0 else len(props)] != "false"
                if not batch:
                    # The 4.9.8 broker does not store WAIT with single messages.
                    if j >= 0:
                        props = props[:i] + props[j + 1 :]
                    else:
                        props = props[: max(i - 1, 0)]
        born_host = socket_addr(ctx.remote_addr)
        if batch and _UNIQ_KEY in props:
            props = self._drop_batch_uniq_key(props, h)
        if batch and sys_flag & MessageSysFlag.COMPRESSED_FLAG:
            # The C++ client zlib-compresses a whole batch body of 4 KiB or more.
            inflated = _inflate(body, self._max_body)
            if inflated is None:
                return self._error(
                    request,
                    ResponseCode.MESSAGE_ILLEGAL,
                    "compressed batch body is not valid zlib or too large",
                )
            body = inflated
            sys_flag &= ~(MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_TYPE_MASK)
        busy = self._fast_failure.page_cache_busy(request, s.store.put_lock_held_ms())
        if busy is not None:
            return busy
        try:
            if batch:
                extra = props + _SEP + self._cluster_prop if props else self._cluster_prop
                results = s.store.put_batch(
                    topic,
                    queue_id,
                    body,
                    extra.encode(),
                    sys_flag,
                    born_ts,
                    born_host,
                    reconsume,
                )
                msg_id = ",".join(r[0] for r in results)
                first, last = results[0], results[-1]
                queue_offset = first[1]
                end = last[2] + last[3]
                s.counters.put_messages += len(results)
                s.metrics.put(sent_topic, mtype, [r[3] for r in results])
            else:
                stored = props + _SEP + self._cluster_prop if props else self._cluster_prop
                if len(stored) > _MAX_PROPERTIES:
                    return self._error(
                        request,
                        ResponseCode.MESSAGE_ILLEGAL,
                        f"message properties length {len(stored)} exceeds {_MAX_PROPERTIES}",
                    )
                msg_id, queue_offset, phys, size, _ = s.store.put(
                    topic, queue_id, body, stored.encode(), flag, sys_flag, born_ts, born_host, reconsume
                )
                end = phys + size
                s.counters.put_messages += 1
                s.metrics.put(sent_topic, mtype, [size])
                if topic.startswith(codes.DLQ_GROUP_TOPIC_PREFIX) and sent_topic.startswith(
                    codes.RETRY_GROUP_TOPIC_PREFIX
                ):
                    s.metrics.dead(sent_topic, sent_topic[len(codes.RETRY_GROUP_TOPIC_PREFIX) :])
        except MessageIllegalError as e:
            return self._error(request, ResponseCode.MESSAGE_ILLEGAL, str(e))
        except SlaveStoreError:
            return self._refuse_on_slave(request)
        except (DiskFullError, StoreShutDownError) as e:
            return self._error(request, ResponseCode.SERVICE_NOT_AVAILABLE, str(e))

        response = create_response(
            request,
            ResponseCode.SUCCESS,
            None,
            {
                "msgId": msg_id,
                "queueId": str(response_qid),
                "queueOffset": str(queue_offset),
                "MSG_REGION": self._region,
                "TRACE_ON": self._trace,
            },
        )
        if self._sync_master and wait:
            return self._replicate(end, ctx, response)
        if self._sync_flush and wait and s.hold_until_flushed(end, ctx, response):
            return None
        return response

    def _refuse_on_slave(self, request: RemotingCommand) -> RemotingCommand:
        """A slave takes messages from its master only: SERVICE_NOT_AVAILABLE, as RocketMQ's slave
        answers (warned about at most every few seconds, with how many were refused)."""
        self._refused_on_slave += 1
        now = time.monotonic()
        if now - self._refused_warned_at >= _SLAVE_WARN_INTERVAL_S:
            log.warning(
                "slave: %d sends refused (SERVICE_NOT_AVAILABLE): messages are put to the master",
                self._refused_on_slave,
            )
            self._refused_warned_at = now
            self._refused_on_slave = 0
        return self._error(request, ResponseCode.SERVICE_NOT_AVAILABLE, _SLAVE_REMARK)

    def _replicate(self, end: int, ctx: RequestContext, response: RemotingCommand) -> RemotingCommand | None:
        """SYNC_MASTER: answer once a slave acknowledged the record (FLUSH_SLAVE_TIMEOUT after
        slaveTimeout), or at once SLAVE_NOT_AVAILABLE when no slave is connected or the slave lags more
        than haSlaveFallbehindMax (the message is stored either way, as RocketMQ does)."""
        s = self.s
        if s.hold_until_replicated(end, ctx, response):
            return None
        ha = s.ha_master
        assert ha is not None
        response.code = ResponseCode.SLAVE_NOT_AVAILABLE
        self._slave_not_available += 1
        now = time.monotonic()
        reason = "lagging" if ha.connections else "none"
        if reason != self._slave_reason or now - self._slave_warned_at >= _SLAVE_WARN_INTERVAL_S:
            log.warning(
                "SYNC_MASTER: %d sends answered SLAVE_NOT_AVAILABLE (stored, not replicated yet): %s",
                self._slave_not_available,
                f"the slave acknowledged offset {ha.push2slave_max}, {end - ha.push2slave_max} bytes behind "
                f"this send (haSlaveFallbehindMax {ha.settings.fallbehind_max})"
                if ha.connections
                else "no slave is connected",
            )
            self._slave_warned_at = now
            self._slave_reason = reason
            self._slave_not_available = 0
        if self._sync_flush and s.hold_until_flushed(end, ctx, response):
            return None
        return response

    def _vet(self, topic: str, tc: TopicConfig) -> None:
        """Let the network thread answer the next sends and batches to `topic` itself (it still
        declines delayed, timer and malformed messages, which keep coming here, and transactional half
        messages until the first is parked here)."""
        if (
            PermName.is_writeable(self.s.config.broker_permission)
            and PermName.is_writeable(tc.perm)
            and topic not in codes.NOT_ALLOWED_SEND_TOPICS
            and not topic.startswith(codes.RETRY_GROUP_TOPIC_PREFIX)
        ):
            self.s.fast_send.allow_topic(
                topic, tc.read_queue_nums, tc.write_queue_nums, tc.topic_filter_type == "MULTI_TAG"
            )

    # --- delay levels and transactional half messages --------------------------------------------
    def _drop_batch_uniq_key(self, props: str, h: dict[str, str]) -> str:
        """The batch-level properties are appended to every message of a batch (REMOTING.md §4.5), but a
        UNIQ_KEY there is the id of the batch itself (rocketmq-client-rust, Java 5.x clients), not of any
        of its messages: appended, it would replace each message's own UNIQ_KEY and give them all one
        message id (Apache ISSUE #9416, fixed there by appending nothing). Each message keeps its own."""
        parts = props.split(_SEP)
        kept = [p for p in parts if not p.startswith(_UNIQ_KEY)]
        if len(kept) == len(parts):
            return props  # "UNIQ_KEY\x01" inside another entry
        self._batch_uniq_keys_dropped += 1
        self.warn_batch_uniq_keys(h.get("producerGroup"))
        return _SEP.join(kept)

    def batch_uniq_keys_dropped(self) -> int:
        """Batches whose batch-level UNIQ_KEY was dropped so far, here and by the network thread."""
        fast = self.s.fast_send.fast_batch_uniq_keys_dropped() if self.s.fast_send is not None else 0
        return self._batch_uniq_keys_dropped + fast

    def warn_batch_uniq_keys(self, group: str | None = None) -> None:
        """Warn when the batches whose batch-level UNIQ_KEY was dropped reach 1, 2, 4, 8, ... (the count
        without a line per batch); called for each one dropped here, and every second for those the
        network thread dropped."""
        n = self.batch_uniq_keys_dropped()
        if n < self._uniq_warn_at:
            return
        while self._uniq_warn_at <= n:
            self._uniq_warn_at *= 2
        log.warning(
            "batch-level UNIQ_KEY dropped from %d batches so far (%d of them by the network thread%s): it "
            "is the id of the batch, not of its messages; each message keeps its own",
            n,
            n - self._batch_uniq_keys_dropped,
            f"; the last here from producer group {group}" if group else "",
        )

    def _park(
        self, request: RemotingCommand, topic: str, queue_id: int, sys_flag: int, props: str
    ) -> tuple[str, int, int, str] | RemotingCommand:
        """Divert a transactional half message to RMQ_SYS_TRANS_HALF_TOPIC, or a delayed one to
        SCHEDULE_TOPIC_XXXX, recording the real destination in its properties."""
        pmap = parse_properties(props)
        if pmap.get(MessageConst.TRANSACTION_PREPARED, "").lower() == "true":
            if self.s.config.reject_transaction_message:
                return self._error(
                    request, ResponseCode.NO_PERMISSION, "Sending transaction message is forbidden"
                )
            uniq = pmap.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if uniq:  # RocketMQ 5.x's broker names the transaction after the message (kept on commit)
                pmap[MessageConst.TRANSACTION_ID] = uniq
            pmap[MessageConst.REAL_TOPIC] = topic
            pmap[MessageConst.REAL_QUEUE_ID] = str(queue_id)
            self.s.topics.create_in_back(codes.TRANS_HALF_TOPIC, 1)
            if self.s.fast_send is not None:
                # The network thread parks the next ones to vetted topics the same way (until a change
                # to the broker's config or the half topic makes it forget, and this allows it again).
                self.s.fast_send.allow_half()
            sys_flag = MessageSysFlag.reset_transaction_type(sys_flag, MessageSysFlag.TRANSACTION_NOT_TYPE)
            return codes.TRANS_HALF_TOPIC, 0, sys_flag, properties_string(pmap)
        try:
            level = int(pmap.get(MessageConst.DELAY_TIME_LEVEL) or 0)
        except ValueError:
            return self._error(request, ResponseCode.MESSAGE_ILLEGAL, "DELAY must be a whole number")
        tran = MessageSysFlag.transaction_type(sys_flag)
        plain = tran in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
        if plain and level <= 0 and any(k in pmap for k in TIMER_KEYS):
            try:
                at = timer_deliver_ms(pmap, int(time.time() * 1000), self.s.config.timer_max_delay_sec)
            except TimerError as e:
                return self._error(request, ResponseCode.MESSAGE_ILLEGAL, str(e))
            if at is not None:
                self.s.topics.create_in_back(TIMER_TOPIC, 1)
                topic, queue_id = park_timer(topic, queue_id, pmap, at)
                return topic, queue_id, sys_flag, properties_string(pmap)
        if level > 0 and plain:
            topic, queue_id, _ = schedule_target(topic, queue_id, pmap, level, self._max_delay_level)
            return topic, queue_id, sys_flag, properties_string(pmap)
        return topic, queue_id, sys_flag, props

    # --- retry topics (SendMessageProcessor.handleRetryAndDLQ) -------------------------------------
    def _route_retry(
        self,
        request: RemotingCommand,
        h: dict[str, str],
        topic: str,
        queue_id: int,
        reconsume: int,
        props: str,
    ) -> tuple[str, int, str] | RemotingCommand:
        s = self.s
        group = topic[len(codes.RETRY_GROUP_TOPIC_PREFIX) :]
        cfg = s.groups.find(group)
        if cfg is None:
            return self._error(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group}",
            )
        max_times = cfg.retry_max_times
        if request.version >= codes.V3_4_9 and h.get("maxReconsumeTimes"):
            max_times = _int(h, "maxReconsumeTimes", max_times)
        if reconsume < max_times:
            return topic, queue_id, props
        dlq = codes.DLQ_GROUP_TOPIC_PREFIX + group
        s.topics.create_in_back(dlq, 1, PermName.READ | PermName.WRITE)
        return dlq, 0, remove_property(props, MessageConst.DELAY_TIME_LEVEL)
