"""rmq.client quickstart (blocking facade): send three messages, consume them back, exit.

Run against a broker: ``RMQ_NAMESRV=127.0.0.1:9876 python examples/sync_quickstart.py``.
"""

import os
import threading

from rmq.client import ConsumeConcurrentlyStatus, ConsumeFromWhere, Message
from rmq.client.sync import Producer, PushConsumer

NAMESRV = os.environ.get("RMQ_NAMESRV", "127.0.0.1:9876")

with Producer("quickstart_sync_pg", namesrv_addr=NAMESRV) as producer:
    msgs = [Message("QuickstartSync", b"hello %d" % i, tags="TagA", keys=f"order-{i}") for i in range(3)]
    pending = {producer.send(m).msg_id for m in msgs}
print("sent", len(pending))
lock, done = threading.Lock(), threading.Event()


def on_messages(msgs, context):  # runs in the consumer's thread pool, several at a time
    with lock:
        for m in msgs:
            if m.msg_id in pending:
                pending.discard(m.msg_id)
                print("received", m.body.decode(), m.tags, m.keys)
        if not pending:
            done.set()
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET  # a new group starts at the oldest message
consumer = PushConsumer("quickstart_sync_cg", namesrv_addr=NAMESRV, consume_from_where=first)
consumer.subscribe("QuickstartSync", "TagA")
consumer.register_message_listener(on_messages)
with consumer:
    if not done.wait(timeout=60):
        raise SystemExit("timed out waiting for the messages")
