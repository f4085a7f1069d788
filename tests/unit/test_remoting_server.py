"""Dispatch rules with a fake context (no sockets), then RemotingServer and RemotingClient on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from rmq.common.codes import RequestCode, ResponseCode, SerializeType
from rmq.remoting import (
    RemotingClient,
    RemotingCommand,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingServer,
    RemotingTimeoutError,
    RequestContext,
    create_request,
    create_response,
)
from rmq.remoting.channel import Channel
from rmq.remoting.client import invoke_sync
from rmq.remoting.codec import FrameDecoder, encode
from rmq.remoting.dispatcher import Dispatcher
from rmq.remoting.headers import header_str

# --- dispatcher rules without sockets -----------------------------------------------------------------------


class FakeContext:
    def __init__(self) -> None:
        self.sent: list[RemotingCommand] = []
        self.channel_id = 1
        self.remote_addr = "10.0.0.1:5555"
        self.is_closed = False
        self.last_seen = 0.0
        self.attributes: dict[str, Any] = {}

    def send_response(self, response: RemotingCommand) -> bool:
        self.sent.append(response)
        return True


def request(code: int, oneway: bool = False, **ext: str) -> RemotingCommand:
    cmd = create_request(code, dict(ext), oneway=oneway)
    cmd.opaque = 77
    return cmd


def test_unknown_code_gets_code_3() -> None:
    ctx = FakeContext()
    Dispatcher().dispatch(ctx, request(999))  # type: ignore[arg-type]
    [resp] = ctx.sent
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert resp.remark == " request type 999 not supported"
    assert resp.opaque == 77 and resp.is_response


def test_unknown_code_silence_and_default_processor() -> None:
    ctx = FakeContext()
    quiet = Dispatcher(answer_unsupported=False)
    quiet.dispatch(ctx, request(999))  # type: ignore[arg-type]
    assert ctx.sent == []
    quiet.register_default(lambda c, r: create_response(r, 0, "default"))
    quiet.dispatch(ctx, request(999))  # type: ignore[arg-type]
    assert [r.remark for r in ctx.sent] == ["default"]


def test_processor_exception_and_header_error_give_code_1() -> None:
    ctx = FakeContext()
    d = Dispatcher()

    def boom(c: RequestContext, r: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("disk on fire")

    def needs_topic(c: RequestContext, r: RemotingCommand) -> RemotingCommand:
        return create_response(r, 0, header_str(r.ext_fields, "topic"))

    d.register(1, boom)
    d.register(2, needs_topic)
    d.dispatch(ctx, request(1))  # type: ignore[arg-type]
    d.dispatch(ctx, request(2))  # type: ignore[arg-type]
    d.dispatch(ctx, request(2, topic="T"))  # type: ignore[arg-type]
    assert [(r.code, r.remark) for r in ctx.sent] == [
        (ResponseCode.SYSTEM_ERROR, "RuntimeError: disk on fire"),
        (ResponseCode.SYSTEM_ERROR, "the custom field <topic> is null"),
        (ResponseCode.SUCCESS, "T"),
    ]


def test_oneway_requests_get_no_answer_of_any_kind() -> None:
    ctx = FakeContext()
    d = Dispatcher()
    calls: list[int] = []

    def ok(c: RequestContext, r: RemotingCommand) -> RemotingCommand:
        calls.append(r.code)
        return create_response(r, 0)

    def boom(c: RequestContext, r: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("x")

    d.register(1, ok)
    d.register(2, boom)
    for code in (1, 2, 999):
        d.dispatch(ctx, request(code, oneway=True))  # type: ignore[arg-type]
    assert calls == [1]
    assert ctx.sent == []


def test_processor_returning_junk_is_a_system_error() -> None:
    ctx = FakeContext()
    d = Dispatcher()
    d.register(1, lambda c, r: "oops")  # type: ignore[arg-type,return-value]
    d.dispatch(ctx, request(1))  # type: ignore[arg-type]
    assert ctx.sent[0].code == ResponseCode.SYSTEM_ERROR


async def test_system_busy_when_too_many_requests_in_flight() -> None:
    ctx = FakeContext()
    d = Dispatcher(max_in_flight=2)
    release = asyncio.Event()

    async def slow(c: RequestContext, r: RemotingCommand) -> RemotingCommand:
        await release.wait()
        return create_response(r, 0, "done")

    d.register(1, slow)
    d.register(2, lambda c, r: create_response(r, 0, "fast"))
    for _ in range(3):
        d.dispatch(ctx, request(1))  # type: ignore[arg-type]
    d.dispatch(ctx, request(2))  # type: ignore[arg-type]
    assert d.in_flight == 2
    assert [r.code for r in ctx.sent] == [ResponseCode.SYSTEM_BUSY, ResponseCode.SYSTEM_BUSY]
    assert all((r.remark or "").startswith("[REJECTREQUEST]") for r in ctx.sent)
    release.set()
    await asyncio.gather(*list(d._tasks))
    assert [r.remark for r in ctx.sent[2:]] == ["done", "done"]
    assert d.in_flight == 0


async def test_async_exception_and_sync_slow_path() -> None:
    ctx = FakeContext()
    d = Dispatcher()

    async def boom(c: RequestContext, r: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(0)
        raise ValueError("late failure")

    async def slow_path(r: RemotingCommand) -> RemotingCommand:
        await asyncio.sleep(0)
        return create_response(r, 0, "slow")

    def fast_or_slow(c: RequestContext, r: RemotingCommand) -> Any:
        if r.ext_fields.get("fast"):
            return create_response(r, 0, "fast")
        return slow_path(r)

    d.register(1, boom)
    d.register(2, fast_or_slow)
    d.dispatch(ctx, request(2, fast="1"))  # type: ignore[arg-type]
    assert d.in_flight == 0  # no task for the fast path
    d.dispatch(ctx, request(1))  # type: ignore[arg-type]
    d.dispatch(ctx, request(2))  # type: ignore[arg-type]
    assert d.in_flight == 2
    await asyncio.gather(*list(d._tasks))
    assert [(r.code, r.remark) for r in ctx.sent] == [
        (0, "fast"),
        (ResponseCode.SYSTEM_ERROR, "ValueError: late failure"),
        (0, "slow"),
    ]


# --- over loopback ------------------------------------------------------------------------------------------


@pytest.fixture
async def server() -> AsyncIterator[RemotingServer]:
    srv = RemotingServer()
    srv.register(
        1, lambda ctx, req: create_response(req, 0, remark=req.ext_fields.get("echo"), body=req.body)
    )
    await srv.start("127.0.0.1", 0)
    yield srv
    await srv.stop()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    yield c
    await c.close()


def addr(server: RemotingServer) -> str:
    return f"127.0.0.1:{server.port}"


async def raw_exchange(port: int, data: bytes, frames: int) -> list[RemotingCommand]:
    """Write raw bytes, read until ``frames`` responses are decoded (or EOF)."""
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


async def test_request_response_and_port_zero(server: RemotingServer, client: RemotingClient) -> None:
    assert server.port > 0
    resp = await client.invoke(addr(server), create_request(1, {"echo": "hi"}, b"payload"), 3000)
    assert resp.code == 0 and resp.remark == "hi" and resp.body == b"payload"
    assert resp.is_response
    assert resp.version == 409


async def test_pipelining_many_requests_on_one_connection(
    server: RemotingServer, client: RemotingClient
) -> None:
    reqs = [create_request(1, {"echo": str(i)}, str(i).encode() * 10) for i in range(300)]
    resps = await asyncio.gather(*(client.invoke(addr(server), r, 5000) for r in reqs))
    assert [r.remark for r in resps] == [str(i) for i in range(300)]
    assert [r.body for r in resps] == [str(i).encode() * 10 for i in range(300)]
    assert len(server.channels) == 1


async def test_large_body_round_trip(server: RemotingServer, client: RemotingClient) -> None:
    body = bytes(range(256)) * (4 * 4096)  # 4 MiB
    resp = await client.invoke(addr(server), create_request(1, body=body), 10_000)
    assert resp.body == body


async def test_binary_request_gets_binary_response(server: RemotingServer) -> None:
    req = RemotingCommand(1, opaque=5, ext_fields={"echo": "bin"}, serialize_type=SerializeType.ROCKETMQ)
    [resp] = await raw_exchange(server.port, encode(req), 1)
    assert resp.serialize_type == SerializeType.ROCKETMQ
    assert (resp.opaque, resp.remark, resp.is_response) == (5, "bin", True)


async def test_unknown_code_and_oneway_over_the_wire(server: RemotingServer) -> None:
    oneway = RemotingCommand(1, opaque=1, flag=2, ext_fields={"echo": "oneway"})
    unknown_oneway = RemotingCommand(4242, opaque=2, flag=2)
    unknown = RemotingCommand(4242, opaque=3)
    normal = RemotingCommand(1, opaque=4, ext_fields={"echo": "normal"})
    data = b"".join(encode(c) for c in (oneway, unknown_oneway, unknown, normal))
    resps = await raw_exchange(server.port, data, 2)
    # responses come in request order: nothing for the two oneway requests
    assert [(r.opaque, r.code) for r in resps] == [(3, ResponseCode.REQUEST_CODE_NOT_SUPPORTED), (4, 0)]
    assert resps[0].remark == " request type 4242 not supported"


async def test_processor_exception_over_the_wire(server: RemotingServer, client: RemotingClient) -> None:
    def boom(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        raise KeyError("nope")

    server.register(2, boom)
    resp = await client.invoke(addr(server), create_request(2), 3000)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark is not None and "KeyError" in resp.remark and "nope" in resp.remark
    # the connection survives
    assert (await client.invoke(addr(server), create_request(1, {"echo": "still"}), 3000)).remark == "still"


async def test_unencodable_response_becomes_system_error(server: RemotingServer) -> None:
    server.register(6, lambda ctx, req: create_response(req, 70_000))  # does not fit the binary header
    req = RemotingCommand(6, opaque=8, serialize_type=SerializeType.ROCKETMQ)
    [resp] = await raw_exchange(server.port, encode(req), 1)
    assert (resp.opaque, resp.code) == (8, ResponseCode.SYSTEM_ERROR)
    assert resp.remark is not None and resp.remark.startswith("cannot encode response")


async def test_malformed_frame_closes_only_that_connection(
    server: RemotingServer, client: RemotingClient
) -> None:
    closed: list[int] = []
    server.add_close_listener(lambda ch: closed.append(ch.channel_id))
    assert (await client.invoke(addr(server), create_request(1, {"echo": "a"}), 3000)).remark == "a"
    garbage = struct.pack(">iI", 10, (7 << 24) | 6) + b"garbag"
    assert await raw_exchange(server.port, garbage, 1) == []  # EOF, no answer
    assert len(closed) == 1
    assert (await client.invoke(addr(server), create_request(1, {"echo": "b"}), 3000)).remark == "b"
    assert len(server.channels) == 1


async def test_timeout(server: RemotingServer, client: RemotingClient) -> None:
    server.register(3, lambda ctx, req: None)  # never answers
    started = time.monotonic()
    with pytest.raises(RemotingTimeoutError):
        await client.invoke(addr(server), create_request(3), 100)
    assert time.monotonic() - started < 2
    channel = await client.get_channel(addr(server))
    assert channel.pending_requests == 0
    # a late response to a timed-out request is dropped, the connection keeps working
    assert (await client.invoke(addr(server), create_request(1, {"echo": "ok"}), 3000)).remark == "ok"


async def test_parked_request_answered_later(server: RemotingServer, client: RemotingClient) -> None:
    parked: list[tuple[RequestContext, RemotingCommand]] = []
    arrived = asyncio.Event()

    def park(ctx: RequestContext, req: RemotingCommand) -> None:
        parked.append((ctx, req))
        arrived.set()

    server.register(4, park)
    call = asyncio.ensure_future(client.invoke(addr(server), create_request(4, {"k": "v"}), 3000))
    await arrived.wait()
    ctx, req = parked[0]
    assert not call.done()
    assert ctx.send_response(create_response(req, 0, "woken"))
    assert (await call).remark == "woken"


async def test_connection_closed_fails_pending_requests(
    server: RemotingServer, client: RemotingClient
) -> None:
    server.register(5, lambda ctx, req: ctx.close())
    with pytest.raises(RemotingSendRequestError):
        await client.invoke(addr(server), create_request(5), 3000)
    # the pool reconnects on the next call
    assert (await client.invoke(addr(server), create_request(1, {"echo": "again"}), 3000)).remark == "again"


async def test_connect_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = RemotingClient(connect_timeout_ms=1000)
    try:
        with pytest.raises(RemotingConnectError):
            await client.invoke(f"127.0.0.1:{port}", create_request(1), 1000)
        with pytest.raises(RemotingConnectError):
            await client.invoke("not-an-address", create_request(1), 1000)
    finally:
        await client.close()


async def test_concurrent_callers_share_one_connection(
    server: RemotingServer, client: RemotingClient
) -> None:
    channels = await asyncio.gather(*(client.get_channel(addr(server)) for _ in range(10)))
    assert len({ch.channel_id for ch in channels}) == 1


async def test_server_to_client_requests_over_the_same_connection(
    server: RemotingServer, client: RemotingClient
) -> None:
    contexts: list[RequestContext] = []
    notified = asyncio.Event()
    got: list[RemotingCommand] = []

    def heartbeat(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        contexts.append(ctx)
        return create_response(req, 0)

    def on_notify(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        got.append(req)
        notified.set()
        return create_response(req, 0, "must not be sent: oneway")

    def running_info(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        return create_response(req, 0, body=b'{"properties":{}}')

    server.register(RequestCode.HEART_BEAT, heartbeat)
    client.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
    client.register(RequestCode.GET_CONSUMER_RUNNING_INFO, running_info)
    await client.invoke(addr(server), create_request(RequestCode.HEART_BEAT), 3000)
    [ctx] = contexts
    assert ctx.remote_addr.startswith("127.0.0.1:")

    ctx.send_oneway(create_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "g"}))
    await notified.wait()
    assert got[0].ext_fields == {"consumerGroup": "g"} and got[0].is_oneway

    resp = await ctx.send_request(create_request(RequestCode.GET_CONSUMER_RUNNING_INFO), 3000)
    assert resp.code == 0 and resp.body == b'{"properties":{}}'

    # the client answers codes it has no processor for with code 3
    resp = await ctx.send_request(create_request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT), 3000)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

    client.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, lambda c, r: None)  # never answers
    with pytest.raises(RemotingTimeoutError):
        await ctx.send_request(create_request(RequestCode.CONSUME_MESSAGE_DIRECTLY), 100)


async def test_close_callbacks_and_server_stop(client: RemotingClient) -> None:
    srv = RemotingServer()
    seen: list[str] = []
    contexts: list[RequestContext] = []

    def hello(ctx: RequestContext, req: RemotingCommand) -> RemotingCommand:
        contexts.append(ctx)
        ctx.add_close_callback(lambda c: seen.append(f"callback {c.channel_id}"))
        return create_response(req, 0)

    srv.register(1, hello)
    srv.add_close_listener(lambda ch: seen.append(f"listener {ch.channel_id}"))
    await srv.start("127.0.0.1", 0)
    await client.invoke(f"127.0.0.1:{srv.port}", create_request(1), 3000)
    client_channel = await client.get_channel(f"127.0.0.1:{srv.port}")
    await srv.stop()
    cid = contexts[0].channel_id
    assert sorted(seen) == [f"callback {cid}", f"listener {cid}"]
    assert contexts[0].is_closed
    await client_channel.wait_closed()
    assert client_channel.is_closed
    # a callback added after the close runs at once
    contexts[0].add_close_callback(lambda c: seen.append("late"))
    assert seen[-1] == "late"


async def test_stop_aborts_a_peer_that_does_not_read() -> None:
    srv = RemotingServer(close_timeout_s=0.2)
    srv.register(1, lambda ctx, req: create_response(req, 0, body=bytes(64 * 1024 * 1024)))
    await srv.start("127.0.0.1", 0)
    _, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    writer.write(encode(RemotingCommand(1, opaque=1)))
    await writer.drain()
    while not any(ch.write_buffer_size for ch in srv.channels.values()):
        await asyncio.sleep(0.01)
    started = time.monotonic()
    await srv.stop()  # 64 MiB cannot drain into a peer that never reads
    assert time.monotonic() - started < 5
    assert not srv.channels
    writer.close()


async def test_idle_channels_are_swept(server: RemotingServer, client: RemotingClient) -> None:
    await client.invoke(addr(server), create_request(1), 3000)
    channel = await client.get_channel(addr(server))
    assert server.sweep_idle(now=time.monotonic()) == 0
    assert server.sweep_idle(now=time.monotonic() + 121) == 1
    await channel.wait_closed()
    assert not server.channels or all(ch.is_closed for ch in server.channels.values())


async def test_client_close_fails_pending_requests(server: RemotingServer) -> None:
    client = RemotingClient()
    server.register(3, lambda ctx, req: None)
    call = asyncio.ensure_future(client.invoke(addr(server), create_request(3), 10_000))
    channel = await client.get_channel(addr(server))
    while channel.pending_requests == 0:
        await asyncio.sleep(0)
    await client.close()
    with pytest.raises(RemotingSendRequestError):
        await call


async def test_send_on_closed_channel_raises(server: RemotingServer, client: RemotingClient) -> None:
    channel: Channel = await client.get_channel(addr(server))
    channel.close()
    await channel.wait_closed()
    with pytest.raises(RemotingSendRequestError):
        await channel.send_request(create_request(1), 1000)
    with pytest.raises(RemotingSendRequestError):
        channel.send_oneway(create_request(1))
    assert channel.send_response(create_response(create_request(1))) is False


def test_invoke_sync_for_scripts() -> None:
    async def start() -> RemotingServer:
        srv = RemotingServer()
        srv.register(1, lambda ctx, req: create_response(req, 0, remark="sync"))
        await srv.start("127.0.0.1", 0)
        return srv

    loop = asyncio.new_event_loop()
    srv = loop.run_until_complete(start())
    serving = threading.Thread(target=loop.run_forever, daemon=True)
    serving.start()
    try:
        resp = invoke_sync(f"127.0.0.1:{srv.port}", create_request(1), 3000)
        assert resp.remark == "sync"
    finally:
        asyncio.run_coroutine_threadsafe(srv.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        serving.join(10)
        loop.close()


def test_works_on_uvloop() -> None:
    uvloop = pytest.importorskip("uvloop")

    async def scenario() -> tuple[str, int]:
        from rmq.remoting.loop import loop_name

        srv = RemotingServer()
        srv.register(1, lambda ctx, req: create_response(req, 0, body=req.body))
        await srv.start("127.0.0.1", 0)
        async with RemotingClient() as c:
            resps = await asyncio.gather(
                *(
                    c.invoke(f"127.0.0.1:{srv.port}", create_request(1, body=bytes(70_000)), 5000)
                    for _ in range(20)
                )
            )
        await srv.stop()
        return loop_name(), sum(len(r.body or b"") for r in resps)

    assert uvloop.run(scenario()) == ("uvloop", 20 * 70_000)
