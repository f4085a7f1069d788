"""The ``rocketmq`` sink against a real broker: batch writes read back by a real consumer, column mappings,
bad input."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tests.brokerproc import BrokerProcess, start_broker
from tests.spark.sinkhelp import consume, create_topic, digest


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_broker(tmp_path_factory.mktemp("sink-store"))
    yield b
    b.stop()


def test_batch_write_reads_back_every_row_once(spark: SparkSession, broker: BrokerProcess) -> None:
    create_topic(broker, "SinkBatch")
    rows = [(f"row-{i}".encode() * (1 + i % 7),) for i in range(2000)]
    df = spark.createDataFrame(rows, "body binary").repartition(3)
    df.write.format("rocketmq").option("nameServer", broker.namesrv_addr).option("topic", "SinkBatch").mode(
        "append"
    ).save()
    got = consume(broker.namesrv_addr, "SinkBatch", len(rows))
    assert got.bodies == Counter(digest(b) for (b,) in rows)


def _writer(df, broker: BrokerProcess, **options: str):  # type: ignore[no-untyped-def]
    w = df.write.format("rocketmq").mode("append").option("nameServer", broker.namesrv_addr)
    for k, v in options.items():
        w = w.option(k, v)
    return w


def test_columns_topic_tags_keys_properties(spark: SparkSession, broker: BrokerProcess) -> None:
    create_topic(broker, "SinkColsA")
    create_topic(broker, "SinkColsB")
    rows = [
        (
            "SinkColsA" if i % 2 else "SinkColsB",
            f"body-{i}",
            f"tag{i % 3}",
            [f"k{i}", f"order-{i}"],
            {"n": str(i)},
        )
        for i in range(40)
    ]
    df = spark.createDataFrame(
        rows, "topic string, body string, tags string, keys array<string>, properties map<string,string>"
    )
    _writer(df, broker).save()
    # keys as one string column too
    df2 = spark.createDataFrame(
        [("SinkColsA", b"single-key", "one two")], "topic string, body binary, keys string"
    )
    _writer(df2, broker).save()
    got = {
        m.body.decode(): m
        for t in ("SinkColsA", "SinkColsB")
        for m in consume(broker.namesrv_addr, t, 21 if t == "SinkColsA" else 20).messages
    }
    assert len(got) == 41
    for topic, body, tags, keys, props in rows:
        m = got[body]
        assert m.topic == topic
        assert m.tags == tags
        assert m.keys == " ".join(keys)
        assert m.get_property("n") == props["n"]
    assert got["single-key"].keys == "one two"


def test_columnar_path_sends_what_the_message_path_sends(spark: SparkSession, broker: BrokerProcess) -> None:
    """Rows of ``body``/``topic``/``tags``/``keys`` go straight from Arrow to batches
    (:mod:`rmq.spark.sink.columnar`); with ``batchSize=1`` the same rows go one message each. A consumer
    reads the same messages from both: topics, bodies, tags, keys, and a unique ``UNIQ_KEY`` per row."""
    for t in ("SinkColumnarA", "SinkColumnarB", "SinkMessageA", "SinkMessageB"):
        create_topic(broker, t)
    rows = [
        (
            "A" if i % 3 else "B",
            f"body-{i}-" + "x" * (i % 50),
            None if i % 4 == 0 else ("" if i % 4 == 1 else f"tag{i % 5}"),
            None if i % 6 == 0 else f"k{i} kk{i % 7}",
        )
        for i in range(3000)
    ]
    df = spark.createDataFrame(rows, "topic string, body string, tags string, keys string").repartition(3)
    columnar = df.withColumn("topic", F.concat(F.lit("SinkColumnar"), "topic"))
    _writer(columnar, broker, batchSize="64").save()
    single = df.withColumn("topic", F.concat(F.lit("SinkMessage"), "topic"))
    _writer(single, broker, batchSize="1").save()

    def read(prefix: str) -> dict[str, tuple[str, str | None, str | None, list[str]]]:
        out = {}
        ids = set()
        for side in ("A", "B"):
            want = sum(1 for r in rows if r[0] == side)
            for m in consume(broker.namesrv_addr, prefix + side, want).messages:
                assert m.body.decode() not in out, "a row came twice"
                # WAIT: the broker keeps it in a batch's messages only (as Apache's does)
                names = sorted(set(m.properties) - {"WAIT"})
                out[m.body.decode()] = (m.topic.removeprefix(prefix), m.tags, m.keys, names)
                ids.add(m.get_property("UNIQ_KEY"))
        assert len(ids) == len(rows), "every row has its own UNIQ_KEY"
        return out

    got = read("SinkColumnar")
    assert got == read("SinkMessage")
    assert {body: (topic, tags, keys) for body, (topic, tags, keys, _n) in got.items()} == {
        body: (topic, tags or None, keys) for topic, body, tags, keys in rows
    }


@pytest.mark.parametrize(
    ("schema", "rows", "options", "needle"),
    [
        ("topic string, body binary", [("SinkBad", b"x"), (None, b"y")], {}, "row 1: column 'topic' is null"),
        ("topic string, body binary", [("SinkBad", b"x"), ("", b"y")], {}, "row 1: column 'topic' is empty"),
        ("body binary", [(b"x",), (None,)], {"topic": "SinkBad"}, "row 1: column 'body' is null"),
        ("body string", [("x",), ("",)], {"topic": "SinkBad"}, "row 1: column 'body' is empty"),
        (
            "body binary, tags string",
            [(b"x", "ok"), (b"y", "a\u0001b")],
            {"topic": "SinkBad"},
            "row 1: column 'tags' holds a .u0001 or .u0002 character",
        ),
        (
            "topic string, body binary",
            [("SinkBad", b"x"), ("%RETRY%g", b"y")],
            {},
            "topic '%RETRY%g' is a retry topic",
        ),
    ],
)
def test_columnar_bad_rows_fail_naming_the_row(
    spark: SparkSession,
    broker: BrokerProcess,
    schema: str,
    rows: list[tuple],
    options: dict[str, str],
    needle: str,
) -> None:
    create_topic(broker, "SinkBad")
    df = spark.createDataFrame(rows, schema).coalesce(1)
    with pytest.raises(Exception, match=needle.replace("(", r"\(").replace(")", r"\)")):
        _writer(df, broker, **options).save()


def test_queue_id_and_broker_name_keep_row_order(spark: SparkSession, broker: BrokerProcess) -> None:
    create_topic(broker, "SinkQueue", queues=4)
    rows = [(f"q{i % 4}-{i:04d}".encode(), i % 4) for i in range(200)]
    df = spark.createDataFrame(rows, "body binary, queue_id int").coalesce(1)
    _writer(df, broker, topic="SinkQueue").save()
    got = consume(broker.namesrv_addr, "SinkQueue", len(rows)).messages
    assert len(got) == len(rows)
    by_queue: dict[int, list[tuple[int, str]]] = {}
    for m in got:
        by_queue.setdefault(m.queue_id, []).append((m.queue_offset, m.body.decode()))
    for qid, items in by_queue.items():
        bodies = [b for _off, b in sorted(items)]
        assert all(b.startswith(f"q{qid}-") for b in bodies)
        assert bodies == sorted(bodies)  # row order = queue order
    assert set(by_queue) == {0, 1, 2, 3}
    # broker_name picks the broker group; a queue_id beyond the topic's queues is an error naming it
    name = got[0].broker_name
    one = spark.createDataFrame([(b"pinned", 2, name)], "body binary, queue_id int, broker_name string")
    _writer(one, broker, topic="SinkQueue").save()
    bad = spark.createDataFrame([(b"x", 9)], "body binary, queue_id int")
    with pytest.raises(Exception, match="queue_id 9 but topic 'SinkQueue' has 4 writable queues"):
        _writer(bad, broker, topic="SinkQueue").save()


def test_sharding_key_keeps_each_key_in_order_on_one_queue(
    spark: SparkSession, broker: BrokerProcess
) -> None:
    from rmq.client.producer.selector import java_hash_code

    create_topic(broker, "SinkShard", queues=4)
    rows = [(f"{i % 5}:{i:04d}".encode(), f"key-{i % 5}") for i in range(150)]
    df = spark.createDataFrame(rows, "body binary, sharding_key string").coalesce(1)
    _writer(df, broker, topic="SinkShard").save()
    got = consume(broker.namesrv_addr, "SinkShard", len(rows)).messages
    assert len(got) == len(rows)
    per_key: dict[str, list[tuple[int, int, str]]] = {}
    for m in got:
        body = m.body.decode()
        per_key.setdefault(body.split(":")[0], []).append((m.queue_id, m.queue_offset, body))
    for key, items in per_key.items():
        queues = {q for q, _o, _b in items}
        assert queues == {abs(java_hash_code(f"key-{key}")) % 4}  # the Java client's hash selector
        bodies = [b for _q, _o, b in sorted(items)]
        assert bodies == sorted(bodies)


def test_delay_level_and_deliver_time(spark: SparkSession, broker: BrokerProcess) -> None:
    import time

    create_topic(broker, "SinkDelay")
    at = int(time.time() * 1000) + 1500
    df = spark.createDataFrame(
        [(b"delayed", 1, None), (b"timed", None, at), (b"now", 0, None)],
        "body binary, delay_level int, deliver_time_ms long",
    )
    _writer(df, broker, topic="SinkDelay").save()
    got = {m.body: m for m in consume(broker.namesrv_addr, "SinkDelay", 3).messages}
    assert set(got) == {b"delayed", b"timed", b"now"}
    assert got[b"delayed"].get_property("DELAY") == "1"
    assert got[b"timed"].get_property("TIMER_DELIVER_MS") == str(at)
    assert got[b"now"].get_property("DELAY") is None


@pytest.mark.parametrize(
    ("schema", "row", "options", "needle"),
    [
        ("body binary, colour string", (b"x", "red"), {"topic": "SinkBad"}, "unknown column 'colour'"),
        ("body int", (1,), {"topic": "SinkBad"}, "column 'body' is int, it must be binary or string"),
        ("body binary, keys int", (b"x", 1), {"topic": "SinkBad"}, "column 'keys' is int"),
        ("body binary", (b"x",), {}, "no topic: give the DataFrame a 'topic' column or set option topic"),
        ("topic string", ("SinkBad",), {}, "needs a 'body' column"),
        ("body binary", (b"x",), {"topic": "NoSuchTopic"}, "topic 'NoSuchTopic' does not exist"),
        ("body binary", (b"x",), {"topic": "SinkBad", "color": "1"}, "unknown rocketmq sink option"),
        ("body binary", (b"x",), {"topic": "SinkBad", "retries": "-1"}, "option retries=-1"),
        (
            "body binary",
            (b"x",),
            {"topic": "SinkBad", "deliveryGuarantee": "twice"},
            "deliveryGuarantee='twice'",
        ),
        ("body binary", (b"",), {"topic": "SinkBad"}, "column 'body' is empty"),
        (
            "body binary, properties map<string,string>",
            (b"x", {"TAGS": "t"}),
            {"topic": "SinkBad"},
            "sets 'TAGS', a name RocketMQ reserves",
        ),
        (
            "body binary, queue_id int, sharding_key string",
            (b"x", 1, "k"),
            {"topic": "SinkBad"},
            "'queue_id' and 'sharding_key' exclude each other",
        ),
        (
            "body binary, delay_level int",
            (b"x", 1),
            {"topic": "SinkBad", "deliveryGuarantee": "exactly_once"},
            "cannot be used with deliveryGuarantee=exactly_once",
        ),
    ],
)
def test_bad_input_fails_naming_what(
    spark: SparkSession, broker: BrokerProcess, schema: str, row: tuple, options: dict[str, str], needle: str
) -> None:
    create_topic(broker, "SinkBad")
    df = spark.createDataFrame([row], schema)
    with pytest.raises(Exception, match=needle.replace("(", r"\(").replace(")", r"\)")):
        _writer(df, broker, **options).save()


def test_an_unknown_topic_stops_a_batch_of_rows_before_any_is_sent(
    spark: SparkSession, broker: BrokerProcess
) -> None:
    """The columnar path looks up every topic the rows of one Arrow batch name before it sends any of them:
    a batch whose last row names a topic that does not exist fails naming it and leaves nothing in the
    topics that do (the 3,001 rows are one Arrow batch; Spark's default is up to 10,000 rows)."""
    create_topic(broker, "SinkMixed")
    rows = [("SinkMixed", f"m{i}".encode()) for i in range(3000)] + [("NoSuchTopic2", b"x")]
    df = spark.createDataFrame(rows, "topic string, body binary").coalesce(1)
    with pytest.raises(Exception, match="topic 'NoSuchTopic2' does not exist"):
        _writer(df, broker).save()
    # The consumer reads until 2 s pass with nothing new: a send left running after the failure shows up.
    assert consume(broker.namesrv_addr, "SinkMixed", 0).messages == []


def test_unreachable_name_server_and_overwrite(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    df = spark.createDataFrame([(b"x",)], "body binary")
    w = df.write.format("rocketmq").mode("append").option("nameServer", f"127.0.0.1:{port}")
    with pytest.raises(Exception, match=f"from name server 127.0.0.1:{port} \\(option nameServer\\)"):
        w.option("topic", "SinkBad").option("sendTimeoutMs", "1000").save()
    with pytest.raises(Exception, match="option nameServer is required"):
        df.write.format("rocketmq").mode("append").option("topic", "SinkBad").save()
    with pytest.raises(Exception, match="can only be appended to"):
        _writer(df, broker, topic="SinkBad").mode("overwrite").save()


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    from rmq.common.codes import ResponseCode
    from rmq.remoting.client import invoke_sync

    from tests.acl.aclenv import ADMIN, DENIED_TOPIC, INNER, TOPIC, signed, topic_request, write_rules

    home = tmp_path_factory.mktemp("sink-acl")
    rules = write_rules(home / "plain_acl.yml")
    b = start_broker(
        home / "store",
        "aclEnable=true",
        f"aclFilePath={rules}",
        f"innerClientAuthenticationCredentials={INNER}",
    )
    for topic in (TOPIC, DENIED_TOPIC):
        r = invoke_sync(b.broker_addr, signed(topic_request(topic), ADMIN), 5000)
        assert r.code == ResponseCode.SUCCESS, r.remark
    yield b
    b.stop()


def test_acl_account_writes_its_topic_and_is_refused_elsewhere(
    spark: SparkSession, acl_broker: BrokerProcess
) -> None:
    from tests.acl.aclenv import APP, DENIED_TOPIC, TOPIC
    from tests.spark.helpers import read_rows, wait_for

    df = spark.createDataFrame([(f"acl-{i}".encode(),) for i in range(20)], "body binary")
    key, secret = APP
    _writer(df, acl_broker, topic=TOPIC, accessKey=key, secretKey=secret).save()
    wait_for(
        lambda: (
            sorted(r["body"] for r in read_rows(acl_broker.store_dir, topics=TOPIC))
            == sorted(f"acl-{i}".encode() for i in range(20))
        )
    )
    with pytest.raises(Exception, match=f"the broker refused row 0 for topic '{DENIED_TOPIC}'.*"):
        _writer(df.limit(1), acl_broker, topic=DENIED_TOPIC, accessKey=key, secretKey=secret).save()
    with pytest.raises(Exception, match=f"topic '{TOPIC}'.*Check signature failed for accessKey=app"):
        _writer(df.limit(1), acl_broker, topic=TOPIC, accessKey=key, secretKey="wrong-secret").save()
    with pytest.raises(Exception, match="options accessKey and secretKey go together"):
        _writer(df.limit(1), acl_broker, topic=TOPIC, accessKey=key).save()


def test_jvm_sink_signs_its_requests(spark: SparkSession, acl_broker: BrokerProcess) -> None:
    """``rmq.spark.save`` with ACL credentials: the JVM sink signs its route queries and batches; a topic
    the account may not send to, or a wrong secret, is refused naming the rows and the topic."""
    import rmq.spark

    from tests.acl.aclenv import APP, DENIED_TOPIC, TOPIC
    from tests.spark.helpers import read_rows, wait_for

    key, secret = APP
    ns = acl_broker.namesrv_addr
    df = spark.createDataFrame([(f"acl-jvm-{i}".encode(),) for i in range(300)], "body binary").coalesce(1)
    rmq.spark.save(df, nameServer=ns, topic=TOPIC, accessKey=key, secretKey=secret, batchSize=64)
    wait_for(
        lambda: (
            sorted(
                r["body"]
                for r in read_rows(acl_broker.store_dir, topics=TOPIC)
                if r["body"].startswith(b"acl-jvm")
            )
            == sorted(f"acl-jvm-{i}".encode() for i in range(300))
        )
    )
    with pytest.raises(Exception, match=f"refused a batch of rows 0..63 for topic '{DENIED_TOPIC}'"):
        rmq.spark.save(df, nameServer=ns, topic=DENIED_TOPIC, accessKey=key, secretKey=secret, batchSize=64)
    with pytest.raises(Exception, match=f"topic '{TOPIC}'.*Check signature failed for accessKey=app"):
        rmq.spark.save(df, nameServer=ns, topic=TOPIC, accessKey=key, secretKey="wrong-secret", batchSize=64)


def test_exactly_once_batch_commit_and_abort(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    from tests.spark.helpers import read_rows, wait_for

    create_topic(broker, "SinkTxOk")
    create_topic(broker, "SinkTxAbort")
    rows = [(f"tx-{i}".encode(),) for i in range(300)]
    df = spark.createDataFrame(rows, "body binary").repartition(2)
    _writer(df, broker, topic="SinkTxOk", deliveryGuarantee="exactly_once").save()
    assert consume(broker.namesrv_addr, "SinkTxOk", len(rows)).bodies == Counter(digest(b) for (b,) in rows)

    # Two tasks: one sends its rows and succeeds; the other sends 10-row Arrow batches, then meets an
    # empty body and fails. The job aborts: every half of both is rolled back, nothing is visible.
    # The abort can only roll back the halves of tasks that reported to the driver: a gate holds the
    # failing task's rows until the driver has the good task's result (a task still running when the
    # job fails is cancelled by Spark, and one that finishes anyway leaves its halves to the check-back,
    # which answers UNKNOW for a batch write: invisible, but not rolled back at once; see the README).
    marker = tmp_path / "good-task-reported"

    def gate(body: bytes) -> bytes:
        import os
        import time

        if body == b"":
            end = time.monotonic() + 300
            while not os.path.exists(str(marker)) and time.monotonic() < end:
                time.sleep(0.05)
        return body

    good = [(f"ok-{i}".encode(),) for i in range(46)]
    bad = [(f"bad-{i}".encode(),) for i in range(45)] + [(b"",)]
    parts = spark.createDataFrame(spark.sparkContext.parallelize(good + bad, 2), "body binary")
    gated = parts.select(F.udf(gate, "binary")("body").alias("body"))
    tracker = spark.sparkContext.statusTracker()
    opened: list[str] = []

    def open_gate() -> None:  # in a thread (a write from a thread other than the session's finds no
        # Python data source): once the driver has one task's result, the failing task may go on
        def good_task_done() -> bool:
            infos = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            return any(i is not None and i.numTasks == 2 and i.numCompletedTasks >= 1 for i in infos)

        try:
            wait_for(good_task_done, timeout=120)
            time.sleep(1)  # listeners hear of a finished task as the job takes its result: a margin
            opened.append("one task done")
        finally:
            marker.touch()

    opener = threading.Thread(target=open_gate, daemon=True)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10")
    try:
        opener.start()
        with pytest.raises(Exception, match="column 'body' is empty"):
            _writer(gated, broker, topic="SinkTxAbort", deliveryGuarantee="exactly_once").save()
    finally:
        marker.touch()
        opener.join(timeout=130)
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert opened == ["one task done"]

    def halves() -> dict[tuple[str, str], set[int]]:
        out: dict[tuple[str, str], set[int]] = {}
        for r in read_rows(broker.store_dir, topics="RMQ_SYS_TRANS_HALF_TOPIC"):
            p = dict(r["properties"] or ())
            if p.get("REAL_TOPIC") == "SinkTxAbort":
                out.setdefault((p["RMQ_SPARK_TASK"], p["RMQ_SPARK_SEQ"]), set()).add(r["queue_offset"])
        return out

    def all_ended() -> bool:
        done = {int(r["body"]) for r in read_rows(broker.store_dir, topics="RMQ_SYS_TRANS_OP_HALF_TOPIC")}
        return all(offsets & done for offsets in halves().values())

    sent = halves()
    assert len(sent) >= 46 + 40  # the good task's rows and the bad task's first four batches
    wait_for(all_ended, timeout=90)
    assert consume(broker.namesrv_addr, "SinkTxAbort", 0, timeout=0).messages == []
