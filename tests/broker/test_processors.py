"""Broker processors driven directly, without sockets: a fake request context, a real store."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import pytest
from rmq.broker.clients import ConsumerManager, ProducerManager
from rmq.broker.config import BrokerConfig, ConfigError, parse_properties_text
from rmq.broker.consumer_offset import ConsumerOffsetManager
from rmq.broker.flush_responder import FlushResponder
from rmq.broker.ha.responder import ReplicaResponder
from rmq.broker.long_polling import PullHoldService
from rmq.broker.mq_lock import RebalanceLockManager
from rmq.broker.processors.admin import AdminProcessors
from rmq.broker.processors.client import ClientProcessors
from rmq.broker.processors.offsets import OffsetProcessors
from rmq.broker.processors.pull import PullProcessor
from rmq.broker.processors.query import QueryProcessors
from rmq.broker.processors.send import SendProcessor
from rmq.broker.processors.send_back import SendBackProcessor
from rmq.broker.records import parse_properties
from rmq.broker.services import BrokerServices
from rmq.broker.subscription_group import SubscriptionGroupManager
from rmq.broker.topic_config import TopicConfigManager
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.command import RemotingCommand, create_request, create_response
from rmq.store import AsyncStore, MessageStore, decode_records, encode_batch_body, java_string_hash


class FakeContext:
    _ids = 0

    def __init__(self, addr: str = "127.0.0.1:50000") -> None:
        FakeContext._ids += 1
        self.channel_id = FakeContext._ids
        self.remote_addr = addr
        self.is_closed = False
        self.last_seen = 0.0
        self.attributes: dict[str, Any] = {}
        self.responses: list[RemotingCommand] = []
        self.oneways: list[RemotingCommand] = []

    @property
    def received_at(self) -> float:
        """Every request counts as just read (no back-pressure here: tests/broker/test_fast_failure.py)."""
        return time.monotonic()

    waiting = 0

    def send_response(self, response: RemotingCommand) -> bool:
        self.responses.append(response)
        return True

    def send_oneway(self, request: RemotingCommand) -> None:
        self.oneways.append(request)

    async def send_request(self, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        raise NotImplementedError

    def add_close_callback(self, cb: Any) -> None:
        pass

    def close(self) -> None:
        self.is_closed = True


class Broker:
    """The processors wired to a real store in a temp dir, as the controller wires them."""

    def __init__(self, root: str, **props: str) -> None:
        cfg = BrokerConfig(broker_ip1="127.0.0.1", listen_port=10911)
        cfg.update({"storePathRootDir": root, "mappedFileSizeCommitLog": "1048576", **props})
        self.store = MessageStore(cfg.store_config())
        loop = asyncio.get_running_loop()
        self.pull_proc: PullProcessor | None = None
        holds = PullHoldService(loop, self.store.max_offset, lambda h: self.pull_proc.resume(h))  # type: ignore[union-attr]
        self.s = BrokerServices(
            config=cfg,
            store=self.store,
            astore=(astore := AsyncStore(self.store, loop)),
            topics=TopicConfigManager(
                cfg.config_dir,
                cluster_name=cfg.broker_cluster_name,
                broker_name=cfg.broker_name,
                auto_create_topic=cfg.auto_create_topic_enable,
                default_queue_nums=cfg.default_topic_queue_nums,
            ),
            groups=SubscriptionGroupManager(cfg.config_dir, True),
            offsets=ConsumerOffsetManager(cfg.config_dir),
            consumers=ConsumerManager(),
            producers=ProducerManager(),
            locks=RebalanceLockManager(),
            holds=holds,
            flush_responder=FlushResponder(astore, 5.0),
        )
        self.s.astore.dispatched.add_listener(holds.on_dispatch)
        holds.watch = self.s.astore.dispatched.watch
        self.send = SendProcessor(self.s)
        self.pull_proc = PullProcessor(self.s)
        self.table: dict[int, Any] = {}
        self.processor_groups = (
            OffsetProcessors(self.s),
            ClientProcessors(self.s),
            QueryProcessors(self.s),
            AdminProcessors(self.s),
        )
        for g in self.processor_groups:
            self.table.update(g.table())

    def call(self, code: int, fields: dict[str, str], body: bytes | None = None, ctx: Any = None) -> Any:
        req = create_request(code, fields, body)
        req.opaque = 7
        ctx = ctx or FakeContext()
        if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            return self.send(ctx, req)
        if code == RequestCode.PULL_MESSAGE:
            return self.pull_proc(ctx, req)  # type: ignore[misc]
        return self.table[code](ctx, req)

    def close(self) -> None:
        self.s.astore.close()
        self.s.holds.close()
        self.store.shutdown()


@pytest.fixture
async def broker(tmp_path):
    b = Broker(str(tmp_path))
    yield b
    b.close()


def v2(topic: str, qid: int = 0, props: str = "", **extra: str) -> dict[str, str]:
    h = {
        "a": "PG",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": str(qid),
        "f": "0",
        "g": "1700000000000",
        "h": "0",
    }
    h["i"] = props
    h.update(extra)
    return h


def pull_fields(topic: str, qid: int, offset: int, sub: str = "*", sys_flag: int = 4) -> dict[str, str]:
    return {
        "consumerGroup": "CG",
        "topic": topic,
        "queueId": str(qid),
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": str(sys_flag),
        "commitOffset": "0",
        "suspendTimeoutMillis": "200",
        "subscription": sub,
        "subVersion": "0",
    }


async def test_send_v2_and_v1_auto_create_and_response_headers(broker):
    r = broker.call(RequestCode.SEND_MESSAGE_V2, v2("Auto", 1, "TAGS\x01A\x02WAIT\x01true"), b"body")
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert r.opaque == 7 and r.is_response
    assert set(r.ext_fields) >= {"msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"}
    assert all(isinstance(v, str) for v in r.ext_fields.values())
    assert (r.ext_fields["queueId"], r.ext_fields["queueOffset"]) == ("1", "0")
    assert broker.s.topics.get("Auto").write_queue_nums == 4
    # V1 header names (C++ 0.4.4), numbers and "1"/"0" booleans, trailing separator.
    v1 = {"producerGroup": "PG", "topic": "Auto", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4"}
    v1.update(
        {"queueId": "1", "sysFlag": "0", "bornTimestamp": "1", "flag": "0", "properties": "TAGS\x01B\x02"}
    )
    v1.update({"reconsumeTimes": "0", "unitMode": "0", "batch": "0"})
    r = broker.call(RequestCode.SEND_MESSAGE, v1, b"second")
    assert r.code == 0 and r.ext_fields["queueOffset"] == "1"
    rec = decode_records(broker.store.lookup(int(r.ext_fields["msgId"][16:], 16)))[0]
    # WAIT stripped, CLUSTER added, no empty segment.
    assert rec[13] == "TAGS\x01B\x02CLUSTER\x01DefaultCluster"
    assert rec[7] == "127.0.0.1:50000"


async def test_send_errors_have_rocketmq_codes(broker):
    bad = broker.call(RequestCode.SEND_MESSAGE_V2, v2("bad topic!"), b"x")
    assert bad.code == ResponseCode.SYSTEM_ERROR and "topic" in bad.remark.lower()
    # Too long a name is a SYSTEM_ERROR like an illegal one, as the Apache 4.9 broker answers (tests/peers).
    assert broker.call(RequestCode.SEND_MESSAGE_V2, v2("T" * 128), b"x").code == ResponseCode.SYSTEM_ERROR
    r = broker.call(RequestCode.SEND_MESSAGE_V2, v2("SCHEDULE_TOPIC_XXXX"), b"x")
    assert r.code == ResponseCode.NO_PERMISSION
    r = broker.call(RequestCode.SEND_MESSAGE_V2, v2("NoTemplate", c="NoSuchTemplate"), b"x")
    assert r.code == ResponseCode.TOPIC_NOT_EXIST and "apply first" in r.remark
    r = broker.call(RequestCode.SEND_MESSAGE_V2, v2("Auto2", 9), b"x")
    assert r.code == ResponseCode.SYSTEM_ERROR and "queueId" in r.remark
    big = b"x" * (4 * 1024 * 1024 + 1)
    assert broker.call(RequestCode.SEND_MESSAGE_V2, v2("Auto2"), big).code == ResponseCode.MESSAGE_ILLEGAL
    # An empty body is stored, as the Apache 4.9 broker does (tests/peers).
    assert broker.call(RequestCode.SEND_MESSAGE_V2, v2("Auto2"), b"").code == ResponseCode.SUCCESS
    with pytest.raises(ValueError, match="topic"):
        broker.call(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "e": "0"}, b"x")


async def test_batch_flag_as_cpp_sends_it(broker):
    body = encode_batch_body([(0, b"m1", b"TAGS\x01A"), (0, b"m2", b"")])
    r = broker.call(RequestCode.SEND_MESSAGE_V2, v2("Batch", 0, m="1"), body)
    assert r.code == 0
    assert len(r.ext_fields["msgId"].split(",")) == 2
    broker.store.wait_dispatched(broker.store.commitlog_max_offset(), 5000)
    assert broker.store.max_offset("Batch", 0) == 2


async def test_batch_messages_keep_their_own_uniq_key(broker, caplog):
    # rocketmq-client-rust and Java 5.x clients put the batch's own UNIQ_KEY in the batch-level properties;
    # appended to every message it would replace theirs (Apache ISSUE #9416). Other batch-level
    # properties are still appended (4.9), and a message without a UNIQ_KEY gets none.
    body = encode_batch_body(
        [(0, b"m1", b"UNIQ_KEY\x01ID1\x02TAGS\x01A"), (0, b"m2", b"UNIQ_KEY\x01ID2"), (0, b"m3", b"")]
    )
    batch_props = "UNIQ_KEY\x01BATCH\x02WAIT\x01true\x02XUNIQ_KEY\x01x"
    r = broker.call(RequestCode.SEND_BATCH_MESSAGE, v2("BatchIds", 0, batch_props, m="1"), body)
    assert r.code == 0
    broker.store.wait_dispatched(broker.store.commitlog_max_offset(), 5000)
    r = broker.call(RequestCode.PULL_MESSAGE, pull_fields("BatchIds", 0, 0))
    stored = [parse_properties(x[13]) for x in decode_records(r.body)]
    assert [p.get("UNIQ_KEY") for p in stored] == ["ID1", "ID2", None]
    assert [(p["WAIT"], p["XUNIQ_KEY"], p["CLUSTER"]) for p in stored] == [
        ("true", "x", "DefaultCluster")
    ] * 3
    assert stored[0]["TAGS"] == "A"
    assert "batch-level UNIQ_KEY dropped from 1 batches so far" in caplog.text
    # without a batch-level UNIQ_KEY nothing is dropped or logged
    caplog.clear()
    body = encode_batch_body([(0, b"m4", b"UNIQ_KEY\x01ID4")])
    assert (
        broker.call(RequestCode.SEND_BATCH_MESSAGE, v2("BatchIds", 0, "WAIT\x01true", m="1"), body).code == 0
    )
    assert "UNIQ_KEY" not in caplog.text


async def test_pull_found_filter_and_statuses(broker):
    for i, tag in enumerate(["TagA", "TagB", "TagC", "TagA"]):
        r = broker.call(RequestCode.SEND_MESSAGE_V2, v2("P", 0, f"TAGS\x01{tag}"), b"m%d" % i)
        assert r.code == 0
    broker.store.wait_dispatched(broker.store.commitlog_max_offset(), 5000)
    r = broker.call(RequestCode.PULL_MESSAGE, pull_fields("P", 0, 0, "TagA || TagB"))
    assert r.code == ResponseCode.SUCCESS
    assert [x[12] for x in decode_records(r.body)] == [b"m0", b"m1", b"m3"]
    h = r.ext_fields
    assert (h["nextBeginOffset"], h["minOffset"], h["maxOffset"], h["suggestWhichBrokerId"]) == (
        "4",
        "0",
        "4",
        "0",
    )
    r = broker.call(RequestCode.PULL_MESSAGE, pull_fields("P", 0, 2, "TagZ"))
    assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and r.ext_fields["nextBeginOffset"] == "4"
    r = broker.call(RequestCode.PULL_MESSAGE, pull_fields("P", 0, 4))
    assert r.code == ResponseCode.PULL_NOT_FOUND
    r = broker.call(RequestCode.PULL_MESSAGE, pull_fields("P", 0, 99))
    assert r.code == ResponseCode.PULL_OFFSET_MOVED
    r = broker.call(RequestCode.PULL_MESSAGE, pull_fields("P", 3, 5))
    assert r.code == ResponseCode.PULL_OFFSET_MOVED and r.ext_fields["nextBeginOffset"] == "0"
    assert (
        broker.call(RequestCode.PULL_MESSAGE, pull_fields("Nope", 0, 0)).code == ResponseCode.TOPIC_NOT_EXIST
    )
    assert broker.call(RequestCode.PULL_MESSAGE, pull_fields("P", 77, 0)).code == ResponseCode.SYSTEM_ERROR
    r = broker.call(RequestCode.PULL_MESSAGE, pull_fields("P", 0, 0, "TagA", sys_flag=0))
    assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST


async def test_long_poll_answers_on_arrival_and_on_timeout(broker):
    broker.call(RequestCode.SEND_MESSAGE_V2, v2("LP", 0), b"first")
    broker.store.wait_dispatched(broker.store.commitlog_max_offset(), 5000)
    ctx = FakeContext()
    fields = pull_fields("LP", 0, 1, sys_flag=4 | 2)
    fields["suspendTimeoutMillis"] = "10000"
    assert broker.call(RequestCode.PULL_MESSAGE, fields, ctx=ctx) is None
    assert len(broker.s.holds) == 1
    broker.call(RequestCode.SEND_MESSAGE_V2, v2("LP", 0), b"second")
    # Answered once the store's dispatch thread has put "second" in the ConsumeQueue (bounded).
    deadline = asyncio.get_running_loop().time() + 10
    while not ctx.responses and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    assert ctx.responses and ctx.responses[0].code == ResponseCode.SUCCESS
    assert [x[12] for x in decode_records(ctx.responses[0].body)] == [b"second"]
    # Timeout path: nothing arrives, answered PULL_NOT_FOUND after the suspend time.
    ctx2 = FakeContext()
    fields = pull_fields("LP", 0, 2, sys_flag=4 | 2)
    fields["suspendTimeoutMillis"] = "100"
    assert broker.call(RequestCode.PULL_MESSAGE, fields, ctx=ctx2) is None
    await asyncio.sleep(0.3)
    assert ctx2.responses and ctx2.responses[0].code == ResponseCode.PULL_NOT_FOUND


async def test_consumer_offsets_and_queue_offsets(broker):
    q = {"consumerGroup": "CG", "topic": "O", "queueId": "0"}
    assert broker.call(RequestCode.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "0"
    for i in range(3):
        broker.call(RequestCode.SEND_MESSAGE_V2, v2("O", 0), b"x%d" % i)
    broker.store.wait_dispatched(broker.store.commitlog_max_offset(), 5000)
    r = broker.call(RequestCode.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": "2"})
    assert r.code == 0
    assert broker.call(RequestCode.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "2"
    saved = orjson.loads(open(broker.s.offsets.path, "rb").read())
    assert saved["offsetTable"]["O@CG"] == {"0": 2}
    tq = {"topic": "O", "queueId": "0"}
    assert broker.call(RequestCode.GET_MAX_OFFSET, tq).ext_fields["offset"] == "3"
    assert broker.call(RequestCode.GET_MIN_OFFSET, tq).ext_fields["offset"] == "0"
    assert (
        broker.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**tq, "timestamp": "0"}).ext_fields["offset"]
        == "0"
    )
    ts = int(broker.call(RequestCode.GET_EARLIEST_MSG_STORETIME, tq).ext_fields["timestamp"])
    assert ts > 1_700_000_000_000
    with pytest.raises(ValueError, match="queueId"):
        broker.call(RequestCode.GET_MAX_OFFSET, {"topic": "O"})


async def test_heartbeat_consumer_list_notify_and_locks(broker):
    hb = {
        "clientID": "10.0.0.1@1",
        "consumerDataSet": [
            {
                "groupName": "G1",
                "consumeType": 1,  # C++ sends ordinals
                "messageModel": 1,
                "consumeFromWhere": 4,
                "subscriptionDataSet": [
                    {"topic": "HB", "subString": "a || b", "subVersion": "5", "codeSet": [0]}
                ],
            }
        ],
        "producerDataSet": [{"groupName": "PG"}],
    }
    c1 = FakeContext("10.0.0.1:1")
    assert broker.call(RequestCode.HEART_BEAT, {}, orjson.dumps(hb), ctx=c1).code == 0
    sub = broker.s.consumers.subscription("G1", "HB")
    assert sub.codes == [java_string_hash("a"), java_string_hash("b")]
    assert "%RETRY%G1" in broker.s.topics.table
    hb2 = dict(hb, clientID="10.0.0.2@2")
    c2 = FakeContext("10.0.0.2:2")
    broker.call(RequestCode.HEART_BEAT, {}, orjson.dumps(hb2), ctx=c2)
    assert any(o.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED for o in c1.oneways)
    r = broker.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G1"})
    assert orjson.loads(r.body) == {"consumerIdList": ["10.0.0.1@1", "10.0.0.2@2"]}
    assert broker.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G9"}).code == 1
    mq = [{"topic": "HB", "brokerName": "broker-a", "queueId": i} for i in range(2)]
    lock = {"consumerGroup": "G1", "clientId": "10.0.0.1@1", "mqSet": mq}
    r = broker.call(RequestCode.LOCK_BATCH_MQ, {}, orjson.dumps(lock))
    assert len(orjson.loads(r.body)["lockOKMQSet"]) == 2
    other = dict(lock, clientId="10.0.0.2@2")
    assert (
        orjson.loads(broker.call(RequestCode.LOCK_BATCH_MQ, {}, orjson.dumps(other)).body)["lockOKMQSet"]
        == []
    )
    broker.call(RequestCode.UNLOCK_BATCH_MQ, {}, orjson.dumps(lock))
    assert (
        len(orjson.loads(broker.call(RequestCode.LOCK_BATCH_MQ, {}, orjson.dumps(other)).body)["lockOKMQSet"])
        == 2
    )
    un = {"clientID": "10.0.0.2@2", "consumerGroup": "G1", "producerGroup": ""}
    assert broker.call(RequestCode.UNREGISTER_CLIENT, un, ctx=c2).code == 0
    assert broker.s.consumers.get("G1").client_ids() == ["10.0.0.1@1"]
    bad = {
        "clientID": "x",
        "consumerDataSet": [
            {
                "groupName": "G2",
                "subscriptionDataSet": [{"topic": "T", "subString": "a", "expressionType": "SQL92"}],
            }
        ],
    }
    r = broker.call(RequestCode.HEART_BEAT, {}, orjson.dumps(bad))
    assert r.code == ResponseCode.SYSTEM_ERROR and "SQL92" in r.remark  # enablePropertyFilter is off


async def test_first_heartbeat_is_answered_after_the_retry_topic_is_registered(broker):
    # The Java broker registers with the name servers before answering a heartbeat that created the
    # group's %RETRY% topic; rmq's answer waits for the registration it scheduled.
    entered, settled = asyncio.Event(), asyncio.Event()

    async def registrations_settled() -> None:
        entered.set()
        await settled.wait()

    broker.s.registrations_settled = registrations_settled
    sub = {"topic": "WT", "subString": "*"}
    hb = {"clientID": "c1", "consumerDataSet": [{"groupName": "WG", "subscriptionDataSet": [sub]}]}
    answer = asyncio.ensure_future(broker.call(RequestCode.HEART_BEAT, {}, orjson.dumps(hb)))
    assert "%RETRY%WG" in broker.s.topics.table
    await entered.wait()
    assert not answer.done()
    settled.set()
    assert (await answer).code == 0
    # the topic exists now: the next heartbeat is answered at once
    again = broker.call(RequestCode.HEART_BEAT, {}, orjson.dumps(hb))
    assert isinstance(again, RemotingCommand) and again.code == 0
    # broadcasting consumers have no retry topic and nothing to wait for
    bc = {"groupName": "BG", "messageModel": "BROADCASTING", "subscriptionDataSet": [sub]}
    plain = broker.call(RequestCode.HEART_BEAT, {}, orjson.dumps({"clientID": "c2", "consumerDataSet": [bc]}))
    assert isinstance(plain, RemotingCommand) and "%RETRY%BG" not in broker.s.topics.table


async def test_first_heartbeat_waits_for_the_registration_only_so_long(broker, caplog):
    never = asyncio.Event()
    broker.s.registrations_settled = never.wait  # a name server that does not answer
    for procs in broker.processor_groups:
        if isinstance(procs, ClientProcessors):
            procs.registration_wait_s = 0.05
    sub = {"topic": "WT", "subString": "*"}
    hb = {"clientID": "c9", "consumerDataSet": [{"groupName": "SlowG", "subscriptionDataSet": [sub]}]}
    assert (await broker.call(RequestCode.HEART_BEAT, {}, orjson.dumps(hb))).code == 0
    assert "heartbeat of c9 answered before the name servers acknowledged" in caplog.text


async def test_query_and_view(broker):
    r = broker.call(
        RequestCode.SEND_MESSAGE_V2, v2("Q", 0, "KEYS\x01order-1 order-2\x02UNIQ_KEY\x01ABC"), b"q"
    )
    broker.store.wait_dispatched(broker.store.commitlog_max_offset(), 5000)
    fields = {
        "topic": "Q",
        "key": "order-2",
        "maxNum": "10",
        "beginTimestamp": "0",
        "endTimestamp": str(2**62),
    }
    q = broker.call(RequestCode.QUERY_MESSAGE, fields)
    assert q.code == 0 and decode_records(q.body)[0][12] == b"q"
    q = broker.call(RequestCode.QUERY_MESSAGE, {**fields, "key": "ABC", "_UNIQUE_KEY_QUERY": "true"})
    assert q.code == 0
    assert (
        broker.call(RequestCode.QUERY_MESSAGE, {**fields, "key": "zzz"}).code == ResponseCode.QUERY_NOT_FOUND
    )
    offset = int(r.ext_fields["msgId"][16:], 16)
    v = broker.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
    assert v.code == 0 and decode_records(v.body)[0][12] == b"q"
    assert broker.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "5"}).code == ResponseCode.SYSTEM_ERROR


async def test_admin_topics_stats_and_config(broker):
    create = {
        "topic": "Admin",
        "defaultTopic": "TBW102",
        "readQueueNums": "3",
        "writeQueueNums": "3",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
    }
    assert broker.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create).code == 0
    assert broker.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {**create, "topic": "TBW102"}).code == 1
    assert broker.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {**create, "readQueueNums": "0"}).code == 1
    allcfg = orjson.loads(broker.call(RequestCode.GET_ALL_TOPIC_CONFIG, {}).body)
    assert allcfg["topicConfigTable"]["Admin"]["readQueueNums"] == 3
    broker.call(RequestCode.SEND_MESSAGE_V2, v2("Admin", 2), b"s")
    broker.store.wait_dispatched(broker.store.commitlog_max_offset(), 5000)
    stats = broker.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Admin"})
    assert stats.code == 0 and b'"maxOffset":1' in stats.body and b'{"brokerName"' in stats.body
    assert (
        broker.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "None"}).code == ResponseCode.TOPIC_NOT_EXIST
    )
    info = orjson.loads(broker.call(RequestCode.GET_BROKER_RUNTIME_INFO, {}).body)["table"]
    assert info["brokerVersionDesc"] == "V4_9_8" and int(info["msgPutTotalTodayNow"]) >= 1
    broker.call(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "CG", "topic": "Admin", "queueId": "2", "commitOffset": "1"},
    )
    cs = broker.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "CG", "topic": "Admin"})
    assert b'"consumerOffset":1' in cs.body
    cfg = broker.call(RequestCode.GET_BROKER_CONFIG, {})
    assert b"brokerName=broker-a" in cfg.body
    ok = broker.call(RequestCode.UPDATE_BROKER_CONFIG, {}, b"autoCreateTopicEnable=false\n")
    assert ok.code == 0 and broker.s.config.auto_create_topic_enable is False
    refused = broker.call(RequestCode.UPDATE_BROKER_CONFIG, {}, b"storePathRootDir=/etc\n")
    assert refused.code == 1 and "storePathRootDir" in refused.remark
    bad = broker.call(RequestCode.UPDATE_BROKER_CONFIG, {}, b"defaultTopicQueueNums=abc\n")
    assert bad.code == 1 and "defaultTopicQueueNums" in bad.remark
    assert (await broker.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Admin"})).code == 0
    assert broker.s.topics.get("Admin") is None


def test_config_parsing():
    props = parse_properties_text(
        "# c\nbrokerName = b1\nbrokerClusterName:C\n\nflushDiskType=SYNC_FLUSH\nlistenPort=1\\\n0920\n"
    )
    cfg = BrokerConfig()
    cfg.update(props)
    assert (cfg.broker_name, cfg.broker_cluster_name, cfg.listen_port) == ("b1", "C", 10920)
    assert cfg.sync_flush
    with pytest.raises(ConfigError, match="unknown property 'bogus'"):
        cfg.set("bogus", "1")
    with pytest.raises(ConfigError, match="listenPort"):
        cfg.set("listenPort", "ten")
    with pytest.raises(ConfigError, match="brokerRole"):
        cfg.set("brokerRole", "BOSS")
    cfg.set("brokerRole", "SLAVE")
    with pytest.raises(ConfigError, match="slave's brokerId must be > 0"):
        cfg.validate()
    cfg.set("brokerId", "2")
    cfg.set("haMasterAddress", "nowhere")
    with pytest.raises(ConfigError, match="haMasterAddress"):
        cfg.validate()
    cfg.set("haMasterAddress", "127.0.0.1:10912")
    cfg.validate()
    cfg.set("brokerRole", "SYNC_MASTER")
    cfg.validate()
    assert cfg.broker_id == 0  # a master is brokerId 0, as RocketMQ's broker sets it
    cfg.set("namesrvAddr", "a:1;b")
    with pytest.raises(ConfigError, match="namesrvAddr"):
        cfg.validate()
    cfg.set("namesrvAddr", "a:1")
    with pytest.raises(ConfigError, match="mappedFileSizeConsumeQueue"):
        cfg.set("mappedFileSizeConsumeQueue", "30")
    cfg.validate()


def test_cli_reports_bad_properties(tmp_path):
    import os
    import subprocess
    import sys

    for args, expected in (
        (["-p", "bogus=1"], "unknown property 'bogus'"),
        (["-p", "maxMessageSize=big"], "maxMessageSize"),
        (["-p", "listenPort"], "KEY=VALUE"),
        (["-c", str(tmp_path / "missing.conf")], "cannot read"),
    ):
        r = subprocess.run(
            [sys.executable, "-m", "rmq.broker", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ, HOME=str(tmp_path)),
        )
        assert r.returncode == 2 and expected in r.stderr, (args, r.stderr)


async def test_sql92_subscription_filters_exactly(tmp_path):
    b = Broker(str(tmp_path), enablePropertyFilter="true")
    try:
        expected = []
        for i in range(40):
            a, bval = i % 10, "xy"[i % 2]
            r = b.call(RequestCode.SEND_MESSAGE_V2, v2("S", 0, f"a\x01{a}\x02b\x01{bval}"), b"m%d" % i)
            assert r.code == 0
            if a > 5 and bval == "x":
                expected.append(b"m%d" % i)
        sub = {"topic": "S", "subString": "a > 5 AND b = 'x'", "expressionType": "SQL92", "subVersion": 1}
        hb = {"clientID": "c1", "consumerDataSet": [{"groupName": "SG", "subscriptionDataSet": [sub]}]}
        assert b.call(RequestCode.HEART_BEAT, {}, orjson.dumps(hb)).code == 0
        # Messages after registration get bloom bits at dispatch; older ones are evaluated.
        for i in range(40, 80):
            a, bval = i % 10, "xy"[i % 2]
            b.call(RequestCode.SEND_MESSAGE_V2, v2("S", 0, f"a\x01{a}\x02b\x01{bval}"), b"m%d" % i)
            if a > 5 and bval == "x":
                expected.append(b"m%d" % i)
        b.store.wait_dispatched(b.store.commitlog_max_offset(), 5000)
        got, offset = [], 0
        while True:
            f = pull_fields("S", 0, offset, sys_flag=0)
            f["consumerGroup"] = "SG"
            r = b.call(RequestCode.PULL_MESSAGE, f)
            if r.code != ResponseCode.SUCCESS:
                break
            got += [x[12] for x in decode_records(r.body)]
            offset = int(r.ext_fields["nextBeginOffset"])
        assert got == expected and len(expected) == 16
        # The same through the expression posted with the pull.
        f = pull_fields("S", 0, 0, "a > 5 AND b = 'x'", sys_flag=4)
        f.update(consumerGroup="SG", expressionType="SQL92", maxMsgNums="100")
        assert [x[12] for x in decode_records(b.call(RequestCode.PULL_MESSAGE, f).body)] == expected
        f.update(subscription="a >>> 5")
        r = b.call(RequestCode.PULL_MESSAGE, f)
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "malformed" in r.remark
        check = {"clientId": "c1", "group": "SG", "subscriptionData": dict(sub, subString="b = ")}
        assert (
            b.call(RequestCode.CHECK_CLIENT_CONFIG, {}, orjson.dumps(check)).code
            == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        )
    finally:
        b.close()


async def test_sync_flush_send_back_answers_once_the_retry_message_is_flushed(tmp_path):
    """A send-back's answer is the consumer's receipt: with SYNC_FLUSH it comes after the group commit that
    holds the re-put message, as a send's does."""
    b = Broker(str(tmp_path), flushDiskType="SYNC_FLUSH")
    try:
        ctx = FakeContext()
        first = b.call(RequestCode.SEND_MESSAGE_V2, v2("Work", 0), b"job", ctx=ctx)
        for _ in range(500):
            if first is not None or ctx.responses:
                break
            await asyncio.sleep(0.01)
        sent = first if first is not None else ctx.responses[0]
        offset = int(sent.ext_fields["msgId"][16:], 16)
        back = SendBackProcessor(b.s)
        answers = []
        for _ in range(10):
            c = FakeContext()
            req = create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": str(offset), "group": "CG"})
            direct = back.send_back(c, req)
            end = b.store.commitlog_max_offset()  # the re-put record's end
            answers.append((direct, c, end))
        held = [a for a in answers if a[0] is None]
        assert held, "the re-put messages were not flushed yet, so their answers wait for the group commit"
        for _ in range(500):
            if all(c.responses for _d, c, _e in held):
                break
            await asyncio.sleep(0.01)
        for direct, c, _end in answers:
            r = direct if direct is not None else c.responses[0]
            assert r.code == ResponseCode.SUCCESS, r.remark
        assert b.store.flushed_offset() >= max(e for _d, _c, e in answers)
        assert len(b.s.flush_responder) == 0
    finally:
        b.close()


