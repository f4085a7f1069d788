"""Drive the official C++ RocketMQ client (PyPI ``rocketmq==0.4.4``) from a child process.

The tests run this script with :mod:`subprocess` so the native library's threads never live inside pytest
and a hung or crashed client can be killed. Every line the script prints on stdout is one JSON object;
C++ logs go to ``$HOME/logs/rocketmq-cpp`` (the tests point ``HOME`` at a temp dir).

Subcommands::

    producer      --namesrv A --group G
        Long-lived. Reads one JSON command per stdin line, answers one JSON line per command:
          {"op": "send", "mode": "sync"|"async"|"oneway"|"orderly"|"batch", "messages": [MSG, ...]}
            -> {"results": [{"status": 0, "msg_id": "...", "offset": 12} | {"error": "..."}, ...]}
               (one result per message; "batch" sends all messages as one batch and answers one result)
          {"op": "quit"}  (or EOF) -> {"event": "stopped"} and exit
        MSG = {"topic": T, "body": str, "tags": str?, "keys": str?, "props": {str: str}?, "shard": int?,
               "delay": int?}
        ("shard" is the send_orderly argument: the wrapper's selector picks queue shard % queue count;
        "delay" a delay level; "async" sends every message with send_async, then waits for each callback).

    produce       --namesrv A --group G --topic T --count N --mode sync|oneway|orderly|batch
                  [--tags TagA,TagB] [--batch-size 8] [--shards 4]
        One shot: generates N messages (body "<topic>#<i>", keys "k<i>", tags cycled, property seq=<i>,
        shard i % shards), prints {"event": "sent", "i": i, "message": MSG, "result": {...}} per message
        (one result per batch for --mode batch, repeated on each of its messages), then {"event": "done"}.

    consume-push  --namesrv A --group G --topic T [--expression '*'] [--model clustering|broadcasting]
                  [--orderly] [--expect N] [--timeout S]
        Prints {"event": "started"}, then one {"event": "msg", ...} line per delivered message
        (see message_json), until stdin closes or says "stop", N messages arrived, or S seconds pass;
        then shuts the consumer down and prints {"event": "stopped", "received": n}.
        --fail-every K: the first delivery of each message whose property seq is a multiple of K is
        printed as {"event": "failed", ...} and answered RECONSUME_LATER (the callback raises).

    pull          --namesrv A --group G --topic T [--expression '*'] [--expect N] [--timeout S]
        PullConsumer reading every queue of T from offset 0 until no new message; with --expect, repeats
        passes until N messages arrived, then makes one more pass. Prints {"event": "msg", ...} lines, then
        {"event": "done", "received": n}.

Every subcommand takes ``--access-key AK --secret-key SK``: ACL session credentials
(``set_session_credentials``), which sign every request the client sends.

All subcommands print {"event": "timeout"} and exit with status 3 when --timeout (default 120 s) passes
while the native client is stuck.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

from rocketmq.client import Message, MessageModel, Producer, PullConsumer, PushConsumer, RecvMessage
from rocketmq.exceptions import ffi_check
from rocketmq.ffi import _CConsumeStatus, dll

CONSUME_SUCCESS = int(_CConsumeStatus.CONSUME_SUCCESS)
RECONSUME_LATER = int(_CConsumeStatus.RECONSUME_LATER)

# Properties every delivered message is asked for (the wrapper cannot list a message's properties).
READ_PROPS = (
    "seq",
    "run",
    "shard",
    "round",
    "warmup",
    "extra",
    "UNIQ_KEY",
    "TAGS",
    "KEYS",
    "DELAY",
    "REAL_TOPIC",
)

_out_lock = threading.Lock()


def emit(obj: dict[str, Any]) -> None:
    line = json.dumps(obj | {"at_ms": int(time.time() * 1000)}, ensure_ascii=False)
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def watchdog(seconds: float) -> None:
    """Exit the whole process if the native client is still running after ``seconds``."""

    def fire() -> None:
        emit({"event": "timeout"})
        os._exit(3)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


def message_json(msg: RecvMessage) -> dict[str, Any]:
    props = {}
    for name in READ_PROPS:
        value = msg.get_property(name)
        if value:
            props[name] = _text(value)
    return {
        "event": "msg",
        "topic": msg.topic,
        "tags": _text(msg.tags),
        "keys": _text(msg.keys),
        "body": _text(msg.body),
        "msg_id": msg.id,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "commit_log_offset": msg.commit_log_offset,
        "reconsume_times": msg.reconsume_times,
        "store_size": msg.store_size,
        "born_timestamp": msg.born_timestamp,
        "store_timestamp": msg.store_timestamp,
        "props": props,
        "thread": threading.get_ident(),
    }


# --- producer -----------------------------------------------------------------------------------------------


def build_message(spec: dict[str, Any]) -> Message:
    msg = Message(spec["topic"])
    if spec.get("tags"):
        msg.set_tags(spec["tags"])
    if spec.get("keys"):
        msg.set_keys(spec["keys"])
    for key, value in (spec.get("props") or {}).items():
        msg.set_property(key, value)
    if spec.get("delay"):
        msg.set_delay_time_level(int(spec["delay"]))
    msg.set_body(spec.get("body", ""))
    return msg


def _result(res: Any) -> dict[str, Any]:
    return {"status": int(res.status), "msg_id": res.msg_id, "offset": int(res.offset)}


def send(producer: Producer, mode: str, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if mode == "batch":
        try:
            return [_result(producer.send_batch([build_message(s) for s in specs]))]
        except Exception as exc:
            return [{"error": f"{type(exc).__name__}: {exc}"}]
    if mode == "async":
        return send_async(producer, specs)
    results: list[dict[str, Any]] = []
    for spec in specs:
        msg = build_message(spec)
        try:
            if mode == "sync":
                results.append(_result(producer.send_sync(msg)))
            elif mode == "oneway":
                producer.send_oneway(msg)
                results.append({"status": None})
            elif mode == "orderly":
                results.append(_result(producer.send_orderly(msg, int(spec.get("shard", 0)))))
            else:
                raise ValueError(f"unknown mode {mode!r}")
        except Exception as exc:
            results.append({"error": f"{type(exc).__name__}: {exc}"})
    return results


def send_async(producer: Producer, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every message in flight at once (send_async), then each result from its callback, in send order."""
    results: list[dict[str, Any] | None] = [None] * len(specs)
    done = threading.Semaphore(0)

    def callbacks(i: int) -> tuple[Any, Any]:
        def ok(res: Any) -> None:
            results[i] = _result(res)
            done.release()

        def failed(exc: Exception) -> None:
            results[i] = {"error": f"{type(exc).__name__}: {exc}"}
            done.release()

        return ok, failed

    messages = [build_message(s) for s in specs]  # kept alive until every callback has run
    for i, msg in enumerate(messages):
        try:
            producer.send_async(msg, *callbacks(i))
        except Exception as exc:
            results[i] = {"error": f"{type(exc).__name__}: {exc}"}
            done.release()
    for _ in specs:
        done.acquire()
    return [r if r is not None else {"error": "no callback"} for r in results]


