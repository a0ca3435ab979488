// The legacy Admin.alterConfigs (AlterConfigs, key 33) of the Java client, removed from the Admin
// interface in Kafka 4.0, so this probe runs with kafka-clients 3.9:
//
//   java -cp "$(tests/java/client-jars.sh 3.9.0)" tests/java/AdminLegacyProbe.java HOST:PORT TOPIC
//
// alterConfigs replaces a topic's whole config set (configs not given go back to their
// defaults); validateOnly changes nothing; an unknown topic and an invalid value fail as Kafka's
// do. deleteRecords and describeLogDirs are checked at the versions the 3.9 client sends.
// The last line printed is "PROBE OK" on success.

import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.OffsetOutOfRangeException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

@SuppressWarnings("deprecation")
public class AdminLegacyProbe {
    static int checks = 0;

    static void check(boolean ok, String what) {
        checks++;
        if (!ok) throw new AssertionError("CHECK FAILED: " + what);
    }

    static void eq(Object want, Object got, String what) {
        check(java.util.Objects.equals(want, got), what + ": want " + want + ", got " + got);
    }

    static Throwable failure(KafkaFuture<?> f) throws InterruptedException {
        try {
            f.get();
        } catch (ExecutionException e) {
            return e.getCause();
        }
        return null;
    }

    static ConfigEntry entry(Admin admin, ConfigResource r, String name) throws Exception {
        return admin.describeConfigs(List.of(r)).all().get().get(r).get(name);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1)
                .configs(Map.of("retention.ms", "3600000")))).all().get();
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);

            admin.alterConfigs(Map.of(res, new Config(List.of(new ConfigEntry("segment.ms", "600000"))))).all().get();
            ConfigEntry segment = entry(admin, res, "segment.ms");
            eq("600000", segment.value(), "segment.ms set");
            eq(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, segment.source(), "segment.ms source");
            ConfigEntry retention = entry(admin, res, "retention.ms");
            eq("604800000", retention.value(), "retention.ms back to its default: the whole set is replaced");
            check(retention.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "retention.ms no longer set");

            admin.alterConfigs(Map.of(res, new Config(List.of())), new AlterConfigsOptions().validateOnly(true)).all().get();
            eq("600000", entry(admin, res, "segment.ms").value(), "validateOnly changes nothing");

            check(failure(admin.alterConfigs(Map.of(res, new Config(List.of(new ConfigEntry("retention.ms", "x"))))).all())
                instanceof InvalidConfigurationException, "an invalid value");
            eq("600000", entry(admin, res, "segment.ms").value(), "a refused change changes nothing");
            ConfigResource missing = new ConfigResource(ConfigResource.Type.TOPIC, topic + "-missing");
            check(failure(admin.alterConfigs(Map.of(missing, new Config(List.of()))).all())
                instanceof UnknownTopicOrPartitionException, "an unknown topic");

            // The 3.9 client's DeleteRecords and DescribeLogDirs (v4).
            TopicPartition p0 = new TopicPartition(topic, 0);
            eq(0L, admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(0))).lowWatermarks().get(p0).get()
                .lowWatermark(), "deleteRecords on an empty partition");
            check(failure(admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(1))).all())
                instanceof OffsetOutOfRangeException, "deleteRecords beyond the high watermark");
            var dirs = admin.describeLogDirs(List.of(1)).allDescriptions().get().get(1);
            eq(1, dirs.size(), "one log dir");
            check(dirs.values().iterator().next().replicaInfos().containsKey(p0), "the partition is in it");
        }
        System.out.println("checks passed: " + checks);
        System.out.println("PROBE OK");
    }
}
