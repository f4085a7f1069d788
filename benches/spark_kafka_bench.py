"""Spark over the network: rmq's network source and sink beside Spark's own Kafka source and sink, on the
same messages, in one run (issue 29 item 4).

Usage (from the repository root, with the dev venv's Python: rmq and its dependencies, Java 17 and Maven)::

    python benches/spark_kafka_bench.py --broker-cpus 0 --load-cpus 1   # ~5 min, writes its section
    python benches/spark_kafka_bench.py --messages 2000 --runs 1 --no-write    # a smoke run

What runs (every process is a child of this script, on loopback, stopped on exit):

* the peers, fetched pinned by ``scripts/peers`` (a peer that cannot be fetched stops the run):
  Apache Kafka 4.1.1 (``kafka-4.1.1``: ``kafka_2.13`` and its runtime jars from Maven Central), Spark's
  Kafka connector ``spark-sql-kafka-0-10_2.13`` 4.2.0 (``spark-kafka-4.2.0``; Maven Central serves it for
  Spark 4.2.0 and 4.1.0 but not for 4.3.0, rmq's pyspark) and a venv of pyspark 4.2.0 (``pyspark-4.2.0``)
  in which both Spark sides run, rmq imported from this checkout's ``python/`` (``PYTHONPATH``; its
  modules compiled to bytecode first, as pip compiles an installed wheel's);
* the brokers, on ``--broker-cpus``: rmq as ``python -m rmq.broker`` (ASYNC_FLUSH, name server embedded,
  its store under ``--store-root``) and Kafka in KRaft mode (one process as broker and controller,
  ``kafka.Kafka`` after ``kafka.tools.StorageTool format``; the JVM flags of ``kafka-server-start.sh``; a
  topic of 8 partitions, its log flushed by the OS as Kafka's default);
* Spark on ``--load-cpus``: a pyspark 4.2.0 session, ``local[2]``, with the connector's jars that pyspark
  lacks as ``spark.jars`` (what ``spark.jars.packages`` would fetch), in a child Python (this script with
  ``--spark-child``).

The messages: ``--messages`` rows of 1 KiB bodies (the hex SHA-256 of the row number, repeated) written once
into a topic of 8 queues on rmq by rmq's sink and into a topic of 8 partitions on Kafka by Kafka's sink
(unmeasured; the counts and the queues used are checked). Then ``--runs`` rounds, each running every row on
both sides, which side goes first alternating:

* batch ``count()``, batch with every column decoded (``write.format("noop")``), and streaming
  ``Trigger.AvailableNow`` from the earliest offsets to the end (``noop`` sink): rmq through the JVM
  network reader (``rmq.spark.load`` / ``rmq.spark.read_stream`` with ``nameServer``, in rmq's jar; it
  prunes columns itself, as Kafka's source does), and, for information, through the Python network source
  (``format("rocketmq")``; its ``count()`` with ``.option("columns", "")``, as the README says to count:
  pyspark's Python data source API prunes no column);
* the sink: ``--messages`` rows (a ``body`` / ``value`` column) written into another topic of 8 queues /
  partitions: rmq at-least-once by ``rmq.spark.save`` (the JVM sink, in rmq's jar, which the session
  loads; the run stops if Spark cannot load it) and by ``df.write.format("rocketmq")`` (the Python sink),
  rmq exactly-once (the Python sink), Kafka's sink (at-least-once, its producer's defaults);
* rmq's store-direct reader of the same topic (the broker's store directory read by ``load(path)``), no
  broker involved: count and all columns.

Per row: the median of the runs' rows/s (every run listed), rmq ÷ Kafka (target ≥ 1×), executor CPU per
row (user + system of the Spark processes: the driver's Python, Spark's JVM, which runs the tasks in local
mode, and its Python workers, from /proc, reaped workers included) and broker CPU per row (the rmq process;
Kafka's JVM) over the run, and the CPU use of other processes over 0.5 s before each round of the row.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as _dt
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BEGIN = "<!-- spark-kafka-bench:begin -->"
END = "<!-- spark-kafka-bench:end -->"
QUEUES = 8
BODY = 1024
READ_TOPIC = "SparkNetRead"
SINK_TOPIC = "SparkNetSink"
EOS_TOPIC = "SparkNetSinkEos"
TARGET = 1.0
KAFKA = "kafka-4.1.1"
CONNECTOR = "spark-kafka-4.2.0"
PYSPARK = "pyspark-4.2.0"
# kafka-server-start.sh's heap and kafka-run-class.sh's JVM flags.
KAFKA_JVM = [
    "-Xms1g",
    "-Xmx1g",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]
_TICK = os.sysconf("SC_CLK_TCK")

# (key, what the row measures, target applies, kinds run): "both" rows run on rmq and Kafka, "rmq" rows
# on rmq only (their ratio is to the Kafka row named by the last element, for information).
ROWS: list[tuple[str, str, bool, str, str]] = [
    ("count", "batch `count()` (rmq: `rmq.spark.load`, the JVM network reader)", True, "both", ""),
    (
        "decode",
        'batch, all columns decoded (`write.format("noop")`; rmq: the JVM network reader)',
        True,
        "both",
        "",
    ),
    (
        "stream",
        "streaming `Trigger.AvailableNow` to the end (`noop` sink; rmq: `rmq.spark.read_stream`,"
        " the JVM network reader)",
        True,
        "both",
        "",
    ),
    ("count_py", 'batch `count()`, `format("rocketmq")`: the Python network source', False, "rmq", "count"),
    ("decode_py", "batch, all columns decoded, the Python network source", False, "rmq", "decode"),
    ("stream_py", "streaming `Trigger.AvailableNow`, the Python network source", False, "rmq", "stream"),
    ("sink", "sink (rmq `rmq.spark.save`: the JVM sink, at-least-once; Kafka's sink)", True, "both", ""),
    (
        "sink_py",
        'sink `df.write.format("rocketmq")`, the Python sink, at-least-once (beside Kafka\'s sink)',
        False,
        "rmq",
        "sink",
    ),
    (
        "sink_eos",
        "sink `df.write`, rmq `deliveryGuarantee=exactly_once` (beside Kafka's sink)",
        False,
        "rmq",
        "sink",
    ),
    (
        "direct_count",
        "rmq store-direct reader `count()` (beside Kafka's batch `count()`)",
        False,
        "rmq",
        "count",
    ),
    ("direct_decode", "rmq store-direct reader, all columns (noop; beside Kafka's)", False, "rmq", "decode"),
]


# --- /proc -----------------------------------------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def tree_pids(root: int) -> list[int]:
    """`root` and every process descended from it."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                children.setdefault(int(st[1]), []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def tree_cpu(root: int) -> float:
    """CPU seconds (user + system) of `root` and its descendants, including children they have reaped."""
    total = 0
    for pid in tree_pids(root):
        st = _stat(pid)
        if st is not None:
            total += int(st[11]) + int(st[12]) + int(st[13]) + int(st[14])
    return total / _TICK


def machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot."""
    v = list(map(int, Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]))
    return sum(v) - v[3] - v[4], sum(v)


def other_load(ours: list[int]) -> float:
    """Share of the machine's CPU that processes other than the trees of `ours` used over 0.5 s."""
    b0, own0 = machine_busy(), sum(tree_cpu(p) for p in ours)
    time.sleep(0.5)
    b1, own1 = machine_busy(), sum(tree_cpu(p) for p in ours)
    other = (b1[0] - b0[0]) - (own1 - own0) * _TICK
    return max(0.0, other / max(1, b1[1] - b0[1]))


# --- the Spark child (runs in the pyspark 4.2.0 venv) ---------------------------------------------------


def _connector_jars(lib: Path) -> list[str]:
    """The connector's jars whose artifact pyspark's own jars/ lacks (as ``spark.jars.packages`` adds
    them beside what Spark ships; a second scala-library or hadoop-client would clash)."""
    import pyspark

    def artifact(name: str) -> str:
        m = re.match(r"(.+?)-\d[^-]*(-.*)?\.jar$", name)
        return m.group(1) if m else name

    have = {artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(str(p) for p in lib.glob("*.jar") if artifact(p.name) not in have)


def spark_child(cfg: dict[str, Any]) -> None:
    import pyspark
    import rmq.spark
    from pyspark.sql import functions as F
    from spark_bench import bench_session

    n, ns, bs = cfg["messages"], cfg["namesrv"], cfg["bootstrap"]
    tmp = Path(cfg["tmp"])
    from rmq.spark.jvm import JVM_NET_SOURCE, JVM_SINK, jvm_class_available

    jars = _connector_jars(Path(cfg["connector_lib"]))
    rmq_jar = rmq.spark.jar_path()
    if rmq_jar is None:
        raise SystemExit("this checkout has no rmq Spark jar (the JVM sink): build it with scripts/spark-jar")
    spark = bench_session(
        "rmq-spark-kafka-bench", ",".join([*jars, rmq_jar]), **{"spark.sql.shuffle.partitions": str(QUEUES)}
    )
    spark.sparkContext.setLogLevel("ERROR")
    rmq.spark.register(spark)
    for cls in (JVM_SINK, JVM_NET_SOURCE):
        if not jvm_class_available(spark, cls):
            raise SystemExit(f"Spark cannot load rmq's {cls} from {rmq_jar}")
    me = os.getpid()
    brokers = {"rmq": cfg["rmq_pid"], "kafka": cfg["kafka_pid"]}
    out: dict[str, Any] = {"pyspark": pyspark.__version__, "jars": [Path(j).name for j in jars], "runs": {}}

    def say(msg: str) -> None:
        print(f"[spark] {msg}", file=sys.stderr, flush=True)

    body = F.substring(F.repeat(F.sha2(F.col("id").cast("string"), 256), BODY // 64), 1, BODY).cast("binary")
    data = spark.range(0, n, numPartitions=QUEUES).select(body.alias("body"))

    def rmq_write(topic: str, eos: bool = False) -> int:
        w = data.write.format("rocketmq").mode("append").option("nameServer", ns).option("topic", topic)
        if eos:
            w = w.option("deliveryGuarantee", "exactly_once")
        w.save()
        return n

    def rmq_save(topic: str) -> int:
        rmq.spark.save(data, nameServer=ns, topic=topic)  # the JVM sink: checked above that Spark loads it
        return n

    def kafka_write(topic: str) -> int:
        (
            data.withColumnRenamed("body", "value")
            .write.format("kafka")
            .mode("append")
            .option("kafka.bootstrap.servers", bs)
            .option("topic", topic)
            .save()
        )
        return n

    def rmq_read(columns: str | None = None):  # type: ignore[no-untyped-def]
        r = spark.read.format("rocketmq").option("nameServer", ns).option("topics", READ_TOPIC)
        return (r if columns is None else r.option("columns", columns)).load()

    def rmq_jvm_read(columns: str | None = None):  # type: ignore[no-untyped-def]
        extra = {} if columns is None else {"columns": columns}
        return rmq.spark.load(spark, nameServer=ns, topics=READ_TOPIC, **extra)

    def kafka_read():  # type: ignore[no-untyped-def]
        return (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", READ_TOPIC)
            .option("startingOffsets", "earliest")
            .load()
        )

    def direct(columns: str | None = None):  # type: ignore[no-untyped-def]
        r = spark.read.format("rocketmq").option("topics", READ_TOPIC)
        return (r if columns is None else r.option("columns", columns)).load(cfg["rmq_store"])

    def noop(df) -> int:  # type: ignore[no-untyped-def]
        df.write.format("noop").mode("overwrite").save()
        return n

    def stream(df) -> int:  # type: ignore[no-untyped-def]
        ckpt = tempfile.mkdtemp(dir=tmp, prefix="ckpt-")
        q = (
            df.writeStream.format("noop")
            .option("checkpointLocation", ckpt)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        rows = sum(p["numInputRows"] for p in q.recentProgress)
        shutil.rmtree(ckpt, ignore_errors=True)
        return int(rows)

    def rmq_stream() -> int:
        r = spark.readStream.format("rocketmq").option("nameServer", ns).option("topics", READ_TOPIC)
        return stream(r.option("startingOffsets", "earliest").load())

    def rmq_jvm_stream() -> int:
        return stream(
            rmq.spark.read_stream(spark, nameServer=ns, topics=READ_TOPIC, startingOffsets="earliest")
        )

    def kafka_stream() -> int:
        r = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", READ_TOPIC)
        )
        return stream(r.option("startingOffsets", "earliest").load())

    cases = {
        ("count", "rmq"): lambda: rmq_jvm_read().count(),
        ("count", "kafka"): lambda: kafka_read().count(),
        ("decode", "rmq"): lambda: noop(rmq_jvm_read()),
        ("decode", "kafka"): lambda: noop(kafka_read()),
        ("stream", "rmq"): rmq_jvm_stream,
        ("stream", "kafka"): kafka_stream,
        ("count_py", "rmq"): lambda: rmq_read("").count(),
        ("decode_py", "rmq"): lambda: noop(rmq_read()),
        ("stream_py", "rmq"): rmq_stream,
        ("sink", "rmq"): lambda: rmq_save(SINK_TOPIC),
        ("sink_py", "rmq"): lambda: rmq_write(SINK_TOPIC),
        ("sink", "kafka"): lambda: kafka_write(SINK_TOPIC),
        ("sink_eos", "rmq"): lambda: rmq_write(EOS_TOPIC, eos=True),
        ("direct_count", "rmq"): lambda: direct("").count(),
        ("direct_decode", "rmq"): lambda: noop(direct()),
    }

    def measure(key: str, side: str) -> dict[str, float]:
        broker = brokers[side]
        c0, b0, t0 = tree_cpu(me), tree_cpu(broker), time.perf_counter()
        rows = cases[(key, side)]()
        secs = time.perf_counter() - t0
        c1, b1 = tree_cpu(me), tree_cpu(broker)
        if rows != n:
            raise SystemExit(f"{key} on {side}: {rows} rows, expected {n}")
        say(f"{key} {side}: {secs:.2f} s, {rows / secs:,.0f} rows/s")
        return {"secs": secs, "rows": rows, "exec_cpu": c1 - c0, "broker_cpu": b1 - b0}

    # The messages: written once on each side (unmeasured), then checked: every row, every queue used.
    t0 = time.perf_counter()
    rmq_write(READ_TOPIC)
    kafka_write(READ_TOPIC)
    out["fill_s"] = round(time.perf_counter() - t0, 1)
    got_rmq = {r[0]: r[1] for r in rmq_read("queue_id").groupBy("queue_id").count().collect()}
    got_kafka = {r[0]: r[1] for r in kafka_read().groupBy("partition").count().collect()}
    for side, got in (("rmq", got_rmq), ("Kafka", got_kafka)):
        if sum(got.values()) != n or len(got) != QUEUES:
            raise SystemExit(f"{side}: the topic holds {sum(got.values())} rows in {len(got)} queues: {got}")
    out["per_queue"] = {"rmq": sorted(got_rmq.values()), "kafka": sorted(got_kafka.values())}
    say(f"filled both topics in {out['fill_s']} s; per queue rmq {sorted(got_rmq.values())}")
    direct("").count()  # with the checks above, the warm-up: JIT, Python workers, page cache
    ours = [me, *brokers.values()]
    for i in range(cfg["runs"]):
        for key, _what, _target, kinds, _vs in ROWS:
            if key not in cfg["rows"]:
                continue
            load = other_load(ours)
            sides = ["rmq", "kafka"] if kinds == "both" else ["rmq"]
            for side in sides if i % 2 == 0 else sides[::-1]:
                run = measure(key, side)
                run["other"] = load
                out["runs"].setdefault(key, {}).setdefault(side, []).append(run)
    spark.stop()
    Path(cfg["result"]).write_text(json.dumps(out))


# --- the brokers (the dev venv's Python) ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fetch_peers() -> tuple[Path, Path, Path]:
    """Kafka's lib, the connector's lib, the pyspark 4.2.0 venv's python (scripts/peers); a peer that
    cannot be fetched stops the run."""
    env = dict(os.environ, PYTHON=str(Path(sys.base_prefix) / "bin" / "python3"))
    proc = subprocess.run(
        [str(REPO / "scripts" / "peers"), KAFKA, CONNECTOR, PYSPARK],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(
            f"spark_kafka_bench: scripts/peers {KAFKA} {CONNECTOR} {PYSPARK} failed"
            f" (exit {proc.returncode}): no row without its peer\n{proc.stderr[-3000:]}"
        )
    kafka, connector, python = proc.stdout.split()[-3:]
    for p in (Path(kafka), Path(connector), Path(python)):
        if not p.exists():
            raise SystemExit(f"spark_kafka_bench: scripts/peers printed {p}, which does not exist")
    return Path(kafka), Path(connector), Path(python)


class Kafka:
    """Apache Kafka in KRaft mode: one process as broker and controller, on two free loopback ports."""

    def __init__(self, lib: Path, root: Path) -> None:
        java = shutil.which("java")
        if java is None:
            raise SystemExit("spark_kafka_bench: java (17) is needed for Kafka and Spark")
        self.port, cport = free_port(), free_port()
        root.mkdir(parents=True)
        props = root / "server.properties"
        props.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{cport}",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{cport}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                    f"log.dirs={root / 'data'}",
                    f"num.partitions={QUEUES}",
                    "auto.create.topics.enable=false",
                    "offsets.topic.replication.factor=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                ]
            )
            + "\n"
        )
        (root / "log4j2.properties").write_text(
            "appender.out.type = Console\nappender.out.name = out\nappender.out.layout.type = PatternLayout\n"
            "appender.out.layout.pattern = [%d] %p %m (%c)%n\nrootLogger.level = WARN\n"
            "rootLogger.appenderRef.out.ref = out\n"
        )
        log4j = f"-Dlog4j2.configurationFile={root / 'log4j2.properties'}"
        self.java, self.cp = java, str(lib / "*")
        cp = self.cp
        cluster = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        fmt = subprocess.run(
            [java, "-cp", cp, "kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(props)],
            capture_output=True,
            text=True,
            check=False,
        )
        if fmt.returncode != 0:
            raise SystemExit(f"spark_kafka_bench: Kafka's storage format failed:\n{fmt.stdout}{fmt.stderr}")
        self.log = root / "kafka.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [java, *KAFKA_JVM, log4j, "-cp", cp, "kafka.Kafka", str(props)],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"spark_kafka_bench: Kafka exited ({self.proc.returncode}):\n{self.tail()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1):
                return
            time.sleep(0.2)
        self.stop()
        raise SystemExit(
            f"spark_kafka_bench: Kafka did not listen on {self.port} within 90 s:\n{self.tail()}"
        )

    def topics(self, *args: str) -> str:
        """What benches/KafkaTopics.java answers to `args`: ``create <partitions> <topic>...``,
        ``end <topic>``."""
        cmd = [self.java, "-cp", self.cp, str(HERE / "KafkaTopics.java"), f"127.0.0.1:{self.port}", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=180)
        if done.returncode != 0:
            raise SystemExit(
                f"spark_kafka_bench: KafkaTopics {' '.join(args)} failed:\n{done.stdout}"
                f"{done.stderr[-3000:]}\n{self.tail()}"
            )
        return done.stdout.strip()

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL after 30 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)
        self.proc.kill()  # nothing if it has exited
        self.proc.wait()


def bench(a: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(REPO))
    import broker_bench as bb
    from pinning import cpu_sets, pinned

    from tests.brokerproc import start_broker

    broker_cpus, load_cpus = cpu_sets(a.broker_cpus, a.load_cpus)
    kafka_lib, connector_lib, python = fetch_peers()
    root = Path(tempfile.mkdtemp(prefix="rmq-spark-kafka-", dir=a.store_root))
    rmq = kafka = None
    try:
        with pinned(broker_cpus):  # the brokers (and every thread they start) on --broker-cpus
            rmq = start_broker(
                root / "rmq", "flushDiskType=ASYNC_FLUSH", extra_args=["--log-level", "WARNING"]
            )
            kafka = Kafka(kafka_lib, root / "kafka")
        for topic in (READ_TOPIC, SINK_TOPIC, EOS_TOPIC):
            bb.create_topic(rmq.broker_addr, rmq.namesrv_addr, topic, QUEUES)
        kafka.topics("create", str(QUEUES), READ_TOPIC, SINK_TOPIC)
        cfg = {
            "messages": a.messages,
            "runs": a.runs,
            "rows": [k for k, *_ in ROWS if k not in a.skip],
            "namesrv": rmq.namesrv_addr,
            "bootstrap": f"127.0.0.1:{kafka.port}",
            "rmq_pid": rmq.proc.pid,
            "kafka_pid": kafka.proc.pid,
            "rmq_store": str(root / "rmq"),
            "connector_lib": str(connector_lib),
            "tmp": str(root),
            "result": str(root / "result.json"),
        }
        # As pip compiles a wheel's modules when it installs them: Spark starts fresh Python processes for
        # each job's planning and commit, which would otherwise compile rmq's modules each time.
        subprocess.run([str(python), "-m", "compileall", "-q", str(REPO / "python" / "rmq")], check=True)
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(REPO / "python"), str(HERE)]),
            PYSPARK_PYTHON=str(python),
            PYSPARK_DRIVER_PYTHON=str(python),
        )
        with pinned(load_cpus):  # Spark's driver, JVM and Python workers on --load-cpus
            child = subprocess.Popen(
                [str(python), str(Path(__file__).resolve()), "--spark-child", json.dumps(cfg)], env=env
            )
        if child.wait() != 0:
            raise SystemExit(
                f"spark_kafka_bench: the Spark child failed (exit {child.returncode}); Kafka's log ends:\n"
                f"{kafka.tail()}"
            )
        result: dict[str, Any] = json.loads(Path(cfg["result"]).read_text())
        # What the sinks left, from the brokers' offsets: every row at least once (an at-least-once sink
        # may repeat a row on a retry).
        runs_of = {k: len(result["runs"].get(k, {}).get("rmq", [])) for k in ("sink", "sink_py", "sink_eos")}
        result["sink_counts"] = {
            "rmq": sum(bb.max_offsets(rmq.broker_addr, SINK_TOPIC, QUEUES)),
            "rmq_eos": sum(bb.max_offsets(rmq.broker_addr, EOS_TOPIC, QUEUES)),
            "kafka": int(kafka.topics("end", SINK_TOPIC)),
            "expected_rmq": (runs_of["sink"] + runs_of["sink_py"]) * a.messages,
            "expected_eos": runs_of["sink_eos"] * a.messages,
            "expected_kafka": len(result["runs"].get("sink", {}).get("kafka", [])) * a.messages,
        }
        result["kafka_jars"] = len(list(kafka_lib.glob("*.jar")))
        return result
    finally:
        if kafka is not None:
            kafka.stop()
        if rmq is not None:
            rmq.stop()
        shutil.rmtree(root, ignore_errors=True)


