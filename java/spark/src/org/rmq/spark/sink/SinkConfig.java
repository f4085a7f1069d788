package org.rmq.spark.sink;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.rmq.spark.remoting.Signer;
import org.rmq.spark.remoting.Tls;

/**
 * The options of the JVM sink, as {@code rmq.spark.save} passes them after checking them in Python (the
 * same names and defaults as the Python sink's options): {@code nameServer} ({@code host:port} separated by
 * {@code ;}), {@code topic} (for rows without a {@code topic} column), {@code producerGroup},
 * {@code sendTimeoutMs}, {@code retries}, {@code maxInFlight}, {@code batchSize}, and ACL credentials
 * {@code accessKey} / {@code secretKey} / {@code securityToken} (every request signed), TLS {@code tls},
 * {@code tlsCa}, {@code tlsVerify}.
 */
final class SinkConfig implements Serializable {
    private static final long serialVersionUID = 1L;

    /** A message's body at most (the producer's {@code maxMessageSize}, as the Python sink checks it). */
    static final int MAX_BODY = 4 << 20;
    /** A batch's messages at most, in bytes (the Python sink's {@code BATCH_BYTES}). */
    static final int BATCH_BYTES = 1 << 20;

    final List<String> nameServers;
    final String topic;
    final String producerGroup;
    final int sendTimeoutMs;
    final int retries;
    final int maxInFlight;
    final int batchSize;
    /** ACL credentials ({@code accessKey}, {@code secretKey}, {@code securityToken}), or null. */
    final Signer signer;
    /** TLS ({@code tls}, {@code tlsCa}, {@code tlsVerify}), or null. */
    final Tls tls;

    private SinkConfig(Map<String, String> o) {
        String ns = get(o, "nameServer");
        if (ns == null || ns.isBlank()) {
            throw new IllegalArgumentException(
                    "rocketmq sink: option nameServer is required (host:port of the name servers, ';'-separated)");
        }
        List<String> list = new ArrayList<>();
        for (String s : ns.split(";")) {
            if (!s.isBlank()) {
                list.add(s.strip());
            }
        }
        this.nameServers = List.copyOf(list);
        String t = get(o, "topic");
        this.topic = t == null || t.isBlank() ? null : t.strip();
        String g = get(o, "producerGroup");
        this.producerGroup = g == null || g.isBlank() ? "rmq_spark_sink" : g;
        this.sendTimeoutMs = intOption(o, "sendTimeoutMs", 3000, 1);
        this.retries = intOption(o, "retries", 2, 0);
        this.maxInFlight = intOption(o, "maxInFlight", 256, 1);
        this.batchSize = intOption(o, "batchSize", 128, 1);
        this.signer = Signer.of(o);
        this.tls = Tls.of(o);
    }

    static SinkConfig parse(Map<String, String> options) {
        return new SinkConfig(options);
    }

    /** Batches a task has sent and not yet had answered, at most. */
    int window() {
        return Math.max(1, maxInFlight / batchSize);
    }

    private static String get(Map<String, String> o, String name) {
        for (Map.Entry<String, String> e : o.entrySet()) {
            if (e.getKey().equalsIgnoreCase(name)) {
                return e.getValue();
            }
        }
        return null;
    }

    private static int intOption(Map<String, String> o, String name, int dflt, int low) {
        String raw = get(o, name);
        if (raw == null) {
            return dflt;
        }
        int v;
        try {
            v = Integer.parseInt(raw.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("rocketmq sink option " + name + "='" + raw + "' is not an integer", e);
        }
        if (v < low) {
            throw new IllegalArgumentException("rocketmq sink option " + name + "=" + v + " must be at least " + low);
        }
        return v;
    }
}
