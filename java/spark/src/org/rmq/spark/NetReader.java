package org.rmq.spark;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.rmq.spark.remoting.Remoting;

/**
 * Reads one queue's offsets {@code [start, end)} over the network: PULL_MESSAGE to the group's master (no
 * long polling, no offset commit; the subscription travels with each pull, so the broker filters without a
 * registered consumer), the answer's records decoded by {@link RecordDecoder} into columnar batches, plus
 * {@code broker_name}. Records at or past {@code end} are dropped (a pull may answer more than asked for).
 * Once an answer with records comes, the next pull is sent before they are decoded, so the broker's work
 * and the wire overlap the decoding.
 *
 * <p>Answers: FOUND, rows, on at {@code nextBeginOffset}; RETRY_IMMEDIATELY, a filter skipped offsets (on at
 * {@code nextBeginOffset}); NOT_FOUND or OFFSET_MOVED above the broker's max, the broker does not have the
 * planned offsets yet (a slave behind its master): asked again until {@code pullTimeoutMs} passes without
 * progress, then an error; OFFSET_MOVED below the broker's min, retention deleted them: an error. A transport
 * failure moves the read to the group's next broker (its slaves, then round to the master), until
 * {@code pullTimeoutMs} passes without an answer.
 */
final class NetReader implements PartitionReader<ColumnarBatch> {
    static final String BROKER_NAME = "broker_name";
    private static final int FOUND = 0;
    private static final int SYSTEM_ERROR = 1;
    private static final int SUBSCRIPTION_PARSE_FAILED = 23;
    private static final int PULL_NOT_FOUND = 19;
    private static final int PULL_RETRY_IMMEDIATELY = 20;
    private static final int PULL_OFFSET_MOVED = 21;
    private static final int SUBSCRIPTION_FLAG = 0x4;
    private static final long MAX_BATCH_BYTES = 32L << 20;
    private static final long PAUSE_MS = 50;

    /** One Spark partition: offsets {@code [start, end)} of a queue. */
    record Range(NetCluster.Queue queue, long start, long end) implements InputPartition {}

    /** Creates readers in the executors; serialised with the tasks. */
    static final class Factory extends ColumnarFactory {
        private static final long serialVersionUID = 1L;
        private final NetOptions options;
        private final StructType schema;

        Factory(NetOptions options, StructType schema) {
            this.options = options;
            this.schema = schema;
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            return new NetReader((Range) partition, options, schema);
        }
    }

    private final Range range;
    private final NetOptions o;
    private final int maxRows;
    private final WritableColumnVector[] vectors;
    private final WritableColumnVector brokerVector;
    private final byte[] brokerName;
    private final ColumnarBatch batch;
    private final RecordDecoder decoder;
    private final Map<String, String> pullFields = new LinkedHashMap<>();
    private Remoting.Connection connection;
    private int addr;
    /** The next offset to pull. */
    private long next;
    /** A pull of {@link #next} is sent on {@link #connection} and not yet read. */
    private boolean requested;
    /** The last answer's records, and where the next one starts. */
    private Mapping records;
    private int at;
    private boolean done;

