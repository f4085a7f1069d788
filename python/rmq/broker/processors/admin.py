"""Admin requests a user needs (REMOTING.md §3.6): topics, subscription groups, stats, runtime
info and broker config. Runtime config updates accept only an allowlist of keys, none of which is a
filesystem path or runs anything."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable

from rmq._store import StoreError
from rmq.broker import journal
from rmq.broker.config import ConfigError, parse_properties_text, property_kind
from rmq.broker.disk import commitlog_disk_ratio, percent_up
from rmq.broker.schedule import DEFAULT_DELAY_LEVELS
from rmq.broker.services import BrokerServices
from rmq.broker.stats import MINUTE_MS
from rmq.broker.subscription_group import SubscriptionGroupConfig
from rmq.common import codes, fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.fastjson import ObjectKey
from rmq.common.route import TopicConfig
from rmq.common.topic import check_topic
from rmq.common.topic_attributes import alter_attributes, retention_ms
from rmq.remoting.command import RemotingCommand, create_response
from rmq.remoting.context import Processor, RequestContext
from rmq.remoting.headers import header_bool, header_int, header_str

__all__ = ["AdminProcessors"]

log = logging.getLogger(__name__)


DEFAULT_FILE_RESERVED_HOURS = 72
"""The store's ``fileReservedTime`` when not given (rust/store/src/config.rs)."""

# What RocketMQ's slave answers a topic or subscription group change (AdminBrokerProcessor.validateSlave).
_SLAVE_REMARK = (
    "Can't modify topic or subscription group from slave broker, please execute it from master broker."
)


def _mq_key(topic: str, broker: str, qid: int) -> ObjectKey:
    return ObjectKey.from_mapping({"brokerName": broker, "queueId": qid, "topic": topic})


