"""Interop: the C++ client bundled in PyPI ``rocketmq`` looks up a route in our NameServer and sends to a stub
broker built on RemotingServer. Skipped when the package is not installed.

The client runs in a child process so a crash in the native library cannot take the test run down.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from collections.abc import AsyncIterator

import pytest
from rmq.common.codes import RequestCode
from rmq.common.route import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from rmq.namesrv import NameServer
from rmq.remoting import RemotingClient, RemotingCommand, RemotingServer, RequestContext, create_request
from rmq.remoting import create_response as respond

pytest.importorskip("rocketmq.client")

PRODUCER = textwrap.dedent(
    """
    import json, sys
    from rocketmq.client import Message, Producer

    producer = Producer("PG_INTEROP")
    producer.set_namesrv_addr(sys.argv[1])
    producer.start()
    try:
        msg = Message("InteropTopic")
        msg.set_tags("TagA")
        msg.set_keys("key-1")
        msg.set_body("hello from c++")
        result = producer.send_sync(msg)
        print(json.dumps({"status": int(result.status), "msg_id": result.msg_id, "offset": result.offset}))
    finally:
        producer.shutdown()
    """
)


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[NameServer, list[RemotingCommand]]]:
    ns = NameServer()
    await ns.start("127.0.0.1", 0)
    broker = RemotingServer(name="stub-broker")
    sends: list[RemotingCommand] = []

    def send(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        sends.append(req)
        queue_id = req.ext_fields.get("e") or req.ext_fields.get("queueId") or "0"
        fields = {"msgId": "7F00000100002A9F0000000000001234", "queueId": queue_id, "queueOffset": "42"}
        return respond(req, 0, ext_fields=fields)

    for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
        broker.register(code, send)
    for code in (RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT):
        broker.register(code, lambda ctx, req: respond(req, 0))
    await broker.start("127.0.0.1", 0)
    body = RegisterBrokerBody(
        TopicConfigSerializeWrapper(DataVersion(1, 1), {"InteropTopic": TopicConfig("InteropTopic", 4, 4, 6)})
    ).encode()
    registrar = RemotingClient()
    ext = {
        "brokerName": "broker-a",
        "brokerAddr": f"127.0.0.1:{broker.port}",
        "clusterName": "DefaultCluster",
        "haServerAddr": "127.0.0.1:10912",
        "brokerId": "0",
    }
    resp = await registrar.invoke(ns.addr, create_request(RequestCode.REGISTER_BROKER, ext, body), 3000)
    assert resp.code == 0
    try:
        yield ns, sends
    finally:
        await registrar.close()
        await broker.stop()
        await ns.stop()


async def test_cpp_producer_routes_through_our_name_server(
    cluster: tuple[NameServer, list[RemotingCommand]],
) -> None:
    ns, sends = cluster
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PRODUCER,
        ns.addr,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert result["status"] == 0  # SEND_OK
    assert result["offset"] == 42
    [send] = sends
    ext = send.ext_fields
    topic = ext.get("b") or ext.get("topic")
    assert topic == "InteropTopic"
    assert send.body == b"hello from c++"
    assert all(isinstance(v, str) for v in ext.values())  # JSON numbers from C++ arrive as strings