async def test_timed_out_answers_name_the_status_as_a_send_or_a_send_back_expects(tmp_path):
    """A held answer that times out: a send's carries the status's own code (FLUSH_DISK_TIMEOUT,
    FLUSH_SLAVE_TIMEOUT, which the client maps to a SendStatus); a send-back's is SYSTEM_ERROR with the
    status as the remark, as RocketMQ answers a send-back whose put is not PUT_OK."""
    b = Broker(str(tmp_path))
    try:
        never = b.store.commitlog_max_offset() + (1 << 40)  # an offset no flush or slave reaches
        flush = FlushResponder(b.s.astore, 0.05)
        replica = ReplicaResponder(lambda: 0, 0.05, lambda *_: pytest.fail("nothing was acknowledged"))
        send, send_back = FakeContext(), FakeContext()
        for responder in (flush, replica):
            responder.hold(never, send, create_response(create_request(RequestCode.SEND_MESSAGE_V2, {})))
            responder.hold(
                never,
                send_back,
                create_response(create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {})),
                status_remark=True,
            )
        for _ in range(200):
            if len(send.responses) == 2 and len(send_back.responses) == 2:
                break
            await asyncio.sleep(0.01)
        assert [r.code for r in send.responses] == [
            ResponseCode.FLUSH_DISK_TIMEOUT,
            ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ]
        assert [(r.code, r.remark) for r in send_back.responses] == [
            (ResponseCode.SYSTEM_ERROR, "FLUSH_DISK_TIMEOUT"),
            (ResponseCode.SYSTEM_ERROR, "FLUSH_SLAVE_TIMEOUT"),
        ]
        assert len(flush) == len(replica) == 0
        flush.close()
        replica.close()
    finally:
        b.close()


