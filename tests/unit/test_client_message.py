"""Message model: properties (§4.3), UNIQ_KEY (§5.2), decoding pull bodies (§4.1), batch bodies (§4.5)."""

from __future__ import annotations

import ipaddress
import os
import struct
import time
import zlib

import pytest
from rmq.client.message import (
    RESERVED_PROPERTIES,
    Message,
    MessageExt,
    MessageQueue,
    decode_messages,
    decompress_body,
    encode_batch,
    encode_properties,
    parse_properties,
)
from rmq.client.uniq_id import _UniqIdGenerator, create_uniq_id, uniq_id_ip, uniq_id_timestamp
from rmq.common.codes import MessageConst

MAGIC = 0xDAA320A7


def encode_record(
    *,
    topic: str = "T",
    queue_id: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    body: bytes = b"hello",
    properties: str = "",
    sys_flag: int = 0,
    flag: int = 0,
    born_timestamp: int = 1_700_000_000_000,
    born_host: tuple[str, int] = ("10.0.0.9", 5555),
    store_timestamp: int = 1_700_000_000_123,
    store_host: tuple[str, int] = ("10.0.0.1", 10911),
    reconsume_times: int = 0,
) -> bytes:
    """One stored record per REMOTING.md §4.1, written independently of rmq (IPv4 hosts)."""
    t = topic.encode()
    p = properties.encode()
    total = 91 + len(body) + len(t) + len(p)
    out = struct.pack(
        ">iIiiiqqiq",
        total,
        MAGIC,
        zlib.crc32(body) & 0x7FFFFFFF,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
    )
    out += ipaddress.ip_address(born_host[0]).packed + struct.pack(">i", born_host[1])
    out += struct.pack(">q", store_timestamp)
    out += ipaddress.ip_address(store_host[0]).packed + struct.pack(">i", store_host[1])
    out += struct.pack(">iqi", reconsume_times, 0, len(body)) + body
    out += struct.pack(">b", len(t)) + t + struct.pack(">h", len(p)) + p
    assert len(out) == total
    return out


# --- properties ---------------------------------------------------------------------------------------------


