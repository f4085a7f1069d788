package rmqpeer5;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * The Java client 5.x (compiled and run against rocketmq-client 5.5.0, which writes ROCKETMQ binary
 * headers and gives each batch a UNIQ_KEY of its own besides each message's): sends for rmq's fast path
 * tests. Arguments {@code key=value}: namesrv, topic, group, singles (plain {@code send(Message)}), then
 * batches (of {@code size} messages, sent with {@code send(Collection)}). Prints one JSON
 * line: per send its status, msgId (a batch: its messages' ids, comma-separated), offsetMsgId, queueId
 * and queueOffset; the body of message i of batch b is {@code b<b>-<i>}, of single s {@code s<s>}.
 */
public final class Client5 {
    private Client5() {
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (String arg : argv) {
            int i = arg.indexOf('=');
            a.put(arg.substring(0, i), arg.substring(i + 1));
        }
        DefaultMQProducer p = new DefaultMQProducer(a.get("group"));
        p.setNamesrvAddr(a.get("namesrv"));
        p.setInstanceName("client5-" + System.nanoTime());
        p.setSendMsgTimeout(30000);
        p.setMqClientApiTimeout(30000); // a loaded test machine: the route lookup may be slow
        p.start();
        String topic = a.get("topic");
        int batches = Integer.parseInt(a.getOrDefault("batches", "0"));
        int size = Integer.parseInt(a.getOrDefault("size", "16"));
        int singles = Integer.parseInt(a.getOrDefault("singles", "0"));
        StringBuilder out = new StringBuilder("{\"sends\":[");
        boolean first = true;
        try {
            for (int s = 0; s < singles; s++) {
                Message m = new Message(topic, "TagA", ("s" + s).getBytes(StandardCharsets.UTF_8));
                SendResult r = p.send(m);
                first = append(out, first, "single", r);
            }
            for (int b = 0; b < batches; b++) {
                List<Message> batch = new ArrayList<>();
                for (int i = 0; i < size; i++) {
                    Message m = new Message(topic, "TagA", ("b" + b + "-" + i).getBytes(StandardCharsets.UTF_8));
                    m.putUserProperty("seq", Integer.toString(i));
                    batch.add(m);
                }
                SendResult r = p.send(batch);
                first = append(out, first, "batch", r);
            }
            out.append("]}");
        } catch (Exception e) {
            out.setLength(0);
            out.append("{\"error\":").append(quote(e.toString())).append('}');
        } finally {
            p.shutdown();
        }
        System.out.println(out);
    }

    private static boolean append(StringBuilder out, boolean first, String kind, SendResult r) {
        if (!first) {
            out.append(',');
        }
        out.append("{\"kind\":").append(quote(kind))
            .append(",\"status\":").append(quote(r.getSendStatus().name()))
            .append(",\"msgId\":").append(quote(r.getMsgId()))
            .append(",\"offsetMsgId\":").append(quote(r.getOffsetMsgId()))
            .append(",\"queueId\":").append(r.getMessageQueue().getQueueId())
            .append(",\"queueOffset\":").append(r.getQueueOffset())
            .append('}');
        return false;
    }

    private static String quote(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder q = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                q.append('\\').append(c);
            } else if (c < 0x20) {
                q.append(String.format("\\u%04x", (int) c));
            } else {
                q.append(c);
            }
        }
        return q.append('"').toString();
    }
}
