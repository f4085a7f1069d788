package org.rmq.spark;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

import org.apache.spark.sql.execution.vectorized.WritableColumnVector;

/**
 * A record's property string, parsed in place (REMOTING.md §4.3, Java's {@code MessageDecoder.string2messageProperties}):
 * entries {@code name \x01 value} joined by {@code \x02}; a segment without a name or a value is dropped; the value
 * runs from the first {@code \x01} to the segment's end; a later duplicate wins.
 */
final class Properties {
    private byte[] b;
    /** Per entry: name start, name end, value start, value end. */
    private int[] r = new int[64];
    private int[] sig = new int[16]; // r.length / 4
    private int n;
    private boolean mayRepeat;
    int tags;
    int keys;
    int uniqKey;
    private int tranMsg;

    private static final VarHandle LONG_LE = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final long LOW7 = 0x7f7f7f7f7f7f7f7fL;
    private static final long HIGH = 0x8080808080808080L;

    /** The high bit of every byte of {@code w} below 3 (exact per byte: {@code (b & 0x7f) + 0x7d} cannot carry into
     * the next byte and reaches the high bit exactly when {@code b & 0x7f >= 3}). */
    private static long below3(long w) {
        return ~(((w & LOW7) + 0x7d7d7d7d7d7d7d7dL) | w) & HIGH;
    }

    /** Whether {@code b[off, off + len)} is ASCII. */
    static boolean isAscii(byte[] b, int off, int len) {
        long any = 0;
        int i = off;
        int end = off + len;
        for (; i + 8 <= end; i += 8) {
            any |= (long) LONG_LE.get(b, i);
        }
        for (; i < end; i++) {
            any |= b[i];
        }
        return (any & HIGH) == 0;
    }

    /** Parse {@code bytes[off, off + len)}, eight bytes at a time (only the separators, bytes below 3, are looked
     * at one by one); returns whether the string is ASCII (if not, the caller checks that it is UTF-8). */
    boolean parse(byte[] bytes, int off, int len) {
        b = bytes;
        n = 0;
        tags = keys = uniqKey = tranMsg = -1;
        mayRepeat = false;
        start = off;
        sep = -1;
        int end = off + len;
        long any = 0;
        int i = off;
        for (; i + 8 <= end; i += 8) {
            long w = (long) LONG_LE.get(bytes, i);
            any |= w;
            for (long m = below3(w); m != 0; m &= m - 1) {
                separator(i + (Long.numberOfTrailingZeros(m) >>> 3));
            }
        }
        for (; i < end; i++) {
            any |= bytes[i];
            if (bytes[i] >= 0 && bytes[i] < 3) {
                separator(i);
            }
        }
        close(start, end, sep);
        return (any & HIGH) == 0;
    }

    private int start;
    private int sep;

    private void separator(int i) {
        byte c = b[i];
        if (c == 2) {
            close(start, i, sep);
            start = i + 1;
            sep = -1;
        } else if (c == 1 && sep < 0) {
            sep = i;
        }
    }

    private void close(int start, int end, int sep) {
        if (sep < 0 || sep <= start || sep + 1 >= end) {
            return;
        }
        if (4 * n + 4 > r.length) {
            r = java.util.Arrays.copyOf(r, r.length * 2);
            sig = java.util.Arrays.copyOf(sig, r.length / 4);
        }
        r[4 * n] = start;
        r[4 * n + 1] = sep;
        r[4 * n + 2] = sep + 1;
        r[4 * n + 3] = end;
        int len = sep - start;
        if (len == 4 && b[start + 1] == 'A') {
            if (is(start, TAGS)) {
                tags = n;
            }
        } else if (len == 4 && b[start + 1] == 'E') {
            if (is(start, KEYS)) {
                keys = n;
            }
        } else if (len == 8 && b[start] == 'U') {
            if (is(start, UNIQ_KEY)) {
                uniqKey = n;
            }
        } else if (len == 8 && b[start] == 'T') {
            if (is(start, TRAN_MSG)) {
                tranMsg = n;
            }
        }
        // A cheap signature of the name (equal names have equal signatures): only entries whose signature
        // repeats need the exact comparison that drops an earlier duplicate from the map.
        int h = len * 31 + b[start] * 7 + b[sep - 1];
        for (int j = 0; j < n; j++) {
            if (sig[j] == h) {
                mayRepeat = true;
                break;
            }
        }
        sig[n] = h;
        n++;
    }

    private boolean is(int at, byte[] name) {
        for (int i = 0; i < name.length; i++) {
            if (b[at + i] != name[i]) {
                return false;
            }
        }
        return true;
    }

    private static final byte[] TAGS = ascii("TAGS");
    private static final byte[] KEYS = ascii("KEYS");
    private static final byte[] UNIQ_KEY = ascii("UNIQ_KEY");
    private static final byte[] TRAN_MSG = ascii("TRAN_MSG");
    private static final byte[] TRUE = ascii("true");

    private static byte[] ascii(String s) {
        return s.getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    }

    /** The bytes the parsed string lies in. */
    byte[] bytes() {
        return b;
    }

    int valueStart(int e) {
        return r[4 * e + 2];
    }

    int valueLen(int e) {
        return r[4 * e + 3] - r[4 * e + 2];
    }

    /** {@code TRAN_MSG} (the last one) is {@code true}. */
    boolean tranMsgIsTrue() {
        return tranMsg >= 0 && java.util.Arrays.equals(b, r[4 * tranMsg + 2], r[4 * tranMsg + 3], TRUE, 0, TRUE.length);
    }

    private boolean overridden(int e) {
        if (!mayRepeat) {
            return false;
        }
        for (int j = e + 1; j < n; j++) {
            if (sig[j] == sig[e] && java.util.Arrays.equals(b, r[4 * e], r[4 * e + 1], b, r[4 * j], r[4 * j + 1])) {
                return true;
            }
        }
        return false;
    }

    /** Append the properties as one map row (names unique, the last duplicate kept); returns the bytes appended. */
    long appendMap(WritableColumnVector v) {
        int kept = n;
        if (mayRepeat) {
            for (int e = 0; e < n; e++) {
                if (overridden(e)) {
                    kept--;
                }
            }
        }
        v.appendArray(kept);
        WritableColumnVector k = v.getChild(0);
        WritableColumnVector val = v.getChild(1);
        long bytes = 0;
        for (int e = 0; e < n; e++) {
            if (overridden(e)) {
                continue;
            }
            k.appendByteArray(b, r[4 * e], r[4 * e + 1] - r[4 * e]);
            val.appendByteArray(b, r[4 * e + 2], r[4 * e + 3] - r[4 * e + 2]);
            bytes += r[4 * e + 3] - r[4 * e];
        }
        return bytes;
    }
}
