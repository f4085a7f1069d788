"""Drive the official RocketMQ 5.x Python client (rocketmq-python-client 5.1.2) for the proxy tests.

Run as a child Python with the client's install directory on PYTHONPATH (its import package is `rocketmq`,
as the 4.x client's, so it cannot be imported in the test process). ``python client5.py SCENARIO JSON``
prints one JSON line of results on stdout; the client's own logs go to stderr.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from rocketmq import (  # type: ignore[import-not-found]
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    LitePushConsumer,
    LiteSimpleConsumer,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)


def config(args: dict[str, Any]) -> Any:
    creds = Credentials(args.get("ak", ""), args.get("sk", ""))
    return ClientConfiguration(args["endpoints"], creds, request_timeout=args.get("timeout", 10))


def message(topic: str, body: str, **kw: Any) -> Any:
    msg = Message()
    msg.topic = topic
    msg.body = body.encode()
    if kw.get("tag"):
        msg.tag = kw["tag"]
    for key in kw.get("keys") or ():
        msg.keys = key  # the setter adds one key
    if kw.get("group"):
        msg.message_group = kw["group"]
    if kw.get("delay_s"):
        # 5.1.2 copies delivery_timestamp into the protobuf Timestamp's seconds: epoch seconds, not ms.
        msg.delivery_timestamp = int(time.time()) + kw["delay_s"]
    for k, v in (kw.get("props") or {}).items():
        msg.add_property(k, v)
    return msg


def send(args: dict[str, Any]) -> dict[str, Any]:
    topic = args["topic"]
    producer = Producer(config(args), (topic,), tls_enable=args.get("tls", False))
    producer.startup()
    out = []
    try:
        for m in args["messages"]:
            receipt = producer.send(message(topic, **m))
            out.append({"body": m["body"], "message_id": receipt.message_id})
    finally:
        producer.shutdown()
    return {"sent": out}


class Checker(TransactionChecker):  # type: ignore[misc]
    def __init__(self, verdicts: dict[str, str], awaited: str) -> None:
        self.verdicts = verdicts
        self.awaited = awaited
        self.checked: list[str] = []
        self.done = threading.Event()
        """Set once `awaited` was checked (a check of an ended one whose end was late does not count)."""

    def check(self, msg: Any) -> Any:
        body = msg.body.decode()
        self.checked.append(body)
        if body == self.awaited:
            self.done.set()
        return (
            TransactionResolution.COMMIT
            if self.verdicts.get(body) == "commit"
            else TransactionResolution.ROLLBACK
        )


def transaction(args: dict[str, Any]) -> dict[str, Any]:
    """Half messages ended by the producer (commit / rollback) and one left for the server's check."""
    topic = args["topic"]
    # A check may also come for an ended one whose end the broker had not read yet: answer it the same.
    checker = Checker({args["unresolved"]: args["check_verdict"], **args["ended"]}, args["unresolved"])
    producer = Producer(config(args), (topic,), checker)
    producer.startup()
    try:
        for body, verdict in args["ended"].items():
            tx = producer.begin_transaction()
            producer.send(message(topic, body), tx)
            tx.commit() if verdict == "commit" else tx.rollback()
        tx = producer.begin_transaction()
        producer.send(message(topic, args["unresolved"]), tx)  # never ended: the broker asks
        checker.done.wait(args.get("check_wait", 60))
        time.sleep(1)  # let the checker's EndTransaction leave before shutdown
    finally:
        producer.shutdown()
    return {"checked": checker.checked}


def consume(args: dict[str, Any]) -> dict[str, Any]:
    """Receive until ``count`` messages: ack each; the first is first given more invisible time."""
    topic = args["topic"]
    consumer = SimpleConsumer(config(args), args["group"], {topic: FilterExpression(args.get("tag", "*"))}, 5)
    consumer.startup()
    got: list[dict[str, Any]] = []
    changed = False
    errors: list[str] = []
    deadline = time.monotonic() + args.get("deadline", 60)
    try:
        while len(got) < args["count"] and time.monotonic() < deadline:
            try:
                batch = consumer.receive(16, 30) or []
            except Exception as e:  # Apache's proxy refuses a receive before the client's settings reach it
                print(f"receive failed, retrying: {e}", file=sys.stderr)
                if str(e) not in errors:
                    errors.append(str(e))
                time.sleep(1)
                continue
            for msg in batch:
                if not changed:
                    consumer.change_invisible_duration(msg, 40)
                    changed = True
                consumer.ack(msg)
                got.append(
                    {
                        "body": msg.body.decode(),
                        "tag": msg.tag,
                        "keys": sorted(msg.keys),
                        "group": msg.message_group,
                        "attempt": msg.delivery_attempt,
                        "props": dict(msg.properties),
                    }
                )
    finally:
        consumer.shutdown()
    return {"received": got, "changed_invisible": changed, "errors": errors}


