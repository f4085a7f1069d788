package rmqpeer;

import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * The Java client's side of a broker group failover (tests/peers/test_java_failover.py): one producer
 * sending one message after the other and one push consumer recording what it receives. The test and
 * this driver take turns through marker files in {@code dir}: the driver writes {@code suspended} once
 * the consumer is suspended with messages left on both groups, and keeps sending until the test writes
 * {@code killed} (broker-a's master is dead), then sends 300 more, resumes the consumer, waits until it
 * received every acknowledged message and writes {@code drained}; after the test writes
 * {@code restarted} it sends until a send lands on broker-a again, waits until everything is received,
 * and prints what happened as JSON.
 */
public final class FailoverDriver {
    private final Map<String, String> args = new HashMap<>();
    private final Map<String, String> acked = new ConcurrentHashMap<>();
    private final Map<String, AtomicInteger> received = new ConcurrentHashMap<>();
    private final List<String> failed = new ArrayList<>();
    private final List<String> afterKill = new ArrayList<>();
    private int seq;
    private DefaultMQProducer producer;

    private FailoverDriver(String[] argv) {
        for (int i = 1; i < argv.length; i++) {
            int eq = argv[i].indexOf('=');
            args.put(argv[i].substring(0, eq), argv[i].substring(eq + 1));
        }
    }

    public static void main(String[] argv) {
        System.setProperty("rocketmq.client.rebalance.waitInterval", "1000");
        int rc = 0;
        Object result;
        try {
            result = new FailoverDriver(argv).run();
        } catch (Throwable t) {
            Map<String, Object> err = new TreeMap<>();
            err.put("error", t.toString());
            result = err;
            rc = 1;
        }
        System.out.println(JSON.toJSONString(result));
        System.out.flush();
        System.exit(rc);
    }

    private String send(String topic) {
        String key = "jfo-" + seq++;
        try {
            SendResult r = producer.send(new Message(topic, "", key, key.getBytes(StandardCharsets.UTF_8)));
            if (r.getSendStatus() != SendStatus.SEND_OK) {
                failed.add(key + ": " + r.getSendStatus());
                return null;
            }
            String broker = r.getMessageQueue().getBrokerName();
            acked.put(key, broker);
            return broker;
        } catch (Exception e) {
            failed.add(key + ": " + e);
            return null;
        }
    }

    private boolean allReceived() {
        return received.keySet().containsAll(acked.keySet());
    }

    private void await(String what, long deadline, java.util.function.BooleanSupplier cond) throws Exception {
        while (!cond.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("timed out waiting for " + what);
            }
            Thread.sleep(20);
        }
    }

    private Object run() throws Exception {
        String namesrv = args.get("namesrv");
        String topic = args.get("topic");
        Path dir = Paths.get(args.get("dir"));
        long deadline = System.currentTimeMillis() + Long.parseLong(args.getOrDefault("timeout", "90")) * 1000;

        producer = new DefaultMQProducer("pg_java_failover");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("jfo-p");
        producer.setPollNameServerInterval(500);
        producer.start();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.get("group"));
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("jfo-c");
        consumer.setPollNameServerInterval(500);
        consumer.setPersistConsumerOffsetInterval(500);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                if (m.getKeys() != null && m.getKeys().startsWith("jfo-")) {
                    received.computeIfAbsent(m.getKeys(), k -> new AtomicInteger()).incrementAndGet();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        try {
            for (int i = 0; i < 80; i++) {
                send(topic);
            }
            await("the first messages consumed", deadline, () -> !received.isEmpty());
            consumer.suspend();
            for (int i = 0; i < 80; i++) {
                send(topic);
            }
            int pendingA = 0;
            for (Map.Entry<String, String> e : acked.entrySet()) {
                if (e.getValue().equals("broker-a") && !received.containsKey(e.getKey())) {
                    pendingA++;
                }
            }
            Files.write(dir.resolve("suspended"), new byte[0]);
            while (!Files.exists(dir.resolve("killed"))) {
                send(topic);
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("timed out waiting for the kill");
                }
            }
            int killedAt = seq;
            for (int i = 0; i < 300; i++) {
                afterKill.add(String.valueOf(send(topic)));
            }
            consumer.resume();
            await("broker-a drained from its slave", deadline, this::allReceived);
            Files.write(dir.resolve("drained"), new byte[0]);
            await("the master's restart", deadline, () -> Files.exists(dir.resolve("restarted")));
            boolean back = false;
            while (!back) {
                back = "broker-a".equals(send(topic));
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("no send reached broker-a again");
                }
            }
            for (int i = 0; i < 40; i++) {
                send(topic);
            }
            await("everything received after the heal", deadline, this::allReceived);
            int duplicates = 0;
            for (AtomicInteger n : received.values()) {
                duplicates += n.get() - 1;
            }
            Map<String, Object> out = new TreeMap<>();
            out.put("acked", acked.size());
            out.put("received", received.size());
            out.put("duplicates", duplicates);
            out.put("failed", failed);
            out.put("killedAt", killedAt);
            out.put("pendingA", pendingA);
            out.put("afterKillLast100", afterKill.subList(afterKill.size() - 100, afterKill.size()));
            return out;
        } finally {
            consumer.shutdown();
            producer.shutdown();
        }
    }
}
