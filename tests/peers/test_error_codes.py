"""Refusals: the same bad request to rmq and to the Apache broker gets the same response code.

The Java client checks topic names and body sizes before sending, so these requests are built by hand
(SEND_MESSAGE_V2, the header the Java client sends) and go straight to each broker: illegal and over-long
topic names, a body over ``maxMessageSize``, system topics no one may send to, a read-only topic, a send
to a queue the topic does not have, a reply whose requester is not connected.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from rmq.client import Message, Producer
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.peers.conftest import BROKERS, Peers, unique

_KV, _SEP = "\x01", "\x02"


def send_v2(addr: str, topic: str, body: bytes, queue_id: int = 0, props: str = "", code: int = 0) -> int:
    fields = {
        "a": "PG_ERR",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": str(queue_id),
        "f": "0",
        "g": str(int(time.time() * 1000)),
        "h": "0",
        "i": props,
        "j": "0",
        "k": "false",
    }
    request = create_request(code or RequestCode.SEND_MESSAGE_V2, fields, body)
    return invoke_sync(addr, request, 10_000).code


def create_topic(addr: str, topic: str, perm: int) -> int:
    fields = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": "2",
        "writeQueueNums": "2",
        "perm": str(perm),
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    return invoke_sync(addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), 10_000).code


CASES = {
    "illegal characters": lambda t: (f"{t} bad!", b"x", 0, ""),
    "topic of 128 characters": lambda t: ((t + "x" * 128)[:128], b"x", 0, ""),
    "topic of 256 characters": lambda t: ((t + "x" * 256)[:256], b"x", 0, ""),
    "body over maxMessageSize": lambda t: (t, b"x" * (4 * 1024 * 1024 + 1), 0, ""),
    "empty body": lambda t: (t, b"", 0, ""),
    "schedule topic": lambda t: ("SCHEDULE_TOPIC_XXXX", b"x", 0, ""),
    "transaction half topic": lambda t: ("RMQ_SYS_TRANS_HALF_TOPIC", b"x", 0, ""),
    "transaction op topic": lambda t: ("RMQ_SYS_TRANS_OP_HALF_TOPIC", b"x", 0, ""),
    "default topic TBW102": lambda t: ("TBW102", b"x", 0, ""),
    "queue the topic lacks": lambda t: (t, b"x", 100, ""),
    "delay level past the last": lambda t: (t, b"x", 0, f"DELAY{_KV}99{_SEP}"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_send_refusals_match(peers: Peers, case: str) -> None:
    base = unique("JErr")
    addrs = {"rmq": peers.rmq.broker_addr, "apache": peers.apache.broker_addr}
    if case == "queue the topic lacks":
        for addr in addrs.values():
            assert create_topic(addr, base, 6) == 0
    topic, body, queue_id, props = CASES[case](base)
    got = {b: send_v2(addrs[b], topic, body, queue_id, props) for b in BROKERS}
    assert got["rmq"] == got["apache"], f"{case}: rmq answered {got['rmq']}, apache {got['apache']}"


def test_empty_body_is_stored_and_consumable_alike(peers: Peers) -> None:
    topic = unique("JErrEmpty")
    for addr in (peers.rmq.broker_addr, peers.apache.broker_addr):
        assert create_topic(addr, topic, 6) == 0
        assert send_v2(addr, topic, b"") == 0
    got = peers.both("pull", topic=topic, group=unique("JErrEmptyG"), expect=1)
    # fastjson leaves out the null keys, tags and seq.
    assert got["rmq"]["messages"] == got["apache"]["messages"] == [{"body": "", "reconsume": 0}]


def test_read_only_topic(peers: Peers) -> None:
    """A known difference, kept on purpose: the Apache 4.9 broker stores a raw send to a topic whose perm
    is read-only (its send check looks at the broker's perm, not the topic's), rmq refuses it with
    NO_PERMISSION. The Java client never sends there (the route has no writable queue), so a client sees
    the same on both."""
    topic = unique("JErrRO")
    addrs = {"rmq": peers.rmq.broker_addr, "apache": peers.apache.broker_addr}
    for addr in addrs.values():
        assert create_topic(addr, topic, 4) == 0
    assert send_v2(addrs["rmq"], topic, b"x") == ResponseCode.NO_PERMISSION
    assert send_v2(addrs["apache"], topic, b"x") == ResponseCode.SUCCESS
    sent = peers.both("send", topic=topic, group=unique("JErrROG"), count=1)
    assert sent["rmq"] == sent["apache"]
    assert sent["rmq"]["statuses"] == {} and len(sent["rmq"]["errors"]) == 1


def test_reply_to_unconnected_requester_is_refused_alike(peers: Peers) -> None:
    props = f"REPLY_TO_CLIENT{_KV}127.0.0.1@nobody{_SEP}CORRELATION_ID{_KV}c1{_SEP}"
    got = {
        b: send_v2(a, "DefaultCluster_REPLY_TOPIC", b"x", 0, props, RequestCode.SEND_REPLY_MESSAGE_V2)
        for b, a in {"rmq": peers.rmq.broker_addr, "apache": peers.apache.broker_addr}.items()
    }
    assert got["rmq"] == got["apache"] != 0


async def test_reply_the_requester_refuses_is_refused_and_stored_alike(peers: Peers) -> None:
    """rmq's Python producer does not take PUSH_REPLY_MESSAGE_TO_CLIENT (it answers "not supported"): the
    responder is told SYSTEM_ERROR and the reply is stored all the same, on both brokers."""
    mark = unique("JErrReply")
    codes = {}
    for broker in BROKERS:
        producer = Producer(unique("PG_REPLY"), namesrv_addr=peers.namesrv(broker))
        await producer.start()
        try:
            await producer.send(Message(mark, b"route"))  # a heartbeat has registered the producer
            props = f"REPLY_TO_CLIENT{_KV}{producer.client_id}{_SEP}CORRELATION_ID{_KV}{mark}{_SEP}"
            addr = peers.rmq.broker_addr if broker == "rmq" else peers.apache.broker_addr
            codes[broker] = await asyncio.to_thread(
                send_v2,
                addr,
                "DefaultCluster_REPLY_TOPIC",
                mark.encode(),
                0,
                props,
                RequestCode.SEND_REPLY_MESSAGE_V2,
            )
        finally:
            await producer.shutdown()
    assert codes == {"rmq": ResponseCode.SYSTEM_ERROR, "apache": ResponseCode.SYSTEM_ERROR}
    got = await asyncio.to_thread(
        peers.both, "pull", topic="DefaultCluster_REPLY_TOPIC", group=unique("JErrReplyG"), expect=1
    )
    for broker in BROKERS:
        assert mark in {m["body"] for m in got[broker]["messages"]}, broker