def credentials(client: Any, args: argparse.Namespace) -> None:
    if args.access_key:
        client.set_session_credentials(args.access_key, args.secret_key, "")


def start_producer(args: argparse.Namespace) -> Producer:
    producer = Producer(args.group, timeout=args.send_timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    credentials(producer, args)
    producer.start()
    return producer


def cmd_producer(args: argparse.Namespace) -> None:
    producer = start_producer(args)
    emit({"event": "started"})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        cmd = json.loads(line)
        if cmd.get("op") == "quit":
            break
        emit({"results": send(producer, cmd["mode"], cmd["messages"])})
    producer.shutdown()
    emit({"event": "stopped"})


def cmd_produce(args: argparse.Namespace) -> None:
    producer = start_producer(args)
    tags = [t for t in (args.tags or "").split(",") if t] or [None]
    specs = []
    for i in range(args.count):
        spec: dict[str, Any] = {
            "topic": args.topic,
            "body": f"{args.topic}#{i}",
            "keys": f"k{i}",
            "props": {"seq": str(i)},
            "shard": i % args.shards,
        }
        if tags[i % len(tags)]:
            spec["tags"] = tags[i % len(tags)]
        specs.append(spec)
    if args.mode == "batch":
        for start in range(0, len(specs), args.batch_size):
            chunk = specs[start : start + args.batch_size]
            [result] = send(producer, "batch", chunk)
            for j, spec in enumerate(chunk):
                emit({"event": "sent", "i": start + j, "message": spec, "result": result})
    else:
        for i, spec in enumerate(specs):
            [result] = send(producer, args.mode, [spec])
            emit({"event": "sent", "i": i, "message": spec, "result": result})
    producer.shutdown()
    emit({"event": "done"})


# --- consumers ----------------------------------------------------------------------------------------------


def subscribe(consumer: PushConsumer, topic: str, expression: str, handler: Any) -> None:
    """Like ``PushConsumer.subscribe``, but ``handler(msg) -> bool`` decides CONSUME_SUCCESS (True) or
    RECONSUME_LATER (False). (The wrapper's own callback re-raises the exception it means to turn into
    RECONSUME_LATER, so ctypes returns 0 = CONSUME_SUCCESS and a failed message counts as consumed.)"""
    ffi_check(dll.Subscribe(consumer._handle, topic.encode(), expression.encode()))

    def on_message(_consumer: int, msg: int) -> int:
        try:
            return CONSUME_SUCCESS if handler(RecvMessage(msg)) else RECONSUME_LATER
        except Exception as exc:
            emit({"event": "error", "error": f"{type(exc).__name__}: {exc}"})
            return RECONSUME_LATER

    consumer._register_callback(on_message)


def cmd_consume_push(args: argparse.Namespace) -> None:
    model = MessageModel.BROADCASTING if args.model == "broadcasting" else MessageModel.CLUSTERING
    consumer = PushConsumer(args.group, orderly=args.orderly, message_model=model)
    consumer.set_namesrv_addr(args.namesrv)
    credentials(consumer, args)
    done = threading.Event()
    received = 0
    count_lock = threading.Lock()
    failed: set[str] = set()

    def on_message(msg: RecvMessage) -> bool:
        nonlocal received
        info = message_json(msg)
        seq = info["props"].get("seq")
        if args.fail_every and seq is not None and int(seq) % args.fail_every == 0:
            key = f"{info['props'].get('run')}/{seq}"
            with count_lock:
                first = key not in failed
                failed.add(key)
            if first:  # first delivery: report it and ask for a redelivery
                emit(info | {"event": "failed"})
                return False
        emit(info)
        with count_lock:
            received += 1
            if args.expect and received >= args.expect:
                done.set()
        return True

    def read_stdin() -> None:
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        done.set()

    subscribe(consumer, args.topic, args.expression, on_message)
    consumer.start()
    emit({"event": "started"})
    threading.Thread(target=read_stdin, daemon=True).start()
    done.wait(args.timeout)
    consumer.shutdown()
    emit({"event": "stopped", "received": received})


def cmd_pull(args: argparse.Namespace) -> None:
    consumer = PullConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    credentials(consumer, args)
    consumer.start()
    deadline = time.monotonic() + args.timeout
    received = 0
    extra_pass = not args.expect
    while True:
        for msg in consumer.pull(args.topic, args.expression):
            emit(message_json(msg))
            received += 1
        if extra_pass or time.monotonic() > deadline:
            break
        if received >= args.expect:
            extra_pass = True  # one more pass: anything beyond the expected messages is reported too
        else:
            time.sleep(0.2)
    consumer.shutdown()
    emit({"event": "done", "received": received})


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--namesrv", required=True)
        p.add_argument("--group", required=True)
        p.add_argument("--timeout", type=float, default=120.0, help="seconds before the process gives up")
        p.add_argument("--access-key", default="", help="ACL session credentials (with --secret-key)")
        p.add_argument("--secret-key", default="")

    p = sub.add_parser("producer")
    common(p)
    p.add_argument("--send-timeout-ms", type=int, default=5000)
    p.set_defaults(func=cmd_producer)

    p = sub.add_parser("produce")
    common(p)
    p.add_argument("--send-timeout-ms", type=int, default=5000)
    p.add_argument("--topic", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--mode", choices=("sync", "oneway", "orderly", "batch"), default="sync")
    p.add_argument("--tags", default="")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--shards", type=int, default=4)
    p.set_defaults(func=cmd_produce)

    p = sub.add_parser("consume-push")
    common(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--expression", default="*")
    p.add_argument("--model", choices=("clustering", "broadcasting"), default="clustering")
    p.add_argument("--orderly", action="store_true")
    p.add_argument("--expect", type=int, default=0)
    p.add_argument(
        "--fail-every",
        type=int,
        default=0,
        help="fail (RECONSUME_LATER) the first delivery of messages whose property seq is a multiple",
    )
    p.set_defaults(func=cmd_consume_push)

    p = sub.add_parser("pull")
    common(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--expression", default="*")
    p.add_argument("--expect", type=int, default=0)
    p.set_defaults(func=cmd_pull)

    args = parser.parse_args()
    # The consume-push timeout is its normal end; the watchdog only catches a stuck native shutdown.
    watchdog(args.timeout + 30.0 if args.command == "consume-push" else args.timeout)
    args.func(args)
    sys.stdout.flush()
    # Skip the wrapper's __del__ hooks (a second shutdown of a native client) at interpreter exit.
    os._exit(0)


if __name__ == "__main__":
    main()
