"""Apache RocketMQ's own benchmark tools against rmq and Apache RocketMQ 4.9.7, in one run (issue 31 items 2
and 3).

Usage (from the repository root, with the package built and Java 17 + Maven on the PATH)::

    python benches/apache_tools.py                  # both tools, 3 runs each per broker (~8 min); rewrites
                                                    # the apache-tools section of benches/RESULTS.md
    python benches/apache_tools.py --only tx --repeat 1 --no-write
    python benches/apache_tools.py --broker-cpus 0 --load-cpus 1   # broker and tool on disjoint CPUs

The tools are Apache's, unchanged, from Maven Central (``scripts/peers example-4.7.0 example-5.5.0``: no 4.8
or 4.9 ``rocketmq-example`` was ever published there):

* ``tx``: ``org.apache.rocketmq.example.benchmark.TransactionProducer`` of rocketmq-example 4.7.0 (its
  client 4.7.0) with its defaults: 32 threads, 2 KiB bodies, every transaction committed in its first phase.
* ``batch``: ``BatchProducer`` of rocketmq-example 5.5.0 (its client 5.5.0: ROCKETMQ binary headers, and a
  UNIQ_KEY of the batch's own besides each message's) with its defaults: 64 threads, batches of 16
  messages of 128 B.

Each tool prints its rate over its last 10 one-second snapshots every 10 s. A run starts the tool, lets the
first ``--warmup-lines`` lines go by (warm-up: its JIT, the broker's), and measures from there to the
``--windows``-th line after: the rate is the mean of those lines, the broker's CPU (user + system from
/proc: rmq's one process, name server included; Apache's broker plus name server) over the same time divided
by the messages that rate makes. One broker per tool and kind serves its ``--repeat`` runs in turn (the
later runs meet the history of the earlier ones); rows are the run with the median rate. ``--broker-cpus``
and ``--load-cpus`` pin the broker processes and the tool's JVM to disjoint CPU sets
(``benches/pinning.py``); either way the broker's and the tool's CPU per message and share of a core are
reported, as are the CPU used by other processes just before a run and the hypervisor's steal.
``--page-cache full`` (the default) fills the page cache before every run (``benches/page_cache.py``), so both
brokers write into reclaimed pages, as a long-running broker does, whatever ran before them; the kernel's
reclaim threads' CPU is reported beside the broker's.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import apache_bench as ab  # noqa: E402
import broker_bench as bb  # noqa: E402
import page_cache  # noqa: E402
from pinning import cpu_sets, pin_sentence, pinned  # noqa: E402

BEGIN = "<!-- apache-tools:begin -->"
END = "<!-- apache-tools:end -->"
TOPIC = "ToolBench"
QUEUES = 8


@dataclass(frozen=True)
class Tool:
    name: str
    version: str
    main: str
    args: tuple[str, ...]
    what: str
    rate_of: re.Pattern[str]
    """The line the tool prints every 10 s; group 1 is the rate in messages per second."""
    unit: str
    target: str


TOOLS = {
    "tx": Tool(
        "TransactionProducer",
        "4.7.0",
        "org.apache.rocketmq.example.benchmark.TransactionProducer",
        ("-w", "32", "-s", "2048"),
        "TransactionProducer 4.7.0, 32 threads, 2 KiB",
        re.compile(r"Send TPS:\s*(\d+)"),
        "transactions",
        "≥ 2× TPS",
    ),
    "batch": Tool(
        "BatchProducer",
        "5.5.0",
        "org.apache.rocketmq.example.benchmark.BatchProducer",
        ("-w", "64", "-s", "128", "-b", "16", "-ri", "10000"),
        "BatchProducer 5.5.0, 64 threads, 16 × 128 B",
        re.compile(r"Send MPS:\s*(\d+)"),
        "messages",
        "≥ 2× msgs/s at ≤ 0.5× CPU/msg",
    ),
}


@dataclass
class Run:
    rate: float = 0.0
    broker_cpu_us: float | None = None
    broker_pct: float | None = None
    """The broker's CPU over the measured lines, in % of one core."""
    gen_cpu_us: float | None = None
    gen_pct: float | None = None
    gen_thread: str = ""
    gen_thread_pct: float | None = None
    """The tool's busiest thread over the measured lines (a JIT compiler thread there: not warm yet)."""
    background: float | None = None
    loadavg: float | None = None
    steal: float | None = None
    reclaim_pct: float | None = None
    """The kernel's page reclaim threads (kswapd) over the measured lines, % of one core."""
    lines: list[str] = field(default_factory=list)
    note: str = ""


