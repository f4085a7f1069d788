package org.rmq.spark.sink;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import org.rmq.spark.remoting.TopicRoute;

/** A topic's writable queues on masters, from its route. */
final class Routes {
    private Routes() {}

    /** A queue to send to: its broker group, the master's address and the queue id. */
    record Queue(String broker, String addr, int queueId) {}

    /**
     * The writable queues of {@code topic} on masters, ordered by broker name, then queue id. An unknown topic,
     * name servers that cannot be reached, or a topic with no writable queue is an error that says which.
     */
    static List<Queue> writable(SinkConfig cfg, String topic) {
        TopicRoute route = TopicRoute.query(cfg.nameServers, topic, cfg.sendTimeoutMs, "rocketmq sink", cfg.signer, cfg.tls);
        List<Queue> out = new ArrayList<>();
        for (TopicRoute.QueueData q : route.queues) {
            var addrs = route.brokers.get(q.broker());
            String master = addrs == null ? null : addrs.get(0L);
            if ((q.perm() & TopicRoute.PERM_WRITE) == 0 || master == null) {
                continue;
            }
            for (int i = 0; i < q.writeQueues(); i++) {
                out.add(new Queue(q.broker(), master, i));
            }
        }
        if (out.isEmpty()) {
            throw new SinkException("rocketmq sink: topic '" + topic + "' has no writable queue on a master (name"
                    + " servers " + String.join(";", cfg.nameServers) + ")");
        }
        out.sort(Comparator.comparing(Queue::broker).thenComparingInt(Queue::queueId));
        return out;
    }
}
