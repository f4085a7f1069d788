package rmqbench5;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.LongAdder;
import java.util.stream.Collectors;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * The load of {@code benches/grpc5_bench.py}: the official RocketMQ 5.x Java client (rocketmq-client-java
 * 5.2.0, gRPC), the same code against rmq's gRPC endpoint and Apache RocketMQ 5.x's proxy.
 * {@code java rmqbench5.Grpc5Load MODE key=value...}; prints one JSON object (its last line), in the shape
 * {@code benches/apache_bench.py}'s {@code measured} reads (the modes are named as BenchLoad's).
 *
 * <p>{@code produce}: {@code inflight} (default 64) asynchronous sends of a {@code size}-byte message
 * (default 1024) kept in flight on one Producer ({@code sendAsync}; each answer lets the next send go):
 * {@code warmup} seconds unmeasured, {@code MEASURE-BEGIN}, the sends answered during {@code duration}
 * seconds, {@code MEASURE-END}; p50/p99 latency (send to answer, to 2%) of the sends started in the window.
 * A send that fails is counted by its exception, not in the rate.
 *
 * <p>{@code consume}: {@code consumers} SimpleConsumers of {@code group} (default 4, a thread each), each
 * receiving batches of up to {@code batch} (default 32; long polling of {@code await} s, default 5; messages
 * invisible {@code invisible} s, default 60) and acking every message of a batch ({@code ackAsync}, all
 * answered before its next receive); {@code MEASURE-BEGIN} at the first batch, {@code MEASURE-END}
 * {@code duration} seconds later, or at the ack of the {@code count}-th message (the backlog's last: then
 * {@code exhausted} is true) if that comes first; {@code window_msgs} are the messages acked in between.
 * With {@code warm=S} and
 * {@code warmGroup=G}, consumers of group G receive and ack for S seconds first, unmeasured (the client's and
 * the server's receive paths compiled by their JITs).
 */
public final class Grpc5Load {
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();
    /** Latency buckets: bucket i holds latencies up to 1.02^i µs (2% wide), 1,200 of them (~20 min). */
    private static final double STEP = Math.log(1.02);
    private static final int BUCKETS = 1200;
    private final Map<String, String> args;

    private Grpc5Load(String[] argv) {
        args = Arrays.stream(argv).skip(1).map(kv -> kv.split("=", 2))
            .collect(Collectors.toMap(kv -> kv[0], kv -> kv.length > 1 ? kv[1] : ""));
    }

    public static void main(String[] argv) {
        int rc = 0;
        Map<String, Object> result;
        try {
            Grpc5Load b = new Grpc5Load(argv);
            result = "produce".equals(argv[0]) ? b.produce() : "consume".equals(argv[0]) ? b.consume() : null;
            if (result == null) {
                throw new IllegalArgumentException("unknown mode " + argv[0]);
            }
        } catch (Throwable t) {
            t.printStackTrace();
            result = new TreeMap<>();
            result.put("error", label(t.toString()));
            rc = 1;
        }
        System.out.println(json(result));
        System.out.flush();
        System.exit(rc); // the client's gRPC threads would keep the JVM alive a while
    }

    /** The argument {@code key}; without a default it must be given. */
    private String arg(String key, String... dflt) {
        String v = args.get(key);
        if (v != null) {
            return v;
        }
        if (dflt.length == 0) {
            throw new IllegalArgumentException("missing " + key + "=");
        }
        return dflt[0];
    }

    private double num(String key, double dflt) {
        return Double.parseDouble(arg(key, Double.toString(dflt)));
    }

    private ClientConfiguration config() {
        return ClientConfiguration.newBuilder()
            .setEndpoints(arg("endpoints"))
            .setRequestTimeout(Duration.ofSeconds(10))
            // rmq's endpoint serves plaintext (Apache's proxy both on one port): no TLS on either side.
            .enableSsl(false)
            .build();
    }

    private static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** An error's kind as a JSON-safe label: its class and message, at most 120 characters. */
    private static String label(String text) {
        String k = text.replaceAll("[^A-Za-z0-9 .,:;=()/_-]", "_");
        return k.length() > 120 ? k.substring(0, 120) : k;
    }

    private static void failure(Map<String, LongAdder> errors, Throwable e) {
        Throwable cause = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
        errors.computeIfAbsent(label(cause.getClass().getSimpleName() + ": " + cause.getMessage()),
            x -> new LongAdder()).increment();
    }

    private static Map<String, Long> totals(Map<String, LongAdder> errors) {
        return new TreeMap<>(errors.entrySet().stream()
            .collect(Collectors.toMap(Map.Entry::getKey, e -> e.getValue().sum())));
    }

    /** The latency (µs) below which {@code q} of the counted ones lie, to the bucket's 2%. */
    private static long quantile(AtomicLongArray hist, double q) {
        long total = 0;
        for (int i = 0; i < BUCKETS; i++) {
            total += hist.get(i);
        }
        long seen = 0;
        for (int i = 0; i < BUCKETS; i++) {
            seen += hist.get(i);
            if (total > 0 && seen >= Math.ceil(q * total)) {
                return Math.round(Math.exp(i * STEP));
            }
        }
        return -1;
    }

    private Map<String, Object> produce() throws Exception {
        String topic = arg("topic");
        int inflight = (int) num("inflight", 64);
        double warmup = num("warmup", 3);
        double duration = num("duration", 8);
        byte[] body = new byte[(int) num("size", 1024)];
        Arrays.fill(body, (byte) 'x');
        Map<String, Object> out = new TreeMap<>();
        LongAdder ok = new LongAdder();
        LongAdder failed = new LongAdder();
        Map<String, LongAdder> errors = new ConcurrentHashMap<>();
        AtomicLongArray hist = new AtomicLongArray(BUCKETS);
        AtomicLongArray window = new AtomicLongArray(new long[] {Long.MAX_VALUE, Long.MAX_VALUE}); // nanoTime
        Semaphore slots = new Semaphore(inflight);
        try (Producer p = PROVIDER.newProducerBuilder().setClientConfiguration(config()).setTopics(topic).build()) {
            Message msg = PROVIDER.newMessageBuilder().setTopic(topic).setBody(body).build();
            p.send(msg); // the route fetched and the connection open before any clock starts
            long stopAt = System.nanoTime() + (long) ((warmup + duration) * 1e9);
            Thread measure = new Thread(() -> {
                try {
                    Thread.sleep((long) (warmup * 1000));
                    long ok0 = ok.sum();
                    long begin = System.nanoTime();
                    window.set(1, begin + (long) (duration * 1e9));
                    window.set(0, begin);
                    say("MEASURE-BEGIN");
                    Thread.sleep((long) (duration * 1000));
                    long ok1 = ok.sum();
                    double secs = (System.nanoTime() - begin) / 1e9;
                    say("MEASURE-END");
                    out.put("msgs", ok1 - ok0);
                    out.put("seconds", secs);
                    out.put("rate", (ok1 - ok0) / secs);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }, "measure");
            measure.start();
            // Sends kept in flight by one loop: each takes a slot, its answer gives it back.
            while (System.nanoTime() < stopAt) {
                slots.acquire();
                long t0 = System.nanoTime();
                p.sendAsync(msg).whenComplete((receipt, e) -> {
                    long t1 = System.nanoTime();
                    slots.release();
                    if (e != null) {
                        failed.increment();
                        failure(errors, e);
                        return;
                    }
                    ok.increment();
                    if (t0 >= window.get(0) && t0 < window.get(1)) {
                        double us = Math.max(1.0, (t1 - t0) / 1e3);
                        hist.incrementAndGet(Math.min(BUCKETS - 1, (int) Math.ceil(Math.log(us) / STEP)));
                    }
                });
            }
            measure.join();
            slots.acquire(inflight); // every send answered before the producer closes
        }
        out.put("p50_us", quantile(hist, 0.50));
        out.put("p99_us", quantile(hist, 0.99));
        out.put("mode", "produce");
        out.put("sent_ok", ok.sum());
        out.put("failed", failed.sum());
        out.put("errors", totals(errors));
        return out;
    }

    /** What one run of consumers saw. */
    private static final class Drain {
        final AtomicLong acked = new AtomicLong();
        final LongAdder empty = new LongAdder(); // receives that returned no message
        final Map<String, LongAdder> errors = new ConcurrentHashMap<>();
        final AtomicBoolean begun = new AtomicBoolean();
        final AtomicBoolean stop = new AtomicBoolean();
        volatile long begin;
        volatile long end;
    }

    private Map<String, Object> consume() throws Exception {
        long count = (long) num("count", 0);
        double warm = num("warm", 0);
        long timeout = (long) (1000 * num("timeout", 300));
        Map<String, Object> out = new TreeMap<>();
        if (warm > 0) {
            Drain w = new Drain();
            List<Thread> ts = consumers(arg("warmGroup"), w, Long.MAX_VALUE, false);
            Thread.sleep((long) (warm * 1000));
            w.stop.set(true);
            join(ts);
            out.put("warm_msgs", w.acked.get());
        }
        double duration = num("duration", 10);
        Drain d = new Drain();
        List<Thread> ts = consumers(arg("group"), d, count, true);
        long deadline = System.currentTimeMillis() + timeout;
        long windowMsgs = 0;
        boolean exhausted = false;
        while (System.currentTimeMillis() < deadline && alive(ts)) {
            synchronized (d) {
                if (d.end != 0) { // the count-th ack came first
                    windowMsgs = count;
                    exhausted = true;
                    break;
                }
                long now = System.nanoTime();
                if (d.begin != 0 && now - d.begin >= (long) (duration * 1e9)) {
                    windowMsgs = d.acked.get();
                    d.end = now;
                    say("MEASURE-END");
                    break;
                }
            }
            Thread.sleep(5);
        }
        d.stop.set(true);
        join(ts);
        out.put("finished", d.end != 0);
        out.put("exhausted", exhausted);
        out.put("mode", "consume");
        out.put("msgs", d.acked.get());
        out.put("window_msgs", windowMsgs);
        out.put("empty_receives", d.empty.sum());
        out.put("errors", totals(d.errors));
        if (d.end > d.begin) {
            double secs = (d.end - d.begin) / 1e9;
            out.put("seconds", secs);
            out.put("rate", windowMsgs / secs);
        }
        return out;
    }

    private static boolean alive(List<Thread> ts) {
        for (Thread t : ts) {
            if (t.isAlive()) {
                return true;
            }
        }
        return false;
    }

    private static void join(List<Thread> ts) throws InterruptedException {
        for (Thread t : ts) {
            t.join(60000);
        }
    }

    /** Start the consumers of {@code group}, each on a thread of its own, receiving until {@code d.stop} or
     * {@code count} acks; with {@code measure}, the MEASURE lines. */
    private List<Thread> consumers(String group, Drain d, long count, boolean measure) throws Exception {
        String topic = arg("topic");
        int n = (int) num("consumers", 4);
        int batch = (int) num("batch", 32);
        Duration await = Duration.ofSeconds((long) num("await", 5));
        Duration invisible = Duration.ofSeconds((long) num("invisible", 60));
        List<SimpleConsumer> cs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            cs.add(PROVIDER.newSimpleConsumerBuilder().setClientConfiguration(config()).setConsumerGroup(group)
                .setSubscriptionExpressions(Map.of(topic, FilterExpression.SUB_ALL)).setAwaitDuration(await)
                .build());
        }
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            SimpleConsumer c = cs.get(i);
            Thread t = new Thread(() -> {
                try {
                    while (!d.stop.get() && d.acked.get() < count) {
                        List<MessageView> got;
                        try {
                            got = c.receive(batch, invisible);
                        } catch (Exception e) {
                            failure(d.errors, e);
                            Thread.sleep(100);
                            continue;
                        }
                        if (got.isEmpty()) {
                            d.empty.increment();
                            continue;
                        }
                        if (d.begun.compareAndSet(false, true)) {
                            d.begin = System.nanoTime();
                            if (measure) {
                                say("MEASURE-BEGIN");
                            }
                        }
                        List<CompletableFuture<Void>> acks = new ArrayList<>(got.size());
                        for (MessageView m : got) {
                            acks.add(c.ackAsync(m));
                        }
                        int acked = 0;
                        for (CompletableFuture<Void> f : acks) {
                            try {
                                f.get(30, TimeUnit.SECONDS);
                                acked++;
                            } catch (Exception e) {
                                failure(d.errors, e);
                            }
                        }
                        long before = d.acked.getAndAdd(acked);
                        if (before < count && before + acked >= count && measure && d.end == 0) {
                            synchronized (d) {
                                if (d.end == 0) {
                                    d.end = System.nanoTime();
                                    say("MEASURE-END");
                                }
                            }
                        }
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    try {
                        c.close();
                    } catch (Exception e) {
                        failure(d.errors, e);
                    }
                }
            }, "consume-" + i);
            t.start();
            ts.add(t);
        }
        return ts;
    }

    /** JSON of the result: maps, numbers, booleans and strings made of {@link #label}'s characters. */
    private static String json(Object v) {
        if (v instanceof Map) {
            return ((Map<?, ?>) v).entrySet().stream()
                .map(e -> "\"" + e.getKey() + "\":" + json(e.getValue()))
                .collect(Collectors.joining(",", "{", "}"));
        }
        if (v instanceof Double && !Double.isFinite((Double) v) || v == null) {
            return "null";
        }
        return v instanceof Number || v instanceof Boolean ? v.toString() : "\"" + v + "\"";
    }
}
