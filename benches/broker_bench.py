"""End-to-end broker benchmark: produce and consume 1 KiB messages through ``python -m rmq.broker`` on
loopback, beside the loopback request/response ceiling measured in the same run.

Usage (from the repository root, with the package built, e.g. ``maturin develop -r``)::

    python benches/broker_bench.py                  # full run (~5 min), rewrites the broker section of
                                                    # benches/RESULTS.md
    python benches/broker_bench.py --quick          # 2 s windows, no 1-producer C++ row
    python benches/broker_bench.py --no-write       # print only
    python benches/broker_bench.py --wait-quiet 60  # on a shared machine: wait for other CPU use to stop
    python benches/broker_bench.py --max-steal 10   # shared host: measure again runs the hypervisor starved
    python benches/broker_bench.py --only raw-64 --flush SYNC_FLUSH --profile-broker /tmp/prof
    python benches/broker_bench.py --only-peers --repeat 3   # only rmq beside Redis and NATS JetStream
    python benches/broker_bench.py --skip-peers             # only rmq (no Redis / NATS fetched)
    python benches/broker_bench.py --skip-peer nats         # NATS columns say "skipped: --skip-peer"

What runs (every process is a child of this script, bound to 127.0.0.1, killed on exit):

* ``benches/echo_server.c``, the ceiling (compiled with ``$CC`` for the run; without a C compiler the
  script stops): a single-threaded epoll server answering each request frame with a response of the size
  the broker's answer has (send: ~200-byte header; pull: 32 copies of a 1 KiB record built by
  ``echo_server.build_record``; route lookups, so the C++ client can use it as name server and broker).
  A broker row above its ceiling means the ceiling is wrong: it is listed under "Problems in this run".
* a broker with ``flushDiskType=ASYNC_FLUSH``, then one with ``SYNC_FLUSH``, each with its embedded name
  server, a fresh store directory under ``--store-root`` and topic ``BenchTopic`` (8 queues, created with
  UPDATE_AND_CREATE_TOPIC).
* load generators that do not spend Python per message on the broker's behalf:

  - raw produce: ``benches/loadgen_c.c`` (compiled with ``$CC`` into a temporary directory; epoll,
    SEND_MESSAGE_V2 frames pre-encoded by ``loadgen.py`` and patched per request), or with ``--gen
    python`` / no C compiler ``benches/loadgen.py`` (uvloop). N connections x K requests in flight,
    spread over ``--gen-procs`` processes;
  - raw pull: ``benches/loadgen.py``, PULL_MESSAGE (maxMsgNums 32, no suspend) pipelined across the 8
    queues, records counted by walking the TOTALSIZE fields of the bodies;
  - ``benches/cpp_load.py``: the official C++ client (PyPI ``rocketmq``), one producer per process
    doing ``send_sync`` in a loop.

  The ceiling of each row is the same generator at the same concurrency against the echo server.
* peers (:func:`run_peers`, its own section of RESULTS.md): rmq beside Redis Streams (XADD, AOF
  ``appendfsync always`` / ``everysec``) and NATS JetStream (file store, publish with ack), fetched pinned by
  ``scripts/bench-peers`` (see ``benches/peers.py``) and driven by ``benches/loadgen_peer.c``: durable at
  1, 8 and 64 in flight, async at 8 and 64, 128-byte bodies at 8 and 64; every server fresh per run, its
  data under ``--store-root``. A peer that cannot be fetched stops the run unless ``--skip-peer`` names it.
* consume: everything the ASYNC_FLUSH produce rows stored (at most ``--consume-max``) is pulled back.
* rmq's own client (``rmq.client``, issue 4), beside the C++ client: ``benches/rmq_client_load.py``
  producers (specs ``rmq-1``, ``rmq-8``) and a ``LitePullConsumer`` (:func:`rmq_client_rows`); left out
  with ``--skip-rmq`` or when the package is missing.

Each produce row runs ``--warmup`` seconds unmeasured, then counts the responses completing inside a
``--duration`` window; latency is per request (send to response) for requests sent inside the window.
Besides rates the script samples CPU time from /proc: per request for the load generator and for the
server (broker or echo), the machine's CPU use just before each measurement (other load), and the
share of CPU time the hypervisor gave to other guests during it (steal). Each row also gives the load
generator's CPU per request and the share of a core its busiest process used: above
``GEN_BOUND_PCT`` % the row is marked *generator-bound* (the rate says more about the generator than the
server). A client or peer that is not installed gives a "skipped: <reason>" row, never a missing one.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import datetime as _dt
import json
import mmap
import os
import platform
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import loadgen  # noqa: E402
import page_cache  # noqa: E402
import peers  # noqa: E402
from pinning import cpu_sets, pin_sentence, pinned  # noqa: E402

BEGIN = "<!-- broker-bench:begin -->"
END = "<!-- broker-bench:end -->"
PEERS_BEGIN = "<!-- broker-peers:begin -->"
PEERS_END = "<!-- broker-peers:end -->"
TOPIC = "BenchTopic"
QUEUES = 8
BODY = 1024
GROUP = "bench_pg"
CONSUMER_GROUP = "bench_cg"

_CHILDREN: list[subprocess.Popen[Any]] = []


# --- child process handling --------------------------------------------------------------------------------


def _kill_children() -> None:
    for p in _CHILDREN:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
    for p in _CHILDREN:
        with contextlib.suppress(Exception):
            p.wait(5)
    _CHILDREN.clear()


atexit.register(_kill_children)


def _on_signal(signum: int, _frame: Any) -> None:
    _kill_children()
    raise SystemExit(128 + signum)


class Child:
    """A child process speaking lines on stdin/stdout; stdout is read by a thread into a queue."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        _CHILDREN.append(self.proc)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.err: list[str] = []
        threading.Thread(target=self._pump_out, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if len(self.err) < 2000:
                self.err.append(line)

    def expect(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {prefix!r} line in {timeout:.0f} s; stderr:\n{self.stderr_tail()}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(f"child exited before {prefix!r}; stderr:\n{self.stderr_tail()}")
            if line.startswith(prefix):
                return line

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def stderr_tail(self, n: int = 30) -> str:
        time.sleep(0.05)
        return "".join(self.err[-n:])

    def stop(self, timeout: float = 10) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc in _CHILDREN:
            _CHILDREN.remove(self.proc)


PROVISIONAL_ABOVE = 10.0
"""Other CPU use (% of the machine) before a run above which its row is marked provisional."""

GEN_BOUND_PCT = 70.0
"""A load generator process above this share of one core, or all of them together above this share of the
CPUs they run on (the pinned ``--load-cpus``, else the machine's), may be what limits the row."""


def gen_bound(m: Measure) -> str | None:
    """Why the generator of ``m`` may be what limits its rate, or None: pinned (``--load-cpus``), the
    processes share the pinned CPUs, so together they bind at a share of those, not of the machine."""
    cores = m.gen_cpus or os.cpu_count() or 1
    where = (
        f"the {cores} CPU{'s' if cores > 1 else ''} they were pinned to"
        if m.gen_cpus
        else f"the machine's {cores} cores"
    )
    if m.gen_core_pct is not None and m.gen_core_pct > GEN_BOUND_PCT:
        return f"its busiest process used {m.gen_core_pct:.0f}% of a core"
    if m.gen_all_pct is not None and m.gen_all_pct > GEN_BOUND_PCT * cores:
        return f"its processes used {m.gen_all_pct / 100:.2f} of {where}"
    return None


def compile_c(source: str, out: Path) -> str | None:
    """Compile ``benches/<source>`` with ``$CC -O2`` into `out`; None when built, else why not."""
    cc = os.environ.get("CC", "cc")
    try:
        subprocess.run(
            [cc, "-O2", "-o", str(out), str(HERE / source)],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        return f"cannot build benches/{source} with {cc}: {detail.strip()[:300]}"
    return None


def build_echo_server(workdir: Path) -> Path:
    """Compile ``benches/echo_server.c`` with ``$CC`` and write the pull record it serves; a failure stops
    the run (a ceiling slower than the broker is no ceiling)."""
    import echo_server

    out = workdir / "echo_server_c"
    why = compile_c("echo_server.c", out)
    if why is not None:
        raise SystemExit(f"the ceiling: {why}")
    (workdir / "record.bin").write_bytes(echo_server.build_record(BODY))
    return out


ECHO_BINARY: list[Path] = []


def start_echo_server() -> tuple[Child, str]:
    binary = ECHO_BINARY[0]
    child = Child([str(binary), str(binary.parent / "record.bin")])
    line = child.expect("ECHO-READY", 30)
    return child, line.split()[1]


# --- load runs ---------------------------------------------------------------------------------------------


@dataclass
class Measure:
    rate: float | None = None  # msgs/s (or req/s against the echo server)
    p50: float | None = None  # µs
    p99: float | None = None
    count: int = 0
    errors: int = 0
    error_samples: dict[str, int] = field(default_factory=dict)
    note: str = ""
    requests: int = 0  # all requests answered, warm-up and drain included
    gen_cpu_us: float | None = None  # load generator CPU per request
    gen_core_pct: float | None = None  # busiest generator process: its CPU over its run, % of one core
    gen_all_pct: float | None = None  # all generator processes together, % of one core
    gen_poll_pct: float | None = None  # --gen-spin-us: generators' idle polling, % of a core
    gen_cpus: int | None = None  # CPUs the generator processes were pinned to (None: unpinned, all of them)
    server_cpu_us: float | None = None  # server (broker or echo) CPU per request
    server_pct: float | None = None  # server: its CPU over the run, % of one core
    server_spin_pct: float | None = None  # rmq: its network thread polling instead of sleeping, % of one core
    busy: float | None = None  # share of all CPUs busy during the run, %
    background: float | None = None  # share of all CPUs busy just before the run (other work), %
    steal: float | None = None  # share of CPU time stolen by the hypervisor during the run, %
    loadavg: float | None = None  # 1-minute load average at the start of the run


def _percentile(sorted_vals: array[float] | list[float], q: float) -> float | None:
    if not sorted_vals:
        return None
    i = min(len(sorted_vals) - 1, max(0, round(q * (len(sorted_vals) - 1))))
    return sorted_vals[i]


_TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) of a process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _cpu_jiffies() -> list[int]:
    return [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]


def sys_cpu() -> tuple[float, float]:
    """(busy, total) jiffies over all CPUs."""
    vals = _cpu_jiffies()
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    total = sum(vals[:8])
    return total - idle, total


def steal_cpu() -> tuple[float, float]:
    """(steal, total) jiffies over all CPUs: time a virtual machine's CPUs were runnable but the
    hypervisor ran something else."""
    vals = _cpu_jiffies()
    return (vals[7] if len(vals) > 7 else 0), sum(vals[:8])


def python_worker(script: str, cfg: dict[str, Any]) -> Callable[[int, Path], list[str]]:
    """argv of a Python worker (``loadgen.py`` / ``cpp_load.py``) taking its config as JSON."""

    def argv(worker_id: int, lat_path: Path) -> list[str]:
        full = dict(cfg, worker_id=worker_id, lat_path=str(lat_path))
        return [sys.executable, str(HERE / script), json.dumps(full)]

    return argv


QUIET = {"wait": 0.0, "below": 10.0}


def wait_quiet() -> tuple[tuple[float, float], tuple[float, float]]:
    """Sample other CPU use for 0.3 s; with ``--wait-quiet S`` repeat (up to S seconds) until it is below
    ``--quiet-below`` %. Returns the last two samples."""
    deadline = time.monotonic() + QUIET["wait"]
    while True:
        s0 = sys_cpu()
        time.sleep(0.3)
        s1 = sys_cpu()
        busy = 100.0 * (s1[0] - s0[0]) / max(1.0, s1[1] - s0[1])
        if busy < QUIET["below"] or time.monotonic() >= deadline:
            return s0, s1
        time.sleep(0.7)


def run_workers(
    workers: list[Callable[[int, Path], list[str]]],
    warmup: float,
    duration: float,
    server_pid: int | None = None,
    spin_probe: Callable[[], float] | None = None,
) -> Measure:
    """Start one process per worker, wait for all READY, send GO, collect results and latencies.
    ``spin_probe``: seconds the server has spent polling instead of sleeping so far (rmq's network thread)."""
    tmp = Path(tempfile.mkdtemp(prefix="rmq-bench-lat-"))
    children: list[Child] = []
    try:
        for i, argv in enumerate(workers):
            children.append(Child(argv(i, tmp / f"lat-{i}.bin")))
        for c in children:
            c.expect("READY", 60)
        bg0, bg1 = wait_quiet()
        load1 = os.getloadavg()[0]
        start_at = time.monotonic() + warmup + 0.05
        end_at = start_at + duration
        spin0 = spin_probe() if spin_probe else 0.0
        srv0 = proc_cpu(server_pid) if server_pid else 0.0
        sys0 = sys_cpu()
        steal0 = steal_cpu()
        go_at = time.monotonic()
        for c in children:
            c.send(f"GO {start_at:.6f} {end_at:.6f}")
        results = []
        walls = []
        for c in children:
            left = end_at - time.monotonic() + loadgen.DRAIN_TIMEOUT + 30
            results.append(json.loads(c.expect("{", max(left, 5))))
            walls.append(time.monotonic() - go_at)
        srv1 = proc_cpu(server_pid) if server_pid else 0.0
        spin1 = spin_probe() if spin_probe else 0.0
        sys1 = sys_cpu()
        steal1 = steal_cpu()
        lat = array("d")
        for i in range(len(workers)):
            p = tmp / f"lat-{i}.bin"
            if p.exists():
                lat.frombytes(p.read_bytes())
        lat_sorted = sorted(lat)
    finally:
        for c in children:
            c.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    m = Measure(loadavg=load1)
    samples: dict[str, int] = {}
    for r in results:
        m.errors += r["errors"]
        for k, v in r["error_samples"].items():
            samples[k] = samples.get(k, 0) + v
        if r.get("failures"):
            for f in r["failures"]:
                samples[f"failure: {f}"] = samples.get(f"failure: {f}", 0) + 1
    m.error_samples = samples
    if results and results[0]["mode"] == "pull":
        msgs = sum(r["msgs"] for r in results)
        expected = sum(r["expected"] or 0 for r in results)
        firsts = [r["first_send"] for r in results if r["first_send"]]
        lasts = [r["last_recv"] for r in results if r["last_recv"]]
        if firsts and lasts and msgs:
            m.rate = msgs / (max(lasts) - min(firsts))
        m.count = msgs
        if msgs < expected:
            m.note = f"pulled {msgs} of {expected}"
    else:
        m.count = sum(r["ok"] for r in results)
        m.rate = m.count / duration if m.count else 0.0
    m.p50 = _percentile(lat_sorted, 0.50)
    m.p99 = _percentile(lat_sorted, 0.99)
    m.requests = sum(r["ok_total"] for r in results) + m.errors
    units = m.count if results and results[0]["mode"] == "pull" else m.requests  # per message for pulls
    if units:
        m.gen_cpu_us = 1e6 * sum(r.get("cpu", 0.0) for r in results) / units
    # A worker counts its CPU from GO (pull: from its start time) to its last response; its wall time here
    # runs to the parent reading its result, so the share is, if anything, low by the result's transit.
    # With --gen-spin-us the CPU a process spent polling without finding an answer is idle time: the
    # shares that mark a generator as the limit leave it out (shown beside them as "polling").
    work = [r.get("cpu", 0.0) - r.get("idle_poll", 0.0) for r in results]
    shares = [100.0 * c / w for c, w in zip(work, walls, strict=True) if w > 0]
    if shares:
        m.gen_core_pct = max(shares)
        m.gen_all_pct = 100.0 * sum(work) / max(walls)
        if any("idle_poll" in r for r in results) and os.environ.get("LOADGEN_SPIN_US"):
            m.gen_poll_pct = 100.0 * sum(r.get("idle_poll", 0.0) for r in results) / max(walls)
        if server_pid:
            m.server_cpu_us = 1e6 * (srv1 - srv0) / units
            m.server_pct = 100.0 * (srv1 - srv0) / max(walls)
        if spin_probe:
            m.server_spin_pct = 100.0 * (spin1 - spin0) / max(walls)
    if bg1[1] > bg0[1]:
        m.background = 100.0 * (bg1[0] - bg0[0]) / (bg1[1] - bg0[1])
    if sys1[1] > sys0[1]:
        m.busy = 100.0 * (sys1[0] - sys0[0]) / (sys1[1] - sys0[1])
    if steal1[1] > steal0[1]:
        m.steal = 100.0 * (steal1[0] - steal0[0]) / (steal1[1] - steal0[1])
    return m


def split_conns(conns: int, procs: int) -> list[int]:
    """Connections per generator process: ``conns`` spread over at most ``procs`` processes."""
    procs = max(1, min(procs, conns))
    return [conns // procs + (1 if i < conns % procs else 0) for i in range(procs)]


def raw_produce(
    addr: str,
    conns: int,
    inflight: int,
    warmup: float,
    duration: float,
    procs: int,
    server_pid: int | None,
    body: int = BODY,
    spin_probe: Callable[[], float] | None = None,
) -> Measure:
    per = split_conns(conns, procs)
    if NATIVE.binary is not None:
        host, port = addr.rsplit(":", 1)
        workers = [NATIVE.worker(host, port, n, inflight, body) for n in per]
    else:
        cfg = {
            "mode": "produce",
            "addr": addr,
            "inflight": inflight,
            "topic": TOPIC,
            "group": GROUP,
            "queues": QUEUES,
            "body_size": body,
        }
        workers = [python_worker("loadgen.py", dict(cfg, conns=n)) for n in per]
    return run_workers(workers, warmup, duration, server_pid, spin_probe)


class Native:
    """``benches/loadgen_c.c`` compiled for this run (``--gen native``/``auto``), or ``binary`` None."""

    def __init__(self) -> None:
        self.binary: Path | None = None
        self.workdir: Path | None = None
        self.templates: dict[int, Path] = {}  # body size -> template file
        self.why = "not requested"

    def build(self, workdir: Path) -> bool:
        out = workdir / "loadgen_c"
        why = compile_c("loadgen_c.c", out)
        if why is not None:
            self.why = why
            return False
        self.workdir = workdir
        self.template(BODY)
        self.binary = out
        self.why = ""
        return True

    def template(self, size: int) -> Path:
        """The SEND_MESSAGE_V2 templates for bodies of ``size`` bytes (written on first use)."""
        if size not in self.templates:
            assert self.workdir is not None
            path = self.workdir / f"send-templates-{size}.bin"
            body = (b"0123456789abcdef" * (size // 16 + 1))[:size]
            loadgen.native_templates(str(path), TOPIC, GROUP, body, QUEUES, f"{os.getpid():08X}0000")
            self.templates[size] = path
        return self.templates[size]

    def worker(
        self, host: str, port: str, conns: int, inflight: int, body: int = BODY
    ) -> Callable[[int, Path], list[str]]:
        templates = self.template(body)

        def argv(worker_id: int, lat_path: Path) -> list[str]:
            return [
                str(self.binary),
                host,
                port,
                str(conns),
                str(inflight),
                str(templates),
                str(lat_path),
                str(worker_id),
            ]

        return argv


NATIVE = Native()


def raw_pull(
    addr: str,
    ranges: list[list[int]],
    conns: int,
    inflight: int,
    limit: float,
    procs: int,
    server_pid: int | None,
) -> Measure:
    """Pull ``ranges`` ([queueId, start, end]); queues are split between ``procs`` processes."""
    procs = max(1, min(procs, len(ranges)))
    workers = []
    for i in range(procs):
        mine = ranges[i::procs]
        cfg = {
            "mode": "pull",
            "addr": addr,
            "conns": max(1, conns // procs),
            "inflight": inflight,
            "topic": TOPIC,
            "group": CONSUMER_GROUP,
            "ranges": mine,
            "batch": 32,
        }
        workers.append(python_worker("loadgen.py", cfg))
    return run_workers(workers, 0.0, limit, server_pid)


def cpp_produce(
    namesrv: str, producers: int, warmup: float, duration: float, server_pid: int | None
) -> Measure:
    workers = [
        python_worker(
            "cpp_load.py", {"namesrv": namesrv, "topic": TOPIC, "group": f"{GROUP}_cpp{i}", "body_size": BODY}
        )
        for i in range(producers)
    ]
    return run_workers(workers, warmup, duration, server_pid)


def rmq_produce(
    namesrv: str, producers: int, warmup: float, duration: float, server_pid: int | None, inflight: int = 1
) -> Measure:
    workers = [
        python_worker(
            "rmq_client_load.py",
            {
                "mode": "produce",
                "namesrv": namesrv,
                "topic": TOPIC,
                "group": f"{GROUP}_rmq{i}",
                "body_size": BODY,
                "inflight": inflight,
            },
        )
        for i in range(producers)
    ]
    return run_workers(workers, warmup, duration, server_pid)


def cpp_missing() -> str | None:
    """Why the official C++ client (PyPI ``rocketmq``) cannot run here, or None when it can."""
    try:
        import rocketmq.client  # noqa: F401
    except Exception as exc:  # ImportError, or OSError when librocketmq.so is missing
        return f"PyPI `rocketmq` (C++ client) not importable: {type(exc).__name__}: {str(exc)[:120]}"
    return None


def rmq_client_missing() -> str | None:
    """Why rmq's own client cannot run here, or None when it can."""
    try:
        import rmq.client  # noqa: F401
    except ImportError as exc:
        return f"`rmq.client` not importable: {exc}"
    if not (HERE / "rmq_client_load.py").exists():
        return "benches/rmq_client_load.py is missing"
    return None


# --- broker setup ------------------------------------------------------------------------------------------


def _invoke(addr: str, code: int, ext: dict[str, str], timeout_ms: int = 5000) -> Any:
    from rmq.remoting import create_request
    from rmq.remoting.client import invoke_sync

    return invoke_sync(addr, create_request(code, ext), timeout_ms)


def spun_s(broker: str) -> float:
    """Seconds the broker's network thread has spent polling instead of sleeping (``netThreadSpinMillis``)."""
    resp = _invoke(broker, 28, {})  # GET_BROKER_RUNTIME_INFO
    if resp.code != 0:
        raise RuntimeError(f"GET_BROKER_RUNTIME_INFO answered {resp.code} {resp.remark!r}")
    return int(json.loads(resp.body)["table"]["netThreadSpinMillis"]) / 1000


def create_topic(broker: str, namesrv: str, topic: str, queues: int) -> None:
    resp = _invoke(
        broker,
        17,  # UPDATE_AND_CREATE_TOPIC
        {
            "topic": topic,
            "defaultTopic": "TBW102",
            "readQueueNums": str(queues),
            "writeQueueNums": str(queues),
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "false",
        },
    )
    if resp.code != 0:
        raise RuntimeError(f"UPDATE_AND_CREATE_TOPIC answered {resp.code} {resp.remark!r}")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the C++ producer looks the route up in the name server
        resp = _invoke(namesrv, 105, {"topic": topic})
        if resp.code == 0 and resp.body:
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {topic} not routable through {namesrv} after 30 s")


def max_offsets(broker: str, topic: str, queues: int) -> list[int]:
    out = []
    for q in range(queues):
        resp = _invoke(broker, 30, {"topic": topic, "queueId": str(q)})  # GET_MAX_OFFSET
        if resp.code != 0:
            raise RuntimeError(f"GET_MAX_OFFSET answered {resp.code} {resp.remark!r}")
        out.append(int(resp.ext_fields["offset"]))
    return out


@dataclass
class Broker:
    child: Child
    broker_addr: str
    namesrv_addr: str

    @property
    def pid(self) -> int:
        return self.child.proc.pid


def start_broker(store_dir: Path, flush: str, profile: Path | None = None) -> Broker:
    """``python -m rmq.broker`` on loopback, ephemeral ports, embedded name server (as tests/brokerproc.py),
    optionally under cProfile (written when the broker exits on SIGTERM)."""
    args = [sys.executable]
    if profile is not None:
        args += ["-m", "cProfile", "-o", str(profile)]
    args += ["-m", "rmq.broker", "-p", "brokerIP1=127.0.0.1", "-p", "listenPort=0", "--namesrv-port", "0"]
    args += ["-p", f"storePathRootDir={store_dir}", "-p", f"flushDiskType={flush}", "--log-level", "WARNING"]
    child = Child(args)
    line = child.expect("RMQ-READY", 60)
    ready = dict(kv.split("=", 1) for kv in line.split()[1:])
    return Broker(child, ready["broker"], ready["namesrv"])


# --- scenarios ---------------------------------------------------------------------------------------------


@dataclass
class Row:
    section: str  # "produce" / "consume"
    flush: str
    client: str
    concurrency: str
    m: Measure
    ceiling: Measure | None
    target: str = ""
    met: bool | None = None

    @property
    def pct(self) -> float | None:
        if self.ceiling is None or not self.ceiling.rate or self.m.rate is None:
            return None
        return 100.0 * self.m.rate / self.ceiling.rate


@dataclass
class Spec:
    key: str
    client: str  # "raw" / "cpp"
    conns: int
    inflight: int
    flushes: tuple[str, ...]
    quick: bool = True

    @property
    def concurrency(self) -> str:
        if self.client == "cpp":
            return f"{self.conns} producer{'s' if self.conns > 1 else ''} (sync)"
        if self.inflight == 1:
            return f"{self.conns} producer{'s' if self.conns > 1 else ''} (sync)"
        if self.client == "rmq":
            return f"{self.conns} async producers x {self.inflight} in flight"
        return f"{self.conns} conns x {self.inflight} = {self.conns * self.inflight} in flight"


SPECS = [
    Spec("raw-1", "raw", 1, 1, ("ASYNC_FLUSH", "SYNC_FLUSH")),
    Spec("raw-8", "raw", 8, 1, ("ASYNC_FLUSH", "SYNC_FLUSH")),
    Spec("raw-64", "raw", 8, 8, ("ASYNC_FLUSH", "SYNC_FLUSH")),
    Spec("cpp-1", "cpp", 1, 1, ("ASYNC_FLUSH",), quick=False),
    Spec("cpp-8", "cpp", 8, 1, ("ASYNC_FLUSH", "SYNC_FLUSH")),
    Spec("rmq-1", "rmq", 1, 1, ("ASYNC_FLUSH",), quick=False),
    Spec("rmq-8", "rmq", 8, 1, ("ASYNC_FLUSH", "SYNC_FLUSH")),
    Spec("rmq-async-8", "rmq", 8, 8, ("ASYNC_FLUSH",)),
]
CLIENT_NAMES = {"raw": "raw frames", "cpp": "C++ client", "rmq": "rmq client"}


def targets(row: Row, spec: Spec | None) -> None:
    rate = row.m.rate or 0.0
    if spec is not None and spec.key in ("raw-8", "cpp-8", "rmq-8") and row.flush == "ASYNC_FLUSH":
        pct = row.pct or 0.0
        row.target = "≥ 40,000/s and ≥ 50% of ceiling"
        row.met = rate >= 40_000 and pct >= 50
    elif spec is not None and spec.key == "raw-64" and row.flush == "SYNC_FLUSH":
        row.target = "≥ 30,000/s"
        row.met = rate >= 30_000
    elif row.section == "consume" and row.client.startswith("raw"):
        row.target = "≥ 200,000/s"
        row.met = rate >= 200_000


def run_produce(spec: Spec, addr: str, namesrv: str, pid: int, a: argparse.Namespace) -> Measure:
    """The run with the median rate of ``--repeat`` runs. With ``--max-steal``, a run during which the
    hypervisor stole more CPU than that is measured again (at most ``--steal-retries`` times per row, all
    of them said in the row's note)."""
    runs: list[Measure] = []
    discarded: list[Measure] = []
    while len(runs) < max(1, a.repeat):
        try:
            m = run_produce_once(spec, addr, namesrv, pid, a)
        except (RuntimeError, TimeoutError, OSError, ValueError) as exc:  # a worker failed: record, go on
            log(f"  {spec.key} failed: {exc}")
            return Measure(note=f"failed: {str(exc).splitlines()[0][:200]}")
        stolen = a.max_steal is not None and (m.steal or 0.0) > a.max_steal
        if stolen and len(discarded) < a.steal_retries:
            log(f"  run of {fmt_rate(m)}/s with {m.steal:.0f}% steal set aside; measuring again")
            discarded.append(m)
            continue
        runs.append(m)
    runs.sort(key=lambda m: m.rate or 0.0)
    median = runs[len(runs) // 2]
    notes = []
    if len(runs) > 1:
        notes.append("runs " + " / ".join(fmt_rate(m) for m in runs))
    if discarded:
        said = " / ".join(f"{fmt_rate(m)} at {m.steal or 0:.0f}% steal" for m in discarded)
        notes.append(f"set aside: {said}")
    median.note = "; ".join(notes)
    return median


def run_produce_once(spec: Spec, addr: str, namesrv: str, pid: int, a: argparse.Namespace) -> Measure:
    if spec.client == "cpp":
        return cpp_produce(namesrv, spec.conns, a.warmup, a.duration, pid)
    if spec.client == "rmq":
        return rmq_produce(namesrv, spec.conns, a.warmup, a.duration, pid, spec.inflight)
    return raw_produce(addr, spec.conns, spec.inflight, a.warmup, a.duration, a.gen_procs, pid)


def rmq_client_rows(broker: Broker, total: int, a: argparse.Namespace) -> list[Row]:
    """Issue 4: rmq's own consumer beside the raw pull (its producer rows are the ``rmq-*`` specs).

    One ``LitePullConsumer`` (``benches/rmq_client_load.py``) of a fresh group reads ``BenchTopic`` from
    its first offset. No ceiling: its rebalance needs a broker, the echo server is not one.
    """
    why = "--skip-rmq" if a.skip_rmq else rmq_client_missing()
    if why is None and total <= 0:
        why = "nothing was stored to consume"
    if why is not None:
        skipped = Measure(note=f"skipped: {why}")
        return [Row("consume", "ASYNC_FLUSH", "rmq client (LitePullConsumer)", "1 consumer", skipped, None)]
    cfg = {
        "mode": "consume",
        "namesrv": broker.namesrv_addr,
        "topic": TOPIC,
        "group": f"{CONSUMER_GROUP}_rmq_{os.getpid()}",
        "expected": total,
    }
    log(f"consume {total} messages with rmq's LitePullConsumer ...")
    m = run_workers([python_worker("rmq_client_load.py", cfg)], 0.0, max(a.duration * 6, 60.0), broker.pid)
    log(f"  {describe(m)}")
    return [
        Row("consume", "ASYNC_FLUSH", "rmq client (LitePullConsumer)", "1 consumer, batches of 32", m, None)
    ]


def print_profile(path: Path, top: int = 25) -> None:
    """The broker's hottest functions (cProfile, by own time) to stderr."""
    import io
    import pstats

    out = io.StringIO()
    st = pstats.Stats(str(path), stream=out)
    st.sort_stats("tottime").print_stats(top)
    st.sort_stats("cumulative").print_stats(top)
    log(f"--- broker profile {path} ---\n{out.getvalue()}")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fmt_rate(m: Measure | None) -> str:
    if m is None or m.rate is None:
        return "n/a"
    return f"{m.rate:,.0f}"


def fmt_us(v: float | None) -> str:
    if v is None:
        return "n/a"
    if v >= 10_000:
        return f"{v / 1000:.1f} ms"
    return f"{v:.0f} µs"


def describe(m: Measure) -> str:
    s = f"{fmt_rate(m)}/s p50 {fmt_us(m.p50)} p99 {fmt_us(m.p99)}"
    if m.errors:
        s += f" errors {m.errors} {dict(list(m.error_samples.items())[:3])}"
    if m.note:
        s += f" ({m.note})"
    s += f" | CPU/req: generator {fmt_us(m.gen_cpu_us)}, server {fmt_us(m.server_cpu_us)}"
    s += f"; busy {m.busy or 0:.0f}% (before: {m.background or 0:.0f}%), steal {m.steal or 0:.0f}%"
    return s


def bench(a: argparse.Namespace) -> list[Row]:
    specs = [s for s in SPECS if (s.quick or not a.quick)]
    if a.only:
        specs = [s for s in specs if any(k in s.key for k in a.only.split(","))]
    # A client that cannot run gives a "skipped" row per scenario it would have measured, with the reason.
    missing = {
        "cpp": "--skip-cpp" if a.skip_cpp else cpp_missing(),
        "rmq": "--skip-rmq" if a.skip_rmq else rmq_client_missing(),
    }
    skipped_rows: dict[str, list[Row]] = {}
    for s in specs:
        why = missing.get(s.client)
        if why is not None:
            for flush in s.flushes:
                m = Measure(note=f"skipped: {why}")
                row = Row("produce", flush, CLIENT_NAMES[s.client], s.concurrency, m, None)
                skipped_rows.setdefault(flush, []).append(row)
    for client, why in missing.items():
        if why is not None:
            log(f"{CLIENT_NAMES[client]} rows skipped: {why}")
    specs = [s for s in specs if missing.get(s.client) is None]
    rows: list[Row] = []
    ceilings: dict[str, Measure] = {}

    echo, echo_addr = start_echo_server()
    try:
        log(f"echo server at {echo_addr}")
        for spec in specs:
            log(f"ceiling {spec.key} ...")
            ceilings[spec.key] = run_produce(spec, echo_addr, echo_addr, echo.proc.pid, a)
            log(f"  {describe(ceilings[spec.key])}")

        flushes = [f for f in ("ASYNC_FLUSH", "SYNC_FLUSH") if f in a.flush.split(",")]
        for flush in flushes:
            # Start every broker on an idle disk: the gigabytes an ASYNC_FLUSH run left dirty in the
            # page cache would otherwise still be written back while SYNC_FLUSH waits for its syncs.
            os.sync()
            if flush == "SYNC_FLUSH":
                measure_disk(a.store_root)  # the limit under the same conditions as the broker
            store = Path(tempfile.mkdtemp(prefix=f"rmq-bench-{flush.lower()}-", dir=a.store_root))
            broker = None
            profile = a.profile_broker / f"broker-{flush.lower()}.prof" if a.profile_broker else None
            try:
                broker = start_broker(store, flush, profile)
                log(f"broker {flush} at {broker.broker_addr} (namesrv {broker.namesrv_addr}), store {store}")
                create_topic(broker.broker_addr, broker.namesrv_addr, TOPIC, QUEUES)
                for spec in specs:
                    if flush not in spec.flushes:
                        continue
                    log(f"{flush} {spec.key} ...")
                    m = run_produce(spec, broker.broker_addr, broker.namesrv_addr, broker.pid, a)
                    log(f"  {describe(m)}")
                    client = CLIENT_NAMES[spec.client]
                    row = Row("produce", flush, client, spec.concurrency, m, ceilings.get(spec.key))
                    targets(row, spec)
                    rows.append(row)
                rows += skipped_rows.get(flush, [])
                if flush == "ASYNC_FLUSH" and not a.skip_consume:
                    try:
                        consumed, total = consume_rows(broker, echo_addr, echo.proc.pid, a)
                        rows += consumed
                        rows += rmq_client_rows(broker, total, a)
                    except (RuntimeError, TimeoutError, OSError, ValueError) as exc:
                        log(f"consume failed: {exc}")
                        failed = Measure(note=f"failed: {str(exc).splitlines()[0][:200]}")
                        rows.append(Row("consume", flush, "raw frames (PULL)", "", failed, None))
            finally:
                if broker is not None:
                    broker.child.stop(timeout=60)
                    rc = broker.child.proc.returncode
                    if rc not in (0, -signal.SIGTERM):
                        log(f"broker exited with {rc}:\n{broker.child.stderr_tail()}")
                    if profile is not None and profile.exists():
                        print_profile(profile)
                shutil.rmtree(store, ignore_errors=True)
    finally:
        echo.stop()
    return rows


DISK_LIMIT: dict[int, tuple[float, float]] = {}
"""Records per msync -> (records/s, median msync µs), measured in this run by :func:`measure_disk`."""


def measure_disk(root: str | None, seconds: float = 2.0) -> None:
    """The durable-write limit of the store's disk, same run: one writer copies 1 KiB records into a
    memory-mapped file and msyncs after every 32 and every 64 records (what one group commit of 32 or 64
    in-flight sends costs at best, one flush at a time)."""
    size = 64 << 20
    rec = b"r" * 1024
    with tempfile.TemporaryDirectory(prefix="rmq-bench-disk-", dir=root) as d:
        for per in (32, 64):
            path = Path(d) / f"msync-{per}"
            with open(path, "w+b") as f:
                f.truncate(size)
                m = mmap.mmap(f.fileno(), size)
                # Small page-cache folios, as the store asks for its CommitLog: with large ones every
                # msync rewrites whole folios and the limit measured would be the amplified one.
                m.madvise(mmap.MADV_RANDOM)
                pos, syncs, count, durations = 0, 0, 0, []
                start = time.perf_counter()
                while time.perf_counter() - start < seconds and pos + per * 1024 <= size:
                    first = pos
                    for _ in range(per):
                        m[pos : pos + 1024] = rec
                        pos += 1024
                    t = time.perf_counter()
                    page = first // mmap.PAGESIZE * mmap.PAGESIZE
                    m.flush(page, pos - page)
                    durations.append(time.perf_counter() - t)
                    syncs += 1
                    count += per
                elapsed = time.perf_counter() - start
                m.close()
            durations.sort()
            DISK_LIMIT[per] = (count / elapsed, durations[len(durations) // 2] * 1e6)
            log(f"disk: msync every {per} records: {count / elapsed:,.0f} records/s")


def consume_rows(
    broker: Broker, echo_addr: str, echo_pid: int, a: argparse.Namespace
) -> tuple[list[Row], int]:
    """Pull back what the produce rows stored (raw frames), then the same against the echo server."""
    offsets = max_offsets(broker.broker_addr, TOPIC, QUEUES)
    cap = a.consume_max // QUEUES
    ranges = [[q, 0, min(o, cap)] for q, o in enumerate(offsets)]
    total = sum(e for _, _, e in ranges)
    log(f"consume {total} messages from {QUEUES} queues (max offsets {offsets}) ...")
    limit = max(a.duration * 3, 30.0)
    m = raw_pull(broker.broker_addr, ranges, a.pull_conns, a.pull_inflight, limit, a.pull_procs, broker.pid)
    log(f"  {describe(m)}")
    log("consume ceiling ...")
    c = raw_pull(echo_addr, ranges, a.pull_conns, a.pull_inflight, limit, a.pull_procs, echo_pid)
    log(f"  {describe(c)}")
    conc = f"{a.pull_conns} conns x {a.pull_inflight} pulls of 32 in flight"
    row = Row("consume", "ASYNC_FLUSH", "raw frames (PULL)", conc, m, c)
    targets(row, None)
    return [row], total


# --- peers: Redis Streams and NATS JetStream beside rmq (issue 14, item 2) ---------------------------------


@dataclass
class PeerCase:
    """One row of the peer comparison: rmq, Redis and NATS at the same concurrency and body size."""

    key: str
    durable: bool  # rmq SYNC_FLUSH / Redis appendfsync always / NATS sync_interval always
    conns: int
    inflight: int
    body: int = BODY

    @property
    def flush(self) -> str:
        return "SYNC_FLUSH" if self.durable else "ASYNC_FLUSH"

    @property
    def concurrency(self) -> str:
        total = self.conns * self.inflight
        if self.inflight == 1:
            return f"{total} ({self.conns} conn{'s' if self.conns > 1 else ''} x 1)"
        return f"{total} ({self.conns} conns x {self.inflight})"

    @property
    def need(self) -> float:
        """The rate against Redis's the row must reach (issue 31 item 6: ≥ 1.5× at 1 KiB, ≥ 1.3× at 128 B)."""
        return 1.5 if self.body >= BODY else 1.3

    @property
    def target(self) -> str:
        if self.durable:
            return f"≥ {self.need:g}× Redis, CPU/msg ≤ Redis"
        return f"≥ {self.need:g}× Redis"


PEER_CASES = [
    PeerCase("durable-1", True, 1, 1),
    PeerCase("durable-8", True, 8, 1),
    PeerCase("durable-64", True, 8, 8),
    PeerCase("async-8", False, 8, 1),
    PeerCase("async-64", False, 8, 8),
    PeerCase("small-8", False, 8, 1, 128),
    PeerCase("small-64", False, 8, 8, 128),
]
SYSTEMS = ("rmq", *peers.NAMES)
SYSTEM_TITLES = {"rmq": "rmq", **peers.TITLES}


@dataclass
class PeerRow:
    case: PeerCase
    m: dict[str, Measure]  # system -> the run with the median rate (note: all runs, or why there is none)
    met: bool | None = None
    # Below the target while rmq's load generator may have been the limit: the ratio compares generators.
    gen_bound: bool = False

    def ratio(self, peer: str) -> float | None:
        rmq, other = self.m["rmq"].rate, self.m[peer].rate
        return rmq / other if rmq and other else None


class PeerSetup:
    """The peers' executables (fetched by ``scripts/bench-peers``) and ``benches/loadgen_peer.c`` built for
    the run; ``skipped`` maps a peer left out to the reason."""

    def __init__(self) -> None:
        self.paths: dict[str, Path] = {}
        self.skipped: dict[str, str] = {}
        self.loadgen: Path | None = None
        self.filler: page_cache.Filler | None = None
        """``--page-cache full``: tops the page cache up before each run."""

    def prepare(self, skip: list[str], workdir: Path) -> None:
        """Fetch what is not skipped and build the generator; anything missing stops the run."""
        for name in skip:
            self.skipped[name] = "--skip-peer"
        want = [n for n in peers.NAMES if n not in self.skipped]
        try:
            self.paths = peers.fetch(want)
        except peers.PeerMissing as exc:
            hint = "a peer can be left out with --skip-peer NAME, or all of them with --skip-peers"
            raise SystemExit(f"{exc}\n({hint})") from exc
        out = workdir / "loadgen_peer"
        why = compile_c("loadgen_peer.c", out)
        if why is not None:
            raise SystemExit(why)
        self.loadgen = out


PEERS = PeerSetup()


def peer_worker(name: str, port: int, conns: int, case: PeerCase) -> Callable[[int, Path], list[str]]:
    assert PEERS.loadgen is not None

    def argv(worker_id: int, lat_path: Path) -> list[str]:
        return peers.loadgen_argv(
            PEERS.loadgen, name, port, conns, case.inflight, case.body, lat_path, worker_id
        )

    return argv


def peer_once(system: str, case: PeerCase, a: argparse.Namespace) -> Measure:
    """One measured run of ``system`` for ``case``: a fresh server with its data in a fresh directory under
    ``--store-root`` (the filesystem of rmq's store), stopped and deleted afterwards."""
    if PEERS.filler is not None:
        filled = PEERS.filler.top_up()
        if filled:
            log(f"  page cache topped up with {filled >> 20} MiB")
    data = Path(tempfile.mkdtemp(prefix=f"rmq-bench-{system}-", dir=a.store_root))
    if case.durable:
        os.sync()  # start on an idle disk: nothing from the previous run still being written back
    try:
        if system == "rmq":
            with pinned(PIN.broker):
                broker = start_broker(data, case.flush)
            try:
                create_topic(broker.broker_addr, broker.namesrv_addr, TOPIC, QUEUES)
                with pinned(PIN.load):  # the generator processes start inside, on --load-cpus
                    m = raw_produce(
                        broker.broker_addr,
                        case.conns,
                        case.inflight,
                        a.warmup,
                        a.duration,
                        a.gen_procs,
                        broker.pid,
                        case.body,
                        lambda: spun_s(broker.broker_addr),
                    )
                m.gen_cpus = len(PIN.load) if PIN.load else None
                return m
            finally:
                broker.child.stop(timeout=60)
        port = peers.free_port()
        if system == "redis":
            argv = peers.redis_argv(PEERS.paths[system], port, data, "always" if case.durable else "everysec")
        else:
            argv = peers.nats_argv(PEERS.paths[system], port, data, case.durable)
        with pinned(PIN.broker):
            server = Child(argv)
        try:
            try:
                peers.wait_ready(system, port, lambda: server.proc.poll() is None)
            except peers.PeerMissing as exc:
                raise peers.PeerMissing(f"{exc}; its output:\n{server.stderr_tail()}") from exc
            with pinned(PIN.load):
                workers = [peer_worker(system, port, n, case) for n in split_conns(case.conns, a.gen_procs)]
                m = run_workers(workers, a.warmup, a.duration, server.proc.pid)
            m.gen_cpus = len(PIN.load) if PIN.load else None
            return m
        finally:
            server.stop(timeout=30)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def run_peers(a: argparse.Namespace) -> list[PeerRow]:
    """Every case of ``--peer-cases``: ``--repeat`` rounds, each running rmq, Redis and NATS one after the
    other (so a change in the machine's load touches all three alike); per system the run with the median
    rate is kept, all runs are in its note. With ``--max-steal`` a run during which the hypervisor stole
    more is measured again, as for the broker rows."""
    cases = [c for c in PEER_CASES if not a.peer_cases or c.key in a.peer_cases.split(",")]
    if a.page_cache == "full":
        root = Path(a.store_root or tempfile.gettempdir())
        PEERS.filler = page_cache.Filler(root / f"rmq-bench-page-cache-{os.getpid()}")
    try:
        return peer_rows(cases, a)
    finally:
        if PEERS.filler is not None:
            PEERS.filler.close()
            PEERS.filler = None


def peer_rows(cases: list[PeerCase], a: argparse.Namespace) -> list[PeerRow]:
    rows = []
    for case in cases:
        runs: dict[str, list[Measure]] = {s: [] for s in SYSTEMS}
        aside: dict[str, list[Measure]] = {s: [] for s in SYSTEMS}
        failed: dict[str, str] = {}
        for i in range(max(1, a.repeat)):
            for system in SYSTEMS:
                while system not in PEERS.skipped and system not in failed:
                    log(f"peers {case.key} {system} (round {i + 1}) ...")
                    try:
                        m = peer_once(system, case, a)
                    except peers.PeerMissing as exc:
                        raise SystemExit(f"{SYSTEM_TITLES[system]} could not run: {exc}") from exc
                    except (RuntimeError, TimeoutError, OSError, ValueError) as exc:  # a worker failed
                        log(f"  failed: {exc}")
                        failed[system] = f"failed: {str(exc).splitlines()[0][:200]}"
                        break
                    log(f"  {describe(m)}")
                    stolen = a.max_steal is not None and (m.steal or 0.0) > a.max_steal
                    if stolen and len(aside[system]) < a.steal_retries:
                        log(f"  run with {m.steal:.0f}% steal set aside; measuring again")
                        aside[system].append(m)
                        continue
                    runs[system].append(m)
                    break
        medians: dict[str, Measure] = {}
        for system in SYSTEMS:
            if system in PEERS.skipped:
                medians[system] = Measure(note=f"skipped: {PEERS.skipped[system]}")
            elif not runs[system]:
                medians[system] = Measure(note=failed.get(system, "no run"))
            else:
                done = sorted(runs[system], key=lambda m: m.rate or 0.0)
                median = done[len(done) // 2]
                notes = ["runs " + " / ".join(fmt_rate(m) for m in done)] if len(done) > 1 else []
                if system in failed:
                    notes.append(failed[system])
                if aside[system]:
                    said = " / ".join(f"{fmt_rate(m)} at {m.steal or 0:.0f}% steal" for m in aside[system])
                    notes.append(f"set aside: {said}")
                median.note = "; ".join(notes)
                medians[system] = median
        row = PeerRow(case, medians)
        ratio = row.ratio("redis")
        if ratio is not None:
            rmq_cpu, redis_cpu = medians["rmq"].server_cpu_us, medians["redis"].server_cpu_us
            cpu_ok = rmq_cpu is not None and redis_cpu is not None and rmq_cpu <= redis_cpu
            row.met = ratio >= case.need and (cpu_ok or not case.durable)
            if not row.met and gen_bound(medians["rmq"]) is not None:
                row.met, row.gen_bound = None, True
        rows.append(row)
    return rows


PEER_HEADER = (
    "| case | body | in flight | msgs/s: rmq · Redis · NATS | rmq ÷ Redis | rmq ÷ NATS "
    "| server CPU/msg: rmq · Redis · NATS | p50: rmq · Redis · NATS | p99: rmq · Redis · NATS "
    "| generator CPU/msg (busiest process / all, % of a core): rmq · Redis · NATS "
    "| other load: rmq · Redis · NATS | steal: rmq · Redis · NATS | target | met |"
)


def _three(row: PeerRow, fmt: Callable[[Measure], str]) -> str:
    """One measure of rmq, Redis and NATS; a system without a run says why in one word."""

    def one(m: Measure) -> str:
        if m.rate is not None:
            return fmt(m)
        return m.note.split(":", 1)[0] if m.note else "—"

    return " · ".join(one(row.m[s]) for s in SYSTEMS)


def _server_short(m: Measure) -> str:
    if m.server_cpu_us is None:
        return "n/a"
    if m.server_pct is None:
        return f"{m.server_cpu_us:.1f} µs"
    spin = f", {m.server_spin_pct:.0f}% polling" if m.server_spin_pct is not None else ""
    return f"{m.server_cpu_us:.1f} µs ({m.server_pct:.0f}%{spin})"


def _gen_short(m: Measure) -> str:
    if m.gen_cpu_us is None:
        return "n/a"
    poll = f", {m.gen_poll_pct:.0f}% polling" if m.gen_poll_pct is not None else ""
    s = f"{m.gen_cpu_us:.1f} µs ({m.gen_core_pct or 0:.0f}% / {m.gen_all_pct or 0:.0f}%{poll})"
    return s + " **generator-bound**" if gen_bound(m) is not None else s


def _other_load(m: Measure) -> str:
    if m.background is None:
        return "n/a"
    s = f"{m.background:.0f}%"
    return s + " (provisional)" if m.background > PROVISIONAL_ABOVE else s


def peer_table(rows: list[PeerRow]) -> list[str]:
    out = [PEER_HEADER, "|" + "---|" * 14]
    for r in rows:
        c = r.case
        name = "durable" if c.durable else "async"
        ratios = [f"**{x:.2f}×**" if (x := r.ratio(p)) is not None else "—" for p in peers.NAMES]
        met = (
            "generator-bound"
            if r.gen_bound
            else ""
            if r.met is None
            else ("**met**" if r.met else "**missed**")
        )
        out.append(
            f"| {name} | {c.body} B | {c.concurrency} | {_three(r, fmt_rate)} | {ratios[0]} | {ratios[1]} "
            f"| {_three(r, _server_short)} "
            f"| {_three(r, lambda m: fmt_us(m.p50))} | {_three(r, lambda m: fmt_us(m.p99))} "
            f"| {_three(r, _gen_short)} | {_three(r, _other_load)} "
            f"| {_three(r, lambda m: f'{m.steal:.0f}%' if m.steal is not None else 'n/a')} "
            f"| {c.target} | {met} |"
        )
    return out


def peer_notes(rows: list[PeerRow]) -> list[str]:
    """Per row: the runs behind each median, skipped or failed systems, error responses."""
    out = []
    for r in rows:
        parts = []
        for s in SYSTEMS:
            m = r.m[s]
            said = m.note
            if m.errors:
                said += f"{'; ' if said else ''}{m.errors} error responses, e.g. {list(m.error_samples)[:2]}"
            if said:
                parts.append(f"{SYSTEM_TITLES[s]}: {said}")
        if parts:
            out.append(f"- {r.case.key}: " + "; ".join(parts) + ".")
    return out


def peer_summary(rows: list[PeerRow]) -> list[str]:
    out = []
    for r in rows:
        ratio = r.ratio("redis")
        if ratio is None:
            continue
        c = r.case
        what = f"{'durable' if c.durable else 'async'}, {c.body} B, {c.conns * c.inflight} in flight"
        cpu = ""
        if c.durable:
            rc, pc = r.m["rmq"].server_cpu_us, r.m["redis"].server_cpu_us
            if rc is not None and pc is not None:
                cpu = f", broker CPU per durable send {rc:.1f} µs against Redis's {pc:.1f} µs"
        verdict = (
            "not measurable: rmq's load generator bound the rate"
            if r.gen_bound
            else ("met" if r.met else "missed")
        )
        out.append(
            f"- {what}: rmq **{fmt_rate(r.m['rmq'])}/s** against Redis {fmt_rate(r.m['redis'])}/s = "
            f"**{ratio:.2f}×**{cpu} (target {c.target}: {verdict})."
        )
    return out


@dataclass
class Pin:
    """``--broker-cpus`` / ``--load-cpus`` (the peer comparison): the CPU sets every server (rmq, Redis, NATS)
    and the load generator processes start on; None: unpinned."""

    broker: set[int] | None = None
    load: set[int] | None = None


PIN = Pin()


def peer_section(rows: list[PeerRow], a: argparse.Namespace, elapsed: float, errors: list[str]) -> str:
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    rmq_gen = (
        "`benches/loadgen_c.c` (SEND_MESSAGE_V2 into the 8 queues of one topic)"
        if NATIVE.binary is not None
        else "`benches/loadgen.py` (no C compiler: Python)"
    )
    lines = [
        "## rmq beside Redis Streams and NATS JetStream (`python benches/broker_bench.py`, issue 14 item 2)",
        "",
        f"Measured {now} on this machine: {machine_info()}. Windows of {a.duration:g} s after {a.warmup:g} s "
        f"warm-up; {max(1, a.repeat)} round{'s' if a.repeat > 1 else ''} per row, each running rmq, Redis "
        "and NATS one after the other; per system the run with the median rate"
        f"{' (all runs below the table)' if a.repeat > 1 else ''}; ratios are of those medians. "
        f"Whole comparison {elapsed:.0f} s{' (--quick)' if a.quick else ''}.",
        "",
        "- *Servers*, each started fresh for every run with its data in a fresh directory on the filesystem "
        "of rmq's store (`--store-root`), and stopped after it: rmq (`python -m rmq.broker`, topic of "
        f"{QUEUES} queues); Redis 7.0.15 (Debian's `redis-server` 5:7.0.15-1~deb12u10) with "
        "`appendonly yes`, no RDB snapshots; NATS `nats-server` v2.15.2 with JetStream, stream `BENCH` in "
        "file storage. Both peers are fetched, pinned and cached by `scripts/bench-peers` (run by this "
        "script).",
        (
            "- Page cache: **full** — before every run a sparse file is read into the page cache until "
            "little memory is free (`benches/page_cache.py`), so every server writes into reclaimed pages, "
            "as a server that has run a while does, whatever ran before it."
            if a.page_cache == "full"
            else "- Page cache: **as is** — memory left as the previous runs left it."
        ),
        "- *durable*: rmq `flushDiskType=SYNC_FLUSH` (a send is answered after the msync covering it); Redis "
        "`appendfsync always` (the AOF is fsynced before the reply); NATS `sync_interval: always` (fsync "
        "per write before the ack). *async*: rmq ASYNC_FLUSH; Redis `appendfsync everysec`; NATS's default "
        "(fsync every 2 minutes).",
        f"- *Load generators*, {a.gen_procs} processes each, N connections x K requests in flight: rmq "
        f"{rmq_gen}; Redis and NATS `benches/loadgen_peer.c` (same epoll loop and accounting): Redis "
        "`XADD bench * f <body>`, every connection appending to the one stream `bench` (as redis-benchmark "
        "does with one key); NATS `PUB bench.s <reply inbox> <n>` to the JetStream stream, each request "
        "complete when its PubAck arrives on its reply subject."
        + (
            f" Every generator polls for answers for up to {a.gen_spin_us:g} µs before it sleeps "
            "(`--gen-spin-us`), so a server's answer wakes nobody; the CPU it spends polling without "
            'finding one is shown as its "polling" share and left out of the shares that mark it as '
            "the limit."
            if a.gen_spin_us > 0
            else ""
        ),
        pin_sentence(PIN.broker, PIN.load, "the servers", "the load generators")
        + "- *Server CPU/msg*: user + system CPU of the server process (all its threads) over the run "
        "divided by the requests it answered, and its CPU over the run as a share of one core; for rmq, "
        "the share of a core its network thread spent polling for requests instead of sleeping "
        "(`networkThreadSpinMicros`) follows: idle time, counted in its CPU. "
        "*Generator CPU/msg*: the same for the load generator processes, with "
        f"the share of a core its busiest process used / all of them used; when the busiest is above "
        f"{GEN_BOUND_PCT:.0f}% of a core, or all of them together above {GEN_BOUND_PCT:.0f}% of the CPUs "
        "they share (the pinned `--load-cpus`, else the machine's), the row is marked **generator-bound**. "
        "*Other load*: CPU use on the machine just before each run from processes "
        f"outside the benchmark; above {PROVISIONAL_ABOVE:.0f}% the figure is provisional. *Steal*: CPU time "
        "the hypervisor gave to other guests during the run.",
        "",
        *peer_table(rows),
        "",
        *peer_summary(rows),
    ]
    notes = peer_notes(rows)
    if notes:
        lines += ["", "Runs and notes:", "", *notes]
    if errors:
        lines += ["", "Problems in this comparison:", "", *[f"- {e}" for e in errors]]
    return "\n".join(lines)


def peer_problems(rows: list[PeerRow]) -> list[str]:
    out = []
    for r in rows:
        for s in SYSTEMS:
            m = r.m[s]
            why = gen_bound(m)
            if why is not None:
                out.append(f"{r.case.key} {SYSTEM_TITLES[s]}: the load generator may be the limit: {why}")
            if m.errors:
                out.append(f"{r.case.key} {SYSTEM_TITLES[s]}: {m.errors} error responses")
            if m.note.startswith("failed"):
                out.append(f"{r.case.key} {SYSTEM_TITLES[s]}: {m.note}")
            if m.rate == 0 and m.requests:
                out.append(
                    f"{r.case.key} {SYSTEM_TITLES[s]}: {m.requests} requests answered, none inside the "
                    "measured window (the server stalled for longer than the window; see p99 of other runs)"
                )
    return out


# --- report ------------------------------------------------------------------------------------------------


def machine_info() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    uv = "yes" if loadgen.uvloop_available() else "no"
    return (
        f"nproc {os.cpu_count()}, {cpu}, Python {platform.python_version()} "
        f"({platform.python_implementation()}), uvloop {uv}, {platform.system()} {platform.release()}"
    )


HEADER = (
    "| scenario | flush | client | producers / in flight | msgs/s | p50 | p99 | ceiling req/s "
    "| % of ceiling | server CPU/msg: broker (echo) "
    "| generator CPU/msg, busiest / all processes in % of a core: broker (echo) "
    "| other load | steal: broker (echo) | target | met |"
)


def fmt_pair(r: Row, field: str, fmt: Callable[[float], str]) -> str:
    """A measure of the row beside the same measure of its ceiling run: "broker (echo)"."""
    b = getattr(r.m, field)
    e = getattr(r.ceiling, field) if r.ceiling is not None else None
    if b is None:
        return "n/a"
    return f"{fmt(b)} ({fmt(e)})" if e is not None else fmt(b)


def table(rows: list[Row]) -> list[str]:
    out = [HEADER, "|" + "---|" * 15]
    for r in rows:
        pct = f"{r.pct:.0f}%" if r.pct is not None else "n/a"
        met = "" if r.met is None else ("**met**" if r.met else "**missed**")
        err = f" ({r.m.errors} errors)" if r.m.errors else ""
        note = f" ({r.m.note})" if r.m.note else ""
        bg = f"{r.m.background:.0f}%" if r.m.background is not None else "n/a"
        if r.m.loadavg is not None:
            bg += f", load {r.m.loadavg:.1f}"
        if (r.m.background or 0.0) > PROVISIONAL_ABOVE:
            bg += " (provisional: other jobs running)"
        cpu = fmt_pair(r, "server_cpu_us", lambda v: f"{v:.1f} µs")
        gen = fmt_gen(r.m)
        if r.ceiling is not None and r.ceiling.gen_cpu_us is not None:
            gen += f" ({fmt_gen(r.ceiling)})"
        steal = fmt_pair(r, "steal", lambda v: f"{v:.0f}%")
        out.append(
            f"| {r.section} | {r.flush} | {r.client} | {r.concurrency} | {fmt_rate(r.m)}{err}{note} "
            f"| {fmt_us(r.m.p50)} | {fmt_us(r.m.p99)} | {fmt_rate(r.ceiling)} | {pct} | {cpu} | {gen} "
            f"| {bg} | {steal} | {r.target} | {met} |"
        )
    return out


def fmt_gen(m: Measure) -> str:
    """Generator CPU per request and its busiest process's share of a core, flagged when it may bind."""
    if m.gen_cpu_us is None:
        return "n/a"
    s = f"{m.gen_cpu_us:.1f} µs"
    if m.gen_core_pct is not None and m.gen_all_pct is not None:
        s += f", {m.gen_core_pct:.0f}% / {m.gen_all_pct:.0f}% of a core"
    if gen_bound(m) is not None:
        s += " **generator-bound**"
    return s


def honesty_problems(rows: list[Row]) -> list[str]:
    """Rows the bench cannot vouch for: above their ceiling (the ceiling is wrong) or generator-bound."""
    out = []
    for r in rows:
        name = f"{r.section} {r.flush} {r.client} {r.concurrency}"
        if r.pct is not None and r.pct > 100:
            out.append(
                f"{name}: {fmt_rate(r.m)}/s is {r.pct:.0f}% of its ceiling {fmt_rate(r.ceiling)}/s: the "
                "ceiling is wrong (or the machine changed between the two runs; see other load and steal)"
            )
        for what, m in (("row", r.m), ("ceiling", r.ceiling)):
            why = gen_bound(m) if m is not None else None
            if why is not None:
                out.append(f"{name} ({what}): the load generator may be the limit: {why}")
    return out


def summary(rows: list[Row]) -> list[str]:
    out = []
    for r in rows:
        if r.met is None:
            continue
        pct = f", {r.pct:.0f}% of the {fmt_rate(r.ceiling)}/s ceiling" if r.pct is not None else ""
        verdict = "met" if r.met else "missed"
        bound = ""
        if (
            not r.met
            and r.target.startswith("≥ 40,000/s")
            and r.ceiling is not None
            and (r.ceiling.rate or 0.0) < 40_000
            and (r.pct or 0.0) >= 50
        ):
            bound = (
                f" The client itself tops out at {fmt_rate(r.ceiling)}/s against the echo server, which does "
                "nothing: 40,000/s is beyond this client on this machine, and the broker gives it "
                f"{r.pct:.0f}% of that."
            )
        out.append(
            f"- {r.section}, {r.client}, {r.concurrency}, {r.flush}: **{fmt_rate(r.m)} msgs/s**{pct} "
            f"(target {r.target}: {verdict}).{bound}"
        )
    cpp8 = [
        r
        for r in rows
        if r.client == "C++ client" and r.flush == "ASYNC_FLUSH" and "8 producers" in r.concurrency
    ]
    rmq_async = [r for r in rows if r.client == "rmq client" and "async producers" in r.concurrency]
    if cpp8 and rmq_async and cpp8[0].m.rate and rmq_async[0].m.rate:
        met = rmq_async[0].m.rate >= cpp8[0].m.rate
        out.append(
            f"- rmq's async producer ({rmq_async[0].concurrency}): "
            f"**{fmt_rate(rmq_async[0].m)} msgs/s** against "
            f"{fmt_rate(cpp8[0].m)} msgs/s for the C++ client's sync send from the same 8 producers "
            f"(target: at least as fast: {'met' if met else 'missed'})."
        )
    sends = [r for r in rows if r.section == "produce" and r.client == "raw frames" and r.m.server_cpu_us]
    if sends:
        best = min(sends, key=lambda r: r.m.server_cpu_us or 0.0)
        cpu = best.m.server_cpu_us or 1.0
        echo = best.ceiling.server_cpu_us if best.ceiling else None
        vs = f" against {echo:.1f} µs for the echo server" if echo else ""
        out.append(
            f"- Broker CPU per 1 KiB send: {cpu:.1f} µs at best ({best.concurrency}, {best.flush}){vs}: "
            "plain sends are framed, stored and answered by the broker's Rust network thread; Python "
            "handles the other requests."
        )
    if DISK_LIMIT:
        parts = [
            f"every {per} records {rate:,.0f} records/s (msync p50 {p50:,.0f} µs)"
            for per, (rate, p50) in sorted(DISK_LIMIT.items())
        ]
        out.append(
            "- Disk limit, same run (one writer, 1 KiB records into an mmap, msync): "
            + "; ".join(parts)
            + " (one msync at a time, small page-cache folios as the store uses). A SYNC_FLUSH send is "
            "answered only after an msync covering it; the broker's group commit keeps up to two msyncs "
            "in flight, so sends arriving during one are flushed by a second instead of waiting for it."
        )
    return out


def section(rows: list[Row], a: argparse.Namespace, elapsed: float, errors: list[str]) -> str:
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    gen = (
        "`benches/loadgen_c.c` (compiled by the script; epoll, pre-encoded SEND_MESSAGE_V2 frames patched "
        "per request)"
        if NATIVE.binary is not None
        else "`benches/loadgen.py` (uvloop, pre-encoded SEND_MESSAGE_V2 frames)"
    )
    lines = [
        "## Broker end to end (`python benches/broker_bench.py`)",
        "",
        f"Measured {now} on this machine: {machine_info()}. "
        f"Windows of {a.duration:g} s after {a.warmup:g} s warm-up"
        f"{f', median of {a.repeat} runs per produce row' if a.repeat > 1 else ''}; "
        f"1 KiB bodies; topic of {QUEUES} queues; "
        f"whole run {elapsed:.0f} s{' (--quick)' if a.quick else ''}."
        + (
            f" A produce run during which the hypervisor stole more than {a.max_steal:g}% of the CPU was "
            f"measured again (at most {a.steal_retries} times per row; the runs set aside are in the row's "
            "note)."
            if a.max_steal is not None
            else ""
        ),
        "",
        "- *Ceiling*: the same load generator at the same concurrency against `benches/echo_server.c`, "
        "a single-threaded epoll server in C (compiled for the run) that answers each frame with a response "
        "of the broker's size (send: ~200-byte header; pull: 32 records of 1 KiB) and does nothing else. "
        "A row above its ceiling is listed under the problems of the run.",
        "- *Generator CPU/msg*: user + system CPU of the load generator processes divided by the requests "
        "(per message for pulls), then the share of one core its busiest process / all its processes used "
        f"over the run; when the busiest is above {GEN_BOUND_PCT:.0f}% of a core, or all of them above "
        f"{GEN_BOUND_PCT:.0f}% of the machine's cores, the row is marked **generator-bound**. "
        "*skipped*: the client is not installed "
        "here (reason in the row). Redis Streams and NATS JetStream are measured beside rmq in the next "
        "section (same run unless `--skip-peers`); Apache RocketMQ is not driven by this script.",
        f"- *Raw frames* (produce): {gen}, {a.gen_procs} processes. *Raw frames (PULL)*: "
        "`benches/loadgen.py`, PULL_MESSAGE of 32 without suspend, pipelined across the queues, "
        "records counted in the bodies. "
        "*C++ client*: PyPI `rocketmq` 0.4.4, `send_sync` in a loop, one producer per process. "
        "*rmq client*: `rmq.client` (asyncio), `await Producer.send` in a loop, one producer per process; "
        "for consume one `LitePullConsumer` (batches of 32) reading the topic from its first offset.",
        "- Latency: send to response, per request. *Server CPU/msg*: user + system CPU of the broker (echo "
        "server) process over the run divided by the requests it answered (per message for pulls). *Other "
        "load*: CPU use on the machine just before the measurement, from processes outside the benchmark, "
        f"and the 1-minute load average; above {PROVISIONAL_ABOVE:.0f}% the row is provisional. "
        "*Steal*: share of the machine's CPU time during the measurement that the hypervisor gave to other "
        "guests (from /proc/stat); this virtual machine's host is shared, and rates fall as steal rises.",
        "",
        *table(rows),
        "",
        *summary(rows),
    ]
    if errors:
        lines += ["", "Problems in this run:", "", *[f"- {e}" for e in errors]]
    return "\n".join(lines)


def write_section(
    path: Path, text: str, begin: str = BEGIN, end: str = END, after: str | None = None
) -> None:
    """Replace the block between ``begin`` and ``end`` in ``path``; without one, put it after the line
    ``after`` when there is one, else at the end."""
    old = path.read_text() if path.exists() else ""
    block = f"{begin}\n{text}\n{end}"
    a, b = old.find(begin), old.find(end)
    at = old.find(after) if after else -1
    if a != -1 and b > a:
        new = old[:a] + block + old[b + len(end) :]
    elif at != -1:
        at += len(after or "")
        new = old[:at] + "\n\n" + block + old[at:]
    else:
        sep = "" if not old or old.endswith("\n\n") else ("\n" if old.endswith("\n") else "\n\n")
        new = f"{old}{sep}{block}\n"
    path.write_text(new)


def main() -> int:
    ap = argparse.ArgumentParser(description="rmq broker end-to-end benchmark (see the module docstring)")
    ap.add_argument("--duration", type=float, default=None, help="measured seconds per scenario (default 8)")
    ap.add_argument("--warmup", type=float, default=None, help="unmeasured seconds first (default 2)")
    ap.add_argument("--quick", action="store_true", help="2 s windows, no 1-producer C++/rmq client rows")
    ap.add_argument("--repeat", type=int, default=1, help="runs per produce row; the median is reported")
    ap.add_argument(
        "--out", type=Path, default=HERE / "RESULTS.md", help="file whose broker section to rewrite"
    )
    ap.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md alone")
    ap.add_argument(
        "--only",
        default="",
        help="comma list of scenario keys (raw-1,raw-8,raw-64,cpp-1,cpp-8,rmq-1,rmq-8,rmq-async-8)",
    )
    ap.add_argument("--flush", default="ASYNC_FLUSH,SYNC_FLUSH", help="broker runs to do")
    ap.add_argument("--skip-cpp", action="store_true", help="leave out the C++ client rows")
    ap.add_argument("--skip-consume", action="store_true")
    ap.add_argument("--skip-rmq", action="store_true", help="leave out rmq's own client (rmq.client) rows")
    ap.add_argument("--gen-procs", type=int, default=2, help="raw load generator processes")
    ap.add_argument(
        "--gen",
        choices=("auto", "native", "python"),
        default="auto",
        help="raw produce generator: native = benches/loadgen_c.c built with $CC (auto: if it builds)",
    )
    ap.add_argument("--pull-procs", type=int, default=1, help="raw pull generator processes")
    ap.add_argument("--pull-conns", type=int, default=2)
    ap.add_argument("--pull-inflight", type=int, default=8, help="pulls in flight per connection")
    ap.add_argument("--consume-max", type=int, default=2_000_000, help="at most this many messages pulled")
    ap.add_argument("--store-root", default=None, help="parent directory of the temporary store dirs")
    ap.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="S",
        help="before each measurement wait up to S seconds for other CPU use to drop below --quiet-below",
    )
    ap.add_argument("--quiet-below", type=float, default=10.0, metavar="PCT")
    ap.add_argument(
        "--page-cache",
        choices=("full", "as-is"),
        default="full",
        help="peer comparison: full = before each run fill the page cache until little memory is free "
        "(benches/page_cache.py); as-is = leave memory as it is",
    )
    ap.add_argument("--broker-cpus", default=None, help="CPU list for every server of the peer comparison")
    ap.add_argument("--load-cpus", default=None, help="CPU list for the peer comparison's load generators")
    ap.add_argument(
        "--max-steal",
        type=float,
        default=None,
        metavar="PCT",
        help="measure a produce run again when the hypervisor stole more than PCT%% of the CPU during it "
        "(the runs set aside are listed in the row's note)",
    )
    ap.add_argument("--steal-retries", type=int, default=3, help="at most this many runs set aside per row")
    ap.add_argument(
        "--skip-peers", action="store_true", help="leave out the comparison with Redis and NATS JetStream"
    )
    ap.add_argument(
        "--only-peers", action="store_true", help="run only the comparison with Redis and NATS JetStream"
    )
    ap.add_argument(
        "--skip-peer",
        default="",
        metavar="NAMES",
        help="comma list of peers (redis,nats) to leave out: their columns say skipped; without it a peer "
        "scripts/bench-peers cannot fetch stops the run",
    )
    ap.add_argument(
        "--peer-cases",
        default="",
        help="comma list of peer comparison rows (" + ",".join(c.key for c in PEER_CASES) + "; default all)",
    )
    ap.add_argument(
        "--profile-broker",
        type=Path,
        default=None,
        metavar="DIR",
        help="run the brokers under cProfile, keep broker-<flush>.prof in DIR, print the top functions "
        "(figures are then distorted: implies --no-write)",
    )
    ap.add_argument(
        "--gen-spin-us",
        type=float,
        default=0.0,
        metavar="US",
        help="peer comparison: the C load generators (every system's) poll for answers up to US "
        "microseconds before sleeping, as rmq's network thread does (default 0: they sleep at once, "
        "as clients do); the CPU they spend polling is shown and not counted as load",
    )
    a = ap.parse_args()
    if a.gen_spin_us < 0:
        ap.error("--gen-spin-us: a number of microseconds >= 0")
    os.environ.pop("LOADGEN_SPIN_US", None)  # set for the peer comparison only (--gen-spin-us)
    try:
        PIN.broker, PIN.load = cpu_sets(a.broker_cpus, a.load_cpus)
    except ValueError as e:
        ap.error(str(e))
    if a.duration is None:
        a.duration = 2.0 if a.quick else 8.0
    if a.warmup is None:
        a.warmup = 0.5 if a.quick else 2.0
    QUIET["wait"], QUIET["below"] = a.wait_quiet, a.quiet_below
    if a.profile_broker is not None:
        a.no_write = True
        a.profile_broker.mkdir(parents=True, exist_ok=True)
    skip_peer = [p for p in a.skip_peer.split(",") if p]
    for p in skip_peer:
        if p not in peers.NAMES:
            ap.error(f"--skip-peer: unknown peer {p!r} (one of {', '.join(peers.NAMES)})")
    for k in [k for k in a.peer_cases.split(",") if k]:
        if k not in {c.key for c in PEER_CASES}:
            ap.error(f"--peer-cases: unknown row {k!r}")
    if a.skip_peers and a.only_peers:
        ap.error("--skip-peers and --only-peers exclude each other")
    signal.signal(signal.SIGTERM, _on_signal)
    t0 = time.monotonic()
    errors: list[str] = []
    rows: list[Row] = []
    peer_rows: list[PeerRow] = []
    build_dir = Path(tempfile.mkdtemp(prefix="rmq-bench-bin-"))
    try:
        ECHO_BINARY[:] = [build_echo_server(build_dir)]
        if a.gen != "python" and not NATIVE.build(build_dir):
            if a.gen == "native":
                log(NATIVE.why)
                return 2
            log(f"{NATIVE.why}; using the Python generator")
        if not a.skip_peers:  # before the long broker run: a missing peer stops it at once
            PEERS.prepare(skip_peer, build_dir)
        if not a.only_peers:
            rows = bench(a)
        t_peers = time.monotonic()
        if not a.skip_peers:
            if a.gen_spin_us > 0:
                os.environ["LOADGEN_SPIN_US"] = f"{a.gen_spin_us:g}"  # read by loadgen_c.c, loadgen_peer.c
            peer_rows = run_peers(a)
        t_peers = time.monotonic() - t_peers
    finally:
        _kill_children()
        shutil.rmtree(build_dir, ignore_errors=True)
    if not a.skip_peers:
        text = peer_section(peer_rows, a, t_peers, peer_problems(peer_rows))
        print(text)
        if not a.no_write:
            write_section(a.out, text, PEERS_BEGIN, PEERS_END, after=END)
            log(f"wrote the peers section of {a.out}")
    if a.only_peers:
        return 0
    errors += honesty_problems(rows)
    for r in rows:
        if r.m.errors:
            errors.append(
                f"{r.section} {r.flush} {r.client} {r.concurrency}: {r.m.errors} error responses, "
                f"e.g. {list(r.m.error_samples.items())[:3]}"
            )
    text = section(rows, a, time.monotonic() - t0, errors)
    print(text)
    if not a.no_write:
        write_section(a.out, text)
        log(f"wrote the broker section of {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
