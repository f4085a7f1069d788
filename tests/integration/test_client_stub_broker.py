"""The client against the real NameServer and small stub brokers built on RemotingServer.

The stubs make broker behaviour a test can steer: broker -> client requests (NOTIFY_CONSUMER_IDS_CHANGED,
GET_CONSUMER_RUNNING_INFO, RESET_CONSUMER_CLIENT_OFFSET, GET_CONSUMER_STATUS_FROM_CLIENT,
CHECK_TRANSACTION_STATE), failing sends for retries, and exact heartbeat / unregister contents.
"""

from __future__ import annotations

import asyncio
import ipaddress
import struct
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from rmq.client import (
    ClientConfig,
    ConsumeConcurrentlyStatus,
    LocalTransactionState,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PushConsumer,
    TransactionProducer,
)
from rmq.client.instance import get_instance
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.route import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from rmq.namesrv import NameServer
from rmq.remoting import (
    RemotingClient,
    RemotingCommand,
    RemotingServer,
    RequestContext,
    create_request,
    create_response,
)


class StubBroker:
    def __init__(self, name: str, topics: dict[str, int]) -> None:
        self.name = name
        self.topics = topics
        self.server = RemotingServer(name=f"stub-{name}")
        self.ns_client = RemotingClient()
        self.clients: dict[str, RequestContext] = {}
        self.heartbeats: list[dict[str, Any]] = []
        self.requests: list[RemotingCommand] = []
        self.consumer_ids: list[str] | None = None
        self.send_code = 0
        self.pull_answers: list[dict[str, str]] = []  # one answer per pull, then pulls are held forever
        self.events: dict[int, asyncio.Event] = {}
        for code in (
            RequestCode.HEART_BEAT,
            RequestCode.UNREGISTER_CLIENT,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP,
            RequestCode.QUERY_CONSUMER_OFFSET,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            RequestCode.GET_MAX_OFFSET,
            RequestCode.LOCK_BATCH_MQ,
            RequestCode.UNLOCK_BATCH_MQ,
            RequestCode.PULL_MESSAGE,
            RequestCode.SEND_MESSAGE_V2,
            RequestCode.END_TRANSACTION,
        ):
            self.server.register(code, self.handle)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def event(self, code: int) -> asyncio.Event:
        return self.events.setdefault(int(code), asyncio.Event())

    def seen(self, code: int) -> list[RemotingCommand]:
        return [r for r in self.requests if r.code == code]

    def handle(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        self.requests.append(request)
        self.event(request.code).set()
        code, ext = request.code, request.ext_fields
        if code == RequestCode.HEART_BEAT:
            data = fastjson.loads(request.body or b"{}")
            self.heartbeats.append(data)
            self.clients[data["clientID"]] = ctx
            return create_response(request)
        if code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
            ids = self.consumer_ids if self.consumer_ids is not None else list(self.clients)
            return create_response(request, body=fastjson.dumps({"consumerIdList": ids}))
        if code in (RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.GET_MAX_OFFSET):
            return create_response(request, ext_fields={"offset": "0"})
        if code == RequestCode.LOCK_BATCH_MQ:
            body = fastjson.loads(request.body or b"{}")
            return create_response(request, body=fastjson.dumps({"lockOKMQSet": body["mqSet"]}))
        if code == RequestCode.PULL_MESSAGE:
            if self.pull_answers:
                answer = dict(self.pull_answers.pop(0))
                return create_response(request, int(answer.pop("code")), answer.pop("remark", None), answer)
            return None  # long polling that never ends (the client cancels at shutdown)
        if code == RequestCode.SEND_MESSAGE_V2:
            if self.send_code:
                return create_response(request, self.send_code, f"{self.name} refuses")
            fields = {"msgId": "7F00000100002A9F0000000000000000", "queueId": ext["e"], "queueOffset": "0"}
            return create_response(request, ext_fields=fields)
        return create_response(request)

    async def start(self, namesrv_addr: str) -> None:
        await self.server.start("127.0.0.1", 0)
        body = RegisterBrokerBody(
            TopicConfigSerializeWrapper(
                DataVersion(1, 1), {t: TopicConfig(t, n, n, 6) for t, n in self.topics.items()}
            )
        ).encode()
        request = create_request(
            RequestCode.REGISTER_BROKER,
            {
                "brokerName": self.name,
                "brokerAddr": self.addr,
                "clusterName": "stub",
                "haServerAddr": self.addr,
                "brokerId": "0",
                "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
            },
            body,
        )
        # The name server forgets a broker when its registering connection closes: keep it open.
        response = await self.ns_client.invoke(namesrv_addr, request, 3000)
        assert response.code == 0

    async def stop(self) -> None:
        await self.ns_client.close()
        await self.server.stop()


@pytest.fixture
async def namesrv(tmp_path: Path) -> AsyncIterator[NameServer]:
    ns = NameServer(kv_config_path=tmp_path / "kv.json")
    await ns.start("127.0.0.1", 0)
    yield ns
    await ns.stop()


@pytest.fixture
async def stubs(namesrv: NameServer) -> AsyncIterator[Callable[..., Any]]:
    started: list[StubBroker] = []

    async def make(name: str, topics: dict[str, int]) -> StubBroker:
        stub = StubBroker(name, topics)
        await stub.start(namesrv.addr)
        started.append(stub)
        return stub

    yield make
    for stub in started:
        await stub.stop()


def cfg(namesrv: NameServer, instance: str = "stub") -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv.addr, instance_name=instance, rebalance_interval_ms=60_000)


