"""The loopback request/response ceiling: a minimal uvloop ``asyncio.Protocol`` server speaking just enough of
the RocketMQ remoting frame format (REMOTING.md §1.1) to be driven by the same load generators as the broker.

``benches/broker_bench.py`` no longer uses it as its ceiling: on this machine the broker answers faster
than this server does, so its rows read above 100 % of it. The ceiling is ``benches/echo_server.c``, which
answers the same way and serves the pull record :func:`build_record` makes here. This server stays as the
reference the C server's responses follow.

It does no broker work. Per request frame it finds ``code`` and ``opaque`` in the JSON header with two regex
searches and answers with a pre-built response of the size the broker's answer has:

* SEND_MESSAGE / _V2 / BATCH (10, 310, 320): a ~200-byte JSON header shaped like the broker's send response
  (``msgId``, ``queueId``, ``queueOffset``, ``MSG_REGION``, ``TRACE_ON``), no body;
* PULL_MESSAGE (11): a pull response header plus a body of ``maxMsgNums`` pre-encoded 1 KiB stored-message
  records (§4.1), so the consume ceiling counts real records;
* GET_ROUTEINFO_BY_TOPIC (105): a route whose only broker is this server (so the C++ client can use it as
  both its name server and its broker);
* anything else: an empty success response.

Responses produced by one ``data_received`` call leave in one ``write``. Run as a child process::

    python benches/echo_server.py [--port 0] [--record-size 1024]

It prints ``ECHO-READY 127.0.0.1:<port>`` on stdout once listening and runs until SIGTERM/SIGINT or
stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import struct
import sys

_PREFIX = struct.Struct(">iI")
_INT = struct.Struct(">i")
_CODE = re.compile(rb'"code"\s*:\s*(-?\d+)')
_OPAQUE = re.compile(rb'"opaque"\s*:\s*(-?\d+)')
_MAX_NUMS = re.compile(rb'"maxMsgNums"\s*:\s*"?(\d+)')
_QUEUE_OFFSET = re.compile(rb'"queueOffset"\s*:\s*"?(\d+)')

_SEND_CODES = frozenset((10, 310, 320))


def _frame(header: bytes, body: bytes = b"") -> bytes:
    return _PREFIX.pack(4 + len(header) + len(body), len(header)) + header + body


def build_record(body_size: int, queue_offset: int = 0, topic: bytes = b"BenchTopic") -> bytes:
    """One stored-message record (IPv4 hosts) as the broker returns it in a pull body."""
    props = b"UNIQ_KEY\x017F0000010000000000000000000000AA\x02TAGS\x01bench"
    body = b"x" * body_size
    total = 91 + len(body) + len(topic) + len(props)
    return b"".join(
        (
            struct.pack(">iiiiiqqiq", total, -626843481, 0, 0, 0, queue_offset, 0, 0, 0),
            b"\x7f\x00\x00\x01" + _INT.pack(40000),
            struct.pack(">q", 0),
            b"\x7f\x00\x00\x01" + _INT.pack(10911),
            struct.pack(">iq", 0, 0),
            _INT.pack(len(body)),
            body,
            bytes((len(topic),)),
            topic,
            struct.pack(">h", len(props)),
            props,
        )
    )


class EchoProtocol(asyncio.Protocol):
    __slots__ = ("buf", "server", "transport")

    def __init__(self, server: EchoServer) -> None:
        self.server = server
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        n = len(buf)
        pos = 0
        out: list[bytes] = []
        srv = self.server
        while n - pos >= 8:
            length, word = _PREFIX.unpack_from(buf, pos)
            end = pos + 4 + length
            if end > n:
                break
            hdr = bytes(buf[pos + 8 : pos + 8 + (word & 0xFFFFFF)])
            pos = end
            m = _OPAQUE.search(hdr)
            c = _CODE.search(hdr)
            if m is None or c is None:
                continue
            opaque = int(m.group(1))
            code = int(c.group(1))
            if code in _SEND_CODES:
                out.append(srv.send_response(opaque))
            elif code == 11:
                out.append(srv.pull_response(opaque, hdr))
            elif code == 105:
                out.append(srv.route_response(opaque))
            else:
                out.append(srv.empty_response(opaque))
        if pos:
            del buf[:pos]
        if out and self.transport is not None:
            self.transport.write(b"".join(out))


class EchoServer:
    def __init__(self, record_size: int) -> None:
        self.port = 0
        self.record = build_record(record_size)
        self.queue_offset = 0

    def send_response(self, opaque: int) -> bytes:
        self.queue_offset += 1
        hdr = (
            b'{"code":0,"extFields":{"msgId":"7F00000100002A9F00000000%08X","queueId":"0",'
            b'"queueOffset":"%d","MSG_REGION":"DefaultRegion","TRACE_ON":"true"},"flag":1,'
            b'"language":"JAVA","opaque":%d,"serializeTypeCurrentRPC":"JSON","version":409}'
        ) % (self.queue_offset & 0xFFFFFFFF, self.queue_offset, opaque)
        return _frame(hdr)

    def pull_response(self, opaque: int, req_hdr: bytes) -> bytes:
        m = _MAX_NUMS.search(req_hdr)
        q = _QUEUE_OFFSET.search(req_hdr)
        nums = int(m.group(1)) if m else 32
        offset = int(q.group(1)) if q else 0
        hdr = (
            b'{"code":0,"extFields":{"suggestWhichBrokerId":"0","nextBeginOffset":"%d","minOffset":"0",'
            b'"maxOffset":"%d"},"flag":1,"language":"JAVA","opaque":%d,"remark":"FOUND",'
            b'"serializeTypeCurrentRPC":"JSON","version":409}'
        ) % (offset + nums, 1 << 40, opaque)
        return _frame(hdr, self.record * nums)

    def route_response(self, opaque: int) -> bytes:
        body = (
            b'{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:%d"},"brokerName":"echo-broker",'
            b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"echo-broker",'
            b'"perm":6,"readQueueNums":8,"topicSynFlag":0,"writeQueueNums":8}]}'
        ) % self.port
        hdr = (
            b'{"code":0,"flag":1,"language":"JAVA","opaque":%d,"serializeTypeCurrentRPC":"JSON","version":409}'
            % opaque
        )
        return _frame(hdr, body)

    def empty_response(self, opaque: int) -> bytes:
        hdr = (
            b'{"code":0,"extFields":{"offset":"0"},"flag":1,"language":"JAVA","opaque":%d,'
            b'"serializeTypeCurrentRPC":"JSON","version":409}' % opaque
        )
        return _frame(hdr)


async def serve(port: int, record_size: int) -> None:
    loop = asyncio.get_running_loop()
    srv = EchoServer(record_size)
    server = await loop.create_server(lambda: EchoProtocol(srv), "127.0.0.1", port, backlog=1024)
    srv.port = server.sockets[0].getsockname()[1]
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # Stop also when the parent goes away (stdin closes).
    loop.add_reader(sys.stdin.fileno(), lambda: stop.set() if not sys.stdin.buffer.read1(4096) else None)
    print(f"ECHO-READY 127.0.0.1:{srv.port}", flush=True)
    await stop.wait()
    server.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--record-size", type=int, default=1024, help="body bytes of each pulled record")
    args = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(args.port, args.record_size))


if __name__ == "__main__":
    main()
