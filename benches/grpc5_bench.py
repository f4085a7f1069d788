"""The official RocketMQ 5.x Java client over gRPC: rmq's endpoint beside Apache RocketMQ 5.5.0's proxy, in
one run (issue 30 item 5).

Usage (from the repository root, with the package built and Java 17 + Maven on the PATH)::

    python benches/grpc5_bench.py --broker-cpus 0 --load-cpus 1 --write-results   # ~15 min
    python benches/grpc5_bench.py --seconds 3 --rounds 1 --backlog 20000          # a smoke run, print only
    python benches/grpc5_bench.py --only rmq ...     # one side only: a smoke run of the program, never
                                                     # written to RESULTS.md

What runs (every process is a child of this script, on loopback, stopped on exit), one server at a time:

* rmq: ``python -m rmq.broker`` (its name server embedded, its gRPC endpoint in the same process) on free
  ports; Apache RocketMQ 5.5.0: ``NamesrvStartup`` + ``ProxyStartup -pm local`` (the broker inside the proxy's
  JVM) through ``tests/peers/apache5.py``, with the JVM ``benches/apache_bench.py`` gives Apache's 4.x broker
  (G1 with ``runbroker.sh``'s flags, a 2 GiB heap, the full JIT). Both on a fresh store with 1 GiB CommitLog
  files, ASYNC_FLUSH; the topics (8 queues; Apache's typed NORMAL, as its proxy checks) and every consumer
  group made on the broker beforehand (UPDATE_AND_CREATE_TOPIC / _SUBSCRIPTIONGROUP, as the 5.x client tests
  do), each group's offsets set to 0 so that both servers' POP starts it at the first message. The 5.5.0
  jars come from ``scripts/peers``; a peer that cannot be fetched or started stops the run with its error —
  there is no table without its peer.
* the load: ``benches/java5/rmqbench5/Grpc5Load.java``, the Java client 5.2.0 (``rocketmq-client-java``,
  compiled against the cached jar), the same code against both, TLS off. *send*: ``--inflight``
  asynchronous 1 KiB sends kept in flight on one ``Producer`` (``sendAsync``), ``--warmup`` s unmeasured (a
  fresh server's first round ``--broker-warmup`` more, for Apache's JIT), then the sends answered in
  ``--seconds`` s. *receive+ack*: a backlog of ``--backlog`` 1 KiB messages written over Remoting by
  ``apache_bench.py``'s load (the Java client 4.9.8: fast on both servers, not measured), then
  ``--consumers`` ``SimpleConsumer``\\ s of a new group (a thread each: ``receive`` of up to 32 with 5 s long
  polling, an ``ackAsync`` of every message, all answered before the next receive) receive and ack for
  ``--seconds`` s from their first batch (a row whose backlog ran out first says so), after
  ``--receive-warmup`` s of receive+ack by another group in the same JVM (the JITs warm: with 5 s the
  client's C2 compiler thread was still its busiest thread in the window, 35% of its core, and the client
  spent 72 µs per message where it spends 41 µs warm).

Per row and round, from /proc (``benches/apache_bench.py``'s ``measured``): the server's CPU per message
(user + system over the window: rmq's one process; Apache's proxy (broker inside) plus its name server) and
its share of a core, the load JVM's, the CPU other processes used just before the round and the 1-minute
load average; rows are the round with the median rate of ``--rounds``. Pinning as the other broker
benchmarks: ``--broker-cpus`` for every server process, ``--load-cpus`` for the load JVM
(``benches/pinning.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # the other benches' modules; the repository's tests.peers

from pinning import cpu_sets, pin_sentence, pinned  # noqa: E402, I001

import apache_bench as ab  # noqa: E402
import broker_bench as bb  # noqa: E402

MARKERS = ("<!-- grpc5-bench:begin -->", "<!-- grpc5-bench:end -->")
TITLE = (
    "## Java 5.x client over gRPC: rmq beside Apache RocketMQ 5.5.0's proxy "
    "(`python benches/grpc5_bench.py {args}`, issue 30 item 5)"
)
JAVA5_SRC = HERE / "java5"
TOPIC, BACKLOG_TOPIC, QUEUES, BODY = ab.TOPIC, ab.BACKLOG_TOPIC, ab.QUEUES, ab.BODY
KINDS = ("rmq", "Apache")
SCENARIOS = ("send", "receive+ack")
TARGET = "≥ 2× msgs/s, ≤ 0.5× CPU/msg"


class Java5(ab.Java):
    """Grpc5Load (the 5.x client) in a child JVM, measured by ``apache_bench.measured``."""

    MAIN = "rmqbench5.Grpc5Load"
    last: dict[str, Any] = {}

    def result(self, child: bb.Child, timeout: float) -> dict[str, Any]:
        self.last = super().result(child, timeout)  # measured() keeps no consume errors: they are read here
        return self.last


@dataclass
class Server:
    """One side: where the 5.x client connects, the broker behind it, whose CPU counts."""

    kind: str
    endpoints: str
    broker_addr: str
    namesrv: str
    pids: list[int]
    typed: bool  # topics need their 5.x message type (Apache's proxy checks it)
    stop: Callable[[], None]


RMQ_PROPS: list[str] = []
"""Broker properties of rmq's side from ``--rmq-prop`` (a one-sided run only)."""


