"""A synchronous facade over the asyncio client, for scripts and threaded programs.

::

    from rmq.client import Message, ConsumeConcurrentlyStatus
    from rmq.client.sync import Producer, PushConsumer

    with Producer("pg", namesrv_addr="127.0.0.1:9876") as producer:
        result = producer.send(Message("TopicA", b"hello"))

    def on_messages(msgs, context):
        print([m.body for m in msgs])
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cg", namesrv_addr="127.0.0.1:9876")
    consumer.subscribe("TopicA", "*")
    consumer.register_message_listener(on_messages)
    consumer.start()
    ...
    consumer.shutdown()

Every facade object wraps the asyncio object of the same name and runs it on one private event loop in a
daemon thread, shared by the whole process (so producers and consumers share one client instance, as in
Java). Methods block the calling thread until the coroutine finishes; ``send_async`` returns a
``concurrent.futures.Future``. Listeners written as plain functions run in the consumer's thread pool;
send callbacks run on the loop thread and must not block. Clients still running at interpreter exit are
shut down cleanly (offsets committed, client unregistered).

Calling a facade method from the loop thread itself (e.g. inside a send callback) would deadlock and
raises ``RuntimeError`` instead.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import inspect
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from rmq.client.admin import LONG_MAX
from rmq.client.heartbeat import MessageSelector
from rmq.client.message import Message, MessageExt, MessageQueue
from rmq.client.producer.producer import ExceptionCallback, SendCallback
from rmq.client.producer.producer import Producer as AsyncProducer
from rmq.client.producer.selector import MessageQueueSelector
from rmq.client.producer.transaction import TransactionListener, TransactionSendResult
from rmq.client.producer.transaction import TransactionProducer as AsyncTransactionProducer
from rmq.client.results import QueryResult, SendResult
from rmq.remoting.loop import best_loop_factory

if TYPE_CHECKING:  # imported where first used: a process that only sends need not load them
    from rmq.client.admin_ext import Admin as AsyncAdmin
    from rmq.client.consumer.lite_pull import LitePullConsumer as AsyncLitePullConsumer
    from rmq.client.consumer.push import PushConsumer as AsyncPushConsumer

__all__ = [
    "Admin",
    "LitePullConsumer",
    "Producer",
    "PushConsumer",
    "TransactionProducer",
    "run",
    "shutdown_all",
]

_T = TypeVar("_T")


class _LoopThread:
    """One event loop in one daemon thread, started on first use."""

    def __init__(self) -> None:
        self.loop = best_loop_factory()()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._main, name="rmq-client-loop", daemon=True)
        self.thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, _T], timeout_s: float | None = None) -> _T:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("a blocking rmq.client.sync call from the client's own event loop thread")
        return self.submit(coro).result(timeout_s)

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)


_lock = threading.Lock()
_loop_thread: _LoopThread | None = None
_live: weakref.WeakSet[_Facade] = weakref.WeakSet()


def _loop() -> _LoopThread:
    global _loop_thread
    with _lock:
        if _loop_thread is None or not _loop_thread.thread.is_alive():
            _loop_thread = _LoopThread()
        return _loop_thread


async def _build(factory: Callable[[], _T]) -> _T:
    return factory()  # asyncio objects are created on the loop they will run on


class _Facade:
    _impl: Any

    def _run(self, awaitable: Awaitable[_T], timeout_s: float | None = None) -> _T:
        lt = _loop()
        if threading.current_thread() is lt.thread and inspect.iscoroutine(awaitable):
            awaitable.close()  # refused below; never leave it un-awaited

        async def wrap() -> _T:
            return await awaitable

        return lt.run(wrap(), timeout_s)

    def __getattr__(self, name: str) -> Any:
        # Configuration attributes (``send_msg_timeout_ms``, ``pull_batch_size``, ...) read through.
        if name.startswith("_"):
            raise AttributeError(name)
        value = getattr(self._impl, name)
        if inspect.iscoroutinefunction(value):
            raise AttributeError(f"{name} is a coroutine of the asyncio object; the facade does not wrap it")
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._impl, name, value)  # configuration writes go to the wrapped object

    def start(self) -> None:
        self._run(self._impl.start())
        _live.add(self)

    def shutdown(self) -> None:
        _live.discard(self)
        self._run(self._impl.shutdown())

    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class _Lookup(_Facade):
    """The message lookups of :mod:`rmq.client.admin`, blocking."""

    def view_message(self, msg_id: str, *, topic: str | None = None) -> MessageExt:
        return self._run(self._impl.view_message(msg_id, topic=topic))

    def query_message(
        self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0, end_ms: int = LONG_MAX
    ) -> QueryResult:
        return self._run(self._impl.query_message(topic, key, max_num, begin_ms, end_ms))

    def query_message_by_unique_key(
        self,
        topic: str,
        uniq_key: str,
        max_num: int = 32,
        begin_ms: int | None = None,
        end_ms: int = LONG_MAX,
    ) -> QueryResult:
        return self._run(self._impl.query_message_by_unique_key(topic, uniq_key, max_num, begin_ms, end_ms))

    def view_message_by_unique_key(self, topic: str, uniq_key: str) -> MessageExt:
        return self._run(self._impl.view_message_by_unique_key(topic, uniq_key))


class Producer(_Lookup):
    """Blocking :class:`rmq.client.Producer`; same constructor arguments."""

    def __init__(self, group: str, **kwargs: Any) -> None:
        self._impl: AsyncProducer = _loop().run(_build(lambda: AsyncProducer(group, **kwargs)))

    @property
    def impl(self) -> AsyncProducer:
        return self._impl

    def send(
        self,
        msg: Message | Sequence[Message],
        *,
        mq: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        return self._run(self._impl.send(msg, mq=mq, selector=selector, arg=arg, timeout_ms=timeout_ms))

    def send_async(
        self,
        msg: Message | Sequence[Message],
        callback: SendCallback | None = None,
        on_exception: ExceptionCallback | None = None,
        *,
        mq: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
        timeout_ms: int | None = None,
    ) -> concurrent.futures.Future[SendResult]:
        """Start a send; the future (and ``callback``, on the loop thread) get the result."""

        async def go() -> SendResult:
            return await self._impl.send_async(
                msg, callback, on_exception, mq=mq, selector=selector, arg=arg, timeout_ms=timeout_ms
            )

        return _loop().submit(go())

    def send_oneway(
        self,
        msg: Message | Sequence[Message],
        *,
        mq: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        self._run(self._impl.send_oneway(msg, mq=mq, selector=selector, arg=arg))

    def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(self._impl.fetch_publish_message_queues(topic))


class TransactionProducer(Producer):
    """Blocking :class:`rmq.client.TransactionProducer`; the listener's plain methods run in threads."""

    def __init__(self, group: str, listener: TransactionListener, **kwargs: Any) -> None:
        self._impl = _loop().run(_build(lambda: AsyncTransactionProducer(group, listener, **kwargs)))

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        impl: AsyncTransactionProducer = self._impl  # type: ignore[assignment]
        return self._run(impl.send_message_in_transaction(msg, arg))


