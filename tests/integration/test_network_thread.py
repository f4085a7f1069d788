"""The broker's network thread (rmq._store.NetServer) and its SEND fast path, against real brokers.

The fast path must be indistinguishable from the Python send processor: same answers, same stored
records, same order, same errors (which it leaves to Python).
"""

from __future__ import annotations

import asyncio
import struct
import time
import urllib.request
import zlib

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from rmq.common.codes import FLAG_ONEWAY, RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.remoting.codec import FrameDecoder, encode
from rmq.remoting.command import RemotingCommand, create_request
from rmq.store import decode_offset_msg_id, decode_records

from tests.brokerproc import BrokerProcess, start_broker
from tests.fastsend import delta, fast_send_stats

SEP, KV = "\x02", "\x01"


def send_request(topic: str, body: bytes, props: str = "", qid: int = 0) -> RemotingCommand:
    f = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": str(qid), "f": "0"}
    f.update({"g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"})
    return create_request(RequestCode.SEND_MESSAGE_V2, f, body)


async def pull_all(client: RemotingClient, addr: str, topic: str, qid: int) -> list:
    f = {"consumerGroup": "CG", "topic": topic, "queueId": str(qid), "queueOffset": "0", "maxMsgNums": "64"}
    f.update({"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*"})
    f["subVersion"] = "0"
    deadline = time.monotonic() + 10
    while True:
        r = await client.invoke(addr, create_request(RequestCode.PULL_MESSAGE, f), 5000)
        if r.code == ResponseCode.SUCCESS or time.monotonic() > deadline:
            return decode_records(r.body) if r.code == ResponseCode.SUCCESS else []
        await asyncio.sleep(0.05)


async def pull_n(client: RemotingClient, addr: str, topic: str, qid: int, n: int) -> list:
    """The first ``n`` records of a queue, once dispatched (bounded: fewer after 10 s)."""
    deadline = time.monotonic() + 10
    records = await pull_all(client, addr, topic, qid)
    while len(records) < n and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        records = await pull_all(client, addr, topic, qid)
    return records


async def put_total(client: RemotingClient, addr: str) -> int:
    r = await client.invoke(addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO), 5000)
    return int(orjson.loads(r.body)["table"]["msgPutTotalTodayNow"])


@pytest.fixture
async def brokers(tmp_path):
    """The same broker twice: with the network thread (default) and with the asyncio server only."""
    started: list[BrokerProcess] = []
    for name, prop in (("native", "networkThread=true"), ("asyncio", "networkThread=false")):
        started.append(await asyncio.to_thread(start_broker, tmp_path / name, prop))
    client = RemotingClient()
    yield started, client
    await client.close()
    for b in started:
        b.stop()


async def test_fast_path_answers_and_stores_like_the_python_path(brokers):
    started, client = brokers
    props = f"KEYS{KV}k1{SEP}TAGS{KV}tg{SEP}WAIT{KV}true{SEP}UNIQ_KEY{KV}AA{SEP}"
    results = []
    for b in started:
        answers = []
        # The first send auto-creates the topic through Python; the others take the fast path
        # on the network-thread broker (oneway included).
        for i in range(3):
            r = await client.invoke(b.broker_addr, send_request("Same", b"body-%d" % i, props, 1), 5000)
            assert r.code == ResponseCode.SUCCESS, r.remark
            answers.append(r)
        oneway = send_request("Same", b"body-oneway", props, 1)
        oneway.flag |= FLAG_ONEWAY
        await client.invoke_oneway(b.broker_addr, oneway)
        records = await pull_all(client, b.broker_addr, "Same", 1)
        for _ in range(50):
            if len(records) == 4:
                break
            await asyncio.sleep(0.1)
            records = await pull_all(client, b.broker_addr, "Same", 1)
        results.append((answers, records, await put_total(client, b.broker_addr)))

    (native_answers, native_records, native_total), (py_answers, py_records, py_total) = results
    for a, p in zip(native_answers, py_answers, strict=True):
        assert set(a.ext_fields) == set(p.ext_fields)
        assert a.ext_fields["queueId"] == p.ext_fields["queueId"] == "1"
        assert a.ext_fields["queueOffset"] == p.ext_fields["queueOffset"]
        assert a.ext_fields["MSG_REGION"] == p.ext_fields["MSG_REGION"]
        assert a.ext_fields["TRACE_ON"] == p.ext_fields["TRACE_ON"]
        assert (a.language, a.version, a.remark, a.serialize_type) == (
            p.language,
            p.version,
            p.remark,
            p.serialize_type,
        )
    for ans, rec in zip(native_answers, native_records, strict=False):
        assert decode_offset_msg_id(ans.ext_fields["msgId"])[1] == rec[3]  # commitlog offset
    assert (
        [r[12] for r in native_records]
        == [r[12] for r in py_records]
        == [
            b"body-0",
            b"body-1",
            b"body-2",
            b"body-oneway",
        ]
    )
    # Same stored properties (WAIT dropped, CLUSTER appended), flags and queue offsets.
    assert [r[13] for r in native_records] == [r[13] for r in py_records]
    assert [(r[4], r[5], r[2]) for r in native_records] == [(r[4], r[5], r[2]) for r in py_records]
    assert native_total == py_total == 4


