package rmqpeer;

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.serializer.SerializerFeature;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.store.OffsetStore;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.impl.MQAdminImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Fills a broker's store with what the store-exchange test hands to the other broker, and reads it
 * back there: {@code java rmqpeer.StoreFeed SCENARIO key=value...}, one JSON object on stdout (exit
 * 0), or {"error": "..."} (exit 1), like {@link Driver}.
 *
 * <p>Keys: namesrv, topic, group, timeout (seconds, default 60). Every message carries the user
 * properties kind and seq; its body is "TOPIC#kind#seq" (the big one is padded past 4 KiB, so the
 * client compresses it).
 */
public final class StoreFeed {
    private static final int BIG = 12000;
    private static final int BULK = 1200;
    private final Map<String, String> args = new HashMap<>();

    private StoreFeed(String[] argv) {
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
            StoreFeed f = new StoreFeed(argv);
            switch (argv[0]) {
                case "feed": result = f.feed(); break;
                case "drain": result = f.drain(); break;
                default: throw new IllegalArgumentException("unknown scenario " + argv[0]);
            }
        } catch (Throwable t) {
            Map<String, Object> err = new TreeMap<>();
            err.put("error", t.toString());
            result = err;
            rc = 1;
        }
        System.out.println(JSON.toJSONString(result, SerializerFeature.WriteNonStringKeyAsString));
        System.out.flush();
        System.exit(rc);
    }

    private String arg(String key) {
        String v = args.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing " + key + "=");
        }
        return v;
    }

    private long deadline() {
        return System.currentTimeMillis() + 1000L * Integer.parseInt(args.getOrDefault("timeout", "60"));
    }

    private Message message(String kind, int seq) {
        String topic = arg("topic");
        StringBuilder body = new StringBuilder(topic + "#" + kind + "#" + seq);
        int size = kind.equals("big") ? BIG : kind.equals("bulk") ? BULK : 0;
        if (size > 0) {
            for (int i = 0; body.length() < size; i++) {
                body.append(' ').append(i);
            }
        }
        Message m = new Message(topic, seq % 2 == 0 ? "TagA" : "TagB", "k" + kind + seq + " shared",
            body.toString().getBytes(StandardCharsets.UTF_8));
        m.putUserProperty("kind", kind);
        m.putUserProperty("seq", Integer.toString(seq));
        return m;
    }

    /** What was sent, as the test compares it with what is read back. */
    private static Map<String, Object> sent(Message m, SendResult r, String phase) {
        Map<String, Object> d = new TreeMap<>();
        d.put("msg_id", MessageClientIDSetter.getUniqID(m));
        d.put("body", new String(m.getBody(), StandardCharsets.UTF_8));
        d.put("tags", m.getTags());
        d.put("keys", m.getKeys());
        d.put("kind", m.getUserProperty("kind"));
        d.put("seq", m.getUserProperty("seq"));
        d.put("phase", phase);
        d.put("status", r.getSendStatus().name());
        d.put("queue_id", r.getMessageQueue().getQueueId());
        d.put("queue_offset", r.getQueueOffset());
        return d;
    }

    /** What was read back: the same fields, from the broker. */
    private static Map<String, Object> received(MessageExt m) {
        Map<String, Object> d = new TreeMap<>();
        d.put("msg_id", MessageClientIDSetter.getUniqID(m));
        d.put("body", m.getBody() == null ? "" : new String(m.getBody(), StandardCharsets.UTF_8));
        d.put("tags", m.getTags());
        d.put("keys", m.getKeys());
        d.put("kind", m.getUserProperty("kind"));
        d.put("seq", m.getUserProperty("seq"));
        d.put("queue_id", m.getQueueId());
        d.put("queue_offset", m.getQueueOffset());
        d.put("sys_flag", m.getSysFlag());
        d.put("reconsume", m.getReconsumeTimes());
        d.put("retry_topic", m.getProperty("RETRY_TOPIC"));
        return d;
    }

    private DefaultMQProducer producer() throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(arg("group") + "_P");
        p.setNamesrvAddr(arg("namesrv"));
        p.setInstanceName("p" + System.nanoTime());
        p.setPollNameServerInterval(1000);
        p.setSendMsgTimeout(10000);
        p.start();
        return p;
    }

    private static void check(SendResult r) {
        if (r.getSendStatus() != SendStatus.SEND_OK) {
            throw new IllegalStateException("send answered " + r);
        }
    }

    /**
     * feed: phase A (8 messages with tags and keys, a batch of 4, three batches of 16 bulk messages,
     * a big compressed body, a message delayed by level 1, a committed, a rolled-back and an unknown
     * transaction) is consumed by group, whose offsets are then committed up to the end of every
     * queue, and by group_retry, which has the first message redelivered later (level 3); phase B (6
     * more messages, a bulk batch and one delayed by level 3, which the source broker is set up to
     * hold for long) is left unconsumed.
     */
    private Object feed() throws Exception {
        String topic = arg("topic");
        List<Map<String, Object>> out = new ArrayList<>();
        DefaultMQProducer p = producer();
        try {
            for (int i = 0; i < 8; i++) {
                Message m = message("plain", i);
                SendResult r = p.send(m);
                check(r);
                out.add(sent(m, r, "A"));
            }
            List<Message> batch = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                batch.add(message("batch", i));
            }
            SendResult br = p.send(batch);
            check(br);
            for (int i = 0; i < batch.size(); i++) {
                Map<String, Object> d = sent(batch.get(i), br, "A");
                d.put("queue_offset", br.getQueueOffset() + i);
                out.add(d);
            }
            out.addAll(bulk(p, 0, 3, "A"));
            Message big = message("big", 0);
            SendResult bigR = p.send(big);
            check(bigR);
            out.add(sent(big, bigR, "A"));
            Message delayed = message("delay1", 0);
            delayed.setDelayTimeLevel(1);
            SendResult dr = p.send(delayed);
            check(dr);
            out.add(sent(delayed, dr, "A"));
            out.addAll(transactions());

            // Phase A consumed by the group; offsets committed up to each queue's end.
            Set<String> want = new java.util.HashSet<>();
            for (Map<String, Object> d : out) {
                if (!d.get("kind").equals("txr") && !d.get("kind").equals("txu")) {
                    want.add((String) d.get("msg_id"));
                }
            }
            Map<String, Map<String, Object>> got = consume(topic, arg("group"), want, null);
            // A second group has the first plain message redelivered: its first delivery answers
            // RECONSUME_LATER, so the broker parks it for level 3 (an hour on the source).
            String retried = (String) out.get(0).get("msg_id");
            Set<String> rest = new java.util.HashSet<>(want);
            rest.remove(retried);
            consume(topic, arg("group") + "_retry", rest, retried);
            Map<Integer, Long> committed = awaitCommitted(topic);

            for (int i = 8; i < 14; i++) {
                Message m = message("plain", i);
                SendResult r = p.send(m);
                check(r);
                out.add(sent(m, r, "B"));
            }
            out.addAll(bulk(p, 3, 1, "B"));
            Message pending = message("delay3", 0);
            pending.setDelayTimeLevel(3);
            SendResult pr = p.send(pending);
            check(pr);
            out.add(sent(pending, pr, "B"));
            Map<String, Object> res = new TreeMap<>();
            res.put("sent", out);
            res.put("consumed", new ArrayList<>(got.values()));
            res.put("committed", committed);
            res.put("retried", retried);
            return res;
        } finally {
            p.shutdown();
        }
    }

    /** A transaction producer of the test's group; checks are answered by kind and counted. */
    private TransactionMQProducer txProducer(Map<String, Integer> checked, LocalTransactionState unknown)
            throws Exception {
        TransactionMQProducer tp = new TransactionMQProducer(arg("group") + "_TX");
        tp.setNamesrvAddr(arg("namesrv"));
        tp.setInstanceName("t" + System.nanoTime());
        tp.setPollNameServerInterval(1000);
        tp.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                String kind = msg.getUserProperty("kind");
                return kind.equals("txc") ? LocalTransactionState.COMMIT_MESSAGE
                    : kind.equals("txr") ? LocalTransactionState.ROLLBACK_MESSAGE : LocalTransactionState.UNKNOW;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                String kind = msg.getUserProperty("kind");
                checked.merge(kind, 1, Integer::sum);
                return kind.equals("txu") ? unknown : LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        tp.start();
        return tp;
    }

    /** Batches of 16 "bulk" messages (1200-byte bodies, not compressed): they roll the files over. */
    private List<Map<String, Object>> bulk(DefaultMQProducer p, int first, int batches, String phase)
            throws Exception {
        List<Map<String, Object>> out = new ArrayList<>();
        for (int b = first; b < first + batches; b++) {
            List<Message> batch = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                batch.add(message("bulk", b * 16 + i));
            }
            SendResult r = p.send(batch);
            check(r);
            for (int i = 0; i < batch.size(); i++) {
                Map<String, Object> d = sent(batch.get(i), r, phase);
                d.put("queue_offset", r.getQueueOffset() + i);
                out.add(d);
            }
        }
        return out;
    }

    /** txc committed, txr rolled back, txu left unknown (its checks answer UNKNOW here). */
    private List<Map<String, Object>> transactions() throws Exception {
        TransactionMQProducer tp = txProducer(new ConcurrentHashMap<>(), LocalTransactionState.UNKNOW);
        List<Map<String, Object>> out = new ArrayList<>();
        try {
            for (String kind : new String[] {"txc", "txr", "txu"}) {
                Message m = message(kind, 0);
                SendResult r = tp.sendMessageInTransaction(m, null);
                check(r);
                Map<String, Object> d = sent(m, r, "A");
                // The half message's queue and offset, not the real topic's: compared by id only.
                d.remove("queue_offset");
                out.add(d);
            }
        } finally {
            tp.shutdown();
        }
        return out;
    }

    /**
     * A push consumer of group until every id in want arrived and was acknowledged; then shut down
     * (offsets committed). The first delivery of message reject (if any) answers RECONSUME_LATER.
     */
    private Map<String, Map<String, Object>> consume(String topic, String group, Set<String> want,
            String reject) throws Exception {
        Map<String, Map<String, Object>> got = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(arg("namesrv"));
        c.setInstanceName("c" + System.nanoTime());
        c.setPollNameServerInterval(1000);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                String id = MessageClientIDSetter.getUniqID(m);
                if (id.equals(reject) && m.getReconsumeTimes() == 0) {
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
                got.put(id, received(m));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        long deadline = deadline();
        while (!got.keySet().containsAll(want) && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
        // A message is acknowledged once its listener call returned: wait until the consumer's own
        // offsets reach every queue's end, so the shutdown commits them all.
        OffsetStore store = c.getDefaultMQPushConsumerImpl().getOffsetStore();
        MQAdminImpl admin = c.getDefaultMQPushConsumerImpl().getmQClientFactory().getMQAdminImpl();
        for (MessageQueue mq : c.fetchSubscribeMessageQueues(topic)) {
            long end = admin.maxOffset(mq);
            while (store.readOffset(mq, ReadOffsetType.READ_FROM_MEMORY) < end
                    && System.currentTimeMillis() < deadline) {
                Thread.sleep(50);
            }
        }
        c.shutdown();
        if (!got.keySet().containsAll(want)) {
            throw new IllegalStateException("consumed " + got.size() + " of " + want.size());
        }
        return got;
    }

    /** Wait (bounded) until the broker holds the group's offset at the end of every queue. */
    private Map<Integer, Long> awaitCommitted(String topic) throws Exception {
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(arg("group"));
        c.setNamesrvAddr(arg("namesrv"));
        c.setInstanceName("o" + System.nanoTime());
        c.start();
        try {
            long deadline = deadline();
            while (true) {
                Map<Integer, Long> committed = new TreeMap<>();
                boolean done = true;
                for (MessageQueue mq : c.fetchSubscribeMessageQueues(topic)) {
                    long stored = c.fetchConsumeOffset(mq, true);
                    committed.put(mq.getQueueId(), stored);
                    done &= stored == c.maxOffset(mq);
                }
                if (done) {
                    return committed;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("offsets not committed: " + committed);
                }
                Thread.sleep(100);
            }
        } finally {
            c.shutdown();
        }
    }

    /**
     * drain fresh=GROUP2 await=ID,ID: sends one message to every queue of the topic (kind "new"),
     * then reads every queue from offset 0 as group fresh until the awaited ids are there, and the
     * group's range: each queue from its committed offset to the end.
     */
    private Object drain() throws Exception {
        String topic = arg("topic");
        List<Map<String, Object>> sentNew = new ArrayList<>();
        DefaultMQProducer p = producer();
        try {
            List<MessageQueue> queues = p.fetchPublishMessageQueues(topic);
            for (MessageQueue mq : queues) {
                Message m = message("new", mq.getQueueId());
                SendResult r = p.send(m, mq);
                check(r);
                sentNew.add(sent(m, r, "new"));
            }
        } finally {
            p.shutdown();
        }
        Set<String> await = new java.util.HashSet<>();
        for (Map<String, Object> d : sentNew) {
            await.add((String) d.get("msg_id"));
        }
        for (String id : arg("await").split(",")) {
            await.add(id);
        }
        Map<String, Object> res = new TreeMap<>();
        res.put("sent", sentNew);
        // The target checks back the transaction the source left unknown: this producer commits it.
        Map<String, Integer> checked = new ConcurrentHashMap<>();
        TransactionMQProducer tp = txProducer(checked, LocalTransactionState.COMMIT_MESSAGE);
        DefaultMQPullConsumer fresh = new DefaultMQPullConsumer(arg("fresh"));
        fresh.setNamesrvAddr(arg("namesrv"));
        fresh.setInstanceName("f" + System.nanoTime());
        fresh.start();
        try {
            long deadline = deadline();
            List<Map<String, Object>> all;
            List<Map<String, Object>> retry;
            String retryTopic = "%RETRY%" + arg("group") + "_retry";
            while (true) {
                all = new ArrayList<>();
                for (MessageQueue mq : fresh.fetchSubscribeMessageQueues(topic)) {
                    all.addAll(pullRange(fresh, mq, 0));
                }
                retry = new ArrayList<>();
                for (MessageQueue mq : fresh.fetchSubscribeMessageQueues(retryTopic)) {
                    retry.addAll(pullRange(fresh, mq, 0));
                }
                Set<String> ids = new java.util.HashSet<>();
                for (Map<String, Object> d : all) {
                    ids.add((String) d.get("msg_id"));
                }
                if (ids.containsAll(await) && !retry.isEmpty() || System.currentTimeMillis() > deadline) {
                    break;
                }
                Thread.sleep(200);
            }
            res.put("all", all);
            res.put("retry", retry);
            res.put("checked", new TreeMap<>(checked));
            // The index: every message by its unique key and by its own key (each message's first key
            // is its own; the second, "shared", is on all of them, more than one query returns).
            // The key query is bounded in time the way consoles ask (the last ten minutes), so the index
            // files' time range and each entry's time difference count; a unique key query starts at
            // the time in the id.
            long end = System.currentTimeMillis() + 60_000;
            long begin = end - 11 * 60_000;
            Map<String, String> byUniq = new TreeMap<>();
            Map<String, List<String>> byKey = new TreeMap<>();
            for (Map<String, Object> d : all) {
                String id = (String) d.get("msg_id");
                MessageExt m = fresh.getDefaultMQPullConsumerImpl().queryMessageByUniqKey(topic, id);
                byUniq.put(id, m == null ? null : new String(m.getBody(), StandardCharsets.UTF_8));
                List<String> ids = new ArrayList<>();
                String key = ((String) d.get("keys")).split(" ")[0];
                for (MessageExt k : fresh.queryMessage(topic, key, 32, begin, end).getMessageList()) {
                    ids.add(MessageClientIDSetter.getUniqID(k));
                }
                byKey.put(id, ids);
            }
            res.put("by_uniq_key", byUniq);
            res.put("by_key", byKey);
        } finally {
            fresh.shutdown();
            tp.shutdown();
        }
        DefaultMQPullConsumer group = new DefaultMQPullConsumer(arg("group"));
        group.setNamesrvAddr(arg("namesrv"));
        group.setInstanceName("g" + System.nanoTime());
        group.start();
        try {
            Map<Integer, Long> committed = new TreeMap<>();
            List<Map<String, Object>> rest = new ArrayList<>();
            for (MessageQueue mq : group.fetchSubscribeMessageQueues(topic)) {
                long from = group.fetchConsumeOffset(mq, true);
                committed.put(mq.getQueueId(), from);
                rest.addAll(pullRange(group, mq, from));
            }
            res.put("committed", committed);
            res.put("rest", rest);
        } finally {
            group.shutdown();
        }
        return res;
    }

    /** Every message of one queue from offset until the broker has no newer one. */
    private static List<Map<String, Object>> pullRange(DefaultMQPullConsumer c, MessageQueue mq, long offset)
            throws Exception {
        List<Map<String, Object>> out = new ArrayList<>();
        while (true) {
            PullResult r = c.pull(mq, "*", offset, 32);
            Collection<MessageExt> found = r.getMsgFoundList();
            if (found != null) {
                for (MessageExt m : found) {
                    out.add(received(m));
                }
            }
            if (r.getNextBeginOffset() == offset || r.getPullStatus().name().equals("NO_NEW_MSG")) {
                return out;
            }
            offset = r.getNextBeginOffset();
        }
    }
}
