package rmqpeer;

import com.alibaba.fastjson.JSON;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * The Java client 4.9.8 with {@code AclClientRPCHook} (RocketMQ ACL 1.0):
 * {@code java rmqpeer.AclDriver SCENARIO key=value...}, one JSON object on stdout (exit 0), or
 * {"error": "..."} (exit 1), like {@link Driver}.
 *
 * <p>Keys: namesrv, topic, group, ak and sk (no ak: no hook, nothing signed), count, expect, timeout
 * (seconds, default 30). Scenarios:
 * <ul>
 *   <li>send: {@code count} sync sends of "TOPIC#i" (one batch of them with batch=1); prints statuses
 *       and, per failed send, the response code (MQBrokerException / MQClientException) and message;
 *   <li>pull: a lite pull consumer subscribed to the topic from the first offset, until {@code expect}
 *       messages or the timeout; prints the bodies.
 * </ul>
 */
public final class AclDriver {
    private final Map<String, String> args = new HashMap<>();

    private AclDriver(String[] argv) {
        for (int i = 1; i < argv.length; i++) {
            int eq = argv[i].indexOf('=');
            args.put(argv[i].substring(0, eq), argv[i].substring(eq + 1));
        }
    }

    public static void main(String[] argv) {
        int rc = 0;
        Object result;
        try {
            AclDriver d = new AclDriver(argv);
            switch (argv[0]) {
                case "send": result = d.send(); break;
                case "pull": result = d.pull(); break;
                default: throw new IllegalArgumentException("unknown scenario " + argv[0]);
            }
        } catch (Throwable t) {
            Map<String, Object> err = new TreeMap<>();
            err.put("error", t.toString());
            result = err;
            rc = 1;
        }
        System.out.println(JSON.toJSONString(result));
        System.out.flush();
        System.exit(rc);
    }

    private String arg(String key) {
        String v = args.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing " + key + "=");
        }
        return v;
    }

    private RPCHook hook() {
        String ak = args.get("ak");
        return ak == null ? null : new AclClientRPCHook(new SessionCredentials(ak, arg("sk")));
    }

    private Map<String, Object> send() throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(arg("group"), hook());
        producer.setNamesrvAddr(arg("namesrv"));
        producer.setInstanceName("acl-" + System.nanoTime());
        producer.setRetryTimesWhenSendFailed(0);
        // One try per send: give it the other drivers' 10 s, not the default 3 s (the first send also
        // fetches the route and connects, in a JVM just started, on a busy machine).
        producer.setSendMsgTimeout(10000);
        producer.start();
        List<String> statuses = new ArrayList<>();
        List<Map<String, Object>> errors = new ArrayList<>();
        try {
            int count = Integer.parseInt(arg("count"));
            List<Message> msgs = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                msgs.add(new Message(arg("topic"), "TagA", ("" + arg("topic") + "#" + i).getBytes(StandardCharsets.UTF_8)));
            }
            List<List<Message>> sends = new ArrayList<>();
            if ("1".equals(args.get("batch"))) {
                sends.add(msgs);
            } else {
                for (Message m : msgs) {
                    sends.add(Collections.singletonList(m));
                }
            }
            for (List<Message> one : sends) {
                try {
                    SendResult r = one.size() == 1 ? producer.send(one.get(0)) : producer.send(one);
                    statuses.add(r.getSendStatus().name());
                } catch (MQBrokerException e) {
                    errors.add(error(e.getResponseCode(), e.getErrorMessage()));
                } catch (MQClientException e) {
                    errors.add(error(e.getResponseCode(), e.getErrorMessage()));
                }
            }
        } finally {
            producer.shutdown();
        }
        Map<String, Object> out = new TreeMap<>();
        out.put("statuses", statuses);
        out.put("errors", errors);
        return out;
    }

    private static Map<String, Object> error(int code, String message) {
        Map<String, Object> e = new TreeMap<>();
        e.put("code", code);
        e.put("message", message == null ? "" : message);
        return e;
    }

    private Map<String, Object> pull() throws Exception {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(arg("group"), hook());
        consumer.setNamesrvAddr(arg("namesrv"));
        consumer.setInstanceName("acl-" + System.nanoTime());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(arg("topic"), "*");
        consumer.start();
        List<String> bodies = new ArrayList<>();
        try {
            int expect = Integer.parseInt(arg("expect"));
            long deadline = System.currentTimeMillis() + 1000L * Integer.parseInt(args.getOrDefault("timeout", "30"));
            while (bodies.size() < expect && System.currentTimeMillis() < deadline) {
                for (MessageExt m : consumer.poll(500)) {
                    bodies.add(new String(m.getBody(), StandardCharsets.UTF_8));
                }
            }
        } finally {
            consumer.shutdown();
        }
        Collections.sort(bodies);
        Map<String, Object> out = new TreeMap<>();
        out.put("bodies", bodies);
        return out;
    }
}