async def test_pipelined_sends_keep_their_order_across_the_python_hand_off(tmp_path):
    # The 199 sends behind the first wait for Python while it creates the topic: on a loaded machine that can
    # pass the default 200 ms, and they would be refused SYSTEM_BUSY (back-pressure, tested elsewhere).
    b = await asyncio.to_thread(start_broker, tmp_path / "s", "waitTimeMillsInSendQueue=10000")
    client = RemotingClient()
    try:
        host, port = b.broker_addr.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        # One write: the first frame needs Python (the topic does not exist yet), the rest could be
        # fast; every one must be stored in the order sent.
        frames = []
        for i in range(200):
            req = send_request("Ordered", b"%d" % i, "", 0)
            req.opaque = i
            frames.append(encode(req))
        writer.write(b"".join(frames))
        await writer.drain()
        decoder = FrameDecoder()
        answers: dict[int, RemotingCommand] = {}
        while len(answers) < 200:
            for cmd in decoder.feed(await asyncio.wait_for(reader.read(65536), 10)):
                answers[cmd.opaque] = cmd
        writer.close()
        assert all(a.code == ResponseCode.SUCCESS for a in answers.values())
        assert [int(answers[i].ext_fields["queueOffset"]) for i in range(200)] == list(range(200))
        records = []
        f = {"consumerGroup": "CG", "topic": "Ordered", "queueId": "0", "maxMsgNums": "32"}
        f.update({"sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*"})
        f["subVersion"] = "0"
        deadline = time.monotonic() + 10
        while len(records) < 200 and time.monotonic() < deadline:
            f["queueOffset"] = str(len(records))
            r = await client.invoke(b.broker_addr, create_request(RequestCode.PULL_MESSAGE, f), 5000)
            if r.code == ResponseCode.SUCCESS:
                records.extend(decode_records(r.body))
            else:  # not dispatched yet
                await asyncio.sleep(0.02)
        assert [int(r[12]) for r in records] == list(range(200))
    finally:
        await client.close()
        b.stop()


async def test_errors_are_answered_by_python_and_sync_flush_waits(tmp_path):
    b = await asyncio.to_thread(
        start_broker, tmp_path / "s", "flushDiskType=SYNC_FLUSH", "maxMessageSize=1024"
    )
    client = RemotingClient()
    try:
        addr = b.broker_addr
        r = await client.invoke(addr, send_request("Sync", b"first"), 5000)
        assert r.code == ResponseCode.SUCCESS, r.remark
        # Now vetted: these take the fast path and are answered after their group commit.
        answers = await asyncio.gather(
            *(client.invoke(addr, send_request("Sync", b"m%d" % i, "", i % 4), 5000) for i in range(64))
        )
        assert all(a.code == ResponseCode.SUCCESS for a in answers)
        wait_false = await client.invoke(addr, send_request("Sync", b"x", f"WAIT{KV}false"), 5000)
        assert wait_false.code == ResponseCode.SUCCESS
        # What the fast path declines still gets RocketMQ's answers from Python.
        too_big = await client.invoke(addr, send_request("Sync", b"x" * 1025), 5000)
        assert too_big.code == ResponseCode.MESSAGE_ILLEGAL and "maxMessageSize" in (too_big.remark or "")
        bad_queue = await client.invoke(addr, send_request("Sync", b"x", "", 99), 5000)
        assert bad_queue.code == ResponseCode.SYSTEM_ERROR and "queueId" in (bad_queue.remark or "")
        # An empty body is declined by the fast path and stored by Python, as the Apache broker does.
        empty = await client.invoke(addr, send_request("Sync", b""), 5000)
        assert empty.code == ResponseCode.SUCCESS
        assert await put_total(client, addr) == 67
    finally:
        await client.close()
        b.stop()


