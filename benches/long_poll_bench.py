"""Consumers that keep up: a producer at a fixed rate and a push consumer at the end of the queues, so that
nearly every pull is held for long polling and woken by a message (issue 31 item 4). rmq beside Apache
RocketMQ 4.9.7 in one run.

Usage (from the repository root, with the package built; Java 17 for Apache's broker)::

    python benches/long_poll_bench.py --broker-cpus 0 --load-cpus 1 --write-results   # ~6 min
    python benches/long_poll_bench.py --rates 2000 --rounds 1 --seconds 5      # a smoke run, print only

What runs, one broker at a time (rmq: ``python -m rmq.broker``; Apache: its name server and broker from
``scripts/peers``, started as ``benches/apache_bench.py`` starts them), ASYNC_FLUSH, a topic of 8 queues:
rmq's asyncio client in this process (pinned to ``--load-cpus``) — a ``PushConsumer`` of a new group from
the last offset, and a ``Producer`` sending 1 KiB messages one at a time at ``--rates`` messages per second
(paced in 2 ms steps) for ``--seconds`` after 3 s of the same (every pull path warm; on a fresh broker,
its first rate after ``--broker-warmup`` s, for Apache's JIT). Per round: messages
consumed, the broker's CPU per message (user + system of its processes over the window: the message's send
and its consumption, everything the broker did), the load's CPU share, and the delivery latency (the
consumer's receive time minus the message's born time: both clocks are this machine's). On rmq also the
pulls the network thread answered (``fastPullTaken``) and how many messages they carried. Rows are the
round with the median broker CPU per message of ``--rounds``, the sides alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import apache_bench as ab  # noqa: E402
from pinning import cpu_sets, pin_sentence, pinned  # noqa: E402

from tests.fastsend import fast_send_stats  # noqa: E402

BEGIN = "<!-- long-poll-bench:begin -->"
END = "<!-- long-poll-bench:end -->"
TOPIC = ab.TOPIC
WARMUP_S = 3.0


@dataclass
class Round:
    kind: str
    rate: int
    sent: int = 0
    consumed: int = 0
    seconds: float = 0.0
    broker_cpu: float = 0.0
    load_cpu: float = 0.0
    fast_pulls: int | None = None
    fast_messages: int | None = None
    latencies_ms: list[float] = field(default_factory=list)
    other: float = 0.0

    @property
    def cpu_per_msg_us(self) -> float:
        return self.broker_cpu / max(1, self.consumed) * 1e6

    def latency(self, q: float) -> float:
        v = sorted(self.latencies_ms)
        return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


async def one_round(b: ab.Brokers, rate: int, seconds: float, warmup: float, group: str) -> Round:
    from rmq.client import ConsumeConcurrentlyStatus, Message, Producer, PushConsumer
    from rmq.client.heartbeat import ConsumeFromWhere

    r = Round(b.kind, rate)
    counting = False

    async def on(msgs, _ctx):  # type: ignore[no-untyped-def]
        now_ms = time.time() * 1000
        if counting:
            r.consumed += len(msgs)
            r.latencies_ms.extend(now_ms - m.born_timestamp for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    last = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consumer = PushConsumer(group, namesrv_addr=b.namesrv, consume_from_where=last)
    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(on)
    producer = Producer(f"{group}_P", namesrv_addr=b.namesrv)
    body = b"x" * ab.BODY

    async def paced(secs: float) -> int:
        sent, t0 = 0, time.monotonic()
        while (elapsed := time.monotonic() - t0) < secs:
            while sent < int(elapsed * rate):
                await producer.send(Message(TOPIC, body))
                sent += 1
            await asyncio.sleep(0.002)
        return sent

    async with consumer, producer:
        await producer.send(Message(TOPIC, body))
        await asyncio.sleep(2.0)  # the consumer's rebalance: every queue pulled
        await paced(warmup)
        await asyncio.sleep(0.5)
        r.other = await asyncio.to_thread(ab.other_load, b.pids, 0.0, 100.0)
        stats0 = await asyncio.to_thread(fast_send_stats, b.master) if b.kind == "rmq" else None
        counting = True
        c0, l0, t0 = ab.cpu_of(b.pids), ab.cpu_of([os.getpid()]), time.monotonic()
        r.sent = await paced(seconds)
        deadline = time.monotonic() + 10
        while r.consumed < r.sent and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        r.seconds = time.monotonic() - t0
        r.broker_cpu, r.load_cpu = ab.cpu_of(b.pids) - c0, ab.cpu_of([os.getpid()]) - l0
        counting = False
        if stats0 is not None:
            stats1 = await asyncio.to_thread(fast_send_stats, b.master)
            r.fast_pulls = stats1["pull_taken"] - stats0["pull_taken"]
            r.fast_messages = stats1["pull_messages"] - stats0["pull_messages"]
    if r.consumed < r.sent:
        raise SystemExit(f"{b.kind}: {r.consumed} of {r.sent} messages consumed")
    return r


def bench(a: argparse.Namespace) -> dict[tuple[str, int], list[Round]]:
    out: dict[tuple[str, int], list[Round]] = {}
    root = Path(tempfile.mkdtemp(prefix="rmq-long-poll-", dir=a.store_root))
    order = ["rmq", "Apache"]
    for i in range(a.rounds):
        for kind in order if i % 2 == 0 else order[::-1]:
            with ab.brokers(kind, root / kind, "ASYNC_FLUSH") as b:
                for n, rate in enumerate(a.rates):
                    # A fresh broker's first rate warms up longer: Apache's JIT compiles its paths.
                    warmup = a.broker_warmup if n == 0 else WARMUP_S
                    with pinned(ab.PIN.load):
                        r = asyncio.run(one_round(b, rate, a.seconds, warmup, f"LP_{kind}_{rate}_{i}"))
                    ab.log(
                        f"{kind} {rate}/s round {i + 1}: {r.consumed:,} consumed, broker"
                        f" {r.cpu_per_msg_us:.1f} µs/msg, latency p50 {r.latency(0.5):.1f} ms"
                    )
                    out.setdefault((kind, rate), []).append(r)
    return out


def median(rounds: list[Round]) -> Round:
    return sorted(rounds, key=lambda r: r.cpu_per_msg_us)[len(rounds) // 2]


def section(res: dict[tuple[str, int], list[Round]], a: argparse.Namespace, elapsed: float) -> str:
    when = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    lines = [
        "## Consumers that keep up: long polling, rmq beside Apache RocketMQ 4.9.7"
        " (`python benches/long_poll_bench.py`, issue 31 item 4)",
        "",
        f"Measured {when} on this machine: nproc {os.cpu_count()}, {cpu}, Python {platform.python_version()};"
        f" whole run {elapsed:.0f} s. rmq's asyncio client in one process: a `PushConsumer` of a new group"
        " from the last offset and a `Producer` sending 1 KiB messages one at a time at the row's rate"
        f" (paced in 2 ms steps) for {a.seconds:g} s after {WARMUP_S:g} s of the same ({a.broker_warmup:g} s"
        " for a fresh broker's first rate: Apache's JIT), to a topic of 8 queues, ASYNC_FLUSH. The consumer"
        " is always at the end of its queues: nearly every pull is held for long polling and woken by a"
        " message. Rows: the round with the median broker CPU per message"
        f" of {a.rounds} (every round's in *runs*).",
        "",
        pin_sentence(ab.PIN.broker, ab.PIN.load, "the brokers", "the load").rstrip("\n"),
        "- *Broker CPU/msg*: user + system CPU of the broker's processes (rmq: one process, name server"
        " included; Apache: broker and name server) over the window ÷ messages consumed: each message's send"
        " and its consumption, and everything else the broker did meanwhile. *Delivery*: the consumer's"
        " receive time minus the message's born time (one machine, one clock). *Network thread*: on rmq, the"
        " pulls the network thread answered in the window and the messages they carried.",
        "",
        "| rate | broker | consumed/s | broker CPU/msg, share of a core | load share of a core"
        " | delivery p50 / p99 | network thread: pulls (messages) | other load | runs (broker CPU/msg) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for rate in a.rates:
        for kind in ("rmq", "Apache"):
            runs = res.get((kind, rate))
            if not runs:
                continue
            m = median(runs)
            fast = "n/a" if m.fast_pulls is None else f"{m.fast_pulls:,} ({m.fast_messages:,})"
            lines.append(
                f"| {rate:,}/s | {kind} | {m.consumed / m.seconds:,.0f} | {m.cpu_per_msg_us:.1f} µs,"
                f" {100 * m.broker_cpu / m.seconds:.0f}% | {100 * m.load_cpu / m.seconds:.0f}% |"
                f" {m.latency(0.5):.1f} / {m.latency(0.99):.1f} ms | {fast} | {m.other:.0f}% |"
                f" {' / '.join(f'{r.cpu_per_msg_us:.1f}' for r in runs)} µs |"
            )
    lines.append("")
    for rate in a.rates:
        r, p = res.get(("rmq", rate)), res.get(("Apache", rate))
        if r and p:
            ratio = median(r).cpu_per_msg_us / median(p).cpu_per_msg_us
            lines.append(f"- {rate:,}/s: rmq's broker CPU per message is {ratio:.2f}× Apache's.")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="2000,5000", help="producer rates, messages/s (2000,5000)")
    ap.add_argument("--seconds", type=float, default=15.0, help="measured seconds per round (15)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per side and rate (3)")
    ap.add_argument(
        "--broker-warmup",
        type=float,
        default=20.0,
        help="unmeasured seconds at the first rate on each fresh broker (20: Apache's JIT)",
    )
    ap.add_argument("--store-root", default=None, help="parent directory of the temporary stores")
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    ap.add_argument("--write-results", action="store_true", help="replace this bench's section of --out")
    ap.add_argument("--broker-cpus", default=None, help="CPU list for the brokers (e.g. 0)")
    ap.add_argument("--load-cpus", default=None, help="CPU list for the load (e.g. 1)")
    a = ap.parse_args()
    a.rates = [int(x) for x in a.rates.split(",") if x.strip()]
    try:
        ab.PIN.broker, ab.PIN.load = cpu_sets(a.broker_cpus, a.load_cpus)
    except ValueError as e:
        ap.error(str(e))
    t0 = time.monotonic()
    res = ab.run_all(lambda: bench(a))
    text = section(res, a, time.monotonic() - t0)
    print(text)
    if a.write_results:
        ab.write_section(a.out, text, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
