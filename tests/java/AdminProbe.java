// The official Java Admin (kafka-clients 4.3) against kcoord's admin APIs of one node, in one
// JVM run.
//
//   java -cp "$(tests/java/client-jars.sh 4.3.0)" tests/java/AdminProbe.java HOST:PORT TOPIC LOG_DIR NODE_ID
//
// deleteRecords (and what follows it: listOffsets earliest, a consumer seeking to the beginning),
// describeLogDirs and describeReplicaLogDirs, electLeaders (preferred and unclean),
// alterPartitionReassignments / listPartitionReassignments, listConfigResources (KIP-1142) and
// listClientMetricsResources. Every check is exact; the first failure throws, so the exit code
// tells the test whether all passed. The last line printed is "PROBE OK" on success.

import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterPartitionReassignmentsOptions;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ListConfigResourcesOptions;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.InvalidReplicaAssignmentException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.NoReassignmentInProgressException;
import org.apache.kafka.common.errors.OffsetOutOfRangeException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class AdminProbe {
    static int checks = 0;

    static void check(boolean ok, String what) {
        checks++;
        if (!ok) throw new AssertionError("CHECK FAILED: " + what);
    }

    static void eq(Object want, Object got, String what) {
        check(java.util.Objects.equals(want, got), what + ": want " + want + ", got " + got);
    }

    static Throwable failure(org.apache.kafka.common.KafkaFuture<?> f) throws InterruptedException {
        try {
            f.get();
        } catch (ExecutionException e) {
            return e.getCause();
        }
        return null;
    }

    // The bytes of the partition's batches, as Kafka counts a log's size: the running broker's
    // active segment is preallocated, its file longer than its data (zeros after the last batch).
    static long sizeOnDisk(String logDir, TopicPartition tp) throws IOException {
        long size = 0;
        File[] files = new File(logDir, tp.topic() + "-" + tp.partition()).listFiles();
        for (File f : files) {
            if (!f.getName().endsWith(".log")) continue;
            ByteBuffer data = ByteBuffer.wrap(Files.readAllBytes(f.toPath()));
            int pos = 0;
            while (pos + 12 <= data.limit()) {
                int length = data.getInt(pos + 8);  // after the base offset
                if (length <= 0 || pos + 12 + length > data.limit()) break;
                pos += 12 + length;
            }
            size += pos;
        }
        return size;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        String logDir = args[2];
        int node = Integer.parseInt(args[3]);
        TopicPartition p0 = new TopicPartition(topic, 0);
        TopicPartition p1 = new TopicPartition(topic, 1);

        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
            Properties pp = new Properties();
            pp.put("bootstrap.servers", bootstrap);
            pp.put("key.serializer", ByteArraySerializer.class.getName());
            pp.put("value.serializer", ByteArraySerializer.class.getName());
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
                for (int i = 0; i < 10; i++) {
                    producer.send(new ProducerRecord<>(topic, 0, null, ("v" + i).getBytes())).get();
                }
            }

            // --- deleteRecords --------------------------------------------------------------
            var deleted = admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(4))).lowWatermarks();
            eq(4L, deleted.get(p0).get().lowWatermark(), "deleteRecords low watermark");
            eq(4L, admin.listOffsets(Map.of(p0, OffsetSpec.earliest())).partitionResult(p0).get().offset(),
                "listOffsets earliest after deleteRecords");
            Properties cp = new Properties();
            cp.put("bootstrap.servers", bootstrap);
            cp.put("key.deserializer", ByteArrayDeserializer.class.getName());
            cp.put("value.deserializer", ByteArrayDeserializer.class.getName());
            cp.put("auto.offset.reset", "earliest");
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
                consumer.assign(List.of(p0));
                consumer.seekToBeginning(List.of(p0));
                List<Long> offsets = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 20_000;
                while (offsets.size() < 6 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                        offsets.add(r.offset());
                    }
                }
                eq(List.of(4L, 5L, 6L, 7L, 8L, 9L), offsets, "a consumer from the beginning starts at the log start offset");
                // Seeking below the log start offset: out of range, reset to earliest.
                consumer.seek(p0, 1);
                List<Long> again = new ArrayList<>();
                deadline = System.currentTimeMillis() + 20_000;
                while (again.isEmpty() && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                        again.add(r.offset());
                    }
                }
                eq(4L, again.get(0), "a fetch below the log start offset resets to it");
            }
            check(failure(admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(11))).lowWatermarks().get(p0))
                instanceof OffsetOutOfRangeException, "deleteRecords beyond the high watermark");
            TopicPartition internal = new TopicPartition("__consumer_offsets", 0);
            check(failure(admin.deleteRecords(Map.of(internal, RecordsToDelete.beforeOffset(0))).lowWatermarks().get(internal))
                instanceof InvalidTopicException, "deleteRecords of an internal topic");
            deleted = admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(-1), p1, RecordsToDelete.beforeOffset(0)))
                .lowWatermarks();
            eq(10L, deleted.get(p0).get().lowWatermark(), "deleteRecords to the high watermark (-1)");
            eq(0L, deleted.get(p1).get().lowWatermark(), "deleteRecords of an empty partition");

            // --- describeLogDirs --------------------------------------------------------------
            Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(List.of(node)).allDescriptions().get();
            eq(Set.of(node), dirs.keySet(), "describeLogDirs brokers");
            eq(Set.of(logDir), dirs.get(node).keySet(), "the one log dir");
            LogDirDescription d = dirs.get(node).get(logDir);
            eq(null, d.error(), "log dir error");
            check(d.totalBytes().isPresent() && d.usableBytes().isPresent()
                && d.totalBytes().getAsLong() >= d.usableBytes().getAsLong(), "total and usable bytes " + d);
            eq(false, d.isCordoned(), "not cordoned");
            ReplicaInfo r0 = d.replicaInfos().get(p0);
            eq(sizeOnDisk(logDir, p0), r0.size(), "partition size");
            eq(0L, r0.offsetLag(), "offset lag");
            eq(false, r0.isFuture(), "not a future log");
            eq(0L, d.replicaInfos().get(p1).size(), "empty partition size");
            check(d.replicaInfos().containsKey(internal), "__consumer_offsets is in the log dir");
            Map<TopicPartitionReplica, ReplicaLogDirInfo> replicaDirs = admin.describeReplicaLogDirs(
                List.of(new TopicPartitionReplica(topic, 0, node))).all().get();
            eq(logDir, replicaDirs.get(new TopicPartitionReplica(topic, 0, node)).getCurrentReplicaLogDir(),
                "describeReplicaLogDirs");

            // --- electLeaders -----------------------------------------------------------------
            for (ElectionType type : ElectionType.values()) {
                Map<TopicPartition, Optional<Throwable>> elected =
                    admin.electLeaders(type, Set.of(p0, p1)).partitions().get();
                eq(Set.of(p0, p1), elected.keySet(), "electLeaders " + type + " partitions");
                for (Optional<Throwable> e : elected.values()) {
                    check(e.isPresent() && e.get() instanceof ElectionNotNeededException, "election not needed: " + e);
                }
            }
            eq(Map.of(), admin.electLeaders(ElectionType.PREFERRED, null).partitions().get(),
                "electLeaders for all partitions: none needs one");

            // --- partition reassignments ------------------------------------------------------
            admin.alterPartitionReassignments(Map.of(p0, Optional.of(new NewPartitionReassignment(List.of(node))))).all().get();
            var altered = admin.alterPartitionReassignments(
                Map.of(p0, Optional.of(new NewPartitionReassignment(List.of(node + 1))),
                       p1, Optional.empty()),
                new AlterPartitionReassignmentsOptions().allowReplicationFactorChange(false)).values();
            check(failure(altered.get(p0)) instanceof InvalidReplicaAssignmentException, "reassignment to another broker");
            check(failure(altered.get(p1)) instanceof NoReassignmentInProgressException, "cancelling no reassignment");
            eq(Map.of(), admin.listPartitionReassignments().reassignments().get(), "no reassignment in progress");
            eq(Map.of(), admin.listPartitionReassignments(Set.of(p0, p1)).reassignments().get(), "none for the topic");

            // --- listConfigResources ----------------------------------------------------------
            String group = topic + "-group";
            ConfigResource groupResource = new ConfigResource(ConfigResource.Type.GROUP, group);
            admin.incrementalAlterConfigs(Map.of(groupResource, List.of(new AlterConfigOp(
                new ConfigEntry("share.record.lock.duration.ms", "20000"), AlterConfigOp.OpType.SET)))).all().get();
            Collection<ConfigResource> all = admin.listConfigResources().all().get();
            for (ConfigResource want : List.of(
                    new ConfigResource(ConfigResource.Type.TOPIC, topic),
                    new ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets"),
                    new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(node)),
                    new ConfigResource(ConfigResource.Type.BROKER_LOGGER, String.valueOf(node)),
                    groupResource)) {
                check(all.contains(want), "listConfigResources lists " + want + ": " + all);
            }
            Collection<ConfigResource> topics = admin.listConfigResources(
                Set.of(ConfigResource.Type.TOPIC), new ListConfigResourcesOptions()).all().get();
            Set<ConfigResource.Type> types = new HashSet<>();
            for (ConfigResource r : topics) types.add(r.type());
            eq(Set.of(ConfigResource.Type.TOPIC), types, "listConfigResources(TOPIC) types");
            check(topics.contains(new ConfigResource(ConfigResource.Type.TOPIC, topic)), "the topic is listed");
            eq(List.of(), new ArrayList<>(admin.listConfigResources(
                Set.of(ConfigResource.Type.CLIENT_METRICS), new ListConfigResourcesOptions()).all().get()),
                "no client metrics resources");
            @SuppressWarnings("deprecation")
            var metrics = admin.listClientMetricsResources().all().get();
            eq(0, metrics.size(), "listClientMetricsResources");
        }
        System.out.println("checks passed: " + checks);
        System.out.println("PROBE OK");
    }
}