@pytest.mark.parametrize("spin", [0, 1000])
async def test_sends_one_at_a_time_are_answered_whether_the_thread_spins_or_sleeps(tmp_path, spin):
    """networkThreadSpinMicros: the network thread polls before sleeping while sends arrive steadily (1000:
    the longest spin allowed), or sleeps at once (0); either way steady, idle-separated and group-committed
    sends are all answered by the fast path, stored in order."""
    b = await asyncio.to_thread(
        start_broker,
        tmp_path / "s",
        "flushDiskType=SYNC_FLUSH",
        f"networkThreadSpinMicros={spin}",
        "metricsExporterType=PROM",
        "metricsPromExporterPort=0",
    )
    client = RemotingClient()
    try:
        addr = b.broker_addr
        r = await client.invoke(addr, send_request("Spin", b"first"), 5000)
        assert r.code == ResponseCode.SUCCESS, r.remark
        before = await asyncio.to_thread(fast_send_stats, addr)
        offsets = []
        for burst in range(3):
            for i in range(100):  # one in flight: each answer after its flush, the next sent at once
                r = await client.invoke(addr, send_request("Spin", b"s%d-%d" % (burst, i)), 5000)
                assert r.code == ResponseCode.SUCCESS, r.remark
                offsets.append(int(r.ext_fields["queueOffset"]))
            await asyncio.sleep(0.2)  # idle: the thread goes back to sleeping
        answers = await asyncio.gather(  # many in flight: held for a group commit
            *(client.invoke(addr, send_request("Spin", b"g%d" % i), 5000) for i in range(64))
        )
        assert all(a.code == ResponseCode.SUCCESS for a in answers)
        d = delta(before, await asyncio.to_thread(fast_send_stats, addr))
        assert d["taken"] == 364 and d["declined"] == 0, d
        # One send in flight from this client arrives well within 2 ms of the last answer: a thread
        # allowed to spin does so between them; one that may not never does.
        assert (d["spun_ms"] > 0) if spin else (d["spun_ms"] == 0), d
        url = f"http://127.0.0.1:{b.ready['metrics']}/metrics"
        text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).read().decode())
        polled = [
            s.value
            for fam in text_string_to_metric_families(text)
            for s in fam.samples
            if s.name == "rocketmq_network_thread_polling_seconds_total"
        ]
        assert len(polled) == 1 and ((polled[0] > 0) if spin else (polled[0] == 0)), polled
        assert offsets == list(range(1, 301))
        assert sorted(int(a.ext_fields["queueOffset"]) for a in answers) == list(range(301, 365))
        bodies: list[bytes] = []
        f = {"consumerGroup": "CG", "topic": "Spin", "queueId": "0", "maxMsgNums": "32", "sysFlag": "4"}
        f.update({"commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"})
        deadline = time.monotonic() + 10
        while len(bodies) < 365 and time.monotonic() < deadline:
            f["queueOffset"] = str(len(bodies))
            r = await client.invoke(addr, create_request(RequestCode.PULL_MESSAGE, f), 5000)
            if r.code == ResponseCode.SUCCESS:
                bodies.extend(bytes(rec[12]) for rec in decode_records(r.body))
            else:  # not dispatched yet
                await asyncio.sleep(0.02)
        assert bodies[1:301] == [b"s%d-%d" % (k, i) for k in range(3) for i in range(100)]
        assert sorted(bodies[301:]) == sorted(b"g%d" % i for i in range(64))
    finally:
        await client.close()
        b.stop()
    expected = f"polls {spin} µs before sleeping" if spin else "sleeps at once"
    assert any(expected in line for line in b.log), "".join(b.log[-20:])


def raw_frame(code: int, ext: dict[str, object], body: bytes, opaque: int) -> bytes:
    """A request frame whose extFields are written as given (numbers stay JSON numbers, as the C++ client
    writes them)."""
    header = orjson.dumps(
        {"code": code, "extFields": ext, "flag": 0, "language": "CPP", "opaque": opaque, "version": 63}
    )
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def batch_body(msgs: list[tuple[bytes, str]]) -> bytes:
    """The batch encoding (REMOTING.md §4.5) of ``(body, properties)`` pairs, flag = index."""
    out = b""
    for i, (body, props) in enumerate(msgs):
        p = props.encode()
        out += struct.pack(">iiiii", 22 + len(body) + len(p), 0, 0, i, len(body)) + body
        out += struct.pack(">h", len(p)) + p
    return out