def test_properties_round_trip_and_java_rules() -> None:
    props = {"TAGS": "a", "KEYS": "k1 k2", "UNIQ_KEY": "ABC"}
    text = encode_properties(props)
    assert text == "TAGS\x01a\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01ABC"
    assert not text.endswith("\x02")
    assert parse_properties(text) == props
    assert encode_properties({}) == ""
    assert encode_properties({"a": None, "b": "1"}) == "b\x011"  # null values skipped


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("a\x01", {}),  # empty value dropped
        ("\x01v", {}),  # empty name dropped
        ("ab", {}),  # no separator
        ("a\x01b\x02\x02c\x01d", {"a": "b", "c": "d"}),  # empty segment skipped
        ("a\x011\x02a\x012", {"a": "2"}),  # later duplicates win
        ("a\x01x\x01y", {"a": "x\x01y"}),  # value keeps further separators
    ],
)
def test_parse_properties_edge_cases(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


# --- UNIQ_KEY -----------------------------------------------------------------------------------------------


def test_uniq_id_layout() -> None:
    gen = _UniqIdGenerator(ip="10.1.2.3", pid=0x12345)
    uid = gen()
    assert len(uid) == 32 and uid == uid.upper()
    raw = bytes.fromhex(uid)
    assert raw[:4] == bytes([10, 1, 2, 3])
    assert struct.unpack(">h", raw[4:6])[0] == 0x2345  # pid truncated to a short
    assert uniq_id_ip(uid) == "10.1.2.3"
    assert abs(uniq_id_timestamp(uid) - time.time() * 1000) < 5000
    counters = [struct.unpack(">H", bytes.fromhex(gen())[-2:])[0] for _ in range(3)]
    assert counters == [1, 2, 3]


def test_uniq_id_ipv6_and_uniqueness() -> None:
    gen = _UniqIdGenerator(ip="fe80::1", pid=7)
    uid = gen()
    assert len(uid) == 56
    assert uniq_id_ip(uid) == "fe80::1"
    ids = {create_uniq_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    assert all(i.startswith(create_uniq_id()[:20]) for i in list(ids)[:10])


def test_uniq_id_counter_wraps_at_16_bits() -> None:
    gen = _UniqIdGenerator(ip="10.0.0.1", pid=1)
    gen._counter = 0xFFFF
    assert gen().endswith("FFFF")
    assert gen().endswith("0000")


# --- Message ------------------------------------------------------------------------------------------------


def test_message_helpers() -> None:
    msg = Message("T", b"x", tags="TagA", keys=["k1", "k2"], delay_time_level=3)
    assert msg.tags == "TagA"
    assert msg.keys == "k1 k2" and msg.key_list == ["k1", "k2"]
    assert msg.delay_time_level == 3
    assert msg.wait_store_msg_ok is True
    assert msg.properties["WAIT"] == "true"
    msg.keys = "single"
    assert msg.key_list == ["single"]
    msg.delay_time_level = 0
    assert MessageConst.DELAY_TIME_LEVEL not in msg.properties
    msg.put_user_property("color", "red")
    assert msg.get_user_property("color") == "red"
    for name in ("TAGS", "UNIQ_KEY", "DELAY", "RETRY_TOPIC"):
        assert name in RESERVED_PROPERTIES
        with pytest.raises(ValueError, match="used by system"):
            msg.put_user_property(name, "x")
    with pytest.raises(ValueError):
        msg.put_user_property("blank", " ")
    assert msg.uniq_id is None


def test_message_queue_order_and_json() -> None:
    a, b, c = MessageQueue("A", "b1", 2), MessageQueue("A", "b2", 0), MessageQueue("B", "b0", 0)
    assert sorted([c, b, a]) == [a, b, c]
    assert MessageQueue.from_dict(a.to_dict()) == a
    assert a.to_dict() == {"brokerName": "b1", "queueId": 2, "topic": "A"}


# --- decoding -----------------------------------------------------------------------------------------------


def test_decode_messages_fields_and_lazy_properties() -> None:
    body = encode_record(
        topic="TopicA",
        queue_id=3,
        queue_offset=41,
        physical_offset=0x1234,
        body=b"payload",
        properties="TAGS\x01TagA\x02UNIQ_KEY\x01C0A80001000000000000000000000001\x02KEYS\x01k",
        flag=7,
        reconsume_times=2,
    ) + encode_record(queue_offset=42, physical_offset=0x2000, properties="", body=b"second")
    msgs = decode_messages(body, "broker-a", 10, 99)
    assert len(msgs) == 2
    m = msgs[0]
    assert isinstance(m, MessageExt)
    assert (m.topic, m.queue_id, m.queue_offset, m.commit_log_offset) == ("TopicA", 3, 41, 0x1234)
    assert (m.flag, m.reconsume_times, m.body) == (7, 2, b"payload")
    assert m.born_host == "10.0.0.9:5555" and m.store_host == "10.0.0.1:10911"
    assert m.broker_name == "broker-a"
    assert m.tags == "TagA" and m.keys == "k"
    assert m.msg_id == "C0A80001000000000000000000000001"
    assert m.offset_msg_id == "0A00000100002A9F0000000000001234"
    assert m.properties[MessageConst.MIN_OFFSET] == "10"
    assert m.properties[MessageConst.MAX_OFFSET] == "99"
    second = msgs[1]
    assert second.tags is None
    assert second.msg_id == second.offset_msg_id  # no UNIQ_KEY: the offset id
    assert second.get_property(MessageConst.MAX_OFFSET) == "99"


def test_decode_inflates_compressed_bodies() -> None:
    data = os.urandom(64) * 200
    rec = encode_record(body=zlib.compress(data), sys_flag=0x1)  # pre-4.9.4 flag: zlib
    rec += encode_record(body=zlib.compress(data, 5), sys_flag=0x301)  # 4.9.4+ ZLIB type bits
    msgs = decode_messages(rec)
    assert [m.body for m in msgs] == [data, data]
    assert decompress_body(b"not zlib", 0x1) == b"not zlib"  # undecodable: delivered as stored


def test_transaction_id_of_consumed_transactional_message() -> None:
    rec = encode_record(properties="TRAN_MSG\x01true\x02UNIQ_KEY\x01ABCD")
    (m,) = decode_messages(rec)
    assert m.transaction_id == "ABCD"


# --- batch --------------------------------------------------------------------------------------------------


def test_encode_batch_matches_section_4_5() -> None:
    msgs = [Message("T", b"one", tags="a", flag=3), Message("T", b"second", keys="k")]
    body = encode_batch(msgs)
    pos = 0
    for m in msgs:
        total, magic, crc, flag, body_len = struct.unpack_from(">iiiii", body, pos)
        props_len = struct.unpack_from(">h", body, pos + 20 + body_len)[0]
        assert total == 22 + body_len + props_len
        assert (magic, crc, flag) == (0, 0, m.flag)
        assert body[pos + 20 : pos + 20 + body_len] == m.body
        props = body[pos + 22 + body_len : pos + 22 + body_len + props_len].decode()
        assert parse_properties(props) == m.properties
        pos += total
    assert pos == len(body)
