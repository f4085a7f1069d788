package org.rmq.spark;

import java.io.Serializable;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/** The options of a read, checked: anything unknown or malformed is an error naming it. */
final class ReadOptions implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final Set<String> KNOWN = Set.of("commitlogdir", "splits", "checkcrc", "decompress", "batchsize", "path");

    final String commitlogDir;
    /** {start, end, endIsBoundary (0 or 1)} per split. */
    final long[][] splits;
    final boolean checkCrc;
    final boolean decompress;
    final int batchRows;

    private ReadOptions(String commitlogDir, long[][] splits, boolean checkCrc, boolean decompress, int batchRows) {
        this.commitlogDir = commitlogDir;
        this.splits = splits;
        this.checkCrc = checkCrc;
        this.decompress = decompress;
        this.batchRows = batchRows;
    }

    static ReadOptions parse(Map<String, String> given) {
        Map<String, String> o = new TreeMap<>();
        for (Map.Entry<String, String> e : given.entrySet()) {
            o.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue());
        }
        for (String k : o.keySet()) {
            if (!KNOWN.contains(k)) {
                throw new IllegalArgumentException("unknown option '" + k + "' of the JVM rocketmq reader (it takes commitlogDir,"
                        + " splits, checkCRC, decompress, batchSize; rmq.spark.load plans a read and passes them)");
            }
        }
        String dir = o.get("commitlogdir");
        String splits = o.get("splits");
        if (dir == null || splits == null) {
            throw new IllegalArgumentException("the JVM rocketmq reader needs the options commitlogDir and splits:"
                    + " load a store with rmq.spark.load(spark, path), which plans the read");
        }
        return new ReadOptions(dir, parseSplits(splits), bool(o, "checkcrc", "checkCRC"), bool(o, "decompress", "decompress"),
                batchRows(o.getOrDefault("batchsize", "8192")));
    }

    private static long[][] parseSplits(String text) {
        if (text.isBlank()) {
            return new long[0][];
        }
        String[] items = text.split(";");
        long[][] out = new long[items.length][];
        for (int i = 0; i < items.length; i++) {
            String[] f = items[i].split(":");
            try {
                if (f.length != 3 || !(f[2].equals("0") || f[2].equals("1"))) {
                    throw new NumberFormatException();
                }
                long start = Long.parseLong(f[0]);
                long end = Long.parseLong(f[1]);
                if (start < 0 || end < start) {
                    throw new NumberFormatException();
                }
                out[i] = new long[] {start, end, Long.parseLong(f[2])};
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("option splits: '" + items[i] + "' is not start:end:endIsBoundary"
                        + " (0 <= start <= end, endIsBoundary 0 or 1)");
            }
        }
        return out;
    }

    private static boolean bool(Map<String, String> o, String key, String name) {
        String v = o.getOrDefault(key, "true").trim().toLowerCase(Locale.ROOT);
        switch (v) {
            case "true":
                return true;
            case "false":
                return false;
            default:
                throw new IllegalArgumentException("option " + name + " must be true or false, not '" + o.get(key) + "'");
        }
    }

    private static int batchRows(String text) {
        try {
            int n = Integer.parseInt(text.trim());
            if (n > 0) {
                return n;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException("option batchSize must be a positive number of rows, not '" + text + "'");
    }
}
