"""Consume services and the push consumer's pull decisions without sockets (fake consumer internals)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from rmq.client.consumer.consume_concurrently import ConsumeConcurrentlyService
from rmq.client.consumer.consume_orderly import ConsumeOrderlyService
from rmq.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
)
from rmq.client.consumer.offset_store import LocalFileOffsetStore
from rmq.client.consumer.process_queue import ProcessQueue
from rmq.client.errors import MQClientError
from rmq.client.heartbeat import MessageModel
from rmq.client.message import MessageExt, MessageQueue

MQ = MessageQueue("T", "b", 0)


class FakeConsumer:
    def __init__(self, model: MessageModel = MessageModel.CLUSTERING, batch: int = 1) -> None:
        self.group = "g"
        self.message_model = model
        self.consume_message_batch_max_size = batch
        self.suspend_current_queue_time_ms = 10
        self.offset_store = LocalFileOffsetStore("c", "g", "/nonexistent")
        self.rebalance: Any = None
        self.sent_back: list[tuple[int, int]] = []
        self.retry_sends: list[tuple[int, int]] = []
        self.fail_send_back: set[int] = set()
        self.tasks: list[asyncio.Task[Any]] = []

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.append(task)
        return task

    def reset_retry_topic(self, msgs: list[MessageExt]) -> None:
        pass

    def reconsume_limit(self, orderly: bool) -> int:
        return 2 if orderly else 16

    async def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None) -> None:
        if msg.queue_offset in self.fail_send_back:
            raise MQClientError("broker down")
        self.sent_back.append((msg.queue_offset, delay_level))

    async def send_to_retry_topic(self, msg: MessageExt, reconsume_times: int) -> None:
        self.retry_sends.append((msg.queue_offset, reconsume_times))


def msgs(*offsets: int) -> list[MessageExt]:
    return [MessageExt("T", b"x", queue_offset=o) for o in offsets]


async def run_concurrently(
    consumer: FakeConsumer, listener: Any, batch: list[MessageExt]
) -> tuple[ConsumeConcurrentlyService, ProcessQueue]:
    service = ConsumeConcurrentlyService(consumer, listener, 2)  # type: ignore[arg-type]
    service.start()
    pq = ProcessQueue()
    service.submit_consume_request(batch, pq, MQ, pq.put_messages(batch))
    await asyncio.wait_for(service.join(), 5)
    await service.shutdown(1000)
    return service, pq


async def test_success_commits_the_offset_after_the_batch() -> None:
    consumer = FakeConsumer(batch=2)
    seen: list[int] = []

    async def listener(batch: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        seen.append(len(batch))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    _, pq = await run_concurrently(consumer, listener, msgs(10, 11, 12))
    assert sorted(seen) == [1, 2]  # consume_message_batch_max_size splits the pulled batch
    assert pq.msg_count == 0
    assert consumer.offset_store.offset_table[MQ] == 13
    assert not consumer.sent_back


async def test_reconsume_later_exception_and_none_send_back(tmp_path: Any) -> None:
    consumer = FakeConsumer()

    def listener(batch: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> Any:
        offset = batch[0].queue_offset
        if offset == 0:
            ctx.delay_level_when_next_consume = 5
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        if offset == 1:
            raise ValueError("listener bug")
        if offset == 2:
            return None
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    _, pq = await run_concurrently(consumer, listener, msgs(0, 1, 2, 3))
    assert sorted(consumer.sent_back) == [(0, 5), (1, 0), (2, 0)]
    assert consumer.offset_store.offset_table[MQ] == 4  # sent back = handled: the offset moves on
    assert pq.msg_count == 0


async def test_failed_send_back_is_consumed_again_locally_and_holds_the_offset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rmq.client.consumer import consume_concurrently

    monkeypatch.setattr(consume_concurrently, "RETRY_LATER_MS", 50)
    consumer = FakeConsumer()
    consumer.fail_send_back = {1}
    calls: dict[int, int] = {}
    events = {2: asyncio.Event(), 1: asyncio.Event()}

    def listener(batch: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        offset = batch[0].queue_offset
        calls[offset] = calls.get(offset, 0) + 1
        if offset == 2 or calls[offset] == 2:
            events[offset].set()
        if offset == 1 and calls[offset] == 1:
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    service = ConsumeConcurrentlyService(consumer, listener, 1)  # type: ignore[arg-type]
    service.start()
    pq = ProcessQueue()
    batch = msgs(0, 1, 2)
    service.submit_consume_request(batch, pq, MQ, pq.put_messages(batch))
    await asyncio.wait_for(service.join(), 2)
    assert events[2].is_set()
    # The broker could not take offset 1 back: it stays in the process queue and holds the offset.
    assert consumer.offset_store.offset_table[MQ] == 1
    assert batch[1].reconsume_times == 1 and pq.msg_count == 1
    await asyncio.wait_for(events[1].wait(), 2)  # consumed again locally a moment later
    await asyncio.wait_for(service.join(), 2)
    assert consumer.offset_store.offset_table[MQ] == 3 and pq.msg_count == 0
    await service.shutdown(1000)


async def test_ack_index_and_broadcasting_drop() -> None:
    consumer = FakeConsumer(model=MessageModel.BROADCASTING, batch=3)

    def listener(batch: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        ctx.ack_index = 0  # only the first message of the batch succeeded
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    _, pq = await run_concurrently(consumer, listener, msgs(5, 6, 7))
    assert not consumer.sent_back  # broadcasting never sends back: failures are dropped
    assert consumer.offset_store.offset_table[MQ] == 8 and pq.msg_count == 0


async def test_dropped_queue_never_commits() -> None:
    consumer = FakeConsumer()
    release = asyncio.Event()
    pq_holder: list[ProcessQueue] = []

    async def listener(batch: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
        pq_holder[0].dropped = True  # rebalanced away while consuming
        release.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    service = ConsumeConcurrentlyService(consumer, listener, 1)  # type: ignore[arg-type]
    service.start()
    pq = ProcessQueue()
    pq_holder.append(pq)
    batch = msgs(0)
    service.submit_consume_request(batch, pq, MQ, pq.put_messages(batch))
    await asyncio.wait_for(service.join(), 2)
    assert release.is_set()
    await service.shutdown(1000)
    assert MQ not in consumer.offset_store.offset_table


# --- orderly ------------------------------------------------------------------------------------------------


class FakeRebalance:
    def __init__(self) -> None:
        self.locks = 0

    async def lock(self, mq: MessageQueue) -> bool:
        self.locks += 1
        return True

    async def lock_all(self) -> None:
        pass

    async def unlock_all(self, oneway: bool) -> None:
        pass


@pytest.mark.parametrize("model", [MessageModel.CLUSTERING, MessageModel.BROADCASTING])
async def test_orderly_commits_in_order_and_retries_then_gives_up(model: MessageModel) -> None:
    consumer = FakeConsumer(model=model)
    consumer.rebalance = FakeRebalance()
    order: list[int] = []

    def listener(batch: list[MessageExt], ctx: Any) -> Any:
        offset = batch[0].queue_offset
        order.append(offset)
        if offset == 1:
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT  # always fails
        return ConsumeOrderlyStatus.SUCCESS

    service = ConsumeOrderlyService(consumer, listener, 4)  # type: ignore[arg-type]
    service.start()
    pq = ProcessQueue()
    pq.locked = True
    batch = msgs(0, 1, 2)
    service.submit_consume_request(batch, pq, MQ, pq.put_messages(batch))
    # The first request, then the suspended retries, each submitted suspend_current_queue_time_ms (10)
    # after the last one returned: until offset 2 ran (bounded).
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        await asyncio.wait_for(service.join(), 2)
        if 2 in order:
            break
        assert asyncio.get_running_loop().time() < deadline, order
        await asyncio.sleep(0.02)
    await service.shutdown(1000)
    # offset 1 is retried locally max_reconsume_times (2) times, then goes to the retry topic, then 2 runs.
    assert order == [0, 1, 1, 1, 2]
    assert consumer.retry_sends == [(1, 2)]
    assert consumer.offset_store.offset_table[MQ] == 3


async def test_orderly_waits_for_the_broker_lock() -> None:
    consumer = FakeConsumer()
    rebalance = FakeRebalance()
    consumer.rebalance = rebalance
    done = asyncio.Event()

    def listener(batch: list[MessageExt], ctx: Any) -> Any:
        done.set()
        return ConsumeOrderlyStatus.SUCCESS

    service = ConsumeOrderlyService(consumer, listener, 1)  # type: ignore[arg-type]
    service.start()
    pq = ProcessQueue()  # not locked yet
    batch = msgs(0)
    service.submit_consume_request(batch, pq, MQ, pq.put_messages(batch))
    deadline = asyncio.get_running_loop().time() + 10
    while not rebalance.locks and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    assert not done.is_set() and rebalance.locks >= 1  # asked the broker for the lock instead
    pq.locked = True  # what a successful lock does to the process queue
    await asyncio.wait_for(done.wait(), 2)
    await service.shutdown(1000)
