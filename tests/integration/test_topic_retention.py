"""Per-topic retention (the topic attribute ``retention.hours``) on a real broker (``python -m rmq.broker``)
with small CommitLog files, fileReservedTime=0 and retention rounds every 100 ms: topics created with
rmqadmin ``updateTopic -a``, one with a time of 3.6 s (``Short``), one of an hour (``Long``), one without
(``Plain``). Short's old messages stop being served and counted while the others' are; Long keeps every
CommitLog file (each older than fileReservedTime) until its own time is cut, then whole files go."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rmq.admin import cli
from rmq.client import Message, MessageQueue
from rmq.client.errors import MQClientError
from rmq.client.sync import Admin, Producer, run
from rmq.common.route import TopicConfig

from tests.brokerproc import BrokerProcess, start_broker

SHORT_HOURS = "0.001"  # 3.6 s
N = 100


PROPS = (
    "mappedFileSizeCommitLog=65536",
    "fileReservedTime=0",
    "deleteWhen=99",
    "deleteCommitLogFilesInterval=0",
    "autoCreateSubscriptionGroup=true",
    # Not about the host's disk: no round deletes for disk space, and none forcibly.
    "diskMaxUsedSpaceRatio=95",
    "diskSpaceCleanForciblyRatio=99",
    "diskSpaceWarningLevelRatio=99",
)


@pytest.fixture()
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path / "store", *PROPS, "cleanResourceInterval=100")
    yield proc
    proc.stop()


def rmqadmin(ns: str, *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(cli, [args[0], "-n", ns, *args[1:]], catch_exceptions=False)
    return r.exit_code, r.stdout + r.stderr


def eventually(check: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)
    return value


def commitlog_files(b: BrokerProcess) -> list[str]:
    return sorted(n for n in os.listdir(b.store_dir / "commitlog") if len(n) == 20)


def test_two_topics_with_their_own_retention(broker: BrokerProcess) -> None:
    ns, addr = broker.namesrv_addr, broker.broker_addr
    for topic, attrs in (("Short", f"+retention.hours={SHORT_HOURS}"), ("Long", "+retention.hours=1")):
        code, out = rmqadmin(ns, "updateTopic", "-b", addr, "-t", topic, "-r", "1", "-w", "1", "-a", attrs)
        assert code == 0, out
        assert f"attributes={{retention.hours={attrs.split('=')[1]}}}" in out, out
    code, out = rmqadmin(ns, "updateTopic", "-b", addr, "-t", "Plain", "-r", "1", "-w", "1")
    assert code == 0, out

    # Bad values and keys are refused, by rmqadmin before sending and by the broker.
    for bad, says in (
        ("+retention.hours=abc", "must be a number of hours"),
        ("+retention.hours=0", "must be more than 0"),
        ("+queue.type=BatchCQ", "unsupported attribute key: queue.type"),
        ("+message.type=Fifo", "message.type must be one of NORMAL, FIFO"),
        ("retention.hours=1", "must start with + (set) or - (remove)"),
    ):
        code, out = rmqadmin(ns, "updateTopic", "-b", addr, "-t", "Bad", "-a", bad)
        assert code != 0 and says in out, (bad, out)
    with Admin(namesrv_addr=ns) as admin:
        for bad, says in (
            ("+retention.hours=-1", "must be more than 0"),
            ("-retention.hours", "only adding attributes is supported while creating a topic"),
        ):
            with pytest.raises(MQClientError, match=re.escape(says)):
                admin.create_topic(addr, TopicConfig("Bad", 1, 1), bad)
        with pytest.raises(
            MQClientError, match=re.escape("attempt to delete a nonexistent attribute: retention.hours")
        ):
            admin.create_topic(addr, TopicConfig("Plain", 1, 1), "-retention.hours")
        # An update without attributes (mqadmin 4.9's) keeps the topic's.
        admin.create_topic(addr, TopicConfig("Long", 1, 1))
        configs = admin.topic_configs(addr)
        assert configs["Short"]["attributes"] == {"retention.hours": SHORT_HOURS}
        assert configs["Long"]["attributes"] == {"retention.hours": "1"}
        assert "attributes" not in configs["Plain"]
        assert "Bad" not in configs
        topics_json = broker.store_dir / "config" / "topics.json"
        saved = eventually(
            lambda: json.loads(topics_json.read_text())["topicConfigTable"].get("Long"), "topics.json"
        )
        assert saved["attributes"] == {"retention.hours": "1"}

        broker_name = admin.topic_route("Short").broker_datas[0].broker_name
        with Producer("retention_pg", namesrv_addr=ns) as p:
            for i in range(N):  # about 5 CommitLog files of 64 KiB
                for topic in ("Short", "Long", "Plain"):
                    body = b"%04d" % i + b"x" * 1000
                    assert p.send(Message(topic, body), mq=MessageQueue(topic, broker_name, 0)).ok
            time.sleep(4.0)  # Short's old messages are now past its 3.6 s; what follows takes less
            for i in range(5):
                assert p.send(Message("Short", b"new%d" % i), mq=MessageQueue("Short", broker_name, 0)).ok
            new_sent = time.monotonic()

        def min_max(topic: str) -> tuple[int, int]:
            return admin.min_max_offset(topic, broker_name, 0)

        # Short: its 100 old messages are no longer served or counted; Long's and Plain's are.
        eventually(lambda: min_max("Short") == (N, N + 5), "Short's old messages to expire")
        stats = {t.mq.queue_id: t for t in admin.topic_stats("Short")}
        assert (stats[0].min_offset, stats[0].max_offset) == (N, N + 5)
        msgs, next_offset = admin.pull("Short", broker_name, 0, 0)
        assert (msgs, next_offset) == ([], N)
        msgs, _ = admin.pull("Short", broker_name, 0, N)
        assert [m.body for m in msgs] == [b"new%d" % i for i in range(5)]
        # A group at offset 50 lags by the 5 messages Short serves, not 55; by 50 in Plain.
        for topic in ("Short", "Plain"):
            run(
                admin.impl.instance.api.update_consumer_offset(
                    addr, "retention_cg", MessageQueue(topic, broker_name, 0), 50
                )
            )
        lag = {t: admin.consume_stats("retention_cg", t).diff_total for t in ("Short", "Plain")}
        assert lag == {"Short": 5, "Plain": N - 50}
        assert min_max("Long") == (0, N) and min_max("Plain") == (0, N)
        msgs, _ = admin.pull("Plain", broker_name, 0, 0)
        assert msgs[0].body.startswith(b"0000")

        # Every CommitLog file is older than fileReservedTime=0, but Long (1 hour) needs them all.
        files = commitlog_files(broker)
        assert len(files) >= 5
        admin.delete_expired_commit_log(addr)  # rounds that delete expired files at any hour
        eventually(
            lambda: any("kept" in line and "topic Long" in line for line in broker.log), "the kept line"
        )
        assert commitlog_files(broker)[0] == files[0]
        assert min_max("Plain") == (0, N)

        # Long's time cut to Short's, which its old messages have passed: whole files go (the newest stays).
        code, out = rmqadmin(
            ns,
            "updateTopic",
            "-b",
            addr,
            "-t",
            "Long",
            "-r",
            "1",
            "-w",
            "1",
            "-a",
            f"+retention.hours={SHORT_HOURS}",
        )
        assert code == 0, out
        admin.delete_expired_commit_log(addr)
        eventually(lambda: commitlog_files(broker)[0] != files[0], "CommitLog files to be deleted")
        eventually(lambda: min_max("Long") == (N, N), "Long's messages to expire")
        assert min_max("Plain")[0] > 0

    deleted = r"store retention: deleted \d+ CommitLog files older than 0 hours, bytes \[0, "
    eventually(lambda: re.search(deleted, "".join(broker.log)), "the deletion's log line")  # logged each 1 s
    log = "".join(broker.log)
    # Each round logs what it hid (the messages cross 3.6 s one after another: maybe over several rounds).
    hidden = re.findall(r"topic Short \(retention.hours=0.001\): (\d+) messages of 1 queues stored more", log)
    assert sum(map(int, hidden)) in (N, N + 5), hidden  # + the new ones if they got that old meanwhile
    assert "topic Long: its messages are now served for 0.001 hours (retention.hours; was 1 hours)" in log

    # Restarted with retention rounds an hour apart (the first runs as the store opens, before the broker
    # reads topics.json): what the topics' times hide stays hidden from the start. Short's new messages
    # too, once they are past its 3.6 s (what ran since they were sent may have taken less).
    time.sleep(max(0.0, 3.6 + 0.5 - (time.monotonic() - new_sent)))
    assert broker.stop() == 0
    again = start_broker(broker.store_dir, *PROPS, "cleanResourceInterval=3600000")
    try:
        with Admin(namesrv_addr=again.namesrv_addr) as admin:
            eventually(lambda: admin.topic_route("Short").broker_datas, "the topic's route")
            assert admin.min_max_offset("Short", broker_name, 0) == (N + 5, N + 5)
            assert admin.min_max_offset("Long", broker_name, 0) == (N, N)
    finally:
        again.stop()