def start_rmq(root: Path) -> Server:
    from tests.brokerproc import start_broker

    b = start_broker(
        root,
        *ab.STORE_PROPS,
        "flushDiskType=ASYNC_FLUSH",
        *RMQ_PROPS,
        extra_args=["--log-level", "WARNING"],
    )
    endpoints = f"127.0.0.1:{b.ready['grpc']}"
    return Server("rmq", endpoints, b.broker_addr, b.namesrv_addr, [b.proc.pid], False, lambda: b.stop())


def start_apache(root: Path) -> Server:
    from tests.peers.apache import DISK_RATIOS
    from tests.peers.apache5 import start_apache5

    jvm = [*ab.APACHE_BROKER_JVM, *DISK_RATIOS]
    p = start_apache5(root, *ab.STORE_PROPS, "flushDiskType=ASYNC_FLUSH", jvm=jvm)
    return Server(
        "Apache", p.endpoints, p.broker_addr, p.namesrv_addr, [p.proxy.pid, p.namesrv.pid], True, p.stop
    )


@contextlib.contextmanager
def server(kind: str, root: Path) -> Iterator[Server]:
    from tests.peers.apache5 import create_topic, wait_for_route

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    with pinned(ab.PIN.broker):  # every server process (and each thread it starts) on --broker-cpus
        s = (start_rmq if kind == "rmq" else start_apache)(root)
    ab._STOP.append(s.stop)
    try:
        for topic in (TOPIC, BACKLOG_TOPIC):
            create_topic(s.broker_addr, topic, "NORMAL" if s.typed else None, QUEUES)
            wait_for_route(s.namesrv, topic)
        yield s
    finally:
        s.stop()
        ab._STOP.remove(s.stop)
        shutil.rmtree(root, ignore_errors=True)


def make_group(s: Server, group: str) -> None:
    """The group on the broker, its offset of every backlog queue at 0: rmq's and Apache's POP both start
    there (without an offset Apache's starts a new group at the first message only while that is in
    memory)."""
    from rmq.common.codes import RequestCode, ResponseCode
    from rmq.remoting import create_request
    from rmq.remoting.client import invoke_sync

    from tests.peers.apache5 import create_group

    create_group(s.broker_addr, group)
    for q in range(QUEUES):
        fields = {"consumerGroup": group, "topic": BACKLOG_TOPIC, "queueId": str(q), "commitOffset": "0"}
        resp = invoke_sync(s.broker_addr, create_request(RequestCode.UPDATE_CONSUMER_OFFSET, fields), 5000)
        if resp.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"{s.kind}: offset of {group} queue {q}: {resp.code} {resp.remark!r}")


