"""POP consumption (RocketMQ 5.x) over Remoting against a real broker on loopback: pop and ack, the
revive of un-acked messages to the group's retry topic after their invisible time (reconsume times
growing, DLQ after retryMaxTimes), CHANGE_MESSAGE_INVISIBLETIME, BATCH_ACK_MESSAGE, orderly POP, long
polling, POP and pull groups on one topic. No test asserts a duration: invisible times are short and
each test polls until the condition holds, with generous deadlines."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from rmq.broker.config import BrokerConfig
from rmq.broker.controller import BrokerController
from rmq.broker.metrics_collector import BrokerCollector
from rmq.broker.pop.wire import ORDER_REVIVE_QUEUE, POLLING_TIMEOUT, ExtraInfo
from rmq.client.admin_types import ConsumeStats
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.command import create_request
from rmq.store import decode_records

from tests.broker.popdriver import PopDriver, PopMsg

T = TypeVar("T")
DEADLINE_S = 30.0


async def until(what: str, probe: Callable[[], Awaitable[T | None]], deadline_s: float = DEADLINE_S) -> T:
    end = time.monotonic() + deadline_s
    while True:
        got = await probe()
        if got:
            return got
        assert time.monotonic() < end, f"not within {deadline_s} s: {what}"
        await asyncio.sleep(0.05)


@pytest.fixture
async def broker(tmp_path):
    cfg = BrokerConfig()
    cfg.update({"storePathRootDir": str(tmp_path), "listenPort": "0", "brokerIP1": "127.0.0.1"})
    ctl = BrokerController(cfg)
    await ctl.start("127.0.0.1")
    d = PopDriver(cfg.broker_addr, cfg.broker_name)
    yield ctl, d
    await d.close()
    await ctl.shutdown()


def dispatched(ctl: BrokerController) -> None:
    """Sends are answered before their consume queues are dispatched: wait for those."""
    assert ctl.store.wait_dispatched(ctl.store.commitlog_max_offset(), 10_000)


async def pop_all(d: PopDriver, group: str, topic: str, want: int, **kw: object) -> list[PopMsg]:
    got: list[PopMsg] = []

    async def more() -> bool:
        a = await d.pop(group, topic, **kw)  # type: ignore[arg-type]
        got.extend(a.messages)
        return len(got) >= want

    await until(f"{want} messages popped from {topic}", more)
    return got


async def test_pop_and_ack_answer_as_5x(broker):
    ctl, d = broker
    await d.create_topic("PT", 4)
    await d.create_group("PG1")
    sent = {}
    for i in range(20):
        off = await d.send("PT", i % 4, b"m%d" % i)
        sent[(i % 4, off)] = b"m%d" % i
    dispatched(ctl)
    a = await d.pop("PG1", "PT", max_msgs=32, invisible_ms=60_000)
    assert a.code == ResponseCode.SUCCESS and a.response.remark == "FOUND"
    h = a.response.ext_fields
    for k in ("popTime", "invisibleTime", "reviveQid", "restNum", "startOffsetInfo", "msgOffsetInfo"):
        assert k in h, k
    assert h["invisibleTime"] == "60000" and 0 <= int(h["reviveQid"]) < 8
    assert "orderCountInfo" not in h
    # startOffsetInfo: "0 <qid> <start>" per queue read; msgOffsetInfo: "0 <qid> <o1>,<o2>..."
    for one in h["startOffsetInfo"].split(";"):
        mark, qid, start = one.split(" ")
        assert mark == "0" and 0 <= int(qid) < 4 and start == "0"
    got = a.messages
    assert len(got) == 20 and int(h["restNum"]) == 0
    assert {(m.queue_id, m.queue_offset): m.body for m in got} == sent
    assert all(m.topic == "PT" and "POP_CK" not in m.properties for m in got)
    # popped messages are invisible: nothing more to pop
    again = await d.pop("PG1", "PT")
    assert again.code == POLLING_TIMEOUT and again.response.remark == "NO_MESSAGE_IN_QUEUE"
    assert again.response.ext_fields["restNum"] == "0"
    for m in got:
        r = await d.ack(m)
        assert r.code == ResponseCode.SUCCESS, r.remark
    # handle format: ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId msgOffset
    parts = str(got[0].handle).split(" ")
    assert len(parts) == 8 and parts[4] == "0" and parts[5] == ctl.config.broker_name
    # everything acked: the revive service drops the checkpoints
    await until("all checkpoints acked", lambda: _async(ctl.pop.revive.inflight() == 0))


async def _async(v: T) -> T:
    return v


async def test_unacked_message_comes_back_from_retry_topic_with_reconsume_times(broker):
    ctl, d = broker
    await d.create_topic("RT", 2)
    await d.create_group("RG")
    await d.send("RT", 0, b"keep")
    await d.send("RT", 1, b"drop")
    dispatched(ctl)
    # long enough for the ack of "keep" to come first on a loaded machine
    first = await pop_all(d, "RG", "RT", 2, invisible_ms=2000)
    by_body = {m.body: m for m in first}
    assert (await d.ack(by_body[b"keep"])).code == ResponseCode.SUCCESS
    # "drop" is not acked: after 300 ms it is re-put to %RETRY%RG_RT and popped again
    back = await pop_all(d, "RG", "RT", 1, invisible_ms=300)
    assert [m.body for m in back] == [b"drop"]
    m = back[0]
    assert m.reconsume_times == 1 and m.topic == "RT"
    assert m.handle.retry == "1" and m.real_topic == "%RETRY%RG_RT"
    assert "POP_CK" in m.properties and ExtraInfo.parse(m.properties["POP_CK"]) == m.handle
    assert "1ST_POP_TIME" in m.properties and m.properties["ORIGIN_GROUP"] == "RG"
    # not acked again: it comes back once more, reconsume times 2
    back2 = await pop_all(d, "RG", "RT", 1, invisible_ms=60_000)
    assert [(x.body, x.reconsume_times) for x in back2] == [(b"drop", 2)]
    assert (await d.ack(back2[0])).code == ResponseCode.SUCCESS
    await until("checkpoints settled", lambda: _async(ctl.pop.revive.inflight() == 0))
    assert (await d.pop("RG", "RT")).code == POLLING_TIMEOUT


async def test_dead_letter_after_retry_max_times(broker):
    _ctl, d = broker
    await d.create_topic("DT", 1)
    await d.create_group("DG", retryMaxTimes=2)
    await d.send("DT", 0, b"poison")
    seen = []
    for _ in range(3):  # delivered at reconsume times 0, 1, 2, never acked
        got = await pop_all(d, "DG", "DT", 1, invisible_ms=200)
        seen.append(got[0].reconsume_times)
    assert seen == [0, 1, 2]

    async def in_dlq() -> list:
        f = {"consumerGroup": "X", "topic": "%DLQ%DG", "queueId": "0", "queueOffset": "0"}
        f.update({"maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "subscription": "*"})
        f.update({"suspendTimeoutMillis": "0", "subVersion": "0"})
        r = await d.call(create_request(RequestCode.PULL_MESSAGE, f))
        return decode_records(r.body) if r.code == ResponseCode.SUCCESS else []

    recs = await until("the message in %DLQ%DG", in_dlq)
    assert [(r[12], r[10]) for r in recs] == [(b"poison", 3)]
    assert (await d.pop("DG", "DT")).code == POLLING_TIMEOUT


async def test_change_invisible_time(broker):
    ctl, d = broker
    await d.create_topic("CT", 1)
    await d.create_group("CG")
    await d.send("CT", 0, b"slow")
    await d.send("CT", 0, b"soon")
    got = await pop_all(d, "CG", "CT", 2, invisible_ms=60_000)
    slow, soon = sorted(got, key=lambda m: m.body != b"slow")
    old = soon.handle
    r = await d.change_invisible(soon, 200)
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert r.ext_fields["invisibleTime"] == "200" and r.ext_fields["reviveQid"] == str(old.revive_qid)
    assert soon.handle.ck_queue_offset == soon.queue_offset and soon.handle.pop_time >= old.pop_time
    back = await pop_all(d, "CG", "CT", 1, invisible_ms=60_000)
    assert [m.body for m in back] == [b"soon"] and back[0].reconsume_times == 1
    # the slow one stays invisible (60 s) and acks with its original handle
    assert (await d.ack(slow)).code == ResponseCode.SUCCESS
    assert (await d.ack(back[0])).code == ResponseCode.SUCCESS
    # a handle of a changed message: acking the new handle works as well
    await d.send("CT", 0, b"third")
    (t,) = await pop_all(d, "CG", "CT", 1, invisible_ms=60_000)
    assert (await d.change_invisible(t, 60_000)).code == ResponseCode.SUCCESS
    assert (await d.ack(t)).code == ResponseCode.SUCCESS
    await until("all acked", lambda: _async(ctl.pop.revive.inflight() == 0))


async def test_change_invisible_in_the_pop_millisecond(broker, monkeypatch):
    """A change in the same millisecond as the pop it changes: the new checkpoint (start offset = the
    message's, pop time = now) must not share its key with the old one, else the ack of the old one
    also acks the new one and the message is never revived."""
    from rmq.broker.pop import processors

    ctl, d = broker
    await d.create_topic("CM", 1)
    await d.create_group("CMG")
    await d.send("CM", 0, b"one")
    dispatched(ctl)
    frozen = processors.now_ms()
    monkeypatch.setattr(processors, "now_ms", lambda: frozen)
    (m,) = await pop_all(d, "CMG", "CM", 1, invisible_ms=60_000)
    assert m.handle.pop_time == frozen and m.handle.ck_queue_offset == m.queue_offset
    assert (await d.change_invisible(m, 200)).code == ResponseCode.SUCCESS
    assert m.handle.pop_time > frozen
    monkeypatch.undo()
    back = await pop_all(d, "CMG", "CM", 1, invisible_ms=60_000)
    assert [x.body for x in back] == [b"one"] and back[0].reconsume_times == 1


async def test_batch_ack(broker):
    ctl, d = broker
    await d.create_topic("BT", 2)
    await d.create_group("BG")
    for i in range(10):
        await d.send("BT", i % 2, b"b%d" % i)
    dispatched(ctl)
    got = await pop_all(d, "BG", "BT", 10, invisible_ms=2000)
    acked = [m for m in got if m.body != b"b3"]
    r = await d.batch_ack(acked)
    assert r.code == ResponseCode.SUCCESS, r.remark
    back = await pop_all(d, "BG", "BT", 1, invisible_ms=60_000)
    assert [m.body for m in back] == [b"b3"]
    r = await d.batch_ack(back)  # a retry-topic message (retry mark 1) in a batch ack
    assert r.code == ResponseCode.SUCCESS, r.remark
    await until("all acked", lambda: _async(ctl.pop.revive.inflight() == 0))
    # bad bodies are refused with a reason
    bad = await d.call(create_request(200151, {}, b"not json"))
    assert bad.code == 29 and "JSON" in (bad.remark or "")
    empty = await d.call(create_request(200151, {}, b'{"acks":[]}'))
    assert empty.code == ResponseCode.NO_MESSAGE


async def test_bad_requests_get_clear_answers(broker):
    _ctl, d = broker
    await d.create_topic("ET", 1)
    a = await d.pop("G", "NoSuchTopic")
    assert a.code == ResponseCode.TOPIC_NOT_EXIST
    a = await d.pop("G", "ET", max_msgs=33)
    assert a.code == 29 and "greater than 32" in (a.response.remark or "")
    a = await d.pop("G", "ET", queue_id=5)
    assert a.code == 29 and "queueId[5] is illegal" in (a.response.remark or "")
    f = {"consumerGroup": "G", "topic": "ET", "queueId": "0", "extraInfo": "1 2 x", "offset": "0"}
    await d.send("ET", 0, b"x")
    r = await d.call(create_request(200051, f))
    assert r.code == 29 and "extraInfo" in (r.remark or "")
    f["offset"] = "99"
    r = await d.call(create_request(200051, f))
    assert r.code == ResponseCode.NO_MESSAGE and "offset is illegal" in (r.remark or "")


async def test_orderly_pop_blocks_the_queue_until_acked(broker):
    ctl, d = broker
    await d.create_topic("OT", 1)
    # 5.x's FIFO flag of a group is kept for the proxy (the broker pops orderly when asked: order=true)
    await d.create_group("OG", consumeMessageOrderly=True)
    assert ctl.services.groups.table["OG"].to_dict()["consumeMessageOrderly"] is True
    for i in range(4):
        await d.send("OT", 0, b"o%d" % i)
    dispatched(ctl)
    a = await d.pop("OG", "OT", max_msgs=2, invisible_ms=2000, order=True)
    assert a.code == ResponseCode.SUCCESS
    assert [m.body for m in a.messages] == [b"o0", b"o1"]
    h = a.response.ext_fields
    assert h["reviveQid"] == str(ORDER_REVIVE_QUEUE) and h["orderCountInfo"] == "0 0 0"
    # the queue is blocked while the batch is in flight
    assert (await d.pop("OG", "OT", max_msgs=2, invisible_ms=2000, order=True)).code == POLLING_TIMEOUT
    # not acked: after the invisible time the same batch comes again, counted
    again = await pop_all(d, "OG", "OT", 2, max_msgs=2, invisible_ms=60_000, order=True)
    assert [m.body for m in again] == [b"o0", b"o1"]
    counts = again[0].handle  # the handle is the same form; counts are in orderCountInfo
    assert counts.revive_qid == ORDER_REVIVE_QUEUE
    for m in again:
        assert (await d.ack(m)).code == ResponseCode.SUCCESS
    nxt = await pop_all(d, "OG", "OT", 2, max_msgs=2, invisible_ms=60_000, order=True)
    assert [m.body for m in nxt] == [b"o2", b"o3"]
    assert ctl.services.offsets.query("OG", "OT", 0) == 2
    for m in nxt:
        assert (await d.ack(m)).code == ResponseCode.SUCCESS
    assert ctl.services.offsets.query("OG", "OT", 0) == 4


async def test_orderly_pop_counts_redeliveries(broker):
    ctl, d = broker
    await d.create_topic("OC", 1)
    await d.create_group("OCG")
    await d.send("OC", 0, b"x")
    dispatched(ctl)
    first = await d.pop("OCG", "OC", invisible_ms=200, order=True)
    assert first.response.ext_fields["orderCountInfo"] == "0 0 0"

    async def second() -> object:
        a = await d.pop("OCG", "OC", invisible_ms=60_000, order=True)
        return a if a.code == ResponseCode.SUCCESS else None

    a = await until("the batch popped again", second)
    assert a.response.ext_fields["orderCountInfo"] == "0 qo0%0 1;0 0 1"


async def test_long_polling_pop_wakes_on_a_new_message(broker):
    _ctl, d = broker
    await d.create_topic("LT", 2)
    await d.create_group("LG")
    waiting = asyncio.create_task(d.pop("LG", "LT", poll_ms=20_000, invisible_ms=60_000))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await d.send("LT", 1, b"wake")
    a = await asyncio.wait_for(waiting, 15)
    assert a.code == ResponseCode.SUCCESS and [m.body for m in a.messages] == [b"wake"]
    # with nothing arriving the pop is answered POLLING_TIMEOUT once its poll time is over
    t = await d.pop("LG", "LT", poll_ms=300)
    assert t.code == POLLING_TIMEOUT
    assert {"popTime", "invisibleTime", "reviveQid", "restNum"} <= set(t.response.ext_fields)


async def test_pop_and_pull_groups_coexist(broker):
    ctl, d = broker
    await d.create_topic("MT", 2)
    await d.create_group("POPG")
    for i in range(6):
        await d.send("MT", i % 2, b"x%d" % i)
    popped = await pop_all(d, "POPG", "MT", 6)
    for m in popped:
        assert (await d.ack(m)).code == ResponseCode.SUCCESS
    pulled = []
    for q in range(2):
        f = {"consumerGroup": "PULLG", "topic": "MT", "queueId": str(q), "queueOffset": "0"}
        f.update({"maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "subscription": "*"})
        f.update({"suspendTimeoutMillis": "0", "subVersion": "0"})
        r = await d.call(create_request(RequestCode.PULL_MESSAGE, f))
        assert r.code == ResponseCode.SUCCESS
        pulled += [rec[12] for rec in decode_records(r.body)]
    assert sorted(pulled) == sorted(m.body for m in popped)
    offs = ctl.services.offsets
    assert offs.offsets_of("POPG", "MT") == {0: 3, 1: 3} and offs.offsets_of("PULLG", "MT") == {}


async def test_tag_filter(broker):
    _ctl, d = broker
    await d.create_topic("FT", 1)
    await d.create_group("FG")
    for i in range(6):
        await d.send("FT", 0, b"f%d" % i, tags="A" if i % 2 else "B")
    got = await pop_all(d, "FG", "FT", 3, exp="A")
    assert sorted(m.body for m in got) == [b"f1", b"f3", b"f5"]
    assert all(m.properties["TAGS"] == "A" for m in got)


async def test_sync_flush_acks_answer_once_flushed(tmp_path):
    """With SYNC_FLUSH an ack (single, batch, the old handle of a changed invisible time) is answered once
    its revive record is flushed; the answers are the same."""
    cfg = BrokerConfig()
    cfg.update({"storePathRootDir": str(tmp_path), "listenPort": "0", "brokerIP1": "127.0.0.1"})
    cfg.update({"flushDiskType": "SYNC_FLUSH"})
    ctl = BrokerController(cfg)
    await ctl.start("127.0.0.1")
    d = PopDriver(cfg.broker_addr, cfg.broker_name)
    try:
        await d.create_topic("ST", 1)
        for i in range(3):
            await d.send("ST", 0, b"s%d" % i)
        got = await pop_all(d, "SG", "ST", 3)
        assert (await d.ack(got[0])).code == ResponseCode.SUCCESS
        assert (await d.batch_ack(got[1:2])).code == ResponseCode.SUCCESS
        r = await d.change_invisible(got[2], 60_000)
        assert r.code == ResponseCode.SUCCESS and r.ext_fields["invisibleTime"] == "60000"
        assert (await d.ack(got[2])).code == ResponseCode.SUCCESS
        assert ctl.store.flushed_offset() >= ctl.store.commitlog_max_offset()
        await until("all acked", lambda: _async(ctl.pop.revive.inflight() == 0))
    finally:
        await d.close()
        await ctl.shutdown()


async def test_held_orderly_pop_wakes_when_the_batch_becomes_visible_again(broker):
    ctl, d = broker
    await d.create_topic("OW", 1)
    await d.send("OW", 0, b"w")
    dispatched(ctl)
    first = await d.pop("OWG", "OW", invisible_ms=500, order=True)
    assert [m.body for m in first.messages] == [b"w"]
    # blocked now; held with a long poll time, it is answered with the batch again once it is visible,
    # though nothing new arrives
    asked = int(time.time() * 1000)
    again = await d.pop("OWG", "OW", invisible_ms=60_000, order=True, poll_ms=30_000)
    assert again.code == ResponseCode.SUCCESS and [m.body for m in again.messages] == [b"w"]
    # woken, not run again because its 30 s poll time ran out
    assert int(again.response.ext_fields["popTime"]) < asked + 30_000
    assert again.response.ext_fields["orderCountInfo"] == "0 qo0%0 1;0 0 1"


async def test_several_held_pops_share_what_arrives(broker):
    _ctl, d = broker
    await d.create_topic("LS", 1)
    waiting = [
        asyncio.create_task(d.pop("LSG", "LS", max_msgs=1, poll_ms=20_000, invisible_ms=60_000))
        for _ in range(3)
    ]
    await asyncio.sleep(0.3)
    for i in range(3):
        await d.send("LS", 0, b"s%d" % i)
    answers = await asyncio.wait_for(asyncio.gather(*waiting), 25)
    assert sorted(m.body for a in answers for m in a.messages) == [b"s0", b"s1", b"s2"]


def _pop_metrics(ctl: BrokerController) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The broker's Prometheus samples (what a scrape would show), by (name, labels)."""
    assert ctl.services is not None
    collector = BrokerCollector(ctl.services, ctl.remoting.dispatcher, {})
    return {
        (
            s.name,
            tuple(
                sorted((k, v) for k, v in s.labels.items() if k not in ("cluster", "node_type", "node_id"))
            ),
        ): s.value
        for fam in collector.collect()
        for s in fam.samples
    }


async def test_metrics_show_pop_groups_in_flight_and_the_revive_service(broker):
    """5.x's names: a POP group's popped, un-acked messages are in flight (and in its lag); the revive
    topic's records written and read, the re-puts to the retry topic, and how far the revive service is
    behind (records, ms) per revive queue."""
    ctl, d = broker
    await d.create_topic("MT", 1)
    await d.create_group("MG")
    for body in (b"a", b"b", b"c"):
        await d.send("MT", 0, body)
    dispatched(ctl)
    got = await pop_all(d, "MG", "MT", 3, invisible_ms=60_000)
    assert (await d.ack(got[0])).code == ResponseCode.SUCCESS
    labels = (("consumer_group", "MG"), ("is_retry", "false"), ("is_system", "false"), ("topic", "MT"))

    async def settled() -> dict | None:
        s = _pop_metrics(ctl)
        return s if s.get(("rocketmq_consumer_inflight_messages", labels)) == 2 else None

    samples = await until("2 of 3 in flight", settled)
    # brokerStatus (GET_BROKER_RUNTIME_INFO) shows the same, as rmq's own keys.
    info = await d.call(create_request(RequestCode.GET_BROKER_RUNTIME_INFO, {}))
    table = json.loads(bytes(info.body))["table"]
    assert table["popInflightMessages"] == "2"
    # consumerProgress (GET_CONSUME_STATS): the queue's in-flight count (rmq's own field); 5.x's pullOffset.
    stats = await d.call(
        create_request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "MG", "topic": "MT"})
    )
    progress = ConsumeStats()
    progress.merge_body(fastjson.loads(bytes(stats.body)))
    (row,) = progress.rows()
    assert (row.consumer_offset, row.pull_offset, row.inflight) == (3, 3, 2)
    assert int(table["popReviveBehindRecords"]) >= 0 and table["popReviveBehindMs"] == "0"
    assert samples[("rocketmq_consumer_lag_messages", labels)] == 2  # popped, not acked: not consumed
    assert samples[("rocketmq_consumer_ready_messages", labels)] == 0
    written = {k[1]: v for k, v in samples.items() if k[0] == "rocketmq_pop_revive_in_message_total"}
    assert (
        written[
            (
                ("consumer_group", "MG"),
                ("put_status", "PUT_OK"),
                ("revive_message_type", "CK"),
                ("topic", "MT"),
            )
        ]
        >= 1
    )
    assert (
        written[
            (
                ("consumer_group", "MG"),
                ("put_status", "PUT_OK"),
                ("revive_message_type", "ACK"),
                ("topic", "MT"),
            )
        ]
        == 1
    )
    read = sum(v for k, v in samples.items() if k[0] == "rocketmq_pop_revive_out_message_total")
    assert read >= 1
    lag_queues = [k for k in samples if k[0] == "rocketmq_pop_revive_lag"]
    assert len(lag_queues) == ctl.config.revive_queue_num
    # One left un-acked with a short invisible time comes back through the retry topic: counted.
    await d.send("MT", 0, b"late")
    dispatched(ctl)
    late = await pop_all(d, "MG", "MT", 1, invisible_ms=200)
    assert [m.body for m in late] == [b"late"]
    back = await pop_all(d, "MG", "MT", 1, invisible_ms=60_000)
    assert [m.body for m in back] == [b"late"]
    retried = _pop_metrics(ctl)[
        (
            "rocketmq_pop_revive_retry_messages_total",
            (("consumer_group", "MG"), ("put_status", "PUT_OK"), ("topic", "MT")),
        )
    ]
    assert retried == 1