class AdminProcessors:
    def __init__(self, services: BrokerServices) -> None:
        self.s = services

    def table(self) -> dict[int, Processor]:
        master_only = self._master_only if self.s.config.is_slave else (lambda handler: handler)
        return {
            RequestCode.UPDATE_AND_CREATE_TOPIC: master_only(self.update_and_create_topic),
            RequestCode.DELETE_TOPIC_IN_BROKER: master_only(self.delete_topic),
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: master_only(self.update_subscription_group),
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: master_only(self.delete_subscription_group),
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            RequestCode.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connection_list,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queue,
            RequestCode.CLEAN_UNUSED_TOPIC: self.clean_unused_topic,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
        }

    def _master_only(self, handler: Processor) -> Processor:
        """On a slave, a topic or subscription group change is refused (SYSTEM_ERROR, as RocketMQ's
        slave answers): its configs are its master's."""

        def refuse(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
            log.warning(
                "slave: request %d from %s refused: topics and subscription groups are changed on the master",
                request.code,
                ctx.remote_addr,
            )
            return create_response(request, ResponseCode.SYSTEM_ERROR, _SLAVE_REMARK)

        return refuse

    # --- topics -----------------------------------------------------------------------------------
    def update_and_create_topic(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        f = request.ext_fields
        topic = header_str(f, "topic")
        bad = check_topic(topic)
        if bad is not None:
            return create_response(request, ResponseCode.SYSTEM_ERROR, bad)
        if topic in codes.SYSTEM_TOPICS or topic == self.s.config.broker_cluster_name:
            return create_response(
                request, ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic."
            )
        read, write = header_int(f, "readQueueNums"), header_int(f, "writeQueueNums")
        if not (0 < read <= 1024 and 0 < write <= 1024):
            return create_response(
                request, ResponseCode.SYSTEM_ERROR, "readQueueNums and writeQueueNums must be within 1..1024"
            )
        ftype = f.get("topicFilterType") or "SINGLE_TAG"
        if ftype not in ("SINGLE_TAG", "MULTI_TAG"):
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"bad topicFilterType {ftype!r}")
        old = self.s.topics.get(topic)
        try:
            attributes = alter_attributes(
                old.attributes if old is not None else {}, f.get("attributes"), create=old is None
            )
        except ValueError as e:
            log.warning("topic %s (from %s) refused: %s", topic, ctx.remote_addr, e)
            return create_response(request, ResponseCode.SYSTEM_ERROR, str(e))
        tc = TopicConfig(
            topic,
            read,
            write,
            header_int(f, "perm", 6),
            ftype,
            header_int(f, "topicSysFlag", 0),
            header_bool(f, "order", False),
            attributes,
        )
        self.s.topics.update(tc)
        return self._after_registration(create_response(request), f"topic {topic} created")

    async def delete_topic(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        topic = header_str(request.ext_fields, "topic")
        if topic in codes.SYSTEM_TOPICS:
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"{topic} is a system topic")
        self.s.topics.delete(topic)
        self.s.offsets.remove_topic(topic)
        self.s.group_gets.forget(topic=topic)
        # In a thread: the store waits until the topic's messages are all dispatched.
        try:
            await asyncio.to_thread(self.s.store.delete_topic, topic)
        except StoreError as e:
            log.warning(
                "deleting topic %s (from %s): its config is gone, its queues not: %s",
                topic,
                ctx.remote_addr,
                e,
            )
            return create_response(
                request, ResponseCode.SYSTEM_ERROR, f"topic {topic}: queues not deleted: {e}"
            )
        answer = self._after_registration(create_response(request), f"topic {topic} deleted")
        return answer if isinstance(answer, RemotingCommand) else await answer

    # --- store housekeeping (mqadmin cleanExpiredCQ, cleanUnusedTopic, deleteExpiredCommitLog) --------
    async def clean_expired_consume_queue(
        self, ctx: RequestContext, request: RemotingCommand
    ) -> RemotingCommand:
        """Remove the ConsumeQueues whose messages retention has all deleted (RocketMQ's
        ``cleanExpiredConsumerQueue``); such a queue starts again at offset 0."""
        try:
            removed = await asyncio.to_thread(self.s.store.clean_expired_queues)
        except StoreError as e:
            log.warning("cleanExpiredCQ from %s failed: %s", ctx.remote_addr, e)
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"cleanExpiredCQ failed: {e}")
        # Which ones: the store's own log line (rmq.store clean-expired-queue).
        log.warning("cleanExpiredCQ from %s: %d ConsumeQueues removed", ctx.remote_addr, len(removed))
        return create_response(request)

    async def clean_unused_topic(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """Remove the ConsumeQueues of topics this broker has no config for (RocketMQ's
        ``cleanUnusedTopic``). System topics, ``rmq_sys_`` topics and retry and dead-letter topics
        are kept whether or not they have a config: rmq writes some of them without one."""
        keep = [
            t
            for t, _ in self.s.store.queues()
            if t in self.s.topics
            or t in codes.SYSTEM_TOPICS
            or t.startswith(
                (codes.SYSTEM_TOPIC_PREFIX, codes.RETRY_GROUP_TOPIC_PREFIX, codes.DLQ_GROUP_TOPIC_PREFIX)
            )
        ]
        try:
            removed = await asyncio.to_thread(self.s.store.clean_unused_topics, keep)
        except StoreError as e:
            log.warning("cleanUnusedTopic from %s failed: %s", ctx.remote_addr, e)
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"cleanUnusedTopic failed: {e}")
        for topic in removed:
            self.s.group_gets.forget(topic=topic)  # its stats; consumer offsets stay, as in RocketMQ
        # Which ones: the store's own log line (rmq.store clean-unused-topic).
        log.warning(
            "cleanUnusedTopic from %s: %d topics' ConsumeQueues removed", ctx.remote_addr, len(removed)
        )
        return create_response(request)

    def delete_expired_commit_log(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """The next 20 retention rounds delete CommitLog files older than ``fileReservedTime``
        whatever the hour (RocketMQ's ``executeDeleteFilesManually``)."""
        self.s.store.delete_files_manually()
        log.warning(
            "deleteExpiredCommitLog from %s: the next 20 retention rounds delete expired CommitLog files",
            ctx.remote_addr,
        )
        return create_response(request)

    # How long a topic change's answer waits for the name servers to have it (RocketMQ registers
    # synchronously before answering, so a route or topic list read right after the answer has it).
    REGISTRATION_WAIT_S = 3.0

    def _after_registration(
        self, response: RemotingCommand, what: str
    ) -> RemotingCommand | Awaitable[RemotingCommand]:
        settled = self.s.registrations_settled
        if settled is None:
            return response

        async def answer() -> RemotingCommand:
            try:
                await asyncio.wait_for(settled(), self.REGISTRATION_WAIT_S)
            except TimeoutError:
                log.warning(
                    "%s: answered before the name servers acknowledged it (waited %.1f s; the "
                    "registration goes on)",
                    what,
                    self.REGISTRATION_WAIT_S,
                )
            return response

        return answer()

    def get_all_topic_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return create_response(request, body=self.s.topics.wrapper().to_json())

    def get_topic_stats_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        topic = header_str(request.ext_fields, "topic")
        tc = self.s.topics.get(topic)
        if tc is None:
            return create_response(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = self.s.store
        entries = []
        for qid in range(tc.write_queue_nums):
            mx = store.max_offset(topic, qid)
            last = store.store_time_at(topic, qid, mx - 1) if mx > 0 else None
            entries.append(
                (
                    _mq_key(topic, self.s.config.broker_name, qid),
                    {
                        "lastUpdateTimestamp": last or 0,
                        "maxOffset": mx,
                        "minOffset": store.min_offset(topic, qid),
                    },
                )
            )
        return create_response(request, body=fastjson.dumps_with_object_keys({"offsetTable": dict(entries)}))

    # --- consumers --------------------------------------------------------------------------------
    def get_consume_stats(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        group = header_str(f, "consumerGroup")
        only = f.get("topic") or None
        s = self.s
        topics: set[str] = {only} if only else set()
        if not only:
            topics = {t for t in s.topics.table if s.offsets.offsets_of(group, t)}
            info = s.consumers.get(group)
            if info is not None:
                topics |= set(info.subscriptions)
        entries = []
        s.drain_pulls()
        pulled = s.metrics.pulled
        for topic in sorted(topics):
            tc = s.topics.get(topic)
            if tc is None:
                continue
            own_retention = tc.attributes and retention_ms(tc.attributes) is not None
            popped = s.pop_revive.inflight_of(group, topic) if s.pop_revive is not None else {}
            for qid in range(tc.write_queue_nums):
                broker_off = s.store.max_offset(topic, qid)
                consumer_off = max(s.offsets.query(group, topic, qid), 0)
                if own_retention:  # messages its retention.hours hides are not counted as lag
                    consumer_off = max(consumer_off, s.store.min_offset(topic, qid))
                last = s.store.store_time_at(topic, qid, consumer_off - 1) if consumer_off > 0 else None
                # 5.x's pullOffset: where the group's pulls got to (never behind its committed offset).
                pull_off = min(max(pulled.get((group, topic, qid), consumer_off), consumer_off), broker_off)
                entries.append(
                    (
                        _mq_key(topic, s.config.broker_name, qid),
                        {
                            "brokerOffset": broker_off,
                            "consumerOffset": consumer_off,
                            "pullOffset": pull_off,
                            # rmq's own: pulled and not committed, or (POP) popped and not acked yet
                            "inflight": pull_off - consumer_off + popped.get(qid, 0),
                            "lastTimestamp": last or 0,
                        },
                    )
                )
        # The group's pull rate over the last minute, of the one topic asked for or of all its topics.
        tps = sum(s.group_gets.window(f"{t}@{group}", MINUTE_MS).sum for t in topics) * 1000 / MINUTE_MS
        body = fastjson.dumps_with_object_keys({"consumeTps": tps, "offsetTable": dict(entries)})
        return create_response(request, body=body)

    def update_subscription_group(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        data = fastjson.loads(bytes(request.body or b"{}"))
        try:
            cfg = SubscriptionGroupConfig.from_dict(data)
            cfg.alter_attributes(self.s.groups.table.get(cfg.group_name), data.get("attributes") or {})
        except (ValueError, TypeError) as e:
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"bad subscription group: {e}")
        self.s.groups.update(cfg)
        return create_response(request)

    def get_all_subscription_group(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return create_response(request, body=fastjson.dumps(self.s.groups.to_dict()))

    def delete_subscription_group(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        f = request.ext_fields
        group = header_str(f, "groupName")
        self.s.groups.delete(group)
        self.s.group_gets.forget(group=group)
        if header_bool(f, "removeOffset", False):
            self.s.offsets.remove_group(group)
        return create_response(request)

    def get_all_consumer_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        return create_response(request, body=fastjson.dumps(self.s.offsets.to_dict()))

    def get_all_delay_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        """``delayOffset.json``'s content (a slave copies it), as RocketMQ's master answers."""
        schedule = self.s.schedule
        offsets = schedule.to_dict() if schedule is not None else {"offsetTable": {}}
        return create_response(request, body=fastjson.dumps(offsets))

    def get_consumer_connection_list(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        group = header_str(request.ext_fields, "consumerGroup")
        info = self.s.consumers.get(group)
        if info is None or not info.channels:
            return create_response(
                request, ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online"
            )
        body = {
            "connectionSet": [c.describe() for c in info.channels.values()],
            "consumeFromWhere": info.consume_from_where,
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "subscriptionTable": {t: sd.to_dict() for t, sd in info.subscriptions.items()},
        }
        return create_response(request, body=fastjson.dumps(body))

    def get_producer_connection_list(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        group = header_str(request.ext_fields, "producerGroup")
        chans = self.s.producers.groups.get(group, {})
        return create_response(
            request, body=fastjson.dumps({"connectionSet": [c.describe() for c in chans.values()]})
        )

    def query_topic_consume_by_who(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        topic = header_str(request.ext_fields, "topic")
        groups = set(self.s.consumers.groups_of_topic(topic)) | self.s.offsets.groups_of_topic(topic)
        return create_response(request, body=fastjson.dumps({"groupList": sorted(groups)}))

    # --- broker -----------------------------------------------------------------------------------
    def get_broker_runtime_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        s = self.s
        s.drain_pulls()
        store = s.store
        now = int(time.time() * 1000)
        boot = s.counters.boot_ms
        table = {
            "brokerVersion": str(codes.RMQ_VERSION),
            "brokerVersionDesc": codes.RMQ_VERSION_DESC,
            "msgPutTotalTodayNow": str(s.put_messages()),
            "msgGetTotalTodayNow": str(s.counters.get_messages),
            "msgPutTotalTodayMorning": str(s.counters.put_today_morning),
            "msgGetTotalTodayMorning": str(s.counters.get_today_morning),
            "msgPutTotalYesterdayMorning": str(s.counters.put_yesterday_morning),
            "msgGetTotalYesterdayMorning": str(s.counters.get_yesterday_morning),
            "putTps": s.put_rate.text(),
            "getTotalTps": s.pull_rate.text(),
            "getTransferedTps": s.get_rate.text(),
            # rmq queues no requests in front of thread pools and takes no page-cache lock: none waits.
            "sendThreadPoolQueueSize": "0",
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueSize": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "pageCacheLockTimeMills": str(store.put_lock_held_ms()),
            "commitLogDiskRatio": percent_up(commitlog_disk_ratio(s.config)),
            "commitLogMinOffset": str(store.commitlog_min_offset()),
            "commitLogMaxOffset": str(store.commitlog_max_offset()),
            "dispatchBehindBytes": str(store.commitlog_max_offset() - store.dispatched_offset()),
            "earliestMessageTimeStamp": str(max(store.earliest_store_time(), 0)),
            "bootTimestamp": str(boot),
            "runtime": f"[ {(now - boot) // 86_400_000} days, {(now - boot) // 3_600_000 % 24} hours, "
            f"{(now - boot) // 60_000 % 60} minutes, {(now - boot) // 1000 % 60} seconds ]",
            "diskFull": "true" if store.is_disk_full() else "false",
            **s.fast_send_stats(),
            **s.transaction_stats(),
            **s.pop_stats(),
            **journal.runtime_info(store),
        }
        return create_response(request, body=fastjson.dumps({"table": table}))

    def get_broker_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        props = self.s.config.properties()
        # Properties the Java tools read (mqadmin exportConfigs stops with a NullPointerException on a missing
        # one), listed even when not given: the store's defaults of those it implements, and the values rmq
        # fixes of the others (it runs no filter servers, writes traces to the one trace topic, and its
        # client side uses TLS exactly with tls.enable).
        props.setdefault("fileReservedTime", str(DEFAULT_FILE_RESERVED_HOURS))
        props.setdefault("flushDiskType", "SYNC_FLUSH" if self.s.config.sync_flush else "ASYNC_FLUSH")
        props.setdefault("maxMessageSize", str(self.s.config.max_message_size))
        props.setdefault("messageDelayLevel", DEFAULT_DELAY_LEVELS)
        props.setdefault("filterServerNums", "0")
        props.setdefault("msgTraceTopicName", codes.TRACE_TOPIC)
        props.setdefault("useTLS", "true" if self.s.config.tls_enable else "false")
        text = "\n".join(f"{k}={v}" for k, v in sorted(props.items())) + "\n"
        version = fastjson.dumps(self.s.topics.data_version.to_dict()).decode()
        return create_response(request, ResponseCode.SUCCESS, None, {"version": version}, text.encode())

    def update_broker_config(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
        try:
            props = parse_properties_text(bytes(request.body or b"").decode("utf-8"))
        except UnicodeDecodeError:
            return create_response(request, ResponseCode.SYSTEM_ERROR, "config body is not UTF-8")
        # Apache's broker answers success to any key (it drops an unknown one silently and changes a store
        # path under the running store); rmq refuses every key it does not change at run time, naming it.
        kinds = {k: property_kind(k) for k in props}
        parts = [
            f"{what}: {', '.join(sorted(k for k, kind in kinds.items() if kind == which))}"
            for which, what in (
                ("unknown", "unknown broker properties"),
                ("not implemented", "not implemented by rmq"),
                ("fixed", "these properties cannot be changed at run time"),
            )
            if which in kinds.values()
        ]
        if parts:
            remark = "; ".join(parts)
            log.warning("UPDATE_BROKER_CONFIG from %s refused: %s", ctx.remote_addr, remark)
            return create_response(request, ResponseCode.SYSTEM_ERROR, remark)
        try:
            trial = dataclasses.replace(self.s.config, store=dict(self.s.config.store))
            trial.update(props)
            trial.validate()
        except ConfigError as e:
            return create_response(request, ResponseCode.SYSTEM_ERROR, str(e))
        self.s.config.update(props)
        return create_response(request)
