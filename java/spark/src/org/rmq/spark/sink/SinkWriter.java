package org.rmq.spark.sink;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.rmq.spark.remoting.Remoting;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One task's rows sent at-least-once, as the Python sink's columnar path sends them: consecutive rows of a
 * topic go as SEND_BATCH_MESSAGE batches of up to {@code batchSize} messages and {@code BATCH_BYTES}, each
 * message with the properties a producer gives it ({@code TAGS}, {@code KEYS}, {@code WAIT}, a new
 * {@code UNIQ_KEY}), to the topic's writable queues in turn; at most {@code maxInFlight / batchSize} batches
 * unanswered at once. A batch refused for a reason another send could change (system error, busy, service
 * not available) or whose connection failed is sent again whole to the next queue of another broker, at most
 * {@code retries} times; any other refusal, or a batch still not stored after its retries, fails the task
 * (Spark then runs it again: rows may be sent twice, never dropped). {@link #commit} returns once every row
 * of the task is stored.
 */
final class SinkWriter implements DataWriter<InternalRow> {
    private static final Logger LOG = LoggerFactory.getLogger(SinkWriter.class);
    private static final Set<Integer> STORED = Set.of(0, 10, 11, 12); // SUCCESS, FLUSH_*/SLAVE_* timeouts
    private static final Set<Integer> RETRYABLE = Set.of(1, 2, 14); // SYSTEM_ERROR, SYSTEM_BUSY, SERVICE_NOT_AVAILABLE
    private static final byte[] TAGS = "TAGS\u0001".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] KEYS = "KEYS\u0001".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] WAIT_UNIQ = "WAIT\u0001true\u0002UNIQ_KEY\u0001".getBytes(StandardCharsets.US_ASCII);
    private static final String BATCH_PROPERTIES = "WAIT\u0001true\u0002";
    private static final String RETRY_PREFIX = "%RETRY%";

    private final SinkConfig cfg;
    private final int body;
    private final boolean bodyIsBinary;
    private final int topic;
    private final int tags;
    private final int keys;
    private final UniqIds ids = new UniqIds();

    private final Map<String, Batch> open = new LinkedHashMap<>();
    private final Map<String, List<Routes.Queue>> routes = new HashMap<>();
    private final Map<String, Integer> turn = new HashMap<>();
    private final Map<String, Remoting.Connection> connections = new HashMap<>();
    private final LinkedHashMap<Integer, Pending> inflight = new LinkedHashMap<>();
    private int opaque;
    private long rows;
    private long stored;
    private long batches;
    private long resent;
    private UTF8String lastTopicText;
    private String lastTopic;

    /** Rows of one topic encoded as one batch body. */
    private static final class Batch {
        final String topic;
        final long firstRow;
        byte[] buf = new byte[1 << 16];
        int length;
        int count;

        Batch(String topic, long firstRow) {
            this.topic = topic;
            this.firstRow = firstRow;
        }

        String what() {
            long last = firstRow + count - 1;
            return count == 1 ? "row " + firstRow : "a batch of rows " + firstRow + ".." + last;
        }

        void ensure(int more) {
            if (length + more > buf.length) {
                buf = java.util.Arrays.copyOf(buf, Math.max(buf.length * 2, length + more));
            }
        }

        void put(byte[] b) {
            System.arraycopy(b, 0, buf, length, b.length);
            length += b.length;
        }

        void putInt(int v) {
            Remoting.putInt(buf, length, v);
            length += 4;
        }
    }

    /** A batch sent and not yet answered. */
    private static final class Pending {
        final Batch batch;
        Routes.Queue queue;
        Remoting.Connection connection;
        int attempt;

        Pending(Batch batch, Routes.Queue queue) {
            this.batch = batch;
            this.queue = queue;
        }
    }

    /** What a task sent, for the driver's log. */
    record Committed(long rows, long batches, long resent) implements WriterCommitMessage {}

    SinkWriter(SinkConfig cfg, StructType schema) {
        this.cfg = cfg;
        this.body = index(schema, "body");
        if (body < 0) {
            throw new SinkException("rocketmq sink: the DataFrame has no column 'body'");
        }
        this.bodyIsBinary = schema.fields()[body].dataType() instanceof BinaryType;
        this.topic = index(schema, "topic");
        this.tags = index(schema, "tags");
        this.keys = index(schema, "keys");
    }

    private static int index(StructType schema, String name) {
        StructField[] fields = schema.fields();
        for (int i = 0; i < fields.length; i++) {
            if (fields[i].name().equals(name)) {
                return i;
            }
        }
        return -1;
    }

    @Override
    public void write(InternalRow row) throws IOException {
        long n = rows;
        String t = topicOf(row, n);
        if (row.isNullAt(body)) {
            throw new SinkException("rocketmq sink: row " + n + ": column 'body' is null");
        }
        byte[] b = bodyIsBinary ? row.getBinary(body) : row.getUTF8String(body).getBytes();
        if (b.length == 0) {
            throw new SinkException("rocketmq sink: row " + n + ": column 'body' is empty (RocketMQ refuses it)");
        }
        if (b.length > SinkConfig.MAX_BODY) {
            throw new SinkException("rocketmq sink: row " + n + ": column 'body' has " + b.length
                    + " bytes, over the maximum " + SinkConfig.MAX_BODY);
        }
        byte[] tag = property(row, tags, n, "tags");
        byte[] key = property(row, keys, n, "keys");
        int props = WAIT_UNIQ.length + 32;
        if (tag.length > 0) {
            props += TAGS.length + tag.length + 1;
        }
        if (key.length > 0) {
            props += KEYS.length + key.length + 1;
        }
        if (props > Short.MAX_VALUE) {
            throw new SinkException("rocketmq sink: row " + n + ": properties of " + props + " bytes, over 32767");
        }
        int size = 22 + b.length + props;
        Batch batch = open.get(t);
        if (batch != null && (batch.count >= cfg.batchSize || batch.length + size > SinkConfig.BATCH_BYTES)) {
            open.remove(t);
            dispatch(batch);
            batch = null;
        }
        if (batch == null) {
            queuesOf(t); // an unknown topic fails here, naming it, before its first row is sent
            batch = new Batch(t, n);
            open.put(t, batch);
        }
        batch.ensure(size);
        batch.putInt(size);
        batch.putInt(0); // magic code: the broker ignores it in a batch
        batch.putInt(0); // body CRC: the broker computes it
        batch.putInt(0); // flag
        batch.putInt(b.length);
        batch.put(b);
        batch.buf[batch.length++] = (byte) (props >>> 8);
        batch.buf[batch.length++] = (byte) props;
        if (tag.length > 0) {
            batch.put(TAGS);
            batch.put(tag);
            batch.buf[batch.length++] = 2;
        }
        if (key.length > 0) {
            batch.put(KEYS);
            batch.put(key);
            batch.buf[batch.length++] = 2;
        }
        batch.put(WAIT_UNIQ);
        batch.length = ids.next(batch.buf, batch.length, System.currentTimeMillis());
        batch.count++;
        rows = n + 1;
    }

    private String topicOf(InternalRow row, long n) {
        if (topic < 0 || row.isNullAt(topic)) {
            if (cfg.topic == null) {
                throw new SinkException(
                        "rocketmq sink: row " + n + ": column 'topic' is null and option topic is not set");
            }
            return cfg.topic;
        }
        UTF8String text = row.getUTF8String(topic);
        if (text.equals(lastTopicText)) {
            return lastTopic;
        }
        String t = text.toString();
        if (t.isEmpty()) {
            throw new SinkException("rocketmq sink: row " + n + ": column 'topic' is empty");
        }
        if (t.startsWith(RETRY_PREFIX)) {
            throw new SinkException("rocketmq sink: row " + n + ": topic '" + t
                    + "' is a retry topic, which batches cannot go to");
        }
        lastTopicText = text.clone();
        lastTopic = t;
        return t;
    }

    private static byte[] property(InternalRow row, int column, long n, String name) {
        if (column < 0 || row.isNullAt(column)) {
            return new byte[0];
        }
        byte[] v = row.getUTF8String(column).getBytes();
        for (byte c : v) {
            if (c == 1 || c == 2) {
                throw new SinkException("rocketmq sink: row " + n + ": column '" + name
                        + "' holds a \\u0001 or \\u0002 character (RocketMQ's property separators)");
            }
        }
        return v;
    }

    private List<Routes.Queue> queuesOf(String t) {
        List<Routes.Queue> q = routes.get(t);
        if (q == null) {
            q = Routes.writable(cfg, t);
            routes.put(t, q);
            turn.put(t, Math.floorMod(Long.hashCode(System.nanoTime()), q.size()));
        }
        return q;
    }

    /** The topic's next queue in turn, on another broker than {@code avoid} when there is one. */
    private Routes.Queue nextQueue(String t, String avoid) {
        List<Routes.Queue> q = queuesOf(t);
        int start = turn.get(t);
        for (int i = 0; i < q.size(); i++) {
            Routes.Queue c = q.get((start + i) % q.size());
            if (avoid == null || !c.broker().equals(avoid) || i == q.size() - 1) {
                turn.put(t, (start + i + 1) % q.size());
                return c;
            }
        }
        throw new IllegalStateException("a topic with no queue");
    }

    private void dispatch(Batch batch) throws IOException {
        batches++;
        transmit(new Pending(batch, nextQueue(batch.topic, null)));
        while (inflight.size() >= cfg.window()) {
            awaitOldest();
        }
    }

    private void transmit(Pending p) throws IOException {
        Remoting.Connection c = connections.get(p.queue.addr());
        try {
            if (c == null) {
                c = new Remoting.Connection(p.queue.addr(), cfg.sendTimeoutMs, cfg.tls);
                connections.put(p.queue.addr(), c);
            }
            Map<String, String> ext = new LinkedHashMap<>();
            ext.put("a", cfg.producerGroup);
            ext.put("b", p.batch.topic);
            ext.put("c", "TBW102");
            ext.put("d", "4");
            ext.put("e", Integer.toString(p.queue.queueId()));
            ext.put("f", "0");
            ext.put("g", Long.toString(System.currentTimeMillis()));
            ext.put("h", "0");
            ext.put("i", BATCH_PROPERTIES);
            ext.put("j", "0");
            ext.put("k", "false");
            ext.put("m", "true");
            ext.put("n", p.queue.broker());
            if (cfg.signer != null) {
                cfg.signer.sign(ext, p.batch.buf, p.batch.length);
            }
            int id = ++opaque;
            p.connection = c;
            inflight.put(id, p);
            c.send(Remoting.header(Remoting.SEND_BATCH_MESSAGE, id, ext), p.batch.buf, p.batch.length);
        } catch (IOException e) {
            if (c != null) {
                failed(c, e);
            } else {
                retry(p, "cannot connect to " + p.queue.addr() + ": " + e);
            }
        }
    }

    private void awaitOldest() throws IOException {
        Pending oldest = inflight.values().iterator().next();
        Remoting.Connection c = oldest.connection;
        Remoting.Response r;
        try {
            r = c.read();
        } catch (IOException e) {
            failed(c, e);
            return;
        }
        Pending p = inflight.remove(r.opaque());
        if (p == null) {
            return; // an answer to a batch already sent again after its connection failed
        }
        if (STORED.contains(r.code())) {
            stored += p.batch.count;
        } else if (RETRYABLE.contains(r.code())) {
            retry(p, "code " + r.code() + ": " + r.remark());
        } else {
            throw new SinkException("rocketmq sink: the broker " + p.queue.broker() + " refused " + p.batch.what()
                    + " for topic '" + p.batch.topic + "': code " + r.code() + ": " + r.remark());
        }
    }

    /** The connection failed: each batch waiting on it goes again. */
    private void failed(Remoting.Connection c, IOException e) throws IOException {
        connections.remove(c.addr);
        c.close();
        List<Pending> again = new ArrayList<>();
        for (Iterator<Pending> it = inflight.values().iterator(); it.hasNext(); ) {
            Pending p = it.next();
            if (p.connection == c) {
                it.remove();
                again.add(p);
            }
        }
        for (Pending p : again) {
            retry(p, "connection to " + c.addr + " failed: " + e);
        }
    }

    private void retry(Pending p, String why) throws IOException {
        if (p.attempt >= cfg.retries) {
            throw new SinkException("rocketmq sink: " + p.batch.what() + " for topic '" + p.batch.topic
                    + "' not sent after " + (1 + cfg.retries) + " sends (option retries): " + why);
        }
        LOG.warn("rocketmq sink: send {} of {} to topic {} failed: {}", p.attempt + 1, p.batch.what(),
                p.batch.topic, why);
        p.attempt++;
        p.queue = nextQueue(p.batch.topic, p.queue.broker());
        resent++;
        transmit(p);
    }

    @Override
    public WriterCommitMessage commit() throws IOException {
        for (Batch b : new ArrayList<>(open.values())) {
            dispatch(b);
        }
        open.clear();
        while (!inflight.isEmpty()) {
            awaitOldest();
        }
        if (stored != rows) {
            throw new IllegalStateException("rocketmq sink: " + stored + " of " + rows + " rows stored at commit");
        }
        LOG.info("rocketmq sink: task stored {} rows in {} batches ({} sent again)", rows, batches, resent);
        return new Committed(rows, batches, resent);
    }

    @Override
    public void abort() {
        close();
    }

    @Override
    public void close() {
        for (Remoting.Connection c : connections.values()) {
            c.close();
        }
        connections.clear();
        inflight.clear();
    }
}
