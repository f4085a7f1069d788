package org.rmq.spark;

import java.io.File;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The JVM reader of an rmq / RocketMQ 4.x CommitLog: a Spark DataSource V2 batch source that decodes records
 * into columnar batches inside Spark's executors, reading only the columns a query needs.
 *
 * <p>It does not plan: {@code rmq.spark.load(spark, path)} plans the read in Python (the committed end of
 * the CommitLog and splits cut on record boundaries, by rmq's Rust reader) and passes the splits as options:
 * {@code commitlogDir} and {@code splits} ({@code start:end:endIsBoundary} separated by {@code ;}). Other
 * options: {@code checkCRC} and {@code decompress} (default true), {@code batchSize} (rows per batch).
 */
public final class RocketMQSource implements TableProvider {
    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return Columns.SCHEMA;
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new CommitLogTable(ReadOptions.parse(properties));
    }

    /** The CommitLog as a table of rows. */
    static final class CommitLogTable implements SupportsRead {
        private final ReadOptions options;

        CommitLogTable(ReadOptions options) {
            this.options = options;
        }

        @Override
        public String name() {
            return "rocketmq(" + options.commitlogDir + ")";
        }

        @Override
        @SuppressWarnings("deprecation") // Spark 4 still reads a V2 table's schema through it
        public StructType schema() {
            return Columns.SCHEMA;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return EnumSet.of(TableCapability.BATCH_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap ignored) {
            return new CommitLogScanBuilder(options);
        }
    }

    /** Keeps the columns the query needs (column pruning), or takes an aggregate over them. */
    static final class CommitLogScanBuilder
            implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownAggregates {
        private final ReadOptions options;
        private StructType required = Columns.SCHEMA;
        private PushedAggregate aggregate;

        CommitLogScanBuilder(ReadOptions options) {
            this.options = options;
        }

        @Override
        public void pruneColumns(StructType requiredSchema) {
            Columns.ids(requiredSchema);
            required = requiredSchema;
        }

        @Override
        public boolean pushAggregation(Aggregation aggregation) {
            // With no split Spark would merge no partial result, and a count of nothing must still be 0.
            aggregate = options.splits.length == 0 ? null : PushedAggregate.of(aggregation);
            return aggregate != null;
        }

        @Override
        public Scan build() {
            return new CommitLogScan(options, aggregate == null ? required : aggregate.resultSchema(), aggregate);
        }
    }

    /** One split per planned CommitLog range; each decoded into columnar batches. */
    static final class CommitLogScan implements Scan, Batch {
        private final ReadOptions options;
        private final StructType schema;
        private final PushedAggregate aggregate;

        CommitLogScan(ReadOptions options, StructType schema, PushedAggregate aggregate) {
            this.options = options;
            this.schema = schema;
            this.aggregate = aggregate;
        }

        @Override
        public StructType readSchema() {
            return schema;
        }

        @Override
        public String description() {
            return "rocketmq CommitLog " + options.commitlogDir + ", " + options.splits.length + " splits"
                    + (aggregate == null ? "" : ", pushed aggregate: " + aggregate);
        }

        @Override
        public Batch toBatch() {
            return this;
        }

        @Override
        public InputPartition[] planInputPartitions() {
            // The file holding each split: the one with the greatest start offset at or below the split's start.
            TreeMap<Long, String> files = new TreeMap<>();
            File[] listed = new File(options.commitlogDir).listFiles();
            if (listed != null) {
                for (File f : listed) {
                    String n = f.getName();
                    if (n.length() == 20 && n.chars().allMatch(Character::isDigit)) {
                        files.put(Long.parseLong(n), f.getPath());
                    }
                }
            }
            List<InputPartition> parts = new ArrayList<>();
            for (long[] s : options.splits) {
                Map.Entry<Long, String> file = files.floorEntry(s[0]);
                if (file == null) {
                    throw new IllegalStateException("no CommitLog file of " + options.commitlogDir + " holds offset " + s[0]
                            + " (deleted by retention since the read was planned?)");
                }
                parts.add(new Split(file.getValue(), file.getKey(), s[0], s[1], s[2] != 0));
            }
            return parts.toArray(new InputPartition[0]);
        }

        @Override
        public PartitionReaderFactory createReaderFactory() {
            return new SplitReader.Factory(options, schema, aggregate);
        }
    }
}