def tool_libs(tool: Tool) -> Path:
    out = subprocess.run(
        [str(REPO / "scripts" / "peers"), f"example-{tool.version}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return Path(out[-1])


def next_rate(child: bb.Child, tool: Tool, timeout: float) -> tuple[str, float]:
    """The tool's next rate line and its rate."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{tool.name} printed no rate in {timeout:.0f} s:\n{child.stderr_tail()}")
        line = child.expect("", left)
        m = tool.rate_of.search(line)
        if m:
            return line.strip(), float(m.group(1))


def measure(tool: Tool, libs: Path, b: ab.Brokers, warmup: int, windows: int, home: Path) -> Run:
    run = Run(loadavg=os.getloadavg()[0], background=ab.other_load(b.pids, *ab.QUIET))
    home.mkdir(parents=True, exist_ok=True)
    from tests.peers.apache import JAVA_OPENS

    argv = [
        "java",
        *ab.GEN_JVM,
        *JAVA_OPENS,  # the 4.7.0 client's netty reaches into java.nio
        f"-Duser.home={home}",
        f"-Drocketmq.client.logRoot={home / 'client-logs'}",
        "-cp",
        f"{libs}/*",
        tool.main,
        "-n",
        b.namesrv,
        "-t",
        TOPIC,
        *tool.args,
    ]
    with pinned(ab.PIN.load):  # the tool's JVM on --load-cpus
        child = bb.Child(argv)
    timeout = 60.0
    try:
        for _ in range(warmup):
            next_rate(child, tool, timeout)
        threads0 = ab.thread_cpu(child.proc.pid)
        reclaim0 = page_cache.reclaim_cpu()
        srv0, gen0, t0, steal0 = (
            ab.cpu_of(b.pids),
            bb.proc_cpu(child.proc.pid),
            time.monotonic(),
            bb.steal_cpu(),
        )
        rates = []
        for _ in range(windows):
            line, rate = next_rate(child, tool, timeout)
            run.lines.append(line)
            rates.append(rate)
        srv1, gen1, t1, steal1 = (
            ab.cpu_of(b.pids),
            bb.proc_cpu(child.proc.pid),
            time.monotonic(),
            bb.steal_cpu(),
        )
        threads1 = ab.thread_cpu(child.proc.pid)
        reclaim1 = page_cache.reclaim_cpu()
    finally:
        child.stop()
    run.rate = sum(rates) / len(rates)
    msgs = run.rate * (t1 - t0)
    if msgs > 0:
        run.broker_cpu_us = 1e6 * (srv1 - srv0) / msgs
        run.gen_cpu_us = 1e6 * (gen1 - gen0) / msgs
    run.gen_pct = 100.0 * (gen1 - gen0) / max(1e-9, t1 - t0)
    run.broker_pct = 100.0 * (srv1 - srv0) / max(1e-9, t1 - t0)
    run.gen_thread, used = ab.busiest(threads0, threads1)
    run.gen_thread_pct = 100.0 * used / max(1e-9, t1 - t0)
    run.reclaim_pct = 100.0 * (reclaim1 - reclaim0) / max(1e-9, t1 - t0)
    run.steal = 100.0 * (steal1[0] - steal0[0]) / max(1.0, steal1[1] - steal0[1])
    failed = sum(int(m.group(1)) for ln in run.lines if (m := re.search(r"Send Failed: (\d+)", ln)))
    if failed:
        run.note = f"{failed} sends failed in the measured lines"
    return run


def median(runs: list[Run]) -> Run:
    ordered = sorted(runs, key=lambda r: r.rate)
    mid = ordered[len(ordered) // 2]
    if len(runs) > 1:
        mid.note = "; ".join(x for x in (mid.note, "runs " + " / ".join(f"{r.rate:,.0f}" for r in runs)) if x)
    return mid


@dataclass
class Row:
    tool: Tool
    rmq: Run
    apache: Run


def bench(a: argparse.Namespace) -> list[Row]:
    root = Path(a.store_root or Path.home() / ".cache" / "rmq-bench") / "apache-tools"
    rows = []
    filler = page_cache.Filler(root / "page-cache-filler") if a.page_cache == "full" else None
    try:
        for key in a.only.split(","):
            rows.append(bench_tool(a, root, TOOLS[key], filler))
    finally:
        if filler is not None:
            filler.close()
    return rows


def bench_tool(a: argparse.Namespace, root: Path, tool: Tool, filler: page_cache.Filler | None) -> Row:
    libs = tool_libs(tool)
    got: dict[str, list[Run]] = {"rmq": [], "Apache": []}
    for kind in ("rmq", "Apache"):
        with ab.brokers(kind, root / kind, "ASYNC_FLUSH") as b:
            bb.create_topic(b.master, b.namesrv, TOPIC, QUEUES)
            for i in range(a.repeat):
                if filler is not None:
                    filled = filler.top_up()
                    if filled:
                        ab.log(f"page cache topped up with {filled >> 20} MiB")
                r = measure(tool, libs, b, a.warmup_lines, a.windows, root / f"home-{kind}-{i}")
                ab.log(
                    f"{tool.name} {kind} run {i + 1}: {r.rate:,.0f} {tool.unit}/s, broker "
                    f"{r.broker_cpu_us or 0:.1f} µs each; {r.lines[-1] if r.lines else ''}"
                )
                got[kind].append(r)
    return Row(tool, median(got["rmq"]), median(got["Apache"]))


def fmt_cpu(v: float | None) -> str:
    return f"{v:.1f} µs" if v is not None else "n/a"


def section(rows: list[Row], a: argparse.Namespace, elapsed: float) -> str:
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "## Apache's benchmark tools against rmq and Apache RocketMQ (`python benches/apache_tools.py`, "
        "issue 31)",
        "",
        f"Measured {now} on this machine: {bb.machine_info()}. Apache's own tools from Maven Central, "
        "unchanged (`org.apache.rocketmq.example.benchmark.*`; no 4.8/4.9 rocketmq-example was published): "
        "TransactionProducer of 4.7.0 with its defaults (32 threads, 2 KiB, all committed in the first "
        "phase), BatchProducer of 5.5.0 with its defaults (64 threads, batches of 16 × 128 B; its 5.5.0 "
        "client writes ROCKETMQ binary headers and gives each batch a UNIQ_KEY of its own). Each against rmq "
        "(`python -m rmq.broker`) and Apache RocketMQ 4.9.7, one broker at a time, ASYNC_FLUSH, a topic of 8 "
        "queues, 1 GiB CommitLog files; Apache's JVM: G1 with `runbroker.sh`'s flags and a 2 GiB heap. "
        f"A run: the tool's first {a.warmup_lines} 10-s line(s) are warm-up, then {a.windows} lines measured "
        "(the rate is their "
        "mean); one broker serves a row's runs in turn; the row is the run with the median rate of "
        f"{a.repeat}; whole run {elapsed:.0f} s.",
        "",
        "- *Broker CPU/msg*: user + system CPU of the broker (rmq: its one process, name server included; "
        "Apache: broker plus name server) over the measured lines, divided by the messages (transactions) "
        "their rate makes, and its share of one core. *Tool*: the tool's JVM CPU per message and its share "
        "of one core, with its busiest thread's (a JIT compiler thread there would mean it is not warm yet). "
        "*Other load*: CPU use of other processes just before the run, "
        "and the 1-minute load average. *Steal*: CPU time the hypervisor gave to other guests. "
        "*kswapd*: the kernel's page reclaim threads over the measured lines, % of one core (outside "
        "either process, on whichever CPU the kernel picks).",
        (
            "- Page cache: **full** — before every run a sparse file is read into the page cache until at "
            "most 3 GiB of memory is free, or the kernel frees as fast as it is read "
            "(`benches/page_cache.py`), so each broker writes into reclaimed "
            "pages, as a broker that has run longer than RAM ÷ its write rate does, and every run meets "
            "the same memory."
            if a.page_cache == "full"
            else "- Page cache: **as is** — memory left as the previous runs left it (the rows then "
            "depend on their order: see benches/page_cache.py)."
        ),
        pin_sentence(ab.PIN.broker, ab.PIN.load, "the broker processes", "the tool's JVM").rstrip("\n"),
        "",
        "| tool | broker | rate | broker CPU/msg, % of a core | tool CPU/msg, % of a core | other load "
        "| steal | kswapd | notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        for kind, r in (("rmq", row.rmq), ("Apache 4.9.7", row.apache)):
            gen = f"{r.gen_cpu_us:.1f} µs, {r.gen_pct or 0:.0f}%" if r.gen_cpu_us is not None else "n/a"
            if r.gen_thread:
                gen += f" (busiest thread {r.gen_thread} {r.gen_thread_pct or 0:.0f}%)"
            bg = f"{r.background:.0f}%, load {r.loadavg:.1f}" if r.background is not None else "n/a"
            if (r.background or 0.0) > ab.PROVISIONAL_ABOVE:
                bg += " (provisional: other jobs running)"
            lines.append(
                f"| {row.tool.what} | {kind} | {r.rate:,.0f} {row.tool.unit}/s | {fmt_cpu(r.broker_cpu_us)}, "
                f"{r.broker_pct or 0:.0f}% "
                f"| {gen} | {bg} | {r.steal or 0:.0f}% | {r.reclaim_pct or 0:.0f}% | {r.note} |"
            )
    lines += [
        "",
        "| tool | rmq ÷ Apache rate | rmq ÷ Apache broker CPU/msg | target | met |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        ratio = row.rmq.rate / row.apache.rate if row.apache.rate else None
        cpu = (
            row.rmq.broker_cpu_us / row.apache.broker_cpu_us
            if row.rmq.broker_cpu_us and row.apache.broker_cpu_us
            else None
        )
        met = ratio is not None and ratio >= 2.0
        if row.tool.name == "BatchProducer":
            met = met and cpu is not None and cpu <= 0.5
        lines.append(
            f"| {row.tool.what} | {f'{ratio:.2f}×' if ratio else 'n/a'} | {f'{cpu:.2f}×' if cpu else 'n/a'} "
            f"| {row.tool.target} | {'**met**' if met else '**missed**'} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(
        description="Apache's benchmark tools against rmq and Apache (see the docstring)"
    )
    ap.add_argument("--only", default="tx,batch", help="comma list of tx, batch")
    ap.add_argument("--repeat", type=int, default=3, help="runs per row, median reported")
    ap.add_argument("--windows", type=int, default=2, help="10-s lines measured per run (2)")
    ap.add_argument(
        "--warmup-lines",
        type=int,
        default=3,
        help="the tool's 10-s lines let go by before measuring (3: its JIT warm)",
    )
    ap.add_argument("--store-root", default=None, help="parent directory of the stores")
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    ap.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md alone")
    ap.add_argument(
        "--page-cache",
        choices=("full", "as-is"),
        default="full",
        help="full: before each run fill the page cache until little memory is free (a long-running "
        "broker's state, the same for every run; benches/page_cache.py); as-is: leave memory as it is",
    )
    ap.add_argument("--broker-cpus", default=None, help="CPU list for the broker processes (e.g. 0)")
    ap.add_argument("--load-cpus", default=None, help="CPU list for the tool's JVM (e.g. 1)")
    a = ap.parse_args()
    try:
        ab.PIN.broker, ab.PIN.load = cpu_sets(a.broker_cpus, a.load_cpus)
    except ValueError as e:
        ap.error(str(e))
    unknown = set(a.only.split(",")) - set(TOOLS)
    if unknown:
        ap.error(f"--only: unknown {sorted(unknown)}; choose from {sorted(TOOLS)}")
    t0 = time.monotonic()
    rows = ab.run_all(lambda: bench(a))
    text = section(rows, a, time.monotonic() - t0)
    print(text)
    if not a.no_write:
        ab.write_section(a.out, text, BEGIN, END)
        ab.log(f"wrote the apache-tools section of {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
