package org.rmq.spark;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.Buffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;

import org.apache.spark.unsafe.Platform;

/**
 * A read-only mapping of part of a CommitLog file (or records in a byte array, as a pull answer carries
 * them), read big-endian at byte positions.
 *
 * <p>Reads go straight to the mapped memory through Spark's {@link Platform} (sun.misc.Unsafe), as Spark reads
 * its own off-heap memory: a {@code ByteBuffer} access costs more than the load itself (scope and index
 * checks), which shows at hundreds of millions of field reads. Every read checks its range here against the
 * mapping's length, so no read leaves the mapping; the buffer is kept, which keeps the mapping alive.
 */
final class Mapping {
    private static final long ADDRESS_FIELD = addressField();

    /** The offset of {@code java.nio.Buffer.address} (a direct buffer's base address), found once. */
    private static long addressField() {
        try {
            Field theUnsafe = Class.forName("sun.misc.Unsafe").getDeclaredField("theUnsafe");
            theUnsafe.setAccessible(true);
            Object unsafe = theUnsafe.get(null);
            Method offset = unsafe.getClass().getMethod("objectFieldOffset", Field.class);
            return (long) offset.invoke(unsafe, Buffer.class.getDeclaredField("address"));
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot find java.nio.Buffer.address through sun.misc.Unsafe", e);
        }
    }

    /** What keeps the memory alive: the mapped buffer, or the array ({@code base} of every read). */
    private final Object keep;
    private final Object base;
    private final long address;
    final int length;

    /** Map {@code length} bytes of {@code channel} from {@code position} (at most 2 GiB - 1). */
    Mapping(FileChannel channel, long position, int length) throws IOException {
        MappedByteBuffer buffer = channel.map(FileChannel.MapMode.READ_ONLY, position, length);
        keep = buffer;
        base = null;
        address = Platform.getLong(buffer, ADDRESS_FIELD);
        this.length = buffer.capacity();
    }

    /** The first {@code length} bytes of {@code array}. */
    Mapping(byte[] array, int length) {
        if (length < 0 || length > array.length) {
            throw new IndexOutOfBoundsException(length + " bytes of a " + array.length + "-byte array");
        }
        keep = array;
        base = array;
        address = Platform.BYTE_ARRAY_OFFSET;
        this.length = length;
    }

    private void check(int p, int n) {
        if (p < 0 || p > length - n) {
            throw new IndexOutOfBoundsException("bytes [" + p + ", " + ((long) p + n) + ") are outside the " + length
                    + "-byte mapping");
        }
    }

    byte get(int p) {
        check(p, 1);
        return Platform.getByte(base, address + p);
    }

    short getShort(int p) {
        check(p, 2);
        return Short.reverseBytes(Platform.getShort(base, address + p));
    }

    int getInt(int p) {
        check(p, 4);
        return Integer.reverseBytes(Platform.getInt(base, address + p));
    }

    long getLong(int p) {
        check(p, 8);
        return Long.reverseBytes(Platform.getLong(base, address + p));
    }

    /** Copy {@code len} bytes from {@code p} into {@code dst} at {@code off}. */
    void copy(int p, byte[] dst, int off, int len) {
        check(p, len);
        if (off < 0 || off > dst.length - len) {
            throw new IndexOutOfBoundsException("bytes [" + off + ", " + (off + len) + ") are outside a " + dst.length
                    + "-byte array");
        }
        long from = address + p;
        long to = Platform.BYTE_ARRAY_OFFSET + off;
        if (len >= 256) {
            Platform.copyMemory(base, from, dst, to, len);
            return;
        }
        int i = 0;
        for (; i + 8 <= len; i += 8) {
            Platform.putLong(dst, to + i, Platform.getLong(base, from + i));
        }
        for (; i < len; i++) {
            Platform.putByte(dst, to + i, Platform.getByte(base, from + i));
        }
    }

    /** Whether the {@code len} bytes at {@code p} equal {@code b[off, off + len)}. */
    boolean equals(int p, byte[] b, int off, int len) {
        check(p, len);
        long from = address + p;
        long to = Platform.BYTE_ARRAY_OFFSET + off;
        int i = 0;
        for (; i + 8 <= len; i += 8) {
            if (Platform.getLong(base, from + i) != Platform.getLong(b, to + i)) {
                return false;
            }
        }
        for (; i < len; i++) {
            if (Platform.getByte(base, from + i) != b[off + i]) {
                return false;
            }
        }
        return true;
    }
}
