"""POP state survives kill -9 of the broker: a real broker process is killed with a mix of acked,
un-acked, never-popped, orderly-acked and invisible-time-changed messages, restarted on the same store,
and a POP consumer then gets back exactly the messages not acked — none that was acked, none lost."""

from __future__ import annotations

import asyncio
import random
import time

from rmq.common.codes import ResponseCode
from rmq.remoting.errors import RemotingError

from tests.broker.popdriver import PopDriver, PopMsg
from tests.brokerproc import start_broker

TOPIC = "KillPop"
GROUP = "KPG"
ORDER_TOPIC = "KillPopOrder"
ORDER_GROUP = "KPOG"
PROPS = ("flushConsumerOffsetInterval=3600000",)


async def pop_until(d: PopDriver, want: set[bytes], deadline_s: float, **kw: object) -> list[PopMsg]:
    """Pop (acking everything) until every body of ``want`` came or the deadline passed."""
    got: list[PopMsg] = []
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and not want <= {m.body for m in got}:
        a = await d.pop(GROUP, TOPIC, poll_ms=500, **kw)  # type: ignore[arg-type]
        for m in a.messages:
            got.append(m)
            assert (await d.ack(m)).code == ResponseCode.SUCCESS
    return got


async def test_pop_state_survives_kill_9(tmp_path):
    store = tmp_path / "store"
    # No periodic offset flush: at the kill, consumerOffset.json is older than the pops below, so the
    # restart must find their pop offsets in the revive topic.
    b = await asyncio.to_thread(start_broker, store, *PROPS)
    try:
        d = PopDriver(b.broker_addr)
        await d.create_topic(TOPIC, 4)
        await d.create_group(GROUP)
        await d.create_topic(ORDER_TOPIC, 1)
        await d.create_group(ORDER_GROUP)
        # orderly: 3 messages, the first two acked (an orderly ack writes the offsets to disk)
        for i in range(3):
            await d.send(ORDER_TOPIC, 0, b"o%d" % i)
        await d.wait_dispatched(ORDER_TOPIC, 0, 3)
        opopped: list[PopMsg] = []
        end = time.monotonic() + 30
        while len(opopped) < 3 and time.monotonic() < end:
            opopped += (await d.pop(ORDER_GROUP, ORDER_TOPIC, invisible_ms=3000, order=True)).messages
        assert [m.body for m in opopped] == [b"o0", b"o1", b"o2"]
        for m in opopped[:2]:
            assert (await d.ack(m)).code == ResponseCode.SUCCESS
        bodies = [b"k%03d" % i for i in range(60)]
        for i, body in enumerate(bodies[:40]):
            await d.send(TOPIC, i % 4, body)
        popped: list[PopMsg] = []
        end = time.monotonic() + 30
        while len(popped) < 40 and time.monotonic() < end:
            popped += (await d.pop(GROUP, TOPIC, max_msgs=8, invisible_ms=8000)).messages
        assert len(popped) == 40
        acked = {m.body for m in popped[::2]}  # every other one acked, half by batch ack
        single, batch = popped[0:20:2], popped[20::2]
        for m in single:
            assert (await d.ack(m)).code == ResponseCode.SUCCESS
        assert (await d.batch_ack(batch)).code == ResponseCode.SUCCESS
        # one un-acked message gets a longer invisible time (a new checkpoint, the old one acked)
        changed = popped[1]
        assert (await d.change_invisible(changed, 10_000)).code == ResponseCode.SUCCESS
        # 20 more sent and never popped before the kill
        for i, body in enumerate(bodies[40:]):
            await d.send(TOPIC, i % 4, body)
        await d.close()
    finally:
        b.kill()  # SIGKILL: nothing persisted on the way out

    b = await asyncio.to_thread(start_broker, store, *PROPS)
    try:
        replay = [line for line in b.log if "POP: replayed" in line]
        assert replay and "checkpoints pending" in replay[0], b.log[-20:]
        moved = int(replay[0].split(" pop offsets moved")[0].rsplit(" ", 1)[1])
        assert moved > 0, replay[0]
        d = PopDriver(b.broker_addr)
        want = set(bodies) - acked
        # un-acked ones come back after their invisible time; the 20 never popped are popped now
        got = await pop_until(d, want, 60, invisible_ms=60_000)
        bodies_got = [m.body for m in got]
        assert want <= set(bodies_got), f"lost: {sorted(want - set(bodies_got))}"
        assert not acked & set(bodies_got), f"acked ones came back: {sorted(acked & set(bodies_got))}"
        # Past every revive time (all were popped with 8 s, the changed one 10 s, before the kill): a last
        # long poll brings nothing more, in particular no acked message.
        more = await pop_until(d, {b"never"}, 6, invisible_ms=60_000)
        assert not more, [m.body for m in more]
        assert len(bodies_got) == len(set(bodies_got)), "a message came back twice"
        back = {m.body: m.reconsume_times for m in got}
        assert all(back[x] == 0 for x in bodies[40:]) and back[changed.body] == 1
        # orderly: o0 and o1 were acked, o2 comes back (after its invisible time), counted once
        end = time.monotonic() + 30
        oback: list[PopMsg] = []
        while not oback and time.monotonic() < end:
            a = await d.pop(ORDER_GROUP, ORDER_TOPIC, invisible_ms=60_000, order=True, poll_ms=500)
            oback = a.messages
        assert [m.body for m in oback] == [b"o2"]
        await d.close()
    finally:
        b.stop()