def client_shaped_requests(topic: str, now: int) -> list[bytes]:
    """Sends as the C++ client 0.4.4 and the Java client 4.9.8 write them (header shapes captured)."""

    def cpp(i: int, props: str, body: bytes, qid: int, batch: bool = False, sys_flag: int = 0) -> bytes:
        ext = {"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "x", "batch": "1" if batch else "0"}
        ext |= {
            "bornTimestamp": str(now + i),
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 4,
            "flag": 0,
        }
        ext |= {"producerGroup": "g", "properties": props, "queueId": qid, "reconsumeTimes": "0"}
        ext |= {"sysFlag": sys_flag, "topic": topic, "unitMode": "0"}
        return raw_frame(RequestCode.SEND_MESSAGE, ext, body, i)

    def uniq(i: int) -> str:
        return f"UNIQ_KEY{KV}0100007F00001FFA0000{i:012X}"

    single = [
        cpp(i, f"KEYS{KV}k{i}{SEP}{uniq(i)}{SEP}WAIT{KV}true{SEP}seq{KV}{i}{SEP}", b"m%d" % i, 1)
        for i in range(3)
    ]
    items = [
        (b"b%d" % i * 300, f"KEYS{KV}k{i}{SEP}{uniq(10 + i)}{SEP}WAIT{KV}true{SEP}seq{KV}{i}{SEP}")
        for i in range(6)
    ]
    cpp_batch = cpp(3, f"WAIT{KV}true{SEP}", batch_body(items[:3]), 2, batch=True)
    cpp_zipped = cpp(
        4, f"WAIT{KV}true{SEP}", zlib.compress(batch_body(items[3:] * 4)), 2, batch=True, sys_flag=1
    )
    java = {"a": "jg_P", "b": topic, "c": "TBW102", "d": "4", "e": "2", "f": "0", "g": str(now), "h": "0"}
    java |= {"i": f"WAIT{KV}true", "j": "0", "k": "false", "m": "true", "n": "broker-a"}
    java_batch = raw_frame(RequestCode.SEND_BATCH_MESSAGE, java, batch_body(items), 5)
    return [*single, cpp_batch, cpp_zipped, java_batch]


async def test_client_header_shapes_take_the_fast_path_and_store_like_python(brokers):
    started, client = brokers
    results = []
    now = int(time.time() * 1000)
    for b in started:
        before = await asyncio.to_thread(fast_send_stats, b.broker_addr)
        host, port = b.broker_addr.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        decoder = FrameDecoder()
        answers = []
        for i, frame in enumerate(client_shaped_requests("Shapes", now)):
            writer.write(frame)  # one at a time: the first (which creates the topic) is Python's
            got: list[RemotingCommand] = []
            while not got:
                got = decoder.feed(await asyncio.wait_for(reader.read(65536), 10))
            answers.extend(got)
            if i == 0:
                # The event loop writes Python's answer before it releases the connection to the fast
                # path (NetServer.ack, at the end of the same callback): a send written as soon as the
                # answer arrives may still be diverted to Python (declined "Queued"). A round trip
                # through that event loop on another connection starts after the release.
                await asyncio.to_thread(fast_send_stats, b.broker_addr)
        writer.close()
        assert all(a.code == ResponseCode.SUCCESS for a in answers), [a.remark for a in answers]
        records = {q: await pull_n(client, b.broker_addr, "Shapes", q, n) for q, n in ((1, 3), (2, 21))}
        results.append(
            (answers, records, delta(before, await asyncio.to_thread(fast_send_stats, b.broker_addr)))
        )

    (native_answers, native_records, native_fast), (py_answers, py_records, py_fast) = results
    # The network-thread broker took all but the first; the other one has no fast path.
    assert native_fast["taken"] == 5 and native_fast["Topic"] == 1 and native_fast["declined"] == 1, (
        native_fast
    )
    assert native_fast["messages"] == 2 + 3 + 12 + 6
    assert py_fast["taken"] == py_fast["declined"] == 0
    for a, p in zip(native_answers, py_answers, strict=True):
        assert {k: v for k, v in a.ext_fields.items() if k != "msgId"} == {
            k: v for k, v in p.ext_fields.items() if k != "msgId"
        }
        assert len(a.ext_fields["msgId"].split(",")) == len(p.ext_fields["msgId"].split(","))
        assert (a.language, a.version, a.remark, a.flag) == (p.language, p.version, p.remark, p.flag)
    assert [len(a.ext_fields["msgId"].split(",")) for a in native_answers] == [1, 1, 1, 3, 12, 6]
    for q in (1, 2):
        native, py = native_records[q], py_records[q]
        assert len(native) == len(py) == (3 if q == 1 else 21)
        # body, properties, sysflag, flag, queue offset, born timestamp, reconsume times
        fields = (12, 13, 4, 5, 2, 6, 10)
        assert [[r[i] for i in fields] for r in native] == [[r[i] for i in fields] for r in py]
    ids = [i for a in native_answers for i in a.ext_fields["msgId"].split(",")]
    offsets = sorted(r[3] for q in (1, 2) for r in native_records[q])
    assert sorted(decode_offset_msg_id(i)[1] for i in ids) == offsets


async def test_half_messages_take_the_fast_path_and_commit_like_python(brokers):
    """Transactional half messages: after the first (which the Python path parks, creating the half topic),
    the network thread parks them itself, with the same records and answers as the Python path; their
    commits and rollbacks (END_TRANSACTION: the first Python's, the rest the network thread's) store the
    same records on both, and a second decision of a half does nothing."""
    started, client = brokers
    results = []
    for b in started:
        addr = b.broker_addr
        answers = []
        # The first vets the topic and allows half messages; four more.
        for i in range(5):
            p = f"KEYS{KV}k{i}{SEP}TRAN_MSG{KV}true{SEP}PGROUP{KV}TG{SEP}UNIQ_KEY{KV}U{i}{SEP}WAIT{KV}true"
            request = send_request("TxFast", b"half-%d" % i, p, i % 2)
            request.ext_fields["f"] = "4"  # sysFlag: TRANSACTION_PREPARED_TYPE, as the clients send it
            request.ext_fields["g"] = str(1_700_000_000_000 + i)  # born timestamps alike on both
            if i == 1:
                before = await asyncio.to_thread(fast_send_stats, addr)
            r = await client.invoke(addr, request, 5000)
            assert r.code == ResponseCode.SUCCESS, r.remark
            answers.append(r)
        taken = delta(before, await asyncio.to_thread(fast_send_stats, addr))
        halves = await pull_n(client, addr, "RMQ_SYS_TRANS_HALF_TOPIC", 0, 5)
        # Commit 0, 2 and 3, roll 1 and 4 back.
        for i, r in enumerate(answers):
            end = {
                "producerGroup": "TG",
                "tranStateTableOffset": r.ext_fields["queueOffset"],
                "commitLogOffset": str(decode_offset_msg_id(r.ext_fields["msgId"])[1]),
                "commitOrRollback": "12" if i in (1, 4) else "8",
                "msgId": f"U{i}",
            }
            done = await client.invoke(addr, create_request(RequestCode.END_TRANSACTION, end), 5000)
            assert done.code == ResponseCode.SUCCESS, done.remark
            if i == 2:  # a second decision of a half: answered, nothing done
                again = await client.invoke(addr, create_request(RequestCode.END_TRANSACTION, end), 5000)
                assert again.code == ResponseCode.SUCCESS, again.remark
        committed = {q: await pull_n(client, addr, "TxFast", q, 2 if q == 0 else 0) for q in (0, 1)}
        info = await client.invoke(addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO), 5000)
        table = orjson.loads(info.body)["table"]
        fast_ends = (
            int(table.get("transactionFastCommits", 0)),
            int(table.get("transactionFastRollbacks", 0)),
        )
        results.append((answers, halves, committed, taken, fast_ends))

    native_answers, native_halves, native_committed, native_taken, native_ends = results[0]
    py_answers, py_halves, py_committed, _, py_ends = results[1]
    assert native_taken["taken"] == 4 and native_taken["declined"] == 0, native_taken
    # The first END_TRANSACTION is Python's (it makes the op topic); the network thread decides the
    # other four (commits 2 and 3, rollbacks 1 and 4) and leaves the second decision of half 2 to Python.
    assert native_ends == (2, 2) and py_ends == (0, 0), (native_ends, py_ends)
    for a, p in zip(native_answers, py_answers, strict=True):
        assert {k: v for k, v in a.ext_fields.items() if k != "msgId"} == {
            k: v for k, v in p.ext_fields.items() if k != "msgId"
        }
    assert [a.ext_fields["queueId"] for a in native_answers] == ["0", "1", "0", "1", "0"]
    # body, properties, sysflag, flag, queue offset, born timestamp, reconsume times, topic, queue
    fields = (12, 13, 4, 5, 2, 6, 10, 0, 1)
    assert len(native_halves) == len(py_halves) == 5
    assert [[r[i] for i in fields] for r in native_halves] == [[r[i] for i in fields] for r in py_halves]
    props = native_halves[3][13]
    assert f"__transactionId__{KV}U3" in props and f"REAL_TOPIC{KV}TxFast{SEP}REAL_QID{KV}1" in props
    assert "WAIT" not in props
    # The commits: 0 and 2 on queue 0, 3 on queue 1, the same records on both brokers.
    assert [r[12] for r in native_committed[0]] == [r[12] for r in py_committed[0]] == [b"half-0", b"half-2"]
    assert [r[12] for r in native_committed[1]] == [r[12] for r in py_committed[1]] == [b"half-3"]
    for q in (0, 1):
        assert [[r[i] for i in fields] for r in native_committed[q]] == [
            [r[i] for i in fields] for r in py_committed[q]
        ]


