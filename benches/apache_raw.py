"""rmq beside Apache RocketMQ 4.9.7 driven by the same light load generators (issue 31 items 2, 3, 4 and 6).

Usage (from the repository root, with the package built, Java 17 and a C compiler on the PATH)::

    python benches/apache_raw.py --broker-cpus 0 --load-cpus 1     # ~25 min, rewrites its RESULTS.md section
    python benches/apache_raw.py --broker-cpus 0 --load-cpus 1 --only batch --repeat 1 --no-write

Why: in ``apache_bench.py`` and ``apache_tools.py`` the load is Apache's own Java client, which on this
machine's one load CPU spends more CPU per message than either broker and so sets the rate for both
(those rows are marked load-bound). Here the load is ``benches/loadgen_c.c`` — an epoll loop sending
pre-encoded request frames, the generator of ``broker_bench.py`` — which spends a few µs per request, so
the broker's CPU is what limits each row and the rate ratio is a ratio of brokers. The rows are the ones
issue 31 sets targets for beside Apache:

* ``produce``: SEND_MESSAGE_V2 of 1 KiB (the frames a Java ``DefaultMQProducer`` sends: V2 one-letter
  header, properties UNIQ_KEY, WAIT, TAGS), ASYNC_FLUSH and SYNC_FLUSH;
* ``batch``: SEND_BATCH_MESSAGE of 16 × 128 B (the body of ``DefaultMQProducer.send(Collection)``,
  REMOTING.md §4.5; each message its own UNIQ_KEY, WAIT and TAGS), ASYNC_FLUSH — the shape of Apache's
  ``BatchProducer``;
* ``tx``: transactional half messages of 2 KiB (sysFlag TRANSACTION_PREPARED_TYPE, properties TRAN_MSG and
  PGROUP), each committed when answered by a oneway END_TRANSACTION as a Java ``TransactionMQProducer``
  commits it — the load of Apache's ``TransactionProducer``; after the run the topic must hold every half
  message answered SEND_OK;
* ``drain``: a backlog of ``--backlog`` 1 KiB messages written by the generator, then pulled by
  ``benches/loadgen.py``'s pull mode (PULL_MESSAGE of 32 at explicit offsets, ``--pull-conns`` ×
  ``--pull-inflight`` in flight, ``--gen-procs`` processes), once unmeasured and once measured.

Each is ``--conns`` connections × ``--inflight`` requests outstanding (8 × 8 = 64, as the 64 threads of
Apache's tools) in ``--gen-procs`` processes. Per round rmq then Apache, each started fresh on an empty store
(``apache_bench.brokers``: 1 GiB CommitLog files, the topic created with 8 queues) on ``--broker-cpus``, the
generator on ``--load-cpus``; ``--warmup`` unmeasured seconds (Apache's JIT), then ``--duration`` measured.
Per row the run with the median rate of ``--repeat``; broker CPU per message is user + system CPU of the
broker process over the window divided by the messages (Apache's name server, idle during sends, is not
counted; rmq's process holds its name server too).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

import apache_bench as ab  # noqa: E402
import broker_bench as bb  # noqa: E402
import loadgen  # noqa: E402
import page_cache  # noqa: E402
from pinning import cpu_list, cpu_sets, pin_sentence, pinned  # noqa: E402

BEGIN = "<!-- apache-raw:begin -->"
END = "<!-- apache-raw:end -->"
GROUP = "bench_pg"
UNIQ = f"{os.getpid():08X}0000"  # the UNIQ_KEY prefix of every message sent
GEN_BOUND_PCT = 70.0
"""The generator processes above this share of their pinned CPUs may be what limits the row."""


@dataclass(frozen=True)
class Case:
    key: str
    flush: str
    body: int
    batch: int  # messages per request (1: SEND_MESSAGE_V2)
    target: str
    transactional: bool = False
    drain: bool = False  # pull a backlog instead of sending
    min_ratio: float = 2.0  # the target: rmq ÷ Apache msgs/s at least this
    max_cpu_ratio: float | None = 0.5  # and rmq ÷ Apache broker CPU/msg at most this
    warmup: float | None = None  # unmeasured seconds (None: --warmup)

    @property
    def what(self) -> str:
        if self.drain:
            return f"drain {self.body} B (PULL_MESSAGE of 32)"
        if self.transactional:
            return f"transaction {self.body} B"
        if self.batch > 1:
            return f"batch {self.batch} × {self.body} B"
        return f"produce {self.body} B"


CASES = [
    Case("async", "ASYNC_FLUSH", 1024, 1, "≥ 2× msgs/s at ≤ 0.5× CPU/msg"),
    Case("sync", "SYNC_FLUSH", 1024, 1, "≥ 2× msgs/s at ≤ 0.5× CPU/msg"),
    Case("batch", "ASYNC_FLUSH", 128, 16, "≥ 2× msgs/s at ≤ 0.5× CPU/msg"),
    # Apache's transaction path needs a longer warm-up: 20 s left it at 86-100 µs per transaction, 60 s at 56.
    Case("tx", "ASYNC_FLUSH", 2048, 1, "≥ 2× TPS", transactional=True, max_cpu_ratio=None, warmup=60.0),
    Case("drain", "ASYNC_FLUSH", 1024, 1, "≥ 1.5× msgs/s at ≤ 0.5× CPU/msg", drain=True, min_ratio=1.5),
]


@dataclass
class Result:
    case: Case
    runs: dict[str, list[bb.Measure]] = field(default_factory=lambda: {"rmq": [], "Apache": []})

    def median(self, kind: str) -> bb.Measure | None:
        runs = sorted((m for m in self.runs[kind] if m.rate is not None), key=lambda m: m.rate or 0.0)
        return runs[len(runs) // 2] if runs else None


class Templates:
    """The request frames ``loadgen_c`` sends, per case, written once into the build directory."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.paths: dict[str, Path] = {}

    def path(self, case: Case) -> Path:
        name = f"{case.body}x{case.batch}{'-tx' if case.transactional else ''}"
        if name not in self.paths:
            p = self.workdir / f"templates-{name}.bin"
            body = (b"0123456789abcdef" * (case.body // 16 + 1))[: case.body]
            if case.batch > 1:
                loadgen.native_batch_templates(str(p), ab.TOPIC, GROUP, body, case.batch, ab.QUEUES, UNIQ)
            else:
                loadgen.native_templates(str(p), ab.TOPIC, GROUP, body, ab.QUEUES, UNIQ, case.transactional)
            self.paths[name] = p
        return self.paths[name]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def once(
    kind: str,
    case: Case,
    a: argparse.Namespace,
    binary: Path,
    templates: Templates,
    filler: page_cache.Filler | None,
) -> bb.Measure:
    if filler is not None:
        filled = filler.top_up()
        if filled:
            log(f"  page cache topped up with {filled >> 20} MiB")
    root = Path(tempfile.mkdtemp(prefix=f"rmq-apache-raw-{kind}-", dir=a.store_root))
    try:
        with ab.brokers(kind, root / "b", case.flush) as b:
            host, port = b.master.rsplit(":", 1)
            tmpl = templates.path(case)

            def worker(conns: int) -> Callable[[int, Path], list[str]]:
                def argv(worker_id: int, lat_path: Path) -> list[str]:
                    return [
                        str(binary),
                        host,
                        port,
                        str(conns),
                        str(a.inflight),
                        str(tmpl),
                        str(lat_path),
                        str(worker_id),
                        *([GROUP, UNIQ] if case.transactional else []),
                    ]

                return argv

            with pinned(ab.PIN.load):
                workers = [worker(n) for n in bb.split_conns(a.conns, a.gen_procs)]
                if case.drain:
                    m = drain(b, a, workers)
                else:
                    warmup = a.warmup if case.warmup is None else max(a.warmup, case.warmup)
                    m = bb.run_workers(workers, warmup, a.duration, b.pids[0])
            if case.transactional:
                m.note = committed(b, m.requests - m.errors)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if m.errors:
        # The generator keeps one sample answer per process; SYSTEM_BUSY (2) in every sample: the broker's
        # flow control refused requests (counted in the note, not in the rate); anything else stops the run.
        if not all("'code':2," in k for k in m.error_samples):
            samples = "; ".join(f"{k} ×{v}" for k, v in sorted(m.error_samples.items()))
            raise RuntimeError(f"{kind} {case.key}: {m.errors} requests failed: {samples}")
        busy = f"{m.errors:,} requests refused SYSTEM_BUSY (flow control), not counted"
        m.note = f"{m.note}; {busy}" if m.note else busy
    if not m.rate:
        raise RuntimeError(f"{kind} {case.key}: no request answered in the window")
    return m


def drain(
    b: ab.Brokers, a: argparse.Namespace, workers: list[Callable[[int, Path], list[str]]]
) -> bb.Measure:
    """Send until every queue holds ``--backlog`` ÷ 8 messages, pull them all once unmeasured (the pull paths
    compiled by Apache's JIT, the pages read once), then again measured: first pull sent to last answer."""
    per_queue = a.backlog // ab.QUEUES
    while min(bb.max_offsets(b.master, ab.TOPIC, ab.QUEUES)) < per_queue:
        sent = bb.run_workers(workers, 0.0, 3.0)
        if sent.errors:
            raise RuntimeError(
                f"{b.kind}: writing the backlog: {sent.errors} sends failed: {sent.error_samples}"
            )
    ranges = [[q, 0, per_queue] for q in range(ab.QUEUES)]
    bb.raw_pull(b.master, ranges, a.pull_conns, a.pull_inflight, 120.0, a.gen_procs, None)
    m = bb.raw_pull(b.master, ranges, a.pull_conns, a.pull_inflight, 120.0, a.gen_procs, b.pids[0])
    if m.count != per_queue * ab.QUEUES:
        raise RuntimeError(f"{b.kind}: drained {m.count} of {per_queue * ab.QUEUES} messages ({m.note})")
    return m


def committed(b: ab.Brokers, answered: int) -> str:
    """How many of the ``answered`` half messages reached the topic (the commits are oneway: waits for
    them)."""
    deadline = time.monotonic() + 15
    while True:
        n = sum(bb.max_offsets(b.master, ab.TOPIC, ab.QUEUES))
        if n >= answered or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    if n < answered:
        raise RuntimeError(
            f"{b.kind}: {answered} half messages answered SEND_OK, {n} committed into the topic"
        )
    return f"{n:,} committed"


def per_msg(m: bb.Measure, case: Case) -> tuple[float, float | None, float | None]:
    """msgs/s, broker CPU µs per message, generator CPU µs per message."""
    rate = (m.rate or 0.0) * case.batch
    cpu = m.server_cpu_us / case.batch if m.server_cpu_us is not None else None
    gen = m.gen_cpu_us / case.batch if m.gen_cpu_us is not None else None
    return rate, cpu, gen


def gen_bound(m: bb.Measure, load_cpus: int) -> bool:
    return (m.gen_all_pct or 0.0) > GEN_BOUND_PCT * load_cpus


def us(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f} µs" if v < 100 else f"{v:.0f} µs"


def section(results: list[Result], a: argparse.Namespace, elapsed: float) -> str:
    load_cpus = len(ab.PIN.load) if ab.PIN.load else (os.cpu_count() or 1)
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "## rmq beside Apache RocketMQ under the same C load generator "
        "(`python benches/apache_raw.py`, issue 31)",
        "",
        f"Measured {now} on this machine: {bb.machine_info()}. Windows of {a.duration:g} s after "
        f"{a.warmup:g} s warm-up (transactions {max(a.warmup, 60.0):g} s); {a.repeat} "
        f"round{'s' if a.repeat > 1 else ''} per row, each running rmq then Apache 4.9.7 on fresh stores; "
        "per broker the run with the median rate (all runs below the "
        f"table). Whole run {elapsed:.0f} s.",
        "",
        "- *Load*: `benches/loadgen_c.c` (the generator of `broker_bench.py`), "
        f"{a.conns} connections × {a.inflight} requests in flight in {a.gen_procs} processes, the same "
        "frames to both brokers: SEND_MESSAGE_V2 as a Java `DefaultMQProducer` sends it (V2 header, "
        "properties UNIQ_KEY, WAIT, TAGS), or SEND_BATCH_MESSAGE of 16 messages as "
        "`DefaultMQProducer.send(Collection)` sends it (each message its own UNIQ_KEY, WAIT, TAGS). Unlike "
        "the Java client of the sections above, it spends a few µs per request, so the broker's CPU is what "
        "each row measures. *drain*: a backlog of "
        f"{a.backlog:,} messages of 1 KiB written by that generator, then pulled by `benches/loadgen.py`'s "
        f"pull mode (PULL_MESSAGE of 32 at explicit offsets, {a.pull_conns} connections × {a.pull_inflight} "
        "pulls in flight), once unmeasured and once measured from the first pull to the last answer.",
        "- *Brokers*: rmq (`python -m rmq.broker`) and Apache RocketMQ 4.9.7 (`tests/peers/apache.py`, the "
        "JVM of `apache_bench.py`), each with 1 GiB CommitLog files and the row's flush type, topic of 8 "
        "queues.",
        (
            "- Page cache: **full** — before every run a sparse file is read into the page cache until at "
            "most 3 GiB of memory is free (`benches/page_cache.py`), so each broker writes into reclaimed "
            "pages and every run meets the same memory."
            if a.page_cache == "full"
            else "- Page cache: **as is** — memory left as the previous runs left it."
        ),
        pin_sentence(ab.PIN.broker, ab.PIN.load, "the brokers", "the generator processes").rstrip("\n"),
        "- *Broker CPU/msg*: user + system CPU of the broker process over the window ÷ messages stored, and "
        "its share of one core. *Generator*: the same for the generator processes, and their share of the "
        f"load CPUs (above {GEN_BOUND_PCT:.0f}% the row is marked generator-bound).",
        "",
        "| row | flush | msgs/s: rmq · Apache | rmq ÷ Apache "
        "| broker CPU/msg (share of a core): rmq · Apache | CPU ratio "
        "| p50 · p99 per request: rmq · Apache | generator CPU/msg (share of CPU "
        f"{cpu_list(ab.PIN.load)}): rmq · Apache | steal: rmq · Apache | target | met |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for r in results:
        mr, ma = r.median("rmq"), r.median("Apache")
        if mr is None or ma is None:
            continue
        (rr, cr, gr), (ra, ca, ga) = per_msg(mr, r.case), per_msg(ma, r.case)
        ratio = rr / ra if ra else 0.0
        cpu_ratio = cr / ca if cr is not None and ca else None
        bound = [k for k, m in (("rmq", mr), ("Apache", ma)) if gen_bound(m, load_cpus)]
        limit = r.case.max_cpu_ratio
        cpu_met = limit is None or (cpu_ratio is not None and cpu_ratio <= limit)
        # A generator-bound rmq run makes the ratio a lower bound (rmq might have gone faster); a
        # generator-bound Apache run would make it an upper bound, which cannot meet a target.
        met = ratio >= r.case.min_ratio and cpu_met and "Apache" not in bound
        cpu_cell = f"**{cpu_ratio:.2f}×**" if cpu_ratio is not None else "n/a"
        lines.append(
            f"| {r.case.what} | {r.case.flush} | {rr:,.0f} · {ra:,.0f} | **{ratio:.2f}×** "
            f"| {us(cr)} ({mr.server_pct or 0:.0f}%) · {us(ca)} ({ma.server_pct or 0:.0f}%) | {cpu_cell} "
            f"| {us(mr.p50)} · {us(mr.p99)} — {us(ma.p50)} · {us(ma.p99)} "
            f"| {us(gr)} ({(mr.gen_all_pct or 0) / load_cpus:.0f}%) "
            f"· {us(ga)} ({(ma.gen_all_pct or 0) / load_cpus:.0f}%) "
            f"| {mr.steal or 0:.0f}% · {ma.steal or 0:.0f}% | {r.case.target} "
            f"| {'**met**' if met else '**missed**'} |"
        )
        runs = {
            k: " / ".join(f"{per_msg(m, r.case)[0]:,.0f}" for m in sorted(v, key=lambda m: m.rate or 0))
            for k, v in r.runs.items()
        }
        unit = "TPS" if r.case.transactional else "msgs/s"
        notes.append(
            f"- {r.case.what}, {r.case.flush}: rmq runs {runs['rmq']}; Apache runs {runs['Apache']} ({unit})."
        )
        if r.case.transactional:
            notes.append(
                f"  Every half message answered SEND_OK was committed (median runs: rmq {mr.note}, Apache "
                f"{ma.note}; counted as the topic's max offsets after the run)."
            )
        for k, m in (("rmq", mr), ("Apache", ma)):
            if "SYSTEM_BUSY" in m.note:
                notes.append(f"  {k}'s median run: {m.note}.")
        if "rmq" in bound:
            notes.append(
                "  rmq's median run is generator-bound (its generator used "
                f"{(mr.gen_all_pct or 0) / load_cpus:.0f}% of CPU {cpu_list(ab.PIN.load)}, rmq's broker "
                f"{mr.server_pct or 0:.0f}% of its core): rmq's rate there is what the generator reached, so "
                "the ratio is a lower bound."
            )
        if "Apache" in bound:
            notes.append(
                "  Apache's median run is generator-bound: its rate may measure the generator, so the ratio "
                "may overstate rmq's lead (the row cannot meet its target)."
            )
    return "\n".join([*lines, "", "Runs:", "", *notes])


def main() -> int:
    ap = argparse.ArgumentParser(description="rmq beside Apache RocketMQ under the same C load generator")
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--inflight", type=int, default=8)
    ap.add_argument("--gen-procs", type=int, default=2)
    ap.add_argument("--backlog", type=int, default=400_000, help="drain: messages pulled (over 8 queues)")
    ap.add_argument("--pull-conns", type=int, default=2, help="drain: connections")
    ap.add_argument(
        "--pull-inflight", type=int, default=8, help="drain: pulls of 32 in flight per connection"
    )
    ap.add_argument("--only", default="", help="comma list of rows (" + ",".join(c.key for c in CASES) + ")")
    ap.add_argument("--broker-cpus", default=None)
    ap.add_argument("--load-cpus", default=None)
    ap.add_argument("--store-root", default=None, help="parent directory of the temporary stores")
    ap.add_argument(
        "--page-cache",
        choices=("full", "as-is"),
        default="full",
        help="full: before each run fill the page cache until little memory is free (benches/page_cache.py)",
    )
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    cases = [c for c in CASES if not a.only or c.key in a.only.split(",")]
    if not cases:
        ap.error(f"--only {a.only!r} names no row")
    try:
        ab.PIN.broker, ab.PIN.load = cpu_sets(a.broker_cpus, a.load_cpus)
    except ValueError as exc:
        ap.error(str(exc))
    build = Path(tempfile.mkdtemp(prefix="rmq-apache-raw-bin-"))
    started = time.monotonic()
    try:
        binary = build / "loadgen_c"
        why = bb.compile_c("loadgen_c.c", binary)
        if why is not None:
            raise SystemExit(why)
        templates = Templates(build)
        filler = page_cache.Filler(build / "page-cache-filler") if a.page_cache == "full" else None
        results = [Result(c) for c in cases]

        def run() -> None:
            for rnd in range(a.repeat):
                for r in results:
                    for kind in ("rmq", "Apache"):
                        log(f"{r.case.key} {kind} (round {rnd + 1}) ...")
                        m = once(kind, r.case, a, binary, templates, filler)
                        rate, cpu, gen = per_msg(m, r.case)
                        log(
                            f"  {rate:,.0f} msgs/s, broker {us(cpu)}/msg ({m.server_pct or 0:.0f}% of a "
                            f"core), generator {us(gen)}/msg ({m.gen_all_pct or 0:.0f}%), p50 {us(m.p50)}, "
                            f"steal {m.steal or 0:.0f}%"
                        )
                        r.runs[kind].append(m)

        try:
            ab.run_all(run)
        finally:
            if filler is not None:
                filler.close()
    finally:
        shutil.rmtree(build, ignore_errors=True)
    text = section(results, a, time.monotonic() - started)
    print(text)
    if not a.no_write:
        ab.write_section(a.out, text, BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
