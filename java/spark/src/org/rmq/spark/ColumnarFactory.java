package org.rmq.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/** A reader factory whose readers produce columnar batches only (both JVM readers' are). */
abstract class ColumnarFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;

    @Override
    public final boolean supportColumnarReads(InputPartition partition) {
        return true;
    }

    @Override
    public final PartitionReader<InternalRow> createReader(InputPartition partition) {
        throw new UnsupportedOperationException("the rocketmq JVM readers produce columnar batches only");
    }
}
