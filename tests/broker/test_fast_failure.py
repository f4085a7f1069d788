"""Back-pressure on sends (RocketMQ's fast failure, ``brokerFastFailureEnable``): a send that waited in the
broker longer than ``waitTimeMillsInSendQueue`` is answered SYSTEM_BUSY at once with Apache's remark and not
stored; one that meets the put lock held longer than ``osPageCacheBusyTimeOutMills`` likewise.

The overload test floods a real broker (network thread, and asyncio server only) with pipelined sends on
several connections, with a small ``waitTimeMillsInSendQueue``: a send queued behind hundreds of others has
waited longer than that, whatever the machine's speed. Every request gets an answer (no client timeout); every
SUCCESS is read back from the queue, and nothing refused is in it. The sends go to a retry topic, which only
the Python path takes (the network thread's fast path answers vetted plain topics in microseconds). No
timing is asserted: codes, remarks, counts and contents only.
"""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from rmq.broker.config import BrokerConfig
from rmq.broker.fast_failure import PAGE_CACHE_BUSY, QUEUE_WAIT, FastFailure
from rmq.broker.processors.send_back import SendBackProcessor
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.channel import Channel
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import RemotingCommand, create_request
from rmq.remoting.dispatcher import Dispatcher
from rmq.store import decode_records

from tests.broker.test_processors import Broker, FakeContext, v2
from tests.brokerproc import start_broker

TOPIC = "%RETRY%BusyGroup"
CONNECTIONS = 6
PER_CONNECTION = 500
QUEUE_REMARK = re.compile(
    r"\[TIMEOUT_CLEAN_QUEUE\]broker busy, start flow control for a while, "
    r"period in queue: \d+ms, size of queue: \d+"
)


def send_request(body: bytes) -> RemotingCommand:
    f = {"a": "PG", "b": TOPIC, "c": "TBW102", "d": "1", "e": "0", "f": "0", "j": "0"}
    f.update({"g": str(int(time.time() * 1000)), "h": "0", "i": "", "k": "false", "m": "false"})
    return create_request(RequestCode.SEND_MESSAGE_V2, f, body)


async def read_queue(client: RemotingClient, addr: str, expect: int) -> list[bytes]:
    """Every body in TOPIC's queue 0, once ``expect`` are dispatched (bounded: what is there after 10 s)."""
    deadline = time.monotonic() + 10
    while True:
        bodies: list[bytes] = []
        while True:
            f = {"consumerGroup": "BusyReader", "topic": TOPIC, "queueId": "0", "maxMsgNums": "32"}
            f.update({"queueOffset": str(len(bodies)), "sysFlag": "4", "commitOffset": "0"})
            f.update({"suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"})
            r = await client.invoke(addr, create_request(RequestCode.PULL_MESSAGE, f), 5000)
            if r.code != ResponseCode.SUCCESS:
                break
            bodies += [rec[12] for rec in decode_records(r.body)]
        if len(bodies) >= expect or time.monotonic() > deadline:
            return bodies
        await asyncio.sleep(0.05)


async def max_offset(client: RemotingClient, addr: str) -> int:
    f = {"topic": TOPIC, "queueId": "0"}
    r = await client.invoke(addr, create_request(RequestCode.GET_MAX_OFFSET, f), 5000)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return int(r.ext_fields["offset"])


def busy_refusals(metrics_port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {
        s.labels["reason"]: s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name == "rocketmq_send_busy_refusals_total"
    }


# The network thread reads every burst at once: the later sends wait for Python behind thousands. The asyncio
# server reads a socket a chunk at a time, and a send waits only behind its chunk's: a shorter limit.
@pytest.mark.parametrize(("network_thread", "wait_ms"), [("true", "20"), ("false", "1")])
async def test_an_overloaded_broker_refuses_fast_and_loses_nothing_it_acknowledged(
    tmp_path, network_thread, wait_ms
):
    broker = await asyncio.to_thread(
        start_broker,
        tmp_path,
        f"networkThread={network_thread}",
        f"waitTimeMillsInSendQueue={wait_ms}",
        "metricsExporterType=PROM",
        "metricsPromExporterPort=0",
    )
    addr = broker.broker_addr
    clients = [RemotingClient() for _ in range(CONNECTIONS)]
    try:
        cfg = await clients[0].invoke(addr, create_request(RequestCode.GET_BROKER_CONFIG), 5000)
        shown = dict(line.split("=", 1) for line in cfg.body.decode().splitlines() if "=" in line)
        assert shown["waitTimeMillsInSendQueue"] == wait_ms
        assert shown["osPageCacheBusyTimeOutMills"] == "1000"
        assert shown["brokerFastFailureEnable"] == "true"

        # One send first, as a client would: retried while busy (it creates the topic and the group).
        attempt = 0
        for attempt in range(100):  # noqa: B007 (counted below)
            r = await clients[0].invoke(addr, send_request(b"first"), 5000)
            if r.code == ResponseCode.SUCCESS:
                break
            assert r.code == ResponseCode.SYSTEM_BUSY and QUEUE_REMARK.fullmatch(r.remark or ""), r
        assert r.code == ResponseCode.SUCCESS, f"still busy after {attempt + 1} sends"

        # The flood: every connection's sends leave in one burst (the client writes a loop iteration's
        # frames together); a generous client timeout, so a late answer would show as a timeout.
        bodies = [[b"c%d-%d" % (c, i) for i in range(PER_CONNECTION)] for c in range(CONNECTIONS)]
        answers = await asyncio.gather(
            *(
                client.invoke(addr, send_request(body), 15_000)
                for client, per in zip(clients, bodies, strict=True)
                for body in per
            ),
            return_exceptions=True,
        )
        flat = [b for per in bodies for b in per]
        failed = [a for a in answers if not isinstance(a, RemotingCommand)]
        assert not failed, f"{len(failed)} sends got no answer (client timeouts?): {failed[:3]}"
        ok = {body for body, a in zip(flat, answers, strict=True) if a.code == ResponseCode.SUCCESS}
        busy = [a for a in answers if a.code == ResponseCode.SYSTEM_BUSY]
        others = {(a.code, a.remark) for a in answers if a.code not in (ResponseCode.SUCCESS, 2)}
        assert not others, others
        assert busy, "no send was refused though thousands queued behind each other"
        assert all(QUEUE_REMARK.fullmatch(a.remark or "") for a in busy), busy[0].remark

        # Every acknowledged message is in the queue, and nothing refused is.
        stored = await read_queue(clients[0], addr, len(ok) + 1)
        assert sorted(stored) == sorted([b"first", *ok])
        assert await max_offset(clients[0], addr) == len(ok) + 1

        refusals = busy_refusals(int(broker.ready["metrics"]))
        assert refusals[QUEUE_WAIT] == len(busy) + attempt
        assert refusals[PAGE_CACHE_BUSY] == 0
        if network_thread == "true":
            r = await clients[0].invoke(addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO), 5000)
            table = orjson.loads(r.body)["table"]
            # The fast path never took a retry topic's sends, so it had none to refuse.
            assert table["fastSendDeclinedBusy"] == "0"
    finally:
        for client in clients:
            await client.close()
        assert broker.stop() == 0
    warned = [line for line in broker.log if "broker busy: " in line and "sends refused SYSTEM_BUSY" in line]
    assert warned, "the refusals were not logged"
    assert "waitTimeMillsInSendQueue" in warned[0]


