package org.rmq.spark;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.rmq.spark.remoting.Remoting;
import org.rmq.spark.remoting.TopicRoute;

/** The driver's view of a cluster: each topic's readable queues, and their min and max offsets. */
final class NetCluster {
    private NetCluster() {}

    /** A readable queue and its broker group's addresses (the master first, then the slaves by id). */
    record Queue(String topic, String broker, int queueId, List<String> addrs) implements Serializable {
        String key() {
            return topic + "/" + broker + "/" + queueId;
        }
    }

    static List<Queue> queues(NetOptions o) {
        List<Queue> out = new ArrayList<>();
        for (String topic : o.topics) {
            TopicRoute route = TopicRoute.query(o.nameServers, topic, o.pullTimeoutMs, "rocketmq source", o.signer, o.tls);
            for (TopicRoute.QueueData q : route.queues) {
                TreeMap<Long, String> addrs = route.brokers.get(q.broker());
                if ((q.perm() & TopicRoute.PERM_READ) == 0 || addrs == null || addrs.isEmpty()) {
                    continue;
                }
                List<String> list = List.copyOf(addrs.values());
                for (int i = 0; i < q.readQueues(); i++) {
                    out.add(new Queue(topic, q.broker(), i, list));
                }
            }
        }
        out.sort(Comparator.comparing(Queue::topic).thenComparing(Queue::broker).thenComparingInt(Queue::queueId));
        return out;
    }

    /** Offset queries over connections kept for the session's life (one per broker address). */
    static final class Session implements AutoCloseable {
        private final NetOptions o;
        private final Map<String, Remoting.Connection> connections = new HashMap<>();

        Session(NetOptions o) {
            this.o = o;
        }

        long min(Queue q) {
            return offset(q, Remoting.GET_MIN_OFFSET, "the min offset");
        }

        long max(Queue q) {
            return offset(q, Remoting.GET_MAX_OFFSET, "the max offset");
        }

        /** UPDATE_CONSUMER_OFFSET: {@code offset} as {@code group}'s committed offset of {@code q}. */
        void commit(Queue q, String group, long offset) {
            Map<String, String> ext = Map.of("consumerGroup", group, "topic", q.topic(), "queueId",
                    Integer.toString(q.queueId()), "commitOffset", Long.toString(offset), "bname", q.broker());
            call(q, Remoting.UPDATE_CONSUMER_OFFSET, ext, "committing offset " + offset + " for consumerGroup " + group);
        }

        /** Asks the group's master, else each slave in turn (only a transport failure moves on). */
        private long offset(Queue q, int code, String what) {
            Map<String, String> ext =
                    Map.of("topic", q.topic(), "queueId", Integer.toString(q.queueId()), "bname", q.broker());
            return call(q, code, ext, what).extLong("offset", 0);
        }

        private Remoting.Response call(Queue q, int code, Map<String, String> fields, String what) {
            StringBuilder failures = new StringBuilder();
            Map<String, String> ext = new HashMap<>(fields);
            if (o.signer != null) {
                o.signer.sign(ext, null, 0);
            }
            for (String addr : q.addrs()) {
                Remoting.Response r;
                try {
                    Remoting.Connection c = connections.get(addr);
                    if (c == null) {
                        c = new Remoting.Connection(addr, o.pullTimeoutMs, o.tls);
                        connections.put(addr, c);
                    }
                    c.send(Remoting.header(code, 1, ext), new byte[0], 0);
                    r = c.read();
                } catch (IOException e) {
                    Remoting.Connection c = connections.remove(addr);
                    if (c != null) {
                        c.close();
                    }
                    failures.append(failures.length() == 0 ? "" : "; ").append(addr).append(": ").append(e);
                    continue;
                }
                if (r.code() != 0) {
                    throw new IllegalStateException("rocketmq source: " + what + " of " + q.key() + ": broker " + addr
                            + " answered code " + r.code() + ": " + r.remark());
                }
                return r;
            }
            throw new IllegalStateException("rocketmq source: " + what + " of " + q.key() + ": no broker of group "
                    + q.broker() + " answers: " + failures);
        }

        @Override
        public void close() {
            for (Remoting.Connection c : connections.values()) {
                c.close();
            }
            connections.clear();
        }
    }
}
