"""The official C++ client (PyPI ``rocketmq==0.4.4``) against a real ``python -m rmq.broker``.

Producers send with send_sync, send_oneway, send_orderly and send_batch; a PullConsumer reads each topic
from offset 0 (also with a tag expression); PushConsumers consume in clustering mode (two consumers of one
group split the queues; one leaves, the other takes over; a restarted one resumes from the committed
offsets), broadcasting mode (each consumer gets everything), orderly (one and two consumers), with a tag
subscription, and as a new group on a topic that already holds messages. Nothing may be lost, and bodies,
keys, tags and properties must arrive intact.

Every C++ client runs in a child process (``cpp_driver.py``) with ``HOME`` pointed at a temp dir (its logs and
local broadcasting offsets go there). One broker and one long-lived producer serve the whole module; each test
uses its own topics and groups.

Push consumers start from the last offset when a group has no stored offset, and they only pull once a
rebalance has given them queues. So before the messages under test are sent, each push test sends "warm-up"
rounds (one TagA message per queue, via send_orderly) until the consumers show the expected queue
assignment; warm-ups are then left out of the checks.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rmq.common.codes import RequestCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.brokerproc import BrokerProcess, start_broker
from tests.fastsend import assert_taken, delta, fast_send_stats

pytest.importorskip("rocketmq.client")

DRIVER = Path(__file__).with_name("cpp_driver.py")
QUEUES = 4  # the C++ producer auto-creates topics with defaultTopicQueueNums = 4
WARMUP_DEADLINE = 75.0  # rebalances also happen on a ~20 s timer, should a notification be missed
DELIVERY_TIMEOUT = 45.0
BIG = "x" * 5000  # >= 4 KiB: the C++ producer zlib-compresses single messages this large

Msg = dict[str, Any]


# --- child processes ----------------------------------------------------------------------------------------


class Driver:
    """One ``cpp_driver.py`` child: JSON lines from its stdout are collected by a thread."""

    def __init__(self, name: str, args: list[str], home: Path) -> None:
        self.name = name
        home.mkdir(parents=True, exist_ok=True)
        self.home = home
        self.proc = subprocess.Popen(
            [sys.executable, str(DRIVER), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, HOME=str(home), PYTHONUNBUFFERED="1"),
        )
        self.lines: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                obj = json.loads(line)
            except ValueError:
                obj = {"event": "raw", "line": line.rstrip("\n")}
            with self._cond:
                self.lines.append(obj)
                self._cond.notify_all()
        with self._cond:
            self.lines.append({"event": "eof"})
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def wait_for(self, pred: Callable[[list[dict[str, Any]]], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not pred(self.lines):
                left = deadline - time.monotonic()
                if left <= 0 or (self.lines and self.lines[-1].get("event") == "eof"):
                    return pred(self.lines)
                self._cond.wait(min(left, 0.5))
            return True

    def wait_event(self, event: str, timeout: float) -> dict[str, Any]:
        found: list[dict[str, Any]] = []

        def pred(lines: list[dict[str, Any]]) -> bool:
            found[:] = [x for x in lines if x.get("event") == event]
            return bool(found)

        assert self.wait_for(pred, timeout), f"{self.name}: no {event!r} event\n{self.describe()}"
        return found[0]

    def messages(self) -> list[Msg]:
        with self._cond:
            return [x for x in self.lines if x.get("event") == "msg"]

    def write(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def close(self, timeout: float = 40.0) -> int:
        """Ask the child to finish (stdin EOF), kill it if it does not."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return -9

    def describe(self) -> str:
        with self._cond:
            tail = [json.dumps(x)[:300] for x in self.lines[-15:]]
        return (
            f"--- {self.name} rc={self.proc.poll()} stdout tail:\n"
            + "\n".join(tail)
            + "\n--- stderr tail:\n"
            + "".join(self.stderr[-30:])
        )