async def consume(
    d: PopDriver, stop: asyncio.Event, rng: random.Random, acked: set[bytes], cycle: int
) -> None:
    """Pop and ack two thirds of what comes until ``stop`` or the broker is gone; ``acked`` gets the
    bodies whose ack was answered SUCCESS, and none of them may be popped again."""
    while not stop.is_set():
        try:
            a = await d.pop(GROUP, TOPIC, max_msgs=4, invisible_ms=5000)
        except (RemotingError, OSError):
            return
        for m in a.messages:
            assert m.body not in acked, f"cycle {cycle}: acked {m.body!r} came back"
            if rng.random() < 2 / 3:
                try:
                    r = await d.ack(m)
                except (RemotingError, OSError):
                    return
                if r.code == ResponseCode.SUCCESS:
                    acked.add(m.body)


async def test_pop_kill_9_cycles_with_consumers_running(tmp_path):
    """Three cycles of: send, pop and ack (two thirds of what is popped) while the broker is killed
    mid-flight. Afterwards every message sent is popped again until acked, and no message whose ack was
    answered SUCCESS ever comes back."""
    store = tmp_path / "store"
    rng = random.Random(30)
    acked: set[bytes] = set()
    sent: list[bytes] = []
    for cycle in range(3):
        b = await asyncio.to_thread(start_broker, store, *PROPS)
        d = PopDriver(b.broker_addr)
        try:
            if cycle == 0:
                await d.create_topic(TOPIC, 4)
                await d.create_group(GROUP)
            for i in range(30):
                body = b"c%d-%03d" % (cycle, i)
                await d.send(TOPIC, i % 4, body)
                sent.append(body)
            stop = asyncio.Event()

            task = asyncio.create_task(consume(d, stop, rng, acked, cycle))
            await asyncio.sleep(rng.uniform(0.5, 1.5))
            b.kill()
            stop.set()
            await task
        finally:
            b.kill()
            await d.close()

    b = await asyncio.to_thread(start_broker, store, *PROPS)
    try:
        d = PopDriver(b.broker_addr)
        want = set(sent) - acked
        got = await pop_until(d, want, 90, invisible_ms=60_000)
        bodies = {m.body for m in got}
        assert want <= bodies, f"lost: {sorted(want - bodies)}"
        assert not acked & bodies, f"acked ones came back: {sorted(acked & bodies)}"
        more = await pop_until(d, {b"never"}, 7, invisible_ms=60_000)  # every revive time has passed
        assert not {m.body for m in more} & acked
        assert len(acked) > 20, "the consumers acked too little for the test to mean much"
        await d.close()
    finally:
        b.stop()
