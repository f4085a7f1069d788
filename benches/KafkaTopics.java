// Creates Kafka topics for benches/spark_kafka_bench.py and waits until every partition has a leader:
//   java -cp '<kafka lib>/*' benches/KafkaTopics.java <bootstrap> <partitions> <topic>...
// (Java's single-file source launch; the Kafka peer's jars hold no topic tool.)
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.TopicPartitionInfo;

public class KafkaTopics {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        int partitions = Integer.parseInt(args[1]);
        List<NewTopic> topics = new ArrayList<>();
        List<String> names = new ArrayList<>();
        for (int i = 2; i < args.length; i++) {
            topics.add(new NewTopic(args[i], partitions, (short) 1));
            names.add(args[i]);
        }
        try (Admin admin = Admin.create(props)) {
            admin.createTopics(topics).all().get();
            long deadline = System.currentTimeMillis() + 60_000;
            while (true) {
                Map<String, TopicDescription> found = admin.describeTopics(names).allTopicNames().get();
                boolean led = true;
                for (TopicDescription d : found.values()) {
                    for (TopicPartitionInfo p : d.partitions()) {
                        led &= p.leader() != null;
                    }
                }
                if (led) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("partitions without a leader after 60 s: " + found);
                }
                Thread.sleep(100);
            }
        }
        System.out.println("created " + names);
    }
}
