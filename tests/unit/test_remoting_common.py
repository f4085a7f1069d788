"""Protocol helpers shared by remoting, name server and broker: fastjson, Java hash, names, route bodies."""

from __future__ import annotations

import asyncio
import json
import re
import zlib

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.fastjson import FastjsonDecodeError, ObjectKey
from rmq.common.java import java_string_hash
from rmq.common.route import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from rmq.common.service import PeriodicTask
from rmq.common.topic import (
    check_group,
    check_topic,
    dlq_topic,
    group_of_retry_topic,
    is_not_allowed_send_topic,
    is_retry_topic,
    is_system_topic,
    retry_topic,
)
from rmq.common.topic_attributes import RETENTION_HOURS, alter_attributes, attributes_text, retention_ms

# --- fastjson ---


def test_unquoted_numeric_keys() -> None:
    assert fastjson.loads(b'{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}}') == {
        "brokerAddrs": {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    }
    assert fastjson.loads(b'{"offsetTable":{"T@g":{0:12,1:7}}}') == {"offsetTable": {"T@g": {0: 12, 1: 7}}}
    assert fastjson.loads("{3:41,-1:2}") == {3: 41, -1: 2}


def test_object_keys() -> None:
    text = (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"brokerOffset":5,"consumerOffset":3},'
        b'{"topic":"T","queueId":1,"brokerName":"b"}:{"brokerOffset":9,"consumerOffset":9}},"consumeTps":1.5}'
    )
    data = fastjson.loads(text)
    table = data["offsetTable"]
    key0 = ObjectKey.from_mapping({"topic": "T", "brokerName": "b", "queueId": 0})
    assert table[key0] == {"brokerOffset": 5, "consumerOffset": 3}
    assert key0.as_dict() == {"brokerName": "b", "queueId": 0, "topic": "T"}
    assert {k.as_dict()["queueId"] for k in table} == {0, 1}
    # written back the fastjson way, and read again to the same value
    assert fastjson.loads(fastjson.dumps_with_object_keys(data)) == data


def test_single_quotes_identifier_keys_trailing_commas_suffixes() -> None:
    assert fastjson.loads("{'a':'it\\'s',b:[1,2,],c:1L,d:2.5e1,e:'\\u00e9\\n'}") == {
        "a": "it's",
        "b": [1, 2],
        "c": 1,
        "d": 25.0,
        "e": "\u00e9\n",
    }


@pytest.mark.parametrize("bad", [b"{", b'{"a"}', b"{'a':1", b"[1 2]", b"nope", b"{} x", b"\xff\xfe"])
def test_garbage_is_rejected(bad: bytes) -> None:
    with pytest.raises(ValueError):
        fastjson.loads(bad)
    with pytest.raises(FastjsonDecodeError):
        fastjson.loads_tolerant(bad)


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    with pytest.raises(FastjsonDecodeError):
        fastjson.loads_tolerant("[" * 100_000)


def test_dumps_is_strict_json_with_string_keys() -> None:
    out = fastjson.dumps({"brokerAddrs": {0: "a", 1: "b"}, "x": [True, None]})
    assert json.loads(out) == {"brokerAddrs": {"0": "a", "1": "b"}, "x": [True, None]}


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    # orjson and the tolerant parser agree on text; surrogates are not valid UTF-8 anyway
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json_values)
def test_tolerant_parser_agrees_with_orjson_on_strict_json(value: object) -> None:
    text = orjson.dumps(value)
    assert fastjson.loads_tolerant(text) == orjson.loads(text)
    assert fastjson.loads(text) == orjson.loads(text)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5), max_size=8
    )
)
def test_unquoted_int_keys_round_trip(table: dict[int, object]) -> None:
    text = "{" + ",".join(f"{k}:{orjson.dumps(v).decode()}" for k, v in table.items()) + "}"
    assert fastjson.loads(text) == table
    # strict output reads back with string keys
    assert fastjson.loads(fastjson.dumps(table)) == {str(k): v for k, v in table.items()}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.text(max_size=5), st.integers(0, 100), st.text(max_size=5), st.integers(0, 2**62)),
        max_size=6,
    )
)
def test_object_keys_round_trip(rows: list[tuple[str, int, str, int]]) -> None:
    table = {ObjectKey.from_mapping({"brokerName": b, "queueId": q, "topic": t}): v for b, q, t, v in rows}
    body = {"offsetTable": table}
    assert fastjson.loads(fastjson.dumps_with_object_keys(body)) == body


