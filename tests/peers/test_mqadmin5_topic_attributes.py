"""Apache mqadmin 5.5.0's ``updateTopic -a`` (topic attributes, ``+key=value`` / ``-key``) against an rmq
broker: ``retention.hours`` (and 5.x's ``message.type``) is set, kept by an update without attributes
(mqadmin 4.9.8's), removed, and bad values and keys come back to mqadmin as the broker's remark."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rmq.client.sync import Admin

from tests.brokerproc import BrokerProcess, start_broker
from tests.peers.apache import PeerLibs, peer_libs
from tests.peers.mqadmin import Run, mqadmin


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_broker(tmp_path_factory.mktemp("mqadmin5") / "store")
    yield b
    b.stop()


def test_update_topic_attributes(broker: BrokerProcess, tmp_path: Path) -> None:
    libs: PeerLibs = peer_libs()

    def run(*args: str, five: bool = True) -> Run:
        jars = libs.server5 if five else None
        return mqadmin(
            libs, tmp_path, broker.namesrv_addr, "updateTopic", "-b", broker.broker_addr, *args, jars=jars
        )

    def attributes() -> dict[str, str] | None:
        with Admin(namesrv_addr=broker.namesrv_addr) as admin:
            return admin.topic_configs(broker.broker_addr)["T5"].get("attributes")

    out = run("-t", "T5", "-a", "+retention.hours=2").ok().out
    assert "create topic to" in out and "success" in out, out
    assert attributes() == {"retention.hours": "2"}
    # mqadmin 4.9.8 sends no attributes: the topic keeps its own.
    run("-t", "T5", "-r", "4", "-w", "4", five=False).ok()
    assert attributes() == {"retention.hours": "2"}
    for bad, says in (
        ("+retention.hours=x", "CODE: 1  DESC: retention.hours must be a number of hours, not 'x'"),
        (
            "+queue.type=BatchCQ",
            "DESC: unsupported attribute key: queue.type (rmq supports message.type, retention.hours, "
            "lite.topic.expiration)",
        ),
        (
            "+message.type=fifo",
            "DESC: message.type must be one of NORMAL, FIFO, DELAY, TRANSACTION, LITE, MIXED, UNSPECIFIED, "
            "not "
            "'fifo'",
        ),
    ):
        r = run("-t", "T5", "-a", bad)
        assert says in r.out, r.out
    assert attributes() == {"retention.hours": "2"}
    # 5.x's way to make a FIFO topic: kept beside the other attributes.
    run("-t", "T5", "-a", "+message.type=FIFO").ok()
    assert attributes() == {"message.type": "FIFO", "retention.hours": "2"}
    run("-t", "T5", "-a=-message.type").ok()
    assert attributes() == {"retention.hours": "2"}
    run("-t", "T5", "-a=-retention.hours").ok()  # commons-cli would take "-retention.hours" for an option
    assert attributes() is None
    log = "".join(broker.log)
    assert (
        "topic T5: its messages are now served for 2 hours (retention.hours; was the CommitLog's time)" in log
    )
    assert "topic T5: its messages are now served for as long as the CommitLog keeps them" in log
