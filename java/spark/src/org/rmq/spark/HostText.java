package org.rmq.spark;

import java.nio.charset.StandardCharsets;

import org.apache.spark.sql.execution.vectorized.WritableColumnVector;

/**
 * {@code ip:port} text of a stored host ({@code [v6]:port} for IPv6, RFC 5952 form as Rust's {@code SocketAddr}
 * prints it), formatted again only when the address changes.
 */
final class HostText {
    private final byte[] last = new byte[20];
    private int lastLen = -1;
    private byte[] text = new byte[0];

    /** Append the text of the host at {@code at} (ip then a 4-byte port); returns its length. */
    int append(WritableColumnVector v, Mapping buf, int at, boolean v6) {
        int len = v6 ? 20 : 8;
        if (len != lastLen || !buf.equals(at, last, 0, len)) {
            buf.copy(at, last, 0, len);
            lastLen = len;
            text = format(last, v6).getBytes(StandardCharsets.US_ASCII);
        }
        v.appendByteArray(text, 0, text.length);
        return text.length;
    }

    static String format(byte[] raw, boolean v6) {
        int ipLen = v6 ? 16 : 4;
        int port = (((raw[ipLen] & 0xff) << 24) | ((raw[ipLen + 1] & 0xff) << 16) | ((raw[ipLen + 2] & 0xff) << 8)
                | (raw[ipLen + 3] & 0xff)) & 0xffff;
        if (!v6) {
            return (raw[0] & 0xff) + "." + (raw[1] & 0xff) + "." + (raw[2] & 0xff) + "." + (raw[3] & 0xff) + ":" + port;
        }
        return "[" + ipv6(raw) + "]:" + port;
    }

    /** RFC 5952 text: lowercase hex groups, the longest run (the first of equals) of two or more zero groups as
     * {@code ::}; an IPv4-mapped address as {@code ::ffff:a.b.c.d}. */
    static String ipv6(byte[] raw) {
        int[] g = new int[8];
        for (int i = 0; i < 8; i++) {
            g[i] = ((raw[2 * i] & 0xff) << 8) | (raw[2 * i + 1] & 0xff);
        }
        if (g[0] == 0 && g[1] == 0 && g[2] == 0 && g[3] == 0 && g[4] == 0 && g[5] == 0xffff) {
            return "::ffff:" + (raw[12] & 0xff) + "." + (raw[13] & 0xff) + "." + (raw[14] & 0xff) + "." + (raw[15] & 0xff);
        }
        int bestAt = -1;
        int bestLen = 0;
        for (int i = 0; i < 8; ) {
            if (g[i] != 0) {
                i++;
                continue;
            }
            int j = i;
            while (j < 8 && g[j] == 0) {
                j++;
            }
            if (j - i > bestLen) {
                bestAt = i;
                bestLen = j - i;
            }
            i = j;
        }
        if (bestLen < 2) {
            bestAt = -1;
        }
        StringBuilder s = new StringBuilder(40);
        for (int i = 0; i < 8; i++) {
            if (i == bestAt) {
                s.append("::");
                i += bestLen - 1;
                continue;
            }
            if (s.length() > 0 && s.charAt(s.length() - 1) != ':') {
                s.append(':');
            }
            s.append(Integer.toHexString(g[i]));
        }
        return s.toString();
    }
}
