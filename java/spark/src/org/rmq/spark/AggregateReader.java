package org.rmq.spark;

import java.io.IOException;
import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Reads one split into the partial result of a {@link PushedAggregate}: the rows are decoded (and checked) as
 * for a plain read of the columns the aggregate uses, and folded here instead of in Spark, so no row leaves
 * the reader. One batch: a row per group (exactly one when nothing is grouped).
 */
final class AggregateReader implements PartitionReader<ColumnarBatch> {
    private final SplitReader rows;
    private final PushedAggregate agg;
    private final StructType resultSchema;
    /** Per aggregate: the index of its summed column in the input batches (-1 for a count). */
    private final int[] sumAt;
    private ColumnarBatch result;
    private boolean done;

    AggregateReader(Split split, ReadOptions options, PushedAggregate agg) {
        StructType input = agg.inputSchema();
        this.rows = new SplitReader(split, options, Columns.ids(input), input);
        this.agg = agg;
        this.resultSchema = agg.resultSchema();
        sumAt = new int[agg.sumOf.length];
        for (int i = 0; i < sumAt.length; i++) {
            sumAt[i] = agg.sumOf[i] < 0 ? -1 : input.fieldIndex(Columns.NAMES[agg.sumOf[i]]);
        }
    }

    /** A group's key: topic and queue id (each only when grouped by). */
    private record Key(UTF8String topic, int queueId) {}

    @Override
    public boolean next() throws IOException {
        if (done) {
            return false;
        }
        done = true;
        int topicAt = -1;
        int queueAt = -1;
        for (int i = 0; i < agg.groupBy.length; i++) {
            if (agg.groupBy[i] == Columns.TOPIC) {
                topicAt = i;
            } else {
                queueAt = i;
            }
        }
        int n = sumAt.length;
        Map<Key, long[]> groups = new HashMap<>();
        long[] ungrouped = agg.groupBy.length == 0 ? new long[n] : null;
        if (ungrouped != null) {
            groups.put(new Key(null, 0), ungrouped);
        }
        Key lastKey = null;
        long[] last = null;
        while (rows.next()) {
            ColumnarBatch b = rows.get();
            int count = b.numRows();
            if (ungrouped != null) {
                fold(b, 0, count, ungrouped);
                continue;
            }
            for (int r = 0; r < count; r++) {
                UTF8String topic = topicAt < 0 ? null : b.column(topicAt).getUTF8String(r);
                int queueId = queueAt < 0 ? 0 : b.column(queueAt).getInt(r);
                long[] acc;
                if (last != null && queueId == lastKey.queueId() && (topic == null || topic.equals(lastKey.topic()))) {
                    acc = last; // records of one topic and queue come in runs (a client sends to a queue in turn)
                } else {
                    Key key = new Key(topic == null ? null : topic.copy(), queueId);
                    acc = groups.computeIfAbsent(key, k -> new long[n]);
                    lastKey = key;
                    last = acc;
                }
                fold(b, r, r + 1, acc);
            }
        }
        WritableColumnVector[] out = OnHeapColumnVector.allocateColumns(Math.max(1, groups.size()), resultSchema);
        int g = agg.groupBy.length;
        for (Map.Entry<Key, long[]> e : groups.entrySet()) {
            for (int i = 0; i < g; i++) {
                if (i == topicAt) {
                    byte[] t = e.getKey().topic().getBytes();
                    out[i].appendByteArray(t, 0, t.length);
                } else {
                    out[i].appendInt(e.getKey().queueId());
                }
            }
            for (int i = 0; i < n; i++) {
                out[g + i].appendLong(e.getValue()[i]);
            }
        }
        result = new ColumnarBatch(out, groups.size());
        return true;
    }

    /** Add rows {@code [from, to)} of {@code b} to {@code acc}. */
    private void fold(ColumnarBatch b, int from, int to, long[] acc) {
        for (int i = 0; i < sumAt.length; i++) {
            if (sumAt[i] < 0) {
                acc[i] += to - from;
            } else {
                ColumnVector v = b.column(sumAt[i]);
                long s = 0;
                for (int r = from; r < to; r++) {
                    s += v.getInt(r);
                }
                acc[i] += s;
            }
        }
    }

    @Override
    public ColumnarBatch get() {
        return result;
    }

    @Override
    public void close() throws IOException {
        rows.close();
        if (result != null) {
            result.close();
        }
    }
}
