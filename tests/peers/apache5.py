"""Apache RocketMQ 5.x as a test peer of rmq's gRPC endpoint: a name server and a proxy in "local" mode
(the broker runs inside the proxy: ``ProxyStartup -pm local -bc broker.conf -pc rmq-proxy.json -n ADDR``).

The jars are ``scripts/peers``'s ``server5`` (5.5.0 from Maven Central). The broker listens on a free
loopback port (and on the port two below, its "VIP" channel, and one above, HA), the proxy on free gRPC and
Remoting ports. Topics get their 5.x message type (``+message.type=NORMAL|FIFO|DELAY|TRANSACTION``), which
Apache's proxy checks against what a 5.x client sends: :func:`create_topic` sends UPDATE_AND_CREATE_TOPIC
with that attribute straight to the broker.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.peers.apache import (
    BROKER_JVM,
    JVM_SMALL,
    ApachePeer,
    _await_line,
    _java,
    _prepare_home,
    free_port,
    peer_libs,
    start_apache_namesrv,
    stop_processes,
)


@dataclass
class Apache5Peer:
    namesrv: subprocess.Popen[str]
    proxy: subprocess.Popen[str]
    namesrv_addr: str
    broker_addr: str
    grpc_port: int
    home: Path
    log: list[str] = field(default_factory=list)

    @property
    def endpoints(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def logs(self, tail: int = 60) -> str:
        return log_tails(self.home, ("proxy", "broker"), self.log, tail)

    def stop(self, timeout: float = 30.0) -> None:
        ApachePeer(self.namesrv, self.proxy, self.namesrv_addr, self.broker_addr, self.home).stop(timeout)


def log_tails(home: Path, names: tuple[str, ...], output: list[str], tail: int) -> str:
    """The last ``tail`` lines of each named RocketMQ log under ``home``, then of the process output."""
    parts = []
    for name in names:
        path = home / "user" / "logs" / "rocketmqlogs" / f"{name}.log"
        if path.exists():
            lines = path.read_text(errors="replace").splitlines()[-tail:]
            parts.append(f"--- {path}\n" + "\n".join(lines))
    return "\n".join(parts + output[-tail:])


def start_apache5(
    home: Path, *props: str, timeout: float = 180.0, jvm: list[str] | None = None
) -> Apache5Peer:
    """Start the 5.x name server and the proxy with its broker (DefaultCluster, broker-a) under ``home``;
    ``props`` are extra broker.conf lines; ``jvm`` replaces the proxy's JVM options (default ``BROKER_JVM``).
    Returns once the proxy says it started."""
    libs = peer_libs().server5
    log: list[str] = []
    _prepare_home(home)
    namesrv, namesrv_addr = start_apache_namesrv(home, log, timeout, libs=libs)
    broker_port = free_port(neighbours=(-2, 1))
    grpc_port, remoting_port = free_port(), free_port()
    store = home / "store"
    lines = [
        "brokerClusterName=DefaultCluster",
        "brokerName=broker-a",
        "brokerId=0",
        "brokerRole=ASYNC_MASTER",
        "brokerIP1=127.0.0.1",
        f"listenPort={broker_port}",
        f"namesrvAddr={namesrv_addr}",
        f"storePathRootDir={store}",
        f"storePathCommitLog={store / 'commitlog'}",
        "autoCreateTopicEnable=true",
        "autoCreateSubscriptionGroup=true",
        f"mappedFileSizeCommitLog={64 * 1024 * 1024}",
        f"mappedFileSizeConsumeQueue={20 * 30000}",
        *props,
    ]
    (home / "broker.conf").write_text("\n".join(lines) + "\n")
    proxy_conf = {
        "rocketMQClusterName": "DefaultCluster",
        "grpcServerPort": grpc_port,
        "remotingListenPort": remoting_port,
        "namesrvAddr": namesrv_addr,
    }
    (home / "rmq-proxy.json").write_text(json.dumps(proxy_conf))
    proxy = _java(
        libs,
        BROKER_JVM if jvm is None else jvm,
        home,
        "org.apache.rocketmq.proxy.ProxyStartup",
        "-pm",
        "local",
        "-bc",
        str(home / "broker.conf"),
        "-pc",
        str(home / "rmq-proxy.json"),
        "-n",
        namesrv_addr,
    )
    peer = Apache5Peer(namesrv, proxy, namesrv_addr, f"127.0.0.1:{broker_port}", grpc_port, home, log)
    _NAMESRV_OF[peer.broker_addr] = namesrv_addr
    if not _await_line(proxy, "rocketmq-proxy startup successfully", log, timeout):
        detail = peer.logs()
        peer.stop()
        raise RuntimeError(f"Apache RocketMQ 5.x proxy did not start:\n{detail}")
    return peer


def create_topic(broker_addr: str, topic: str, message_type: str | None = None, queues: int = 8) -> None:
    """UPDATE_AND_CREATE_TOPIC on one broker, with a 5.x ``message.type`` attribute when given."""
    fields = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": str(queues),
        "writeQueueNums": str(queues),
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    if message_type:
        fields["attributes"] = f"+message.type={message_type}"
    response = invoke_sync(broker_addr, create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields), 10_000)
    if response.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"create topic {topic} on {broker_addr}: code {response.code} {response.remark}")
    namesrv = _NAMESRV_OF.get(broker_addr)
    if namesrv is not None:
        wait_for_route(namesrv, topic)


_NAMESRV_OF: dict[str, str] = {}
"""The name server each started peer broker registers with, by broker address."""


def wait_for_route(namesrv_addr: str, topic: str, timeout: float = 30.0) -> None:
    """Until the name server routes ``topic``: the broker registers a new topic in the background, and a 5.x
    client whose first route query comes earlier fails its send ("failed to fetch topic route")."""
    deadline = time.monotonic() + timeout
    while True:
        request = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if invoke_sync(namesrv_addr, request, 10_000).code == ResponseCode.SUCCESS:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"no route of {topic} at {namesrv_addr} after {timeout} s")
        time.sleep(0.1)


def create_group(
    broker_addr: str,
    group: str,
    retry_max_times: int = 16,
    orderly: bool = False,
    attributes: dict[str, str] | None = None,
) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on one broker: Apache's proxy serves no 5.x consumer of a group
    the broker does not have (its settings stay unknown: "settings is null"), autoCreateSubscriptionGroup
    or not. ``attributes`` are 5.x group attributes set (``+key=value`` as mqadmin's ``--attributes``)."""
    body = {
        "groupName": group,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeBroadcastEnable": True,
        "retryQueueNums": 1,
        "retryMaxTimes": retry_max_times,
        "brokerId": 0,
        "whichBrokerWhenConsumeSlowly": 1,
        "notifyConsumerIdsChangedEnable": True,
        "consumeMessageOrderly": orderly,
    }
    if attributes:
        body["attributes"] = {f"+{k}": v for k, v in attributes.items()}
    request = create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, json.dumps(body).encode())
    response = invoke_sync(broker_addr, request, 10_000)
    if response.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"create group {group} on {broker_addr}: code {response.code} {response.remark}")


