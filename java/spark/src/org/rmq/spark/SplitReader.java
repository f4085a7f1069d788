package org.rmq.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Decodes the records of one {@link Split} into columnar batches (the message record of REMOTING.md §4.1,
 * by {@link RecordDecoder}).
 *
 * <p>A read checks what it reads: every record's magic code, and what {@link RecordDecoder} checks (its
 * PHYSICALOFFSET equal to its position, so the chain of records is intact and every row is a record).
 * Damage raises an error naming the file and the offset: this reader has no failOnDataLoss=false
 * (rmq.spark.load reads such stores with the Python source, which skips damage).
 */
final class SplitReader implements PartitionReader<ColumnarBatch> {
    private static final int MESSAGE_MAGIC = RecordDecoder.MESSAGE_MAGIC;
    private static final int BLANK_MAGIC = RecordDecoder.BLANK_MAGIC;
    /** Bytes of variable-width data per batch (a batch ends after the row crossing it). */
    private static final long MAX_BATCH_BYTES = 32L << 20;

    /** Creates readers in the executors; serialised with the tasks. */
    static final class Factory extends ColumnarFactory {
        private static final long serialVersionUID = 1L;
        private final ReadOptions options;
        private final StructType schema;
        private final PushedAggregate aggregate;

        Factory(ReadOptions options, StructType schema, PushedAggregate aggregate) {
            this.options = options;
            this.schema = schema;
            this.aggregate = aggregate;
        }

        @Override
        public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
            Split split = (Split) partition;
            if (aggregate != null) {
                return new AggregateReader(split, options, aggregate);
            }
            return new SplitReader(split, options, Columns.ids(schema), schema);
        }
    }

    private final Split split;
    private final int maxRows;
    private final FileChannel channel;
    private final Mapping buf;
    private final int bufLen;
    private final WritableColumnVector[] vectors;
    private final ColumnarBatch batch;
    private final RecordDecoder decoder;
    private long pos;
    private boolean done;

    SplitReader(Split split, ReadOptions options, int[] ids, StructType schema) {
        this.split = split;
        try {
            channel = FileChannel.open(Path.of(split.file), StandardOpenOption.READ);
            long from = split.start - split.base;
            long len = Math.min(channel.size() - from, Integer.MAX_VALUE);
            if (len < 0) {
                throw new IOException("CommitLog file " + split.file + " is " + channel.size()
                        + " bytes, shorter than the planned split at byte " + from);
            }
            buf = new Mapping(channel, from, (int) len);
        } catch (NoSuchFileException e) {
            throw new UncheckedIOException(new IOException("CommitLog file " + split.file
                    + " holding offset " + split.start + " was deleted since the read was planned (retention?)", e));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        bufLen = buf.length;
        maxRows = ids.length == 0 ? Integer.MAX_VALUE : options.batchRows;
        vectors = OnHeapColumnVector.allocateColumns(ids.length == 0 ? 1 : Math.min(maxRows, 1 << 16), schema);
        decoder = new RecordDecoder(this::damage, options.checkCrc, options.decompress, ids, vectors);
        batch = new ColumnarBatch(vectors.length == 0 ? new ColumnVector[0] : vectors);
        pos = split.start;
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
            if (pos >= split.end) {
                finish(pos);
                break;
            }
            int p = (int) (pos - split.start);
            if (p + 8 > bufLen) {
                if (p == bufLen) {
                    finish(pos); // the file is full to its last byte
                    break;
                }
                throw damage(pos, "the file ends inside a record header");
            }
            int total = buf.getInt(p);
            int magic = buf.getInt(p + 4);
            if (magic == BLANK_MAGIC) {
                finish(pos); // the end-of-file blank: the file has no more records
                break;
            }
            if (magic != MESSAGE_MAGIC) {
                if (total == 0 && magic == 0 && zerosToEnd(p)) {
                    finish(pos); // the file's unwritten tail
                    break;
                }
                throw damage(pos, String.format("magic code 0x%08x is not a message's", magic));
            }
            bytes += decoder.append(buf, bufLen, p, total, pos);
            rows++;
            pos += total;
        }
        batch.setNumRows(rows);
        return rows > 0 || !done;
    }

    private void finish(long at) throws IOException {
        done = true;
        if (split.endIsBoundary && at != split.end) {
            throw new IOException("records of split [" + split.start + ", " + split.end + ") of CommitLog file " + split.file
                    + " end at offset " + at + " instead of the next split's start");
        }
    }

    /** Whether every byte from {@code p} to the split's end (within the file) is zero. */
    private boolean zerosToEnd(int p) {
        int end = (int) Math.min(bufLen, split.end - split.start);
        for (int i = p; i < end; i++) {
            if (buf.get(i) != 0) {
                return false;
            }
        }
        return true;
    }

    private IOException damage(long at, String why) {
        return new IOException("CommitLog file " + split.file + " is damaged at offset " + at + " (byte "
                + (at - split.base) + " of the file): " + why + " (rmq.spark.load(..., failOnDataLoss='false') reads"
                + " past damage with the Python source)");
    }

    @Override
    public ColumnarBatch get() {
        return batch;
    }

    @Override
    public void close() throws IOException {
        batch.close();
        channel.close();
    }
}