def heartbeat_request(group: str, topic: str, expression: str, version: int) -> RemotingCommand:
    from rmq.client.heartbeat import (
        ConsumeFromWhere,
        ConsumerData,
        ConsumeType,
        HeartbeatData,
        MessageModel,
        build_subscription,
    )

    sub = build_subscription(topic, expression)
    sub.sub_version = version
    consumer = ConsumerData(
        group,
        ConsumeType.CONSUME_PASSIVELY,
        MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        [sub],
    )
    body = orjson.dumps(HeartbeatData("pull-test@1", [], [consumer]).to_dict())
    return create_request(RequestCode.HEART_BEAT, None, body)


def pull_request(group: str, topic: str, offset: int, commit: int, version: int, suspend_ms: int = 0):
    """A push consumer's pull (the Java client's fields): suspend, commit offset, no subscription."""
    f = {"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": str(offset)}
    f["maxMsgNums"] = "2"
    f.update({"sysFlag": str(2 | (1 if commit >= 0 else 0)), "commitOffset": str(commit)})
    f.update({"suspendTimeoutMillis": str(suspend_ms), "subVersion": str(version), "expressionType": "TAG"})
    return create_request(RequestCode.PULL_MESSAGE, f)


async def test_pulls_take_the_fast_path_and_answer_like_python(brokers):
    """A push consumer's pulls that find messages are answered by the network thread once the Python path
    answered the group's first: the same answers as the asyncio broker's (offsets, records, tags), the same
    committed offsets and counts; nothing new is held for long polling, by the network thread there, and
    answered PULL_NOT_FOUND as Python answers it; a new subscription, a group config change and a topic
    change take effect at once."""
    started, client = brokers
    results = []
    for b in started:
        addr = b.broker_addr
        out: dict[str, object] = {}
        for i in range(8):
            props = f"TAGS{KV}{'ab'[i % 2]}{SEP}WAIT{KV}true"
            r = await client.invoke(addr, send_request("PullFast", b"m%d" % i, props), 5000)
            assert r.code == ResponseCode.SUCCESS, r.remark
        r = await client.invoke(addr, heartbeat_request("PFG", "PullFast", "a", 1000), 5000)
        assert r.code == ResponseCode.SUCCESS, r.remark
        await pull_n(client, addr, "PullFast", 0, 8)  # dispatched
        before = await asyncio.to_thread(fast_send_stats, addr)
        answers, offset = [], 0
        q = {"consumerGroup": "PFG", "topic": "PullFast", "queueId": "0"}
        for i, commit in enumerate((-1, 2, 5)):
            r = await client.invoke(addr, pull_request("PFG", "PullFast", offset, commit, 1000), 5000)
            records = decode_records(r.body) if r.body else []
            answers.append((r.code, r.remark, dict(r.ext_fields), [(m[12], m[2]) for m in records]))
            offset = int(r.ext_fields["nextBeginOffset"])
            if i == 1:  # the commit the second pull carried (the network thread's on the native broker)
                c = await client.invoke(addr, create_request(RequestCode.QUERY_CONSUMER_OFFSET, q), 5000)
                out["first_commit"] = c.ext_fields.get("offset")
        commit = 7
        out["answers"] = answers
        out["taken"] = delta(before, await asyncio.to_thread(fast_send_stats, addr))
        # Nothing new: held for the suspend time, then PULL_NOT_FOUND.
        held_before = await asyncio.to_thread(fast_send_stats, addr)
        t0 = time.monotonic()
        r = await client.invoke(addr, pull_request("PFG", "PullFast", offset, commit, 1000, 300), 5000)
        waited = time.monotonic() - t0 >= 0.25
        out["empty"] = (r.code, r.remark, dict(r.ext_fields), waited)
        out["empty_taken"] = delta(held_before, await asyncio.to_thread(fast_send_stats, addr))["pull_taken"]
        r = await client.invoke(addr, create_request(RequestCode.QUERY_CONSUMER_OFFSET, q), 5000)
        out["committed"] = r.ext_fields.get("offset")
        # A new subscription (tag b, a newer version): answered by it at once.
        r = await client.invoke(addr, heartbeat_request("PFG", "PullFast", "b", 2000), 5000)
        assert r.code == ResponseCode.SUCCESS, r.remark
        r = await client.invoke(addr, pull_request("PFG", "PullFast", 0, -1, 2000), 5000)
        out["resubscribed"] = [m[12] for m in decode_records(r.body)]
        # The group may no longer consume: refused at once.
        cfg = {"groupName": "PFG", "consumeEnable": False}
        upd = create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, orjson.dumps(cfg))
        assert (await client.invoke(addr, upd, 5000)).code == ResponseCode.SUCCESS
        r = await client.invoke(addr, pull_request("PFG", "PullFast", 0, -1, 2000), 5000)
        out["disabled"] = r.code
        results.append(out)

    native, py = results
    assert native["answers"] == py["answers"]
    codes_bodies = [(a[0], a[1], a[3]) for a in native["answers"][:2]]
    assert codes_bodies == [
        (ResponseCode.SUCCESS, "FOUND", [(b"m0", 0), (b"m2", 2)]),
        (ResponseCode.SUCCESS, "FOUND", [(b"m4", 4), (b"m6", 6)]),
    ]
    assert native["answers"][0][2]["nextBeginOffset"] == "3"
    assert native["answers"][2][0] != ResponseCode.SUCCESS, "only m7 (tag b) is left"
    # The first found pull vets the pair (Python's); the second is the network thread's.
    assert native["taken"]["pull_taken"] == 1 and native["taken"]["pull_messages"] == 2, native["taken"]
    assert py["taken"]["pull_taken"] == 0
    assert native["empty"] == py["empty"] and native["empty"][0] == ResponseCode.PULL_NOT_FOUND
    assert native["empty"][3], "held for the suspend time"
    assert (native["empty_taken"], py["empty_taken"]) == (1, 0), "held and answered by the network thread"
    assert native["first_commit"] == py["first_commit"] == "2"
    assert native["committed"] == py["committed"] == "7", (native["committed"], py["committed"])
    assert native["resubscribed"] == py["resubscribed"] == [b"m1", b"m3"]
    assert native["disabled"] == py["disabled"] == ResponseCode.NO_PERMISSION


