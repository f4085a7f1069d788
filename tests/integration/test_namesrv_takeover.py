"""Takeover protection of the name server with real processes: a standalone ``python -m rmq.namesrv`` and rmq
brokers (``python -m rmq.broker``), all on loopback with ephemeral ports.

A second broker registering an existing brokerName/brokerId from another address is refused (and logged on
both sides) while the first one lives; once the first is killed (SIGKILL: its connection to the name server
closes) or stops (it unregisters), a broker of that name on a new port registers at once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rmq.common.codes import RequestCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.brokerproc import BrokerProcess, start_broker
from tests.integration.test_client_failover import NameServerProcess, create_topic, start_namesrv

CLUSTER = "TakeoverCluster"
TOPIC = "TakeoverTopic"


@pytest.fixture
def brokers() -> Iterator[list[BrokerProcess]]:
    started: list[BrokerProcess] = []
    yield started
    for b in started:
        b.stop()


def start_a(store: Path, namesrv: NameServerProcess, brokers: list[BrokerProcess]) -> BrokerProcess:
    b = start_broker(store, "brokerName=broker-a", f"brokerClusterName={CLUSTER}", namesrv=namesrv.addr)
    brokers.append(b)
    return b


def broker_a_addrs(namesrv: NameServerProcess) -> dict[str, str]:
    resp = invoke_sync(namesrv.addr, create_request(RequestCode.GET_BROKER_CLUSTER_INFO, {}), 5000)
    assert resp.code == 0, resp.remark
    table = json.loads(bytes(resp.body or b"{}"))["brokerAddrTable"]
    return dict(table.get("broker-a", {}).get("brokerAddrs", {}))


def route_addrs(namesrv: NameServerProcess) -> list[dict[str, str]]:
    resp = invoke_sync(
        namesrv.addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}), 5000
    )
    assert resp.code == 0, resp.remark
    return [b["brokerAddrs"] for b in json.loads(bytes(resp.body or b"{}"))["brokerDatas"]]


def until(what: str, check, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def namesrv_refusals(namesrv: NameServerProcess) -> list[str]:
    return [line for line in namesrv.log if "WARN" in line and "refusing" in line]


def test_takeover_refused_then_name_freed_by_kill_and_by_unregister(
    tmp_path: Path, brokers: list[BrokerProcess]
) -> None:
    namesrv = start_namesrv(tmp_path)
    try:
        a = start_a(tmp_path / "a", namesrv, brokers)
        create_topic(a, TOPIC)
        until("broker-a's topic route", lambda: route_addrs(namesrv) == [{"0": a.broker_addr}])

        # An intruder of the same brokerName (a master: brokerId 0) on another port: refused.
        x = start_a(tmp_path / "x", namesrv, brokers)
        until("the intruder's refusal", lambda: any("refused registration: 16" in line for line in x.log))
        [remark] = [line for line in x.log if "refused registration" in line]
        assert f"is registered live at {a.broker_addr}" in remark and x.broker_addr in remark
        [warn] = namesrv_refusals(namesrv)
        assert f"REGISTER_BROKER of broker-a id 0 at {x.broker_addr} (held by {a.broker_addr})" in warn
        assert broker_a_addrs(namesrv) == {"0": a.broker_addr}
        assert route_addrs(namesrv) == [{"0": a.broker_addr}]
        # Its shutdown's unregister (of broker-a id 0 over its own connection) is refused too.
        x.stop()
        assert any(
            f"UNREGISTER_BROKER of broker-a id 0 at {x.broker_addr}" in w for w in namesrv_refusals(namesrv)
        )
        assert broker_a_addrs(namesrv) == {"0": a.broker_addr}

        # broker-a killed: its connection to the name server closes, which frees the name at once ...
        a.kill()
        until("broker-a's removal on its connection's close", lambda: broker_a_addrs(namesrv) == {})
        # ... so broker-a restarted on its store at a new port registers at its start.
        a2 = start_a(tmp_path / "a", namesrv, brokers)
        assert a2.broker_addr != a.broker_addr
        until("the restarted broker-a's route", lambda: route_addrs(namesrv) == [{"0": a2.broker_addr}])
        assert not any("refused registration" in line for line in a2.log)

        # A clean stop unregisters: again the name is free for a new address.
        assert a2.stop() == 0
        assert broker_a_addrs(namesrv) == {}
        a3 = start_a(tmp_path / "a", namesrv, brokers)
        until("the third broker-a's route", lambda: route_addrs(namesrv) == [{"0": a3.broker_addr}])
        assert len(namesrv_refusals(namesrv)) == 2  # the intruder's registration and unregistration only
    finally:
        namesrv.stop()


def test_takeover_allowed_by_option(tmp_path: Path, brokers: list[BrokerProcess]) -> None:
    namesrv = start_namesrv(tmp_path, "--broker-takeover-allowed")
    try:
        a = start_a(tmp_path / "a", namesrv, brokers)
        until("broker-a", lambda: broker_a_addrs(namesrv) == {"0": a.broker_addr})
        x = start_a(tmp_path / "x", namesrv, brokers)
        until("the takeover", lambda: broker_a_addrs(namesrv) == {"0": x.broker_addr})
        assert namesrv_refusals(namesrv) == []
    finally:
        namesrv.stop()


@pytest.mark.parametrize("allowed", [False, True])
def test_embedded_name_server_takes_the_broker_property(
    tmp_path: Path, brokers: list[BrokerProcess], allowed: bool
) -> None:
    props = ("brokerName=broker-a", f"brokerClusterName={CLUSTER}")
    a = start_broker(tmp_path / "a", *props, f"brokerTakeoverAllowed={str(allowed).lower()}")
    brokers.append(a)
    ns = NameServerProcess(a.proc, a.namesrv_addr, a.log)  # only read: the broker's process stops it
    until("broker-a", lambda: broker_a_addrs(ns) == {"0": a.broker_addr})
    x = start_broker(tmp_path / "x", *props, namesrv=a.namesrv_addr)
    brokers.append(x)
    if allowed:
        until("the takeover", lambda: broker_a_addrs(ns) == {"0": x.broker_addr})
    else:
        until("the refusal", lambda: any("refused registration: 16" in line for line in x.log))
        assert broker_a_addrs(ns) == {"0": a.broker_addr}
        assert any(x.broker_addr in w and a.broker_addr in w for w in namesrv_refusals(ns))
