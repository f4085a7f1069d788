"""Fixtures for the PySpark reader tests: one local Spark session, and a store written by
``python -m rmq.broker`` (several topics, tags, keys, properties, a batch, compressed bodies, a
committed and a rolled-back transaction, CommitLog roll-over)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")

import rmq.spark  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from rmq.client import LocalTransactionState, Message  # noqa: E402
from rmq.client.sync import Producer, TransactionProducer  # noqa: E402

from tests.brokerproc import start_broker  # noqa: E402
from tests.spark.helpers import (  # noqa: E402
    COMMITLOG_FILE_SIZE,
    Sent,
    WrittenStore,
    fingerprint,
    offset_of,
    read_rows,
    wait_for,
)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("rmq-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        # The JVM reader (rmq.spark.load); tests/spark/test_jvm_reader.py fails when the wheel lacks it.
        .config("spark.jars", rmq.spark.jar_path() or "")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    rmq.spark.register(session, filter_pushdown=True)  # the tests load a DataFrame per query
    yield session
    session.stop()


class _Listener:
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return arg  # type: ignore[no-any-return]

    def check_local_transaction(self, msg: Any) -> LocalTransactionState:
        return LocalTransactionState.ROLLBACK_MESSAGE


@pytest.fixture(scope="session")
def written_store(tmp_path_factory: pytest.TempPathFactory) -> WrittenStore:
    root = tmp_path_factory.mktemp("spark-store")
    broker = start_broker(root, f"mappedFileSizeCommitLog={COMMITLOG_FILE_SIZE}")
    sent: list[Sent] = []
    try:
        with Producer("spark_test_pg", namesrv_addr=broker.namesrv_addr) as producer:

            def send(msg: Message, **expect: Any) -> None:
                r = producer.send(msg)
                assert r.ok
                sent.append(
                    Sent(
                        msg.topic,
                        r.message_queue.queue_id,
                        r.queue_offset,
                        offset_of(r.offset_msg_id),
                        r.msg_id,
                        msg.body,
                        **expect,
                    )
                )

            for i in range(6):
                tags = "TagA" if i % 2 == 0 else "TagB"
                keys = [f"a{i}", f"order-{i}"]
                m = Message("SparkA", f"a-{i}".encode(), tags=tags, keys=keys, properties={"n": str(i)})
                send(m, tags=tags, keys=" ".join(keys), user_properties={"n": str(i)})
            for i in range(4):
                props = {"region": "eu", "seq": str(i)}
                send(Message("SparkB", f"b-{i}".encode(), properties=props), user_properties=props)
            # A batch: one request, five records with consecutive queue offsets.
            batch = [Message("SparkC", f"c-{i}".encode(), tags="batch", keys=f"c{i}") for i in range(5)]
            r = producer.send(batch)
            assert r.ok
            for i, (m, uniq, off) in enumerate(
                zip(batch, r.msg_id.split(","), r.offset_msg_id.split(","), strict=True)
            ):
                sent.append(
                    Sent(
                        "SparkC",
                        r.message_queue.queue_id,
                        r.queue_offset + i,
                        offset_of(off),
                        uniq,
                        m.body,
                        tags="batch",
                        keys=f"c{i}",
                    )
                )
            # Bodies over 4 KiB are sent zlib-compressed; 80 KiB of them roll the 64 KiB CommitLog over.
            for _ in range(16):
                send(Message("SparkBig", os.urandom(5000), tags="big"), tags="big")

        committed, rolled_back = b"tx-commit", b"tx-rollback"
        tx = TransactionProducer("spark_test_tx", _Listener(), namesrv_addr=broker.namesrv_addr)
        tx.start()
        try:
            tx.send_message_in_transaction(
                Message("SparkTx", committed), LocalTransactionState.COMMIT_MESSAGE
            )
            tx.send_message_in_transaction(
                Message("SparkTx", rolled_back), LocalTransactionState.ROLLBACK_MESSAGE
            )
        finally:
            tx.shutdown()

        # END_TRANSACTION is one-way: wait until the broker has written the commit and both op records.
        def ended() -> bool:
            rows = read_rows(root)
            return sum(r["topic"] == "SparkTx" for r in rows) == 1 and (
                sum(r["topic"] == "RMQ_SYS_TRANS_OP_HALF_TOPIC" for r in rows) == 2
            )

        wait_for(ended)
    finally:
        assert broker.stop() == 0
    return WrittenStore(root, sent, committed, rolled_back, fingerprint(root))
