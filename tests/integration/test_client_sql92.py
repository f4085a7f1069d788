"""SQL92 subscriptions (``MessageSelector.by_sql``) of rmq's push and lite pull consumers against
``python -m rmq.broker`` with ``enablePropertyFilter=true``: exactly the matching messages arrive, and a
malformed expression fails ``start()`` with the broker's reason."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from rmq.client import (
    ConsumeFromWhere,
    LitePullConsumer,
    Message,
    MessageSelector,
    Producer,
    PushConsumer,
)
from rmq.client.errors import SubscriptionParseFailedError

from tests.brokerproc import BrokerProcess, start_broker
from tests.integration.semantics_helpers import Collector, config, push_consumer, unique

SQL = "a > 5 AND b = 'x'"
# (a, b) user properties; None = absent.
CASES: list[tuple[str | None, str | None]] = [
    ("6", "x"),
    ("10", "x"),
    ("1000", "x"),
    ("5", "x"),
    ("3", "x"),
    ("-7", "x"),
    ("6", "y"),
    ("6", "X"),
    ("7", None),
    (None, "x"),
    ("abc", "x"),
    (None, None),
]


def matches(a: str | None, b: str | None) -> bool:
    return a is not None and a.lstrip("-").isdigit() and int(a) > 5 and b == "x"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = start_broker(tmp_path_factory.mktemp("sql92") / "store", "enablePropertyFilter=true")
    yield b
    b.stop()


async def send_cases(producer: Producer, topic: str, round_: int) -> set[bytes]:
    """Every case once; returns the bodies that match :data:`SQL`."""
    expected = set()
    for i, (a, b) in enumerate(CASES):
        body = f"r{round_}-{i}-a={a}-b={b}".encode()
        msg = Message(topic, body, tags="T")
        if a is not None:
            msg.put_user_property("a", a)
        if b is not None:
            msg.put_user_property("b", b)
        await producer.send(msg)
        if matches(a, b):
            expected.add(body)
    return expected


async def test_push_and_lite_pull_get_exactly_the_matching_messages(broker: BrokerProcess) -> None:
    topic, group = unique("SQ"), unique("pg")
    async with Producer(group, client_config=config(broker, group)) as producer:
        expected = await send_cases(producer, topic, 0)  # stored before the consumers start
        collector = Collector()
        push = await push_consumer(broker, unique("cg"), topic, collector, MessageSelector.by_sql(SQL))
        lite_group = unique("lg")
        lite = LitePullConsumer(
            lite_group,
            client_config=config(broker, lite_group),
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        lite.subscribe(topic, MessageSelector.by_sql(SQL))
        await lite.start()
        polled: list[bytes] = []
        try:
            expected |= await send_cases(producer, topic, 1)  # arriving while they wait
            assert len(expected) == 6
            await collector.wait_for(len(expected), 20)
            deadline = time.monotonic() + 20
            while len(polled) < len(expected) and time.monotonic() < deadline:
                polled += [m.body for m in await lite.poll(300)]
            await asyncio.sleep(1.0)  # anything else would come now
            polled += [m.body for m in await lite.poll(300)]
        finally:
            await lite.shutdown()
            await push.shutdown()
    assert sorted(m.body for m in collector.msgs) == sorted(expected)
    assert sorted(polled) == sorted(expected)
    for m in collector.msgs:
        assert int(m.get_user_property("a") or 0) > 5 and m.get_user_property("b") == "x"


@pytest.mark.parametrize("kind", ["push", "lite_pull"])
async def test_malformed_expression_fails_start(broker: BrokerProcess, kind: str) -> None:
    topic, group = unique("SQ"), unique("pg")
    async with Producer(group, client_config=config(broker, group)) as producer:
        await producer.send(Message(topic, b"route"))  # the check goes to a broker of the topic
    cg = unique("cg")
    consumer: PushConsumer | LitePullConsumer
    if kind == "push":
        consumer = PushConsumer(cg, client_config=config(broker, cg))
        consumer.register_message_listener(Collector())
    else:
        consumer = LitePullConsumer(cg, client_config=config(broker, cg))
    consumer.subscribe(topic, MessageSelector.by_sql("a > 5 AND"))
    with pytest.raises(
        SubscriptionParseFailedError, match=r"SQL92 subscription of topic \S+ rejected"
    ) as info:
        await consumer.start()
    assert "malformed" in str(info.value) and info.value.code == 23
    assert not consumer.running
