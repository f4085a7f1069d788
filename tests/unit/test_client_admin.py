"""Message lookup without sockets (REMOTING.md §3.4, §5): QUERY_MESSAGE / VIEW_MESSAGE_BY_ID requests,
offset ids, the per-broker fan-out and client-side filtering; timer properties; SQL92 check errors."""

from __future__ import annotations

from typing import Any

import pytest
from rmq._store import offset_msg_id
from rmq.client import sync
from rmq.client.admin import LONG_MAX, MessageQueryMixin, decode_message_id
from rmq.client.api import MQClientAPI
from rmq.client.consumer.push import PushConsumer
from rmq.client.errors import (
    MQClientError,
    NoMessageError,
    NoRouteError,
    SubscriptionParseFailedError,
    SystemError_,
    broker_error,
)
from rmq.client.heartbeat import MessageSelector
from rmq.client.message import RESERVED_PROPERTIES, Message, MessageExt, decode_messages
from rmq.client.producer import Producer
from rmq.client.results import QueryResult
from rmq.client.uniq_id import create_uniq_id, uniq_id_timestamp
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.route import BrokerData, QueueData, TopicRouteData
from rmq.remoting import RemotingCommand, RemotingConnectError, create_response

from tests.unit.test_client_message import encode_record

# --- offset message ids -------------------------------------------------------------------------------------


def test_decode_message_id_ipv4_ipv6_and_refusals() -> None:
    assert decode_message_id("0A00000100002A9F0000000000001234") == ("10.0.0.1:10911", 0x1234)
    assert decode_message_id("0a00000100002a9f0000000000001234") == ("10.0.0.1:10911", 0x1234)
    v6 = offset_msg_id("[::1]:10911", 77)
    assert len(v6) == 56
    addr, offset = decode_message_id(v6)
    assert offset == 77 and addr.endswith(":10911")
    for bad in ("", "zz", "0A000001", "0A000001FFFFFFFF0000000000001234", create_uniq_id()):
        with pytest.raises(NoMessageError, match="no offset message id") as info:
            decode_message_id(bad)
        assert info.value.code == info.value.response_code == ResponseCode.NO_MESSAGE


# --- the requests -------------------------------------------------------------------------------------------


class FakeRemoting:
    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.requests: list[tuple[str, RemotingCommand, int]] = []

    async def invoke(self, addr: str, request: RemotingCommand, timeout_ms: int) -> RemotingCommand:
        self.requests.append((addr, request, timeout_ms))
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        code, fields, body = answer
        return create_response(request, code, "remark", fields, body)


def api(*answers: Any) -> tuple[MQClientAPI, FakeRemoting]:
    remoting = FakeRemoting(*answers)
    return MQClientAPI(remoting, ["ns:9876"], 0), remoting  # type: ignore[arg-type]


async def test_query_message_request_and_results() -> None:
    body = encode_record(topic="T", properties="KEYS\x01k1 k2", body=b"one") + encode_record(
        topic="T", physical_offset=500, body=b"two"
    )
    ts = {"indexLastUpdateTimestamp": "1700000000999", "indexLastUpdatePhyoffset": "600"}
    client, remoting = api(
        (0, ts, body), (ResponseCode.QUERY_NOT_FOUND, ts, None), (ResponseCode.SYSTEM_BUSY, None, None)
    )
    result = await client.query_message(
        "b:1", topic="T", key="k1", max_num=5, begin_timestamp=10, end_timestamp=20, broker_name="bk"
    )
    assert result.index_last_update_timestamp == 1700000000999
    assert [m.body for m in result.messages] == [b"one", b"two"]
    assert result.messages[0].broker_name == "bk" and result.messages[0].key_list == ["k1", "k2"]
    addr, request, timeout = remoting.requests[0]
    assert (addr, request.code, timeout) == ("b:1", RequestCode.QUERY_MESSAGE, 9000)
    assert request.ext_fields == {
        "topic": "T",
        "key": "k1",
        "maxNum": "5",
        "beginTimestamp": "10",
        "endTimestamp": "20",
        "_UNIQUE_KEY_QUERY": "false",
    }
    empty = await client.query_message(
        "b:1", topic="T", key="U", max_num=32, begin_timestamp=0, end_timestamp=LONG_MAX, unique_key=True
    )
    assert empty == QueryResult(1700000000999, [])
    fields = remoting.requests[1][1].ext_fields
    assert fields["_UNIQUE_KEY_QUERY"] == "true" and fields["endTimestamp"] == str(2**63 - 1)
    with pytest.raises(MQClientError) as info:
        await client.query_message("b:1", topic="T", key="k", max_num=1, begin_timestamp=0, end_timestamp=1)
    assert info.value.response_code == ResponseCode.SYSTEM_BUSY


