"""Fuzz a real ``python -m rmq.broker`` with 10,000 random, truncated and malformed frames over raw TCP while
a real client keeps sending and pulling; afterwards the official C++ client (a child process) must still
produce and pull, and the broker process must be alive.

Two kinds of frames, from one seeded ``random.Random`` (``RMQ_FUZZ_SEED`` overrides the seed):

* connection killers -- random bytes, bad length prefixes (negative, < 4, above the 16 MiB limit, huge
  claims followed by a few bytes), bad header words and serialize types, headers that are not a JSON object,
  truncated JSON, JSON with wrongly typed fields, garbage binary headers, valid frames cut short. Each goes
  on its own connection, which is half-closed after the write; the broker must close its side promptly.
* well-framed junk -- parseable frames with unknown codes, every known request code with mutated or missing
  ext fields and junk bodies (SEND v1/v2/batch, PULL, offsets, heartbeats, locks, admin requests), JSON and
  binary headers, some oneway. These are pipelined on a few long-lived connections, read back concurrently;
  each connection ends with a sentinel request that must be answered.

A few frames are written one byte at a time. Admin requests that legitimately change broker-wide state
(UPDATE_BROKER_CONFIG, deletes, topic updates of real topics) only ever name fuzz topics or are left out.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import string
import struct
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from rmq.common.codes import RequestCode
from rmq.remoting import RemotingClient, RemotingCommand, create_request
from rmq.remoting.codec import FrameDecoder, encode

from tests.brokerproc import BrokerProcess, start_broker

SEED = int(os.environ.get("RMQ_FUZZ_SEED", "20240917"))
TOTAL_FRAMES = 10_000
KILLER_SHARE = 0.45
PIPELINES = 4
KILLER_WORKERS = 16
DRIVER = Path(__file__).with_name("cpp_driver.py")
LIVE_TOPIC = "FuzzLive"
MAGIC_MESSAGE = -626843481

FUZZ_TOPICS = ["FuzzT0", "FuzzT1", "FuzzT2", LIVE_TOPIC]
JUNK_TOPICS = ["", " ", "a b", "x" * 128, "x" * 300, "%RETRY%", "%RETRY%g", "%DLQ%g", "SCHEDULE_TOPIC_XXXX"]
JUNK_TOPICS += ["RMQ_SYS_TRANS_HALF_TOPIC", "../../etc", "topic\x00nul", "主题", "T|T", "FuzzT0\n"]
JUNK_VALUES = ["", "abc", "-1", "0", "1", "true", "false", "2147483648", "-2147483649", "9223372036854775808"]
JUNK_VALUES += ["99999999999999999999999", "1e3", " 1", "0x10", "NaN", "null", "{}", "[]", "\x00", "é", "1.5"]
JUNK_VALUES += ["9223372036854775807", "-9223372036854775808", "x" * 4000]

# Codes whose handlers may change broker-wide state in legitimate ways: never sent with junk.
SKIP_CODES = {
    RequestCode.UPDATE_BROKER_CONFIG,
    RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.DELETE_SUBSCRIPTIONGROUP,
    RequestCode.UPDATE_AND_CREATE_TOPIC,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER,
    RequestCode.CLEAN_UNUSED_TOPIC,
    RequestCode.DELETE_EXPIRED_COMMITLOG,
}
KNOWN_CODES = [int(c) for c in RequestCode if c not in SKIP_CODES]

SEND_V1 = ["producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag"]
SEND_V1 += ["bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "batch", "maxReconsumeTimes"]
SEND_V2 = dict(zip(SEND_V1, "abcdefghijkml", strict=True))
PULL_KEYS = ["consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset"]
PULL_KEYS += ["suspendTimeoutMillis", "subscription", "subVersion", "expressionType"]
OTHER_KEYS = ["consumerGroup", "group", "topic", "queueId", "commitOffset", "offset", "timestamp", "key"]
OTHER_KEYS += ["maxNum", "beginTimestamp", "endTimestamp", "msgId", "clientID", "producerGroup", "delayLevel"]
OTHER_KEYS += ["originMsgId", "originTopic", "tranStateTableOffset", "commitLogOffset", "commitOrRollback"]
OTHER_KEYS += ["fromTransactionCheck", "transactionId", "brokerName", "uniqueKey", "index", "count"]


def frame(header: bytes, body: bytes = b"", ser: int = 0) -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), (ser << 24) | len(header)) + header + body


def json_header(code: int, ext: dict[str, Any] | None, opaque: int, flag: int = 0, **extra: Any) -> bytes:
    h: dict[str, Any] = {"code": code, "language": "JAVA", "version": 409, "opaque": opaque, "flag": flag}
    if ext is not None:
        h["extFields"] = ext
    h.update(extra)
    return json.dumps(h, ensure_ascii=False).encode()


def properties(pairs: dict[str, str]) -> str:
    return "\x02".join(f"{k}\x01{v}" for k, v in pairs.items())


# --- frame generators ---------------------------------------------------------------------------------------


@dataclass
class Gen:
    rng: random.Random

    def junk(self) -> str:
        r = self.rng.random()
        if r < 0.6:
            return self.rng.choice(JUNK_VALUES)
        if r < 0.8:
            return str(self.rng.randint(-(2**63), 2**63))
        return "".join(self.rng.choice(string.printable) for _ in range(self.rng.randint(0, 40)))

    def body(self) -> bytes | None:
        r = self.rng.random()
        if r < 0.25:
            return None
        if r < 0.5:
            return self.rng.randbytes(self.rng.randint(0, 300))
        if r < 0.65:
            return b"{" + self.rng.randbytes(20)
        if r < 0.8:
            obj = {"clientID": self.junk(), "consumerDataSet": self.rng.choice([[], [{}], "x", None, [1]])}
            obj["mqSet"] = self.rng.choice([[{"topic": 1}], {}, None])
            obj["consumerGroup"] = self.rng.choice([None, 7, self.junk()])
            return json.dumps(obj).encode()
        return json.dumps(self.rng.choice([[], 0, "s", None, {"a": [{}] * 3}])).encode()

    def mutate(self, ext: dict[str, str], keys: list[str]) -> dict[str, str]:
        for _ in range(self.rng.randint(1, 3)):
            key = self.rng.choice(keys)
            r = self.rng.random()
            if r < 0.3:
                ext.pop(key, None)
            else:
                ext[key] = self.junk()
        return ext

    def topic(self) -> str:
        return self.rng.choice(FUZZ_TOPICS if self.rng.random() < 0.6 else JUNK_TOPICS)

    # well-framed junk: (frame bytes, opaque, expects a response)

    def send_frame(self, opaque: int) -> bytes:
        v2 = self.rng.random() < 0.5
        props = properties({"TAGS": "fz", "UNIQ_KEY": uuid.uuid4().hex, "WAIT": "true"})
        if self.rng.random() < 0.3:
            props = self.rng.choice(["\x01", "\x02", "\x01\x02\x01", "TAGS", "a\x01", self.junk()])
        ext = {
            "producerGroup": "fuzz_pg",
            "topic": self.topic(),
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "4",
            "queueId": str(self.rng.randint(-2, 5)),
            "sysFlag": str(self.rng.choice([0, 0, 1, 4, 8, 12, 0x10, 0x30, -1, 0x301])),
            "bornTimestamp": str(int(time.time() * 1000)),
            "flag": "0",
            "properties": props,
            "reconsumeTimes": "0",
            "unitMode": "false",
            "batch": self.rng.choice(["false", "true", "1", "0"]),
        }
        if self.rng.random() < 0.7:
            ext = self.mutate(ext, SEND_V1)
        body = self.body()
        if ext.get("batch") in ("true", "1") and self.rng.random() < 0.5:
            body = self.batch_body()
        code = RequestCode.SEND_MESSAGE
        if v2:
            ext = {SEND_V2.get(k, k): v for k, v in ext.items()}
            code = self.rng.choice([RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE])
        return frame(json_header(code, ext, opaque), body or b"")

    def batch_body(self) -> bytes:
        """A batch body with lying inner lengths."""
        out = b""
        for _ in range(self.rng.randint(1, 4)):
            body = self.rng.randbytes(self.rng.randint(0, 50))
            props = properties({"TAGS": "b"}).encode()
            blen = self.rng.choice([len(body), len(body) + 7, -1, 0, 2**31 - 1])
            plen = self.rng.choice([len(props), len(props) + 3, 0xFFFF])
            out += struct.pack(">iiiii", 22 + len(body) + len(props), 0, 0, 0, blen) + body
            out += struct.pack(">H", plen) + props
        return out[: self.rng.randint(0, len(out))] if self.rng.random() < 0.3 else out

    def pull_frame(self, opaque: int) -> bytes:
        ext = {
            "consumerGroup": "fuzz_cg",
            "topic": self.topic(),
            "queueId": str(self.rng.randint(-1, 4)),
            "queueOffset": str(self.rng.choice([0, 1, -1, 10**6, 2**62])),
            "maxMsgNums": str(self.rng.choice([0, 1, 32, -5, 2**31 - 1])),
            "sysFlag": str(self.rng.choice([0, 1, 2, 3, 4, 6, 7, 8, 16, 31, -1])),
            "commitOffset": str(self.rng.choice([0, -1, 5, 2**62])),
            "suspendTimeoutMillis": str(self.rng.choice([0, 1, 50, 1000, -1])),
            "subscription": self.rng.choice(["*", "fz", "a || b", "||", " || ", "a||", "", "TAGS = 'x'"]),
            "subVersion": str(self.rng.choice([0, -1, int(time.time() * 1000)])),
        }
        if self.rng.random() < 0.3:
            ext["expressionType"] = self.rng.choice(["TAG", "SQL92", "junk", ""])
        if self.rng.random() < 0.7:
            ext = self.mutate(ext, PULL_KEYS)
        return frame(json_header(RequestCode.PULL_MESSAGE, ext, opaque), self.body() or b"")

    def other_frame(self, opaque: int) -> bytes:
        r = self.rng.random()
        if r < 0.2:
            code = self.rng.choice([self.rng.randint(-(2**31), 2**31 - 1), self.rng.randint(0, 1000), 0, -1])
            while code in SKIP_CODES:
                code += 1000
        else:
            code = self.rng.choice(KNOWN_CODES)
        ext: dict[str, str] = {}
        for key in self.rng.sample(OTHER_KEYS, self.rng.randint(0, 6)):
            ext[key] = self.rng.choice([self.junk(), self.topic(), "fuzz_cg"])
        return frame(json_header(code, ext, opaque), self.body() or b"")

    def binary_frame(self, opaque: int) -> bytes:
        code = self.rng.choice([*KNOWN_CODES, self.rng.randint(-32768, 32767)])
        while code in SKIP_CODES:
            code = self.rng.choice(KNOWN_CODES)
        ext = {k: self.junk() or "x" for k in self.rng.sample(OTHER_KEYS + PULL_KEYS, self.rng.randint(0, 5))}
        cmd = create_request(code, ext, self.body(), serialize_type=1)
        cmd.opaque = opaque
        return encode(cmd)

    def odd_json_frame(self, opaque: int) -> bytes:
        """Well-framed, valid JSON objects with unusual members the codec accepts."""
        ext: Any = {k: self.rng.choice([1, True, None, 2.5, "v", 10**30]) for k in ("topic", "queueId", "x")}
        extra = self.rng.choice(
            [
                {"language": self.rng.choice(["RUST", "NOPE", 99, -1, 3])},
                {"remark": self.rng.choice([None, 5, "r" * 1000, {"a": 1}])},
                {"serializeTypeCurrentRPC": "ROCKETMQ"},
                {"unknown": [1, 2, {"deep": [[[]]]}]},
                {"version": self.rng.choice([0, -1, 2**31 - 1, -(2**31), 63, 333])},
            ]
        )
        code = self.rng.choice(KNOWN_CODES)
        return frame(json_header(code, ext, opaque, **extra), self.body() or b"")

    def well_framed(self, opaque: int) -> tuple[bytes, bool]:
        """(frame, oneway)"""
        r = self.rng.random()
        if r < 0.3:
            data = self.send_frame(opaque)
        elif r < 0.55:
            data = self.pull_frame(opaque)
        elif r < 0.8:
            data = self.other_frame(opaque)
        elif r < 0.9:
            data = self.binary_frame(opaque)
        else:
            data = self.odd_json_frame(opaque)
        oneway = False
        if self.rng.random() < 0.1 and data[4] == 0:  # JSON header: set the oneway flag
            header_len = struct.unpack(">I", data[4:8])[0] & 0xFFFFFF
            header = json.loads(data[8 : 8 + header_len])
            header["flag"] = 2
            new = json.dumps(header, ensure_ascii=False).encode()
            data = frame(new, data[8 + header_len :])
            oneway = True
        return data, oneway

    # connection killers

    def killer(self) -> bytes:
        rng = self.rng
        r = rng.random()
        valid = self.send_frame(rng.randint(0, 2**31 - 1))
        if r < 0.15:
            return rng.randbytes(rng.randint(1, 64))
        if r < 0.3:
            length = rng.choice(
                [-1, 0, 1, 2, 3, -(2**31), 2**31 - 1, 16 * 1024 * 1024 + 1, 2**30, 100_000_000]
            )
            return struct.pack(">i", length) + rng.randbytes(rng.randint(0, 32))
        if r < 0.4:  # header length beyond the frame, or an unknown serialize type
            hlen = rng.choice([2**24 - 1, 1000, 9])
            ser = rng.choice([0, 1, 2, 7, 0x7F, 0xFF])
            return struct.pack(">iI", 8, (ser << 24) | hlen) + rng.randbytes(4)
        if r < 0.55:  # framing fine, header is not a JSON object
            header = rng.choice(
                [rng.randbytes(rng.randint(0, 40)), b"[]", b"1", b'"x"', b"null", b"", b"{", b"\xff\xfe{}"]
            )
            return frame(header, rng.randbytes(rng.randint(0, 10)))
        if r < 0.65:  # truncated JSON
            header = json_header(RequestCode.PULL_MESSAGE, {"topic": "FuzzT0"}, 1)
            return frame(header[: rng.randint(1, len(header) - 1)])
        if r < 0.75:  # JSON object with fields of the wrong type
            h = json.loads(json_header(RequestCode.SEND_MESSAGE, {"topic": "FuzzT0"}, 1))
            key = rng.choice(["code", "opaque", "flag", "version", "extFields", "language"])
            h[key] = rng.choice(["abc", 1.5, [], {}, "12x", 2**70, -(2**70), [1]])
            return frame(json.dumps(h).encode())
        if r < 0.85:  # binary header garbage
            return frame(rng.randbytes(rng.randint(0, 40)), ser=1)
        # a valid frame cut short (the broker must wait, then see EOF)
        return valid[: rng.randint(1, len(valid) - 1)]


# --- raw connections ----------------------------------------------------------------------------------------


@dataclass
class Stats:
    killers: int = 0
    killers_lingering: int = 0
    framed: int = 0
    framed_answers: int = 0
    framed_closed_by_broker: int = 0
    slow: int = 0
    live_sends: int = 0
    live_pulls: int = 0
    live_max_latency_ms: float = 0.0
    bad_answers: list[str] = field(default_factory=list)


async def run_killer(host: str, port: int, data: bytes, stats: Stats) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(data)
        await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
        try:
            await asyncio.wait_for(reader.read(-1), 5.0)  # until the broker closes its side
        except TimeoutError:
            stats.killers_lingering += 1
    except (ConnectionError, OSError):
        pass  # the broker closed first: fine
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass
    stats.killers += 1


async def killer_worker(host: str, port: int, frames: asyncio.Queue[bytes], stats: Stats) -> None:
    while True:
        try:
            data = frames.get_nowait()
        except asyncio.QueueEmpty:
            return
        await run_killer(host, port, data, stats)


async def pipeline(host: str, port: int, gen: Gen, count: int, slow: int, stats: Stats) -> None:
    """Send ``count`` well-framed junk requests on one connection (reconnecting if the broker closes it), then
    a sentinel the broker must answer."""
    sent = 0
    opaque = 1_000_000 * (1 + id(gen) % 1000)
    while sent < count:
        reader, writer = await asyncio.open_connection(host, port)
        answered: set[int] = set()
        decoder = FrameDecoder()

        async def read_loop(
            reader: asyncio.StreamReader = reader,
            decoder: FrameDecoder = decoder,
            answered: set[int] = answered,
        ) -> None:
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    return
                for cmd in decoder.feed(chunk):
                    if not cmd.is_response:
                        stats.bad_answers.append(f"non-response frame from broker: {cmd!r}")
                    answered.add(cmd.opaque)
                    stats.framed_answers += 1

        reading = asyncio.create_task(read_loop())
        try:
            while sent < count and not reading.done():
                opaque += 1
                data, _oneway = gen.well_framed(opaque)
                if slow > 0 and gen.rng.random() < 0.01:
                    slow -= 1
                    stats.slow += 1
                    for i in range(len(data)):
                        writer.write(data[i : i + 1])
                        await writer.drain()
                else:
                    writer.write(data)
                    await writer.drain()
                sent += 1
                stats.framed += 1
            if reading.done():
                stats.framed_closed_by_broker += 1
                continue
            # Sentinel: a plain request with a fresh opaque must be answered on this very connection.
            opaque += 1
            sentinel = create_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "nobody"})
            sentinel.opaque = opaque
            writer.write(encode(sentinel))
            await writer.drain()
            deadline = time.monotonic() + 20
            while opaque not in answered and not reading.done() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert opaque in answered, "sentinel request after fuzzing was not answered"
        except (ConnectionError, OSError):
            stats.framed_closed_by_broker += 1
        finally:
            reading.cancel()
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, OSError):
                pass


# --- a well-behaved client ----------------------------------------------------------------------------------


def parse_records(body: bytes) -> list[dict[str, Any]]:
    """Stored message records (REMOTING.md §4.1, IPv4 hosts) from a pull body."""
    out = []
    pos = 0
    while pos < len(body):
        total, magic = struct.unpack_from(">ii", body, pos)
        assert magic == MAGIC_MESSAGE, f"bad magic {magic:#x} at {pos}"
        queue_id, _flag, queue_offset = struct.unpack_from(">iiq", body, pos + 12)
        sysflag = struct.unpack_from(">i", body, pos + 36)[0]
        p = pos + 40 + 8 + (20 if sysflag & 0x10 else 8) + 8 + (20 if sysflag & 0x20 else 8) + 4 + 8
        (blen,) = struct.unpack_from(">i", body, p)
        msg_body = body[p + 4 : p + 4 + blen]
        p += 4 + blen
        tlen = body[p]
        topic = body[p + 1 : p + 1 + tlen].decode()
        p += 1 + tlen
        (plen,) = struct.unpack_from(">h", body, p)
        p += 2 + plen
        assert p - pos == total, f"record size {total} != parsed {p - pos}"
        out.append({"queue_id": queue_id, "queue_offset": queue_offset, "body": msg_body, "topic": topic})
        pos += total
    return out


async def live_client(addr: str, stop: asyncio.Event, stats: Stats) -> dict[tuple[int, int], bytes]:
    """SEND_MESSAGE_V2 every few ms while the fuzzers run, plus a PULL now and then; all must succeed."""
    stored: dict[tuple[int, int], bytes] = {}
    async with RemotingClient() as client:
        i = 0
        while not stop.is_set() or i < 20:
            i += 1
            body = f"live-{i}".encode()
            ext = {
                "a": "live_pg",
                "b": LIVE_TOPIC,
                "c": "TBW102",
                "d": "4",
                "e": str(i % 4),
                "f": "0",
                "g": str(int(time.time() * 1000)),
                "h": "0",
                "i": properties({"TAGS": "live", "UNIQ_KEY": uuid.uuid4().hex.upper()}),
                "j": "0",
                "k": "false",
                "m": "false",
            }
            t0 = time.monotonic()
            resp = await client.invoke(addr, create_request(RequestCode.SEND_MESSAGE_V2, ext, body), 10_000)
            stats.live_max_latency_ms = max(stats.live_max_latency_ms, (time.monotonic() - t0) * 1000)
            assert resp.code == 0, f"live send failed: {resp!r}"
            key = (int(resp.ext_fields["queueId"]), int(resp.ext_fields["queueOffset"]))
            assert key not in stored
            stored[key] = body
            stats.live_sends += 1
            if i % 10 == 0:  # read it back (the consume queue is fed asynchronously: retry briefly)
                q, off = key
                deadline = time.monotonic() + 5
                while not (got := await pull(client, addr, q, off)) and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                stats.live_pulls += 1
                assert got and got[0]["body"] == body, f"live pull at {key} returned {got[:1]}"
            await asyncio.sleep(0.01)
    return stored


async def pull(client: RemotingClient, addr: str, queue_id: int, offset: int) -> list[dict[str, Any]]:
    ext = {
        "consumerGroup": "live_cg",
        "topic": LIVE_TOPIC,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": "4",  # FLAG_SUBSCRIPTION: filter by the header's subscription, no heartbeat needed
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
        "subVersion": "0",
    }
    resp: RemotingCommand = await client.invoke(addr, create_request(RequestCode.PULL_MESSAGE, ext), 10_000)
    if resp.code != 0:
        return []
    assert resp.body is not None
    return parse_records(bytes(resp.body))


async def pull_everything(addr: str) -> dict[tuple[int, int], bytes]:
    out: dict[tuple[int, int], bytes] = {}
    async with RemotingClient() as client:
        for q in range(4):
            offset = 0
            while True:
                records = await pull(client, addr, q, offset)
                if not records:
                    break
                for r in records:
                    out[(r["queue_id"], r["queue_offset"])] = r["body"]
                offset = records[-1]["queue_offset"] + 1
    return out


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# --- the test -----------------------------------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    proc = start_broker(tmp_path / "store")
    try:
        yield proc
    finally:
        rc = proc.stop()
        assert rc == 0, "broker exited uncleanly after fuzzing:\n" + "".join(proc.log[-40:])


async def run_cpp(args: list[str], home: Path, timeout: float = 90) -> list[dict[str, Any]]:
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(DRIVER),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(os.environ, HOME=str(home)),
    )
    try:
        out, err = await asyncio.wait_for(child.communicate(), timeout)
    except TimeoutError:
        child.kill()
        await child.wait()
        raise
    assert child.returncode == 0, (
        f"{args[0]} rc={child.returncode}\n{out.decode()[-2000:]}{err.decode()[-2000:]}"
    )
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


async def test_fuzz_frames_broker_keeps_serving(broker: BrokerProcess, tmp_path: Path) -> None:
    host, port = broker.broker_addr.rsplit(":", 1)
    rng = random.Random(SEED)
    rss_before = rss_kib(broker.proc.pid)
    stats = Stats()

    n_killers = int(TOTAL_FRAMES * KILLER_SHARE)
    killers: asyncio.Queue[bytes] = asyncio.Queue()
    gen = Gen(rng)
    for _ in range(n_killers):
        killers.put_nowait(gen.killer())
    per_pipeline = (TOTAL_FRAMES - n_killers) // PIPELINES
    pipelines = [Gen(random.Random(rng.random())) for _ in range(PIPELINES)]

    stop = asyncio.Event()
    live = asyncio.create_task(live_client(broker.broker_addr, stop, stats))
    started = time.monotonic()
    try:
        await asyncio.wait_for(
            asyncio.gather(
                *(killer_worker(host, int(port), killers, stats) for _ in range(KILLER_WORKERS)),
                *(pipeline(host, int(port), g, per_pipeline, 5, stats) for g in pipelines),
            ),
            120,
        )
    finally:
        stop.set()
    stored = await asyncio.wait_for(live, 60)
    fuzz_seconds = time.monotonic() - started

    report = {k: v for k, v in vars(stats).items() if k != "bad_answers"}
    report.update(seed=SEED, fuzz_seconds=round(fuzz_seconds, 1))
    print("fuzz stats:", json.dumps(report))
    assert broker.proc.poll() is None, "broker died:\n" + "".join(broker.log[-40:])
    assert stats.killers + stats.framed >= TOTAL_FRAMES - PIPELINES
    assert not stats.bad_answers, stats.bad_answers[:5]
    assert stats.killers_lingering == 0, f"{stats.killers_lingering} connections not closed after EOF"
    assert stats.live_sends >= 20

    # Everything the well-behaved client stored is still there, exactly where the broker said.
    everything = await pull_everything(broker.broker_addr)
    for key, body in stored.items():
        assert everything.get(key) == body, f"live message at {key} lost or changed"

    # The official C++ client still works: produce to a new topic, then read it back from the start.
    topic = f"FuzzCpp_{uuid.uuid4().hex[:6]}"
    home = tmp_path / "cpp-home"
    home.mkdir()
    ns = broker.namesrv_addr
    produce = ["produce", "--namesrv", ns, "--group", "PG_FUZZ", "--topic", topic, "--count", "20"]
    sent = await run_cpp(produce, home)
    assert [x["result"]["status"] for x in sent if x["event"] == "sent"] == [0] * 20, sent[-3:]
    pull_args = ["pull", "--namesrv", ns, "--group", "CG_FUZZ", "--topic", topic, "--expect", "20"]
    pulled = await run_cpp(pull_args, home)
    bodies = sorted(x["body"] for x in pulled if x["event"] == "msg")
    assert bodies == sorted(f"{topic}#{i}" for i in range(20))

    assert broker.proc.poll() is None
    rss_growth_mib = (rss_kib(broker.proc.pid) - rss_before) / 1024
    print(f"broker RSS growth: {rss_growth_mib:.0f} MiB")
    assert rss_growth_mib < 512, f"broker RSS grew by {rss_growth_mib:.0f} MiB"


def test_header_ints_beyond_int32_are_handled(broker: BrokerProcess) -> None:
    """``code``/``opaque``/``flag``/``version`` are Java ints. A header carrying a larger number is either
    answered or the connection is closed -- but never through an unhandled error in the write path."""
    host, port = broker.broker_addr.rsplit(":", 1)
    for key in ("opaque", "code", "flag", "version"):
        for value in (2**31, 2**63, 2**64, 2**70, -(2**70)):
            header = json.loads(
                json_header(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g"}, 5)
            )
            header[key] = value
            ok = json_header(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g"}, 6)
            with socket.create_connection((host, int(port)), timeout=5) as sock:
                sock.sendall(frame(json.dumps(header).encode()) + frame(ok))
                sock.shutdown(socket.SHUT_WR)
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
            opaques = [c.opaque for c in FrameDecoder().feed(data)]
            assert opaques in ([], [6], [header["opaque"], 6]), (key, value, opaques)
    assert broker.proc.poll() is None
    time.sleep(0.5)
    log = "".join(broker.log)
    assert "Fatal error on transport" not in log and "Traceback" not in log, log[-3000:]
