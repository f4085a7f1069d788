"""Raw pipelined-frame load generator: one worker process, several connections, K requests in flight each.

``broker_bench.py`` uses this module for pulls, and for sends when ``benches/loadgen_c.c`` (the same
produce mode in C, fed with templates from :func:`native_templates`) cannot be built or ``--gen python``
is given.

Not Python-bound per message in the way a client library is: request frames are built from a pre-encoded
template (one ``bytes %`` per request, the 1 KiB body appended once), responses are matched by ``opaque``
found with a regex in the JSON header (send) or by one ``orjson.loads`` per 32-message pull, and all the
requests a connection can send after one ``data_received`` leave in one ``write``.

Modes (``cfg["mode"]``):

``produce``
    SEND_MESSAGE_V2 (code 310, header keys a..m, REMOTING.md §3.1) of ``body_size`` bytes to ``topic``,
    queue ids round-robin over ``queues``; ``inflight`` requests outstanding per connection. Counts the
    responses that complete inside the measurement window and records the latency of each of those
    requests (send -> response, µs).
``pull``
    PULL_MESSAGE (code 11, §3.2) with maxMsgNums ``batch``, pull sysFlag FLAG_SUBSCRIPTION (0x4) with
    subscription ``*`` and no FLAG_SUSPEND, over the given ``[queueId, startOffset, endOffset]`` ranges,
    striding offsets (consume-queue offsets are dense) so ``inflight`` pulls per connection are outstanding
    at once; a short answer (nextBeginOffset below the stride end) is followed by a pull for the gap. Counts
    records by walking the TOTALSIZE fields of each body.

Protocol with the parent (``benches/broker_bench.py``): config JSON as argv[1]; the worker connects, prints
``READY``, waits for ``GO <start_at> <end_at>`` on stdin (``time.monotonic()`` seconds, shared by all
processes on Linux), runs until ``end_at`` (produce) or until done / ``end_at`` (pull), writes its latencies
(array of doubles, µs) to ``cfg["lat_path"]`` and prints one JSON result line. Every loop is bounded by
``end_at`` plus a drain timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import struct
import sys
import time
from array import array
from collections import deque
from typing import Any

import orjson

_PREFIX = struct.Struct(">iI")
_INT = struct.Struct(">i")
_CODE = re.compile(rb'"code"\s*:\s*(-?\d+)')
_OPAQUE = re.compile(rb'"opaque"\s*:\s*(-?\d+)')
_REMARK = re.compile(rb'"remark"\s*:\s*"([^"]*)"')

DRAIN_TIMEOUT = 10.0
OPAQUE_SPAN = 1 << 23  # opaques of one connection: base + (n mod SPAN); 256 bases stay below 2**31


def opaque_base(worker_id: int, conn: int) -> int:
    """First opaque of a connection: opaques are Java ints on the wire (the broker rejects wider ones)."""
    if not (0 <= worker_id < 16 and 0 <= conn < 16):
        raise ValueError("at most 16 workers x 16 connections")
    return (worker_id * 16 + conn) * OPAQUE_SPAN


PULL_FLAG_SUBSCRIPTION = 0x4


def run(coro: Any) -> Any:
    """Run on uvloop when it is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def uvloop_available() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


# --- frame templates ---------------------------------------------------------------------------------------


def _json_str(s: str) -> bytes:
    """A JSON string literal; ``%`` doubled so it can sit inside a bytes ``%`` template."""
    return orjson.dumps(s).replace(b"%", b"%%")


class SendFrames:
    """SEND_MESSAGE_V2 requests: per request only queue id, born timestamp, UNIQ_KEY and opaque vary."""

    def __init__(
        self, topic: str, group: str, body: bytes, queues: int, uniq_prefix: str, transactional: bool = False
    ) -> None:
        self.body = body
        self.queues = queues
        # Properties as a Java producer sends them: UNIQ_KEY, WAIT, TAGS (separators U+0001 / U+0002); a
        # transactional half message also TRAN_MSG and PGROUP, and sysFlag TRANSACTION_PREPARED_TYPE (4).
        props_head = _json_str(f"UNIQ_KEY\x01{uniq_prefix}")[:-1]  # open string, UNIQ_KEY tail follows
        tx = f"\x02TRAN_MSG\x01true\x02PGROUP\x01{group}" if transactional else ""
        props_tail = _json_str(f"\x02WAIT\x01true\x02TAGS\x01bench{tx}")[1:]
        sys_flag = b"4" if transactional else b"0"
        self.template = (
            b'{"code":310,"extFields":{"a":' + _json_str(group) + b',"b":' + _json_str(topic) + b","
            b'"c":"TBW102","d":"4","e":"%d","f":"'
            + sys_flag
            + b'","g":"%d","h":"0","i":'
            + props_head
            + b"%012X"
            + props_tail
            + b',"j":"0","k":"false","m":"false"},"flag":0,"language":"JAVA","opaque":%d,'
            b'"serializeTypeCurrentRPC":"JSON","version":409}'
        )

    def frame(self, opaque: int, born_ms: int) -> bytes:
        hdr = self.template % (opaque % self.queues, born_ms, opaque, opaque)
        return _PREFIX.pack(4 + len(hdr) + len(self.body), len(hdr)) + hdr + self.body