async def test_lite_pulls_take_the_fast_path_with_their_own_subscription(brokers):
    """A lite pull consumer's pulls carry their tag subscription (SUBSCRIPTION bit, no heartbeat needed):
    once the Python path answered the first, the network thread reads each request's expression itself;
    answers as the asyncio broker's, an expression it does not read (SQL92 without the broker's property
    filter) refused by Python as before."""
    started, client = brokers
    results = []
    for b in started:
        addr = b.broker_addr
        for i in range(6):
            props = f"TAGS{KV}{'abc'[i % 3]}{SEP}WAIT{KV}true"
            r = await client.invoke(addr, send_request("LiteFast", b"m%d" % i, props), 5000)
            assert r.code == ResponseCode.SUCCESS, r.remark
        await pull_n(client, addr, "LiteFast", 0, 6)
        before = await asyncio.to_thread(fast_send_stats, addr)
        answers = []
        cases = (("a", "TAG"), ("b || c", "TAG"), (" * ", "TAG"), ("a", None), ("a>1", "SQL92"))
        for expression, etype in cases:
            f = {"consumerGroup": "LFG", "topic": "LiteFast", "queueId": "0", "queueOffset": "0"}
            f.update({"maxMsgNums": "32", "sysFlag": str(2 | 4), "subscription": expression})
            f["subVersion"] = "5"
            f["suspendTimeoutMillis"] = "0"
            if etype is not None:
                f["expressionType"] = etype
            r = await client.invoke(addr, create_request(RequestCode.PULL_MESSAGE, f), 5000)
            records = decode_records(r.body) if r.body else []
            answers.append((r.code, r.remark, dict(r.ext_fields), [m[12] for m in records]))
        results.append((answers, delta(before, await asyncio.to_thread(fast_send_stats, addr))))
    (native, taken), (py, _) = results
    assert native == py
    assert [a[3] for a in native[:4]] == [
        [b"m0", b"m3"],
        [b"m1", b"m2", b"m4", b"m5"],
        [b"m0", b"m1", b"m2", b"m3", b"m4", b"m5"],
        [b"m0", b"m3"],
    ]
    assert native[4][0] == ResponseCode.SYSTEM_ERROR, native[4]
    assert taken["pull_taken"] == 3 and taken["pull_messages"] == 12, taken


