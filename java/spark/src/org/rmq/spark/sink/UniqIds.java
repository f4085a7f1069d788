package org.rmq.spark.sink;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.time.ZoneId;
import java.util.Enumeration;
import java.util.concurrent.ThreadLocalRandom;

import org.rmq.spark.remoting.Remoting;

/**
 * Message ids ({@code UNIQ_KEY}) as RocketMQ's {@code MessageClientIDSetter} makes them: 32 uppercase hex
 * digits of the client's IPv4 address, its pid (a short), a random word, the milliseconds since the start of
 * the month and a 16-bit counter. One per writer (a task), so no lock.
 */
final class UniqIds {
    private static final byte[] HEX = "0123456789ABCDEF".getBytes(StandardCharsets.US_ASCII);
    private final byte[] prefix;
    private int counter = ThreadLocalRandom.current().nextInt(1 << 16);
    private long monthStart;
    private long nextMonth;

    UniqIds() {
        byte[] ip = ipv4();
        long pid = ProcessHandle.current().pid();
        int word = ThreadLocalRandom.current().nextInt(Integer.MAX_VALUE);
        byte[] fixed = new byte[10];
        System.arraycopy(ip, 0, fixed, 0, 4);
        fixed[4] = (byte) (pid >>> 8);
        fixed[5] = (byte) pid;
        Remoting.putInt(fixed, 6, word);
        prefix = new byte[20];
        for (int i = 0; i < 10; i++) {
            prefix[2 * i] = HEX[(fixed[i] >>> 4) & 0xF];
            prefix[2 * i + 1] = HEX[fixed[i] & 0xF];
        }
    }

    /** Appends the next id (32 ASCII bytes) to {@code out} at {@code at}; returns the end. */
    int next(byte[] out, int at, long nowMs) {
        if (nowMs >= nextMonth) {
            ZoneId zone = ZoneId.systemDefault();
            LocalDate first = LocalDate.now(zone).withDayOfMonth(1);
            monthStart = first.atStartOfDay(zone).toInstant().toEpochMilli();
            nextMonth = first.plusMonths(1).atStartOfDay(zone).toInstant().toEpochMilli();
        }
        System.arraycopy(prefix, 0, out, at, 20);
        at = hex(out, at + 20, (int) (nowMs - monthStart), 8);
        at = hex(out, at, counter, 4);
        counter = (counter + 1) & 0xFFFF;
        return at;
    }

    private static int hex(byte[] out, int at, int v, int digits) {
        for (int i = digits - 1; i >= 0; i--) {
            out[at + i] = HEX[v & 0xF];
            v >>>= 4;
        }
        return at + digits;
    }

    private static byte[] ipv4() {
        try {
            Enumeration<NetworkInterface> nics = NetworkInterface.getNetworkInterfaces();
            while (nics != null && nics.hasMoreElements()) {
                Enumeration<InetAddress> addrs = nics.nextElement().getInetAddresses();
                while (addrs.hasMoreElements()) {
                    InetAddress a = addrs.nextElement();
                    if (a instanceof Inet4Address && !a.isLoopbackAddress()) {
                        return a.getAddress();
                    }
                }
            }
        } catch (java.net.SocketException ignored) {
            // no interfaces to list: the loopback address below
        }
        return new byte[] {127, 0, 0, 1};
    }
}
