// Kafka topics for benches/spark_kafka_bench.py (Java's single-file source launch; the Kafka peer's jars
// hold no topic tool):
//   java -cp '<kafka lib>/*' benches/KafkaTopics.java <bootstrap> create <partitions> <topic>...
//       creates the topics and waits until every partition has a leader
//   java -cp '<kafka lib>/*' benches/KafkaTopics.java <bootstrap> end <topic>
//       prints the sum of the topic's partitions' end offsets (the records it holds, none deleted)
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;

public class KafkaTopics {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        try (Admin admin = Admin.create(props)) {
            if (args[1].equals("create")) {
                create(admin, Integer.parseInt(args[2]), List.of(args).subList(3, args.length));
            } else if (args[1].equals("end")) {
                System.out.println(end(admin, args[2]));
            } else {
                throw new IllegalArgumentException("unknown command " + args[1] + " (create, end)");
            }
        }
    }

    static void create(Admin admin, int partitions, List<String> names) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        for (String name : names) {
            topics.add(new NewTopic(name, partitions, (short) 1));
        }
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
                System.out.println("created " + names);
                return;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("partitions without a leader after 60 s: " + found);
            }
            Thread.sleep(100);
        }
    }

    static long end(Admin admin, String topic) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        Map<TopicPartition, OffsetSpec> want = new HashMap<>();
        for (TopicPartitionInfo p : d.partitions()) {
            want.put(new TopicPartition(topic, p.partition()), OffsetSpec.latest());
        }
        long total = 0;
        for (ListOffsetsResult.ListOffsetsResultInfo info : admin.listOffsets(want).all().get().values()) {
            total += info.offset();
        }
        return total;
    }
}
