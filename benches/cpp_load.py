"""C++ client load: one producer of PyPI ``rocketmq`` (ctypes around the official C++ client) per process,
``send_sync`` of a ``body_size`` message in a loop, timing each call with ``time.perf_counter``.

One process per producer so the GIL does not serialize the producers (the C++ call itself releases it, but
the few µs of Python around it would not). The C++ client sends SEND_MESSAGE (code 10, V1 header keys)
after looking the topic up in the name server.

Protocol with the parent (``benches/broker_bench.py``), as ``loadgen.py``: config JSON as argv[1]; the
worker starts its producer, sends one message (route lookup, connection), prints ``READY``, waits for
``GO <start_at> <end_at>`` (``time.monotonic()``), sends until ``end_at``, writes its latencies (array of
doubles, µs, for sends started inside the window) to ``lat_path`` and prints one JSON result line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from array import array
from typing import Any


def _cpu() -> float:
    """CPU seconds (user + system, all threads) used by this process so far."""
    t = os.times()
    return t.user + t.system


def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    from rocketmq.client import Message, Producer

    producer = Producer(cfg["group"], timeout=int(cfg.get("send_timeout_ms", 10000)))
    producer.set_namesrv_addr(cfg["namesrv"])
    producer.start()
    body = (b"0123456789abcdef" * (cfg["body_size"] // 16 + 1))[: cfg["body_size"]]
    topic = cfg["topic"]
    reuse = bool(cfg.get("reuse_message", False))

    def make() -> Any:
        msg = Message(topic)
        msg.set_tags("bench")
        msg.set_body(body)
        return msg

    ok = errors = ok_total = 0
    cpu = start_at = end_at = 0.0
    error_samples: dict[str, int] = {}
    lat = array("d")
    try:
        # First send: route lookup + connection, outside the measurement.
        for _ in range(50):
            try:
                producer.send_sync(make())
                break
            except Exception as exc:  # route not yet visible in the name server
                error_samples[f"warm-up: {type(exc).__name__}: {str(exc)[:160]}"] = 1
                time.sleep(0.2)
        print("READY", flush=True)
        line = sys.stdin.readline().split()
        if len(line) != 3 or line[0] != "GO":
            raise SystemExit(f"expected GO line, got {line!r}")
        start_at, end_at = float(line[1]), float(line[2])
        cpu0 = _cpu()
        clock = time.perf_counter  # CLOCK_MONOTONIC on Linux, as time.monotonic
        msg = make()
        while True:
            if not reuse:
                msg = make()
            t0 = clock()
            if t0 >= end_at:
                break
            try:
                producer.send_sync(msg)
            except Exception as exc:
                errors += 1
                key = f"{type(exc).__name__}: {str(exc)[:160]}"
                error_samples[key] = error_samples.get(key, 0) + 1
                if errors > 1000:
                    break
                continue
            t1 = clock()
            ok_total += 1
            if start_at <= t1 <= end_at:
                ok += 1
                if t0 >= start_at:
                    lat.append((t1 - t0) * 1e6)
        cpu = _cpu() - cpu0
    finally:
        producer.shutdown()
    if cfg.get("lat_path"):
        with open(cfg["lat_path"], "wb") as f:
            lat.tofile(f)
    return {
        "mode": "cpp",
        "ok": ok,
        "ok_total": ok_total,
        "errors": errors,
        "error_samples": error_samples,
        "window": [start_at, end_at],
        "cpu": cpu,
    }


def main() -> None:
    cfg = json.loads(sys.argv[1])
    print(json.dumps(worker(cfg)), flush=True)


if __name__ == "__main__":
    main()
