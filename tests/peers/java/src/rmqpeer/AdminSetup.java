package rmqpeer;

import com.alibaba.fastjson.JSON;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.impl.consumer.DefaultMQPushConsumerImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.admin.OffsetWrapper;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.body.ClusterInfo;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * State for the mqadmin comparisons, held while mqadmin runs: {@code java rmqpeer.AdminSetup hold
 * key=value...}.
 *
 * <p>Creates topic {@code topic} with {@code queues} queues on the cluster's one broker, sends
 * {@code count} messages from producer group {@code pgroup} (message i: body "TOPIC#i", keys "ki",
 * tag "TagA", to queue i % queues, so both brokers hold the same messages in the same places), starts
 * a push consumer of group {@code group} that consumes them all from the first offset and commits
 * its offsets. Prints one JSON line (the send results: msgId, offsetMsgId, queueId, queueOffset) and
 * keeps the producer and consumer connected until its stdin closes; a failure prints {"error":...}
 * and exits 1.
 */
public final class AdminSetup {
    private final Map<String, String> args = new HashMap<>();

    private AdminSetup(String[] argv) {
        for (int i = 1; i < argv.length; i++) {
            int eq = argv[i].indexOf('=');
            args.put(argv[i].substring(0, eq), argv[i].substring(eq + 1));
        }
    }

    public static void main(String[] argv) {
        System.setProperty("rocketmq.client.rebalance.waitInterval", "1000");
        try {
            if (!"hold".equals(argv[0])) {
                throw new IllegalArgumentException("unknown scenario " + argv[0]);
            }
            new AdminSetup(argv).hold();
            System.exit(0);
        } catch (Throwable t) {
            Map<String, Object> err = new LinkedHashMap<>();
            err.put("error", t.toString());
            System.out.println(JSON.toJSONString(err));
            System.out.flush();
            System.exit(1);
        }
    }

    private void hold() throws Exception {
        String namesrv = args.get("namesrv");
        String topic = args.get("topic");
        int queues = Integer.parseInt(args.get("queues"));
        int count = Integer.parseInt(args.get("count"));
        long timeout = Long.parseLong(args.getOrDefault("timeout", "60"));

        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.setInstanceName("setup-admin");
        admin.start();
        ClusterInfo cluster = admin.examineBrokerClusterInfo();
        String brokerAddr = cluster.getBrokerAddrTable().values().iterator().next().selectBrokerAddr();
        TopicConfig tc = new TopicConfig(topic, queues, queues, 6);
        admin.createAndUpdateTopicConfig(brokerAddr, tc);
        admin.shutdown();

        DefaultMQProducer producer = new DefaultMQProducer(args.get("pgroup"));
        producer.setNamesrvAddr(namesrv);
        producer.setPollNameServerInterval(1000);
        producer.start();
        List<Map<String, Object>> sent = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            Message m = new Message(topic, "TagA", "k" + i, (topic + "#" + i).getBytes(StandardCharsets.UTF_8));
            SendResult r = sendWithRetry(producer, m, i % queues, timeout);
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("msgId", r.getMsgId());
            row.put("offsetMsgId", r.getOffsetMsgId());
            row.put("queueId", r.getMessageQueue().getQueueId());
            row.put("queueOffset", r.getQueueOffset());
            sent.add(row);
        }

        CountDownLatch consumed = new CountDownLatch(count);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.get("group"));
        consumer.setNamesrvAddr(namesrv);
        consumer.setPollNameServerInterval(1000);
        consumer.setPersistConsumerOffsetInterval(1000);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            msgs.forEach(m -> consumed.countDown());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        if (!consumed.await(timeout, TimeUnit.SECONDS)) {
            throw new IllegalStateException("consumed only " + (count - consumed.getCount()) + " of " + count);
        }
        // Commit until the broker holds the offset of every queue the consumer holds, its retry topic's
        // included (assigned a moment later, once the route of that topic, made at the first heartbeat,
        // is known): the listener counts the last message down before the client moves that queue's
        // offset, the commit is oneway, and the consumer's own periodic commit only starts 10 s in. The
        // mqadmin output compared then does not depend on how far each broker's consumer has got.
        awaitCommitted(consumer, namesrv, args.get("group"), topic, queues, timeout);

        Map<String, Object> out = new LinkedHashMap<>();
        out.put("sent", sent);
        out.put("clientId", consumer.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId());
        System.out.println(JSON.toJSONString(out));
        System.out.flush();
        try {
            while (System.in.read() >= 0) {
                // Held until the test closes stdin.
            }
        } catch (IOException ignored) {
            // The test went away: stop as on EOF.
        }
        consumer.shutdown();
        producer.shutdown();
    }

    private static void awaitCommitted(DefaultMQPushConsumer consumer, String namesrv, String group, String topic,
            int queues, long timeout) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.setInstanceName("setup-check");
        admin.start();
        String retryTopic = MixAll.getRetryTopic(group);
        try {
            long deadline = System.currentTimeMillis() + timeout * 1000;
            String seen = "";
            while (true) {
                DefaultMQPushConsumerImpl impl = consumer.getDefaultMQPushConsumerImpl();
                impl.persistConsumerOffset();
                Set<MessageQueue> held = new HashSet<>(impl.getRebalanceImpl().getProcessQueueTable().keySet());
                long mine = held.stream().filter(mq -> mq.getTopic().equals(topic)).count();
                long retry = held.stream().filter(mq -> mq.getTopic().equals(retryTopic)).count();
                boolean done = mine == queues && retry > 0;
                try {
                    Map<MessageQueue, OffsetWrapper> table = admin.examineConsumeStats(group).getOffsetTable();
                    seen = "held " + held + ", broker " + table;
                    for (MessageQueue mq : held) {
                        OffsetWrapper o = table.get(mq);
                        done &= o != null && o.getConsumerOffset() == o.getBrokerOffset();
                    }
                } catch (Exception e) {
                    seen = e.toString();  // asked too early (no route of the retry topic yet)
                    done = false;
                }
                if (done) {
                    return;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("offsets not committed: " + seen);
                }
                Thread.sleep(100);
            }
        } finally {
            admin.shutdown();
        }
    }

    /** The topic was just created: the producer may not have its route yet (retried for `timeout` s). */
    private static SendResult sendWithRetry(DefaultMQProducer producer, Message m, int queueId, long timeout)
        throws Exception {
        long deadline = System.currentTimeMillis() + timeout * 1000;
        while (true) {
            try {
                return producer.send(m, (mqs, msg, arg) -> {
                    for (MessageQueue mq : mqs) {
                        if (mq.getQueueId() == (Integer) arg) {
                            return mq;
                        }
                    }
                    throw new IllegalStateException("no queue " + arg + " in " + mqs);
                }, queueId);
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
                Thread.sleep(200);
            }
        }
    }
}