class CppProducer(Driver):
    def __init__(self, namesrv: str, group: str, home: Path, lifetime_s: float = 120.0) -> None:
        args = ["producer", "--namesrv", namesrv, "--group", group, "--timeout", str(lifetime_s)]
        super().__init__("producer", args, home)
        self.wait_event("started", 30)
        self._answers = 0

    def send(self, mode: str, messages: list[Msg], timeout: float = 60.0) -> list[dict[str, Any]]:
        self.write(json.dumps({"op": "send", "mode": mode, "messages": messages}))
        want = self._answers + 1
        answers: list[dict[str, Any]] = []

        def pred(lines: list[dict[str, Any]]) -> bool:
            answers[:] = [x for x in lines if "results" in x]
            return len(answers) >= want

        assert self.wait_for(pred, timeout), f"producer did not answer a {mode} send\n{self.describe()}"
        self._answers = want
        return answers[want - 1]["results"]

    def send_ok(self, mode: str, messages: list[Msg]) -> list[dict[str, Any]]:
        results = self.send(mode, messages)
        errors = [r for r in results if "error" in r or r.get("status") not in (0, None)]
        assert not errors, f"{mode} send failed: {errors[:3]}\n{self.describe()}"
        return results


def consumer_args(namesrv: str, group: str, topic: str, expression: str = "*", **opts: Any) -> list[str]:
    args = ["--namesrv", namesrv, "--group", group, "--topic", topic, "--expression", expression]
    if opts.get("broadcasting"):
        args += ["--model", "broadcasting"]
    if opts.get("orderly"):
        args.append("--orderly")
    if opts.get("fail_every"):
        args += ["--fail-every", str(opts["fail_every"])]
    return [*args, "--timeout", str(opts.get("timeout", 240))]


# --- fixtures -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path_factory.mktemp("store"))
    try:
        yield proc
    finally:
        rc = proc.stop()
        assert rc == 0, "broker exited uncleanly:\n" + "".join(proc.log[-40:])


@pytest.fixture(scope="module")
def homes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cpp-home")


@pytest.fixture(scope="module")
def producer(broker: BrokerProcess, homes: Path) -> Iterator[CppProducer]:
    prod = CppProducer(broker.namesrv_addr, "PG_CPP_TEST", homes / "producer")
    try:
        yield prod
    finally:
        prod.write(json.dumps({"op": "quit"}))
        assert prod.close() == 0, prod.describe()


@pytest.fixture
def children() -> Iterator[list[Driver]]:
    """Consumers started by a test; all are stopped at its end, whatever happened."""
    started: list[Driver] = []
    yield started
    for child in started:
        child.close()


# --- helpers ------------------------------------------------------------------------------------------------


def make_messages(
    topic: str, run: str, n: int, tags: list[str | None] | None = None, big: bool = True
) -> list[Msg]:
    """``n`` messages with unique seq, unicode bodies, multi-key KEYS, a user property, and (if ``big``)
    every 7th body above the compression threshold."""
    tags = tags or ["TagA", "TagB", "TagC", None]
    out = []
    for i in range(n):
        body = f"{topic}|{i}|héllo wörld ✓ 世界"
        if big and i % 7 == 3:
            body += BIG
        msg: Msg = {
            "topic": topic,
            "body": body,
            "keys": f"key-{run}-{i} alt-{i}",
            "props": {"seq": str(i), "run": run, "extra": f"v={i};ü"},
        }
        tag = tags[i % len(tags)]
        if tag:
            msg["tags"] = tag
        out.append(msg)
    return out


def route_exists(broker: BrokerProcess, topic: str) -> bool:
    req = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return invoke_sync(broker.namesrv_addr, req, 3000).code == 0


