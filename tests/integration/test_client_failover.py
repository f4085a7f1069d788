"""Producer fault tolerance: two brokers of one cluster, one SIGKILLed while producers send synchronously.

Set-up: a standalone name server (``python -m rmq.namesrv``), brokers ``broker-a`` and ``broker-b`` (one
cluster, own store dirs, both registered with it), a topic created with 4 queues on each broker
(UPDATE_AND_CREATE_TOPIC). Two producers with the default ``retry_times_when_send_failed`` (2, i.e. at most
3 attempts per send) send one message after the other, sync: ``fault`` with ``send_latency_fault_enable``,
``plain`` without it. Once both have sent messages to both brokers, broker-b gets SIGKILL; the producers
keep sending for a while. Every attempt of every send is recorded (a wrapper around the producer's
``_send_kernel``).

Asserted:

* every send returns SEND_OK, except that a send may raise if it is one of a producer's first 3 sends
  not finished when the kill began, and then only after it made all 3 attempts (none did so far);
* every send that started after the kill was stored on broker-a, and none took more than 3 attempts;
  every failed attempt (before or after the kill) was an attempt on broker-b made after the kill began;
* ``fault``: at most one attempt fails; no send after it tries broker-b again (a failed attempt isolates
  the broker for 10 minutes); ``plain`` keeps choosing broker-b's queues round robin (its route still lists
  them) and fails over to broker-a within the same send, at least once;
* no acknowledged message is lost: after broker-b is restarted on its store, reading every queue of both
  brokers from offset 0 finds each acknowledged message (same ``UNIQ_KEY``) at the broker, queue, queue
  offset and commit log offset (from the offset message id) its send result named.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from rmq.client import (
    ConsumeFromWhere,
    LitePullConsumer,
    Message,
    MessageExt,
    MessageQueue,
    NoRouteError,
    Producer,
    SendResult,
    SendStatus,
)
from rmq.common.codes import RequestCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.brokerproc import BrokerProcess, start_broker

CLUSTER = "FailoverCluster"
QUEUES_PER_BROKER = 4
RETRIES = 2  # the default retry_times_when_send_failed
SEND_AFTER_KILL_S = 2.0
SEND_PAUSE_S = 0.005


# --- processes ------------------------------------------------------------------------------------------


@dataclass
class NameServerProcess:
    proc: subprocess.Popen[str]
    addr: str
    log: list[str] = field(default_factory=list)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_namesrv(tmp: Path, *extra: str, timeout: float = 30.0) -> NameServerProcess:
    """``python -m rmq.namesrv`` on an ephemeral loopback port (``extra``: more options); its address is read
    from its boot log."""
    kv = str(tmp / "kvConfig.json")
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "rmq.namesrv", "--host", "127.0.0.1", "--port", "0"),
            *("--kv-config", kv, "--log-dir", str(tmp / "namesrv-logs")),
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    assert proc.stderr is not None
    log: list[str] = []
    found: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            m = re.search(r"Name Server boot success.*listening on ([\d.]+:\d+)", line)
            if m and not found:
                found.append(m.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(timeout) or not found:
        proc.kill()
        proc.wait()
        raise RuntimeError("name server did not start:\n" + "".join(log[-30:]))
    return NameServerProcess(proc, found[0], log)


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[NameServerProcess]:
    ns = start_namesrv(tmp_path)
    yield ns
    ns.stop()


def start_member(store: Path, name: str, namesrv: str) -> BrokerProcess:
    return start_broker(store, f"brokerName={name}", f"brokerClusterName={CLUSTER}", namesrv=namesrv)


def create_topic(broker: BrokerProcess, topic: str) -> None:
    fields = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": str(QUEUES_PER_BROKER),
        "writeQueueNums": str(QUEUES_PER_BROKER),
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
    }
    resp = invoke_sync(broker.broker_addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), 5000)
    assert resp.code == 0, resp.remark


# --- recording producers ----------------------------------------------------------------------------------


@dataclass
class Attempt:
    broker_name: str
    error: str | None


@dataclass
class Send:
    seq: int
    started: float
    attempts: list[Attempt] = field(default_factory=list)
    finished: float = 0.0
    result: SendResult | None = None
    error: BaseException | None = None


class Recorder:
    """Sends one message at a time through ``producer`` and records every attempt of every send."""

    def __init__(self, name: str, producer: Producer) -> None:
        self.name = name
        self.producer = producer
        self.sends: list[Send] = []
        kernel = producer._send_kernel

        async def recording_kernel(msg: Message, mq: MessageQueue, mode: Any, timeout: int) -> Any:
            attempts = self.sends[-1].attempts
            try:
                result = await kernel(msg, mq, mode, timeout)
            except BaseException as exc:
                attempts.append(Attempt(mq.broker_name, f"{type(exc).__name__}: {exc}"))
                raise
            attempts.append(Attempt(mq.broker_name, None))
            return result

        producer._send_kernel = recording_kernel  # type: ignore[method-assign]

    async def send_one(self, topic: str) -> None:
        seq = len(self.sends)
        send = Send(seq, time.monotonic())
        self.sends.append(send)
        msg = Message(topic, f"{self.name}:{seq}".encode(), keys=f"{self.name}-{seq}")
        msg.put_user_property("producer", self.name)
        try:
            send.result = await self.producer.send(msg)
        except Exception as exc:
            send.error = exc
        send.finished = time.monotonic()

    def brokers_acked(self) -> set[str]:
        return {s.result.message_queue.broker_name for s in self.sends if s.result is not None}

    def acked(self) -> list[SendResult]:
        return [s.result for s in self.sends if s.result is not None]


async def send_loop(recorders: list[Recorder], topic: str, stop: asyncio.Event) -> None:
    while not stop.is_set():
        for rec in recorders:
            await rec.send_one(topic)
        await asyncio.sleep(SEND_PAUSE_S)


# --- reading back -----------------------------------------------------------------------------------------


async def read_everything(
    namesrv: str, topic: str, want: set[str], timeout: float = 40.0
) -> list[MessageExt]:
    """Every message of every queue of ``topic`` on both brokers, from offset 0, until ``want`` (UNIQ_KEYs)
    are all there (then one more short poll)."""
    consumer = LitePullConsumer(
        f"CG_FAILOVER_READ_{os.getpid()}_{time.monotonic_ns()}",
        namesrv_addr=namesrv,
        instance_name="failover-reader",
        auto_commit=False,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    await consumer.start()
    got: list[MessageExt] = []
    try:
        deadline = time.monotonic() + timeout
        while True:  # broker-b's route comes back once the restarted broker registered
            mqs = await consumer.fetch_message_queues(topic)
            if len({mq.broker_name for mq in mqs}) == 2:
                break
            assert time.monotonic() < deadline, f"the route of {topic} never listed both brokers: {mqs}"
            await asyncio.sleep(0.2)
        assert len(mqs) == 2 * QUEUES_PER_BROKER
        consumer.assign(mqs)
        while not want <= {m.msg_id for m in got} and time.monotonic() < deadline:
            got += await consumer.poll(500)
        got += await consumer.poll(300)
    finally:
        await consumer.shutdown()
    return got


# --- the test ---------------------------------------------------------------------------------------------


async def test_sync_sends_fail_over_when_a_broker_is_killed(
    tmp_path: Path, namesrv: NameServerProcess
) -> None:
    run = f"{os.getpid()}_{time.monotonic_ns() % 10**9}"
    topic = f"Failover_{run}"
    a = start_member(tmp_path / "store-a", "broker-a", namesrv.addr)
    b = start_member(tmp_path / "store-b", "broker-b", namesrv.addr)
    brokers = [a, b]
    producers: list[Producer] = []
    try:
        for broker in brokers:
            await asyncio.to_thread(create_topic, broker, topic)
        fault = Producer(
            f"PG_FAULT_{run}",
            namesrv_addr=namesrv.addr,
            instance_name="failover-fault",
            send_latency_fault_enable=True,
        )
        plain = Producer(f"PG_PLAIN_{run}", namesrv_addr=namesrv.addr, instance_name="failover-plain")
        for p in (fault, plain):
            assert p.retry_times_when_send_failed == RETRIES
            await p.start()
            producers.append(p)
        deadline = time.monotonic() + 30
        while True:  # both brokers registered the topic with the name server
            try:
                queues = await fault.instance.fetch_subscribe_message_queues(topic)
            except NoRouteError:
                queues = set()
            if len(queues) == 2 * QUEUES_PER_BROKER:
                break
            assert time.monotonic() < deadline, f"route of {topic}: {queues}"
            await asyncio.sleep(0.2)
        recorders = [Recorder("fault", fault), Recorder("plain", plain)]

        stop = asyncio.Event()
        sending = asyncio.create_task(send_loop(recorders, topic, stop))
        deadline = time.monotonic() + 30
        while not all(
            r.brokers_acked() == {"broker-a", "broker-b"} and len(r.sends) >= 20 for r in recorders
        ):
            assert time.monotonic() < deadline and not sending.done(), "no sends to both brokers"
            await asyncio.sleep(0.05)
        kill_started = time.monotonic()
        await asyncio.to_thread(b.kill)  # mid-run: a send may be in flight
        killed = time.monotonic()
        await asyncio.sleep(SEND_AFTER_KILL_S)
        # ...and until each producer started 20 sends after the kill (slower on a loaded machine).
        deadline = time.monotonic() + 30
        while not all(sum(s.started >= killed for s in r.sends) > 20 for r in recorders):
            assert time.monotonic() < deadline and not sending.done(), "too few sends after the kill"
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.wait_for(sending, 30)

        # -- the sends ------------------------------------------------------------------------------------
        for rec in recorders:
            after = [s for s in rec.sends if s.started >= killed]
            affected = [s for s in rec.sends if s.finished >= kill_started]  # in flight or later
            assert len(after) >= 20, f"{rec.name}: only {len(after)} sends after the kill"
            for s in rec.sends:
                assert len(s.attempts) <= 1 + RETRIES, (rec.name, s)
                if any(att.error is not None for att in s.attempts):
                    assert s.finished >= kill_started, f"{rec.name}: failed attempt before the kill: {s}"
                    assert all(att.broker_name == "broker-b" for att in s.attempts if att.error), (
                        rec.name,
                        s,
                    )
                if s.error is not None:
                    assert s in affected[:3], f"{rec.name}: send {s.seq} failed: {s.error!r}"
                    assert len(s.attempts) == 1 + RETRIES, f"{rec.name}: gave up early: {s}"
                else:
                    assert s.result is not None and s.result.send_status is SendStatus.SEND_OK, s
            for s in after:
                if s.result is not None:
                    assert s.result.message_queue.broker_name == "broker-a", (rec.name, s)
        fault_rec, plain_rec = recorders
        failed = [i for i, s in enumerate(fault_rec.sends) if any(att.error for att in s.attempts)]
        assert len(failed) <= 1, f"fault: more than one send failed an attempt: {failed}"
        for s in fault_rec.sends[failed[0] + 1 :] if failed else []:
            assert all(att.broker_name == "broker-a" for att in s.attempts), (
                f"fault: broker-b tried again: {s}"
            )
        failovers = [
            s
            for s in plain_rec.sends
            if s.started >= killed and [att.broker_name for att in s.attempts] == ["broker-b", "broker-a"]
        ]
        assert failovers, "plain: no send failed over from broker-b to broker-a"

        # -- nothing acknowledged is lost -----------------------------------------------------------------
        b = await asyncio.to_thread(start_member, tmp_path / "store-b", "broker-b", namesrv.addr)
        brokers[1] = b
        acked = [r for rec in recorders for r in rec.acked()]
        assert {r.message_queue.broker_name for r in acked} == {"broker-a", "broker-b"}
        got = await read_everything(namesrv.addr, topic, {r.msg_id for r in acked})
    finally:
        for p in producers:
            await p.shutdown()
        for broker in brokers:
            broker.stop()

    by_id: dict[str, list[MessageExt]] = {}
    for m in got:
        by_id.setdefault(m.msg_id, []).append(m)
    lost = [r for r in acked if r.msg_id not in by_id]
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged messages lost, e.g. {lost[:3]}"
    for r in acked:
        # A copy may also sit on broker-b: stored there just before the kill, its answer lost, sent again.
        want = (r.message_queue.broker_name, r.message_queue.queue_id, r.queue_offset)
        at = {(m.broker_name, m.queue_id, m.queue_offset): m for m in by_id[r.msg_id]}
        assert want in at, f"{r} not found where acknowledged; copies at {sorted(at)}"
        m = at[want]
        assert m.offset_msg_id == r.offset_msg_id, r
        assert m.commit_log_offset == int(r.offset_msg_id[16:], 16), r
        assert m.body.decode().split(":")[0] == m.get_property("producer")
