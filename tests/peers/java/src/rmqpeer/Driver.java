package rmqpeer;

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.serializer.SerializerFeature;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.store.OffsetStore;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;
import org.apache.rocketmq.common.admin.TopicStatsTable;
import org.apache.rocketmq.common.admin.TopicOffset;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

/**
 * One Java client 4.9.8 scenario per invocation: {@code java rmqpeer.Driver SCENARIO key=value...}.
 *
 * <p>Prints exactly one JSON object on stdout (the result) and exits 0; a failure prints
 * {"error": "..."} and exits 1. Client logs go wherever -Drocketmq.client.logRoot points.
 *
 * <p>Common keys: namesrv, topic, group, count, timeout (seconds, default 60). Messages sent by a
 * scenario have body "TOPIC#i", keys "ki", tag "TagA" for even i and "TagB" for odd i, property seq=i.
 */
public final class Driver {
    private final Map<String, String> args = new HashMap<>();

    private Driver(String[] argv) {
        for (int i = 1; i < argv.length; i++) {
            int eq = argv[i].indexOf('=');
            args.put(argv[i].substring(0, eq), argv[i].substring(eq + 1));
        }
    }

    public static void main(String[] argv) {
        // Rebalance every second, not every 20 s, and (setPollNameServerInterval below) learn routes
        // within a second: a queue or topic that appears mid-scenario (a group's %RETRY% topic, made on
        // the first send-back) is then consumed at once on either broker.
        System.setProperty("rocketmq.client.rebalance.waitInterval", "1000");
        int rc = 0;
        Object result;
        try {
            Driver d = new Driver(argv);
            switch (argv[0]) {
                case "send": result = d.send(); break;
                case "push": result = d.push(); break;
                case "lite_pull": result = d.litePull(); break;
                case "pull": result = d.pull(); break;
                case "transaction": result = d.transaction(); break;
                case "delay": result = d.delay(); break;
                case "retry": result = d.retry(); break;
                case "request_reply": result = d.requestReply(); break;
                case "trace": result = d.trace(); break;
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

    private String arg(String key, String dflt) {
        return args.getOrDefault(key, dflt);
    }

    private int count() {
        return Integer.parseInt(arg("count", "0"));
    }

    private long deadline() {
        return System.currentTimeMillis() + 1000L * Integer.parseInt(arg("timeout", "60"));
    }

    private Message message(String topic, int i) {
        Message m = new Message(topic, i % 2 == 0 ? "TagA" : "TagB", "k" + i,
            (topic + "#" + i).getBytes(StandardCharsets.UTF_8));
        m.putUserProperty("seq", Integer.toString(i));
        return m;
    }

    private static String body(MessageExt m) {
        return m.getBody() == null ? "" : new String(m.getBody(), StandardCharsets.UTF_8);
    }

    /** What a test compares about a received message (never ids, offsets or timestamps). */
    private static Map<String, Object> describe(MessageExt m) {
        Map<String, Object> d = new TreeMap<>();
        d.put("body", body(m));
        d.put("tags", m.getTags());
        d.put("keys", m.getKeys());
        d.put("seq", m.getUserProperty("seq"));
        d.put("reconsume", m.getReconsumeTimes());
        return d;
    }

    private DefaultMQProducer producer() throws MQClientException {
        DefaultMQProducer p = new DefaultMQProducer(arg("group") + "_P");
        p.setNamesrvAddr(arg("namesrv"));
        p.setInstanceName("p" + System.nanoTime());
        p.setPollNameServerInterval(1000);
        p.setSendMsgTimeout(10000);
        p.start();
        return p;
    }

    /** send mode=sync|async|oneway|batch|orderly [shards=4]: statuses and the queues written. */
    private Object send() throws Exception {
        String topic = arg("topic");
        String mode = arg("mode", "sync");
        int n = count();
        int shards = Integer.parseInt(arg("shards", "4"));
        DefaultMQProducer p = producer();
        Map<String, Integer> statuses = new TreeMap<>();
        List<String> errors = Collections.synchronizedList(new ArrayList<>());
        Map<Integer, Integer> queues = new TreeMap<>();
        try {
            if (mode.equals("batch")) {
                List<Message> batch = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    batch.add(message(topic, i));
                }
                SendResult r = p.send(batch);
                statuses.merge(r.getSendStatus().name(), 1, Integer::sum);
                queues.merge(r.getMessageQueue().getQueueId(), n, Integer::sum);
            } else if (mode.equals("async")) {
                CountDownLatch done = new CountDownLatch(n);
                Map<String, Integer> st = new ConcurrentHashMap<>();
                for (int i = 0; i < n; i++) {
                    p.send(message(topic, i), new SendCallback() {
                        @Override
                        public void onSuccess(SendResult r) {
                            st.merge(r.getSendStatus().name(), 1, Integer::sum);
                            done.countDown();
                        }

                        @Override
                        public void onException(Throwable e) {
                            errors.add(e.toString());
                            done.countDown();
                        }
                    });
                }
                if (!done.await(60, TimeUnit.SECONDS)) {
                    errors.add("async sends unanswered: " + done.getCount());
                }
                statuses.putAll(st);
            } else {
                for (int i = 0; i < n; i++) {
                    Message m = message(topic, i);
                    if (mode.equals("oneway")) {
                        p.sendOneway(m);
                        statuses.merge("ONEWAY", 1, Integer::sum);
                    } else if (mode.equals("orderly")) {
                        SendResult r = p.send(m, (mqs, msg, shard) -> mqs.get((Integer) shard % mqs.size()),
                            i % shards);
                        statuses.merge(r.getSendStatus().name(), 1, Integer::sum);
                        queues.merge(r.getMessageQueue().getQueueId(), 1, Integer::sum);
                    } else {
                        SendResult r = p.send(m);
                        statuses.merge(r.getSendStatus().name(), 1, Integer::sum);
                    }
                }
            }
        } catch (MQBrokerException e) {
            errors.add("broker code " + e.getResponseCode());
        } catch (MQClientException e) {
            errors.add("client code " + e.getResponseCode());
        } finally {
            p.shutdown();
        }
        Map<String, Object> out = new TreeMap<>();
        out.put("statuses", statuses);
        out.put("errors", errors);
        out.put("queues", queues);
        return out;
    }

    /**
     * push model=clustering|broadcasting orderly=0|1 consumers=K expect=N: K push consumers of one
     * group, from the first offset, until N distinct messages arrived (each consumer N, when
     * broadcasting). Orderly: each shard's seq must arrive ascending.
     */
    private Object push() throws Exception {
        String topic = arg("topic");
        int k = Integer.parseInt(arg("consumers", "1"));
        int expect = Integer.parseInt(arg("expect"));
        boolean broadcasting = arg("model", "clustering").equals("broadcasting");
        boolean orderly = arg("orderly", "0").equals("1");
        int shards = Integer.parseInt(arg("shards", "4"));
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        List<Map<String, Map<String, Object>>> seen = new ArrayList<>();
        List<Map<MessageQueue, Long>> consumedTo = new ArrayList<>();
        AtomicInteger deliveries = new AtomicInteger();
        List<String> orderErrors = Collections.synchronizedList(new ArrayList<>());
        Map<Integer, Integer> lastSeqByShard = new ConcurrentHashMap<>();
        for (int c = 0; c < k; c++) {
            DefaultMQPushConsumer pc = new DefaultMQPushConsumer(arg("group"));
            pc.setNamesrvAddr(arg("namesrv"));
            pc.setInstanceName("c" + c + "_" + System.nanoTime());
            pc.setPollNameServerInterval(1000);
            pc.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            pc.setMessageModel(broadcasting ? MessageModel.BROADCASTING : MessageModel.CLUSTERING);
            if (args.containsKey("sql")) {
                pc.subscribe(topic, MessageSelector.bySql(arg("sql")));
            } else {
                pc.subscribe(topic, arg("expression", "*"));
            }
            Map<String, Map<String, Object>> mine = new ConcurrentHashMap<>();
            seen.add(mine);
            Map<MessageQueue, Long> mineTo = new ConcurrentHashMap<>();
            consumedTo.add(mineTo);
            if (orderly) {
                pc.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                    for (MessageExt m : msgs) {
                        deliveries.incrementAndGet();
                        int seq = Integer.parseInt(m.getUserProperty("seq"));
                        Integer last = lastSeqByShard.put(seq % shards, seq);
                        if (last != null && last >= seq) {
                            orderErrors.add("shard " + (seq % shards) + ": " + seq + " after " + last);
                        }
                        mine.put(body(m), describe(m));
                        mineTo.merge(ctx.getMessageQueue(), m.getQueueOffset() + 1, Math::max);
                    }
                    return ConsumeOrderlyStatus.SUCCESS;
                });
            } else {
                pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                    for (MessageExt m : msgs) {
                        deliveries.incrementAndGet();
                        mine.put(body(m), describe(m));
                        mineTo.merge(ctx.getMessageQueue(), m.getQueueOffset() + 1, Math::max);
                    }
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
                });
            }
            pc.start();
            consumers.add(pc);
        }
        long deadline = deadline();
        while (System.currentTimeMillis() < deadline && !complete(seen, expect, broadcasting)) {
            Thread.sleep(50);
        }
        // A message is recorded before the client moves its queue's offset (once the listener has
        // returned), and shutdown commits the offsets at once: wait (bounded) until each consumer's own
        // offsets cover what it received on the queues it still holds, so the brokers' compare.
        for (int c = 0; c < k; c++) {
            OffsetStore store = consumers.get(c).getDefaultMQPushConsumerImpl().getOffsetStore();
            Map<MessageQueue, ProcessQueue> held =
                consumers.get(c).getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable();
            for (Map.Entry<MessageQueue, Long> e : consumedTo.get(c).entrySet()) {
                while (System.currentTimeMillis() < deadline) {
                    ProcessQueue pq = held.get(e.getKey());
                    if (pq == null || pq.isDropped()
                            || store.readOffset(e.getKey(), ReadOffsetType.READ_FROM_MEMORY) >= e.getValue()) {
                        break;
                    }
                    Thread.sleep(20);
                }
            }
        }
        for (DefaultMQPushConsumer pc : consumers) {
            pc.shutdown();
        }
        Map<String, Object> all = new TreeMap<>();
        List<Integer> perConsumer = new ArrayList<>();
        for (Map<String, Map<String, Object>> mine : seen) {
            all.putAll(mine);
            perConsumer.add(mine.size());
        }
        Map<String, Object> out = new TreeMap<>();
        out.put("messages", new ArrayList<>(all.values()));
        out.put("per_consumer", broadcasting ? perConsumer : Collections.singletonList(all.size()));
        out.put("order_errors", orderErrors);
        out.put("complete", complete(seen, expect, broadcasting));
        return out;
    }

    private static boolean complete(List<Map<String, Map<String, Object>>> seen, int expect, boolean each) {
        if (each) {
            for (Map<String, Map<String, Object>> mine : seen) {
                if (mine.size() < expect) {
                    return false;
                }
            }
            return true;
        }
        int total = 0;
        java.util.Set<String> union = new java.util.HashSet<>();
        for (Map<String, Map<String, Object>> mine : seen) {
            union.addAll(mine.keySet());
        }
        total = union.size();
        return total >= expect;
    }

    /**
     * lite_pull mode=subscribe|assign expect=N [seek=S] [drain=D]: DefaultLitePullConsumer. subscribe:
     * from the first offset until N messages, then commitSync. assign: all queues assigned; with drain,
     * first polled until D messages (read from each queue's start) and dropped; then each queue seeked
     * to S (default 0), polled until N messages, then commitSync. Reports the messages and, per queue
     * id, the committed offset.
     *
     * <p>Why drain: assign() starts a pull task per queue at once, and 4.9.8's seek() can race a task
     * whose pull is in flight (it checks "cancelled" before taking the queue's lock, and the new task
     * clears the seek offset outside it). The stale batch is then queued beside the seeked one, the
     * second poll of the same offsets leaves the consume offset at -1, and commitSync skips the queue.
     * Once the first reads are drained every task sits in a long poll at the queue's end, so the seek
     * no longer races a pull that can return data.
     */
    private Object litePull() throws Exception {
        String topic = arg("topic");
        int expect = Integer.parseInt(arg("expect"));
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(arg("group"));
        c.setNamesrvAddr(arg("namesrv"));
        c.setInstanceName("l" + System.nanoTime());
        c.setPollNameServerInterval(1000);
        c.setAutoCommit(false);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        boolean assign = arg("mode", "subscribe").equals("assign");
        Collection<MessageQueue> mqs = null;
        if (assign) {
            c.start();
            mqs = c.fetchMessageQueues(topic);
            c.assign(mqs);
            int drain = Integer.parseInt(arg("drain", "0"));
            Set<String> drained = new HashSet<>();
            long drainBy = deadline();
            while (drained.size() < drain && System.currentTimeMillis() < drainBy) {
                for (MessageExt m : c.poll(1000)) {
                    drained.add(body(m));
                }
            }
            if (drained.size() < drain) {
                throw new IllegalStateException("drained " + drained.size() + " of " + drain + " before the seek");
            }
            long seek = Long.parseLong(arg("seek", "0"));
            for (MessageQueue mq : mqs) {
                c.seek(mq, seek);
            }
        } else {
            c.subscribe(topic, arg("expression", "*"));
            c.start();
        }
        Map<String, Object> got = new TreeMap<>();
        Map<Integer, Long> consumedTo = new TreeMap<>();
        long deadline = deadline();
        while (got.size() < expect && System.currentTimeMillis() < deadline) {
            for (MessageExt m : c.poll(1000)) {
                got.put(body(m), describe(m));
                consumedTo.merge(m.getQueueId(), m.getQueueOffset() + 1, Math::max);
            }
        }
        c.commitSync();
        if (mqs == null) {
            mqs = c.assignment();
        }
        // commitSync sends the offsets oneway: read them back once the broker has them (bounded),
        // so both brokers are compared after the update, not racing it.
        Map<Integer, Long> committed = new TreeMap<>();
        for (MessageQueue mq : mqs) {
            Long want = consumedTo.get(mq.getQueueId());
            long have = c.committed(mq);
            for (int i = 0; i < 50 && want != null && have != want; i++) {
                Thread.sleep(100);
                have = c.committed(mq);
            }
            committed.put(mq.getQueueId(), have);
        }
        c.shutdown();
        Map<String, Object> out = new TreeMap<>();
        out.put("messages", new ArrayList<>(got.values()));
        out.put("committed", committed);
        return out;
    }

    /**
     * pull [expression=*] [expect=N]: DefaultMQPullConsumer reads every queue from 0 until NO_NEW_MSG
     * (passes repeat until N messages arrived), stores each queue's next offset as the group's
     * offset, then pulls once past the end (+5) of queue 0.
     */
    private Object pull() throws Exception {
        String topic = arg("topic");
        String expr = arg("expression", "*");
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(arg("group"));
        c.setNamesrvAddr(arg("namesrv"));
        c.setInstanceName("q" + System.nanoTime());
        c.setPollNameServerInterval(1000);
        c.start();
        Map<String, Object> got = new TreeMap<>();
        Map<Integer, Long> next = new TreeMap<>();
        Map<Integer, String> lastStatus = new TreeMap<>();
        MessageQueue first = null;
        int expect = Integer.parseInt(arg("expect", "0"));
        long deadline = deadline();
        do {
            if (!got.isEmpty()) {
                Thread.sleep(100);
            }
            first = pullPass(c, topic, expr, got, next, lastStatus);
        } while (got.size() < expect && System.currentTimeMillis() < deadline);
        for (Map.Entry<Integer, Long> e : next.entrySet()) {
            c.updateConsumeOffset(new MessageQueue(topic, first.getBrokerName(), e.getKey()), e.getValue());
        }
        Map<String, Object> out = new TreeMap<>();
        if (first != null) {
            PullResult beyond = c.pull(first, expr, next.get(first.getQueueId()) + 5, 32);
            out.put("beyond_status", beyond.getPullStatus().name());
            out.put("beyond_next", beyond.getNextBeginOffset());
            c.getOffsetStore().persistAll(new java.util.HashSet<>(
                Collections.singleton(first)));
            // persistAll sends the offset oneway: wait (bounded) until the broker has it, so
            // both brokers are compared after the update, not racing it.
            long want = next.get(first.getQueueId());
            long stored = c.fetchConsumeOffset(first, true);
            for (int i = 0; i < 50 && stored != want; i++) {
                Thread.sleep(100);
                stored = c.fetchConsumeOffset(first, true);
            }
            out.put("stored_first", stored);
        }
        c.shutdown();
        out.put("messages", new ArrayList<>(got.values()));
        out.put("next", next);
        out.put("last_status", lastStatus);
        return out;
    }

    /** One pass over every queue of the topic, each from 0 until no new message; returns queue 0. */
    private static MessageQueue pullPass(DefaultMQPullConsumer c, String topic, String expr,
            Map<String, Object> got, Map<Integer, Long> next, Map<Integer, String> lastStatus)
            throws Exception {
        MessageQueue first = null;
        for (MessageQueue mq : c.fetchSubscribeMessageQueues(topic)) {
            if (first == null || mq.getQueueId() < first.getQueueId()) {
                first = mq;
            }
            long offset = 0;
            while (true) {
                PullResult r = c.pull(mq, expr, offset, 32);
                lastStatus.put(mq.getQueueId(), r.getPullStatus().name());
                if (r.getMsgFoundList() != null) {
                    for (MessageExt m : r.getMsgFoundList()) {
                        got.put(body(m), describe(m));
                    }
                }
                if (r.getNextBeginOffset() == offset) {
                    break;
                }
                offset = r.getNextBeginOffset();
                if (r.getPullStatus().name().equals("NO_NEW_MSG")) {
                    break;
                }
            }
            next.put(mq.getQueueId(), offset);
        }
        return first;
    }

    /** A push consumer of the group, from the first offset, collecting into {@code into}. */
    private DefaultMQPushConsumer collector(String topic, Map<String, Map<String, Object>> into)
            throws MQClientException {
        DefaultMQPushConsumer pc = new DefaultMQPushConsumer(arg("group"));
        pc.setNamesrvAddr(arg("namesrv"));
        pc.setInstanceName("c" + System.nanoTime());
        pc.setPollNameServerInterval(1000);
        pc.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        pc.subscribe(topic, "*");
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                Map<String, Object> d = describe(m);
                d.put("delayed", m.getStoreTimestamp() - m.getBornTimestamp() >= 1000);
                into.put(body(m), d);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pc.start();
        return pc;
    }

    private void await(java.util.function.BooleanSupplier done) throws InterruptedException {
        long deadline = deadline();
        while (!done.getAsBoolean() && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
    }

    /**
     * transaction count=N: message i's local transaction answers COMMIT (i%3==0), ROLLBACK (i%3==1)
     * or UNKNOW (i%3==2, committed when the broker checks back). A consumer then waits for the
     * committed ones, and a little longer (settle=ms) for anything that should not come.
     */
    private Object transaction() throws Exception {
        String topic = arg("topic");
        int n = count();
        Map<String, Integer> checked = new ConcurrentHashMap<>();
        TransactionMQProducer p = new TransactionMQProducer(arg("group") + "_TX");
        p.setNamesrvAddr(arg("namesrv"));
        p.setInstanceName("t" + System.nanoTime());
        p.setPollNameServerInterval(1000);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                int seq = Integer.parseInt(msg.getUserProperty("seq"));
                return seq % 3 == 0 ? LocalTransactionState.COMMIT_MESSAGE
                    : seq % 3 == 1 ? LocalTransactionState.ROLLBACK_MESSAGE : LocalTransactionState.UNKNOW;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checked.merge(msg.getUserProperty("seq"), 1, Integer::sum);
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        p.start();
        Map<String, Integer> states = new TreeMap<>();
        for (int i = 0; i < n; i++) {
            SendResult r = p.sendMessageInTransaction(message(topic, i), null);
            states.merge(r.getSendStatus().name() + "/" + ((org.apache.rocketmq.client.producer.TransactionSendResult) r)
                .getLocalTransactionState().name(), 1, Integer::sum);
        }
        Map<String, Map<String, Object>> got = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c = collector(topic, got);
        int want = 0;
        for (int i = 0; i < n; i++) {
            want += i % 3 == 1 ? 0 : 1;
        }
        int wanted = want;
        await(() -> got.size() >= wanted && checked.size() >= n / 3);
        Thread.sleep(Long.parseLong(arg("settle", "0")));
        c.shutdown();
        p.shutdown();
        Map<String, Object> out = new TreeMap<>();
        out.put("states", states);
        out.put("checked", new java.util.TreeSet<>(checked.keySet()));
        out.put("messages", new ArrayList<>(new TreeMap<>(got).values()));
        return out;
    }

    /** delay count=N: message i is sent with delay level 1 + i%2; consumed from the first offset. */
    private Object delay() throws Exception {
        String topic = arg("topic");
        int n = count();
        DefaultMQProducer p = producer();
        Map<String, Integer> statuses = new TreeMap<>();
        for (int i = 0; i < n; i++) {
            Message m = message(topic, i);
            m.setDelayTimeLevel(1 + i % 2);
            statuses.merge(p.send(m).getSendStatus().name(), 1, Integer::sum);
        }
        Map<String, Map<String, Object>> got = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c = collector(topic, got);
        await(() -> got.size() >= n);
        c.shutdown();
        p.shutdown();
        Map<String, Object> out = new TreeMap<>();
        out.put("statuses", statuses);
        out.put("messages", new ArrayList<>(new TreeMap<>(got).values()));
        return out;
    }

    /**
     * retry count=N max=M: a listener that fails every delivery; each message comes back with
     * reconsumeTimes 1..M, then goes to %DLQ%group. Reports the reconsume counts seen per message
     * and how many messages the DLQ topic holds.
     */
    private Object retry() throws Exception {
        String topic = arg("topic");
        int n = count();
        int max = Integer.parseInt(arg("max", "2"));
        DefaultMQProducer p = producer();
        for (int i = 0; i < n; i++) {
            p.send(message(topic, i));
        }
        Map<String, java.util.SortedSet<Integer>> seen = new ConcurrentHashMap<>();
        DefaultMQPushConsumer pc = new DefaultMQPushConsumer(arg("group"));
        pc.setNamesrvAddr(arg("namesrv"));
        pc.setInstanceName("r" + System.nanoTime());
        pc.setPollNameServerInterval(1000);
        pc.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        pc.setMaxReconsumeTimes(max);
        pc.subscribe(topic, "*");
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                seen.computeIfAbsent(body(m), b -> new java.util.concurrent.ConcurrentSkipListSet<>())
                    .add(m.getReconsumeTimes());
            }
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });
        pc.start();
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(arg("namesrv"));
        admin.setInstanceName("a" + System.nanoTime());
        admin.setPollNameServerInterval(1000);
        admin.start();
        String dlq = "%DLQ%" + arg("group");
        long[] inDlq = {0};
        await(() -> {
            inDlq[0] = dlqCount(admin, dlq);
            return inDlq[0] >= n;
        });
        pc.shutdown();
        p.shutdown();
        admin.shutdown();
        Map<String, Object> out = new TreeMap<>();
        out.put("reconsume_seen", new TreeMap<>(seen));
        out.put("dlq", inDlq[0]);
        return out;
    }

    private static long dlqCount(DefaultMQAdminExt admin, String dlq) {
        try {
            TopicStatsTable stats = admin.examineTopicStats(dlq);
            long total = 0;
            for (TopicOffset o : stats.getOffsetTable().values()) {
                total += o.getMaxOffset() - o.getMinOffset();
            }
            return total;
        } catch (Exception e) {
            return 0;
        }
    }

    /** request_reply count=N: producer.request() against a consumer that replies "re:" + body. */
    private Object requestReply() throws Exception {
        String topic = arg("topic");
        int n = count();
        DefaultMQProducer replier = producer();
        DefaultMQPushConsumer pc = new DefaultMQPushConsumer(arg("group"));
        pc.setNamesrvAddr(arg("namesrv"));
        pc.setInstanceName("rr" + System.nanoTime());
        pc.setPollNameServerInterval(1000);
        // From the first offset: a request sent before this new group holds its queues is still answered.
        pc.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        pc.subscribe(topic, "*");
        // The topic exists before the consumer starts (else it only finds its queues at its next
        // periodic rebalance, 20 s on): a plain message creates it and is skipped below.
        replier.send(new Message(topic, "create".getBytes(StandardCharsets.UTF_8)));
        List<String> replyErrors = Collections.synchronizedList(new ArrayList<>());
        // Set before the shutdown below: a reply still being sent then (to a request retried after a
        // timeout) is interrupted by the consumer's own shutdown, which says nothing about the broker.
        java.util.concurrent.atomic.AtomicBoolean closing = new java.util.concurrent.atomic.AtomicBoolean();
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                if (MessageUtil.getReplyToClient(m) == null) {
                    continue;
                }
                try {
                    Message reply = MessageUtil.createReplyMessage(m,
                        ("re:" + body(m)).getBytes(StandardCharsets.UTF_8));
                    replier.send(reply);
                } catch (Exception e) {
                    if (!closing.get()) {
                        replyErrors.add(e.toString());
                    }
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pc.start();
        DefaultMQProducer requester = new DefaultMQProducer(arg("group") + "_REQ");
        requester.setNamesrvAddr(arg("namesrv"));
        requester.setInstanceName("rq" + System.nanoTime());
        requester.setPollNameServerInterval(1000);
        requester.start();
        List<String> replies = new ArrayList<>();
        List<String> errors = new ArrayList<>();
        long deadline = deadline();
        for (int i = 0; i < n; i++) {
            while (true) {
                try {
                    Message r = requester.request(message(topic, i), 10000);
                    replies.add(new String(r.getBody(), StandardCharsets.UTF_8));
                    break;
                } catch (Exception e) {
                    if (System.currentTimeMillis() > deadline) {
                        errors.add(e.toString());
                        break;
                    }
                }
            }
        }
        closing.set(true);
        requester.shutdown();
        pc.shutdown();
        replier.shutdown();
        Map<String, Object> out = new TreeMap<>();
        out.put("replies", replies);
        out.put("errors", errors);
        out.put("reply_errors", new ArrayList<>(replyErrors));
        return out;
    }

    /**
     * trace count=N: a producer with enableMsgTrace sends N messages; the trace topic
     * RMQ_SYS_TRACE_TOPIC is then read until a "Pub" trace names each message's key.
     */
    private Object trace() throws Exception {
        String topic = arg("topic");
        int n = count();
        DefaultMQProducer p = new DefaultMQProducer(arg("group") + "_P", true);
        p.setNamesrvAddr(arg("namesrv"));
        p.setInstanceName("tr" + System.nanoTime());
        p.setPollNameServerInterval(1000);
        p.start();
        for (int i = 0; i < n; i++) {
            p.send(message(topic, i));
        }
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(arg("group") + "_TRACE_READER");
        c.setNamesrvAddr(arg("namesrv"));
        c.setInstanceName("trr" + System.nanoTime());
        c.setPollNameServerInterval(1000);
        c.start();
        java.util.Set<String> traced = new java.util.TreeSet<>();
        long deadline = deadline();
        while (traced.size() < n && System.currentTimeMillis() < deadline) {
            Thread.sleep(200);
            traced.clear();
            Collection<MessageQueue> mqs;
            try {
                mqs = c.fetchSubscribeMessageQueues("RMQ_SYS_TRACE_TOPIC");
            } catch (MQClientException e) {
                continue;  // no trace sent yet: the topic is created by the first one
            }
            for (MessageQueue mq : mqs) {
                long offset = 0;
                while (true) {
                    PullResult r = c.pull(mq, "*", offset, 32);
                    if (r.getMsgFoundList() == null || r.getNextBeginOffset() == offset) {
                        break;
                    }
                    for (MessageExt m : r.getMsgFoundList()) {
                        String text = body(m);
                        for (String line : text.split(String.valueOf((char) 2))) {
                            String[] f = line.split(String.valueOf((char) 1));
                            if (f.length > 8 && f[0].equals("Pub") && f[4].equals(topic)) {
                                traced.add(f[7]);
                            }
                        }
                    }
                    offset = r.getNextBeginOffset();
                }
            }
        }
        c.shutdown();
        p.shutdown();
        Map<String, Object> out = new TreeMap<>();
        out.put("traced_keys", traced);
        return out;
    }
}