class PushConsumer(_Lookup):
    """Blocking :class:`rmq.client.PushConsumer`; same constructor arguments and listeners."""

    def __init__(self, group: str, **kwargs: Any) -> None:
        from rmq.client.consumer.push import PushConsumer as AsyncPushConsumer

        self._impl: AsyncPushConsumer = _loop().run(_build(lambda: AsyncPushConsumer(group, **kwargs)))

    @property
    def impl(self) -> AsyncPushConsumer:
        return self._impl

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        self._run(_call(lambda: self._impl.subscribe(topic, expression)))

    def unsubscribe(self, topic: str) -> None:
        self._run(_call(lambda: self._impl.unsubscribe(topic)))

    def register_message_listener(self, listener: Callable[..., Any]) -> None:
        self._impl.register_message_listener(listener)

    def register_message_listener_orderly(self, listener: Callable[..., Any]) -> None:
        self._impl.register_message_listener_orderly(listener)

    def suspend(self) -> None:
        self._run(_call(self._impl.suspend))

    def resume(self) -> None:
        self._run(_call(self._impl.resume))


class LitePullConsumer(_Lookup):
    """Blocking :class:`rmq.client.LitePullConsumer`; ``poll`` blocks up to its timeout."""

    def __init__(self, group: str, **kwargs: Any) -> None:
        from rmq.client.consumer.lite_pull import LitePullConsumer as AsyncLitePullConsumer

        self._impl: AsyncLitePullConsumer = _loop().run(
            _build(lambda: AsyncLitePullConsumer(group, **kwargs))
        )

    @property
    def impl(self) -> AsyncLitePullConsumer:
        return self._impl

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        self._run(_call(lambda: self._impl.subscribe(topic, expression)))

    def unsubscribe(self, topic: str) -> None:
        self._run(_call(lambda: self._impl.unsubscribe(topic)))

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        queues = list(mqs)
        self._run(_call(lambda: self._impl.assign(queues)))

    def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        return self._run(self._impl.poll(timeout_ms))

    def commit_sync(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        self._run(self._impl.commit_sync(offsets))

    def commit_async(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        self._run(self._impl.commit_async(offsets))

    def committed(self, mq: MessageQueue) -> int:
        return self._run(self._impl.committed(mq))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._run(self._impl.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._run(self._impl.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._run(self._impl.seek_to_end(mq))

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        queues = list(mqs)
        self._run(_call(lambda: self._impl.pause(queues)))

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        queues = list(mqs)
        self._run(_call(lambda: self._impl.resume(queues)))

    def fetch_message_queues(self, topic: str) -> set[MessageQueue]:
        return self._run(self._impl.fetch_message_queues(topic))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._run(self._impl.offset_for_timestamp(mq, timestamp_ms))


class Admin(_Lookup):
    """Blocking :class:`rmq.client.admin_ext.Admin`; same constructor arguments. Every coroutine method of the
    asyncio admin is available here as a blocking method of the same name and arguments."""

    def __init__(self, **kwargs: Any) -> None:
        from rmq.client.admin_ext import Admin as AsyncAdmin

        self._impl: AsyncAdmin = _loop().run(_build(lambda: AsyncAdmin(**kwargs)))

    @property
    def impl(self) -> AsyncAdmin:
        return self._impl

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        value = getattr(self._impl, name)
        if not inspect.iscoroutinefunction(value):
            return value

        def blocking(*args: Any, **kwargs: Any) -> Any:
            return self._run(value(*args, **kwargs))

        blocking.__name__ = name
        blocking.__doc__ = value.__doc__
        return blocking


async def _call(fn: Callable[[], _T]) -> _T:
    return fn()


def shutdown_all(timeout_s: float = 30.0) -> None:
    """Shut down every running facade client (registered with ``atexit``)."""
    lt = _loop_thread
    if lt is None or not lt.thread.is_alive():
        return
    for facade in list(_live):
        _live.discard(facade)
        try:
            lt.run(_shutdown(facade), timeout_s)
        except Exception:  # exit path: do what can be done
            pass


async def _shutdown(facade: _Facade) -> None:
    await facade._impl.shutdown()


atexit.register(shutdown_all)


def run(coro: Coroutine[Any, Any, _T], timeout_s: float | None = None) -> _T:
    """Run a coroutine of the asyncio client on the facade's event loop and wait for it: for code that
    drives facade objects' ``impl`` (the asyncio object) directly."""
    return _loop().run(coro, timeout_s)
