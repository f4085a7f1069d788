"""The gRPC endpoint's sans-I/O parts (rmq.proxy): FIFO queue choice, receipt handles, transaction ids,
the 5.x message <-> stored message conversion, the HMAC authorization header and route shaping."""

from __future__ import annotations

import hashlib
import hmac
import zlib

import pytest
from rmq.acl.rules import parse_rules
from rmq.acl.validator import AccessValidator
from rmq.client.heartbeat import ConsumeType
from rmq.client.message import MessageExt
from rmq.common.java import java_string_hash
from rmq.common.route import BrokerData, QueueData, TopicRouteData
from rmq.proxy import pop
from rmq.proxy.auth import Authenticator
from rmq.proxy.brokers import Brokers, TxRef, commit_log_offset
from rmq.proxy.clients import ClientRegistry
from rmq.proxy.messages import SHARDING_KEY, TIMER_DELIVER_MS, from_broker, timestamp, to_broker
from rmq.proxy.pb import d
from rmq.proxy.route import assignments, consistent_hash, message_queues, view_of
from rmq.proxy.status import ProxyError

# Guava 32's Hashing.consistentHash(key.hashCode(), buckets), computed with the jar Apache RocketMQ 5.5.0
# ships.
GUAVA = [
    ("order-7", 1, 0),
    ("order-7", 3, 0),
    ("order-7", 8, 4),
    ("order-7", 16, 9),
    ("order-7", 1000, 711),
    ("g1", 8, 6),
    ("g1", 16, 9),
    ("g1", 1000, 290),
    ("a", 8, 0),
    ("a", 1000, 346),
    ("hello world", 3, 1),
    ("hello world", 8, 3),
    ("hello world", 1000, 681),
    ("中文", 8, 3),
    ("中文", 1000, 401),
    ("", 1000, 0),
    ("fifo-group-0", 3, 2),
    ("fifo-group-0", 8, 6),
    ("fifo-group-0", 16, 13),
    ("fifo-group-0", 1000, 422),
]


@pytest.mark.parametrize(("key", "buckets", "expected"), GUAVA)
def test_consistent_hash_is_guavas(key: str, buckets: int, expected: int) -> None:
    assert consistent_hash(java_string_hash(key), buckets) == expected


def test_consistent_hash_refuses_no_buckets() -> None:
    with pytest.raises(ValueError, match="buckets must be positive"):
        consistent_hash(1, 0)


def test_receipt_handle_round_trip_and_bad_handles() -> None:
    h = pop.Handle(10, 1700000000000, 30000, 3, "0", "broker-a", 2, 12)
    assert str(h) == "10 1700000000000 30000 3 0 broker-a 2 12"
    assert pop.Handle.parse(str(h)) == h
    # Apache's proxy adds the CommitLog offset as a ninth field (the dead-letter forward needs it).
    with_offset = pop.Handle(10, 1700000000000, 30000, 3, "0", "broker-a", 2, 12, 4096)
    assert str(with_offset) == "10 1700000000000 30000 3 0 broker-a 2 12 4096"
    assert pop.Handle.parse(str(with_offset)) == with_offset
    with pytest.raises(ValueError, match="has 3 fields, not 8"):
        pop.Handle.parse("1 2 3")
    with pytest.raises(ValueError):
        pop.Handle.parse("x 2 3 4 0 b 1 1")


def test_retry_marks_and_real_topics() -> None:
    assert pop.retry_mark("T") == "0"
    assert pop.retry_mark("%RETRY%G_T") == "1"
    assert pop.retry_mark("%RETRY%G+T") == "2"
    assert pop.real_topic("T", "G", "0") == "T"
    assert pop.real_topic("T", "G", "1") == "%RETRY%G_T"
    assert pop.real_topic("T", "G", "2") == "%RETRY%G+T"
    assert pop.parse_offset_info("0 1 5;1 0 7,8") == {"0@1": [5], "1@0": [7, 8]}
    with pytest.raises(ValueError, match="bad offset info entry"):
        pop.parse_offset_info("0 1")