def one_side(a: argparse.Namespace, java: Java5, filler: ab.Java, kind: str, root: Path) -> dict[str, ab.Run]:
    """The send rounds, the backlog, the receive+ack rounds on one server: the median run of each."""
    ab.log(f"{kind}: starting")
    out: dict[str, ab.Run] = {}
    with server(kind, root) as s:
        load = {"endpoints": s.endpoints, "topic": TOPIC, "inflight": a.inflight, "size": BODY}
        out["send"] = ab.produce_rounds(java, s.pids, a, f"{kind} send", **load)
        total = ab.write_backlog(filler, a, f"{kind} (Java client 4.9.8, Remoting)", s.namesrv, s.broker_addr)
        runs = []
        for i in range(a.repeat):
            group = f"bench5_{i}_{time.time_ns()}"
            for g in (group, group + "_warm"):
                make_group(s, g)
            r = ab.measured(
                java,
                "consume",
                s.pids,
                a.receive_warmup + 600,
                endpoints=s.endpoints,
                topic=BACKLOG_TOPIC,
                group=group,
                warmGroup=group + "_warm",
                warm=a.receive_warmup,
                count=total,
                duration=a.duration,
                consumers=a.consumers,
                batch=32,
            )
            r.problems = dict(java.last.get("errors", {}))
            if java.last.get("exhausted"):
                r.note = f"the backlog ran out {r.msgs / (r.rate or 1):.1f} s into the window"
            ab.log(f"  {kind} receive+ack round {i + 1}: {ab.describe(r)}")
            runs.append(r)
        out["receive+ack"] = ab.median(runs)
    return out


def bench(a: argparse.Namespace) -> list[ab.Row]:
    from tests.peers import apache

    try:
        libs = apache.peer_libs()
    except BaseException as exc:  # pytest.fail outside pytest: say why and stop
        raise SystemExit(
            f"the Apache RocketMQ 5.5.0 peer (or the Java 5.x client) is missing: {exc}"
        ) from None
    for what, path in (("Apache RocketMQ 5.5.0", libs.server5), ("rocketmq-client-java 5.2.0", libs.client5)):
        if not any(path.glob("*.jar")):
            raise SystemExit(f"{what} is not in the peer cache ({path} holds no jar): run scripts/peers")
    classes = apache.compile_drivers(libs, JAVA5_SRC, libs.client5)
    store_root = Path(tempfile.mkdtemp(prefix="rmq-grpc5-bench-", dir=a.store_root))
    (store_root / "java").mkdir()
    java = Java5(classes, libs.client5, store_root / "java")
    filler = ab.Java(apache.compile_drivers(libs), libs.client, store_root / "java")
    got: dict[str, dict[str, ab.Run]] = {}
    try:
        for kind in a.only:
            got[kind] = one_side(a, java, filler, kind, store_root / kind)
    finally:
        shutil.rmtree(store_root, ignore_errors=True)
    empty = ab.Run()
    rows = []
    for scenario in SCENARIOS:
        row = ab.Row(scenario, "ASYNC_FLUSH", got.get("rmq", {}).get(scenario, empty), empty)
        row.apache = got.get("Apache", {}).get(scenario, empty)
        row.target = TARGET
        ratio, cpu = row.ratio, row.cpu_ratio
        row.met = ratio is not None and cpu is not None and ratio >= 2.0 and cpu <= 0.5
        rows.append(row)
    return rows


# --- report ------------------------------------------------------------------------------------------------


def fmt_cpu(us: float | None, pct: float | None) -> str:
    if us is None:
        return "n/a"
    return f"{us:.1f} µs, {pct or 0:.0f}%"


BUSY_PCT = 90.0
"""A side using this share of its CPUs (its pinned set, else the machine's) or more is a row's limit."""


def limits(r: ab.Run) -> str:
    """Which side was busy enough to be what limited the rate: server, load, both or neither."""

    def busy(pct: float | None, cpus: set[int] | None) -> bool:
        return pct is not None and pct >= BUSY_PCT * (len(cpus) if cpus else os.cpu_count() or 1)

    server, load = busy(r.server_pct, ab.PIN.broker), busy(r.gen_pct, ab.PIN.load)
    if r.rate is None:
        return ""
    return "both" if server and load else "server" if server else "**load**" if load else "neither"