# --- java hash ---


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("TagA", 2598919),
        ("polygenelubricants", -2147483648),  # the classic Integer.MIN_VALUE hash
        ("\u4e2d\u6587", 646394),
        ("\U0001f600", 1772899),  # a surrogate pair: 0xD83D * 31 + 0xDE00
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


# --- names ---


def test_topic_validation() -> None:
    assert check_topic("Topic_A-1%|x") is None
    assert check_topic("") == "The specified topic is blank."
    assert check_topic("   ") == "The specified topic is blank."
    assert check_topic(None) == "The specified topic is blank."
    assert "illegal characters" in (check_topic("a b") or "")
    assert "illegal characters" in (check_topic("t\u00e9") or "")
    assert check_topic("x" * 127) is None
    assert "longer than" in (check_topic("x" * 128) or "")
    assert check_group("g" * 255) is None
    assert check_group("g" * 256) is not None
    assert check_group("g.1") is not None


def test_system_retry_dlq_topics() -> None:
    assert is_system_topic("TBW102")
    assert is_system_topic("SCHEDULE_TOPIC_XXXX")
    assert is_system_topic("rmq_sys_anything")
    assert not is_system_topic("MyTopic")
    assert is_not_allowed_send_topic("RMQ_SYS_TRANS_HALF_TOPIC")
    assert not is_not_allowed_send_topic("TBW102")
    assert retry_topic("g") == "%RETRY%g" and dlq_topic("g") == "%DLQ%g"
    assert is_retry_topic("%RETRY%g") and group_of_retry_topic("%RETRY%g") == "g"
    assert group_of_retry_topic("T") is None


def test_codes_are_ints() -> None:
    assert RequestCode.SEND_MESSAGE_V2 == 310
    assert ResponseCode.TOPIC_NOT_EXIST == 17
    assert RequestCode(105).name == "GET_ROUTEINFO_BY_TOPIC"


# --- route bodies ---


