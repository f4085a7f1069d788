"""Transactional messages (``TransactionMQProducer`` semantics, REMOTING.md §3.3, §7.7).

::

    class Listener:
        def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState: ...
        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState: ...

    producer = TransactionProducer("tx-group", Listener(), namesrv_addr="127.0.0.1:9876")
    await producer.start()
    result = await producer.send_message_in_transaction(Message("TopicA", b"x"), arg=None)

The message is sent as a half message (``TRAN_MSG=true``, ``PGROUP``); the local transaction runs; its
answer goes to the broker with END_TRANSACTION (oneway; COMMIT = 8, ROLLBACK = 12, UNKNOW = 0). For a
transaction left UNKNOW the broker later sends CHECK_TRANSACTION_STATE and the listener's
``check_local_transaction`` answers, again through END_TRANSACTION. Listener methods may be plain
functions (run in a thread) or coroutines.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from rmq._store import decode_offset_msg_id
from rmq.client.errors import MQClientError
from rmq.client.message import Message, MessageExt
from rmq.client.producer.producer import Producer
from rmq.client.results import SendResult, SendStatus
from rmq.common.codes import MessageConst, MessageSysFlag
from rmq.remoting import RemotingError

__all__ = ["LocalTransactionState", "TransactionListener", "TransactionProducer", "TransactionSendResult"]

log = logging.getLogger(__name__)


class LocalTransactionState(Enum):
    COMMIT_MESSAGE = MessageSysFlag.TRANSACTION_COMMIT_TYPE
    ROLLBACK_MESSAGE = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
    UNKNOW = MessageSysFlag.TRANSACTION_NOT_TYPE


class TransactionListener(Protocol):
    def execute_local_transaction(self, msg: Message, arg: Any) -> Any: ...
    def check_local_transaction(self, msg: MessageExt) -> Any: ...


@dataclass(slots=True)
class TransactionSendResult:
    send_result: SendResult
    local_transaction_state: LocalTransactionState


async def _call(fn: Any, *args: Any) -> LocalTransactionState:
    if inspect.iscoroutinefunction(fn):
        result = await fn(*args)
    else:
        result = await asyncio.get_running_loop().run_in_executor(None, fn, *args)
        if inspect.isawaitable(result):
            result = await result
    return result if isinstance(result, LocalTransactionState) else LocalTransactionState.UNKNOW


def _offset_of(offset_msg_id: str) -> int:
    return decode_offset_msg_id(offset_msg_id)[1]


class TransactionProducer(Producer):
    def __init__(self, group: str, listener: TransactionListener, **kwargs: Any) -> None:
        super().__init__(group, **kwargs)
        self.listener = listener

    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Send a half message, run the local transaction, report its outcome to the broker."""
        msg.delay_time_level = 0  # delays are ignored for transactional messages
        msg.put_property(MessageConst.TRANSACTION_PREPARED, "true")
        msg.put_property(MessageConst.PRODUCER_GROUP, self.group)
        try:
            result = await self.send(msg)
        except (RemotingError, MQClientError) as exc:
            raise MQClientError(f"send message Exception: {exc}") from exc
        state = LocalTransactionState.UNKNOW
        local_exc: BaseException | None = None
        if result.send_status is SendStatus.SEND_OK:
            if result.transaction_id is not None:
                msg.put_property(MessageConst.TRANSACTION_ID, result.transaction_id)
            msg.transaction_id = msg.uniq_id
            try:
                state = await _call(self.listener.execute_local_transaction, msg, arg)
            except Exception as exc:
                log.warning("executeLocalTransaction of %s failed: %s", msg.uniq_id, exc)
                local_exc = exc
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self.end_transaction(result, state, local_exc)
        except (RemotingError, MQClientError) as exc:
            log.warning("endTransaction of %s failed (the broker will check it): %s", result.msg_id, exc)
        return TransactionSendResult(result, state)

    async def end_transaction(
        self, result: SendResult, state: LocalTransactionState, local_exc: BaseException | None = None
    ) -> None:
        instance = self.instance
        addr = await instance.master_addr(result.message_queue)
        remark = f"executeLocalTransactionBranch exception: {local_exc!r}" if local_exc is not None else None
        await instance.api.end_transaction(
            addr,
            producer_group=self.group,
            tran_state_table_offset=result.queue_offset,
            commit_log_offset=_offset_of(result.offset_msg_id),
            commit_or_rollback=state.value,
            msg_id=result.msg_id,
            transaction_id=result.transaction_id,
            from_transaction_check=False,
            remark=remark,
            broker_name=result.message_queue.broker_name,
        )

    def check_transaction_state(self, addr: str, msg: MessageExt, header: Mapping[str, str]) -> None:
        self.instance.spawn(self._check(addr, msg, dict(header)))

    async def _check(self, addr: str, msg: MessageExt, header: dict[str, str]) -> None:
        uniq = msg.get_property(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq:
            msg.transaction_id = uniq
        exc_text = None
        try:
            state = await _call(self.listener.check_local_transaction, msg)
        except Exception as exc:
            log.warning("checkLocalTransaction of %s failed: %s", uniq, exc)
            state, exc_text = LocalTransactionState.UNKNOW, f"checkLocalTransactionState Exception: {exc!r}"
        try:
            await self.instance.api.end_transaction(
                addr,
                producer_group=self.group,
                tran_state_table_offset=int(header.get("tranStateTableOffset", "0")),
                commit_log_offset=int(header.get("commitLogOffset", "0")),
                commit_or_rollback=state.value,
                msg_id=uniq or msg.msg_id,
                transaction_id=header.get("transactionId"),
                from_transaction_check=True,
                remark=exc_text,
            )
        except (RemotingError, MQClientError) as exc:
            log.warning("endTransaction after a check of %s failed: %s", uniq, exc)