def table(rows: list[ab.Row]) -> list[str]:
    out = [
        "| scenario | server | msgs/s | p50 / p99 send | server CPU/msg, % of a core "
        "| load JVM CPU/msg, % of a core (busiest thread) | busy side | other load before | notes |",
        "|---|---|---:|---|---|---|---|---|---|",
    ]
    for row in rows:
        for kind, r in (("rmq", row.rmq), ("Apache 5.5.0 proxy", row.apache)):
            lat = f"{ab.fmt_us(r.p50)} / {ab.fmt_us(r.p99)}" if r.p50 is not None else ""
            gen = fmt_cpu(r.gen_cpu_us, r.gen_pct)
            if r.gen_cpu_us is not None:
                gen += f" ({r.gen_thread} {r.gen_thread_pct or 0:.0f}%)"
            bg = f"{r.background:.0f}%, load {r.loadavg:.1f}" if r.background is not None else "n/a"
            notes = [r.note] if r.note else []
            if r.problems:
                notes.append("errors: " + ", ".join(f"{k} ×{v}" for k, v in r.problems.items()))
            out.append(
                f"| {row.scenario} | {kind} | {ab.fmt_rate(r.rate)} | {lat} "
                f"| {fmt_cpu(r.server_cpu_us, r.server_pct)} | {gen} | {limits(r)} | {bg} "
                f"| {'; '.join(notes)} |"
            )
    return out


