"""rmq beside Apache RocketMQ, driven by the same Java client code in one run (issue 14 item 3, issue 15
item 5).

Usage (from the repository root, with the package built and Java 17 + Maven on the PATH)::

    python benches/apache_bench.py                 # full run (~10 min), rewrites the apache section of
                                                   # benches/RESULTS.md
    python benches/apache_bench.py --quick         # 3 s windows, one run per row, a smaller backlog
    python benches/apache_bench.py --no-write      # print only
    python benches/apache_bench.py --only async,sync,consume,sync-master --threads 64 --producers 1

What runs (every process is a child of this script, on loopback, stopped on exit):

* the brokers, one pair at a time, each on a fresh store under ``--store-root``, both with 1 GiB CommitLog
  files and 6 MB ConsumeQueue files and the flush type of the row: rmq as ``python -m rmq.broker`` (its
  name server embedded), Apache RocketMQ 4.9.7 (the newest 4.x broker on Maven Central) as
  ``NamesrvStartup`` + ``BrokerStartup`` through ``tests/peers/apache.py`` with a JVM sized for this
  machine (``APACHE_BROKER_JVM``: G1 and the flags of Apache's ``runbroker.sh``, a 2 GiB heap; the full
  JIT). The peer's jars come from ``scripts/peers`` (Maven Central); a peer that cannot be fetched or
  started stops the run with its error — there is no row without its peer.
* the load: ``tests/peers/java/src/rmqpeer/BenchLoad.java``, the Java client 4.9.8, the same code against
  both brokers. Produce: like Apache's benchmark ``Producer``, ``--threads`` threads (64) each doing a
  synchronous ``send`` of 1 KiB in a loop on one ``DefaultMQProducer`` (``--producers`` instances), a
  ``--warmup`` unmeasured (a fresh broker's first run ``--broker-warmup`` more: Apache's JIT needs
  them), then the sends answered SEND_OK in a ``--duration`` window; latency is send to answer for the
  sends started in the window. Consume: a backlog of ``--backlog`` messages written by
  the same program (unmeasured), then drained by a ``DefaultMQPushConsumer`` (Apache's benchmark
  ``Consumer``) and by a ``DefaultLitePullConsumer`` (``--consumer``), each of a new group from the first
  offset: first message to last, after one unmeasured drain by another group in the same JVM (the
  client's and the broker's pull paths compiled by their JITs).
* SYNC_MASTER (issue 15): a master (``brokerRole=SYNC_MASTER``, ASYNC_FLUSH) and a slave
  (``brokerRole=SLAVE``, ``brokerId=1``) on this machine, rmq's pair then Apache's, the same produce load;
  each send is answered once the slave has it. During the window a thread asks the master, the slave and
  the master again for GET_BROKER_RUNTIME_INFO every ``LAG_EVERY`` s: the slave's replication lag lies
  between the master's first ``commitLogMaxOffset`` minus the slave's and its second minus the slave's
  (both reported; KiB, and messages of the row's average record size).

Per row, from /proc: broker CPU per message (user + system of the broker process over the window —
for Apache the broker plus its name server, since rmq's process holds its name server too; for
SYNC_MASTER master plus slave); the load generator's CPU per message, the share of a core the JVM used
and its busiest thread (it competes with the brokers for this machine's cores: above ``GEN_BOUND_PCT`` %
of all cores, or one thread above ``GEN_THREAD_BOUND_PCT`` % of a core, the row is marked
*generator-bound*); the CPU use of other processes just before the run and the 1-minute load average
(rows above ``PROVISIONAL_ABOVE`` % are provisional); and the share of CPU time the hypervisor stole
during it. Each figure is the run with the median rate of ``--repeat`` runs. The ratio table adds the
ratio of rates to expect when the machine's CPU is the limit: Apache's broker + client CPU per message
over rmq's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as _dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import broker_bench as bb  # noqa: E402
from pinning import cpu_sets, pin_sentence, pinned  # noqa: E402

BEGIN = "<!-- apache-bench:begin -->"
END = "<!-- apache-bench:end -->"
TOPIC = "BenchTopic"
BACKLOG_TOPIC = "BenchBacklog"
QUEUES = 8
BODY = 1024
COMMITLOG_FILE = 1 << 30
CONSUMEQUEUE_FILE = 300_000 * 20
STORE_PROPS = (f"mappedFileSizeCommitLog={COMMITLOG_FILE}", f"mappedFileSizeConsumeQueue={CONSUMEQUEUE_FILE}")
LAG_EVERY = 0.1
GEN_BOUND_PCT = 90.0
"""The generator JVM above this share of all the machine's cores may be what limits the row."""
GEN_THREAD_BOUND_PCT = 70.0
"""One generator thread above this share of a core (a client's single pull or selector thread) may be
what limits the row."""
PROVISIONAL_ABOVE = bb.PROVISIONAL_ABOVE

