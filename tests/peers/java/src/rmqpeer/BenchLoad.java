package rmqpeer;

import com.alibaba.fastjson.JSON;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
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
 * The benchmark load for {@code benches/apache_bench.py}: the same Java client 4.9.8 code against rmq and
 * Apache RocketMQ. {@code java rmqpeer.BenchLoad MODE key=value...}; prints one JSON object (last line).
 *
 * <p>{@code produce}: like Apache's benchmark Producer, {@code threads} threads (default 64) each sending
 * {@code size}-byte messages (default 1024) with a synchronous {@code send} in a loop, on {@code
 * producers} DefaultMQProducer instances (default 1, shared by all threads as Apache's benchmark does).
 * With {@code count=N} it sends exactly N messages and stops (a backlog for {@code consume}); otherwise
 * it runs {@code warmup} seconds unmeasured, prints {@code MEASURE-BEGIN}, counts the sends answered
 * during {@code duration} seconds, prints {@code MEASURE-END}, and reports the rate and the latency
 * (send to answer) of the sends started inside the window. Answers other than SEND_OK (a SYNC_MASTER's
 * FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE) are counted by status and not in the rate.
 *
 * <p>{@code consume kind=push|lite}: a DefaultMQPushConsumer (as Apache's benchmark Consumer; a listener
 * that only counts) or a DefaultLitePullConsumer of a new {@code group}, from the first offset, until
 * {@code count} messages arrived; {@code MEASURE-BEGIN} at the first message, {@code MEASURE-END} at the
 * last. With {@code warm=N}, N unmeasured drains by groups of their own come first in the same JVM, so the
 * measured one runs the client's code compiled (a fresh JVM's drain of a few seconds is otherwise much of
 * it spent in the JIT: its compiler thread was the busiest thread of the load).
 */
public final class BenchLoad {
    private final Map<String, String> args = new HashMap<>();

