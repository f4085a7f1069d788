// The official RocketMQ 5.x Node.js client (npm rocketmq-client-nodejs 1.0.8, unchanged) for
// tests/peers/test_node5_client.py: `node client5.js JSON` with endpoints, topic, crossTopic (messages a 4.x
// client sent: crossBodies), group. Sends two messages (tag, keys, a property) to topic, then a SimpleConsumer
// of group subscribed to topic and crossTopic receives until every body came (or 90 s): ack each, the first
// after changeInvisibleDuration. Prints one JSON line: sent (body -> message id) and received (body -> record).
'use strict';

const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

// rocketmq-client-nodejs 1.0.8 waits for the server's first Settings only after it fetched its topics' routes;
// when the Settings come back before that wait starts (a fast server, two topics), startup() never resolves.
// A client whose startup has not finished in 15 s is shut down and a new one started (logged to stderr).
async function started(make, label) {
  for (let attempt = 1; ; attempt++) {
    const client = make();
    const done = await Promise.race([
      client.startup().then(() => true),
      new Promise(r => setTimeout(() => r(false), 15000).unref()),
    ]);
    if (done) {
      return client;
    }
    process.stderr.write(`${label} startup hung (attempt ${attempt}): the Settings came before it waited\n`);
    await Promise.race([client.shutdown().catch(() => {}), new Promise(r => setTimeout(r, 5000).unref())]);
    if (attempt >= 3) {
      throw new Error(`${label} did not start in ${attempt} attempts`);
    }
  }
}

async function main() {
  const a = JSON.parse(process.argv[2]);
  const base = { endpoints: a.endpoints, namespace: '', requestTimeout: 10000 }; // logs: $HOME/logs/rocketmq
  const sent = {};
  const producer = await started(() => new Producer({ ...base, topics: [a.topic] }), 'producer');
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
  const consumer = await started(() => new SimpleConsumer({
    ...base,
    consumerGroup: a.group,
    subscriptions: new Map([[a.topic, '*'], [a.crossTopic, '*']]),
    awaitDuration: 5000,
  }), 'consumer');
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
