"""A Java RocketMQ ``broker.conf`` is a drop-in: every property a 4.9 broker reads is accepted, the store
path properties are honoured, the ones rmq does not implement are listed in one warning, and every unknown
name or bad value is reported together, each with its file and line and a "did you mean" when one is close.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from rmq.broker.__main__ import build_config
from rmq.broker.config import BrokerConfig, ConfigError
from rmq.broker.java_properties import JAVA_PROPERTIES
from rmq.client import Message
from rmq.client import sync as rmq_sync
from rmq.client.config import ClientConfig

from tests.brokerproc import start_broker

# The shape of real broker.conf files: Apache's conf/broker.conf and 2m-2s-async examples plus the lines
# operators commonly add (thread pools, flush tuning, paths, DLedger off).
REAL_CONF = """\
# broker.conf as deployed with Apache RocketMQ 4.9
brokerClusterName = DefaultCluster
brokerName = broker-a
brokerId = 0
deleteWhen = 04
fileReservedTime = 48
brokerRole = ASYNC_MASTER
flushDiskType = ASYNC_FLUSH
namesrvAddr=127.0.0.1:9876
brokerIP1=127.0.0.1
listenPort=10911
defaultTopicQueueNums=4
autoCreateTopicEnable=true
autoCreateSubscriptionGroup=true
rocketmqHome=/opt/rocketmq
storePathRootDir={root}
storePathCommitLog={root}/commitlog
storePathConsumeQueue={elsewhere}/consumequeue
storePathIndex={elsewhere}/index
storeCheckpoint={elsewhere}/checkpoint
abortFile={elsewhere}/abort
mapedFileSizeCommitLog=1073741824
mapedFileSizeConsumeQueue=300000
maxMessageSize=65536
flushCommitLogLeastPages=4
flushConsumeQueueLeastPages=2
flushCommitLogThoroughInterval=10000
flushConsumeQueueThoroughInterval=60000
flushCommitLogTimed=false
sendMessageThreadPoolNums=16
pullMessageThreadPoolNums=32
queryMessageThreadPoolNums=8
adminBrokerThreadPoolNums=16
clientManageThreadPoolNums=32
consumerManageThreadPoolNums=32
useReentrantLockWhenPutMessage=true
waitTimeMillsInSendQueue=200
accessMessageInMemoryMaxRatio=40
transientStorePoolEnable=false
warmMapedFileEnable=false
slaveReadEnable=false
enableDLegerCommitLog=false
diskMaxUsedSpaceRatio=88
messageIndexEnable=true
maxTransferCountOnMessageInMemory=32
serverWorkerThreads=8
serverSelectorThreads=3
clientWorkerThreads=4
osPageCacheBusyTimeOutMills=1000
brokerFastFailureEnable=true
"""


# Values a sample would get wrong: enums, a cron hour, delay levels, an address, sizes and ratios.
SPECIAL = {
    "brokerRole": "SYNC_MASTER",
    "flushDiskType": "SYNC_FLUSH",
    "deleteWhen": "04",
    "messageDelayLevel": "1s 2s",
    "namesrvAddr": "127.0.0.1:9876",
    "haMasterAddress": "127.0.0.1:10912",
    "mappedFileSizeCommitLog": "1048576",
    "mappedFileSizeConsumeQueue": "6000",
    "maxIndexNum": "400",
    "diskSpaceWarningLevelRatio": "90",
    "listenPort": "10911",
}


def write_conf(tmp_path: Path, text: str) -> Path:
    conf = tmp_path / "broker.conf"
    conf.write_text(text)
    return conf


def real_conf(tmp_path: Path) -> tuple[Path, Path, Path]:
    root, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    return write_conf(tmp_path, REAL_CONF.format(root=root, elsewhere=elsewhere)), root, elsewhere


def test_every_java_broker_property_is_accepted() -> None:
    """Each of the 4.9 names (BrokerConfig, MessageStoreConfig, NettyServerConfig, NettyClientConfig)
    with a value of its Java type builds a config."""
    defaults = BrokerConfig().properties()  # a string property takes its default (or any text)
    samples = {"boolean": "false", "int": "1", "long": "1"}
    for name, java_type in sorted(JAVA_PROPERTIES.items()):
        if name in ("storePathRootDir", "storePathCommitLog", "brokerIP1", "brokerId"):
            continue  # real values elsewhere; a sample would point the store at the current directory
        value = SPECIAL.get(name) or samples.get(java_type) or defaults.get(name) or "x"
        build_config(None, None, (f"{name}={value}",))  # no ConfigError


def test_real_conf_builds_with_paths_honoured_and_the_rest_listed(tmp_path: Path) -> None:
    conf, _, elsewhere = real_conf(tmp_path)
    cfg = build_config(str(conf), None, ())
    store = cfg.store_config()
    assert store["storePathConsumeQueue"] == f"{elsewhere}/consumequeue"
    assert store["storePathIndex"] == f"{elsewhere}/index"
    assert store["storeCheckpoint"] == f"{elsewhere}/checkpoint"
    assert store["abortFile"] == f"{elsewhere}/abort"
    assert (cfg.default_topic_queue_nums, cfg.max_message_size) == (4, 65536)
    # The old spellings are ignored as the Java 4.9 broker ignores them (the default sizes stay).
    assert "mappedFileSizeCommitLog" not in store and "mappedFileSizeConsumeQueue" not in store
    listed = cfg.not_implemented
    for name in (
        "flushCommitLogTimed",
        "enableDLegerCommitLog",
        "sendMessageThreadPoolNums",
        "serverWorkerThreads",
        "clientWorkerThreads",
    ):
        assert name in listed, name
    # Fast failure (back-pressure on sends) is implemented: its properties are read, not listed.
    for name in ("brokerFastFailureEnable", "waitTimeMillsInSendQueue", "osPageCacheBusyTimeOutMills"):
        assert name not in listed, name
    assert cfg.broker_fast_failure_enable
    assert (cfg.wait_time_mills_in_send_queue, cfg.os_page_cache_busy_time_out_mills) == (200, 1000)
    assert "mappedFileSizeConsumeQueue" in listed["mapedFileSizeConsumeQueue"]


def test_a_broker_starts_on_a_real_conf_and_uses_the_moved_paths(tmp_path: Path) -> None:
    conf, root, elsewhere = real_conf(tmp_path)
    conf.write_text(conf.read_text().replace("namesrvAddr=127.0.0.1:9876\n", ""))  # the embedded one
    broker = start_broker(root, extra_args=["-c", str(conf)])
    try:
        with rmq_sync.Producer("conf_pg", client_config=ClientConfig(namesrv_addr=broker.namesrv_addr)) as p:
            assert p.send(Message("ConfTopic", b"hello", keys="k1")).ok
        assert (elsewhere / "abort").exists()
    finally:
        assert broker.stop() == 0
    assert (elsewhere / "consumequeue" / "ConfTopic").is_dir()
    assert (elsewhere / "checkpoint").stat().st_size == 4096
    assert not (elsewhere / "abort").exists()
    for default in ("consumequeue", "index", "checkpoint", "abort"):
        assert not (root / default).exists(), default
    warnings = [line for line in broker.log if "accepted without effect" in line]
    assert len(warnings) == 1, broker.log[-20:]
    assert "mapedFileSizeCommitLog" in warnings[0]


def test_every_bad_line_is_reported_at_once_with_its_line(tmp_path: Path) -> None:
    conf = write_conf(
        tmp_path,
        "brokerName=b\nbrokerip1=127.0.0.1\n\nlistenPort=ten\nflushDiskTyp=SYNC_FLUSH\n"
        "sendMessageThreadPoolNums=many\nnoSuchThingAtAll=1\n",
    )
    with pytest.raises(ConfigError) as info:
        build_config(str(conf), None, ("maxMessageSize=big",))
    lines = str(info.value).splitlines()
    assert lines == [
        f"{conf}:2: unknown property 'brokerip1' (did you mean 'brokerIP1'?)",
        f"{conf}:4: listenPort: 'ten' is not a whole number",
        f"{conf}:5: unknown property 'flushDiskTyp' (did you mean 'flushDiskType'?)",
        f"{conf}:6: sendMessageThreadPoolNums: 'many' is not a whole number",
        "-p maxMessageSize: " + lines[-1].split(": ", 1)[1],
    ]
    assert "maxMessageSize" in lines[-1]
    # The command line says the same, and exits 2 without starting.
    r = subprocess.run(
        [sys.executable, "-m", "rmq.broker", "-c", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, HOME=str(tmp_path)),
    )
    assert r.returncode == 2
    for line in lines[:-1]:
        assert line in r.stderr, (line, r.stderr)


@pytest.mark.parametrize(
    ("line", "reason"),
    [("enableDLegerCommitLog=true", "DLedger")],
)
def test_switches_for_missing_features_refuse_when_on(line: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        build_config(None, None, (line,))
    key = line.split("=")[0]
    assert key in build_config(None, None, (f"{key}=false",)).not_implemented


def test_broker_ip1_defaults_to_an_address_other_machines_can_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    """As RocketMQ picks it: the first interface address outside 127.0.* and 192.168.*, else the last
    non-loopback one, else the host name's address."""
    from rmq.common import netaddr

    found = netaddr.interface_addresses()
    non_loopback = [ip for _, ip in found if not ip.startswith("127.")]
    if non_loopback:  # this machine: the default is one of its own reachable addresses
        assert BrokerConfig().broker_ip1 in non_loopback
    cases = [
        ([("lo", "127.0.0.1"), ("wlan0", "192.168.1.5"), ("eth0", "10.0.0.7")], "10.0.0.7"),
        ([("lo", "127.0.0.1"), ("eth0", "192.168.1.5"), ("eth1", "192.168.2.9")], "192.168.2.9"),
    ]
    for table, expected in cases:
        monkeypatch.setattr(netaddr, "interface_addresses", lambda table=table: table)
        assert netaddr.local_address() == expected
    monkeypatch.setattr(netaddr, "interface_addresses", lambda: [("lo", "127.0.0.1")])
    monkeypatch.setattr(netaddr.socket, "gethostbyname", lambda _: "127.0.1.1")
    assert netaddr.local_address() == "127.0.1.1"