async def test_sync_flush_send_answers_after_the_group_commit(tmp_path):
    b = Broker(str(tmp_path), flushDiskType="SYNC_FLUSH")
    try:
        ctxs = [FakeContext() for _ in range(20)]
        direct = [
            b.call(RequestCode.SEND_MESSAGE_V2, v2("Sync", 0), b"x%d" % i, ctx=c) for i, c in enumerate(ctxs)
        ]
        for _ in range(500):
            if all(c.responses for c, d in zip(ctxs, direct, strict=True) if d is None):
                break
            await asyncio.sleep(0.01)
        answers = [d if d is not None else c.responses[0] for c, d in zip(ctxs, direct, strict=True)]
        assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 20
        assert [int(a.ext_fields["queueOffset"]) for a in answers] == list(range(20))
        end = max(int(a.ext_fields["msgId"][16:], 16) for a in answers)
        assert b.store.flushed_offset() > end, "acknowledged only once durable"
        assert len(b.s.flush_responder) == 0
    finally:
        b.close()


class _HandOver:
    """What the network thread's pull fast path hands over (``take_pulls``), as it would."""

    def __init__(self, taken: list[tuple[str, str, int, int, int, int, int, int | None]]) -> None:
        self.taken = taken

    def take_pulls(self) -> list[tuple[str, str, int, int, int, int, int, int | None]]:
        out, self.taken = self.taken, []
        return out


async def test_pulls_the_network_thread_served_are_counted_and_their_commits_applied(broker):
    """An answered pull counts (requests, messages, the queue's pulled offset); a pull it only holds so far
    hands over its commit offset alone: committed, and the queue's pulled offset left as it was."""
    s = broker.s
    s.fast_send = _HandOver([("CG", "T", 0, 2, 5, 5000, 9, 7)])
    s.drain_pulls()
    assert (s.counters.fast_pull_requests, s.counters.fast_pull_messages) == (2, 5)
    assert s.metrics.pulled[("CG", "T", 0)] == 9
    assert s.offsets.query("CG", "T", 0) == 7
    s.fast_send = _HandOver([("CG", "T", 0, 0, 0, 0, 0, 8)])  # held: its commit, nothing answered
    s.drain_pulls()
    assert s.counters.fast_pull_requests == 2
    assert s.metrics.pulled[("CG", "T", 0)] == 9, "a held pull moves no pulled offset"
    assert s.offsets.query("CG", "T", 0) == 8