def wait_route(broker: BrokerProcess, topic: str, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while not route_exists(broker, topic):
        assert time.monotonic() < deadline, f"topic {topic} never got a route in the name server"
        time.sleep(0.2)


def pull_all(broker: BrokerProcess, homes: Path, topic: str, expect: int, expression: str = "*") -> list[Msg]:
    child = Driver(
        f"pull {topic}",
        [
            *("pull", "--namesrv", broker.namesrv_addr, "--group", f"CG_PULL_{topic}", "--topic", topic),
            *("--expression", expression, "--expect", str(expect), "--timeout", "60"),
        ],
        homes / f"pull-{topic}",
    )
    try:
        child.wait_event("done", 90)
        assert child.close() == 0, child.describe()
    finally:
        child.close()
    return child.messages()


def main_only(msgs: list[Msg], run: str) -> list[Msg]:
    return [m for m in msgs if m["props"].get("run") == run and not m["props"].get("warmup")]


def assert_intact(sent: list[Msg], got: list[Msg]) -> None:
    """Each message in ``got`` carries exactly what the sent message with the same seq carried."""
    by_seq = {m["props"]["seq"]: m for m in sent}
    for m in got:
        want = by_seq[m["props"]["seq"]]
        assert m["topic"] == want["topic"]
        assert m["body"] == want["body"], f"seq {m['props']['seq']}: body {m['body'][:60]!r}"
        assert m["keys"] == want["keys"]
        assert (m["tags"] or None) == want.get("tags")
        assert m["props"]["extra"] == want["props"]["extra"]
        assert m["props"].get("UNIQ_KEY"), "UNIQ_KEY property lost"
        assert m["reconsume_times"] == 0


def assert_exactly_once(sent: list[Msg], got: list[Msg]) -> None:
    seqs = Counter(m["props"]["seq"] for m in got)
    missing = sorted({m["props"]["seq"] for m in sent} - set(seqs), key=int)
    dups = sorted((s for s, c in seqs.items() if c > 1), key=int)
    assert not missing, f"lost {len(missing)} of {len(sent)} messages, seqs {missing[:20]}"
    assert not dups, f"delivered more than once: seqs {dups[:20]}"
    assert len(got) == len(sent)


def check_queue_offsets(got: list[Msg]) -> dict[int, list[int]]:
    """Queue offsets of a fresh topic read from the start: 0, 1, 2, ... in every queue."""
    per_queue: dict[int, list[int]] = defaultdict(list)
    for m in got:
        per_queue[m["queue_id"]].append(m["queue_offset"])
    for q, offsets in per_queue.items():
        assert 0 <= q < QUEUES
        assert sorted(offsets) == list(range(len(offsets))), f"queue {q} offsets {sorted(offsets)}"
    return per_queue


_rounds = itertools.count(1)
ALL_QUEUES = set(range(QUEUES))


def all_queues(qs: list[set[int]]) -> bool:
    """Warm-up readiness: the (single) consumer got every queue's message."""
    return qs[0] == ALL_QUEUES


def split_between(qs: list[set[int]]) -> bool:
    """Warm-up readiness: two consumers each own some queues, none twice, all covered."""
    a, b = qs
    return bool(a) and bool(b) and not (a & b) and a | b == ALL_QUEUES


def warm_up(
    producer: CppProducer,
    topic: str,
    run: str,
    consumers: list[Driver],
    ready: Callable[[list[set[int]]], bool],
    deadline: float = WARMUP_DEADLINE,
) -> int:
    """Send rounds of one TagA message per queue until ``ready(queues each consumer got in the round)``.
    Returns the last round's id."""
    end = time.monotonic() + deadline
    while True:
        rnd = next(_rounds)
        msgs = [
            {
                "topic": topic,
                "body": f"warm-up {rnd}/{q}",
                "tags": "TagA",
                "props": {"warmup": "1", "round": str(rnd), "run": run},
                "shard": q,
            }
            for q in range(QUEUES)
        ]
        producer.send_ok("orderly", msgs)

        def round_queues(rnd: int = rnd) -> list[set[int]]:
            return [
                {
                    m["queue_id"]
                    for m in c.messages()
                    if m["props"].get("round") == str(rnd) and m["props"].get("run") == run
                }
                for c in consumers
            ]

        wait_end = time.monotonic() + 3.0
        while time.monotonic() < wait_end and not ready(round_queues()):
            time.sleep(0.1)
        if ready(round_queues()):
            return rnd
        detail = "\n".join(c.describe() for c in consumers)
        assert time.monotonic() < end, f"consumers never settled; last round {round_queues()}\n{detail}"


def send_fences(producer: CppProducer, topic: str, run: str) -> None:
    """One TagA message per queue after the messages under test: once a consumer has them, it has pulled
    everything before them in those queues."""
    producer.send_ok(
        "orderly",
        [
            {"topic": topic, "body": f"fence {q}", "tags": "TagA", "shard": q}
            | {"props": {"warmup": "1", "fence": "1", "run": run, "round": "fence"}}
            for q in range(QUEUES)
        ],
    )


def fence_queues(consumers: list[Driver], run: str) -> set[int]:
    return {
        m["queue_id"]
        for c in consumers
        for m in c.messages()
        if m["props"].get("round") == "fence" and m["props"].get("run") == run
    }


def wait_all(consumers: list[Driver], run: str, n: int, fences: bool = True) -> bool:
    """Until the consumers together hold ``n`` distinct messages of ``run`` (and every queue's fence)."""

    def done(_: Any) -> bool:
        got = {m["props"]["seq"] for c in consumers for m in main_only(c.messages(), run)}
        return len(got) >= n and (not fences or fence_queues(consumers, run) == ALL_QUEUES)

    ok = consumers[0].wait_for(done, DELIVERY_TIMEOUT)
    time.sleep(0.5)  # let duplicates or strays show up
    return ok


def start_consumers(
    children: list[Driver], broker: BrokerProcess, homes: Path, n: int, group: str, topic: str, **opts: Any
) -> list[Driver]:
    out = []
    for i in range(n):
        args = consumer_args(broker.namesrv_addr, group, topic, **opts)
        child = Driver(f"{group}#{i}", ["consume-push", *args], homes / f"{group}-{i}")
        children.append(child)
        out.append(child)
    for child in out:
        child.wait_event("started", 30)
    return out


def create_topic(producer: CppProducer, broker: BrokerProcess, topic: str, run: str) -> None:
    """The first send auto-creates the topic; consumers need its route before they start."""
    producer.send_ok(
        "sync", [{"topic": topic, "body": "create", "tags": "TagA", "props": {"warmup": "1", "run": run}}]
    )
    wait_route(broker, topic)


# --- producers + pull consumer ------------------------------------------------------------------------------


def test_send_sync_then_pull_from_start(broker: BrokerProcess, producer: CppProducer, homes: Path) -> None:
    run = uuid.uuid4().hex[:8]
    topic = f"CppSync_{run}"
    sent = make_messages(topic, run, 40)
    before = fast_send_stats(broker.broker_addr)
    results = producer.send_ok("sync", sent)
    assert all(r["msg_id"] for r in results)
    # The broker's network thread answered them (SEND_MESSAGE with numbers in its header), all but the first,
    # which created the topic.
    assert_taken(delta(before, fast_send_stats(broker.broker_addr)), 40, 39, new_topic=True)

    got = pull_all(broker, homes, topic, len(sent))
    assert_exactly_once(sent, got)
    assert_intact(sent, got)
    check_queue_offsets(got)
    assert {m["queue_id"] for m in got} == ALL_QUEUES  # the producer spreads over all queues
    # The send result's offset is the message's queue offset; its msg id is the client id (UNIQ_KEY).
    by_seq = {m["props"]["seq"]: m for m in got}
    for spec, res in zip(sent, results, strict=True):
        m = by_seq[spec["props"]["seq"]]
        assert res["offset"] == m["queue_offset"], (res, m["queue_offset"])
        assert res["msg_id"] == m["props"]["UNIQ_KEY"], (res, m["props"], m["msg_id"])
    # This client reports the UNIQ_KEY as a delivered message's id too; commit log offsets are distinct.
    assert all(m["msg_id"] == m["props"]["UNIQ_KEY"] for m in got)
    assert len({m["commit_log_offset"] for m in got}) == len(got)


def test_send_oneway_then_pull(broker: BrokerProcess, producer: CppProducer, homes: Path) -> None:
    run = uuid.uuid4().hex[:8]
    topic = f"CppOneway_{run}"
    # The first send to a new topic is Python's (it creates and vets the topic), and a burst of oneway sends
    # right behind it may all reach the broker before Python is done with it (then all queue behind it, in
    # order, to Python): the topic is made first, so the oneway sends can take the fast path.
    create_topic(producer, broker, topic, run)
    sent = make_messages(topic, run, 40)
    before = fast_send_stats(broker.broker_addr)
    producer.send_ok("oneway", sent)
    got = pull_all(broker, homes, topic, len(sent) + 1)
    assert_taken(delta(before, fast_send_stats(broker.broker_addr)), 40, 40)
    assert_exactly_once(sent, main_only(got, run))
    assert_intact(sent, main_only(got, run))
    check_queue_offsets(got)


def test_send_orderly_keeps_shards_in_queue_order(
    broker: BrokerProcess, producer: CppProducer, homes: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    topic = f"CppOrderly_{run}"
    sent = make_messages(topic, run, 48)
    for i, m in enumerate(sent):
        m["shard"] = i % 6  # the wrapper's selector: queue = shard % queue count
    producer.send_ok("orderly", sent)

    got = pull_all(broker, homes, topic, len(sent))
    assert_exactly_once(sent, got)
    assert_intact(sent, got)
    check_queue_offsets(got)
    for m in got:
        assert m["queue_id"] == int(m["props"]["seq"]) % 6 % QUEUES, m
    per_queue: dict[int, list[Msg]] = defaultdict(list)
    for m in got:
        per_queue[m["queue_id"]].append(m)
    for msgs in per_queue.values():
        msgs.sort(key=lambda m: m["queue_offset"])
        seqs = [int(m["props"]["seq"]) for m in msgs]
        assert seqs == sorted(seqs), f"queue order differs from send order: {seqs}"


def test_send_async_then_pull(broker: BrokerProcess, producer: CppProducer, homes: Path) -> None:
    run = uuid.uuid4().hex[:8]
    topic = f"CppAsync_{run}"
    sent = make_messages(topic, run, 40)
    results = producer.send_ok("async", sent)  # all 40 in flight, then every callback
    got = pull_all(broker, homes, topic, len(sent))
    assert_exactly_once(sent, got)
    assert_intact(sent, got)
    check_queue_offsets(got)
    by_seq = {m["props"]["seq"]: m for m in got}
    for spec, res in zip(sent, results, strict=True):
        m = by_seq[spec["props"]["seq"]]
        assert (res["msg_id"], res["offset"]) == (m["props"]["UNIQ_KEY"], m["queue_offset"])


def test_send_with_delay_levels(broker: BrokerProcess, producer: CppProducer, homes: Path) -> None:
    """Levels 1 and 2 (the default 1 s and 5 s): each message is stored in its topic again only once its
    delay has passed since it was born, with DELAY and REAL_TOPIC kept as RocketMQ keeps them."""
    run = uuid.uuid4().hex[:8]
    topic = f"CppDelay_{run}"
    sent = make_messages(topic, run, 8, big=False)
    for i, m in enumerate(sent):
        m["delay"] = 1 + i % 2
    producer.send_ok("sync", sent)
    got = pull_all(broker, homes, topic, len(sent))
    assert_exactly_once(sent, got)
    assert_intact(sent, got)
    for m in got:
        level = 1 + int(m["props"]["seq"]) % 2
        assert m["props"]["DELAY"] == str(level) and m["props"]["REAL_TOPIC"] == topic, m
        assert m["store_timestamp"] >= m["born_timestamp"] + (1000, 5000)[level - 1], m


def check_batch(
    broker: BrokerProcess, producer: CppProducer, homes: Path, topic: str, sent: list[Msg]
) -> None:
    batches = [sent[i : i + 8] for i in range(0, len(sent), 8)]
    before = fast_send_stats(broker.broker_addr)
    for batch in batches:
        [result] = producer.send_ok("batch", batch)
        assert result["status"] == 0
    # The network thread stored all but the first batch (which created the topic), compressed or not.
    taken = delta(before, fast_send_stats(broker.broker_addr))
    assert_taken(taken, len(batches), len(sent) - 8, new_topic=True)

    got = pull_all(broker, homes, topic, len(sent))
    assert_exactly_once(sent, got)  # the batch blob is split into its messages, not stored as one
    assert_intact(sent, got)
    check_queue_offsets(got)
    by_seq = {m["props"]["seq"]: m for m in got}
    for batch in batches:  # one batch = one queue, consecutive offsets
        stored = [by_seq[m["props"]["seq"]] for m in batch]
        assert len({m["queue_id"] for m in stored}) == 1
        offsets = [m["queue_offset"] for m in stored]
        assert offsets == list(range(offsets[0], offsets[0] + len(batch)))
        assert len({m["props"]["UNIQ_KEY"] for m in stored}) == len(batch)


def test_send_batch_stores_each_message(broker: BrokerProcess, producer: CppProducer, homes: Path) -> None:
    run = uuid.uuid4().hex[:8]
    topic = f"CppBatch_{run}"
    check_batch(broker, producer, homes, topic, make_messages(topic, run, 40, big=False))


def test_send_batch_compressed_by_client(broker: BrokerProcess, producer: CppProducer, homes: Path) -> None:
    """A batch body of 4 KiB or more is zlib-compressed *as a whole* by this C++ client: SEND_MESSAGE with
    batch=1 and sysFlag=1, the body a zlib stream of the §4.5 batch encoding."""
    run = uuid.uuid4().hex[:8]
    topic = f"CppBatchZ_{run}"
    check_batch(broker, producer, homes, topic, make_messages(topic, run, 40, big=True))


def test_pull_consumer_tag_expression(broker: BrokerProcess, producer: CppProducer, homes: Path) -> None:
    run = uuid.uuid4().hex[:8]
    topic = f"CppPullTags_{run}"
    sent = make_messages(topic, run, 40)
    producer.send_ok("sync", sent)
    want = [m for m in sent if m.get("tags") in ("TagA", "TagB")]
    got = pull_all(broker, homes, topic, len(want), expression="TagA || TagB")
    assert_exactly_once(want, got)
    assert_intact(sent, got)


# --- push consumers -----------------------------------------------------------------------------------------


def test_push_clustering_two_consumers_share_queues(
    broker: BrokerProcess, producer: CppProducer, homes: Path, children: list[Driver]
) -> None:
    run = uuid.uuid4().hex[:8]
    topic, group = f"CppCluster_{run}", f"CG_CLUSTER_{run}"
    create_topic(producer, broker, topic, run)
    consumers = start_consumers(children, broker, homes, 2, group, topic)
    warm_up(producer, topic, run, consumers, split_between)
    sent = make_messages(topic, run, 60)
    producer.send_ok("sync", sent)
    send_fences(producer, topic, run)

    ok = wait_all(consumers, run, len(sent))
    a, b = (main_only(c.messages(), run) for c in consumers)
    detail = "\n".join(c.describe() for c in consumers)
    assert ok, f"not everything delivered: {len(a)} + {len(b)} of {len(sent)}\n{detail}"
    assert_exactly_once(sent, a + b)
    assert_intact(sent, a + b)
    qa, qb = {m["queue_id"] for m in a}, {m["queue_id"] for m in b}
    assert a and b, "one consumer got nothing"
    assert not (qa & qb), f"both consumers consumed queues {qa & qb}"
    assert qa | qb == ALL_QUEUES


def test_push_broadcasting_each_consumer_gets_all(
    broker: BrokerProcess, producer: CppProducer, homes: Path, children: list[Driver]
) -> None:
    run = uuid.uuid4().hex[:8]
    topic, group = f"CppBroadcast_{run}", f"CG_BROADCAST_{run}"
    create_topic(producer, broker, topic, run)
    consumers = start_consumers(children, broker, homes, 2, group, topic, broadcasting=True)
    warm_up(producer, topic, run, consumers, lambda qs: all(q == ALL_QUEUES for q in qs))
    sent = make_messages(topic, run, 40)
    producer.send_ok("sync", sent)
    send_fences(producer, topic, run)
    for c in consumers:
        ok = wait_all([c], run, len(sent))
        got = main_only(c.messages(), run)
        assert ok, f"{c.name} got {len(got)} of {len(sent)}\n{c.describe()}"
        assert_exactly_once(sent, got)
        assert_intact(sent, got)


@pytest.mark.parametrize("n_consumers", [1, 2])
def test_push_orderly_consumes_each_queue_in_offset_order(
    broker: BrokerProcess, producer: CppProducer, homes: Path, children: list[Driver], n_consumers: int
) -> None:
    """Orderly consumers (LOCK_BATCH_MQ per queue) see each queue's messages in queue-offset order; with two
    consumers in the group, each queue is locked by and delivered to one of them only."""
    run = uuid.uuid4().hex[:8]
    topic, group = f"CppOrderlyPush_{run}", f"CG_ORDERLY_{run}"
    create_topic(producer, broker, topic, run)
    consumers = start_consumers(children, broker, homes, n_consumers, group, topic, orderly=True)
    warm_up(producer, topic, run, consumers, split_between if n_consumers == 2 else all_queues)
    sent = make_messages(topic, run, 60)
    for i, m in enumerate(sent):
        m["shard"] = i % 6  # queue = shard % 4
    producer.send_ok("orderly", sent)
    send_fences(producer, topic, run)
    ok = wait_all(consumers, run, len(sent))
    detail = "\n".join(c.describe() for c in consumers)
    assert ok, detail
    per_consumer = [main_only(c.messages(), run) for c in consumers]
    everything = [m for got in per_consumer for m in got]
    assert_exactly_once(sent, everything)
    assert_intact(sent, everything)
    owners: dict[int, set[int]] = defaultdict(set)
    for i, got in enumerate(per_consumer):
        # Delivery order (= stdout line order) within each queue follows queue offsets, and so send order.
        per_queue: dict[int, list[Msg]] = defaultdict(list)
        for m in got:
            assert m["queue_id"] == int(m["props"]["seq"]) % 6 % QUEUES
            per_queue[m["queue_id"]].append(m)
            owners[m["queue_id"]].add(i)
        for q, msgs in per_queue.items():
            offsets = [m["queue_offset"] for m in msgs]
            assert offsets == sorted(offsets), f"queue {q} delivered out of order: {offsets}"
            seqs = [int(m["props"]["seq"]) for m in msgs]
            assert seqs == sorted(seqs), f"queue {q} send order broken: {seqs}"
    assert all(len(o) == 1 for o in owners.values()), f"queues consumed by several consumers: {owners}"


def test_push_tag_subscription(
    broker: BrokerProcess, producer: CppProducer, homes: Path, children: list[Driver]
) -> None:
    run = uuid.uuid4().hex[:8]
    topic, group = f"CppTags_{run}", f"CG_TAGS_{run}"
    create_topic(producer, broker, topic, run)
    [consumer] = start_consumers(children, broker, homes, 1, group, topic, expression="TagA || TagB")
    warm_up(producer, topic, run, [consumer], all_queues)
    sent = make_messages(topic, run, 60, tags=["TagA", "TagB", "TagC", None, "TagAB", "tagA"])
    want = [m for m in sent if m.get("tags") in ("TagA", "TagB")]
    producer.send_ok("sync", sent)
    send_fences(producer, topic, run)
    ok = wait_all([consumer], run, len(want))
    got = main_only(consumer.messages(), run)
    assert ok, consumer.describe()
    assert {m["tags"] for m in got} <= {"TagA", "TagB"}, Counter(m["tags"] for m in got)
    assert_exactly_once(want, got)
    assert_intact(sent, got)


def test_push_new_group_starts_at_first_message(
    broker: BrokerProcess, producer: CppProducer, homes: Path, children: list[Driver]
) -> None:
    """Messages sent before a brand-new group's first consumer starts are consumed too: the broker answers
    QUERY_CONSUMER_OFFSET with 0 for a queue whose first message is still in memory."""
    run = uuid.uuid4().hex[:8]
    topic, group = f"CppEarly_{run}", f"CG_EARLY_{run}"
    sent = make_messages(topic, run, 40)
    producer.send_ok("sync", sent)
    wait_route(broker, topic)
    [consumer] = start_consumers(children, broker, homes, 1, group, topic)
    ok = wait_all([consumer], run, len(sent), fences=False)
    got = main_only(consumer.messages(), run)
    assert ok, f"got {len(got)} of {len(sent)}\n{consumer.describe()}"
    assert_exactly_once(sent, got)
    assert_intact(sent, got)


def test_push_clustering_survivor_takes_over_queues(
    broker: BrokerProcess, producer: CppProducer, homes: Path, children: list[Driver]
) -> None:
    """When one of two consumers of a group shuts down, the other takes over its queues from the committed
    offsets: everything sent afterwards reaches the survivor."""
    run = uuid.uuid4().hex[:8]
    topic, group = f"CppTakeover_{run}", f"CG_TAKEOVER_{run}"
    create_topic(producer, broker, topic, run)
    a, b = start_consumers(children, broker, homes, 2, group, topic)
    warm_up(producer, topic, run, [a, b], split_between)
    first = make_messages(topic, run, 40)
    producer.send_ok("sync", first)
    assert wait_all([a, b], run, len(first), fences=False), a.describe() + b.describe()

    assert b.close() == 0, b.describe()
    assert any(x.get("event") == "stopped" for x in b.lines), b.describe()
    warm_up(producer, topic, run, [a], all_queues)
    second = make_messages(topic, run + "2", 40)
    producer.send_ok("sync", second)
    send_fences(producer, topic, run + "2")
    ok = wait_all([a], run + "2", len(second))
    got = main_only(a.messages(), run + "2")
    assert ok, f"survivor got {len(got)} of {len(second)}\n{a.describe()}"
    assert_exactly_once(second, got)
    assert_intact(second, got)
    # Nothing of the first batch was lost either (a re-delivery after the takeover is allowed).
    seen = {m["props"]["seq"] for c in (a, b) for m in main_only(c.messages(), run)}
    assert seen == {m["props"]["seq"] for m in first}


def test_push_restarted_consumer_resumes_from_committed_offset(
    broker: BrokerProcess, producer: CppProducer, homes: Path, children: list[Driver]
) -> None:
    """A consumer that stops commits its offsets (UPDATE_CONSUMER_OFFSET); its successor in the group gets
    exactly the messages sent in between."""
    run = uuid.uuid4().hex[:8]
    topic, group = f"CppResume_{run}", f"CG_RESUME_{run}"
    create_topic(producer, broker, topic, run)
    [first] = start_consumers(children, broker, homes, 1, group, topic)
    warm_up(producer, topic, run, [first], all_queues)
    before = make_messages(topic, run, 30)
    producer.send_ok("sync", before)
    send_fences(producer, topic, run)
    assert wait_all([first], run, len(before)), first.describe()
    assert first.close() == 0, first.describe()

    run2 = run + "b"
    between = make_messages(topic, run2, 30)
    producer.send_ok("sync", between)
    [second] = start_consumers(children, broker, homes, 1, group, topic)
    send_fences(producer, topic, run2)
    ok = wait_all([second], run2, len(between))
    got = main_only(second.messages(), run2)
    assert ok, f"restarted consumer got {len(got)} of {len(between)}\n{second.describe()}"
    assert_exactly_once(between, got)
    assert_intact(between, got)
    again = main_only(second.messages(), run)
    assert not again, f"{len(again)} messages consumed before the restart were delivered again"


def test_push_failed_messages_are_redelivered(
    broker: BrokerProcess, producer: CppProducer, homes: Path, children: list[Driver]
) -> None:
    """A message whose consumption fails (RECONSUME_LATER) comes back: the C++ client sends it back with
    CONSUMER_SEND_MSG_BACK (delay level 0 -> 3, 10 s) and it is redelivered from %RETRY%<group> with
    reconsume_times 1 and its original topic, body, keys and properties."""
    run = uuid.uuid4().hex[:8]
    topic, group = f"CppRetry_{run}", f"CG_RETRY_{run}"
    create_topic(producer, broker, topic, run)
    [consumer] = start_consumers(children, broker, homes, 1, group, topic, fail_every=5)
    warm_up(producer, topic, run, [consumer], all_queues)
    sent = make_messages(topic, run, 20)
    producer.send_ok("sync", sent)
    ok = consumer.wait_for(lambda _: len(main_only(consumer.messages(), run)) >= len(sent), 40)
    time.sleep(0.5)
    got = main_only(consumer.messages(), run)
    failed = [x for x in consumer.lines if x.get("event") == "failed" and x["props"].get("run") == run]
    assert ok, f"got {len(got)} of {len(sent)}, failed once: {len(failed)}\n{consumer.describe()}"
    assert sorted(int(m["props"]["seq"]) for m in failed) == [0, 5, 10, 15]
    # Nothing lost. Redelivery is at-least-once: the C++ client sends back every message of a
    # consume batch when one of them fails, so a message consumed fine may come back from the
    # retry topic once more -- but only as a retry, never twice from its own queue.
    seqs = Counter(m["props"]["seq"] for m in got)
    assert {m["props"]["seq"] for m in sent} <= set(seqs)
    for seq, n in seqs.items():
        if n > 1:
            firsts = [m for m in got if m["props"]["seq"] == seq and m["reconsume_times"] == 0]
            assert len(firsts) <= 1, f"seq {seq} delivered {len(firsts)} times from its own queue"
    assert_intact(sent, [m for m in got if int(m["props"]["seq"]) % 5 and m["reconsume_times"] == 0])
    for m in got:
        if int(m["props"]["seq"]) % 5 == 0:
            assert m["reconsume_times"] >= 1, m
            assert m["topic"] == topic and m["body"] == sent[int(m["props"]["seq"])]["body"]
