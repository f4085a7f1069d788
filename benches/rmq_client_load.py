"""rmq's own client (``rmq.client``, asyncio) as a load generator, beside the C++ client.

``produce``: one ``Producer`` per process awaiting ``send`` of a ``body_size`` message in a loop (the
synchronous send of a RocketMQ client), timing each call. ``consume``: one ``LitePullConsumer`` subscribed
to the topic from its first offset (a fresh group, ``pull_batch_size`` 32) polling until ``expected``
messages have arrived or ``end_at`` passes; the rate is counted from the first to the last message.

Protocol with the parent (``benches/broker_bench.py``), as ``loadgen.py``: config JSON as argv[1]; the
worker starts its client (the producer sends one message first: route lookup, connection), prints
``READY``, waits for ``GO <start_at> <end_at>`` (``time.monotonic()``) on stdin, runs, writes latencies
(doubles, µs) to ``lat_path`` and prints one JSON result line.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from array import array
from typing import Any

import loadgen


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


async def produce(cfg: dict[str, Any]) -> dict[str, Any]:
    from rmq.client import Message, Producer

    body = (b"0123456789abcdef" * (cfg["body_size"] // 16 + 1))[: cfg["body_size"]]
    topic = cfg["topic"]
    producer = Producer(cfg["group"], namesrv_addr=cfg["namesrv"], send_msg_timeout_ms=10_000)
    await producer.start()
    ok = ok_total = errors = 0
    samples: dict[str, int] = {}
    lat = array("d")
    cpu = 0.0
    try:
        for _ in range(50):  # first send: route lookup + connection, outside the measurement
            try:
                await producer.send(Message(topic, body, tags="bench"))
                break
            except Exception as exc:
                samples[f"warm-up: {type(exc).__name__}: {str(exc)[:160]}"] = 1
                await asyncio.sleep(0.2)
        print("READY", flush=True)
        start_at, end_at = await loadgen.read_go()
        clock = time.monotonic
        cpu0 = _cpu()

        async def sender() -> None:
            nonlocal ok, ok_total, errors
            while errors <= 1000:
                msg = Message(topic, body, tags="bench")
                t0 = clock()
                if t0 >= end_at:
                    return
                try:
                    await producer.send(msg)
                except Exception as exc:
                    errors += 1
                    key = f"{type(exc).__name__}: {str(exc)[:160]}"
                    samples[key] = samples.get(key, 0) + 1
                    continue
                t1 = clock()
                ok_total += 1
                if start_at <= t1 <= end_at:
                    ok += 1
                    if t0 >= start_at:
                        lat.append((t1 - t0) * 1e6)

        # inflight > 1: the async producer, that many sends outstanding on one Producer.
        await asyncio.gather(*(sender() for _ in range(max(1, int(cfg.get("inflight", 1))))))
        cpu = _cpu() - cpu0
    finally:
        await producer.shutdown()
    if cfg.get("lat_path"):
        with open(cfg["lat_path"], "wb") as f:
            lat.tofile(f)
    return {
        "mode": "produce",
        "ok": ok,
        "ok_total": ok_total,
        "errors": errors,
        "error_samples": samples,
        "cpu": cpu,
    }


async def consume(cfg: dict[str, Any]) -> dict[str, Any]:
    from rmq.client import ConsumeFromWhere, LitePullConsumer

    consumer = LitePullConsumer(
        cfg["group"],
        namesrv_addr=cfg["namesrv"],
        pull_batch_size=32,
        auto_commit=False,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(cfg["topic"], "*")
    await consumer.start()
    expected = int(cfg["expected"])
    msgs = polls = 0
    first = last = 0.0
    lat = array("d")
    cpu = 0.0
    try:
        print("READY", flush=True)
        _start_at, end_at = await loadgen.read_go()
        cpu0 = _cpu()
        clock = time.monotonic
        while msgs < expected:
            now = clock()
            if now >= end_at:
                break
            batch = await consumer.poll(min(1000, max(1, int((end_at - now) * 1000))))
            if batch:
                last = clock()
                if not first:
                    first = now
                msgs += len(batch)
                polls += 1
        cpu = _cpu() - cpu0
    finally:
        await consumer.shutdown()
    if cfg.get("lat_path"):
        with open(cfg["lat_path"], "wb") as f:
            lat.tofile(f)
    return {
        "mode": "pull",
        "ok": polls,
        "ok_total": polls,
        "errors": 0,
        "error_samples": {},
        "msgs": msgs,
        "expected": expected,
        "first_send": first,
        "last_recv": last,
        "cpu": cpu,
    }


def main() -> None:
    cfg = json.loads(sys.argv[1])
    result = loadgen.run(produce(cfg) if cfg["mode"] == "produce" else consume(cfg))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