async def test_view_message_request() -> None:
    client, remoting = api(
        (0, None, encode_record(body=b"seen", physical_offset=0x1234)),
        (ResponseCode.SYSTEM_ERROR, None, None),
    )
    msg = await client.view_message("10.0.0.1:10911", 0x1234, 1000, broker_name="bk")
    assert msg.body == b"seen" and msg.commit_log_offset == 0x1234 and msg.broker_name == "bk"
    assert remoting.requests[0][0] == "10.0.0.1:10911"
    request = remoting.requests[0][1]
    assert request.code == RequestCode.VIEW_MESSAGE_BY_ID and request.ext_fields == {"offset": str(0x1234)}
    with pytest.raises(SystemError_):
        await client.view_message("10.0.0.1:10911", 1)


# --- the fan-out over the brokers of a route ----------------------------------------------------------------


def msg(topic: str, body: bytes, *, keys: str = "", uniq: str = "", store_ts: int = 0) -> MessageExt:
    props = {}
    if keys:
        props["KEYS"] = keys
    if uniq:
        props["UNIQ_KEY"] = uniq
    return MessageExt(topic, body, properties=props, store_timestamp=store_ts, store_host="10.0.0.1:10911")


class FakeAPI:
    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def query_message(self, addr: str, **kw: Any) -> QueryResult:
        self.calls.append((addr, kw))
        answer = self.answers[addr]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def view_message(self, addr: str, offset: int, timeout_ms: int) -> MessageExt:
        self.calls.append((addr, {"offset": offset}))
        answer = self.answers[addr]
        if isinstance(answer, BaseException):
            raise answer
        return answer  # type: ignore[no-any-return]


class FakeInstance:
    timeout_ms = 1000

    def __init__(self, api: FakeAPI, route: TopicRouteData | None) -> None:
        self.api = api
        self.route_table: dict[str, TopicRouteData] = {}
        self.route = route
        self.route_updates = 0

    async def update_topic_route(self, topic: str) -> bool:
        self.route_updates += 1
        if self.route is not None:
            self.route_table[topic] = self.route
        return self.route is not None


class Looker(MessageQueryMixin):
    def __init__(self, instance: FakeInstance) -> None:
        self._instance = instance

    @property
    def instance(self) -> Any:
        return self._instance


ROUTE = TopicRouteData(
    queue_datas=[QueueData("a", 4, 4, 6), QueueData("b", 4, 4, 6)],
    broker_datas=[
        BrokerData("c", "a", {0: "a:0", 1: "a:1"}),
        BrokerData("c", "b", {1: "b:1"}),  # no master: any address
    ],
)