def native_templates(
    path: str, topic: str, group: str, body: bytes, queues: int, uniq_prefix: str, transactional: bool = False
) -> None:
    """Write the request templates ``loadgen_c`` patches per request (its header comment has the format):
    one frame per queue id, opaque as 10 space-padded digits, the UNIQ_KEY tail as 12 hex digits;
    ``transactional``: half messages, for ``loadgen_c``'s TX_GROUP mode."""
    gen = SendFrames(topic, group, body, queues, uniq_prefix, transactional)
    tmpl = gen.template.replace(b"%012X", b"UUUUUUUUUUUU").replace(b'"opaque":%d', b'"opaque":OOOOOOOOOO')
    born = int(time.time() * 1000)
    _write_templates(path, [(tmpl % (q, born), body) for q in range(queues)])


def _write_templates(path: str, frames: list[tuple[bytes, bytes]]) -> None:
    """The template file of ``frames`` (header, body): each header holds ``OOOOOOOOOO`` where the opaque
    goes and the header or the body ``UUUUUUUUUUUU`` where the UNIQ_KEY tail goes."""
    out = [struct.pack("<i", len(frames))]
    for hdr, body in frames:
        frame = _PREFIX.pack(4 + len(hdr) + len(body), len(hdr)) + hdr + body
        op_pos, uniq_pos = frame.index(b"OOOOOOOOOO"), frame.index(b"UUUUUUUUUUUU")
        frame = frame.replace(b"OOOOOOOOOO", b"         0").replace(b"UUUUUUUUUUUU", b"000000000000")
        out.append(struct.pack("<iii", len(frame), op_pos, uniq_pos) + frame)
    with open(path, "wb") as f:
        f.write(b"".join(out))


def native_batch_templates(
    path: str, topic: str, group: str, body: bytes, count: int, queues: int, uniq_prefix: str
) -> None:
    """As :func:`native_templates` for SEND_BATCH_MESSAGE (320): ``count`` messages of ``body`` per request
    (REMOTING.md §4.5), each with its own properties as a Java producer's batch carries them (UNIQ_KEY, WAIT,
    TAGS), the header's properties ``WAIT=true`` as ``MessageBatch``'s. ``loadgen_c`` patches one UNIQ_KEY
    tail per request, the first message's; the others end in their index (unique within a request)."""
    born = int(time.time() * 1000)
    entries = []
    for k in range(count):
        tail = "UUUUUUUUUUUU" if k == 0 else f"{k:012X}"
        props = f"UNIQ_KEY\x01{uniq_prefix}{tail}\x02WAIT\x01true\x02TAGS\x01bench".encode()
        size = 22 + len(body) + len(props)
        entries.append(
            struct.pack(">iiiii", size, 0, 0, 0, len(body)) + body + struct.pack(">H", len(props)) + props
        )
    batch = b"".join(entries)
    hdr = (
        b'{"code":320,"extFields":{"a":' + _json_str(group) + b',"b":' + _json_str(topic) + b","
        b'"c":"TBW102","d":"4","e":"%d","f":"0","g":"%d","h":"0","i":'
        + _json_str("WAIT\x01true")
        + b',"j":"0","k":"false","m":"true"},"flag":0,"language":"JAVA","opaque":OOOOOOOOOO,'
        b'"serializeTypeCurrentRPC":"JSON","version":409}'
    )
    _write_templates(path, [(hdr % (q, born), batch) for q in range(queues)])


class PullFrames:
    def __init__(self, topic: str, group: str) -> None:
        self.template = (
            b'{"code":11,"extFields":{"consumerGroup":'
            + _json_str(group)
            + b',"topic":'
            + _json_str(topic)
            + b',"queueId":"%d","queueOffset":"%d","maxMsgNums":"%d","sysFlag":"'
            + str(PULL_FLAG_SUBSCRIPTION).encode()
            + b'","commitOffset":"0","suspendTimeoutMillis":"0","subscription":"*","subVersion":"0",'
            b'"expressionType":"TAG"},"flag":0,"language":"JAVA","opaque":%d,'
            b'"serializeTypeCurrentRPC":"JSON","version":409}'
        )

    def frame(self, opaque: int, queue_id: int, offset: int, nums: int) -> bytes:
        hdr = self.template % (queue_id, offset, nums, opaque)
        return _PREFIX.pack(4 + len(hdr), len(hdr)) + hdr