    NetReader(Range range, NetOptions o, StructType schema) {
        this.range = range;
        this.o = o;
        StructField[] fields = schema.fields();
        List<Integer> ids = new ArrayList<>();
        List<StructField> stored = new ArrayList<>();
        int brokerAt = -1;
        for (int i = 0; i < fields.length; i++) {
            if (fields[i].name().equals(BROKER_NAME)) {
                brokerAt = i;
            } else {
                ids.add(Columns.id(fields[i].name()));
                stored.add(fields[i]);
            }
        }
        maxRows = fields.length == 0 ? Integer.MAX_VALUE : o.batchRows;
        vectors = OnHeapColumnVector.allocateColumns(fields.length == 0 ? 1 : Math.min(maxRows, 1 << 16), schema);
        WritableColumnVector[] decoded = new WritableColumnVector[stored.size()];
        int j = 0;
        for (int i = 0; i < fields.length; i++) {
            if (i != brokerAt) {
                decoded[j++] = vectors[i];
            }
        }
        brokerVector = brokerAt >= 0 ? vectors[brokerAt] : null;
        brokerName = range.queue().broker().getBytes(StandardCharsets.UTF_8);
        decoder = new RecordDecoder(this::damage, o.checkCrc, o.decompress,
                ids.stream().mapToInt(Integer::intValue).toArray(), decoded);
        batch = new ColumnarBatch(fields.length == 0 ? new ColumnVector[0] : vectors);
        next = range.start();
        NetCluster.Queue q = range.queue();
        pullFields.put("consumerGroup", o.consumerGroup);
        pullFields.put("topic", q.topic());
        pullFields.put("queueId", Integer.toString(q.queueId()));
        pullFields.put("queueOffset", "0");
        pullFields.put("maxMsgNums", "0");
        pullFields.put("sysFlag", Integer.toString(SUBSCRIPTION_FLAG));
        pullFields.put("commitOffset", "0");
        pullFields.put("suspendTimeoutMillis", "0");
        pullFields.put("subscription", o.subExpression);
        pullFields.put("subVersion", "0");
        pullFields.put("expressionType", o.expressionType);
        pullFields.put("bname", q.broker());
    }

    /** A malformed record in a pull answer ({@code pos}: its CommitLog offset, or -1 when it cannot be read). */
    private IOException damage(long pos, String why) {
        String which = pos < 0 ? "a record" : "the record at CommitLog offset " + pos;
        return new IOException("rocketmq source: " + which + " pulled from " + range.queue().key() + " (broker "
                + range.queue().addrs().get(addr) + ") is malformed: " + why);
    }

    @Override
    public boolean next() throws IOException {
        if (done) {
            return false;
        }
        for (WritableColumnVector v : vectors) {
            v.reset();
        }
        int rows = 0;
        long bytes = 0;
        while (rows < maxRows && bytes < MAX_BATCH_BYTES) {
            if (records == null || at >= records.length) {
                records = null;
                if (next >= range.end() || !pull()) {
                    done = true;
                    break;
                }
                continue;
            }
            if (at + 8 > records.length) {
                throw damage(-1, "a pull answer ends inside a record header");
            }
            int total = records.getInt(at);
            if (records.getInt(at + 4) != RecordDecoder.MESSAGE_MAGIC || total < RecordDecoder.FIXED_SIZE
                    || at + total > records.length) {
                throw damage(-1, String.format("a record of %d bytes with magic code 0x%08x at byte %d of a pull answer",
                        total, records.getInt(at + 4), at));
            }
            long queueOffset = records.getLong(at + 20);
            if (queueOffset >= range.end()) {
                at = records.length; // the rest of the answer is past the range
                continue;
            }
            if (queueOffset >= range.start()) {
                bytes += decoder.append(records, records.length, at, total,
                        records.getLong(at + RecordDecoder.POS_PHYSICAL_OFFSET));
                if (brokerVector != null) {
                    brokerVector.appendByteArray(brokerName, 0, brokerName.length);
                }
                rows++;
            }
            at += total;
        }
        batch.setNumRows(rows);
        return rows > 0 || !done;
    }