def test_names_java_ignores_are_ignored_in_a_conf_with_the_warning(tmp_path: Path) -> None:
    """A circulating broker.conf template carries names no 4.9 broker reads (Java ignores them): rmq starts,
    listing them in its one warning; a typo of a real name, or an unknown -p, still stops the start."""
    conf = write_conf(tmp_path, "brokerName=b\ncheckTransactionMessageEnable=false\nlistenPort=0\n")
    cfg = build_config(str(conf), None, ())
    assert cfg.broker_name == "b"
    assert "Java ignores it" in cfg.not_implemented["checkTransactionMessageEnable"]
    with pytest.raises(ConfigError, match="-p checkTransactionMessageEnable: unknown property"):
        build_config(str(conf), None, ("checkTransactionMessageEnable=false",))
    typo = write_conf(tmp_path, "brokerNmae=b\n")
    with pytest.raises(ConfigError, match="did you mean 'brokerName'"):
        build_config(str(typo), None, ())


def test_broker_ip1_defaults_to_a_specific_bind_address() -> None:
    cfg = BrokerConfig()
    cfg.update({"bindAddress": "127.0.0.1"})
    assert cfg.broker_ip1 == "127.0.0.1"
    cfg = BrokerConfig()
    cfg.update({"brokerIP1": "10.1.2.3", "bindAddress": "127.0.0.1"})
    assert cfg.broker_ip1 == "10.1.2.3"  # set explicitly: kept, whatever the order
    cfg = BrokerConfig()
    cfg.update({"bindAddress": "127.0.0.1", "brokerIP1": "10.1.2.3"})
    assert cfg.broker_ip1 == "10.1.2.3"
    default = BrokerConfig().broker_ip1
    cfg = BrokerConfig()
    cfg.update({"bindAddress": "0.0.0.0"})  # every interface: the announced address is picked as before
    assert cfg.broker_ip1 == default