    private BenchLoad(String[] argv) {
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
            BenchLoad b = new BenchLoad(argv);
            switch (argv[0]) {
                case "produce": result = b.produce(); break;
                case "consume": result = b.consume(); break;
                default: throw new IllegalArgumentException("unknown mode " + argv[0]);
            }
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

    private String arg(String key, String dflt) {
        String v = args.getOrDefault(key, dflt);
        if (v == null) {
            throw new IllegalArgumentException("missing " + key + "=");
        }
        return v;
    }

    private int intArg(String key, int dflt) {
        return Integer.parseInt(arg(key, Integer.toString(dflt)));
    }

    private static void mark(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static double cpuSeconds() {
        java.lang.management.OperatingSystemMXBean os =
            java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() / 1e9;
        }
        return -1;
    }

    /** Growable array of latencies (µs) owned by one thread. */
    private static final class Lat {
        long[] v = new long[1 << 14];
        int n;

        void add(long x) {
            if (n == v.length) {
                v = Arrays.copyOf(v, n * 2);
            }
            v[n++] = x;
        }
    }

    private Object produce() throws Exception {
        String namesrv = arg("namesrv", null);
        String topic = arg("topic", null);
        int threads = intArg("threads", 64);
        int size = intArg("size", 1024);
        int instances = intArg("producers", 1);
        long count = Long.parseLong(arg("count", "0"));
        double warmup = Double.parseDouble(arg("warmup", "3"));
        double duration = Double.parseDouble(arg("duration", "8"));
        byte[] body = new byte[size];
        for (int i = 0; i < size; i++) {
            body[i] = (byte) ('a' + i % 26);
        }
        List<DefaultMQProducer> producers = new ArrayList<>();
        for (int i = 0; i < instances; i++) {
            DefaultMQProducer p = new DefaultMQProducer(arg("group", "bench_pg"));
            p.setNamesrvAddr(namesrv);
            p.setInstanceName("bench" + i + "_" + System.nanoTime());
            p.setSendMsgTimeout(intArg("send_timeout_ms", 10000));
            p.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
            p.start();
            producers.add(p);
        }
        // One send per producer first: routes fetched and connections open before any clock starts.
        for (DefaultMQProducer p : producers) {
            p.send(new Message(topic, body));
        }
        LongAdder ok = new LongAdder();
        LongAdder failed = new LongAdder();
        AtomicLong tickets = new AtomicLong();
        Map<String, LongAdder> statuses = new ConcurrentHashMap<>();
        Map<String, LongAdder> errors = new ConcurrentHashMap<>();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong winBegin = new AtomicLong(Long.MAX_VALUE);  // the window, in nanoTime, set by main
        AtomicLong winEnd = new AtomicLong(Long.MAX_VALUE);
        Lat[] lats = new Lat[threads];
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            DefaultMQProducer p = producers.get(t % instances);
            Lat lat = lats[t] = new Lat();
            workers[t] = new Thread(() -> {
                while (!stop.get() && (count == 0 || tickets.getAndIncrement() < count)) {
                    long t0 = System.nanoTime();
                    try {
                        SendResult r = p.send(new Message(topic, body));
                        long t1 = System.nanoTime();
                        if (r.getSendStatus() == SendStatus.SEND_OK) {
                            ok.increment();
                        } else {
                            failed.increment();
                        }
                        statuses.computeIfAbsent(r.getSendStatus().name(), k -> new LongAdder()).increment();
                        if (t0 >= winBegin.get() && t0 < winEnd.get()) {
                            lat.add((t1 - t0) / 1000);
                        }
                    } catch (Exception e) {
                        failed.increment();
                        String k = e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage());
                        errors.computeIfAbsent(k.length() > 120 ? k.substring(0, 120) : k,
                            x -> new LongAdder()).increment();
                    }
                }
            }, "bench-" + t);
            workers[t].start();
        }
        Map<String, Object> out = new TreeMap<>();
        if (count > 0) {
            long start = System.nanoTime();
            for (Thread w : workers) {
                w.join();
            }
            out.put("seconds", (System.nanoTime() - start) / 1e9);
        } else {
            Thread.sleep((long) (warmup * 1000));
            long ok0 = ok.sum();
            double cpu0 = cpuSeconds();
            long begin = System.nanoTime();
            winEnd.set(begin + (long) (duration * 1e9));
            winBegin.set(begin);
            mark("MEASURE-BEGIN");
            Thread.sleep((long) (duration * 1000));
            long ok1 = ok.sum();
            long end = System.nanoTime();
            double cpu1 = cpuSeconds();
            mark("MEASURE-END");
            stop.set(true);
            for (Thread w : workers) {
                w.join(30000);
            }
            double secs = (end - begin) / 1e9;
            long msgs = ok1 - ok0;
            out.put("msgs", msgs);
            out.put("seconds", secs);
            out.put("rate", msgs / secs);
            out.put("cpu_seconds", cpu1 - cpu0);
            long[] all = new long[0];
            for (Lat l : lats) {
                int at = all.length;
                all = Arrays.copyOf(all, at + l.n);
                System.arraycopy(l.v, 0, all, at, l.n);
            }
            Arrays.sort(all);
            if (all.length > 0) {
                out.put("p50_us", all[(int) Math.round(0.50 * (all.length - 1))]);
                out.put("p99_us", all[(int) Math.round(0.99 * (all.length - 1))]);
            }
        }
        for (DefaultMQProducer p : producers) {
            p.shutdown();
        }
        out.put("mode", "produce");
        out.put("sent_ok", ok.sum());
        out.put("failed", failed.sum());
        out.put("statuses", sums(statuses));
        out.put("errors", sums(errors));
        return out;
    }

    private static Map<String, Long> sums(Map<String, LongAdder> m) {
        Map<String, Long> out = new TreeMap<>();
        m.forEach((k, v) -> out.put(k, v.sum()));
        return out;
    }

    private Object consume() throws Exception {
        String namesrv = arg("namesrv", null);
        String topic = arg("topic", null);
        String group = arg("group", null);
        long count = Long.parseLong(arg("count", null));
        long timeout = 1000L * intArg("timeout", 300);
        String kind = arg("kind", "push");
        int warm = intArg("warm", 0);
        Map<String, Object> out = new TreeMap<>();
        // Unmeasured drains first, each by a group of its own, in this JVM: its JIT compiles the
        // client's pull and decode paths (and the broker's) before the measured drain.
        List<Long> warmMsgs = new ArrayList<>();
        for (int i = 0; i < warm; i++) {
            long got = drain(namesrv, topic, group + "_warm" + i, kind, count, timeout, false).got.get();
            if (got < count) {
                throw new IllegalStateException("warm-up drain got only " + got + " of " + count);
            }
            warmMsgs.add(got);
        }
        Drain d = drain(namesrv, topic, group, kind, count, timeout, true);
        out.put("finished", d.got.get() >= count);
        out.put("warm_msgs", warmMsgs);
        out.put("mode", "consume");
        out.put("kind", kind);
        out.put("msgs", d.got.get());
        if (d.times[1] > d.times[0]) {
            double secs = (d.times[1] - d.times[0]) / 1e9;
            out.put("seconds", secs);
            out.put("rate", count / secs);
            out.put("cpu_seconds", d.cpu[1] - d.cpu[0]);
        }
        return out;
    }

    /** What one drain saw: messages, and the clock and CPU at its first and last message. */
    private static final class Drain {
        final AtomicLong got = new AtomicLong();
        final long[] times = new long[2];
        final double[] cpu = new double[2];
    }

    /**
     * Drain {@code count} messages of {@code topic} by a new {@code group} from the first offset;
     * with {@code measure}, {@code MEASURE-BEGIN} at the first message and {@code MEASURE-END} at
     * the last.
     */
    private static Drain drain(String namesrv, String topic, String group, String kind, long count,
            long timeout, boolean measure) throws Exception {
        Drain d = new Drain();
        AtomicLong got = d.got;
        CountDownLatch done = new CountDownLatch(1);
        AtomicBoolean begun = new AtomicBoolean();
        Runnable onFirst = () -> {
            if (begun.compareAndSet(false, true)) {
                d.times[0] = System.nanoTime();
                d.cpu[0] = cpuSeconds();
                if (measure) {
                    mark("MEASURE-BEGIN");
                }
            }
        };
        Runnable onLast = () -> {
            d.times[1] = System.nanoTime();
            d.cpu[1] = cpuSeconds();
            if (measure) {
                mark("MEASURE-END");
            }
            done.countDown();
        };
        if (kind.equals("push")) {
            DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
            c.setNamesrvAddr(namesrv);
            c.setInstanceName("bench_c_" + System.nanoTime());
            c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            c.subscribe(topic, "*");
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                onFirst.run();
                long before = got.getAndAdd(msgs.size());
                if (before < count && before + msgs.size() >= count) {
                    onLast.run();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            done.await(timeout, TimeUnit.MILLISECONDS);
            c.shutdown();
        } else {
            DefaultLitePullConsumer c = new DefaultLitePullConsumer(group);
            c.setNamesrvAddr(namesrv);
            c.setInstanceName("bench_c_" + System.nanoTime());
            c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            c.setPullBatchSize(32);
            c.subscribe(topic, "*");
            c.start();
            long deadline = System.currentTimeMillis() + timeout;
            while (got.get() < count && System.currentTimeMillis() < deadline) {
                List<MessageExt> msgs = c.poll(1000);
                if (!msgs.isEmpty()) {
                    onFirst.run();
                    if (got.addAndGet(msgs.size()) >= count) {
                        onLast.run();
                    }
                }
            }
            c.shutdown();
        }
        return d;
    }
}
