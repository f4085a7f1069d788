"""The Java client 4.9.8 against an rmq broker that refuses every send as too late
(``waitTimeMillsInSendQueue=0``: any wait is that long): the producer hears SYSTEM_BUSY with Apache's
remark at once, as from Apache's broker — a sync send throws ``MQBrokerException`` code 2 (not a timeout:
4.9 does not retry that code), an async send's callback gets the remark — and nothing is stored. Only rmq
runs here (no Apache peer)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.brokerproc import start_broker
from tests.peers.apache import PeerLibs, compile_drivers, peer_libs, run_driver
from tests.peers.conftest import unique

REMARK = "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: "


@pytest.fixture(scope="module")
def java() -> tuple[PeerLibs, Path]:
    libs = peer_libs()
    return libs, compile_drivers(libs)


def test_java_producer_hears_system_busy_at_once(java: tuple[PeerLibs, Path], tmp_path: Path) -> None:
    libs, classes = java
    broker = start_broker(tmp_path / "store", "waitTimeMillsInSendQueue=0")
    try:
        topic, group = unique("JBusy"), unique("JBusyG")
        fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1"}
        fields |= {"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
        created = invoke_sync(broker.broker_addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields))
        assert created.code == ResponseCode.SUCCESS, created.remark
        args = {"namesrv": broker.namesrv_addr, "topic": topic, "group": group}
        sync = run_driver(libs, classes, tmp_path, "send", count=3, mode="sync", **args)
        assert sync["statuses"] == {} and sync["errors"] == ["broker code 2"], sync
        sent = run_driver(libs, classes, tmp_path, "send", count=3, mode="async", **args)
        assert sent["statuses"] == {} and len(sent["errors"]) == 3, sent
        assert all(REMARK in e for e in sent["errors"]), sent["errors"]
        offset = invoke_sync(
            broker.broker_addr, create_request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": "0"})
        )
        assert offset.ext_fields["offset"] == "0", "a refused send was stored"
    finally:
        assert broker.stop() == 0
    assert any("sends refused SYSTEM_BUSY" in line for line in broker.log)
