package org.rmq.spark.remoting;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/** A topic's route from the name servers (GET_ROUTEINFO_BY_TOPIC): its broker groups and their queues. */
public final class TopicRoute {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int TOPIC_NOT_EXIST = 17;
    public static final int PERM_WRITE = 2;
    public static final int PERM_READ = 4;
    /** A 4.9 name server writes {@code brokerAddrs} with unquoted numeric keys ({@code {0:"host:port"}}). */
    private static final Pattern NUMERIC_KEY = Pattern.compile("([{,])\\s*(-?\\d+)\\s*:");

    /** A broker group's queues: how many to read and to write, and its permission bits. */
    public record QueueData(String broker, int readQueues, int writeQueues, int perm) {}

    /** Each broker group's addresses by broker id (0: the master), in id order. */
    public final Map<String, TreeMap<Long, String>> brokers;
    public final List<QueueData> queues;

    private TopicRoute(Map<String, TreeMap<Long, String>> brokers, List<QueueData> queues) {
        this.brokers = brokers;
        this.queues = queues;
    }

    /** A request that cannot be done; its message says what, where and why. */
    public static final class RouteException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        RouteException(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /**
     * The route of {@code topic}, asking each name server in turn; {@code who} starts the error messages
     * ("rocketmq sink"); {@code signer} signs the request when the cluster has ACL on, {@code tls} (or null) is the connection's TLS. A topic no name server knows, or name servers that cannot be reached, is an error
     * that says which.
     */
    public static TopicRoute query(
            List<String> nameServers, String topic, int timeoutMs, String who, Signer signer, Tls tls) {
        IOException last = null;
        for (String ns : nameServers) {
            try (Remoting.Connection c = new Remoting.Connection(ns, timeoutMs, tls)) {
                Map<String, String> ext = new HashMap<>(Map.of("topic", topic));
                if (signer != null) {
                    signer.sign(ext, null, 0);
                }
                c.send(Remoting.header(Remoting.GET_ROUTEINFO_BY_TOPIC, 1, ext), new byte[0], 0);
                Remoting.Response r = c.read();
                if (r.code() == TOPIC_NOT_EXIST) {
                    throw new RouteException(who + ": topic '" + topic + "' does not exist (name server " + ns + ": "
                            + r.remark() + ")", null);
                }
                if (r.code() != 0) {
                    throw new RouteException(who + ": name server " + ns + " answered code " + r.code()
                            + " for the route of topic '" + topic + "': " + r.remark(), null);
                }
                return parse(r.body());
            } catch (IOException e) {
                last = e;
            }
        }
        throw new RouteException(who + ": cannot reach name server(s) " + String.join(";", nameServers)
                + " for the route of topic '" + topic + "': " + last, last);
    }

    static TopicRoute parse(byte[] body) throws IOException {
        String text = new String(body, StandardCharsets.UTF_8);
        JsonNode route;
        try {
            route = JSON.readTree(text);
        } catch (IOException strict) {
            route = JSON.readTree(NUMERIC_KEY.matcher(text).replaceAll("$1\"$2\":"));
        }
        Map<String, TreeMap<Long, String>> brokers = new TreeMap<>();
        for (JsonNode b : route.path("brokerDatas")) {
            TreeMap<Long, String> addrs = new TreeMap<>();
            for (Map.Entry<String, JsonNode> e : b.path("brokerAddrs").properties()) {
                try {
                    addrs.put(Long.parseLong(e.getKey().strip()), e.getValue().asText());
                } catch (NumberFormatException ignored) {
                    // not a broker id: no address to use
                }
            }
            brokers.put(b.path("brokerName").asText(), addrs);
        }
        List<QueueData> queues = new ArrayList<>();
        for (JsonNode q : route.path("queueDatas")) {
            queues.add(new QueueData(
                    q.path("brokerName").asText(),
                    q.path("readQueueNums").asInt(),
                    q.path("writeQueueNums").asInt(),
                    q.path("perm").asInt()));
        }
        return new TopicRoute(brokers, queues);
    }
}
