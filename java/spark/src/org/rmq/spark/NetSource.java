package org.rmq.spark;

import java.io.IOException;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The JVM network reader: a Spark DataSource V2 batch and micro-batch source reading topics of a live
 * cluster through the Remoting protocol, decoding pulled records into columnar batches in the executors with
 * no Python worker and no Arrow hop ({@link NetReader}). {@code rmq.spark.load(spark, nameServer=...,
 * topics=...)} and {@code rmq.spark.read_stream(spark, ...)} check the options with the Python network
 * source's parser and read through this class when it serves them (see {@link NetOptions}); every other
 * read goes to the Python network source. The columns: the store source's, plus {@code broker_name}.
 *
 * <p>Planning (the driver): each topic's readable queues from the name servers, one partition per queue
 * range from the queues' min or max offsets (GET_MIN_OFFSET / GET_MAX_OFFSET, to the master, else a slave),
 * long ranges split until there are {@code minPartitions}. Streaming offsets are per queue, as JSON
 * {@code {"topic":{"broker":{"queueId":offset}}}} in Spark's checkpoint (and committed to
 * {@code consumerGroup} after each batch when {@code commitOffsets}); {@code maxOffsetsPerTrigger} shares a
 * batch's offsets over the queues by backlog; {@code Trigger.AvailableNow} reads to the offsets of its start;
 * the progress reports min / avg / max offsets behind latest.
 */
