"""Shared pieces of the client semantics tests (test_client_{tx,delay,retry,sql92,query}.py).

A broker restart keeps its broker and name-server ports, so the running clients (and offset message ids,
which carry the broker's address) stay valid across it.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmq.client import (
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LitePullConsumer,
    MessageExt,
    PushConsumer,
)

from tests.brokerproc import BrokerProcess, start_broker

_counter = iter(range(1_000_000))


def unique(prefix: str) -> str:
    return f"{prefix}_{os.getpid()}_{next(_counter)}"


def config(broker: BrokerProcess, instance: str, **kw: Any) -> ClientConfig:
    """Fast route polling, heartbeats and rebalances, so clients notice a restarted broker quickly."""
    kw.setdefault("poll_name_server_interval_ms", 1000)
    kw.setdefault("heartbeat_broker_interval_ms", 1000)
    kw.setdefault("rebalance_interval_ms", 2000)
    return ClientConfig(namesrv_addr=broker.namesrv_addr, instance_name=instance, **kw)


async def start(store: Path, *props: str) -> BrokerProcess:
    return await asyncio.to_thread(start_broker, store, *props)


async def restart(broker: BrokerProcess, *props: str, kill: bool = False) -> BrokerProcess:
    """Stop (SIGTERM) or kill (SIGKILL) the broker, then start it again on the same store and ports."""
    if kill:
        await asyncio.to_thread(broker.kill)
    else:
        await asyncio.to_thread(broker.stop)
    ns_port = broker.namesrv_addr.rsplit(":", 1)[1]
    return await asyncio.to_thread(
        start_broker,
        broker.store_dir,
        *props,
        f"listenPort={broker.broker_port}",
        extra_args=["--namesrv-port", ns_port],
    )


class Collector:
    """A concurrent listener recording ``(receipt time, message)``; ``answer`` decides the status."""

    def __init__(self, answer: Callable[[MessageExt], Any] | None = None) -> None:
        self.received: list[tuple[float, MessageExt]] = []
        self.answer = answer
        self._lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt], ctx: Any) -> Any:  # a worker thread
        now = time.time()
        with self._lock:
            self.received.extend((now, m) for m in msgs)
        if self.answer is not None:
            return self.answer(msgs[0])
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    @property
    def msgs(self) -> list[MessageExt]:
        with self._lock:
            return [m for _, m in self.received]

    async def wait_until(self, done: Callable[[list[MessageExt]], bool], timeout: float) -> list[MessageExt]:
        deadline = time.monotonic() + timeout
        while not done(self.msgs):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; received {[m.body for m in self.msgs]}")
            await asyncio.sleep(0.05)
        return self.msgs

    async def wait_for(self, n: int, timeout: float) -> list[MessageExt]:
        return await self.wait_until(lambda msgs: len(msgs) >= n, timeout)


async def push_consumer(
    broker: BrokerProcess, group: str, topic: str, listener: Any, expression: Any = "*", **kw: Any
) -> PushConsumer:
    kw.setdefault("consume_from_where", ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer = PushConsumer(group, client_config=config(broker, kw.pop("instance", group)), **kw)
    consumer.subscribe(topic, expression)
    consumer.register_message_listener(listener)
    await consumer.start()
    return consumer


async def read_all(
    broker: BrokerProcess, topic: str, at_least: int, quiet_s: float = 1.0, timeout: float = 20.0
) -> list[bytes]:
    """The bodies of every message stored in ``topic`` (read by a new group from the first offset): at
    least ``at_least`` of them, then whatever else comes until nothing did for ``quiet_s``."""
    group = unique("reader")
    consumer = LitePullConsumer(
        group,
        client_config=config(broker, group),
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic)
    await consumer.start()
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while time.monotonic() < deadline and (len(got) < at_least or time.monotonic() - last < quiet_s):
            batch = await consumer.poll(200)
            if batch:
                got += [m.body for m in batch]
                last = time.monotonic()
    finally:
        await consumer.shutdown()
    return sorted(got)
