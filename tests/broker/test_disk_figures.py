"""One disk-usage rule behind every figure: the metric, brokerStatus (and so clusterList and the dashboard)
and the statistics log line all show the used share of the CommitLog's file system as the store counts it
for retention and write refusal; ``rocketmq_storage_size`` is the bytes of the store's own files."""

from __future__ import annotations

import os
import re
from pathlib import Path

import orjson
from rmq.broker.config import BrokerConfig
from rmq.broker.controller import BrokerController
from rmq.broker.disk import commitlog_disk_ratio, disk_used_ratio, percent_up, store_bytes, store_dirs
from rmq.broker.metrics_collector import BrokerCollector
from rmq.broker.stats_log import StatsLog
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import create_request

from tests.acl.aclenv import send_request, topic_request


def statvfs_ratio(path: str) -> float:
    st = os.statvfs(path)
    used = st.f_blocks - st.f_bfree
    return used / (used + st.f_bavail)


def gauge(collector: BrokerCollector, name: str) -> float:
    [value] = [s.value for fam in collector.collect() for s in fam.samples if s.name == name]
    return float(value)


async def test_every_disk_figure_is_the_stores_rule(tmp_path: Path) -> None:
    cfg = BrokerConfig()
    cfg.update({"storePathRootDir": str(tmp_path / "store"), "listenPort": "0", "brokerIP1": "127.0.0.1"})
    cfg.update({"storePathCommitLog": str(tmp_path / "elsewhere" / "commitlog")})  # moved: still counted
    ctl = BrokerController(cfg)
    await ctl.start("127.0.0.1")
    client = RemotingClient()
    try:
        assert (
            await client.invoke(cfg.broker_addr, topic_request("DiskT"), 5000)
        ).code == ResponseCode.SUCCESS
        for i in range(200):
            r = await client.invoke(cfg.broker_addr, send_request("DiskT", b"x" * 1024, i % 4), 5000)
            assert r.code == ResponseCode.SUCCESS, r.remark
        collector = BrokerCollector(ctl.services, ctl.remoting.dispatcher, {})
        expected = statvfs_ratio(str(tmp_path / "elsewhere" / "commitlog"))
        ratio = commitlog_disk_ratio(cfg)
        assert ratio is not None and abs(ratio - expected) < 0.01
        assert abs(gauge(collector, "rocketmq_storage_disk_ratio") - ratio) < 0.01
        r = await client.invoke(
            cfg.broker_addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), 5000
        )
        table = orjson.loads(bytes(r.body))["table"]
        status = float(table["commitLogDiskRatio"])
        assert ratio <= status + 1e-9 and status - ratio < 0.0101  # rounded up to a percent, as RocketMQ
        line = StatsLog(ctl.services).line()
        logged = float(re.search(r"disk ([0-9.]+)% used", line).group(1))  # type: ignore[union-attr]
        assert abs(logged / 100 - ratio) < 0.01, line

        # The store's bytes: the moved CommitLog's files and the root's, not the file system's used bytes.
        size = gauge(collector, "rocketmq_storage_size")
        assert size == store_bytes(cfg) or abs(size - store_bytes(cfg)) < 1 << 20  # files may grow between
        commitlog = sum(p.stat().st_blocks * 512 for p in (tmp_path / "elsewhere" / "commitlog").iterdir())
        assert commitlog > 200 * 1024 and size >= commitlog
        st = os.statvfs(tmp_path)
        assert size <= (st.f_blocks - st.f_bfree) * st.f_frsize
    finally:
        await client.close()
        await ctl.shutdown()


def test_store_dirs_count_a_moved_directory_once(tmp_path: Path) -> None:
    cfg = BrokerConfig()
    root = tmp_path / "root"
    cfg.update({"storePathRootDir": str(root), "storePathConsumeQueue": str(root / "consumequeue")})
    cfg.update({"storePathIndex": str(tmp_path / "idx")})
    assert store_dirs(cfg) == [os.path.realpath(root), os.path.realpath(tmp_path / "idx")]


def test_the_rule_on_a_path_not_made_yet_and_the_rounding(tmp_path: Path) -> None:
    ratio = disk_used_ratio(str(tmp_path / "not" / "yet"))
    assert ratio is not None and abs(ratio - statvfs_ratio(str(tmp_path))) < 0.01
    assert percent_up(0.2) == "0.2" and percent_up(0.201) == "0.21" and percent_up(None) == "-1"