# --- produce -----------------------------------------------------------------------------------------------


class Stats:
    def __init__(self, start_at: float, end_at: float) -> None:
        self.start_at = start_at
        self.end_at = end_at
        self.ok = 0  # successful responses completed inside the window
        self.ok_total = 0
        self.errors = 0
        self.error_samples: dict[str, int] = {}
        self.lat = array("d")
        self.msgs = 0  # pull: records received
        self.bytes = 0
        self.first_send = 0.0
        self.last_recv = 0.0

    def error(self, code: int, hdr: bytes) -> None:
        self.errors += 1
        m = _REMARK.search(hdr)
        key = f"code {code}: {m.group(1).decode(errors='replace')[:120] if m else ''}"
        self.error_samples[key] = self.error_samples.get(key, 0) + 1


class ProduceConn(asyncio.Protocol):
    def __init__(self, gen: SendFrames, stats: Stats, inflight: int, base: int) -> None:
        self.gen = gen
        self.stats = stats
        self.inflight = inflight
        self.base = base
        self.seq = 0
        self.pending: dict[int, float] = {}
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.stopping = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"connection lost: {exc}"))

    def fill(self) -> None:
        pending = self.pending
        k = self.inflight - len(pending)
        if k <= 0:
            return
        now = time.monotonic()
        if now >= self.stats.end_at:
            self.stopping = True
            if not pending and not self.done.done():
                self.done.set_result(None)
            return
        born = int(time.time() * 1000)
        base, seq = self.base, self.seq
        frame = self.gen.frame
        parts = []
        for _ in range(k):
            op = base + (seq & (OPAQUE_SPAN - 1))
            seq += 1
            parts.append(frame(op, born))
            pending[op] = now
        self.seq = seq
        self.transport.write(parts[0] if k == 1 else b"".join(parts))  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        if buf:
            buf += data
            src: bytes | bytearray = buf
        else:
            src = data
        n = len(src)
        pos = 0
        now = time.monotonic()
        st = self.stats
        start_at, end_at = st.start_at, st.end_at
        in_window = start_at <= now <= end_at
        pending = self.pending
        lat = st.lat
        while n - pos >= 8:
            length, word = _PREFIX.unpack_from(src, pos)
            end = pos + 4 + length
            if end > n:
                break
            hdr = bytes(src[pos + 8 : pos + 8 + (word & 0xFFFFFF)])
            pos = end
            m = _OPAQUE.search(hdr)
            if m is None:
                continue
            t0 = pending.pop(int(m.group(1)), None)
            if t0 is None:
                continue  # a request from the broker, or an unknown opaque
            c = _CODE.search(hdr)
            code = int(c.group(1)) if c else -1
            if code != 0:
                st.error(code, hdr)
                continue
            st.ok_total += 1
            if in_window:
                st.ok += 1
                if t0 >= start_at:
                    lat.append((now - t0) * 1e6)
        if src is buf:
            del buf[:pos]
        elif pos < n:
            buf += src[pos:]
        st.last_recv = now
        if not self.stopping:
            self.fill()
        if self.stopping and not pending and not self.done.done():
            self.done.set_result(None)


# --- pull --------------------------------------------------------------------------------------------------


class PullWork:
    """The pulls still to issue, interleaved across queues: ``(queueId, offset, nums)``."""

    def __init__(self, ranges: list[list[int]], batch: int) -> None:
        self.batch = batch
        self.items: deque[tuple[int, int, int]] = deque()
        cursors = [[q, s, e] for q, s, e in ranges if e > s]
        while cursors:
            nxt = []
            for cur in cursors:
                q, s, e = cur
                nums = min(batch, e - s)
                self.items.append((q, s, nums))
                cur[1] = s + nums
                if cur[1] < e:
                    nxt.append(cur)
            cursors = nxt
        self.expected = sum(max(0, e - s) for _, s, e in ranges)