class Listener(MessageListener):  # type: ignore[misc]
    """Fails ``fail_always`` every time and ``fail_once`` on its first delivery; records each delivery."""

    def __init__(self, fail_always: set[str], fail_once: set[str]) -> None:
        self.fail_always = fail_always
        self.fail_once = fail_once
        self.deliveries: list[tuple[str, int]] = []
        self.lock = threading.Lock()

    def consume(self, msg: Any) -> Any:
        body = msg.body.decode()
        with self.lock:
            self.deliveries.append((body, msg.delivery_attempt))
        if body in self.fail_always or (body in self.fail_once and msg.delivery_attempt == 1):
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def push(args: dict[str, Any]) -> dict[str, Any]:
    """A PushConsumer until each body is consumed (or, failing always, delivered ``max_attempts`` times)."""
    topic = args["topic"]
    listener = Listener(set(args["fail_always"]), set(args["fail_once"]))
    consumer = PushConsumer(config(args), args["group"], listener, {topic: FilterExpression("*")})
    consumer.startup()
    want_ok = set(args["bodies"]) - set(args["fail_always"])
    deadline = time.monotonic() + args.get("deadline", 120)
    try:
        while time.monotonic() < deadline:
            with listener.lock:
                seen = list(listener.deliveries)
            done = {b for b, _ in seen if b in want_ok and (b not in args["fail_once"] or _ > 1)}
            failed = [a for b, a in seen if b in args["fail_always"]]
            if done == want_ok and len(failed) >= args["max_attempts"] * len(args["fail_always"]):
                time.sleep(args.get("settle", 5))  # the last nack leads to the dead-letter queue
                break
            time.sleep(0.5)
    finally:
        consumer.shutdown()
    with listener.lock:
        return {"deliveries": sorted(listener.deliveries)}