public final class NetSource implements TableProvider {
    private static final Logger LOG = LoggerFactory.getLogger(NetSource.class);
    static final StructType SCHEMA = Columns.SCHEMA.add(NetReader.BROKER_NAME, DataTypes.StringType, false);

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return SCHEMA;
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new TopicsTable(new NetOptions(properties));
    }

    /** The topics as a table of rows. */
    static final class TopicsTable implements SupportsRead {
        private final NetOptions options;

        TopicsTable(NetOptions options) {
            this.options = options;
        }

        @Override
        public String name() {
            return "rocketmq(" + String.join(",", options.topics) + " at " + String.join(";", options.nameServers) + ")";
        }

        @Override
        @SuppressWarnings("deprecation") // Spark 4 still reads a V2 table's schema through it
        public StructType schema() {
            return SCHEMA;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return EnumSet.of(TableCapability.BATCH_READ, TableCapability.MICRO_BATCH_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap ignored) {
            return new Builder(options);
        }
    }

    /** Keeps the columns the query needs (column pruning). */
    static final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns {
        private final NetOptions options;
        private StructType schema = SCHEMA;

        Builder(NetOptions options) {
            this.options = options;
        }

        @Override
        public void pruneColumns(StructType required) {
            schema = required;
        }

        @Override
        public Scan build() {
            return new TopicsScan(options, schema);
        }
    }

    static final class TopicsScan implements Scan, Batch {
        private final NetOptions options;
        private final StructType schema;

        TopicsScan(NetOptions options, StructType schema) {
            this.options = options;
            this.schema = schema;
        }

        @Override
        public StructType readSchema() {
            return schema;
        }

        @Override
        public String description() {
            return "rocketmq network reader " + String.join(",", options.topics);
        }

        @Override
        public Batch toBatch() {
            return this;
        }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
            return new Stream(options, schema);
        }

        @Override
        public InputPartition[] planInputPartitions() {
            String start = options.starting == null ? "earliest" : options.starting;
            Map<NetCluster.Queue, Long> from = new TreeMap<>(QUEUE_ORDER);
            Map<NetCluster.Queue, Long> to = new TreeMap<>(QUEUE_ORDER);
            try (NetCluster.Session s = new NetCluster.Session(options)) {
                for (NetCluster.Queue q : NetCluster.queues(options)) {
                    long min = s.min(q);
                    long max = s.max(q);
                    from.put(q, start.equals("latest") ? max : min);
                    to.put(q, options.ending.equals("earliest") ? min : max);
                }
            }
            return ranges(options, from, to);
        }

        @Override
        public PartitionReaderFactory createReaderFactory() {
            return new NetReader.Factory(options, schema);
        }
    }

    static final java.util.Comparator<NetCluster.Queue> QUEUE_ORDER = java.util.Comparator
            .comparing(NetCluster.Queue::topic).thenComparing(NetCluster.Queue::broker)
            .thenComparingInt(NetCluster.Queue::queueId);

    /** A partition per queue with {@code to > from}, long ranges split until there are {@code minPartitions}. */
    static InputPartition[] ranges(NetOptions o, Map<NetCluster.Queue, Long> from, Map<NetCluster.Queue, Long> to) {
        List<NetReader.Range> whole = new ArrayList<>();
        long total = 0;
        for (Map.Entry<NetCluster.Queue, Long> e : to.entrySet()) {
            long start = from.getOrDefault(e.getKey(), 0L);
            if (e.getValue() > start) {
                whole.add(new NetReader.Range(e.getKey(), start, e.getValue()));
                total += e.getValue() - start;
            }
        }
        if (o.minPartitions <= whole.size() || total == 0) {
            return whole.toArray(new InputPartition[0]);
        }
        long piece = Math.max(1, -Math.floorDiv(-total, o.minPartitions));
        List<NetReader.Range> out = new ArrayList<>();
        for (NetReader.Range r : whole) {
            for (long s = r.start(); s < r.end(); s += piece) {
                out.add(new NetReader.Range(r.queue(), s, Math.min(r.end(), s + piece)));
            }
        }
        return out.toArray(new InputPartition[0]);
    }

    /** Per-queue offsets, as Spark keeps them in the checkpoint. */
    static final class QueueOffsets extends Offset {
        private static final ObjectMapper JSON = new ObjectMapper();
        /** topic → broker → queue id → offset. */
        final TreeMap<String, TreeMap<String, TreeMap<Integer, Long>>> offsets;

        QueueOffsets(TreeMap<String, TreeMap<String, TreeMap<Integer, Long>>> offsets) {
            this.offsets = offsets;
        }

        static QueueOffsets of(Map<NetCluster.Queue, Long> byQueue) {
            TreeMap<String, TreeMap<String, TreeMap<Integer, Long>>> m = new TreeMap<>();
            for (Map.Entry<NetCluster.Queue, Long> e : byQueue.entrySet()) {
                NetCluster.Queue q = e.getKey();
                m.computeIfAbsent(q.topic(), k -> new TreeMap<>()).computeIfAbsent(q.broker(), k -> new TreeMap<>())
                        .put(q.queueId(), e.getValue());
            }
            return new QueueOffsets(m);
        }

        Long get(NetCluster.Queue q) {
            var brokers = offsets.get(q.topic());
            var ids = brokers == null ? null : brokers.get(q.broker());
            return ids == null ? null : ids.get(q.queueId());
        }

        static QueueOffsets parse(String json) {
            TreeMap<String, TreeMap<String, TreeMap<Integer, Long>>> m = new TreeMap<>();
            try {
                JsonNode root = JSON.readTree(json);
                for (Map.Entry<String, JsonNode> t : root.properties()) {
                    for (Map.Entry<String, JsonNode> b : t.getValue().properties()) {
                        for (Map.Entry<String, JsonNode> q : b.getValue().properties()) {
                            m.computeIfAbsent(t.getKey(), k -> new TreeMap<>())
                                    .computeIfAbsent(b.getKey(), k -> new TreeMap<>())
                                    .put(Integer.parseInt(q.getKey()), q.getValue().asLong());
                        }
                    }
                }
            } catch (IOException | NumberFormatException e) {
                throw new IllegalArgumentException("rocketmq source: the checkpoint's offsets " + json
                        + " are not {\"topic\":{\"broker\":{\"queueId\":offset}}}", e);
            }
            return new QueueOffsets(m);
        }

        @Override
        public String json() {
            ObjectNode root = JSON.createObjectNode();
            offsets.forEach((t, brokers) -> {
                ObjectNode tn = root.putObject(t);
                brokers.forEach((b, ids) -> {
                    ObjectNode bn = tn.putObject(b);
                    ids.forEach((id, off) -> bn.put(Integer.toString(id), off));
                });
            });
            return root.toString();
        }
    }

    /** The micro-batch stream: per-queue offsets; AvailableNow reads to the offsets of its start. */
    static final class Stream implements MicroBatchStream, SupportsTriggerAvailableNow, ReportsSourceMetrics {
        private final NetOptions options;
        private final StructType schema;
        private Map<NetCluster.Queue, Long> upTo;
        private Map<NetCluster.Queue, Long> latest = Map.of();
        private List<NetCluster.Queue> queues = List.of();
        private String committed;

        Stream(NetOptions options, StructType schema) {
            this.options = options;
            this.schema = schema;
        }

        private Map<NetCluster.Queue, Long> maxOffsets() {
            queues = NetCluster.queues(options);
            Map<NetCluster.Queue, Long> out = new TreeMap<>(QUEUE_ORDER);
            try (NetCluster.Session s = new NetCluster.Session(options)) {
                for (NetCluster.Queue q : queues) {
                    out.put(q, s.max(q));
                }
            }
            return out;
        }

        @Override
        public Offset initialOffset() {
            boolean earliest = "earliest".equals(options.starting);
            Map<NetCluster.Queue, Long> out = new TreeMap<>(QUEUE_ORDER);
            try (NetCluster.Session s = new NetCluster.Session(options)) {
                for (NetCluster.Queue q : NetCluster.queues(options)) {
                    out.put(q, earliest ? s.min(q) : s.max(q));
                }
            }
            return QueueOffsets.of(out);
        }

        @Override
        public void prepareForTriggerAvailableNow() {
            upTo = maxOffsets();
        }

        @Override
        public ReadLimit getDefaultReadLimit() {
            return options.maxOffsetsPerTrigger > 0
                    ? ReadLimit.maxRows(options.maxOffsetsPerTrigger)
                    : ReadLimit.allAvailable();
        }

        @Override
        public Offset latestOffset() {
            throw new UnsupportedOperationException("latestOffset(Offset, ReadLimit) plans the micro-batches");
        }

        /**
         * Each queue's end for the next micro-batch: its max offset (capped at the AvailableNow start's), and
         * with a row limit ({@code maxOffsetsPerTrigger}) the limit shared out by backlog. A queue new since
         * {@code startOffset} starts at its min offset. {@code startOffset}, the end of the last completed
         * batch, is committed to {@code consumerGroup} first (Spark's own commit of it comes only when a next
         * batch is planned).
         */
        @Override
        public Offset latestOffset(Offset startOffset, ReadLimit limit) {
            QueueOffsets begin = (QueueOffsets) startOffset;
            commitGroup(begin);
            Map<NetCluster.Queue, Long> now = maxOffsets();
            Map<NetCluster.Queue, Long> first = new TreeMap<>(QUEUE_ORDER);
            Map<NetCluster.Queue, Long> backlog = new TreeMap<>(QUEUE_ORDER);
            try (NetCluster.Session s = new NetCluster.Session(options)) {
                for (Map.Entry<NetCluster.Queue, Long> e : now.entrySet()) {
                    NetCluster.Queue q = e.getKey();
                    Long b = begin == null ? null : begin.get(q);
                    long from = b != null ? b : s.min(q);
                    long top = e.getValue();
                    if (upTo != null) {
                        top = Math.min(top, upTo.getOrDefault(q, from));
                    }
                    first.put(q, from);
                    if (top > from) {
                        backlog.put(q, top - from);
                    }
                    now.put(q, Math.max(top, from));
                }
            }
            latest = now;
            if (limit instanceof ReadMaxRows m) {
                backlog = share(backlog, m.maxRows());
            }
            Map<NetCluster.Queue, Long> end = new TreeMap<>(QUEUE_ORDER);
            for (Map.Entry<NetCluster.Queue, Long> e : first.entrySet()) {
                end.put(e.getKey(), e.getValue() + backlog.getOrDefault(e.getKey(), 0L));
            }
            QueueOffsets out = QueueOffsets.of(end);
            if (begin != null) { // a queue the name server no longer lists keeps its offset
                begin.offsets.forEach((t, brokers) -> brokers.forEach((b, ids) -> ids.forEach((id, off) -> out.offsets
                        .computeIfAbsent(t, k -> new TreeMap<>()).computeIfAbsent(b, k -> new TreeMap<>())
                        .putIfAbsent(id, off))));
            }
            return out;
        }

        /**
         * {@code budget} offsets shared out by backlog: each queue with a backlog gets at least one while the
         * budget lasts (rounded down, the remainder to the largest backlogs), as the Python source shares it.
         */
        static Map<NetCluster.Queue, Long> share(Map<NetCluster.Queue, Long> backlog, long budget) {
            long total = 0;
            for (long n : backlog.values()) {
                total += n;
            }
            if (total <= budget) {
                return backlog;
            }
            Map<NetCluster.Queue, Long> out = new TreeMap<>(QUEUE_ORDER);
            long given = 0;
            for (Map.Entry<NetCluster.Queue, Long> e : backlog.entrySet()) {
                long n = (long) ((double) budget * e.getValue() / total);
                out.put(e.getKey(), n);
                given += n;
            }
            List<Map.Entry<NetCluster.Queue, Long>> largest = new ArrayList<>(backlog.entrySet());
            largest.sort((a, b) -> Long.compare(b.getValue(), a.getValue()));
            long left = budget - given;
            for (Map.Entry<NetCluster.Queue, Long> e : largest) {
                if (left <= 0) {
                    break;
                }
                if (out.get(e.getKey()) < e.getValue()) {
                    out.put(e.getKey(), out.get(e.getKey()) + 1);
                    left--;
                }
            }
            return out;
        }

        /** With {@code consumerGroup} given: {@code offsets} to the brokers (a failure is logged: the checkpoint,
         * not the broker, is what the query goes on from). */
        private void commitGroup(QueueOffsets offsets) {
            if (!options.commitOffsets || offsets == null || offsets.json().equals(committed)) {
                return;
            }
            boolean ok = true;
            try (NetCluster.Session s = new NetCluster.Session(options)) {
                for (NetCluster.Queue q : queues.isEmpty() ? NetCluster.queues(options) : queues) {
                    Long off = offsets.get(q);
                    if (off == null) {
                        continue;
                    }
                    try {
                        s.commit(q, options.consumerGroup, off);
                    } catch (RuntimeException e) {
                        ok = false;
                        LOG.warn("rocketmq network stream: {}", e.getMessage());
                    }
                }
            } catch (RuntimeException e) {
                LOG.warn("rocketmq network stream: offsets not committed to consumerGroup {}: {}",
                        options.consumerGroup, e.getMessage());
                return;
            }
            if (ok) {
                committed = offsets.json();
            }
        }

        @Override
        public InputPartition[] planInputPartitions(Offset start, Offset end) {
            QueueOffsets from = (QueueOffsets) start;
            QueueOffsets to = (QueueOffsets) end;
            Map<NetCluster.Queue, Long> f = new TreeMap<>(QUEUE_ORDER);
            Map<NetCluster.Queue, Long> t = new TreeMap<>(QUEUE_ORDER);
            List<NetCluster.Queue> known = queues.isEmpty() ? NetCluster.queues(options) : queues;
            try (NetCluster.Session s = new NetCluster.Session(options)) {
                for (NetCluster.Queue q : known) {
                    Long e = to.get(q);
                    if (e == null) {
                        continue;
                    }
                    Long b = from.get(q);
                    f.put(q, b != null ? b : s.min(q)); // a queue new since the last batch: from its start
                    t.put(q, e);
                }
            }
            return ranges(options, f, t);
        }

        @Override
        public PartitionReaderFactory createReaderFactory() {
            return new NetReader.Factory(options, schema);
        }

        @Override
        public Offset deserializeOffset(String json) {
            return QueueOffsets.parse(json);
        }

        @Override
        public void commit(Offset end) {
            commitGroup((QueueOffsets) end); // the checkpoint has them; the brokers too with consumerGroup
        }

        @Override
        public void stop() {
            // no connection is kept between calls
        }

        @Override
        public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
            if (latestConsumedOffset.isEmpty() || latest.isEmpty()) {
                return Map.of();
            }
            QueueOffsets consumed = (QueueOffsets) latestConsumedOffset.get();
            long min = Long.MAX_VALUE;
            long max = 0;
            long sum = 0;
            for (Map.Entry<NetCluster.Queue, Long> e : latest.entrySet()) {
                Long c = consumed.get(e.getKey());
                long behind = Math.max(0, e.getValue() - (c == null ? 0 : c));
                min = Math.min(min, behind);
                max = Math.max(max, behind);
                sum += behind;
            }
            Map<String, String> out = new HashMap<>();
            out.put("minOffsetsBehindLatest", Long.toString(min));
            out.put("maxOffsetsBehindLatest", Long.toString(max));
            out.put("avgOffsetsBehindLatest", Double.toString((double) sum / latest.size()));
            return out;
        }
    }
}
