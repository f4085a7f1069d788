"""Broker CPU per 1 KiB send: the official C++ client (PyPI ``rocketmq``) against rmq's own client, at the
same concurrency, with how many of the sends the network thread's fast path answered.

Usage (from the repository root, with the package built)::

    python benches/send_cpu.py                       # 8 producers each, 3 runs per client, 4 s windows
    python benches/send_cpu.py --producers 8 --repeat 3 --duration 4 --flush ASYNC_FLUSH

One broker (``python -m rmq.broker``, embedded name server, fresh store, topic ``BenchTopic`` with 8
queues), then runs alternating between the clients (C++, rmq, C++, rmq, ...) so both see the same
machine. Each run uses ``benches/broker_bench.py``'s workers (``cpp_load.py``, ``rmq_client_load.py``:
one producer per process, ``send_sync`` of a 1 KiB message in a loop): the broker's CPU time (utime +
stime of the whole process from /proc/<pid>/stat) over the run, divided by the sends answered; the
broker's ``fastSend*`` counters (GET_BROKER_RUNTIME_INFO) over the same run; and the machine's load
average when the run started (others may share the machine). Prints one row per run and the median per
client. Nothing is written to RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import broker_bench as bb  # noqa: E402

PRODUCE = {"C++ client": bb.cpp_produce, "rmq client": bb.rmq_produce}


def fast_counters(addr: str) -> tuple[int, int, int]:
    """(send requests taken by the fast path, send requests declined, network thread wake-ups) so far."""
    import orjson

    r = bb._invoke(addr, 28, {})  # GET_BROKER_RUNTIME_INFO
    table = orjson.loads(r.body)["table"]
    return (
        int(table.get("fastSendTaken", 0)),
        int(table.get("fastSendDeclined", 0)),
        int(table.get("netThreadWakeups", 0)),
    )


def per_wakeup(row: tuple[str, int, float, float, float, int, int, int]) -> float:
    """Send requests the fast path answered per wake-up of the network thread over the run (its wake-ups
    for the heartbeats and route queries of the run are counted too, so this is a lower bound)."""
    return row[5] / row[7] if row[7] else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--producers", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duration", type=float, default=4.0, help="measured seconds per run")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--flush", default="ASYNC_FLUSH", choices=("ASYNC_FLUSH", "SYNC_FLUSH"))
    ap.add_argument("--store-root", default=None)
    ap.add_argument(
        "--rmq-also",
        default="",
        metavar="N,...",
        help="also rmq's client with these numbers of producers (broker CPU per send at other shares of "
        "a wake-up)",
    )
    a = ap.parse_args()
    clients = [(f"{name}, {a.producers} producers", fn, a.producers) for name, fn in PRODUCE.items()]
    for n in filter(None, a.rmq_also.split(",")):
        clients.append((f"rmq client, {int(n)} producers", bb.rmq_produce, int(n)))
    why = bb.cpp_missing()
    if why is not None:
        sys.exit(f"cannot compare with the C++ client: {why}")

    store = Path(tempfile.mkdtemp(prefix="rmq-send-cpu-", dir=a.store_root))
    broker = bb.start_broker(store, a.flush)
    rows: list[tuple[str, int, float, float, float, int, int, int]] = []
    try:
        bb.create_topic(broker.broker_addr, broker.namesrv_addr, bb.TOPIC, bb.QUEUES)
        for run in range(a.repeat):
            for client, produce, producers in clients:
                load = os.getloadavg()[0]
                taken0, declined0, woke0 = fast_counters(broker.broker_addr)
                m = produce(broker.namesrv_addr, producers, a.warmup, a.duration, broker.pid)
                taken1, declined1, woke1 = fast_counters(broker.broker_addr)
                if m.errors:
                    bb.log(f"{client} run {run + 1}: {m.errors} errors {m.error_samples}")
                row = (
                    client,
                    m.requests,
                    m.rate or 0.0,
                    m.server_cpu_us or 0.0,
                    load,
                    taken1 - taken0,
                    declined1 - declined0,
                    woke1 - woke0,
                )
                rows.append(row)
                bb.log(
                    f"{client} run {run + 1}: {row[1]} sends, {row[2]:,.0f}/s, broker {row[3]:.1f} µs/send, "
                    f"load {row[4]:.2f}, fast path took {row[5]} declined {row[6]}, "
                    f"{per_wakeup(row):.2f} sends per network-thread wake-up"
                )
    finally:
        broker.child.stop(timeout=60)
        shutil.rmtree(store, ignore_errors=True)

    print(
        f"| client ({a.flush}) | run | sends | sends/s | broker CPU/send | "
        "load avg (1 min) | fast path taken / declined | sends per wake-up | broker CPU per wake-up |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for client, _, _ in clients:
        mine = [r for r in rows if r[0] == client]
        for i, r in enumerate(mine):
            print(
                f"| {client} | {i + 1} | {r[1]} | {r[2]:,.0f} | {r[3]:.1f} µs | {r[4]:.2f} "
                f"| {r[5]} / {r[6]} | {per_wakeup(r):.2f} | {r[3] * per_wakeup(r):.1f} µs |"
            )
        med = statistics.median(r[3] for r in mine)
        print(
            f"| {client} | median | | {statistics.median(r[2] for r in mine):,.0f} | **{med:.1f} µs** | | "
            f"| {statistics.median(per_wakeup(r) for r in mine):.2f} "
            f"| {statistics.median(r[3] * per_wakeup(r) for r in mine):.1f} µs |"
        )


if __name__ == "__main__":
    main()