async def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def encode_record(topic: str, body: bytes, properties: str, physical_offset: int = 0x100) -> bytes:
    """One stored record (REMOTING.md §4.1) with IPv4 hosts, written independently of rmq."""
    t, p = topic.encode(), properties.encode()
    out = struct.pack(
        ">iIiiiqqiq", 91 + len(body) + len(t) + len(p), 0xDAA320A7, 0, 0, 0, 5, physical_offset, 0, 1
    )
    out += ipaddress.ip_address("127.0.0.1").packed + struct.pack(">iq", 1, 2)
    out += ipaddress.ip_address("127.0.0.1").packed + struct.pack(">i", 10911)
    out += struct.pack(">iqi", 0, 0, len(body)) + body
    return out + struct.pack(">b", len(t)) + t + struct.pack(">h", len(p)) + p


# --- tests --------------------------------------------------------------------------------------------------


async def test_heartbeat_unregister_and_broker_requests(namesrv: NameServer, stubs: Any) -> None:
    stub: StubBroker = await stubs("broker-a", {"T": 4, "%RETRY%cg": 1})
    consumer = PushConsumer("cg", client_config=cfg(namesrv))
    consumer.subscribe("T", "TagA || TagB")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    await consumer.start()
    cid = consumer.client_id
    try:
        await until(lambda: len(consumer.allocated_queues()) == 5)
        hb = stub.heartbeats[-1]
        assert hb["clientID"] == cid
        assert {"groupName": "CLIENT_INNER_PRODUCER"} in hb["producerDataSet"]
        (cd,) = hb["consumerDataSet"]
        assert (cd["groupName"], cd["consumeType"], cd["messageModel"]) == (
            "cg",
            "CONSUME_PASSIVELY",
            "CLUSTERING",
        )
        subs = {s["topic"]: s for s in cd["subscriptionDataSet"]}
        assert set(subs) == {"T", "%RETRY%cg"}
        assert subs["T"]["tagsSet"] == ["TagA", "TagB"] and subs["%RETRY%cg"]["subString"] == "*"
        ctx = stub.clients[cid]

        # GET_CONSUMER_RUNNING_INFO (307)
        response = await ctx.send_request(
            create_request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "cg", "clientId": cid}),
            3000,
        )
        assert response.code == 0
        info = fastjson.loads(response.body)
        assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert info["properties"]["PROP_CONSUMEORDERLY"] == "false"
        assert {s["topic"] for s in info["subscriptionSet"]} == {"T", "%RETRY%cg"}
        mq_keys = [MessageQueue.from_dict(k.as_dict()) for k in info["mqTable"]]
        assert MessageQueue("T", "broker-a", 3) in mq_keys
        missing = await ctx.send_request(
            create_request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "nope", "clientId": cid}),
            3000,
        )
        assert missing.code == ResponseCode.SYSTEM_ERROR

        # NOTIFY_CONSUMER_IDS_CHANGED (40): a second client joins -> this one keeps its averaged half.
        stub.consumer_ids = [cid, "zzz@other"]
        ctx.send_oneway(create_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "cg"}))
        await until(
            lambda: (
                {q for q in consumer.allocated_queues() if q.topic == "T"}
                == {
                    MessageQueue("T", "broker-a", 0),
                    MessageQueue("T", "broker-a", 1),
                }
            )
        )
        # Dropped queues had their offsets persisted on the way out.
        persisted = {
            (r.ext_fields["topic"], r.ext_fields["queueId"])
            for r in stub.seen(RequestCode.UPDATE_CONSUMER_OFFSET)
        }
        assert ("T", "2") in persisted and ("T", "3") in persisted

        # RESET_CONSUMER_CLIENT_OFFSET (220), Java form with MessageQueue object keys.
        mq = MessageQueue("T", "broker-a", 1)
        table = {fastjson.ObjectKey.from_mapping(mq.to_dict()): 42}
        body = fastjson.dumps_with_object_keys({"offsetTable": table})
        fields = {"topic": "T", "group": "cg", "timestamp": "0", "isForce": "true"}
        ctx.send_oneway(create_request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, fields, body))
        await until(
            lambda: any(
                r.ext_fields.get("queueId") == "1" and r.ext_fields.get("commitOffset") == "42"
                for r in stub.seen(RequestCode.UPDATE_CONSUMER_OFFSET)
            )
        )

        # GET_CONSUMER_STATUS_FROM_CLIENT (221)
        response = await ctx.send_request(
            create_request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": "T", "group": "cg"}), 3000
        )
        assert response.code == 0 and "messageQueueTable" in fastjson.loads(response.body)
    finally:
        await consumer.shutdown()
    (unregister,) = stub.seen(RequestCode.UNREGISTER_CLIENT)
    assert unregister.ext_fields == {"clientID": cid, "consumerGroup": "cg"}
    assert not stub.seen(RequestCode.PULL_MESSAGE) or all(
        r.ext_fields["consumerGroup"] == "cg" for r in stub.seen(RequestCode.PULL_MESSAGE)
    )