LITE_BROKER_PROPS = ("enableLmq=true", "enableMultiDispatch=true")
"""What Apache's broker needs to keep lite topics (both off by default in 5.5.0)."""


@dataclass
class ClusterProxy:
    """Apache's proxy in "cluster" mode: its own process, reaching the brokers over Remoting."""

    proc: subprocess.Popen[str]
    grpc_port: int
    home: Path
    log: list[str] = field(default_factory=list)

    @property
    def endpoints(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def logs(self, tail: int = 60) -> str:
        return log_tails(self.home, ("proxy",), self.log, tail)

    def stop(self, timeout: float = 30.0) -> None:
        stop_processes(self.proc, timeout=timeout)


def start_cluster_proxy(apache: Apache5Peer, home: Path, timeout: float = 120.0) -> ClusterProxy:
    """A second proxy of the same 5.x cluster, in cluster mode: Apache 5.5.0 serves lite consumption
    (SyncLiteSubscription, PopLite) only there; its local mode answers both INTERNAL_SERVER_ERROR (no lite
    subscription service, ``popLiteMessage`` not implemented; apache/rocketmq issue 10478)."""
    libs = peer_libs().server5
    _prepare_home(home)
    # It makes its system topics on the brokers of the cluster topic's route, which the broker registers
    # some seconds after it started.
    wait_for_route(apache.namesrv_addr, "DefaultCluster", timeout)
    grpc_port, remoting_port = free_port(), free_port()
    conf = {
        "rocketMQClusterName": "DefaultCluster",
        "grpcServerPort": grpc_port,
        "remotingListenPort": remoting_port,
        "namesrvAddr": apache.namesrv_addr,
    }
    (home / "rmq-proxy.json").write_text(json.dumps(conf))
    jvm = ["-Xms128m", "-Xmx256m", *JVM_SMALL]
    proc = _java(
        libs,
        jvm,
        home,
        "org.apache.rocketmq.proxy.ProxyStartup",
        "-pm",
        "cluster",
        "-pc",
        str(home / "rmq-proxy.json"),
        "-n",
        apache.namesrv_addr,
    )
    proxy = ClusterProxy(proc, grpc_port, home)
    if not _await_line(proc, "rocketmq-proxy startup successfully", proxy.log, timeout):
        detail = proxy.logs()
        proxy.stop()
        raise RuntimeError(f"Apache RocketMQ 5.x proxy (cluster mode) did not start:\n{detail}")
    return proxy
