"""POP's wire formats against RocketMQ 5.x's: receipt handles (ExtraInfoUtil), retry topic names
(KeyBuilder), BATCH_ACK_MESSAGE bodies (a java.util.BitSet's toByteArray in base64, as fastjson writes a
byte[]) and the revive topic's checkpoint / ack records (their short JSON names)."""

from __future__ import annotations

import orjson
import pytest
from rmq.broker.pop.wire import (
    AckRecord,
    CheckPoint,
    ExtraInfo,
    ExtraInfoError,
    bitset_from_bytes,
    bitset_to_bytes,
    decode_batch_ack_body,
    offset_info,
    pop_retry_topic,
    real_topic,
    retry_mark,
    revive_topic,
)


def test_extra_info_round_trip_and_errors() -> None:
    text = "12 1700000000000 60000 3 1 broker-a 0 15"
    h = ExtraInfo.parse(text)
    assert (h.ck_queue_offset, h.pop_time, h.invisible_time, h.revive_qid) == (12, 1700000000000, 60000, 3)
    assert (h.retry, h.broker_name, h.queue_id, h.msg_queue_offset) == ("1", "broker-a", 0, 15)
    assert str(h) == text and not h.is_order
    assert str(ExtraInfo.parse("1 2 3 999 0 b 4")) == "1 2 3 999 0 b 4"
    assert ExtraInfo.parse("1 2 3 999 0 b 4").is_order
    for bad in (None, "", "1 2 3", "a 2 3 4 0 b 5"):
        with pytest.raises(ExtraInfoError):
            ExtraInfo.parse(bad)


def test_topic_names() -> None:
    assert revive_topic("DefaultCluster") == "rmq_sys_REVIVE_LOG_DefaultCluster"
    assert pop_retry_topic("T", "G") == "%RETRY%G_T"
    assert pop_retry_topic("T", "G", v2=True) == "%RETRY%G+T"
    assert [retry_mark(t) for t in ("T", "%RETRY%G_T", "%RETRY%G+T")] == ["0", "1", "2"]
    assert real_topic("T", "G", "1") == "%RETRY%G_T" and real_topic("T", "G", "0") == "T"
    assert offset_info("%RETRY%G_T", 0, "5") == "1 0 5"
    with pytest.raises(ExtraInfoError):
        real_topic("T", "G", "7")


def test_bitset_as_java_writes_it() -> None:
    # new BitSet(); set(0); set(2); set(9) -> toByteArray() = {0x05, 0x02}
    assert bitset_to_bytes([0, 2, 9]) == b"\x05\x02"
    assert bitset_from_bytes(b"\x05\x02") == [0, 2, 9]
    assert bitset_to_bytes([]) == b""


def test_batch_ack_body() -> None:
    body = {
        "acks": [
            {"b": "BQI=", "c": "G", "it": 60000, "pt": 7, "q": 1, "r": "0", "rq": 2, "so": 100, "t": "T"},
            {"bitSet": "AQ==", "consumerGroup": "G", "topic": "T", "retry": "1", "startOffset": 5},
        ],
        "brokerName": "broker-a",
    }
    name, acks = decode_batch_ack_body(orjson.dumps(body))
    assert name == "broker-a" and acks[0].bits == [0, 2, 9] and acks[0].revive_queue_id == 2
    assert (acks[1].retry, acks[1].start_offset, acks[1].bits) == ("1", 5, [0])
    assert acks[0].to_dict() == body["acks"][0]
    for bad in (b"[", b"[]", b'{"acks": 3}', b'{"acks": [{"b": "***", "c": "G", "t": "T"}]}'):
        with pytest.raises(ValueError):
            decode_batch_ack_body(bad)


def test_revive_records() -> None:
    ck = CheckPoint("T", 1, "G", 10, 1000, 500, [0, 2], "broker-a")
    d = orjson.loads(ck.to_json())
    assert d == {
        "bm": 0, "bn": "broker-a", "c": "G", "d": [0, 2], "it": 500, "n": 2,
        "pt": 1000, "q": 1, "ro": 0, "so": 10, "t": "T",
    }  # fmt: skip
    back = CheckPoint.from_json(ck.to_json())
    assert back == ck and back.offsets() == [10, 12] and back.revive_time == 1500
    assert ck.unique_id() == "T@1@10@G@1000@broker-a@ck"
    ack = AckRecord("T", 1, "G", 10, 1000, [12], "broker-a")
    assert orjson.loads(ack.to_json()) == {
        "ao": 12,
        "bn": "broker-a",
        "c": "G",
        "pt": 1000,
        "q": 1,
        "so": 10,
        "t": "T",
    }
    assert AckRecord.from_json(ack.to_json(), False).key() == ck.key()
    batch = AckRecord("T", 1, "G", 10, 1000, [10, 12], "broker-a", True)
    assert orjson.loads(batch.to_json())["aol"] == [10, 12]
    assert batch.unique_id() == "T@1@[10, 12]@G@1000@bAck"
    # 5.x's long names are read too
    assert AckRecord.from_json(
        b'{"ackOffset":3,"startOffset":1,"consumerGroup":"G","topic":"T"}', False
    ).ack_offsets == [3]
