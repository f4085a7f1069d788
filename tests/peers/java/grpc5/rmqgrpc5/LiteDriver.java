package rmqgrpc5;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.LitePushConsumer;
import org.apache.rocketmq.client.apis.consumer.OffsetOption;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * The official RocketMQ 5.x Java client's LitePushConsumer (rocketmq-client-java 5.2.0), unchanged, against one
 * endpoint, for tests/peers/test_lite5.py. Arguments {@code key=value}: endpoints, topic (a LITE parent
 * topic), group (a lite group bound to it). The scenario, each step waiting for what it expects (at most
 * {@code timeout} seconds) and then a quiet {@code settle} seconds for what it must not get:
 *
 * <ol>
 *   <li>a producer sends a-0, a-1 (lite topic la), c-0, c-1 (lc), d-0 (ld) before any consumer;</li>
 *   <li>a LitePushConsumer subscribes la and lb; the producer sends b-0, b-1, b-2 (lb), a-2 (la), c-2 (lc);
 *       it gets la from its first message, lb, and nothing of lc;</li>
 *   <li>it subscribes lc (lc's messages from the first), and ld with OffsetOption.MAX_OFFSET; d-1 (ld) is
 *       sent and is the only ld message it gets;</li>
 *   <li>it unsubscribes la; a-3 (la) and b-3 (lb) are sent: it gets b-3 only;</li>
 *   <li>bad names: subscribeLite("bad name!") and a send with lite topic "bad/name" fail.</li>
 * </ol>
 *
 * Prints one JSON line: received (per lite topic, "body#attempt" in arrival order), liteTopicSet, the
 * message type and topic each delivery showed, whether the lite topic shown matched the one sent, and the
 * errors of the bad names (exception class).
 */
public final class LiteDriver {
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    private LiteDriver() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (String arg : argv) {
            int i = arg.indexOf('=');
            if (i >= 0) {
                a.put(arg.substring(0, i), arg.substring(i + 1));
            }
        }
        String topic = a.get("topic");
        long timeout = Long.parseLong(a.getOrDefault("timeout", "60")) * 1000;
        long settle = Long.parseLong(a.getOrDefault("settle", "4")) * 1000;
        ClientConfiguration config = ClientConfiguration.newBuilder()
            .setEndpoints(a.get("endpoints"))
            .setRequestTimeout(Duration.ofSeconds(10))
            .build();
        Map<String, List<String>> received = new TreeMap<>();
        Map<String, String> shown = new TreeMap<>();
        List<String> mismatches = Collections.synchronizedList(new ArrayList<>());
        StringBuilder out = new StringBuilder("{");
        try (Producer producer = PROVIDER.newProducerBuilder()
            .setClientConfiguration(config)
            .setTopics(topic)
            .build()) {
            send(producer, topic, "la", "a-0", "a-1");
            send(producer, topic, "lc", "c-0", "c-1");
            send(producer, topic, "ld", "d-0");
            LitePushConsumer consumer = PROVIDER.newLitePushConsumerBuilder()
                .setClientConfiguration(config)
                .setConsumerGroup(a.get("group"))
                .bindTopic(topic)
                .setMessageListener(view -> {
                    String body = StandardCharsets.UTF_8.decode(view.getBody()).toString();
                    String lite = view.getLiteTopic().orElse("");
                    String expected = "l" + body.charAt(0);
                    if (!lite.equals(expected)) {
                        mismatches.add(body + " showed lite topic " + lite);
                    }
                    synchronized (received) {
                        received.computeIfAbsent(lite, k -> new ArrayList<>())
                            .add(body + "#" + view.getDeliveryAttempt());
                        shown.put("topic", view.getTopic().equals(topic) ? "parent" : view.getTopic());
                        shown.put("group", view.getMessageGroup().orElse(""));
                    }
                    return ConsumeResult.SUCCESS;
                })
                .build();
            try {
                consumer.subscribeLite("la");
                consumer.subscribeLite("lb");
                send(producer, topic, "lb", "b-0", "b-1", "b-2");
                send(producer, topic, "la", "a-2");
                send(producer, topic, "lc", "c-2");
                await(received, timeout, "la", 3, "lb", 3);
                Thread.sleep(settle);
                out.append("\"step2\":").append(snapshot(received));

                consumer.subscribeLite("lc");
                consumer.subscribeLite("ld", OffsetOption.MAX_OFFSET);
                send(producer, topic, "ld", "d-1");
                await(received, timeout, "lc", 3, "ld", 1);
                Thread.sleep(settle);
                out.append(",\"step3\":").append(snapshot(received));

                consumer.unsubscribeLite("la");
                send(producer, topic, "la", "a-3");
                send(producer, topic, "lb", "b-3");
                await(received, timeout, "lb", 4);
                Thread.sleep(settle);
                out.append(",\"step4\":").append(snapshot(received));
                out.append(",\"liteTopicSet\":").append(Json.list(new ArrayList<>(new TreeSet<>(consumer.getLiteTopicSet()))));

                String badSubscribe = "none";
                try {
                    consumer.subscribeLite("bad name!");
                } catch (Exception e) {
                    badSubscribe = e.getClass().getSimpleName();
                }
                String badSend = "none";
                try {
                    send(producer, topic, "bad/name", "x-0");
                } catch (Exception e) {
                    badSend = e.getClass().getSimpleName();
                }
                out.append(",\"badSubscribe\":").append(Json.quote(badSubscribe));
                out.append(",\"badSend\":").append(Json.quote(badSend));
            } finally {
                consumer.close();
            }
            out.append(",\"shown\":").append(Json.map(shown));
            out.append(",\"mismatches\":").append(Json.list(mismatches));
        } catch (Throwable e) {
            out.setLength(1);
            out.append("\"error\":").append(Json.quote(e.toString()));
        }
        System.out.println(out.append('}'));
        System.exit(0);
    }

    private static void send(Producer producer, String topic, String lite, String... bodies) throws Exception {
        for (String body : bodies) {
            Message m = PROVIDER.newMessageBuilder()
                .setTopic(topic)
                .setLiteTopic(lite)
                .setKeys("k-" + body)
                .setBody(body.getBytes(StandardCharsets.UTF_8))
                .build();
            producer.send(m);
        }
    }

    /** Until each named lite topic got at least its count of deliveries. */
    private static void await(Map<String, List<String>> received, long timeout, Object... wants)
        throws InterruptedException {
        long end = System.currentTimeMillis() + timeout;
        while (System.currentTimeMillis() < end) {
            boolean all = true;
            synchronized (received) {
                for (int i = 0; i < wants.length; i += 2) {
                    List<String> got = received.get((String) wants[i]);
                    if (got == null || got.size() < (Integer) wants[i + 1]) {
                        all = false;
                    }
                }
            }
            if (all) {
                return;
            }
            Thread.sleep(100);
        }
    }

    private static String snapshot(Map<String, List<String>> received) {
        StringBuilder b = new StringBuilder("{");
        synchronized (received) {
            for (Map.Entry<String, List<String>> e : received.entrySet()) {
                if (b.length() > 1) {
                    b.append(',');
                }
                b.append(Json.quote(e.getKey())).append(':').append(Json.list(e.getValue()));
            }
        }
        return b.append('}').toString();
    }
}