def test_transaction_id_round_trip_and_foreign_ids() -> None:
    tx = TxRef("127.0.0.1:10911", 4096, 7, "UNIQ01")
    assert TxRef.parse(str(tx)) == tx
    with pytest.raises(ProxyError) as e:
        TxRef.parse("some-other-servers-id")
    assert e.value.code == d.Code.INVALID_TRANSACTION_ID
    assert commit_log_offset("7F00000100002A9F0000000000001000") == 4096


def _message(**system: object) -> d.Message:
    sp = d.SystemProperties(message_id="ID1", **system)  # type: ignore[arg-type]
    return d.Message(
        topic=d.Resource(name="T"), body=b"hello", system_properties=sp, user_properties={"color": "red"}
    )


def test_a_5x_message_becomes_the_properties_apache_stores() -> None:
    out = to_broker(_message(tag="TagA", keys=["k1", "k2"], message_group="g1"), "10.0.0.1")
    p = out.properties
    assert (p["TAGS"], p["KEYS"], p[SHARDING_KEY], p["UNIQ_KEY"], p["PGROUP"]) == (
        "TagA",
        "k1 k2",
        "g1",
        "ID1",
        "T",
    )
    assert p["color"] == "red" and p["__BORNHOST"] == "10.0.0.1"
    assert out.sys_flag == 0 and not out.transactional and out.message_group == "g1"
    delayed = to_broker(_message(delivery_timestamp=timestamp(1_700_000_000_123)), "h")
    assert delayed.properties[TIMER_DELIVER_MS] == "1700000000123"
    tx = to_broker(_message(message_type=d.MessageType.TRANSACTION), "h")
    assert tx.transactional and tx.sys_flag == 4 and tx.properties["TRAN_MSG"] == "true"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"user": {"TAGS": "x"}}, d.Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
        ({"tag": "a|b"}, d.Code.ILLEGAL_MESSAGE_TAG),
        ({"keys": [" "]}, d.Code.ILLEGAL_MESSAGE_KEY),
        ({"id": ""}, d.Code.ILLEGAL_MESSAGE_ID),
        ({"group": "g\n"}, d.Code.ILLEGAL_MESSAGE_GROUP),
        ({"body": b"x" * 11}, d.Code.MESSAGE_BODY_TOO_LARGE),
    ],
)
def test_bad_5x_messages_are_refused_with_their_code(change: dict[str, object], code: int) -> None:
    sp = d.SystemProperties(message_id=str(change.get("id", "ID1")))
    if "tag" in change:
        sp.tag = str(change["tag"])
    if "keys" in change:
        sp.keys.extend(change["keys"])  # type: ignore[arg-type]
    if "group" in change:
        sp.message_group = str(change["group"])
    body = change.get("body", b"ok")
    msg = d.Message(
        topic=d.Resource(name="T"), body=body, system_properties=sp, user_properties=change.get("user", {})
    )  # type: ignore[arg-type]
    with pytest.raises(ProxyError) as e:
        to_broker(msg, "h", max_body_size=10)
    assert e.value.code == code


def test_a_stored_message_becomes_a_5x_message() -> None:
    props = {
        "TAGS": "TagA",
        "KEYS": "k1 k2",
        "UNIQ_KEY": "ID9",
        SHARDING_KEY: "g",
        "color": "red",
        "WAIT": "true",
        "REAL_TOPIC": "T",
        # Shown, as Apache's proxy shows them (not in its STRING_HASH_SET):
        "TRANSACTION_CHECK_TIMES": "1",
        "__transactionId__": "ID9",
    }
    m = MessageExt(
        "T", b"body", queue_id=3, queue_offset=5, reconsume_times=2, properties=props, store_host="h:1"
    )
    out = from_broker(m, receipt_handle="RH", invisible_ms=30_000)
    sp = out.system_properties
    assert (sp.message_id, sp.tag, list(sp.keys), sp.message_group) == ("ID9", "TagA", ["k1", "k2"], "g")
    assert (sp.queue_id, sp.queue_offset, sp.delivery_attempt, sp.receipt_handle) == (3, 5, 3, "RH")
    assert sp.message_type == d.MessageType.FIFO and sp.invisible_duration.seconds == 30
    assert sp.body_digest.checksum == format(zlib.crc32(b"body"), "08X")
    assert dict(out.user_properties) == {
        "color": "red",
        "TRANSACTION_CHECK_TIMES": "1",
        "__transactionId__": "ID9",
    }


