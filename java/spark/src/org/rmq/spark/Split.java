package org.rmq.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/** The records starting in {@code [start, end)} of one CommitLog file (whose first byte is at {@code base}). */
final class Split implements InputPartition {
    private static final long serialVersionUID = 1L;

    final String file;
    final long base;
    final long start;
    final long end;
    /** {@code end} is the next split's first record: this split's last record must end exactly there. */
    final boolean endIsBoundary;

    Split(String file, long base, long start, long end, boolean endIsBoundary) {
        this.file = file;
        this.base = base;
        this.start = start;
        this.end = end;
        this.endIsBoundary = endIsBoundary;
    }
}