async def test_fast_failure_off_or_within_limits_lets_sends_through() -> None:
    """brokerFastFailureEnable=false never refuses; on, a send within both limits goes on, and one past
    either gets SYSTEM_BUSY with Apache's remark (a real channel's read time, the store's lock clock)."""
    channel = Channel(Dispatcher(), lambda: 1)
    request = send_request(b"x")
    channel.received_at = time.monotonic() - 5.0  # read 5 s ago
    channel.waiting = 7
    off = BrokerConfig()
    off.set("brokerFastFailureEnable", "false")
    ff = FastFailure(off)
    assert ff.fast_send_limits() is None
    assert ff.waited_too_long(channel, request) is None
    assert ff.page_cache_busy(request, 60_000) is None

    on = BrokerConfig()
    on.set("waitTimeMillsInSendQueue", "10000")
    on.set("osPageCacheBusyTimeOutMills", "500")
    ff = FastFailure(on)
    assert ff.fast_send_limits() == (10_000, 500)
    assert ff.waited_too_long(channel, request) is None
    assert ff.page_cache_busy(request, 500) is None
    busy = ff.page_cache_busy(request, 501)
    assert busy is not None and busy.code == ResponseCode.SYSTEM_BUSY
    assert busy.remark == "[PC_SYNCHRONIZED]broker busy, start flow control for a while"

    on.set("waitTimeMillsInSendQueue", "200")
    ff = FastFailure(on)
    busy = ff.waited_too_long(channel, request)
    assert busy is not None and busy.code == ResponseCode.SYSTEM_BUSY
    assert busy.remark is not None and QUEUE_REMARK.fullmatch(busy.remark)
    assert busy.remark.endswith("size of queue: 7")
    assert ff.refused == {QUEUE_WAIT: 1, PAGE_CACHE_BUSY: 0}


def test_negative_limits_are_refused() -> None:
    for key in ("waitTimeMillsInSendQueue", "osPageCacheBusyTimeOutMills"):
        with pytest.raises(ValueError, match=f"{key}: '-1' is negative"):
            BrokerConfig().set(key, "-1")


class ReadLongAgo(FakeContext):
    """A connection whose request was read 1 s before it is handled."""

    @property
    def received_at(self) -> float:
        return time.monotonic() - 1.0


async def test_a_send_back_that_waited_too_long_is_refused_and_not_stored(tmp_path) -> None:
    """CONSUMER_SEND_MSG_BACK shares the sends' queue in RocketMQ, so it shares their back-pressure."""
    b = Broker(str(tmp_path))
    try:
        sent = b.call(RequestCode.SEND_MESSAGE_V2, v2("Work"), b"job")
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        offset = int(sent.ext_fields["msgId"][16:], 16)
        end = b.store.commitlog_max_offset()
        back = SendBackProcessor(b.s)
        req = create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": str(offset), "group": "CG"})
        r = back.send_back(ReadLongAgo(), req)
        assert r is not None and r.code == ResponseCode.SYSTEM_BUSY
        assert QUEUE_REMARK.fullmatch(r.remark or ""), r.remark
        assert b.store.commitlog_max_offset() == end, "the refused send-back stored nothing"
        late = b.call(RequestCode.SEND_MESSAGE_V2, v2("Work"), b"late", ctx=ReadLongAgo())
        assert late.code == ResponseCode.SYSTEM_BUSY and QUEUE_REMARK.fullmatch(late.remark or "")
        assert b.store.commitlog_max_offset() == end
        assert b.s.fast_failure.refused == {QUEUE_WAIT: 2, PAGE_CACHE_BUSY: 0}
    finally:
        b.close()
