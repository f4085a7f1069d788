"""Delay levels, timer messages, retry/DLQ and transactions against a real broker process,
driven with raw requests (the client API has its own tests)."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import RemotingCommand, create_request
from rmq.store import decode_offset_msg_id, decode_records

from tests.brokerproc import start_broker

PROPS = (
    "messageDelayLevel=1s 2s 3s 1s 1s 1s",
    "transactionTimeOut=300",
    "transactionCheckInterval=300",
    "transactionCheckMax=3",
)


def props(**kv: str) -> str:
    return "\x02".join(f"{k}\x01{v}" for k, v in kv.items())


def parse_props(text: str) -> dict[str, str]:
    return dict(seg.split("\x01", 1) for seg in text.split("\x02") if "\x01" in seg)


async def send(
    client: RemotingClient, addr: str, topic: str, body: bytes, p: str, qid: int = 0
) -> RemotingCommand:
    f = {
        "a": "PG",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": str(qid),
        "f": "0",
        "g": str(int(time.time() * 1000)),
    }
    f.update({"h": "0", "i": p, "j": "0", "k": "false", "m": "false"})
    r = await client.invoke(addr, create_request(RequestCode.SEND_MESSAGE_V2, f, body), 5000)
    assert r.code == 0, r.remark
    return r


async def pull(
    client: RemotingClient, addr: str, topic: str, qid: int, offset: int, group: str = "CG"
) -> list:
    f = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": str(qid),
        "queueOffset": str(offset),
        "maxMsgNums": "32",
    }
    f.update(
        {
            "sysFlag": "4",
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": "*",
            "subVersion": "0",
        }
    )
    r = await client.invoke(addr, create_request(RequestCode.PULL_MESSAGE, f), 5000)
    return decode_records(r.body) if r.code == ResponseCode.SUCCESS else []


async def wait_for(client, addr, topic, qid, offset, timeout, group="CG") -> tuple[list, float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        recs = await pull(client, addr, topic, qid, offset, group)
        if recs:
            return recs, time.time()
        await asyncio.sleep(0.02)
    return [], time.time()


@pytest.fixture
async def broker(tmp_path):
    b = await asyncio.to_thread(start_broker, tmp_path / "store", *PROPS)
    client = RemotingClient()
    yield b, client
    await client.close()
    b.stop()


async def test_delay_level_arrives_on_time_and_survives_restart(broker, tmp_path):
    b, client = broker
    sent = time.time()
    await send(client, b.broker_addr, "Delayed", b"level-2", props(DELAY="2"), qid=1)
    assert await pull(client, b.broker_addr, "Delayed", 1, 0) == []
    recs, at = await wait_for(client, b.broker_addr, "Delayed", 1, 0, 6)
    assert [r[12] for r in recs] == [b"level-2"]
    assert 2.0 <= at - sent <= 3.2, at - sent
    p = parse_props(recs[0][13])
    assert (p["REAL_TOPIC"], p["REAL_QID"], p["DELAY"]) == ("Delayed", "1", "2")

    # A restart while a level-3 message waits: delivered once, on time.
    sent = time.time()
    await send(client, b.broker_addr, "Delayed", b"level-3", props(DELAY="3"), qid=1)
    await client.close()
    b.stop()
    b2 = await asyncio.to_thread(start_broker, tmp_path / "store", *PROPS)
    up = time.time()
    client2 = RemotingClient()
    try:
        recs, at = await wait_for(client2, b2.broker_addr, "Delayed", 1, 1, 8)
        assert [r[12] for r in recs] == [b"level-3"]
        # Due 3 s after the send, or at once if the restart itself took longer (a loaded machine).
        assert 3.0 <= at - sent <= max(3.0, up - sent) + 1.2, (at - sent, up - sent)
        await asyncio.sleep(1.5)
        assert len(await pull(client2, b2.broker_addr, "Delayed", 1, 0)) == 2, "no duplicate delivery"
    finally:
        await client2.close()
        b2.stop()


async def test_timer_messages_in_any_order(broker):
    b, client = broker
    sent = time.time()
    now_ms = int(sent * 1000)
    await send(client, b.broker_addr, "Timed", b"late", props(TIMER_DELIVER_MS=str(now_ms + 2000)))
    await send(client, b.broker_addr, "Timed", b"early", props(TIMER_DELAY_MS="1000"))
    recs, at = await wait_for(client, b.broker_addr, "Timed", 0, 0, 5)
    assert [r[12] for r in recs] == [b"early"] and 1.0 <= at - sent <= 2.0
    recs, at = await wait_for(client, b.broker_addr, "Timed", 0, 1, 5)
    assert [r[12] for r in recs] == [b"late"] and 2.0 <= at - sent <= 3.0
    f = {"a": "PG", "b": "Timed", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0"}
    f["i"] = props(TIMER_DELAY_SEC=str(10 * 86400))
    r = await client.invoke(b.broker_addr, create_request(RequestCode.SEND_MESSAGE_V2, f, b"x"), 5000)
    assert r.code == ResponseCode.MESSAGE_ILLEGAL and "timerMaxDelaySec" in r.remark


async def test_send_back_retries_then_dead_letters(broker):
    b, client = broker
    await send(client, b.broker_addr, "Work", b"job", props(UNIQ_KEY="U1", KEYS="k"))
    offset = (await wait_for(client, b.broker_addr, "Work", 0, 0, 5))[0][0][3]
    seen = []
    topic, qoff = "Work", 0
    for attempt in range(3):
        back = {
            "offset": str(offset),
            "group": "CG",
            "delayLevel": "0",
            "originMsgId": "U1",
            "maxReconsumeTimes": "2",
        }
        r = await client.invoke(b.broker_addr, create_request(RequestCode.CONSUMER_SEND_MSG_BACK, back), 5000)
        assert r.code == 0, r.remark
        if attempt < 2:
            topic = "%RETRY%CG"
            recs, _ = await wait_for(client, b.broker_addr, topic, 0, attempt, 8)
        else:
            topic = "%DLQ%CG"
            recs, _ = await wait_for(client, b.broker_addr, topic, 0, 0, 8)
        assert len(recs) == 1
        rec = recs[0]
        p = parse_props(rec[13])
        seen.append((rec[0], rec[10], p.get("RETRY_TOPIC"), p.get("ORIGIN_MESSAGE_ID")))
        offset = rec[3]
        qoff = rec[2]
    assert seen == [
        ("%RETRY%CG", 1, "Work", "U1"),
        ("%RETRY%CG", 2, "Work", "U1"),
        ("%DLQ%CG", 3, "Work", "U1"),
    ]
    assert qoff == 0
    missing = {"offset": "12345678", "group": "CG", "delayLevel": "0"}
    r = await client.invoke(b.broker_addr, create_request(RequestCode.CONSUMER_SEND_MSG_BACK, missing), 5000)
    assert r.code == ResponseCode.SYSTEM_ERROR


async def test_transactions_commit_rollback_and_check(broker):
    b, client = broker
    addr = b.broker_addr
    decisions: dict[str, int] = {}
    checks: list[str] = []

    def on_check(ctx, request: RemotingCommand) -> None:
        h = request.ext_fields
        uniq = h["msgId"]
        checks.append(uniq)
        rec = decode_records(request.body)[0]
        assert rec[0] == "Tx"  # the body carries the real topic
        end = {
            "producerGroup": "TG",
            "tranStateTableOffset": h["tranStateTableOffset"],
            "commitLogOffset": h["commitLogOffset"],
            "commitOrRollback": str(decisions[uniq]),
            "fromTransactionCheck": "true",
            "msgId": uniq,
        }
        asyncio.get_running_loop().create_task(
            client.invoke_oneway(addr, create_request(RequestCode.END_TRANSACTION, end, oneway=True))
        )
        return None

    client.register(RequestCode.CHECK_TRANSACTION_STATE, on_check)
    hb = {"clientID": "127.0.0.1@tx", "producerDataSet": [{"groupName": "TG"}]}
    assert (
        await client.invoke(addr, create_request(RequestCode.HEART_BEAT, {}, orjson.dumps(hb)), 5000)
    ).code == 0

    async def half(name: str) -> RemotingCommand:
        return await send(
            client, addr, "Tx", name.encode(), props(TRAN_MSG="true", PGROUP="TG", UNIQ_KEY=name)
        )

    async def end(r: RemotingCommand, uniq: str, kind: int) -> None:
        end = {
            "producerGroup": "TG",
            "tranStateTableOffset": r.ext_fields["queueOffset"],
            "commitLogOffset": str(decode_offset_msg_id(r.ext_fields["msgId"])[1]),
            "commitOrRollback": str(kind),
            "msgId": uniq,
        }
        await client.invoke_oneway(addr, create_request(RequestCode.END_TRANSACTION, end, oneway=True))

    committed = await half("commit-me")
    rolled = await half("roll-me")
    await half("check-commit")
    await half("check-rollback")
    decisions.update({"check-commit": 8, "check-rollback": 12})
    halves, _ = await wait_for(client, addr, "RMQ_SYS_TRANS_HALF_TOPIC", 0, 3, 5)
    assert len(halves) == 1, "the four half messages are stored (in the half topic)"
    assert await pull(client, addr, "Tx", 0, 0) == [], "half messages are invisible"
    await end(committed, "commit-me", 8)
    await end(rolled, "roll-me", 12)
    recs, _ = await wait_for(client, addr, "Tx", 0, 0, 5)
    assert [r[12] for r in recs] == [b"commit-me"]
    assert recs[0][4] & 0xC == 0x8, "stored as COMMIT_TYPE"
    # As RocketMQ 5.x's broker: the half message, so the committed one, names its transaction (its UNIQ_KEY).
    assert "__transactionId__\x01commit-me\x02" in recs[0][13] + "\x02"
    # The two undecided ones are checked back and decided by the producer.
    deadline = time.monotonic() + 10
    got: list = []
    while time.monotonic() < deadline and len(got) < 2:
        got = await pull(client, addr, "Tx", 0, 0)
        await asyncio.sleep(0.1)
    assert sorted(r[12] for r in got) == [b"check-commit", b"commit-me"]
    assert "check-commit" in checks and "check-rollback" in checks
    assert "commit-me" not in checks and "roll-me" not in checks
    await asyncio.sleep(1.0)
    assert len(await pull(client, addr, "Tx", 0, 0)) == 2, "nothing delivered twice, rollback never"
