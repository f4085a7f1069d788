"""rmq.client quickstart (asyncio): send three messages, consume them back, exit.

Run against a broker: ``RMQ_NAMESRV=127.0.0.1:9876 python examples/async_quickstart.py``.
"""

import asyncio
import os

from rmq.client import ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, Producer, PushConsumer

NAMESRV = os.environ.get("RMQ_NAMESRV", "127.0.0.1:9876")


async def main() -> None:
    async with Producer("quickstart_async_pg", namesrv_addr=NAMESRV) as producer:
        msgs = [Message("QuickstartAsync", b"hello %d" % i, tags="TagA", keys=f"order-{i}") for i in range(3)]
        pending = {(await producer.send(m)).msg_id for m in msgs}
    print("sent", len(pending))
    done = asyncio.Event()

    async def on_messages(msgs, context):  # async listeners run on the loop, plain ones in threads
        for m in msgs:
            if m.msg_id in pending:
                pending.discard(m.msg_id)
                print("received", m.body.decode(), m.tags, m.keys)
        if not pending:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET  # a new group starts at the oldest message
    consumer = PushConsumer("quickstart_async_cg", namesrv_addr=NAMESRV, consume_from_where=first)
    consumer.subscribe("QuickstartAsync", "TagA")
    consumer.register_message_listener(on_messages)
    async with consumer:
        await asyncio.wait_for(done.wait(), timeout=60)


asyncio.run(main())