    /** Pull from {@link #next}: true when an answer with records came, false when the range is read. */
    private boolean pull() throws IOException {
        long deadline = System.currentTimeMillis() + o.pullTimeoutMs;
        String failure = null;
        while (next < range.end()) {
            Remoting.Response r;
            String where = range.queue().addrs().get(addr);
            try {
                if (connection == null) {
                    connection = new Remoting.Connection(where, o.pullTimeoutMs, o.tls);
                }
                if (!requested) {
                    request();
                }
                requested = false;
                r = connection.read();
            } catch (IOException e) {
                failure = where + ": " + e;
                moveOn();
                if (System.currentTimeMillis() > deadline) {
                    throw new IOException("rocketmq source: pulling " + range.queue().key() + " at offset " + next
                            + ": no broker of group " + range.queue().broker() + " answers within pullTimeoutMs ("
                            + failure + ")", e);
                }
                pause();
                continue;
            }
            long nextBegin = r.extLong("nextBeginOffset", next);
            if (r.ext().containsKey("suggestWhichBrokerId") && r.extLong("suggestWhichBrokerId", 0) == 0 && addr != 0) {
                addr = range.queue().addrs().size() - 1; // back to the master on the next pull
                moveOn();
            }
            switch (r.code()) {
                case FOUND -> {
                    records = new Mapping(r.body(), r.body().length);
                    at = 0;
                    next = Math.max(next + 1, nextBegin);
                    if (next < range.end() && connection != null) {
                        try {
                            request(); // the broker answers the next pull while these records are decoded
                        } catch (IOException e) {
                            moveOn(); // the next pull() asks again, elsewhere
                        }
                    }
                    return true;
                }
                case PULL_RETRY_IMMEDIATELY -> {
                    if (nextBegin > next) {
                        next = nextBegin;
                        deadline = System.currentTimeMillis() + o.pullTimeoutMs;
                    } else if (System.currentTimeMillis() > deadline) {
                        throw behind(r, where);
                    } else {
                        pause();
                    }
                }
                case PULL_NOT_FOUND, PULL_OFFSET_MOVED -> {
                    long min = r.extLong("minOffset", 0);
                    if (r.code() == PULL_OFFSET_MOVED && next < min) {
                        throw new IOException("rocketmq source: offsets [" + next + ", " + min + ") of "
                                + range.queue().key() + " were deleted by the broker's retention before they were read"
                                + " (failOnDataLoss=true; the Python source, with failOnDataLoss=false, skips them)");
                    }
                    if (System.currentTimeMillis() > deadline) {
                        throw behind(r, where);
                    }
                    pause();
                }
                default -> {
                    String what = "pulling " + range.queue().key() + " at offset " + next;
                    if ((r.code() == SUBSCRIPTION_PARSE_FAILED || r.code() == SYSTEM_ERROR)
                            && (!o.subExpression.equals("*") || !o.expressionType.equals("TAG"))) {
                        what += " with subExpression '" + o.subExpression + "' (" + o.expressionType + ")";
                    }
                    throw new IOException("rocketmq source: " + what + ": broker " + where + " answered code "
                            + r.code() + ": " + r.remark() + " (option consumerGroup names the group the pulls use: "
                            + o.consumerGroup + ")");
                }
            }
        }
        return false;
    }

    /** Send the pull of {@link #next} on the connection; its answer is read by the next {@link #pull}. */
    private void request() throws IOException {
        pullFields.put("queueOffset", Long.toString(next));
        pullFields.put("maxMsgNums", Long.toString(Math.min(o.pullBatchSize, range.end() - next)));
        if (o.signer != null) {
            o.signer.sign(pullFields, null, 0);
        }
        requested = true;
        connection.send(Remoting.header(Remoting.PULL_MESSAGE, 1, pullFields), new byte[0], 0);
    }

    private IOException behind(Remoting.Response r, String where) {
        return new IOException("rocketmq source: " + range.queue().key() + ": broker " + where + " has offsets up to "
                + r.extLong("maxOffset", -1) + ", the read was planned to " + range.end() + " and none came for "
                + o.pullTimeoutMs + " ms (pullTimeoutMs)");
    }

    /** The next broker of the group for the next pull. */
    private void moveOn() {
        requested = false;
        if (connection != null) {
            connection.close();
            connection = null;
        }
        addr = (addr + 1) % range.queue().addrs().size();
    }

    private static void pause() throws IOException {
        try {
            Thread.sleep(PAUSE_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted", e);
        }
    }

    @Override
    public ColumnarBatch get() {
        return batch;
    }

    @Override
    public void close() {
        if (connection != null) {
            connection.close();
        }
        batch.close();
    }
}