class PullConn(asyncio.Protocol):
    def __init__(self, gen: PullFrames, work: PullWork, stats: Stats, inflight: int, base: int) -> None:
        self.gen = gen
        self.work = work
        self.stats = stats
        self.inflight = inflight
        self.base = base
        self.seq = 0
        self.pending: dict[int, tuple[float, int, int, int]] = {}
        self.retries = 0
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"connection lost: {exc}"))

    def fill(self) -> None:
        pending = self.pending
        items = self.work.items
        now = time.monotonic()
        if now < self.stats.end_at:
            parts = []
            base, seq = self.base, self.seq
            while items and len(pending) < self.inflight:
                q, off, nums = items.popleft()
                op = base + (seq & (OPAQUE_SPAN - 1))
                seq += 1
                parts.append(self.gen.frame(op, q, off, nums))
                pending[op] = (now, q, off, nums)
            self.seq = seq
            if parts:
                if not self.stats.first_send:
                    self.stats.first_send = now
                self.transport.write(b"".join(parts))  # type: ignore[union-attr]
        if not pending and not self.done.done():
            self.done.set_result(None)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        n = len(buf)
        pos = 0
        now = time.monotonic()
        st = self.stats
        pending = self.pending
        items = self.work.items
        unpack_int = _INT.unpack_from
        while n - pos >= 8:
            length, word = _PREFIX.unpack_from(buf, pos)
            end = pos + 4 + length
            if end > n:
                break
            hend = pos + 8 + (word & 0xFFFFFF)
            hdr = bytes(buf[pos + 8 : hend])
            start = pos
            pos = end
            h = orjson.loads(hdr)
            req = pending.pop(h.get("opaque"), None)
            if req is None:
                continue
            t0, q, off, nums = req
            code = h.get("code")
            if code != 0:
                if code in (19, 20) and self.retries < 1000:  # not yet visible / retry: ask again
                    self.retries += 1
                    items.append((q, off, nums))
                else:
                    st.error(code, hdr)
                continue
            count = 0
            p = hend
            while p < end:
                (size,) = unpack_int(buf, p)
                if size <= 0:
                    break
                p += size
                count += 1
            st.msgs += count
            st.bytes += end - start
            st.ok_total += 1
            st.lat.append((now - t0) * 1e6)
            nxt = int(h.get("extFields", {}).get("nextBeginOffset", off + nums))
            if off < nxt < off + nums:
                items.appendleft((q, nxt, off + nums - nxt))
        del buf[:pos]
        st.last_recv = now
        self.fill()


# --- worker main -------------------------------------------------------------------------------------------


def _cpu() -> float:
    """CPU seconds (user + system) used by this process so far."""
    t = os.times()
    return t.user + t.system


async def read_go() -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    line = await loop.run_in_executor(None, sys.stdin.readline)
    parts = line.split()
    if len(parts) != 3 or parts[0] != "GO":
        raise SystemExit(f"expected GO line, got {line!r}")
    return float(parts[1]), float(parts[2])


async def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    host, port = cfg["addr"].rsplit(":", 1)
    conns = int(cfg["conns"])
    inflight = int(cfg["inflight"])
    stats = Stats(float("inf"), float("inf"))
    wid = int(cfg.get("worker_id", 0))
    protos: list[Any] = []
    if cfg["mode"] == "produce":
        body = (b"0123456789abcdef" * (cfg["body_size"] // 16 + 1))[: cfg["body_size"]]
        for i in range(conns):
            gen = SendFrames(cfg["topic"], cfg["group"], body, cfg["queues"], f"{os.getpid():08X}{i:04X}")
            protos.append(ProduceConn(gen, stats, inflight, opaque_base(wid, i)))
    else:
        pgen = PullFrames(cfg["topic"], cfg["group"])
        work = PullWork(cfg["ranges"], cfg.get("batch", 32))
        for i in range(conns):
            protos.append(PullConn(pgen, work, stats, inflight, opaque_base(wid, i)))
    for p in protos:
        await loop.create_connection(lambda p=p: p, host, int(port))
    print("READY", flush=True)
    start_at, end_at = await read_go()
    stats.start_at, stats.end_at = start_at, end_at
    delay = start_at - time.monotonic() if cfg["mode"] == "pull" else 0.0
    if delay > 0:
        await asyncio.sleep(delay)
    t_begin = time.monotonic()
    cpu0 = _cpu()
    for p in protos:
        p.fill()
    timeout = max(0.0, end_at - time.monotonic()) + DRAIN_TIMEOUT
    done, not_done = await asyncio.wait([p.done for p in protos], timeout=timeout)
    failures = [str(f.exception()) for f in done if f.exception() is not None]
    cpu = _cpu() - cpu0
    for p in protos:
        if p.transport is not None:
            p.transport.abort()
    if cfg.get("lat_path"):
        with open(cfg["lat_path"], "wb") as f:
            stats.lat.tofile(f)
    return {
        "mode": cfg["mode"],
        "ok": stats.ok,
        "ok_total": stats.ok_total,
        "errors": stats.errors,
        "error_samples": stats.error_samples,
        "msgs": stats.msgs,
        "bytes": stats.bytes,
        "expected": work.expected if cfg["mode"] == "pull" else None,
        "unfinished_conns": len(not_done),
        "failures": failures,
        "t_begin": t_begin,
        "first_send": stats.first_send,
        "last_recv": stats.last_recv,
        "window": [start_at, end_at],
        "cpu": cpu,
    }


def main() -> None:
    cfg = json.loads(sys.argv[1])
    result = run(worker(cfg))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