class LiteListener(MessageListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.received: dict[str, list[str]] = {}

    def consume(self, msg: Any) -> Any:
        with self.lock:
            self.received.setdefault(msg.lite_topic or "", []).append(
                f"{msg.body.decode()}#{msg.delivery_attempt}"
            )
        return ConsumeResult.SUCCESS

    def wait(self, deadline_s: float, **want: int) -> dict[str, list[str]]:
        """Until each lite topic named got its count of deliveries (or the deadline); a copy of all."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            with self.lock:
                if all(len(self.received.get(k, ())) >= n for k, n in want.items()):
                    break
            time.sleep(0.1)
        with self.lock:
            return {k: list(v) for k, v in sorted(self.received.items())}


def _send_lite(producer: Any, topic: str, lite: str, *bodies: str) -> None:
    for body in bodies:
        msg = message(topic, body)
        msg.lite_topic = lite
        producer.send(msg)


def _error(call: Any) -> str:
    try:
        call()
    except Exception as e:
        return type(e).__name__
    return "none"


def lite(args: dict[str, Any]) -> dict[str, Any]:
    """Lite topics are named with one letter here: client 5.1.2's ``subscribe_lite(name)`` puts the name's
    letters in its SyncLiteSubscription (it extends the request's set with the string), and the name itself
    reaches the server only with the client's sync of its whole set, every 30 s (on Apache's proxy alike).

    A LitePushConsumer of a lite group: lite topics subscribed get their messages from the first, those
    not subscribed nothing, an unsubscribed one stops; bad lite topic names fail (see tests/peers)."""
    topic, settle, deadline = args["topic"], args.get("settle", 4), args.get("deadline", 60)
    producer = Producer(config(args), (topic,))
    producer.startup()
    listener = LiteListener()
    out: dict[str, Any] = {}
    try:
        _send_lite(producer, topic, "a", "a-0", "a-1")
        _send_lite(producer, topic, "c", "c-0")
        consumer = LitePushConsumer(config(args), args["group"], topic, listener)
        consumer.startup()
        try:
            consumer.subscribe_lite("a")
            consumer.subscribe_lite("b")
            _send_lite(producer, topic, "b", "b-0", "b-1")
            _send_lite(producer, topic, "a", "a-2")
            _send_lite(producer, topic, "c", "c-1")
            listener.wait(deadline, a=3, b=2)
            time.sleep(settle)
            out["step2"] = listener.wait(0)
            consumer.subscribe_lite("c")
            listener.wait(deadline, c=2)
            time.sleep(settle)
            out["step3"] = listener.wait(0)
            consumer.unsubscribe_lite("a")
            _send_lite(producer, topic, "a", "a-3")
            _send_lite(producer, topic, "b", "b-2")
            listener.wait(deadline, b=3)
            time.sleep(settle)
            out["step4"] = listener.wait(0)
            out["badSubscribe"] = _error(lambda: consumer.subscribe_lite("bad name!"))
            out["badSend"] = _error(lambda: _send_lite(producer, topic, "bad/name", "x-0"))
        finally:
            consumer.shutdown()
    finally:
        producer.shutdown()
    return out


def _subscribe_simple(consumer: Any, lite: str) -> None:
    """The server's settings (the lite subscription quota) reach a LiteSimpleConsumer after its startup
    returns; until then its subscribe_lite fails in the client, quota 0."""
    end = time.monotonic() + 15
    while True:
        try:
            consumer.subscribe_lite(lite)
            return
        except Exception:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


def lite_simple(args: dict[str, Any]) -> dict[str, Any]:
    """A LiteSimpleConsumer: receive its lite topic's messages, ack each; then nothing more comes."""
    topic = args["topic"]
    producer = Producer(config(args), (topic,))
    producer.startup()
    consumer = LiteSimpleConsumer(topic, config(args), args["group"], await_duration=2)
    got: list[str] = []
    try:
        _send_lite(producer, topic, "s", "s-0", "s-1", "s-2")
        _send_lite(producer, topic, "t", "t-0")
        consumer.startup()
        _subscribe_simple(consumer, "s")
        end = time.monotonic() + args.get("deadline", 60)
        while len(got) < 3 and time.monotonic() < end:
            for msg in consumer.receive(16, 30) or ():
                got.append(f"{msg.lite_topic}:{msg.body.decode()}")
                consumer.ack(msg)
        again = [m.body.decode() for m in consumer.receive(16, 30) or ()]
    finally:
        consumer.shutdown()
        producer.shutdown()
    return {"received": got, "again": again}


def lite_retry(args: dict[str, Any]) -> dict[str, Any]:
    """A LiteSimpleConsumer that never acks: its lite topic's messages come again after their invisible time,
    attempt by attempt, until the group's attempts are spent (then the dead-letter queue)."""
    topic = args["topic"]
    producer = Producer(config(args), (topic,))
    producer.startup()
    consumer = LiteSimpleConsumer(topic, config(args), args["group"], await_duration=2)
    deliveries: list[str] = []
    try:
        _send_lite(producer, topic, "r", "r-0", "r-1")
        consumer.startup()
        _subscribe_simple(consumer, "r")
        end = time.monotonic() + args.get("deadline", 40)
        while time.monotonic() < end:
            for msg in consumer.receive(16, 2) or ():
                deliveries.append(f"{msg.body.decode()}#{msg.delivery_attempt}")
    finally:
        consumer.shutdown()
        producer.shutdown()
    return {"deliveries": deliveries}


def lite_take(args: dict[str, Any]) -> dict[str, Any]:
    """A LiteSimpleConsumer of lite topic "k" (after sending ``send``, if any): receives (invisible for
    ``invisible_s``) until ``want`` deliveries came or ``deadline`` passed, acks the first ``ack`` of them and
    leaves the rest; then waits ``settle`` seconds more for deliveries that should not come."""
    topic = args["topic"]
    consumer = LiteSimpleConsumer(topic, config(args), args["group"], await_duration=1)
    producer = None
    got: list[str] = []
    try:
        if args.get("send"):
            producer = Producer(config(args), (topic,))
            producer.startup()
            _send_lite(producer, topic, "k", *args["send"])
        consumer.startup()
        _subscribe_simple(consumer, "k")
        acks = args.get("ack", 10**9)
        end = time.monotonic() + args.get("deadline", 30)
        while len(got) < args["want"] and time.monotonic() < end:
            for msg in consumer.receive(16, args.get("invisible_s", 30)) or ():
                got.append(f"{msg.body.decode()}#{msg.delivery_attempt}")
                if len(got) <= acks:
                    consumer.ack(msg)
        end = time.monotonic() + args.get("settle", 0)
        while time.monotonic() < end:
            got += [f"{m.body.decode()}#{m.delivery_attempt}" for m in consumer.receive(16, 30) or ()]
    finally:
        consumer.shutdown()
        if producer is not None:
            producer.shutdown()
    return {"received": got}


if __name__ == "__main__":
    scenario, raw = sys.argv[1], sys.argv[2]
    scenarios = {
        "send": send,
        "transaction": transaction,
        "consume": consume,
        "push": push,
        "lite": lite,
        "lite_simple": lite_simple,
        "lite_retry": lite_retry,
        "lite_take": lite_take,
    }
    result = scenarios[scenario](json.loads(raw))
    print(json.dumps(result), flush=True)