async def test_query_asks_every_broker_and_filters_by_topic_and_key() -> None:
    fake = FakeAPI(
        {
            "a:0": QueryResult(5, [msg("T", b"a2", keys="x k", store_ts=2), msg("T", b"hash", keys="kk")]),
            "b:1": QueryResult(9, [msg("T", b"b1", keys="k", store_ts=1), msg("U", b"other", keys="k")]),
        }
    )
    looker = Looker(FakeInstance(fake, ROUTE))
    result = await looker.query_message("T", "k", 7, 100, 200)
    assert result.index_last_update_timestamp == 9
    assert [m.body for m in result.messages] == [b"b1", b"a2"]  # ordered by store time
    assert sorted(addr for addr, _ in fake.calls) == ["a:0", "b:1"]
    _, kw = fake.calls[0]
    assert kw["topic"] == "T" and kw["key"] == "k" and kw["max_num"] == 7
    assert (kw["begin_timestamp"], kw["end_timestamp"], kw["unique_key"]) == (100, 200, False)
    assert kw["timeout_ms"] == 3000
    assert looker.instance.route_updates == 1
    await looker.query_message("T", "k")  # the route is cached now
    assert looker.instance.route_updates == 1


async def test_query_failures_and_nothing_found() -> None:
    down = RemotingConnectError("down")
    fake = FakeAPI({"a:0": QueryResult(0, [msg("T", b"x", keys="other")]), "b:1": down})
    looker = Looker(FakeInstance(fake, ROUTE))
    with pytest.raises(NoMessageError, match="no message"):
        await looker.query_message("T", "k")
    fake.answers["a:0"] = QueryResult(0, [msg("T", b"x", keys="k")])
    assert [m.body for m in (await looker.query_message("T", "k")).messages] == [b"x"]  # b:1 skipped
    fake.answers["a:0"] = broker_error(ResponseCode.SYSTEM_BUSY, "busy", "a:0")
    with pytest.raises(RemotingConnectError):  # every broker failed: the first failure is raised
        await Looker(FakeInstance(FakeAPI({"a:0": down, "b:1": down}), ROUTE)).query_message("T", "k")
    with pytest.raises(NoRouteError, match="route"):
        await Looker(FakeInstance(fake, None)).query_message("T", "k")


async def test_unique_key_query_and_view() -> None:
    uniq = create_uniq_id()
    twin = msg("T", b"twin", uniq=uniq, store_ts=9)
    fake = FakeAPI({"a:0": QueryResult(0, [twin, msg("T", b"first", uniq=uniq, store_ts=3)]), "b:1": down()})
    looker = Looker(FakeInstance(fake, ROUTE))
    result = await looker.query_message_by_unique_key("T", uniq)
    assert [m.body for m in result.messages] == [b"first", b"twin"]
    kw = fake.calls[0][1]
    assert kw["unique_key"] is True and kw["key"] == uniq and kw["max_num"] == 32
    assert kw["begin_timestamp"] == uniq_id_timestamp(uniq) - 1000 and kw["end_timestamp"] == 2**63 - 1
    assert (await looker.view_message_by_unique_key("T", uniq)).body == b"first"
    # Not an offset id: looked up as a UNIQ_KEY of the topic, or refused without a topic.
    assert (await looker.view_message(uniq, topic="T")).body == b"first"
    with pytest.raises(NoMessageError):
        await looker.view_message(uniq)
    fake.answers["a:0"] = QueryResult(0, [msg("T", b"no", uniq="OTHER")])
    with pytest.raises(NoMessageError, match="uniqKey"):
        await looker.view_message_by_unique_key("T", uniq)
    with pytest.raises(NoMessageError):
        await looker.query_message_by_unique_key("T", "not-hex-at-all-")  # no time in it: from 0
    assert fake.calls[-1][1]["begin_timestamp"] == 0


def down() -> BaseException:
    return RemotingConnectError("down")


async def test_view_message_by_offset_id_goes_to_the_store_host() -> None:
    stored = msg("T", b"stored")
    fake = FakeAPI({"10.0.0.1:10911": stored})
    looker = Looker(FakeInstance(fake, ROUTE))
    assert await looker.view_message("0A00000100002A9F0000000000001234") is stored
    assert fake.calls == [("10.0.0.1:10911", {"offset": 0x1234})]
    fake.answers["10.0.0.1:10911"] = broker_error(ResponseCode.SYSTEM_ERROR, "can not find", None)
    with pytest.raises(SystemError_):
        await looker.view_message("0A00000100002A9F0000000000001234")