async def test_send_retries_on_another_broker_and_backs_off(namesrv: NameServer, stubs: Any) -> None:
    bad: StubBroker = await stubs("broker-a", {"T": 2})
    good: StubBroker = await stubs("broker-b", {"T": 2})
    bad.send_code = ResponseCode.SERVICE_NOT_AVAILABLE
    producer = Producer("pg", client_config=cfg(namesrv), send_latency_fault_enable=True)
    await producer.start()
    try:
        for _ in range(6):
            result = await producer.send(Message("T", b"x"))
            assert result.message_queue.broker_name == "broker-b"
        # broker-a failed once and is then avoided for a while: at most one refused send reached it.
        assert len(bad.seen(RequestCode.SEND_MESSAGE_V2)) == 1
        assert len(good.seen(RequestCode.SEND_MESSAGE_V2)) == 6
    finally:
        await producer.shutdown()


async def test_name_server_failover(namesrv: NameServer, stubs: Any) -> None:
    await stubs("broker-a", {"T": 1})
    config = ClientConfig(namesrv_addr=f"127.0.0.1:1;{namesrv.addr}", instance_name="failover")
    producer = Producer("pg", client_config=config)
    await producer.start()
    try:
        for _ in range(3):
            assert (await producer.send(Message("T", b"x"))).ok
    finally:
        await producer.shutdown()