def _route() -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData("b", 4, 2, 6), QueueData("a", 2, 2, 4)],
        broker_datas=[BrokerData("c", "a", {0: "1.1.1.1:1"}), BrokerData("c", "b", {0: "2.2.2.2:2"})],
    )


def test_route_and_assignments_are_shaped_as_apaches() -> None:
    view = view_of(_route())
    ep = d.Endpoints(addresses=[d.Address(host="p", port=8081)])
    topic = d.Resource(name="T")
    queues = message_queues(view, topic, ep)
    # broker b (RW, 4 read / 2 write): 2 read-only then 2 read-write; broker a (read only): 2 read-only
    assert [(q.broker.name, q.id, q.permission) for q in queues] == [
        ("b", 0, d.Permission.READ),
        ("b", 1, d.Permission.READ),
        ("b", 2, d.Permission.READ_WRITE),
        ("b", 3, d.Permission.READ_WRITE),
        ("a", 0, d.Permission.READ),
        ("a", 1, d.Permission.READ),
    ]
    assert all(q.broker.endpoints == ep for q in queues)
    assert [(w.broker_name, w.queue_id) for w in view.write_queues] == [("b", 0), ("b", 1)]
    concurrent = assignments(view, topic, ep, fifo=False)
    assert [(a.message_queue.broker.name, a.message_queue.id) for a in concurrent] == [("b", -1), ("a", -1)]
    assert len(assignments(view, topic, ep, fifo=True)) == 6


RULES = """\
accounts:
  - accessKey: app
    secretKey: app-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - T=PUB
"""


def test_hmac_authorization_header() -> None:
    auth = Authenticator(AccessValidator(parse_rules(RULES)))
    when = "20261128T091500Z"
    sig = hmac.new(b"app-secret", when.encode(), hashlib.sha1).hexdigest()
    header = f"MQv2-HMAC-SHA1 Credential=app, SignedHeaders=x-mq-date-time, Signature={sig}"
    meta = {"authorization": header, "x-mq-date-time": when}
    auth.authenticate(meta, "10.0.0.1:5000")
    auth.authorize(meta, "topic", "T", "PUB")
    with pytest.raises(ProxyError, match="needs SUB"):
        auth.authorize(meta, "topic", "T", "SUB")
    with pytest.raises(ProxyError, match="signature mismatch"):
        auth.authenticate({**meta, "x-mq-date-time": "20261128T091501Z"}, "10.0.0.1:5000")
    with pytest.raises(ProxyError, match="carries no authorization header"):
        auth.authenticate({}, "10.0.0.1:5000")


async def test_heartbeat_tells_brokers_how_each_5x_group_consumes() -> None:
    """As Apache's proxy: a SimpleConsumer's group consumes actively (CONSUME_ACTIVELY), a PushConsumer's
    passively; producers are listed by their topics."""
    registry = ClientRegistry()
    for cid, kind, group in (
        ("c1", d.ClientType.SIMPLE_CONSUMER, "GS"),
        ("c2", d.ClientType.PUSH_CONSUMER, "GP"),
    ):
        sess = registry.session(cid)
        sess.client_type, sess.group = kind, group
        sess.subscriptions = {"T": d.FilterExpression(type=d.FilterType.TAG, expression="*")}
    producer = registry.session("c3")
    producer.client_type, producer.topics = d.ClientType.PRODUCER, {"T"}
    brokers = Brokers(["127.0.0.1:1"], registry)
    try:
        data = brokers.heartbeat_data()
    finally:
        await brokers.close()
    assert {c.group_name: c.consume_type for c in data.consumers} == {
        "GS": ConsumeType.CONSUME_ACTIVELY,
        "GP": ConsumeType.CONSUME_PASSIVELY,
    }
    assert data.producer_groups == ["T"]