async def test_long_polling_is_woken_by_a_send_in_the_network_thread(brokers):
    """A push consumer's pull at the end of its queue is held (long polling) and answered as soon as a message
    for that queue is stored, by the network thread on the native broker (no Python per pull) and by Python on
    the asyncio one, with the same answer; a held pull whose connection closes is dropped, and the broker
    goes on answering the next."""
    started, client = brokers
    results = []
    for b in started:
        addr = b.broker_addr
        r = await client.invoke(addr, send_request("LongPoll", b"first", f"TAGS{KV}a{SEP}WAIT{KV}true"), 5000)
        assert r.code == ResponseCode.SUCCESS, r.remark
        r = await client.invoke(addr, heartbeat_request("LPG", "LongPoll", "*", 1000), 5000)
        assert r.code == ResponseCode.SUCCESS, r.remark
        await pull_n(client, addr, "LongPoll", 0, 1)  # dispatched
        # The group's first pull that finds a message vets the pair (Python's answer).
        r = await client.invoke(addr, pull_request("LPG", "LongPoll", 0, -1, 1000), 5000)
        assert r.code == ResponseCode.SUCCESS, r.remark
        # A held pull on a connection that then closes: dropped (nothing to answer).
        gone = RemotingClient()
        abandoned = asyncio.ensure_future(
            gone.invoke(addr, pull_request("LPG", "LongPoll", 1, -1, 1000, 20_000), 30_000)
        )
        await asyncio.sleep(0.2)
        await gone.close()
        (lost,) = await asyncio.gather(abandoned, return_exceptions=True)
        assert isinstance(lost, BaseException), f"no answer on a closed connection: {lost}"
        before = await asyncio.to_thread(fast_send_stats, addr)
        held = asyncio.ensure_future(
            client.invoke(addr, pull_request("LPG", "LongPoll", 1, -1, 1000, 20_000), 30_000)
        )
        await asyncio.sleep(0.3)
        assert not held.done(), "held: nothing new yet"
        second = send_request("LongPoll", b"second", f"TAGS{KV}a{SEP}WAIT{KV}true")
        r = await client.invoke(addr, second, 5000)
        assert r.code == ResponseCode.SUCCESS, r.remark
        answer = await asyncio.wait_for(held, 15)  # woken by the send: its 20 s suspend time is longer
        taken = delta(before, await asyncio.to_thread(fast_send_stats, addr))
        records = decode_records(answer.body) if answer.body else []
        ext = {k: v for k, v in answer.ext_fields.items() if k != "maxOffset"}
        results.append(((answer.code, answer.remark, ext, [m[12] for m in records]), taken))
    (native, native_taken), (py, py_taken) = results
    assert native == py
    assert native[0] == ResponseCode.SUCCESS and native[3] == [b"second"], native
    assert (native_taken["pull_taken"], native_taken["pull_messages"]) == (1, 1), native_taken
    assert py_taken["pull_taken"] == 0