async def test_check_transaction_state_is_answered(namesrv: NameServer, stubs: Any) -> None:
    stub: StubBroker = await stubs("broker-a", {"T": 1})
    checked: list[MessageExt] = []

    class Listener:
        def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
            return LocalTransactionState.UNKNOW

        async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            checked.append(msg)
            return LocalTransactionState.ROLLBACK_MESSAGE

    producer = TransactionProducer("txg", Listener(), client_config=cfg(namesrv, "tx"))
    await producer.start()
    try:
        await producer.send_message_in_transaction(Message("T", b"x"))
        await until(lambda: producer.client_id in stub.clients)
        ctx = stub.clients[producer.client_id]
        record = encode_record("T", b"half", "TRAN_MSG\x01true\x02PGROUP\x01txg\x02UNIQ_KEY\x01ABCDEF")
        header = {
            "tranStateTableOffset": "17",
            "commitLogOffset": "256",
            "msgId": "ABCDEF",
            "transactionId": "ABCDEF",
            "offsetMsgId": "7F00000100002A9F0000000000000100",
        }
        stub.event(RequestCode.END_TRANSACTION).clear()
        ctx.send_oneway(create_request(RequestCode.CHECK_TRANSACTION_STATE, header, record))
        await until(lambda: len(stub.seen(RequestCode.END_TRANSACTION)) == 2)
    finally:
        await producer.shutdown()
    first, answer = stub.seen(RequestCode.END_TRANSACTION)
    assert first.ext_fields["commitOrRollback"] == "0" and first.ext_fields["fromTransactionCheck"] == "false"
    assert answer.is_oneway
    assert (
        answer.ext_fields["commitOrRollback"] == "12" and answer.ext_fields["fromTransactionCheck"] == "true"
    )
    assert (answer.ext_fields["tranStateTableOffset"], answer.ext_fields["commitLogOffset"]) == ("17", "256")
    assert answer.ext_fields["msgId"] == "ABCDEF" and answer.ext_fields["producerGroup"] == "txg"
    assert checked[0].body == b"half" and checked[0].transaction_id == "ABCDEF"


async def test_instance_is_shared_per_client_id_and_loop(namesrv: NameServer) -> None:
    a = get_instance(cfg(namesrv, "same"))
    assert get_instance(cfg(namesrv, "same")) is a
    assert get_instance(cfg(namesrv, "other")) is not a
    await a.shutdown()
    assert get_instance(cfg(namesrv, "same")) is not a
    await get_instance(cfg(namesrv, "same")).shutdown()
    await get_instance(cfg(namesrv, "other")).shutdown()


async def test_offset_illegal_fixes_the_offset_and_drops_the_queue(
    namesrv: NameServer, stubs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rmq.client.consumer import push

    monkeypatch.setattr(push, "OFFSET_ILLEGAL_FIX_DELAY_MS", 50)
    stub: StubBroker = await stubs("broker-a", {"T": 1, "%RETRY%cg": 1})
    moved = {
        "code": "21",
        "nextBeginOffset": "7",
        "minOffset": "7",
        "maxOffset": "9",
        "suggestWhichBrokerId": "0",
    }
    stub.pull_answers = [moved, moved]  # whichever queue pulls first
    consumer = PushConsumer("cg", client_config=cfg(namesrv))
    consumer.subscribe("T")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    await consumer.start()
    try:
        await until(
            lambda: any(
                r.ext_fields.get("commitOffset") == "7" for r in stub.seen(RequestCode.UPDATE_CONSUMER_OFFSET)
            )
        )
        fixed = [
            r for r in stub.seen(RequestCode.UPDATE_CONSUMER_OFFSET) if r.ext_fields["commitOffset"] == "7"
        ]
        assert fixed[0].is_oneway
        await until(lambda: len(consumer.allocated_queues()) < 2)  # removed until the next rebalance
        consumer.instance.rebalance_immediately()
        await until(lambda: len(consumer.allocated_queues()) == 2)  # and then created again
    finally:
        await consumer.shutdown()
