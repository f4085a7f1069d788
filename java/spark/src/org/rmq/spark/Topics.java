package org.rmq.spark;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/** RocketMQ 4.9.8's system topics ({@code TopicValidator}) and the transaction half topic. */
final class Topics {
    private Topics() {}

    private static final byte[][] SYSTEM = bytes("TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
            "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC",
            "OFFSET_MOVED_EVENT");
    private static final byte[] PREFIX = "rmq_sys_".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] HALF = "RMQ_SYS_TRANS_HALF_TOPIC".getBytes(StandardCharsets.US_ASCII);

    private static byte[][] bytes(String... names) {
        byte[][] out = new byte[names.length][];
        for (int i = 0; i < names.length; i++) {
            out[i] = names[i].getBytes(StandardCharsets.US_ASCII);
        }
        return out;
    }

    static boolean isSystem(byte[] b, int off, int len) {
        if (len >= PREFIX.length && Arrays.equals(b, off, off + PREFIX.length, PREFIX, 0, PREFIX.length)) {
            return true;
        }
        for (byte[] t : SYSTEM) {
            if (Arrays.equals(b, off, off + len, t, 0, t.length)) {
                return true;
            }
        }
        return false;
    }

    static boolean isHalf(byte[] b, int off, int len) {
        return Arrays.equals(b, off, off + len, HALF, 0, HALF.length);
    }
}