# Apache's runbroker.sh (JDK 9+): G1 with its region size, reserve and occupancy; heap sized for a 24 GiB
# machine shared with the other broker and the load (runbroker.sh's 8 GiB is for a dedicated host).
APACHE_BROKER_JVM = [
    "-server",
    "-Xms2g",
    "-Xmx2g",
    "-XX:MaxDirectMemorySize=2g",
    "-XX:+UseG1GC",
    "-XX:G1HeapRegionSize=16m",
    "-XX:G1ReservePercent=25",
    "-XX:InitiatingHeapOccupancyPercent=30",
    "-XX:SoftRefLRUPolicyMSPerMB=0",
    "-XX:-OmitStackTraceInFastThrow",
    "-XX:-UseLargePages",
]
# The load generator: full JIT (C1-only would make the client the bottleneck), a heap that never GCs hard.
GEN_JVM = ["-server", "-Xms512m", "-Xmx512m", "-XX:+UseParallelGC", "-Xss512k"]

T = TypeVar("T")
_STOP: list[Callable[[], None]] = []
QUIET = [0.0, 10.0]  # --wait-quiet S, --quiet-below PCT


@dataclass
class Pin:
    """``--broker-cpus`` / ``--load-cpus``: the CPU sets the brokers and the load JVM are started on (None:
    wherever the scheduler puts them)."""

    broker: set[int] | None = None
    load: set[int] | None = None


PIN = Pin()


