"""A real NameServer on 127.0.0.1 (port 0), driven over TCP by RemotingClient and raw sockets."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import struct
import sys
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import rmq
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.route import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from rmq.namesrv import NameServer
from rmq.remoting import (
    RemotingClient,
    RemotingCommand,
    RemotingTimeoutError,
    create_request,
)
from rmq.remoting.codec import FrameDecoder, encode


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def namesrv(tmp_path: Path, clock: Clock) -> AsyncIterator[NameServer]:
    ns = NameServer(kv_config_path=tmp_path / "kvConfig.json", clock=clock)
    await ns.start("127.0.0.1", 0)
    yield ns
    await ns.stop()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    async with RemotingClient() as c:
        yield c


def register_request(
    broker_name: str, addr: str, cluster: str, topics: dict[str, int], *, compressed: bool = False
) -> RemotingCommand:
    body = RegisterBrokerBody(
        TopicConfigSerializeWrapper(
            DataVersion(1, 1), {t: TopicConfig(t, n, n, 6) for t, n in topics.items()}
        )
    ).encode(compressed)
    return create_request(
        RequestCode.REGISTER_BROKER,
        {
            "brokerName": broker_name,
            "brokerAddr": addr,
            "clusterName": cluster,
            "haServerAddr": addr.rsplit(":", 1)[0] + ":10912",
            "brokerId": "0",
            "compressed": "true" if compressed else "false",
            "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
        },
        body,
    )


def route_request(topic: str) -> RemotingCommand:
    return create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


async def raw_exchange(port: int, data: bytes, frames: int) -> list[RemotingCommand]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    try:
        while len(out) < frames:
            chunk = await asyncio.wait_for(reader.read(65536), 5)
            if not chunk:
                break
            out += decoder.feed(chunk)
    finally:
        writer.close()
    return out


async def test_register_then_route(namesrv: NameServer, client: RemotingClient) -> None:
    assert namesrv.port > 0 and namesrv.addr == f"127.0.0.1:{namesrv.port}"
    resp = await client.invoke(
        namesrv.addr, register_request("broker-a", "127.0.0.1:10911", "DefaultCluster", {"TopicA": 4}), 3000
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await client.invoke(
        namesrv.addr,
        register_request("broker-b", "127.0.0.1:20911", "Other", {"TopicA": 2}, compressed=True),
        3000,
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark

    route_resp = await client.invoke(namesrv.addr, route_request("TopicA"), 3000)
    assert route_resp.code == ResponseCode.SUCCESS
    raw = json.loads(bytes(route_resp.body or b""))
    assert sorted(b["brokerAddrs"]["0"] for b in raw["brokerDatas"]) == ["127.0.0.1:10911", "127.0.0.1:20911"]
    route = TopicRouteData.from_json(bytes(route_resp.body or b""))
    assert {q.broker_name: q.write_queue_nums for q in route.queue_datas} == {"broker-a": 4, "broker-b": 2}

    missing = await client.invoke(namesrv.addr, route_request("Nope"), 3000)
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST

    info = await client.invoke(namesrv.addr, create_request(RequestCode.GET_BROKER_CLUSTER_INFO), 3000)
    assert json.loads(bytes(info.body or b""))["clusterAddrTable"] == {
        "DefaultCluster": ["broker-a"],
        "Other": ["broker-b"],
    }


async def test_unknown_code_is_answered_with_3(namesrv: NameServer, client: RemotingClient) -> None:
    resp = await client.invoke(namesrv.addr, create_request(4321), 3000)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert resp.remark == " request type 4321 not supported"


async def test_malformed_frame_closes_only_that_connection(
    namesrv: NameServer, client: RemotingClient
) -> None:
    assert (
        await client.invoke(namesrv.addr, route_request("Nope"), 3000)
    ).code == ResponseCode.TOPIC_NOT_EXIST
    bad = struct.pack(">i", 2)  # length < 4
    assert await raw_exchange(namesrv.port, bad + encode(route_request("Nope")), 1) == []  # closed, no answer
    oversized = struct.pack(">i", 64 * 1024 * 1024)
    assert await raw_exchange(namesrv.port, oversized, 1) == []
    # the other client's connection is untouched
    channel = await client.get_channel(namesrv.addr)
    assert (
        await client.invoke(namesrv.addr, route_request("Nope"), 3000)
    ).code == ResponseCode.TOPIC_NOT_EXIST
    assert channel is await client.get_channel(namesrv.addr) and not channel.is_closed


async def test_oneway_gets_no_response(namesrv: NameServer) -> None:
    oneway = register_request("broker-o", "127.0.0.1:30911", "C", {"OnewayTopic": 1})
    oneway.flag = 2
    oneway.opaque = 1
    follow = route_request("OnewayTopic")
    follow.opaque = 2
    resps = await raw_exchange(namesrv.port, encode(oneway) + encode(follow), 1)
    # the only answer is to the follow-up request, and it sees the oneway registration
    assert [(r.opaque, r.code) for r in resps] == [(2, ResponseCode.SUCCESS)]


async def test_timeout_then_connection_still_usable(namesrv: NameServer, client: RemotingClient) -> None:
    namesrv.remoting.register(9999, lambda ctx, req: None)  # a request the server never answers
    with pytest.raises(RemotingTimeoutError):
        await client.invoke(namesrv.addr, create_request(9999), 100)
    assert (
        await client.invoke(namesrv.addr, route_request("Nope"), 3000)
    ).code == ResponseCode.TOPIC_NOT_EXIST


async def test_broker_routes_vanish_when_its_connection_closes(
    namesrv: NameServer, client: RemotingClient
) -> None:
    closed = asyncio.Event()
    namesrv.remoting.add_close_listener(lambda ch: closed.set())
    async with RemotingClient() as broker:
        resp = await broker.invoke(
            namesrv.addr, register_request("broker-x", "127.0.0.1:40911", "X", {"TopicX": 1}), 3000
        )
        assert resp.code == 0
        assert (await client.invoke(namesrv.addr, route_request("TopicX"), 3000)).code == 0
    await closed.wait()
    assert (
        await client.invoke(namesrv.addr, route_request("TopicX"), 3000)
    ).code == ResponseCode.TOPIC_NOT_EXIST


async def test_silent_broker_expires_and_its_connection_is_closed(namesrv: NameServer, clock: Clock) -> None:
    async with RemotingClient() as broker:
        resp = await broker.invoke(
            namesrv.addr, register_request("broker-s", "127.0.0.1:50911", "S", {"TopicS": 1}), 3000
        )
        assert resp.code == 0
        channel = await broker.get_channel(namesrv.addr)
        clock.now += 120_001
        assert namesrv.scan_not_active_brokers() == 1
        await channel.wait_closed()
    assert namesrv.routes.pick_topic_route("TopicS") is None


async def test_kv_config_over_the_wire(namesrv: NameServer, client: RemotingClient, tmp_path: Path) -> None:
    put = create_request(
        RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T", "value": "broker-a:4"}
    )
    assert (await client.invoke(namesrv.addr, put, 3000)).code == 0
    got = await client.invoke(
        namesrv.addr,
        create_request(RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"}),
        3000,
    )
    assert got.ext_fields == {"value": "broker-a:4"}
    assert json.loads((tmp_path / "kvConfig.json").read_bytes()) == {
        "configTable": {"ORDER_TOPIC_CONFIG": {"T": "broker-a:4"}}
    }


async def test_standalone_process_starts_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    env = dict(os.environ)
    package_root = str(Path(rmq.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "rmq.namesrv",
        "--port",
        "0",
        "--host",
        "127.0.0.1",
        "--kv-config",
        str(tmp_path / "kv.json"),
        env=env,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        port = 0
        while not port:
            line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            assert line, "name server exited before it was ready"
            if "boot success" in line:
                port = int(line.split("listening on 127.0.0.1:")[1].split(",")[0])
        async with RemotingClient() as c:
            resp = await c.invoke(f"127.0.0.1:{port}", route_request("Nope"), 3000)
            assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