# --- results ---------------------------------------------------------------------------------------------


def _median_run(runs: list[dict[str, float]]) -> dict[str, float]:
    return sorted(runs, key=lambda r: r["rows"] / r["secs"])[len(runs) // 2]


def render(res: dict[str, Any], a: argparse.Namespace, elapsed: float) -> str:
    sys.path.insert(0, str(HERE))
    import broker_bench as bb
    from pinning import cpu_sets, pin_sentence

    broker_cpus, load_cpus = cpu_sets(a.broker_cpus, a.load_cpus)
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    runs = res["runs"]

    def rate(r: dict[str, float]) -> float:
        return r["rows"] / r["secs"]

    def cell(side_runs: list[dict[str, float]] | None) -> tuple[str, str, str, float | None]:
        if not side_runs:
            return "—", "—", "—", None
        m = _median_run(side_runs)
        every = " / ".join(f"{rate(r):,.0f}" for r in side_runs)
        ex = f"{1e6 * m['exec_cpu'] / m['rows']:.1f}"
        br = f"{1e6 * m['broker_cpu'] / m['rows']:.1f}"
        return f"**{rate(m):,.0f}** ({every})", ex, br, rate(m)

    lines = [
        BEGIN,
        "## Spark over the network: rmq beside Apache Kafka (`python benches/spark_kafka_bench.py`,"
        " issue 29 item 4)",
        "",
        f"Measured {now} on this machine: {bb.machine_info()}; whole run {elapsed:.0f} s. pyspark"
        f" {res['pyspark']} (Maven Central serves `spark-sql-kafka-0-10_2.13` for Spark 4.2.0 and 4.1.0, not"
        " for 4.3.0, rmq's pinned pyspark) in the benchmark's own venv (`scripts/peers pyspark-4.2.0`),"
        " `local[2]`, both sides in one session; rmq's data source from this checkout (its modules compiled"
        " first, as pip does on install); Spark's Kafka source"
        f" and sink `spark-sql-kafka-0-10_2.13` 4.2.0 ({', '.join(res['jars'])} as `spark.jars`) against"
        " Apache Kafka 4.1.1 in KRaft mode (one process as broker and controller, 1 GiB heap, G1 as"
        " `kafka-server-start.sh`), rmq as `python -m rmq.broker` (ASYNC_FLUSH); both fetched pinned by"
        " `scripts/peers`.",
        "",
        f"- The same {a.messages:,} messages of 1 KiB (the hex SHA-256 of the row number, repeated) written"
        f" once by each side's sink into a topic of {QUEUES} queues (rmq) and of {QUEUES} partitions"
        f" (Kafka): per queue rmq {res['per_queue']['rmq']}, Kafka {res['per_queue']['kafka']}; every read"
        f" row checked to return all {a.messages:,} (that check, a read of every row on each side, and one"
        f" store-direct count are the warm-up; fill {res['fill_s']:.0f} s). Medians of {a.runs} rounds"
        " (every run's rows/s listed), each round running every row on both sides, which side first"
        " alternating.",
        pin_sentence(broker_cpus, load_cpus, "the brokers (rmq; Kafka)", "Spark's processes").rstrip("\n"),
        "- *Executor CPU/row*: user + system CPU of the Spark processes (driver Python, Spark's JVM, which"
        " runs the tasks in local mode, and its Python workers; from /proc) over the run ÷ rows."
        " *Broker CPU/row*: the rmq process (name server embedded); Kafka's JVM. *Other load*: CPU use of"
        " other processes over 0.5 s before each round of the row, share of the machine.",
        "- rmq's read rows with a target go through the JVM network reader (`rmq.spark.load` /"
        " `rmq.spark.read_stream` with `nameServer`), which prunes columns itself, as Kafka's source does;"
        ' the Python network source\'s rows (`format("rocketmq")`) are listed for information, its `count()`'
        ' with `.option("columns", "")` (the README\'s way to count with it: pyspark\'s Python data source'
        " API prunes no column). Every read reads every message off the broker.",
        "",
        "| row | rmq rows/s | Kafka rows/s | rmq ÷ Kafka | target | executor CPU µs/row rmq / Kafka"
        " | broker CPU µs/row rmq / Kafka | other load per round |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, what, target, kinds, vs in ROWS:
        if key not in runs:
            continue
        r_cell = cell(runs[key].get("rmq"))
        k_cell = cell(runs[vs or key].get("kafka")) if (vs or key) in runs else ("—", "—", "—", None)
        ratio = r_cell[3] / k_cell[3] if r_cell[3] and k_cell[3] else None
        rtxt = f"**{ratio:.2f}×**" if ratio is not None else "—"
        if target and ratio is not None:
            verdict = f"≥ {TARGET:g}×: {'met' if ratio >= TARGET else 'missed'}"
        else:
            verdict = "none (for information)"
        if kinds == "rmq":
            k_cell = (k_cell[0] + " (as above)" if k_cell[3] else "—", k_cell[1], k_cell[2], k_cell[3])
        loads = " / ".join(f"{r['other']:.0%}" for r in runs[key]["rmq"])
        lines.append(
            f"| {what} | {r_cell[0]} | {k_cell[0]} | {rtxt} | {verdict} | {r_cell[1]} / {k_cell[1]}"
            f" | {r_cell[2]} / {k_cell[2]} | {loads} |"
        )
    sc = res["sink_counts"]
    lines += [
        "",
        "- What the sinks left (the topics' end offsets after the run, from the brokers): rmq at-least-once"
        f" (the JVM and the Python sink, one topic) {sc['rmq']:,} rows for {sc['expected_rmq']:,} written,"
        f" exactly-once {sc['rmq_eos']:,} for {sc['expected_eos']:,},"
        f" Kafka {sc['kafka']:,} for {sc['expected_kafka']:,}. The store-direct rows read the rmq broker's"
        " store directory (`load(path)`, option `topics`), no broker involved: their broker CPU is what the"
        " rmq broker spent meanwhile on its own work (they follow the exactly-once sink row).",
        END,
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--spark-child":
        spark_child(json.loads(sys.argv[2]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=150_000, help="1 KiB messages per topic (150,000)")
    ap.add_argument("--runs", type=int, default=3, help="rounds; medians reported (3)")
    ap.add_argument(
        "--skip", default="", help=f"comma list of rows to leave out: {','.join(k for k, *_ in ROWS)}"
    )
    ap.add_argument(
        "--broker-cpus", default=None, help="CPU list for rmq and Kafka (e.g. 0); default: unpinned"
    )
    ap.add_argument("--load-cpus", default=None, help="CPU list for Spark (e.g. 1); default: unpinned")
    ap.add_argument("--store-root", default=None, help="parent directory of the brokers' temporary stores")
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    ap.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md alone")
    a = ap.parse_args()
    a.skip = {s for s in a.skip.split(",") if s}
    unknown = a.skip - {k for k, *_ in ROWS}
    if unknown:
        ap.error(f"--skip: unknown rows {sorted(unknown)}")
    t0 = time.monotonic()
    res = bench(a)
    text = render(res, a, time.monotonic() - t0)
    print(text)
    if not a.no_write:
        sys.path.insert(0, str(HERE))
        from spark_bench import write_section

        write_section(a.out, text, BEGIN, END)
        print(f"wrote the spark-kafka section of {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