def ratios(rows: list[ab.Row]) -> list[str]:
    out = [
        "| scenario | rmq ÷ Apache msgs/s | rmq ÷ Apache server CPU/msg | target | met |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = f"{r.ratio:.2f}×" if r.ratio is not None else "n/a"
        cpu = f"{r.cpu_ratio:.2f}×" if r.cpu_ratio is not None else "n/a"
        met = (
            "n/a (one side only)"
            if r.ratio is None or r.cpu_ratio is None
            else "**met**"
            if r.met
            else "**missed**"
        )
        out.append(f"| {r.scenario} | {ratio} | {cpu} | {r.target} | {met} |")
    return out


def section(rows: list[ab.Row], a: argparse.Namespace, args: str, elapsed: float) -> str:
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        TITLE.format(args=args),
        "",
        f"Measured {now} on this machine: {bb.machine_info()}; whole run {elapsed:.0f} s. The official Java "
        "client `rocketmq-client-java` 5.2.0 (gRPC, TLS off; `benches/java5/rmqbench5/Grpc5Load.java`) "
        "drives rmq (`python -m rmq.broker`, its gRPC endpoint in the broker's process) and Apache RocketMQ "
        "5.5.0 (name server + `ProxyStartup -pm local`, the broker inside the proxy's JVM: G1, 2 GiB heap, "
        "full JIT), one server at a time, ASYNC_FLUSH, a topic of 8 queues made beforehand (Apache's typed "
        f"NORMAL), 1 KiB bodies. *send*: {a.inflight} asynchronous sends in flight on one `Producer`, "
        f"windows of {a.duration:g} s after {a.warmup:g} s warm-up (a fresh server's first round "
        f"{a.warmup + a.broker_warmup:g} s). *receive+ack*: a backlog of {a.backlog:,} messages (written "
        "over Remoting by the Java client 4.9.8, unmeasured), received by "
        f"{a.consumers} `SimpleConsumer`s of a new group (made beforehand, offsets at 0), one thread each: "
        "`receive` of up to 32 messages (5 s long polling, 60 s invisible), an `ackAsync` per message, all "
        f"answered before the next receive; the messages acked in {a.duration:g} s from the first batch, "
        "after "
        f"{a.receive_warmup:g} s of receive+ack by another group in the same JVM. Medians of {a.repeat} "
        f"round{'s' if a.repeat > 1 else ''} (each run's rate in *notes*).",
        "",
        pin_sentence(ab.PIN.broker, ab.PIN.load, "the server processes", "the load JVM")
        + "- *Server CPU/msg*: user + system CPU from /proc over the window divided by the messages — rmq's "
        "one process (name server, broker and gRPC endpoint); Apache's proxy JVM (broker inside) plus its "
        "name server — and their CPU as a share of one core. *Load JVM*: the client's CPU per message and "
        "share of a core, with its busiest thread. *Other load before*: CPU used by other processes just "
        "before the round (% of the machine) and the 1-minute load average. *Busy side*: the side(s) using "
        f"{BUSY_PCT:.0f}% or more of their CPUs over the window, what limited the rate (**load**: the "
        "client, so that row does not compare the servers).",
        "",
        *table(rows),
        "",
        *ratios(rows),
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(
        description="Java 5.x client over gRPC: rmq beside Apache 5.5.0 (see docstring)"
    )
    ap.add_argument(
        "--seconds",
        dest="duration",
        metavar="S",
        type=float,
        default=10.0,
        help="measured seconds of a send round (10)",
    )
    ap.add_argument(
        "--warmup", type=float, default=10.0, help="unmeasured seconds before each send round (10)"
    )
    ap.add_argument(
        "--broker-warmup",
        type=float,
        default=45.0,
        help="extra warm-up of a fresh server's first round (45: Apache's JIT warm)",
    )
    ap.add_argument(
        "--rounds",
        dest="repeat",
        metavar="N",
        type=int,
        default=3,
        help="rounds per row, the median reported (3)",
    )
    ap.add_argument("--inflight", type=int, default=64, help="asynchronous sends kept in flight (64)")
    ap.add_argument(
        "--backlog", type=int, default=400_000, help="messages the receive+ack rounds drain (400,000)"
    )
    ap.add_argument("--consumers", type=int, default=4, help="SimpleConsumers (a thread each) receiving")
    ap.add_argument(
        "--receive-warmup",
        type=float,
        default=20.0,
        help="seconds of unmeasured receive+ack before a drain (20: the client's JIT done)",
    )
    ap.add_argument(
        "--only", default="rmq,Apache", help="comma list of rmq, Apache (one side: never written)"
    )
    ap.add_argument("--store-root", default=None, help="parent directory of the temporary stores")
    ap.add_argument(
        "--rmq-prop",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker property of rmq's side (one-sided runs only), e.g. tls.test.mode.enable=false",
    )
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    ap.add_argument("--write-results", action="store_true", help="replace this bench's section of --out")
    ap.add_argument("--broker-cpus", default=None, help="CPU list for every server process (e.g. 0)")
    ap.add_argument("--load-cpus", default=None, help="CPU list for the load JVM (e.g. 1)")
    a = ap.parse_args()
    a.only = [k for k in KINDS if k in a.only.split(",")]
    a.threads, a.producers = a.inflight, 1  # the backlog's writer (apache_bench.produce_load)
    if not a.only:
        ap.error(f"--only: choose from {', '.join(KINDS)}")
    if a.write_results and len(a.only) < len(KINDS):
        ap.error("--write-results needs both servers: a one-sided table is never written")
    if a.rmq_prop and a.write_results:
        ap.error("--rmq-prop is for one-sided comparisons: the table is measured on rmq's defaults")
    RMQ_PROPS[:] = a.rmq_prop
    try:
        ab.PIN.broker, ab.PIN.load = cpu_sets(a.broker_cpus, a.load_cpus)
    except ValueError as e:
        ap.error(str(e))
    if shutil.which("java") is None or shutil.which("javac") is None:
        raise SystemExit("java and javac (JDK 17) are needed: Apache's proxy and the load are Java")
    shown = " ".join(
        x
        for x in (
            f"--seconds {a.duration:g}",
            f"--rounds {a.repeat}",
            f"--broker-cpus {a.broker_cpus}" if a.broker_cpus else "",
            f"--load-cpus {a.load_cpus}" if a.load_cpus else "",
        )
        if x
    )
    t0 = time.monotonic()
    rows = ab.run_all(lambda: bench(a))
    text = section(rows, a, shown, time.monotonic() - t0)
    print(text)
    if a.write_results:
        ab.write_section(a.out, text, *MARKERS)
        ab.log(f"wrote the grpc5 section of {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
