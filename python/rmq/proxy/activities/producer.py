"""SendMessage and EndTransaction, and the broker's transaction checks handed to a producer."""

from __future__ import annotations

from typing import Any

from rmq.client.message import MessageExt
from rmq.proxy.activities.base import SEND_STATUS_CODE, Activity, log, peer_host
from rmq.proxy.brokers import TxRef
from rmq.proxy.messages import from_broker, to_broker
from rmq.proxy.pb import d, s
from rmq.proxy.status import ProxyError, ok, status


class ProducerActivity(Activity):
    async def SendMessage(self, request: s.SendMessageRequest, context: Any) -> s.SendMessageResponse:
        try:
            _sess, meta = self._caller(context)
            if not request.messages:
                raise ProxyError(d.Code.BAD_REQUEST, "no message to send")
            topic = request.messages[0].topic.name
            self._check(meta, "topic", topic, "PUB")
            entries = []
            for msg in request.messages:
                if msg.topic.name != topic:
                    raise ProxyError(
                        d.Code.MESSAGE_CORRUPTED, "the messages of one request name different topics"
                    )
                out = to_broker(msg, peer_host(context, self.front))
                try:
                    result, tx = await self.brokers.send(out, 3000)
                except ProxyError as e:
                    entries.append(s.SendResultEntry(status=status(e.code, e.message)))
                    continue
                code = SEND_STATUS_CODE[result.send_status]
                entries.append(
                    s.SendResultEntry(
                        status=status(code, d.Code.Name(code)),
                        message_id=out.message_id,
                        transaction_id=str(tx) if tx is not None else "",
                        offset=result.queue_offset,
                    )
                )
            codes = {e.status.code for e in entries}
            if len(codes) == 1:
                code = codes.pop()
                top = entries[0].status if code != d.Code.OK else ok()
            else:
                top = status(d.Code.MULTIPLE_RESULTS, "MULTIPLE_RESULTS")
            return s.SendMessageResponse(status=top, entries=entries)
        except ProxyError as e:
            return s.SendMessageResponse(status=status(e.code, e.message))

    async def EndTransaction(
        self, request: s.EndTransactionRequest, context: Any
    ) -> s.EndTransactionResponse:
        try:
            _sess, meta = self._caller(context)
            topic = request.topic.name
            self._check(meta, "topic", topic, "PUB")
            tx = TxRef.parse(request.transaction_id)
            if request.resolution == d.TransactionResolution.COMMIT:
                commit = True
            elif request.resolution == d.TransactionResolution.ROLLBACK:
                commit = False
            else:
                raise ProxyError(d.Code.BAD_REQUEST, "transaction resolution must be COMMIT or ROLLBACK")
            from_check = request.source == d.TransactionSource.SOURCE_SERVER_CHECK
            await self.brokers.end_transaction(topic, tx, commit, from_check, request.message_id)
            return s.EndTransactionResponse(status=ok())
        except ProxyError as e:
            return s.EndTransactionResponse(status=status(e.code, e.message))

    def _on_check(self, broker_addr: str, msg: MessageExt, header: dict[str, str]) -> None:
        """A broker's CHECK_TRANSACTION_STATE: ask a producer of the topic (RecoverOrphanedTransaction)."""
        topic = msg.get_property("REAL_TOPIC") or msg.topic
        sess = self.registry.producer_for(topic)
        uniq = msg.get_property("UNIQ_KEY") or header.get("msgId", "")
        if sess is None:
            log.info(
                "transaction check of %s (topic %s) from %s: no producer of the topic is connected",
                uniq,
                topic,
                broker_addr,
            )
            return
        tx = TxRef(
            broker_addr,
            int(header.get("commitLogOffset", "0") or 0),
            int(header.get("tranStateTableOffset", "0") or 0),
            uniq,
        )
        cmd = s.TelemetryCommand(
            recover_orphaned_transaction_command=s.RecoverOrphanedTransactionCommand(
                message=from_broker(msg, topic=topic), transaction_id=str(tx)
            )
        )
        sess.streams[-1].put_nowait(cmd)
        log.info("transaction check of %s (topic %s) sent to client %s", uniq, topic, sess.client_id)