def test_a_namesrv_option_the_conf_makes_useless_is_an_error(tmp_path: Path) -> None:
    conf = write_conf(tmp_path, "namesrvAddr=127.0.0.1:9876\n")
    for option in ("--namesrv-port", "--namesrv-metrics-port"):
        r = subprocess.run(
            [sys.executable, "-m", "rmq.broker", "-c", str(conf), option, "0"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 2, r.stderr
        assert f"{option} is for the embedded name server, but namesrvAddr=127.0.0.1:9876" in r.stderr


def test_log_lines_name_the_broker_and_each_broker_has_its_own_file(tmp_path: Path) -> None:
    """Without logDir two brokers on one host log to ~/logs/rmqlogs/<brokerName>_<brokerId>/broker.log."""
    home = tmp_path / "home"
    env = dict(os.environ, HOME=str(home), PYTHONUNBUFFERED="1")
    args = [sys.executable, "-m", "rmq.broker", "-p", "listenPort=0", "-p", "haListenPort=0"]
    args += ["-p", "bindAddress=127.0.0.1", "--namesrv-port", "0", "-p", "grpcServerPort=0"]
    procs = []
    for name in ("log-a", "log-b"):
        store = tmp_path / name
        cmd = [*args, "-p", f"brokerName={name}", "-p", f"storePathRootDir={store}"]
        procs.append(
            subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        )
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("RMQ-READY"), line
            assert "broker=127.0.0.1:" in line  # brokerIP1 follows the specific bindAddress
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)
    for name, proc in zip(("log-a", "log-b"), procs, strict=True):
        path = home / "logs" / "rmqlogs" / f"{name}_0" / "broker.log"
        text = path.read_text()
        assert f"[{name}_0 {proc.pid}] rmq.broker: rmq " in text, text[:500]
        other = "log-b" if name == "log-a" else "log-a"
        assert f"[{other}_0" not in text


def test_network_thread_spin_is_bounded() -> None:
    c = BrokerConfig()
    assert c.network_thread_spin_micros == 50
    c.set("networkThreadSpinMicros", "0")
    assert c.network_thread_spin_micros == 0
    c.set("networkThreadSpinMicros", "1000")
    assert c.network_thread_spin_micros == 1000
    for bad in ("-1", "1001"):
        out_of_range = rf"networkThreadSpinMicros: '{bad}' is out of range \(µs, 0 to 1000\)"
        with pytest.raises(ConfigError, match=out_of_range):
            c.set("networkThreadSpinMicros", bad)
    with pytest.raises(ConfigError, match="networkThreadSpinMicros: 'fast' is not a whole number"):
        c.set("networkThreadSpinMicros", "fast")
