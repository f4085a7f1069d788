package rmqgrpc5;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * The official RocketMQ 5.x Java client (rocketmq-client-java, gRPC), unchanged, driven through one scenario
 * against one endpoint (rmq's or Apache's proxy), for tests/peers/test_java5_client.py. Arguments
 * {@code key=value}: endpoints; topics normal, fifo, delay, tx, push, cross (messages a 4.x client sent,
 * {@code crossBodies} comma-separated); groups simpleGroup, fifoGroup (orderly on the server), pushGroup
 * (retryMaxTimes 2 on the server). Prints one JSON line:
 *
 * <ul>
 *   <li>sent: body → message id of every send (normal with tag/keys/property, a FIFO message group, a delay
 *       of 2 s, the push topic's three);</li>
 *   <li>tx: the bodies the server asked the TransactionChecker about (tx-commit is committed, tx-rollback
 *       rolled back, tx-checked left for the check, which commits it);</li>
 *   <li>simple: what a SimpleConsumer received (and acked; the first also got changeInvisibleDuration) of
 *       normal, delay, tx and cross, one record per body (under the empty key: whether changeInvisibleDuration
 *       was called, on the first message);</li>
 *   <li>fifo: the FIFO topic's bodies in the order an orderly group's SimpleConsumer received them;</li>
 *   <li>push: (body, attempt) of each delivery to a PushConsumer whose listener fails "never" always and
 *       "once" on its first attempt.</li>
 * </ul>
 */
public final class Grpc5Driver {
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    private Grpc5Driver() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (String arg : argv) {
            int i = arg.indexOf('=');
            if (i < 0) {
                continue; // the scenario name tests/peers/apache.py's run_driver passes first
            }
            a.put(arg.substring(0, i), arg.substring(i + 1));
        }
        ClientConfiguration config = ClientConfiguration.newBuilder()
            .setEndpoints(a.get("endpoints"))
            .setRequestTimeout(Duration.ofSeconds(10))
            // The client's defaults, TLS included: Apache's proxy and rmq's endpoint both take TLS
            // (a self-signed certificate in their TLS test mode) and plaintext on one port.
            .build();
        StringBuilder out = new StringBuilder("{");
        try {
            Map<String, String> sent = send(config, a);
            out.append("\"sent\":").append(Json.map(sent));
            // The transaction waits for the server's check, the push consumer for its retries: both run
            // while the simple consumers receive.
            List<String> checked = Collections.synchronizedList(new ArrayList<>());
            CountDownLatch txDelivered = new CountDownLatch(1);
            Thread tx = new Thread(() -> transactions(config, a.get("tx"), checked, txDelivered));
            tx.start();
            List<String[]> deliveries = Collections.synchronizedList(new ArrayList<>());
            Thread push = new Thread(() -> push(config, a, deliveries));
            push.start();
            Set<String> want = new HashSet<>(List.of("plain-1", "plain-2", "later", "tx-commit", "tx-checked"));
            for (String b : a.get("crossBodies").split(",")) {
                want.add(b);
            }
            Map<String, String> simple = simple(config, a, want, txDelivered);
            List<String> fifo = fifo(config, a);
            tx.join();
            push.join();
            out.append(",\"tx\":").append(Json.list(new ArrayList<>(new java.util.TreeSet<>(checked))));
            out.append(",\"simple\":").append(Json.map(simple));
            out.append(",\"fifo\":").append(Json.list(fifo));
            List<String> pairs = new ArrayList<>();
            synchronized (deliveries) {
                for (String[] d : deliveries) {
                    pairs.add(d[0] + "#" + d[1]);
                }
            }
            Collections.sort(pairs);
            out.append(",\"push\":").append(Json.list(pairs));
            out.append('}');
        } catch (Throwable e) {
            out.setLength(0);
            out.append("{\"error\":").append(Json.quote(e.toString())).append('}');
            e.printStackTrace();
        }
        System.out.println(out);
        System.exit(0); // the client's gRPC threads would keep the JVM alive a while
    }

    private static MessageBuilder message(String topic, String body) {
        return PROVIDER.newMessageBuilder().setTopic(topic).setBody(body.getBytes(StandardCharsets.UTF_8));
    }

    private static Map<String, String> send(ClientConfiguration config, Map<String, String> a) throws Exception {
        String normal = a.get("normal");
        String fifo = a.get("fifo");
        String delay = a.get("delay");
        String push = a.get("push");
        Map<String, String> sent = new TreeMap<>();
        try (Producer p = PROVIDER.newProducerBuilder().setClientConfiguration(config)
            .setTopics(normal, fifo, delay, push).build()) {
            List<Message> messages = new ArrayList<>();
            messages.add(message(normal, "plain-1").setTag("TagA").setKeys("k1", "k2")
                .addProperty("color", "red").build());
            messages.add(message(normal, "plain-2").setTag("TagB").build());
            for (int i = 0; i < 3; i++) {
                messages.add(message(fifo, "fifo-" + i).setMessageGroup("order-7").build());
            }
            messages.add(message(delay, "later").setDeliveryTimestamp(System.currentTimeMillis() + 2000).build());
            for (String b : List.of("ok-1", "once", "never")) {
                messages.add(message(push, b).build());
            }
            for (Message m : messages) {
                String body = StandardCharsets.UTF_8.decode(m.getBody()).toString();
                sent.put(body, p.send(m).getMessageId().toString());
            }
        }
        return sent;
    }

    /** Ends two transactions and leaves one for the server's check; open until the checked one was delivered
     * (the check's EndTransaction is sent after the checker returns) or 100 s. */
    private static void transactions(ClientConfiguration config, String topic, List<String> checked,
        CountDownLatch delivered) {
        CountDownLatch awaited = new CountDownLatch(1);
        try (Producer p = PROVIDER.newProducerBuilder().setClientConfiguration(config).setTopics(topic)
            .setTransactionChecker(view -> {
                String body = StandardCharsets.UTF_8.decode(view.getBody()).toString();
                checked.add(body);
                if (body.equals("tx-checked")) {
                    awaited.countDown();
                }
                // A check may come for an ended one whose end the broker has not read yet: answered the same.
                return body.equals("tx-rollback") ? TransactionResolution.ROLLBACK : TransactionResolution.COMMIT;
            }).build()) {
            Transaction t = p.beginTransaction();
            p.send(message(topic, "tx-commit").build(), t);
            t.commit();
            t = p.beginTransaction();
            p.send(message(topic, "tx-rollback").build(), t);
            t.rollback();
            p.send(message(topic, "tx-checked").build(), p.beginTransaction()); // never ended: the server asks
            awaited.await(90, TimeUnit.SECONDS);
            delivered.await(100, TimeUnit.SECONDS);
        } catch (Exception e) {
            checked.add("error: " + e);
        }
    }

    private static String record(MessageView m, String kind, long receivedAt) {
        Map<String, String> r = new TreeMap<>();
        r.put("kind", kind);
        r.put("tag", m.getTag().orElse(null));
        List<String> keys = new ArrayList<>(m.getKeys());
        Collections.sort(keys);
        r.put("keys", String.join(" ", keys));
        r.put("group", m.getMessageGroup().orElse(null));
        r.put("attempt", Integer.toString(m.getDeliveryAttempt()));
        List<String> props = new ArrayList<>();
        String id = m.getMessageId().toString(); // a property holding the message's own id shows "<id>"
        new TreeMap<>(m.getProperties()).forEach((k, v) -> props.add(k + "=" + (v.equals(id) ? "<id>" : v)));
        r.put("props", String.join(";", props));
        if (m.getDeliveryTimestamp().isPresent()) {
            r.put("onTime", Boolean.toString(receivedAt >= m.getDeliveryTimestamp().get() - 50));
        }
        return Json.map(r);
    }

    /** Receives until every wanted body came once (or 120 s): ack each, the first after a longer invisible time. */
    private static Map<String, String> simple(ClientConfiguration config, Map<String, String> a, Set<String> want,
        CountDownLatch txDelivered) throws Exception {
        Map<String, String> kinds = new HashMap<>();
        Map<String, FilterExpression> subs = new HashMap<>();
        for (String kind : List.of("normal", "delay", "tx", "cross")) {
            kinds.put(a.get(kind), kind);
            subs.put(a.get(kind), FilterExpression.SUB_ALL);
        }
        Map<String, String> got = new TreeMap<>();
        boolean changed = false;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        try (SimpleConsumer c = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(a.get("simpleGroup")).setSubscriptionExpressions(subs)
            .setAwaitDuration(Duration.ofSeconds(5)).build()) {
            while (!got.keySet().containsAll(want) && System.nanoTime() < deadline) {
                List<MessageView> batch;
                try {
                    batch = c.receive(16, Duration.ofSeconds(30));
                } catch (Exception e) { // a receive before the client's settings reached the server
                    System.err.println("receive failed, retrying: " + e);
                    Thread.sleep(1000);
                    continue;
                }
                long now = System.currentTimeMillis();
                for (MessageView m : batch) {
                    if (!changed) {
                        c.changeInvisibleDuration(m, Duration.ofSeconds(40));
                        changed = true;
                    }
                    c.ack(m);
                    String body = StandardCharsets.UTF_8.decode(m.getBody()).toString();
                    got.putIfAbsent(body, record(m, kinds.get(m.getTopic()), now));
                    if (body.equals("tx-checked")) {
                        txDelivered.countDown();
                    }
                }
            }
        }
        txDelivered.countDown();
        got.put("", changed ? "changedInvisible" : "unchanged");
        return got;
    }

    private static List<String> fifo(ClientConfiguration config, Map<String, String> a) throws Exception {
        List<String> got = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        try (SimpleConsumer c = PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(a.get("fifoGroup"))
            .setSubscriptionExpressions(Map.of(a.get("fifo"), FilterExpression.SUB_ALL))
            .setAwaitDuration(Duration.ofSeconds(5)).build()) {
            while (got.size() < 3 && System.nanoTime() < deadline) {
                List<MessageView> batch;
                try {
                    batch = c.receive(16, Duration.ofSeconds(30));
                } catch (Exception e) {
                    System.err.println("receive failed, retrying: " + e);
                    Thread.sleep(1000);
                    continue;
                }
                for (MessageView m : batch) {
                    got.add(StandardCharsets.UTF_8.decode(m.getBody()).toString() + "@" + m.getMessageGroup().orElse(""));
                    c.ack(m);
                }
            }
        }
        return got;
    }

    private static void push(ClientConfiguration config, Map<String, String> a, List<String[]> deliveries) {
        CountDownLatch done = new CountDownLatch(1);
        try (PushConsumer c = PROVIDER.newPushConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(a.get("pushGroup"))
            .setSubscriptionExpressions(Map.of(a.get("push"), FilterExpression.SUB_ALL))
            .setMessageListener(m -> {
                String body = StandardCharsets.UTF_8.decode(m.getBody()).toString();
                int attempt = m.getDeliveryAttempt();
                deliveries.add(new String[] {body, Integer.toString(attempt)});
                if (body.equals("never") && attempt >= 3) {
                    done.countDown();
                }
                boolean fail = body.equals("never") || (body.equals("once") && attempt == 1);
                return fail ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
            }).build()) {
            done.await(150, TimeUnit.SECONDS);
            Thread.sleep(3000); // the last failure's forward to the dead-letter queue, and any late delivery
        } catch (Exception e) {
            deliveries.add(new String[] {"error: " + e, "0"});
        }
    }
}