async def test_lookups_need_a_running_client() -> None:
    from rmq.client.errors import ClientStateError

    with pytest.raises(ClientStateError):
        await Producer("pg").query_message("T", "k")
    with pytest.raises(ClientStateError):
        await PushConsumer("cg").view_message("0A00000100002A9F0000000000001234")


def test_sync_facades_expose_the_lookups() -> None:
    for cls in (sync.Producer, sync.TransactionProducer, sync.PushConsumer, sync.LitePullConsumer):
        for name in ("view_message", "query_message", "query_message_by_unique_key"):
            assert callable(getattr(cls, name)), (cls, name)
        assert callable(cls.view_message_by_unique_key)


# --- timer messages -----------------------------------------------------------------------------------------


def test_timer_properties() -> None:
    m = Message("T", b"x", deliver_time_ms=1_700_000_000_000)
    assert m.deliver_time_ms == 1_700_000_000_000 and m.properties["TIMER_DELIVER_MS"] == "1700000000000"
    assert m.is_timer_message and m.delay_time_ms is None
    m.delay_time_ms = 2500  # one timer property at a time
    assert m.properties.get("TIMER_DELIVER_MS") is None and m.properties["TIMER_DELAY_MS"] == "2500"
    m.delay_time_sec = 3
    assert (m.delay_time_ms, m.delay_time_sec) == (None, 3) and m.properties["TIMER_DELAY_SEC"] == "3"
    m.delay_time_sec = None
    assert not m.is_timer_message
    assert Message("T", b"x", delay_time_ms=10).delay_time_ms == 10
    for bad in (-1, 1.5, "10", True):
        with pytest.raises(ValueError, match="non-negative"):
            m.deliver_time_ms = bad  # type: ignore[assignment]
    for name in ("TIMER_DELIVER_MS", "TIMER_DELAY_MS", "TIMER_DELAY_SEC"):
        assert name in RESERVED_PROPERTIES
    # A consumed message exposes them too.
    rec = encode_record(properties="TIMER_DELIVER_MS\x0142\x02TIMER_OUT_MS\x0142")
    assert decode_messages(rec)[0].deliver_time_ms == 42


def test_timer_messages_are_not_batched() -> None:
    from rmq.client.errors import MessageIllegalError

    producer = Producer("pg")
    with pytest.raises(MessageIllegalError, match="Timer"):
        producer.batch([Message("T", b"1"), Message("T", b"2", delay_time_ms=1000)])


# --- SQL92 subscriptions checked by the broker --------------------------------------------------------------


class CheckAPI:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def check_client_config(self, *args: Any) -> None:
        raise self.error


class CheckInstance:
    client_id = "cid"
    timeout_ms = 1000

    def __init__(self, error: BaseException) -> None:
        self.api = CheckAPI(error)

    def find_broker_addr_by_topic(self, topic: str) -> str:
        return "b:1"


@pytest.mark.parametrize(
    ("code", "error", "match"),
    [
        (23, SubscriptionParseFailedError, "SQL92 subscription of topic T rejected: 'a >' is malformed"),
        (1, MQClientError, "maybe because you use SQL92"),
    ],
)
async def test_sql92_check_errors(code: int, error: type[Exception], match: str) -> None:
    consumer = PushConsumer("cg")
    consumer.subscribe("T", MessageSelector.by_sql("a >"))
    consumer._instance = CheckInstance(broker_error(code, "'a >' is malformed", "b:1"))  # type: ignore[assignment]
    consumer._running = True
    with pytest.raises(error, match=match) as info:
        await consumer._check_client_in_broker()
    assert info.value.response_code == code  # type: ignore[attr-defined]
