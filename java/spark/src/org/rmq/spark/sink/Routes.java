package org.rmq.spark.sink;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/** A topic's writable queues, from the name servers (GET_ROUTEINFO_BY_TOPIC). */
final class Routes {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int TOPIC_NOT_EXIST = 17;
    private static final int PERM_WRITE = 2;
    /** A 4.9 name server writes {@code brokerAddrs} with unquoted numeric keys ({@code {0:"host:port"}}). */
    private static final Pattern NUMERIC_KEY = Pattern.compile("([{,])\\s*(-?\\d+)\\s*:");

    private Routes() {}

    /** A queue to send to: its broker group, the master's address and the queue id. */
    record Queue(String broker, String addr, int queueId) {}

    /**
     * The writable queues of {@code topic} on masters, ordered by broker name, then queue id. Asks each name
     * server in turn; a topic no name server knows, or name servers that cannot be reached, is an error that
     * says which.
     */
    static List<Queue> writable(SinkConfig cfg, String topic) {
        IOException last = null;
        for (String ns : cfg.nameServers) {
            try (Remoting.Connection c = new Remoting.Connection(ns, cfg.sendTimeoutMs)) {
                c.send(Remoting.header(Remoting.GET_ROUTEINFO_BY_TOPIC, 1, Map.of("topic", topic)), new byte[0], 0);
                Remoting.Response r = c.read();
                if (r.code() == TOPIC_NOT_EXIST) {
                    throw new SinkException("rocketmq sink: topic '" + topic + "' does not exist (name server "
                            + ns + ": " + r.remark() + ")");
                }
                if (r.code() != 0) {
                    throw new SinkException("rocketmq sink: name server " + ns + " answered code " + r.code()
                            + " for the route of topic '" + topic + "': " + r.remark());
                }
                List<Queue> queues = parse(r.body());
                if (queues.isEmpty()) {
                    throw new SinkException("rocketmq sink: topic '" + topic + "' has no writable queue on a master"
                            + " (name server " + ns + ")");
                }
                return queues;
            } catch (IOException e) {
                last = e;
            }
        }
        throw new SinkException("rocketmq sink: cannot reach name server(s) " + String.join(";", cfg.nameServers)
                + " for the route of topic '" + topic + "': " + last, last);
    }

    static List<Queue> parse(byte[] body) throws IOException {
        String text = new String(body, java.nio.charset.StandardCharsets.UTF_8);
        JsonNode route;
        try {
            route = JSON.readTree(text);
        } catch (IOException strict) {
            route = JSON.readTree(NUMERIC_KEY.matcher(text).replaceAll("$1\"$2\":"));
        }
        List<Queue> out = new ArrayList<>();
        for (JsonNode q : route.path("queueDatas")) {
            String broker = q.path("brokerName").asText();
            if ((q.path("perm").asInt() & PERM_WRITE) == 0) {
                continue;
            }
            String addr = masterOf(route, broker);
            if (addr == null) {
                continue;
            }
            int n = q.path("writeQueueNums").asInt();
            for (int i = 0; i < n; i++) {
                out.add(new Queue(broker, addr, i));
            }
        }
        out.sort(Comparator.comparing(Queue::broker).thenComparingInt(Queue::queueId));
        return out;
    }

    private static String masterOf(JsonNode route, String broker) {
        for (JsonNode b : route.path("brokerDatas")) {
            if (!broker.equals(b.path("brokerName").asText())) {
                continue;
            }
            for (Iterator<Map.Entry<String, JsonNode>> it = b.path("brokerAddrs").properties().iterator();
                    it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                if ("0".equals(e.getKey())) {
                    return e.getValue().asText();
                }
            }
        }
        return null;
    }
}
