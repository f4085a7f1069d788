package org.rmq.spark.sink;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The JVM sink: a Spark DataSource V2 batch and streaming writer that sends rows to RocketMQ topics
 * at-least-once from the executors, with no Python worker and no Arrow hop. {@code rmq.spark.save(df, ...)}
 * and {@code rmq.spark.write_stream(df, ...)} check the options and columns in Python (the same checks and
 * errors as the Python sink) and write through this class when it serves them: columns among {@code body},
 * {@code topic}, {@code tags}, {@code keys} (strings), no ACL or TLS, at-least-once. Options:
 * {@link SinkConfig}. Each task looks up its topics' routes from the name servers and sends as
 * {@link SinkWriter} says; a job's commit has nothing to undo or finish (at-least-once).
 */
public final class RocketMQSink implements TableProvider {
    private static final Logger LOG = LoggerFactory.getLogger(RocketMQSink.class);

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return new StructType();
    }

    @Override
    public boolean supportsExternalMetadata() {
        return true; // the DataFrame's schema is the table's
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new TopicTable(SinkConfig.parse(properties), schema);
    }

    /** The topics as a table rows are appended to. */
    static final class TopicTable implements SupportsWrite {
        private final SinkConfig cfg;
        private final StructType schema;

        TopicTable(SinkConfig cfg, StructType schema) {
            this.cfg = cfg;
            this.schema = schema;
        }

        @Override
        public String name() {
            return "rocketmq(" + String.join(";", cfg.nameServers) + ")";
        }

        @Override
        @SuppressWarnings("deprecation") // Spark 4 still reads a V2 table's schema through it
        public StructType schema() {
            return schema;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return EnumSet.of(
                    TableCapability.BATCH_WRITE, TableCapability.STREAMING_WRITE, TableCapability.ACCEPT_ANY_SCHEMA);
        }

        @Override
        public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
            StructType rows = info.schema();
            return new WriteBuilder() {
                @Override
                public Write build() {
                    return new Write() {
                        @Override
                        public BatchWrite toBatch() {
                            return new Append(cfg, rows);
                        }

                        @Override
                        public StreamingWrite toStreaming() {
                            return new Append(cfg, rows);
                        }
                    };
                }
            };
        }
    }

    /** A job (or a micro-batch) appending rows: tasks send, the driver only logs what they sent. */
    static final class Append implements BatchWrite, StreamingWrite {
        private final SinkConfig cfg;
        private final StructType rows;

        Append(SinkConfig cfg, StructType rows) {
            this.cfg = cfg;
            this.rows = rows;
        }

        @Override
        public boolean useCommitCoordinator() {
            return true; // Spark's default for both kinds of write
        }

        @Override
        public Writers createBatchWriterFactory(PhysicalWriteInfo info) {
            return new Writers(cfg, rows);
        }

        @Override
        public Writers createStreamingWriterFactory(PhysicalWriteInfo info) {
            return new Writers(cfg, rows);
        }

        @Override
        public void commit(WriterCommitMessage[] messages) {
            log(messages, "a write");
        }

        @Override
        public void abort(WriterCommitMessage[] messages) {
            LOG.warn("rocketmq sink: a write failed; rows its tasks stored stay in the topic (at-least-once)");
        }

        @Override
        public void commit(long epochId, WriterCommitMessage[] messages) {
            log(messages, "batch " + epochId);
        }

        @Override
        public void abort(long epochId, WriterCommitMessage[] messages) {
            LOG.warn("rocketmq sink: batch {} failed; rows its tasks stored stay in the topic (at-least-once)", epochId);
        }

        private static void log(WriterCommitMessage[] messages, String what) {
            long rows = 0;
            long resent = 0;
            for (WriterCommitMessage m : messages) {
                if (m instanceof SinkWriter.Committed c) {
                    rows += c.rows();
                    resent += c.resent();
                }
            }
            LOG.info("rocketmq sink: {} stored {} rows ({} batches sent again)", what, rows, resent);
        }
    }

    /** Makes each task's writer (serialised to the executors). */
    static final class Writers implements DataWriterFactory, StreamingDataWriterFactory {
        private static final long serialVersionUID = 1L;
        private final SinkConfig cfg;
        private final StructType rows;

        Writers(SinkConfig cfg, StructType rows) {
            this.cfg = cfg;
            this.rows = rows;
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
            return new SinkWriter(cfg, rows);
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
            return new SinkWriter(cfg, rows);
        }
    }
}
