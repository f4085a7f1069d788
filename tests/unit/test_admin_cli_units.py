"""rmqadmin's pieces that need no broker: version names, time parsing, exit codes, bodies keyed by queue."""

from __future__ import annotations

import datetime as dt

import click
import pytest
from rmq.admin.base import Exit, exit_code_of, human_ms, parse_time
from rmq.admin.topic import perm_text
from rmq.client.admin_ext import AdminNotFoundError
from rmq.client.admin_types import ConsumeStats, TopicOffset, version_desc
from rmq.client.errors import MQClientError, broker_error
from rmq.client.message import MessageQueue
from rmq.common import fastjson
from rmq.common.fastjson import ObjectKey
from rmq.remoting import RemotingConnectError, RemotingTimeoutError


@pytest.mark.parametrize(
    ("ordinal", "desc"),
    [
        (213, "V4_0_0"),
        (232, "V4_1_0_SNAPSHOT"),
        (333, "V4_6_0"),
        (401, "V4_9_4"),
        (407, "V4_9_7"),
        (408, "V4_9_8_SNAPSHOT"),
        (409, "V4_9_8"),
        (413, "V5_0_0"),
        (37, "37"),
    ],
)
def test_version_desc(ordinal: int, desc: str) -> None:
    assert version_desc(ordinal) == desc


def test_parse_time() -> None:
    assert parse_time("1700000000123") == 1700000000123
    assert parse_time("-1") == -1
    local = dt.datetime(2024, 3, 5, 6, 7, 8, 9000)
    assert parse_time("2024-03-05#06:07:08:009") == int(local.timestamp() * 1000)
    assert human_ms(int(local.timestamp() * 1000)) == "2024-03-05 06:07:08,009"
    assert human_ms(0) == ""
    with pytest.raises(click.BadParameter):
        parse_time("yesterday")


def test_exit_codes_by_failure() -> None:
    assert exit_code_of(AdminNotFoundError("x")) is Exit.NOT_FOUND
    for code in (17, 26, 206, 208):  # topic, group, consumer offline, message
        assert exit_code_of(broker_error(code, "r")) is Exit.NOT_FOUND, code
    assert exit_code_of(broker_error(1, "refused")) is Exit.BROKER_ERROR
    assert exit_code_of(broker_error(16, "no permission")) is Exit.BROKER_ERROR
    assert exit_code_of(RemotingConnectError("down")) is Exit.CONNECTION
    assert exit_code_of(RemotingTimeoutError("slow")) is Exit.CONNECTION
    assert exit_code_of(MQClientError("no name server", 10004)) is Exit.CONNECTION
    assert exit_code_of(MQClientError("else")) is Exit.FAILED


def test_bodies_keyed_by_queue() -> None:
    def key(qid: int) -> ObjectKey:
        return ObjectKey.from_mapping({"brokerName": "b", "queueId": qid, "topic": "T"})

    body = fastjson.dumps_with_object_keys(
        {
            "consumeTps": 1.5,
            "offsetTable": {
                key(1): {"brokerOffset": 10, "consumerOffset": 4, "lastTimestamp": 0},
                key(0): {"brokerOffset": 7, "consumerOffset": 7, "lastTimestamp": 5},
            },
        }
    )
    stats = ConsumeStats()
    stats.merge_body(fastjson.loads(body))
    assert [(r.mq, r.diff) for r in stats.rows()] == [
        (MessageQueue("T", "b", 0), 0),
        (MessageQueue("T", "b", 1), 6),
    ]
    assert (stats.diff_total, stats.consume_tps) == (6, 1.5)
    topic = fastjson.loads(
        fastjson.dumps_with_object_keys(
            {"offsetTable": {key(0): {"minOffset": 1, "maxOffset": 9, "lastUpdateTimestamp": 3}}}
        )
    )
    assert TopicOffset.table(topic) == [TopicOffset(MessageQueue("T", "b", 0), 1, 9, 3)]


def test_perm_text() -> None:
    assert [perm_text(p) for p in (6, 4, 2, 7, 0)] == ["RW-", "R--", "-W-", "RWX", "---"]
