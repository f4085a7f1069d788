"""END_TRANSACTION costs the same whatever the history (issue 31 item 2): a broker process driven with raw
requests (half message, then END_TRANSACTION), its work counted by what it reports
(GET_BROKER_RUNTIME_INFO ``transaction*``: op records decoded, decided offsets kept) and by its CPU time
from /proc, never by the clock; and what it decided survives a restart and a kill."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import RemotingCommand, create_request
from rmq.store import decode_offset_msg_id, decode_records

from tests.brokerproc import BrokerProcess, start_broker
from tests.integration.semantics_helpers import restart

TOPIC = "TxCost"
GROUP = "TxCostGroup"
COMMIT, ROLLBACK = 8, 12
# No check-back during these tests: every transaction is decided by its own second phase.
PROPS = ("transactionCheckInterval=600000", "transactionTimeOut=600000")


def props(**kv: str) -> str:
    return "\x02".join(f"{k}\x01{v}" for k, v in kv.items())


async def send_half(client: RemotingClient, addr: str, name: str) -> RemotingCommand:
    f = {
        "a": GROUP,
        "b": TOPIC,
        "c": "TBW102",
        "d": "1",
        "e": "0",
        "f": "4",  # TRANSACTION_PREPARED_TYPE, as the Java client sets it
        "g": str(int(time.time() * 1000)),
        "h": "0",
        "i": props(TRAN_MSG="true", PGROUP=GROUP, UNIQ_KEY=name),
        "j": "0",
        "k": "false",
        "m": "false",
    }
    r = await client.invoke(addr, create_request(RequestCode.SEND_MESSAGE_V2, f, name.encode()), 10_000)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return r


def end_request(half: RemotingCommand, name: str, kind: int) -> RemotingCommand:
    fields = {
        "producerGroup": GROUP,
        "tranStateTableOffset": half.ext_fields["queueOffset"],
        "commitLogOffset": str(decode_offset_msg_id(half.ext_fields["msgId"])[1]),
        "commitOrRollback": str(kind),
        "fromTransactionCheck": "false",
        "msgId": name,
    }
    return create_request(RequestCode.END_TRANSACTION, fields)


async def end(client: RemotingClient, addr: str, half: RemotingCommand, name: str, kind: int) -> None:
    r = await client.invoke(addr, end_request(half, name, kind), 10_000)
    assert r.code == ResponseCode.SUCCESS, r.remark


def kind_of(i: int) -> int:
    return ROLLBACK if i % 10 == 9 else COMMIT


async def transactions(client: RemotingClient, addr: str, first: int, n: int, concurrency: int) -> None:
    """Transactions ``first`` .. ``first + n - 1``: half message, then its decision (every tenth rolled
    back), ``concurrency`` at a time."""
    todo = iter(range(first, first + n))

    async def worker() -> None:
        for i in todo:
            name = f"tx-{i}"
            half = await send_half(client, addr, name)
            await end(client, addr, half, name, kind_of(i))

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def runtime_info(client: RemotingClient, addr: str) -> dict[str, str]:
    r = await client.invoke(addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO), 5000)
    assert r.code == 0, r.remark
    return orjson.loads(r.body)["table"]


def tx_stats(info: dict[str, str]) -> dict[str, int]:
    keys = ("transactionHalfOffset", "transactionDecidedAhead", "transactionOpRecordsRead")
    return {k.removeprefix("transaction"): int(info[k]) for k in keys}


def fast_decisions(info: dict[str, str]) -> int:
    """END_TRANSACTIONs the network thread decided (0 without one)."""
    return int(info.get("transactionFastCommits", 0)) + int(info.get("transactionFastRollbacks", 0))


async def settled(client: RemotingClient, addr: str, half_offset: int) -> dict[str, str]:
    """The runtime info once the half floor is ``half_offset``: the network thread's decisions reach the
    floor when their op records are read, once a second (the Python path's at once); bounded, 10 s."""
    deadline = time.monotonic() + 10
    info = await runtime_info(client, addr)
    while int(info["transactionHalfOffset"]) != half_offset and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        info = await runtime_info(client, addr)
    return info


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def max_offset(client: RemotingClient, addr: str, topic: str) -> int:
    fields = {"topic": topic, "queueId": "0"}
    r = await client.invoke(addr, create_request(RequestCode.GET_MAX_OFFSET, fields), 5000)
    assert r.code == 0, r.remark
    return int(r.ext_fields["offset"])


async def pulled_bodies(client: RemotingClient, addr: str, topic: str) -> list[bytes]:
    """Every message of ``topic`` queue 0, in order."""
    out: list[bytes] = []
    offset = 0
    while True:
        f = {
            "consumerGroup": "TxCostReader",
            "topic": topic,
            "queueId": "0",
            "queueOffset": str(offset),
            "maxMsgNums": "32",
            "sysFlag": "4",  # the subscription is in the request
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": "*",
            "subVersion": "0",
        }
        r = await client.invoke(addr, create_request(RequestCode.PULL_MESSAGE, f), 5000)
        if r.code != ResponseCode.SUCCESS:
            return out
        out += [rec[12] for rec in decode_records(r.body)]
        offset = int(r.ext_fields["nextBeginOffset"])


async def wait_max_offset(client: RemotingClient, addr: str, topic: str, want: int) -> int:
    """The topic's queue 0 max offset once it reaches ``want`` (dispatch runs behind the answers)."""
    deadline = time.monotonic() + 30
    got = await max_offset(client, addr, topic)
    while got < want and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        got = await max_offset(client, addr, topic)
    return got


@pytest.fixture(params=["networkThread=true", "networkThread=false"], ids=["network-thread", "asyncio"])
async def broker(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[list[BrokerProcess]]:
    """A one-element list, so a test can put the restarted broker in it for the teardown: the network
    thread's broker (END_TRANSACTION decided there) and the asyncio one (all in Python)."""
    b = await asyncio.to_thread(start_broker, tmp_path / "store", *PROPS, request.param)
    holder = [b]
    try:
        yield holder
    finally:
        holder[0].stop()


async def test_fifty_thousand_transactions_cost_the_same_each(broker: list[BrokerProcess]) -> None:
    b = broker[0]
    addr = b.broker_addr
    total, block, concurrency = 50_000, 5_000, 32
    client = RemotingClient()
    rows: list[tuple[float, dict[str, int]]] = []
    try:
        for first in range(0, total, block):
            before = cpu_seconds(b.proc.pid)
            await transactions(client, addr, first, block, concurrency)
            cpu = cpu_seconds(b.proc.pid) - before
            info = await settled(client, addr, first + block)
            stats = tx_stats(info)
            rows.append((cpu, stats))
            # Each block's transactions are all decided by its end: none is kept above the floor. The
            # network thread decides all but the first few (the Python path decides those in flight before
            # its first made the op topic); the op records it appends are read once each by the Python side
            # (with the few of its own appended among them, read again).
            fast, done = fast_decisions(info), first + block
            if "transactionFastCommits" in info:
                assert done - concurrency <= fast < done, info
            else:
                assert fast == 0
            assert stats["HalfOffset"] == done and stats["DecidedAhead"] == 0, stats
            assert fast <= stats["OpRecordsRead"] <= done, stats
        committed = sum(1 for i in range(total) if kind_of(i) == COMMIT)
        assert await wait_max_offset(client, addr, TOPIC, committed) == committed
        await asyncio.sleep(0.5)
        assert await max_offset(client, addr, TOPIC) == committed, "committed once each"
    finally:
        await client.close()
    first_cpu, last_cpu = rows[0][0], rows[-1][0]
    per_block = ", ".join(f"{cpu:.2f}" for cpu, _ in rows)
    # The old broker decoded the whole op topic at every END_TRANSACTION: its last block cost ~10x the
    # first's (and more, the longer it lived). A generous margin for the noise of CPU accounting.
    assert last_cpu <= first_cpu * 1.5 + 0.2, f"broker CPU s per block of {block}: {per_block}"
    # A clean stop persists where a restart takes up: the half and op queues' consumed offsets.
    assert b.stop() == 0
    table = json.loads((b.store_dir / "config" / "consumerOffset.json").read_text())["offsetTable"]
    assert table["RMQ_SYS_TRANS_HALF_TOPIC@CID_RMQ_SYS_TRANS"] == {"0": total}
    assert table["RMQ_SYS_TRANS_OP_HALF_TOPIC@CID_RMQ_SYS_TRANS"] == {"0": total}


async def test_decisions_survive_restart_and_kill_read_once(broker: list[BrokerProcess]) -> None:
    """Halves 0..199 decided, 200..249 open, 250..299 decided: a restart reads the 50 op records above the
    open ones only; every late or replayed second phase is ignored; the open ones are decided once."""
    b = broker[0]
    client = RemotingClient()
    try:
        halves = [await send_half(client, b.broker_addr, f"tx-{i}") for i in range(300)]
        decided = [i for i in range(300) if not 200 <= i < 250]
        for i in decided:
            await end(client, b.broker_addr, halves[i], f"tx-{i}", kind_of(i))
        info = await settled(client, b.broker_addr, 200)
        stats = tx_stats(info)
        # The network thread's decisions (all but the first) are read once each from their op records.
        fast = fast_decisions(info)
        assert fast == (249 if "transactionFastCommits" in info else 0), info
        assert stats == {"HalfOffset": 200, "DecidedAhead": 50, "OpRecordsRead": fast}, stats

        await client.close()
        broker[0] = b = await restart(b, *PROPS)
        client = RemotingClient()
        stats = tx_stats(await runtime_info(client, b.broker_addr))
        assert stats == {"HalfOffset": 200, "DecidedAhead": 50, "OpRecordsRead": 50}, stats

        # A late second phase of a decided transaction, even one saying the opposite, changes nothing.
        for i in decided:
            await end(client, b.broker_addr, halves[i], f"tx-{i}", COMMIT)
        want = [f"tx-{i}".encode() for i in decided if kind_of(i) == COMMIT]
        n = len(want)
        assert await wait_max_offset(client, b.broker_addr, TOPIC, n) == n
        # The open ones are still open: decided now, once.
        for i in range(200, 250):
            await end(client, b.broker_addr, halves[i], f"tx-{i}", kind_of(i))
        info = await settled(client, b.broker_addr, 300)
        stats = tx_stats(info)
        fast = fast_decisions(info)
        assert fast == (49 if "transactionFastCommits" in info else 0), info
        assert stats == {"HalfOffset": 300, "DecidedAhead": 0, "OpRecordsRead": 50 + fast}, stats
        want += [f"tx-{i}".encode() for i in range(200, 250) if kind_of(i) == COMMIT]
        assert await wait_max_offset(client, b.broker_addr, TOPIC, len(want)) == len(want)

        # Killed before its offsets were persisted: the restart reads more op records, decides the same.
        await client.close()
        broker[0] = b = await restart(b, *PROPS, kill=True)
        client = RemotingClient()
        stats = tx_stats(await runtime_info(client, b.broker_addr))
        assert stats["HalfOffset"] == 300 and stats["DecidedAhead"] == 0, stats
        for i in range(300):
            await end(client, b.broker_addr, halves[i], f"tx-{i}", COMMIT)
        await asyncio.sleep(0.5)
        assert sorted(await pulled_bodies(client, b.broker_addr, TOPIC)) == sorted(want), (
            "each committed transaction delivered once, no rolled back one"
        )
    finally:
        await client.close()


async def test_an_open_transaction_is_checked_early_while_decisions_pile_up(tmp_path: Path) -> None:
    """With a check interval of 10 minutes, an open half message holds the floor; once it is older than
    transactionTimeOut (1 s here) the next decisions have the check run at once: it re-appends the open
    one and the floor moves past it, so the decided set does not grow until the interval ends."""
    b = await asyncio.to_thread(
        start_broker, tmp_path / "store", "transactionCheckInterval=600000", "transactionTimeOut=1000"
    )
    client = RemotingClient()
    try:
        await send_half(client, b.broker_addr, "left-open")
        first, moved = 0, False
        deadline = time.monotonic() + 30
        while not moved and time.monotonic() < deadline:
            await transactions(client, b.broker_addr, first, 200, 8)
            first += 200
            stats = tx_stats(await runtime_info(client, b.broker_addr))
            moved = stats["HalfOffset"] > 0
        assert moved, f"the floor stayed on the open half message: {stats}"
        # The open one was re-appended (no producer to ask: logged); everything before it is settled.
        assert stats["DecidedAhead"] < first, stats
    finally:
        await client.close()
        b.stop()
    assert any("no live producer of group TxCostGroup" in line for line in b.log), "".join(b.log[-20:])
