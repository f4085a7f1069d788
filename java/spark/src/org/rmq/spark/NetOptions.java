package org.rmq.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.rmq.spark.remoting.Signer;
import org.rmq.spark.remoting.Tls;

/**
 * The options of the JVM network reader, as {@code rmq.spark.load} / {@code rmq.spark.read_stream} pass them
 * after checking them with the Python network source's parser (same names and defaults):
 * {@code nameServer}, {@code topics} (comma-separated), {@code startingOffsets} and {@code endingOffsets}
 * ({@code earliest} or {@code latest}), {@code minPartitions}, {@code subExpression}, {@code expressionType},
 * {@code consumerGroup} (named by the pulls), {@code commitOffsets} ({@code true}: a stream commits each
 * batch's end offsets to {@code consumerGroup}), {@code maxOffsetsPerTrigger}, {@code pullBatchSize},
 * {@code pullTimeoutMs}, {@code batchSize}, {@code checkCRC}, {@code decompress}, and ACL credentials
 * {@code accessKey} / {@code secretKey} / {@code securityToken} (every request signed), TLS {@code tls},
 * {@code tlsCa}, {@code tlsVerify}.
 */
final class NetOptions implements Serializable {
    private static final long serialVersionUID = 1L;

    final List<String> nameServers;
    final List<String> topics;
    /** {@code earliest} or {@code latest}; null: the default (batch earliest, streaming latest). */
    final String starting;
    final String ending;
    final int minPartitions;
    final String subExpression;
    final String expressionType;
    final String consumerGroup;
    final boolean commitOffsets;
    /** Offsets per micro-batch at most (0: no limit). */
    final long maxOffsetsPerTrigger;
    final int pullBatchSize;
    final int pullTimeoutMs;
    final int batchRows;
    final boolean checkCrc;
    final boolean decompress;
    /** ACL credentials ({@code accessKey}, {@code secretKey}, {@code securityToken}), or null. */
    final Signer signer;
    /** TLS ({@code tls}, {@code tlsCa}, {@code tlsVerify}), or null. */
    final Tls tls;

    NetOptions(Map<String, String> o) {
        nameServers = split(required(o, "nameServer"), ";");
        topics = split(required(o, "topics"), ",");
        starting = position(o, "startingOffsets");
        String end = position(o, "endingOffsets");
        ending = end == null ? "latest" : end;
        minPartitions = intOption(o, "minPartitions", 0);
        subExpression = orDefault(o, "subExpression", "*");
        expressionType = orDefault(o, "expressionType", "TAG");
        consumerGroup = orDefault(o, "consumerGroup", "rmq-spark-reader");
        commitOffsets = Boolean.parseBoolean(orDefault(o, "commitOffsets", "false"));
        maxOffsetsPerTrigger = Math.max(0, intOption(o, "maxOffsetsPerTrigger", 0));
        pullBatchSize = Math.min(1024, Math.max(1, intOption(o, "pullBatchSize", 32)));
        pullTimeoutMs = Math.max(1, intOption(o, "pullTimeoutMs", 10_000));
        batchRows = Math.max(1, intOption(o, "batchSize", 16384));
        checkCrc = Boolean.parseBoolean(orDefault(o, "checkCRC", "false"));
        decompress = Boolean.parseBoolean(orDefault(o, "decompress", "true"));
        signer = Signer.of(o);
        tls = Tls.of(o);
    }

    static String get(Map<String, String> o, String name) {
        for (Map.Entry<String, String> e : o.entrySet()) {
            if (e.getKey().equalsIgnoreCase(name)) {
                return e.getValue();
            }
        }
        return null;
    }

    private static String required(Map<String, String> o, String name) {
        String v = get(o, name);
        if (v == null || v.isBlank()) {
            throw new IllegalArgumentException("rocketmq source: option " + name + " is required");
        }
        return v;
    }

    private static String orDefault(Map<String, String> o, String name, String dflt) {
        String v = get(o, name);
        return v == null || v.isBlank() ? dflt : v.strip();
    }

    private static List<String> split(String text, String sep) {
        List<String> out = new ArrayList<>();
        for (String s : text.split(sep)) {
            if (!s.isBlank()) {
                out.add(s.strip());
            }
        }
        return List.copyOf(out);
    }

    private static String position(Map<String, String> o, String name) {
        String v = get(o, name);
        if (v == null) {
            return null;
        }
        String p = v.strip().toLowerCase(java.util.Locale.ROOT);
        if (!p.equals("earliest") && !p.equals("latest")) {
            throw new IllegalArgumentException("rocketmq source: the JVM reader takes " + name
                    + " earliest or latest, not '" + v + "' (the Python source takes JSON offsets)");
        }
        return p;
    }

    private static int intOption(Map<String, String> o, String name, int dflt) {
        String v = get(o, name);
        if (v == null || v.isBlank()) {
            return dflt;
        }
        try {
            return Integer.parseInt(v.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("rocketmq source option " + name + "='" + v + "' is not an integer", e);
        }
    }
}