def test_topic_route_data_json() -> None:
    route = TopicRouteData(
        queue_datas=[QueueData("broker-a", 4, 4, 6, 0)],
        broker_datas=[BrokerData("c1", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"})],
        order_topic_conf="broker-a:4",
    )
    strict = json.loads(route.to_json())
    assert strict["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}
    assert strict["queueDatas"][0]["topicSysFlag"] == 0
    assert strict["queueDatas"][0]["topicSynFlag"] == 0
    assert strict["orderTopicConf"] == "broker-a:4"
    assert strict["filterServerTable"] == {}
    assert TopicRouteData.from_json(route.to_json()) == route
    # fastjson's default form (unquoted numeric keys, pre-4.9.0 field name) reads the same
    java = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a",'
        b'"cluster":"c1"}],"filterServerTable":{},"orderTopicConf":"broker-a:4","queueDatas":[{"brokerName":'
        b'"broker-a","perm":6,"readQueueNums":4,"topicSynFlag":0,"writeQueueNums":4}]}'
    )
    assert TopicRouteData.from_json(java) == route
    assert "orderTopicConf" not in json.loads(TopicRouteData().to_json())


def test_topic_route_data_carries_5x_fields() -> None:
    # A 5.x name server writes enableActingMaster on every BrokerData (false for a group without an acting
    # master) and topicSysFlag on every QueueData; zoneName and topicQueueMappingByBroker only when set.
    route = TopicRouteData(
        queue_datas=[QueueData("broker-a", 4, 4, 6, 0)],
        broker_datas=[BrokerData("c1", "broker-a", {0: "10.0.0.1:10911"})],
    )
    strict = json.loads(route.to_json())
    assert strict == {
        "brokerDatas": [
            {
                "brokerAddrs": {"0": "10.0.0.1:10911"},
                "brokerName": "broker-a",
                "cluster": "c1",
                "enableActingMaster": False,
            }
        ],
        "filterServerTable": {},
        "queueDatas": [
            {
                "brokerName": "broker-a",
                "perm": 6,
                "readQueueNums": 4,
                "topicSynFlag": 0,
                "topicSysFlag": 0,
                "writeQueueNums": 4,
            }
        ],
    }
    # a 5.x body with the optional members set reads back, and they survive a round trip
    five = (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"c1",'
        b'"enableActingMaster":true,"zoneName":"z1"}],"filterServerTable":{},"queueDatas":[{"brokerName":'
        b'"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}],'
        b'"topicQueueMappingByBroker":{}}'
    )
    read = TopicRouteData.from_json(five)
    assert (read.broker_datas[0].enable_acting_master, read.broker_datas[0].zone_name) == (True, "z1")
    again = json.loads(read.to_json())["brokerDatas"][0]
    assert (again["enableActingMaster"], again["zoneName"]) == (True, "z1")
    assert read.broker_datas[0].copy() == read.broker_datas[0]


def test_topic_config_forms() -> None:
    tc = TopicConfig("T", 8, 8, 6, "MULTI_TAG", 0, True)
    assert TopicConfig.from_dict(tc.to_dict()) == tc
    assert tc.encode_compact() == "T 8 8 6 MULTI_TAG"
    assert TopicConfig.decode_compact("T 8 8 6 MULTI_TAG") == TopicConfig("T", 8, 8, 6, "MULTI_TAG")
    assert TopicConfig.from_dict({"topicName": "X", "topicFilterType": 1}).topic_filter_type == "MULTI_TAG"
    defaults = TopicConfig.from_dict({}, "Y")
    assert (defaults.read_queue_nums, defaults.write_queue_nums, defaults.perm) == (16, 16, 6)
    with pytest.raises(ValueError):
        TopicConfig.decode_compact("T 8 8")
    # 5.x's attributes: written only when there are some (as 4.9 writes a topic without).
    assert "attributes" not in tc.to_dict()
    with_attrs = TopicConfig("T", 1, 1, attributes={"retention.hours": "24"})
    assert with_attrs.to_dict()["attributes"] == {"retention.hours": "24"}
    assert TopicConfig.from_dict(with_attrs.to_dict()) == with_attrs
    with pytest.raises(ValueError, match="attributes must be a JSON object"):
        TopicConfig.from_dict({"topicName": "T", "attributes": "retention.hours=1"})


def test_topic_attributes() -> None:
    assert alter_attributes({}, None, create=True) == {}
    assert alter_attributes({}, "+retention.hours=24", create=True) == {RETENTION_HOURS: "24"}
    assert alter_attributes({RETENTION_HOURS: "24"}, "+retention.hours=0.5", create=False) == {
        RETENTION_HOURS: "0.5"
    }
    assert alter_attributes({RETENTION_HOURS: "24"}, "-retention.hours", create=False) == {}
    assert alter_attributes({RETENTION_HOURS: "24"}, "", create=False) == {RETENTION_HOURS: "24"}
    assert alter_attributes({}, "+message.type=FIFO,+retention.hours=1", create=True) == {
        "message.type": "FIFO",
        RETENTION_HOURS: "1",
    }
    for text, create, says in (
        ("-retention.hours", True, "only adding attributes is supported while creating a topic"),
        ("-retention.hours", False, "attempt to delete a nonexistent attribute: retention.hours"),
        (
            "+queue.type=BatchCQ",
            True,
            "unsupported attribute key: queue.type (rmq supports message.type, retention.hours, "
            "lite.topic.expiration)",
        ),
        (
            "+message.type=fifo",
            True,
            "message.type must be one of NORMAL, FIFO, DELAY, TRANSACTION, LITE, MIXED",
        ),
        ("+retention.hours", True, "expected +key=value"),
        ("retention.hours=1", True, "must start with + (set) or - (remove)"),
        ("+retention.hours=1,+retention.hours=2", True, "attribute retention.hours given twice"),
        ("+retention.hours=x", True, "must be a number of hours, not 'x'"),
        ("+retention.hours=0", True, "must be more than 0 and at most 87600 hours"),
        ("+retention.hours=nan", True, "must be more than 0"),
        ("+retention.hours=87601", True, "at most 87600 hours"),
    ):
        with pytest.raises(ValueError, match=re.escape(says)):
            alter_attributes({}, text, create=create)
    assert retention_ms({RETENTION_HOURS: "0.5"}) == 1_800_000
    assert retention_ms({RETENTION_HOURS: "bad"}) is None
    assert retention_ms({}) is None
    assert attributes_text({"b": "2", "a": "1"}) == "+a=1,+b=2"


def sample_register_body() -> RegisterBrokerBody:
    return RegisterBrokerBody(
        TopicConfigSerializeWrapper(
            DataVersion(timestamp=1700000000000, counter=3),
            {
                "TopicA": TopicConfig("TopicA", 4, 4, 6),
                "TBW102": TopicConfig("TBW102", 8, 8, 7),
            },
        ),
        ["10.0.0.9:1234"],
    )


def test_register_broker_body_json_and_compressed() -> None:
    body = sample_register_body()
    assert RegisterBrokerBody.decode(body.encode()) == body
    assert RegisterBrokerBody.decode(body.encode(compress=True), compressed=True) == body


def test_register_broker_body_compressed_layout() -> None:
    raw = zlib.decompress(sample_register_body().encode(compress=True))
    dv_len = int.from_bytes(raw[:4], "big")
    assert json.loads(raw[4 : 4 + dv_len]) == {"counter": 3, "timestamp": 1700000000000}
    pos = 4 + dv_len
    assert int.from_bytes(raw[pos : pos + 4], "big") == 2
    pos += 4
    n = int.from_bytes(raw[pos : pos + 4], "big")
    assert raw[pos + 4 : pos + 4 + n] == b"TopicA 4 4 6 SINGLE_TAG"


@pytest.mark.parametrize("bad", [b"not zlib", zlib.compress(b"\x00\x00\x00\x10{}"), zlib.compress(b"\x00")])
def test_register_broker_body_compressed_garbage(bad: bytes) -> None:
    with pytest.raises(ValueError):
        RegisterBrokerBody.decode(bad, compressed=True)


def test_cluster_info_json() -> None:
    info = ClusterInfo({"broker-a": BrokerData("c1", "broker-a", {0: "h:1"})}, {"c1": {"broker-a"}})
    assert json.loads(info.to_json()) == {
        "brokerAddrTable": {
            "broker-a": {
                "brokerAddrs": {"0": "h:1"},
                "brokerName": "broker-a",
                "cluster": "c1",
                "enableActingMaster": False,
            }
        },
        "clusterAddrTable": {"c1": ["broker-a"]},
    }
    assert ClusterInfo.from_json(info.to_json()) == info


def test_data_version() -> None:
    dv = DataVersion(5, 1)
    dv.next_version(now_ms=10)
    assert dv == DataVersion(10, 2)
    assert DataVersion.from_json(b'{"counter":"7","timestamp":1}') == DataVersion(1, 7)


# --- periodic task ----------------------------------------------------------------------------------------


async def test_periodic_task_wakeup_failure_and_final_tick() -> None:
    ticks: list[int] = []
    ticked = asyncio.Event()

    def tick() -> None:
        ticks.append(len(ticks))
        ticked.set()
        if len(ticks) == 2:
            raise RuntimeError("a failing tick is logged, the schedule goes on")

    task = PeriodicTask("test-task", 3600, tick, initial_delay_s=0, final_tick=True)
    task.start()
    await ticked.wait()
    assert ticks == [0]
    for expected in ([0, 1], [0, 1, 2]):
        ticked.clear()
        task.wakeup()  # instead of waiting an hour
        await ticked.wait()
        assert ticks == expected
    await task.stop()
    assert ticks == [0, 1, 2, 3]  # the final drain tick
    assert not task.running


async def test_periodic_task_async_tick_and_stop_before_first_run() -> None:
    calls: list[str] = []

    async def tick() -> None:
        calls.append("tick")

    task = PeriodicTask("idle", 3600, tick)
    task.start()
    with pytest.raises(RuntimeError):
        task.start()
    await task.stop()
    assert calls == []
