// The official RocketMQ 5.x Node.js client (npm rocketmq-client-nodejs 1.0.8, unchanged) for
// tests/peers/test_node5_client.py: `node client5.js JSON` with endpoints, topic, crossTopic (messages a 4.x
// client sent: crossBodies), group. Sends two messages (tag, keys, a property) to topic, then a SimpleConsumer
// of group subscribed to topic and crossTopic receives until every body came (or 90 s): ack each, the first
// after changeInvisibleDuration. Prints one JSON line: sent (body -> message id) and received (body -> record).
'use strict';

const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

async function main() {
  const a = JSON.parse(process.argv[2]);
  const base = { endpoints: a.endpoints, namespace: '', requestTimeout: 10000 }; // logs: $HOME/logs/rocketmq
  const sent = {};
  const producer = new Producer({ ...base, topics: [a.topic] });
  await producer.startup();
  try {
    const messages = [
      { body: 'node-1', tag: 'TagN', keys: ['n1', 'n2'], properties: new Map([['color', 'blue']]) },
      { body: 'node-2', tag: 'TagM' },
    ];
    for (const m of messages) {
      const receipt = await producer.send({ ...m, topic: a.topic, body: Buffer.from(m.body) });
      sent[m.body] = receipt.messageId;
    }
  } finally {
    await producer.shutdown();
  }
  const want = new Set(['node-1', 'node-2', ...a.crossBodies]);
  const kinds = { [a.topic]: 'node', [a.crossTopic]: 'cross' };
  const consumer = new SimpleConsumer({
    ...base,
    consumerGroup: a.group,
    subscriptions: new Map([[a.topic, '*'], [a.crossTopic, '*']]),
    awaitDuration: 5000,
  });
  await consumer.startup();
  const received = {};
  let changed = false;
  const deadline = Date.now() + 90000;
  try {
    while ([...want].some(b => !(b in received)) && Date.now() < deadline) {
      let batch;
      try {
        batch = await consumer.receive(16, 30000);
      } catch (e) { // a receive before the client's settings reached the server
        process.stderr.write(`receive failed, retrying: ${e}\n`);
        await new Promise(r => setTimeout(r, 1000));
        continue;
      }
      for (const m of batch) {
        if (!changed) {
          await consumer.changeInvisibleDuration(m, 40000);
          changed = true;
        }
        await consumer.ack(m);
        const body = m.body.toString();
        if (!(body in received)) {
          received[body] = {
            kind: kinds[m.topic],
            tag: m.tag ?? null,
            keys: [...m.keys].sort(),
            attempt: m.deliveryAttempt,
            props: Object.fromEntries([...m.properties].sort()),
            id_is_sent: body in sent ? m.messageId === sent[body] : null,
          };
        }
      }
    }
  } finally {
    await consumer.shutdown();
  }
  console.log(JSON.stringify({ sent, received, changed }));
  process.exit(0);
}

main().catch(e => {
  console.log(JSON.stringify({ error: String(e && e.stack || e) }));
  process.exit(1);
});