def log(msg: str) -> None:
    print(f"[apache-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- measures ----------------------------------------------------------------------------------------------


@dataclass
class Run:
    rate: float | None = None  # msgs/s
    p50: float | None = None  # µs
    p99: float | None = None
    msgs: int = 0
    server_cpu_us: float | None = None  # broker CPU per message (all the row's broker processes)
    gen_cpu_us: float | None = None  # load generator JVM CPU per message
    gen_pct: float | None = None  # load generator JVM: its CPU over the window, % of one core
    server_pct: float | None = None  # the row's broker processes: their CPU over the window, % of one core
    gen_thread: str = ""  # the generator's busiest thread over the window
    gen_thread_pct: float | None = None  # ...its CPU, % of one core
    background: float | None = None  # other CPU use just before the run, % of the machine
    loadavg: float | None = None
    steal: float | None = None  # % of the machine's CPU time stolen by the hypervisor in the window
    failed: int = 0
    problems: dict[str, int] = field(default_factory=dict)  # statuses other than SEND_OK, exceptions
    # Bytes the slave's CommitLog ends behind the master's, each as (at least, at most): the slave is read
    # between two reads of the master, so its lag lies between the first's and the second's difference.
    lag_p50: tuple[float, float] | None = None
    lag_max: tuple[float, float] | None = None
    lag_samples: int = 0
    record_bytes: float | None = None  # CommitLog bytes per message over the window (SYNC_MASTER rows)
    note: str = ""


def gen_bound(r: Run) -> str | None:
    cores = os.cpu_count() or 1
    if r.gen_pct is not None and r.gen_pct > GEN_BOUND_PCT * cores:
        return f"the generator JVM used {r.gen_pct / 100:.2f} of the machine's {cores} cores"
    if r.gen_thread_pct is not None and r.gen_thread_pct > GEN_THREAD_BOUND_PCT:
        return f"its thread {r.gen_thread!r} used {r.gen_thread_pct:.0f}% of a core"
    return None


class Java:
    """The BenchLoad program in a child JVM; its stdout lines are read through ``broker_bench.Child``."""

    MAIN = "rmqpeer.BenchLoad"

    def __init__(self, classes: Path, libs: Path, home: Path) -> None:
        self.classes, self.libs, self.home = classes, libs, home

    def start(self, mode: str, **kv: object) -> bb.Child:
        from tests.peers import apache

        home = self.home
        argv = [
            "java",
            *GEN_JVM,
            f"-Drocketmq.client.logRoot={home / 'client-logs'}",
            f"-Duser.home={home}",
            f"-Dlogback.configurationFile={apache._driver_logback(home)}",
            "-cp",
            f"{self.classes}:{self.libs}/*",
            self.MAIN,
            mode,
            *(f"{k}={v}" for k, v in kv.items()),
        ]
        return bb.Child(argv)

    def result(self, child: bb.Child, timeout: float) -> dict[str, Any]:
        line = child.expect("{", timeout)
        out = json.loads(line)
        child.proc.wait(30)
        if "error" in out:
            raise RuntimeError(f"BenchLoad failed: {out['error']}\n{child.stderr_tail()}")
        return out


def cpu_of(pids: list[int]) -> float:
    return sum(bb.proc_cpu(p) for p in pids)


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds of each thread of a process, with its name (a JVM names its threads), from /proc."""
    out = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            text = (task / "stat").read_text()
        except OSError:
            continue
        name = text[text.find("(") + 1 : text.rfind(")")]
        fields = text.rsplit(")", 1)[1].split()
        out[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / bb._TICK)
    return out


def busiest(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> tuple[str, float]:
    """The thread that used the most CPU between two :func:`thread_cpu` snapshots, and how much."""
    best = ("", 0.0)
    for tid, (name, cpu) in after.items():
        used = cpu - before.get(tid, (name, 0.0))[1]
        if used > best[1]:
            best = (name, used)
    return best


def other_load(servers: list[int], wait_s: float, below: float) -> float:
    """CPU use of processes other than ``servers`` (the row's idle brokers) over 0.5 s, % of the
    machine; with ``wait_s`` > 0 sampled again (up to that long) until it is below ``below``."""
    deadline = time.monotonic() + wait_s
    while True:
        s0, c0 = bb.sys_cpu(), cpu_of(servers)
        time.sleep(0.5)
        s1, c1 = bb.sys_cpu(), cpu_of(servers)
        ours = (c1 - c0) * bb._TICK  # jiffies
        other = 100.0 * max(0.0, s1[0] - s0[0] - ours) / max(1.0, s1[1] - s0[1])
        if other < below or time.monotonic() >= deadline:
            return other
        time.sleep(0.5)


def measured(
    java: Java,
    mode: str,
    servers: list[int],
    timeout: float,
    during: Callable[[threading.Event], Callable[[Run], None]] | None = None,
    **kv: object,
) -> Run:
    """One BenchLoad run; CPU of ``servers`` and of the JVM, machine busy and steal between its
    MEASURE-BEGIN and MEASURE-END lines. ``during`` starts a sampler at MEASURE-BEGIN (given a stop
    event) and returns what fills its figures into the run."""
    run = Run(loadavg=os.getloadavg()[0], background=other_load(servers, *QUIET))
    with pinned(PIN.load):
        child = java.start(mode, **kv)
    try:
        child.expect("MEASURE-BEGIN", timeout)
        srv0, gen0, t0 = cpu_of(servers), bb.proc_cpu(child.proc.pid), time.monotonic()
        threads0 = thread_cpu(child.proc.pid)
        steal0 = bb.steal_cpu()
        stop = threading.Event()
        finish = during(stop) if during is not None else None
        child.expect("MEASURE-END", timeout)
        srv1, gen1, t1 = cpu_of(servers), bb.proc_cpu(child.proc.pid), time.monotonic()
        threads1 = thread_cpu(child.proc.pid)
        steal1 = bb.steal_cpu()
        stop.set()
        out = java.result(child, 120)
    finally:
        child.stop()
    # A drain counts its backlog (a push consumer's last batch may overshoot it); a timed window its messages.
    window = out["msgs"] if mode == "produce" else out.get("window_msgs", kv["count"])
    run.msgs = int(window)  # type: ignore[call-overload]
    run.rate = out.get("rate")
    run.p50, run.p99 = out.get("p50_us"), out.get("p99_us")
    if run.msgs:
        run.server_cpu_us = 1e6 * (srv1 - srv0) / run.msgs
        run.gen_cpu_us = 1e6 * (gen1 - gen0) / run.msgs
    run.gen_pct = 100.0 * (gen1 - gen0) / max(1e-9, t1 - t0)
    run.server_pct = 100.0 * (srv1 - srv0) / max(1e-9, t1 - t0)
    run.gen_thread, used = busiest(threads0, threads1)
    run.gen_thread_pct = 100.0 * used / max(1e-9, t1 - t0)
    run.steal = 100.0 * (steal1[0] - steal0[0]) / max(1.0, steal1[1] - steal0[1])
    if mode == "produce":
        run.failed = int(out.get("failed", 0))
        problems = {k: v for k, v in out.get("statuses", {}).items() if k != "SEND_OK"}
        for text, n in out.get("errors", {}).items():
            # One row per kind of error: a busy refusal's remark carries the time it waited.
            key = re.sub(r"period in queue: \d+", "period in queue: N ms", text)
            problems[key] = problems.get(key, 0) + n
        run.problems = problems
    elif not out.get("finished"):
        run.note = f"drained only {out.get('msgs')} of {kv['count']}"
    if finish is not None:
        finish(run)
    return run


def median(runs: list[Run]) -> Run:
    runs = sorted(runs, key=lambda r: r.rate or 0.0)
    mid = runs[len(runs) // 2]
    if len(runs) > 1:
        mid.note = "; ".join(x for x in (mid.note, "runs " + " / ".join(fmt_rate(r.rate) for r in runs)) if x)
    return mid


# --- brokers -----------------------------------------------------------------------------------------------


@dataclass
class Brokers:
    """The row's brokers: where producers find them, what to create topics on, whose CPU counts."""

    kind: str  # "rmq" / "Apache"
    namesrv: str
    master: str
    pids: list[int]
    slave: str | None = None
    stop: Callable[[], None] = lambda: None


def start_rmq(root: Path, flush: str, role: str = "ASYNC_MASTER", slave: bool = False) -> Brokers:
    from tests.brokerproc import start_broker

    props = (*STORE_PROPS, f"flushDiskType={flush}", f"brokerRole={role}")
    quiet = ["--log-level", "WARNING"]
    m = start_broker(root / "rmq-m", *props, extra_args=quiet)
    procs = [m]
    try:
        if slave:
            s_props = (*STORE_PROPS, f"flushDiskType={flush}", "brokerRole=SLAVE", "brokerId=1")
            procs.append(start_broker(root / "rmq-s", *s_props, namesrv=m.namesrv_addr, extra_args=quiet))
    except BaseException:
        m.stop()
        raise

    def stop() -> None:
        for p in reversed(procs):
            p.stop()

    _STOP.append(stop)
    return Brokers(
        "rmq",
        m.namesrv_addr,
        m.broker_addr,
        [p.proc.pid for p in procs],
        procs[1].broker_addr if slave else None,
        stop,
    )


def start_apache(root: Path, flush: str, role: str = "ASYNC_MASTER", slave: bool = False) -> Brokers:
    from tests.peers import apache

    props = (*STORE_PROPS, f"flushDiskType={flush}", f"brokerRole={role}")
    peer = apache.start_apache(root / "apache-m", *props, jvm=APACHE_BROKER_JVM)
    procs: list[subprocess.Popen[str]] = []
    try:
        slave_addr = None
        if slave:
            s_props = (*STORE_PROPS, f"flushDiskType={flush}", "brokerRole=SLAVE", "brokerId=1")
            proc, slave_addr = apache.start_apache_broker(
                root / "apache-s", peer.namesrv_addr, *s_props, log=peer.log, jvm=APACHE_BROKER_JVM
            )
            procs.append(proc)
    except BaseException:
        peer.stop()
        raise

    def stop() -> None:
        for p in procs:
            apache.ApachePeer(p, p, "", "", root, []).stop()
        peer.stop()

    _STOP.append(stop)
    pids = [peer.broker.pid, peer.namesrv.pid, *(p.pid for p in procs)]
    return Brokers("Apache", peer.namesrv_addr, peer.broker_addr, pids, slave_addr, stop)


@contextlib.contextmanager
def brokers(
    kind: str, root: Path, flush: str, role: str = "ASYNC_MASTER", slave: bool = False
) -> Iterator[Brokers]:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    start = start_rmq if kind == "rmq" else start_apache
    with pinned(PIN.broker):  # the brokers (and every thread they start) on --broker-cpus
        b = start(root, flush, role, slave)
    try:
        for topic in (TOPIC, BACKLOG_TOPIC):
            bb.create_topic(b.master, b.namesrv, topic, QUEUES)
        if slave:
            await_slave(b)
        yield b
    finally:
        b.stop()
        if b.stop in _STOP:
            _STOP.remove(b.stop)
        shutil.rmtree(root, ignore_errors=True)


def await_slave(b: Brokers, timeout: float = 90.0) -> None:
    """Send to the SYNC_MASTER until it answers SEND_OK: the slave is connected and acknowledging."""
    from rmq.remoting.client import invoke_sync

    from tests.broker.test_replication import send_request

    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        resp = invoke_sync(b.master, send_request(0, 0, BODY, TOPIC), 5000)
        if resp.code == 0:
            return
        last = f"{resp.code} {resp.remark!r}"
        time.sleep(0.5)
    raise RuntimeError(f"{b.kind} SYNC_MASTER never answered SEND_OK in {timeout:.0f} s: {last}")


# --- replication lag ---------------------------------------------------------------------------------------


def lag_sampler(b: Brokers) -> Callable[[threading.Event], Callable[[Run], None]]:
    """Every LAG_EVERY s until stopped: the master's CommitLog end, the slave's, the master's again; the
    slave's lag at its read is at least the first master read minus it (never below 0) and at most the
    second minus it."""

    def start(stop: threading.Event) -> Callable[[Run], None]:
        samples: list[tuple[int, int, int]] = []  # master's CommitLog end, slave's, master's again
        failures: list[str] = []

        async def sample() -> None:
            from rmq.remoting.client import RemotingClient
            from rmq.remoting.command import create_request

            async def end(client: RemotingClient, addr: str) -> int:
                req = create_request(28, {})  # GET_BROKER_RUNTIME_INFO
                resp = await client.invoke(addr, req, 5000)
                if resp.code != 0:
                    raise RuntimeError(f"runtime info of {addr}: {resp.code} {resp.remark!r}")
                return int(json.loads(bytes(resp.body))["table"]["commitLogMaxOffset"])

            async with RemotingClient() as client:
                assert b.slave is not None
                while not stop.is_set():
                    try:
                        m0 = await end(client, b.master)
                        s = await end(client, b.slave)
                        m1 = await end(client, b.master)
                        samples.append((m0, s, m1))
                    except (TimeoutError, RuntimeError, OSError) as exc:
                        failures.append(str(exc))
                    await asyncio.sleep(LAG_EVERY)

        thread = threading.Thread(target=lambda: asyncio.run(sample()), daemon=True)
        thread.start()

        def finish(run: Run) -> None:
            thread.join(30)
            low = sorted(max(0, m0 - s) for m0, s, _ in samples)
            high = sorted(m1 - s for _, s, m1 in samples)
            run.lag_samples = len(samples)
            if samples:
                mid = len(samples) // 2
                run.lag_p50 = (float(low[mid]), float(high[mid]))
                run.lag_max = (float(low[-1]), float(high[-1]))
            if len(samples) > 1 and run.msgs:
                run.record_bytes = (samples[-1][0] - samples[0][0]) / max(1, run.msgs)
            if failures:
                run.problems[f"lag samples failed: {failures[0][:100]}"] = len(failures)

        return finish

    return start


# --- scenarios ---------------------------------------------------------------------------------------------


@dataclass
class Row:
    scenario: str  # "produce" / "consume" / "produce, SYNC_MASTER + slave"
    flush: str
    rmq: Run
    apache: Run
    target: str = ""
    met: bool | None = None

    @property
    def ratio(self) -> float | None:
        if self.rmq.rate and self.apache.rate:
            return self.rmq.rate / self.apache.rate
        return None

    @property
    def cpu_bound_ratio(self) -> float | None:
        """The ratio of rates when the machine's CPU, shared by broker and client, is all that limits:
        Apache's (broker + client) CPU per message over rmq's."""
        r, p = self.rmq, self.apache
        if r.server_cpu_us and r.gen_cpu_us and p.server_cpu_us and p.gen_cpu_us:
            return (p.server_cpu_us + p.gen_cpu_us) / (r.server_cpu_us + r.gen_cpu_us)
        return None

    @property
    def cpu_ratio(self) -> float | None:
        if self.rmq.server_cpu_us and self.apache.server_cpu_us:
            return self.rmq.server_cpu_us / self.apache.server_cpu_us
        return None


def produce_load(a: argparse.Namespace) -> dict[str, object]:
    return {"threads": a.threads, "producers": a.producers, "size": BODY}


def produce_rounds(
    java: Java,
    servers: list[int],
    a: argparse.Namespace,
    label: str,
    during: Callable[[threading.Event], Callable[[Run], None]] | None = None,
    **kv: object,
) -> Run:
    """``a.repeat`` produce runs of ``a.duration`` s after ``a.warmup`` s (the first run ``a.broker_warmup``
    more: a fresh broker's JIT), each logged as ``label``: the run with the median rate. ``kv``: where to
    send; the load is :func:`produce_load`'s unless ``kv`` names it."""
    runs = []
    for i in range(a.repeat):
        warm = a.warmup + (a.broker_warmup if i == 0 else 0.0)
        load = {**produce_load(a), **kv, "warmup": warm, "duration": a.duration}
        r = measured(java, "produce", servers, warm + a.duration + 120, during=during, **load)
        log(f"  {label} run {i + 1}: {describe(r)}")
        runs.append(r)
    return median(runs)


def run_pair(a: argparse.Namespace, root: Path, java: Java, flush: str, want_consume: bool) -> list[Row]:
    """Produce (and consume) rows for one flush type: rmq's broker, then Apache's, same load."""
    got: dict[str, dict[str, Run]] = {}
    for kind in ("rmq", "Apache"):
        log(f"{kind} {flush}: starting")
        with brokers(kind, root / kind, flush) as b:
            run = produce_rounds(java, b.pids, a, f"{kind} {flush} produce", namesrv=b.namesrv, topic=TOPIC)
            got.setdefault("produce", {})[kind] = run
            if want_consume:
                for consumer, run in consume(a, java, b).items():
                    got.setdefault(f"consume ({CONSUMERS[consumer]})", {})[kind] = run
    return [Row(scenario, flush, by["rmq"], by["Apache"]) for scenario, by in got.items()]


CONSUMERS = {"push": "DefaultMQPushConsumer", "lite": "DefaultLitePullConsumer"}


def write_backlog(java: Java, a: argparse.Namespace, kind: str, namesrv: str, broker: str) -> int:
    """``a.backlog`` messages of the produce load to BACKLOG_TOPIC, unmeasured (on the load's CPUs): the
    topic's messages then (its queues' max offsets summed)."""
    log(f"  {kind}: writing a backlog of {a.backlog:,} messages")
    with pinned(PIN.load):
        fill = java.start("produce", namesrv=namesrv, topic=BACKLOG_TOPIC, count=a.backlog, **produce_load(a))
    try:
        out = java.result(fill, 900)
    finally:
        fill.stop()
    if out.get("sent_ok", 0) < a.backlog:
        raise RuntimeError(f"{kind}: backlog of {a.backlog} got {out}")
    return sum(bb.max_offsets(broker, BACKLOG_TOPIC, QUEUES))


def consume(a: argparse.Namespace, java: Java, b: Brokers) -> dict[str, Run]:
    """A backlog written by the produce load, then drained by each ``--consumer`` kind (a new group each
    time, from the first offset): the run with the median rate of each."""
    total = write_backlog(java, a, b.kind, b.namesrv, b.master)
    out = {}
    for consumer in a.consumer.split(","):
        runs = []
        for i in range(a.repeat):
            r = measured(
                java,
                "consume",
                b.pids,
                600,
                namesrv=b.namesrv,
                topic=BACKLOG_TOPIC,
                group=f"bench_{consumer}_{i}_{time.time_ns()}",
                count=total,
                kind=consumer,
                # One unmeasured drain first in the same JVM (a group of its own): the client's pull
                # and decode paths compiled by its JIT, and the broker's, as the produce runs' warm-up
                # does for sends. Without it the JIT compiler was the load JVM's busiest thread.
                warm=1,
            )
            log(f"  {b.kind} consume ({consumer}) run {i + 1}: {describe(r)}")
            runs.append(r)
        out[consumer] = median(runs)
    return out


def run_sync_master(a: argparse.Namespace, root: Path, java: Java) -> Row:
    got: dict[str, Run] = {}
    for kind in ("rmq", "Apache"):
        log(f"{kind} SYNC_MASTER + slave: starting")
        with brokers(kind, root / kind, "ASYNC_FLUSH", role="SYNC_MASTER", slave=True) as b:
            label = f"{kind} SYNC_MASTER"
            got[kind] = produce_rounds(java, b.pids, a, label, lag_sampler(b), namesrv=b.namesrv, topic=TOPIC)
    return Row("produce, SYNC_MASTER + slave", "ASYNC_FLUSH", got["rmq"], got["Apache"])


def targets(row: Row) -> None:
    ratio, cpu = row.ratio, row.cpu_ratio
    if row.scenario == "produce":
        row.target = "≥ 2× msgs/s, ≤ 0.5× CPU/msg"
        row.met = ratio is not None and cpu is not None and ratio >= 2.0 and cpu <= 0.5
    elif row.scenario.startswith("consume"):
        row.target = "≥ 2× msgs/s"
        row.met = ratio is not None and ratio >= 2.0


def bench(a: argparse.Namespace) -> list[Row]:
    from tests.peers import apache

    try:
        libs = apache.peer_libs()
    except BaseException as exc:  # pytest.fail / skip outside pytest: say why and stop
        raise SystemExit(f"the Apache RocketMQ peer is missing: {exc}") from None
    classes = apache.compile_drivers(libs)
    store_root = Path(tempfile.mkdtemp(prefix="rmq-apache-bench-", dir=a.store_root))
    java = Java(classes, libs.client, store_root / "java")
    (store_root / "java").mkdir()
    only = set(a.only.split(",")) if a.only else {"async", "sync", "consume", "sync-master"}
    rows: list[Row] = []
    try:
        if only & {"async", "consume"}:
            rows += run_pair(a, store_root, java, "ASYNC_FLUSH", "consume" in only)
            if "async" not in only:
                rows = [r for r in rows if r.scenario != "produce"]
        if "sync" in only:
            rows += run_pair(a, store_root, java, "SYNC_FLUSH", False)
        if "sync-master" in only:
            rows.append(run_sync_master(a, store_root, java))
    finally:
        shutil.rmtree(store_root, ignore_errors=True)
    for r in rows:
        targets(r)
    return rows


# --- report ------------------------------------------------------------------------------------------------


def fmt_rate(v: float | None) -> str:
    return f"{v:,.0f}" if v else "n/a"


def fmt_us(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v / 1000:.1f} ms" if v >= 10_000 else f"{v:,.0f} µs"


def describe(r: Run) -> str:
    cpu = f"{r.server_cpu_us:.1f}" if r.server_cpu_us is not None else "n/a"
    gen = f"{r.gen_cpu_us:.1f}" if r.gen_cpu_us is not None else "n/a"
    s = f"{fmt_rate(r.rate)} msgs/s, broker {cpu} µs/msg ({r.server_pct or 0:.0f}%), generator {gen} µs/msg"
    s += f" ({r.gen_pct or 0:.0f}%"
    s += f", thread {r.gen_thread!r} {r.gen_thread_pct or 0:.0f}%)"
    if r.lag_max is not None:
        s += f", slave lag {fmt_lag(r)}"
    if r.problems:
        s += f", problems {r.problems}"
    return s


def fmt_lag(r: Run) -> str:
    """p50 and max of the slave's lag, each as "at least–at most", in KiB and in messages."""
    if r.lag_max is None or r.lag_p50 is None:
        return "n/a"

    def span(v: tuple[float, float], unit: float, fmt: str) -> str:
        return f"{v[0] / unit:{fmt}}–{v[1] / unit:{fmt}}"

    text = f"{span(r.lag_p50, 1024, ',.0f')} / {span(r.lag_max, 1024, ',.0f')} KiB"
    if r.record_bytes:
        text += (
            f" ({span(r.lag_p50, r.record_bytes, ',.0f')} / {span(r.lag_max, r.record_bytes, ',.0f')} msgs)"
        )
    return f"{text}, {r.lag_samples} samples"


HEADER = (
    "| scenario | flush | broker | msgs/s | p50 | p99 | broker CPU/msg | generator CPU/msg, % of a core "
    "| slave lag p50 / max | other load | steal | notes |"
)


def table(rows: list[Row]) -> list[str]:
    out = [HEADER, "|" + "---|" * 12]
    for row in rows:
        for kind, r in (("rmq", row.rmq), ("Apache 4.9.7", row.apache)):
            cpu = f"{r.server_cpu_us:.1f} µs" if r.server_cpu_us is not None else "n/a"
            if r.server_pct is not None:
                cpu += f", {r.server_pct:.0f}%"
            gen = "n/a"
            if r.gen_cpu_us is not None:
                gen = f"{r.gen_cpu_us:.1f} µs, {r.gen_pct or 0:.0f}%"
                gen += f" (busiest thread {r.gen_thread_pct or 0:.0f}%)"
            if gen_bound(r):
                gen += " **generator-bound**"
            bg = f"{r.background:.0f}%, load {r.loadavg:.1f}" if r.background is not None else "n/a"
            if (r.background or 0.0) > PROVISIONAL_ABOVE:
                bg += " (provisional: other jobs running)"
            notes = [r.note] if r.note else []
            if r.problems:
                notes.append("not SEND_OK: " + ", ".join(f"{k} ×{v}" for k, v in r.problems.items()))
            lag = fmt_lag(r) if row.scenario.startswith("produce, SYNC") else ""
            out.append(
                f"| {row.scenario} | {row.flush} | {kind} | {fmt_rate(r.rate)} | {fmt_us(r.p50)} "
                f"| {fmt_us(r.p99)} | {cpu} | {gen} | {lag} | {bg} | {r.steal or 0:.0f}% "
                f"| {'; '.join(notes)} |"
            )
    return out


def ratios(rows: list[Row]) -> list[str]:
    out = [
        "| scenario | flush | rmq ÷ Apache msgs/s | rmq ÷ Apache broker CPU/msg "
        "| msgs/s ratio if CPU-bound | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = f"{r.ratio:.2f}×" if r.ratio is not None else "n/a"
        cpu = f"{r.cpu_ratio:.2f}×" if r.cpu_ratio is not None else "n/a"
        met = "" if r.met is None else ("**met**" if r.met else "**missed**")
        bound = f"{r.cpu_bound_ratio:.2f}×" if r.cpu_bound_ratio is not None else "n/a"
        out.append(
            f"| {r.scenario} | {r.flush} | {ratio} | {cpu} | {bound} | {r.target or '(none set)'} | {met} |"
        )
    return out


def section(rows: list[Row], a: argparse.Namespace, elapsed: float, problems: list[str]) -> str:
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    consumer = " and a ".join(f"`{CONSUMERS[c]}`" for c in a.consumer.split(","))
    lines = [
        "## rmq beside Apache RocketMQ (`python benches/apache_bench.py`)",
        "",
        f"Measured {now} on this machine: {bb.machine_info()}. The same Java client 4.9.8 program "
        "(`tests/peers/java/src/rmqpeer/BenchLoad.java`) drives rmq (`python -m rmq.broker`) and Apache "
        "RocketMQ 4.9.7 (Maven Central has no 4.9.8 broker), one broker (pair) at a time, in one run: "
        f"{a.threads} threads of synchronous 1 KiB sends on {a.producers} `DefaultMQProducer`"
        f"{'s' if a.producers > 1 else ''} (as Apache's benchmark Producer), windows of {a.duration:g} s "
        f"after {a.warmup:g} s warm-up (a fresh broker's first run {a.warmup + a.broker_warmup:g} s, for "
        f"the JIT); consume: a {consumer} "
        f"of a new group draining a backlog of {a.backlog:,} messages, measured after one unmeasured drain "
        f"by another group in the same JVM (its JIT done); medians of {a.repeat} run"
        f"{'s' if a.repeat > 1 else ''}; whole run {elapsed:.0f} s{' (--quick)' if a.quick else ''}. "
        "Both brokers: 1 GiB CommitLog files, 6 MB ConsumeQueue files, a topic of 8 queues, the row's "
        "flush type; Apache's JVM: G1 with `runbroker.sh`'s flags and a 2 GiB heap.",
        "",
        pin_sentence(PIN.broker, PIN.load, "the broker processes", "the load JVM")
        + "- *Broker CPU/msg*: user + system CPU over the window divided by the messages (rmq: its one "
        "process, name server included; Apache: broker plus name server; SYNC_MASTER: master plus slave), "
        "and their CPU over the window as a share of one core. "
        "*Msgs/s ratio if CPU-bound*: Apache's broker + client CPU per message over rmq's — the ratio of "
        "rates to expect when this machine's CPU, which broker and client share, is what limits both. "
        "*Generator*: the load JVM's CPU per message and its share of one core over the window — it runs on "
        f"the same {os.cpu_count()} cores as the broker, so its CPU is CPU the broker does not get; with "
        f"its busiest thread's share (a client's single pull or selector thread): above {GEN_BOUND_PCT:.0f}% "
        f"of all cores, or a thread above {GEN_THREAD_BOUND_PCT:.0f}% of a core, a row is marked "
        "generator-bound. *Other load*: CPU use just "
        f"before the run from other processes, and the 1-minute load average (above {PROVISIONAL_ABOVE:.0f}% "
        "provisional). *Steal*: CPU time the hypervisor gave to other guests during the window.",
        "- *SYNC_MASTER + slave* (issue 15): master `brokerRole=SYNC_MASTER` (ASYNC_FLUSH) and slave "
        "(`brokerId=1`) on this machine, each send answered once the slave has acknowledged it. *Slave lag*: "
        "master's minus slave's `commitLogMaxOffset` (GET_BROKER_RUNTIME_INFO: master, slave, master "
        f"again, every {LAG_EVERY:g} s of the window: the lag at the slave's read is at least the first "
        "difference and at most the second, shown as at least–at most), p50 and max, in KiB and in "
        "messages of the window's average CommitLog record.",
        "",
        *table(rows),
        "",
        *ratios(rows),
    ]
    if problems:
        lines += ["", "Notes and problems of this run:", "", *[f"- {p}" for p in problems]]
    return "\n".join(lines)


def run_problems(rows: list[Row]) -> list[str]:
    out = []
    heavier = []  # rows whose client used more CPU per message than their broker
    for row in rows:
        for kind, r in (("rmq", row.rmq), ("Apache", row.apache)):
            name = f"{row.scenario} {row.flush} {kind}"
            why = gen_bound(r)
            if why:
                out.append(f"{name}: the load generator may be the limit: {why}")
            elif r.gen_cpu_us and r.server_cpu_us and r.gen_cpu_us > r.server_cpu_us:
                heavier.append(f"{name} ({r.gen_cpu_us:.0f} µs against {r.server_cpu_us:.0f} µs)")
            if r.problems:
                out.append(f"{name}: answers other than SEND_OK: {r.problems}")
            if r.note.startswith("drained only"):
                out.append(f"{name}: {r.note}")
    if heavier:
        out.append(
            f"The Java client used more CPU per message than the broker it drove in {len(heavier)} of "
            f"{2 * len(rows)} rows: {'; '.join(heavier)}. Client and broker share this machine's "
            f"{os.cpu_count()} cores, so where the CPU is the limit these rates measure the client as "
            "much as the broker; the ratio to expect then is the *if CPU-bound* column."
        )
    return out


def run_all(bench: Callable[[], T]) -> T:
    """``bench()`` with SIGTERM turned into an exit; every broker and child process it started is stopped
    after it, however it ends."""
    signal.signal(signal.SIGTERM, bb._on_signal)
    try:
        return bench()
    finally:
        for stop in reversed(_STOP):
            with contextlib.suppress(Exception):
                stop()
        bb._kill_children()


def write_section(path: Path, text: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace the text between a bench's markers (this one's by default) in ``path`` (append it the first
    time)."""
    old = path.read_text() if path.exists() else ""
    block = f"{begin}\n{text}\n{end}"
    i, j = old.find(begin), old.find(end)
    if i != -1 and j > i:
        new = old[:i] + block + old[j + len(end) :]
    else:
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(new)


def main() -> int:
    ap = argparse.ArgumentParser(description="rmq beside Apache RocketMQ (see the module docstring)")
    ap.add_argument("--duration", type=float, default=None, help="measured seconds per run (default 10)")
    ap.add_argument("--warmup", type=float, default=None, help="unmeasured seconds first (default 5)")
    ap.add_argument(
        "--broker-warmup",
        type=float,
        default=None,
        help="extra unmeasured seconds before a fresh broker's first run (Apache's JIT needs them: with 5 s "
        "its broker took 3x the CPU per send; default 20, --quick 15)",
    )
    ap.add_argument("--repeat", type=int, default=None, help="runs per row, median reported (default 3)")
    ap.add_argument("--quick", action="store_true", help="3 s windows, 1 run, a backlog of 60,000")
    ap.add_argument("--threads", type=int, default=64, help="producer threads (sync sends in flight)")
    ap.add_argument("--producers", type=int, default=1, help="DefaultMQProducer instances shared by them")
    ap.add_argument(
        "--backlog",
        type=int,
        default=None,
        help="messages drained by consume (500,000: a drain of a few seconds)",
    )
    ap.add_argument(
        "--consumer",
        default="push,lite",
        help="comma list: push (DefaultMQPushConsumer, as Apache's benchmark Consumer), lite "
        "(DefaultLitePullConsumer, batches of 32)",
    )
    ap.add_argument("--only", default="", help="comma list of async,sync,consume,sync-master")
    ap.add_argument("--store-root", default=None, help="parent directory of the temporary stores")
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    ap.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md alone")
    ap.add_argument(
        "--broker-cpus", default=None, help="CPU list for every broker process (e.g. 0); default: unpinned"
    )
    ap.add_argument("--load-cpus", default=None, help="CPU list for the load JVM (e.g. 1); default: unpinned")
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="S")
    ap.add_argument("--quiet-below", type=float, default=10.0, metavar="PCT")
    a = ap.parse_args()
    a.duration = a.duration or (3.0 if a.quick else 10.0)
    a.warmup = a.warmup or (3.0 if a.quick else 5.0)
    a.repeat = a.repeat or (1 if a.quick else 3)
    if a.broker_warmup is None:
        a.broker_warmup = 15.0 if a.quick else 20.0
    a.backlog = a.backlog or (60_000 if a.quick else 500_000)
    QUIET[:] = [a.wait_quiet, a.quiet_below]
    try:
        PIN.broker, PIN.load = cpu_sets(a.broker_cpus, a.load_cpus)
    except ValueError as e:
        ap.error(str(e))
    unknown = set(a.consumer.split(",")) - set(CONSUMERS)
    if unknown:
        ap.error(f"--consumer: unknown {sorted(unknown)}; choose from {sorted(CONSUMERS)}")
    if shutil.which("java") is None or shutil.which("javac") is None:
        raise SystemExit("java and javac (JDK 17) are needed: the Apache peer and the load are Java")
    t0 = time.monotonic()
    rows = run_all(lambda: bench(a))
    text = section(rows, a, time.monotonic() - t0, run_problems(rows))
    print(text)
    if not a.no_write:
        write_section(a.out, text)
        log(f"wrote the apache section of {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
