// The official Java client (kafka-clients 4.x) against kcoord's data plane, in one JVM run.
//
//   java -cp "$(tests/java/client-jars.sh)" tests/java/DataPlaneProbe.java HOST:PORT TOPIC_PREFIX
//
// Admin: createTopics, describeCluster, describeTopics (by name and by id), listOffsets
// (earliest / latest / forTimestamp / maxTimestamp, both isolation levels). An idempotent
// producer sends multi-record batches (plain and with every compression codec). A consumer reads
// everything back with assign + seek + poll, the call pattern of Spark's Kafka connector
// (KafkaDataConsumer), plus its consumer-based offset lookups (seekToEnd/position). Every check
// is exact; the first failure throws, so the exit code tells the test whether all passed.
// The last line printed is "PROBE OK" on success.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class DataPlaneProbe {
    static final int PARTITIONS = 3;
    static final int N = 3000; // records in the main topic, N / PARTITIONS per partition
    static final int PER_CODEC = 200;
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};

    static String bootstrap;
    static long t0;
    static int checks = 0;

    static void check(boolean ok, String what) {
        checks++;
        if (!ok) throw new AssertionError("CHECK FAILED: " + what);
    }

    static void eq(Object want, Object got, String what) {
        check(java.util.Objects.equals(want, got), what + ": want " + want + ", got " + got);
    }

    static byte[] b(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    static String s(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    // What record i of the main topic carries.
    static int partitionOf(int i) { return i % PARTITIONS; }
    static long offsetOf(int i) { return i / PARTITIONS; }
    static long tsOf(int i) { return t0 + i; }
    static String keyOf(int i) { return i % 10 == 0 ? null : "key-" + i; }
    static String valueOf(int i) { return "value-" + i + "-" + "x".repeat(i % 40); }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        String prefix = args[1];
        String main = prefix + "-main";
        t0 = System.currentTimeMillis() - 600_000;

        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        ap.put("request.timeout.ms", "20000");
        ap.put("default.api.timeout.ms", "30000");
        try (Admin admin = Admin.create(ap)) {
            adminChecks(admin, prefix, main);
            produceMain(main);
            for (String codec : CODECS) produceCodec(prefix + "-" + codec, codec);
            listOffsetChecks(admin, main);
            for (String codec : CODECS) codecOffsetChecks(admin, prefix + "-" + codec);
        }
        for (IsolationLevel iso : IsolationLevel.values()) {
            sparkStyleConsume(main, iso);
            consumerOffsetLookups(main, iso);
        }
        for (String codec : CODECS) codecConsume(prefix + "-" + codec);
        System.out.println("checks passed: " + checks);
        System.out.println("PROBE OK");
    }

    // --- Admin ---------------------------------------------------------------------------------
    static void adminChecks(Admin admin, String prefix, String main) throws Exception {
        List<NewTopic> topics = new ArrayList<>();
        topics.add(new NewTopic(main, PARTITIONS, (short) 1));
        for (String codec : CODECS) topics.add(new NewTopic(prefix + "-" + codec, 1, (short) 1));
        admin.createTopics(topics).all().get();
        try {
            admin.createTopics(List.of(new NewTopic(main, 1, (short) 1))).all().get();
            check(false, "creating an existing topic must fail");
        } catch (ExecutionException e) {
            check(e.getCause() instanceof TopicExistsException, "TopicExistsException, got " + e.getCause());
        }

        DescribeClusterResult cluster = admin.describeCluster();
        List<Node> nodes = new ArrayList<>(cluster.nodes().get());
        eq(1, nodes.size(), "cluster size");
        Node node = nodes.get(0);
        eq(bootstrap, node.host() + ":" + node.port(), "advertised address");
        eq(node.id(), cluster.controller().get().id(), "controller");
        String clusterId = cluster.clusterId().get();
        check(clusterId != null && !clusterId.isEmpty(), "cluster id");

        Map<String, TopicDescription> byName = admin.describeTopics(List.of(main)).allTopicNames().get();
        TopicDescription td = byName.get(main);
        eq(PARTITIONS, td.partitions().size(), "partitions of " + main);
        check(!td.isInternal(), "not internal");
        for (TopicPartitionInfo p : td.partitions()) {
            eq(node.id(), p.leader().id(), "leader of partition " + p.partition());
            eq(1, p.replicas().size(), "replicas");
            eq(1, p.isr().size(), "isr");
        }
        Uuid id = td.topicId();
        check(id != null && !id.equals(Uuid.ZERO_UUID), "topic id");
        Map<Uuid, TopicDescription> byId =
                admin.describeTopics(TopicCollection.ofTopicIds(List.of(id))).allTopicIds().get();
        eq(main, byId.get(id).name(), "describe by topic id");
    }

    // --- Producing -------------------------------------------------------------------------------
    static Properties producerProps(String compression) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("enable.idempotence", "true");
        p.put("acks", "all");
        p.put("linger.ms", "50");
        p.put("batch.size", "16384");
        p.put("max.in.flight.requests.per.connection", "5");
        p.put("compression.type", compression);
        return p;
    }

    static void produceMain(String topic) throws Exception {
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps("none"))) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = 0; i < N; i++) {
                List<Header> headers = List.of(
                        new RecordHeader("i", b(Integer.toString(i))), new RecordHeader("empty", new byte[0]));
                futures.add(producer.send(new ProducerRecord<>(
                        topic, partitionOf(i), tsOf(i), b(keyOf(i)), b(valueOf(i)), headers)));
            }
            producer.flush();
            for (int i = 0; i < N; i++) {
                RecordMetadata md = futures.get(i).get();
                eq(partitionOf(i), md.partition(), "partition of record " + i);
                eq(offsetOf(i), md.offset(), "offset of record " + i);
                eq(tsOf(i), md.timestamp(), "timestamp of record " + i);
            }
        }
    }

    static void produceCodec(String topic, String codec) throws Exception {
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(codec))) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = 0; i < PER_CODEC; i++) {
                futures.add(producer.send(new ProducerRecord<>(
                        topic, 0, t0 + 10L * i, b("k" + i), b(codec + "-" + i + "-" + "y".repeat(100)))));
            }
            producer.flush();
            for (int i = 0; i < PER_CODEC; i++) eq((long) i, futures.get(i).get().offset(), codec + " offset " + i);
        }
    }

    // --- ListOffsets -------------------------------------------------------------------------------
    static Map<TopicPartition, ListOffsetsResultInfo> list(
            Admin admin, Map<TopicPartition, OffsetSpec> specs, IsolationLevel iso) throws Exception {
        return admin.listOffsets(specs, new ListOffsetsOptions(iso)).all().get();
    }

    static ListOffsetsResultInfo one(Admin admin, TopicPartition tp, OffsetSpec spec, IsolationLevel iso)
            throws Exception {
        return list(admin, Map.of(tp, spec), iso).get(tp);
    }

    static void listOffsetChecks(Admin admin, String topic) throws Exception {
        int perPartition = N / PARTITIONS;
        for (IsolationLevel iso : IsolationLevel.values()) {
            for (int p = 0; p < PARTITIONS; p++) {
                TopicPartition tp = new TopicPartition(topic, p);
                eq(0L, one(admin, tp, OffsetSpec.earliest(), iso).offset(), "earliest " + tp + " " + iso);
                // The high watermark exactly, although the log ends in a multi-record batch.
                eq((long) perPartition, one(admin, tp, OffsetSpec.latest(), iso).offset(), "latest " + tp + " " + iso);
                ListOffsetsResultInfo max = one(admin, tp, OffsetSpec.maxTimestamp(), iso);
                int lastI = (perPartition - 1) * PARTITIONS + p;
                eq(offsetOf(lastI), max.offset(), "max timestamp offset " + tp);
                eq(tsOf(lastI), max.timestamp(), "max timestamp " + tp);
            }
            TopicPartition tp0 = new TopicPartition(topic, 0);
            // Record j of partition 0 is i = 3j with timestamp t0 + 3j: lookups land on records,
            // mostly in the middle of a batch, never on the batch's base offset by accident.
            for (long j : new long[] {0, 1, 7, 333, 500, 501, 998, 999}) {
                for (long delta : new long[] {0, -1, -2}) {
                    long target = t0 + 3 * j + delta;
                    ListOffsetsResultInfo r = one(admin, tp0, OffsetSpec.forTimestamp(target), iso);
                    eq(j, r.offset(), "forTimestamp(t0+" + (3 * j + delta) + ") " + iso);
                    eq(t0 + 3 * j, r.timestamp(), "forTimestamp timestamp " + iso);
                    eq(java.util.Optional.of(0), r.leaderEpoch(), "leader epoch");
                }
            }
            ListOffsetsResultInfo none = one(admin, tp0, OffsetSpec.forTimestamp(t0 + 10L * N), iso);
            eq(-1L, none.offset(), "forTimestamp after the last record " + iso);
            // Several partitions in one request.
            Map<TopicPartition, OffsetSpec> many = new HashMap<>();
            for (int p = 0; p < PARTITIONS; p++) many.put(new TopicPartition(topic, p), OffsetSpec.forTimestamp(t0 + 1500));
            Map<TopicPartition, ListOffsetsResultInfo> res = list(admin, many, iso);
            for (int p = 0; p < PARTITIONS; p++) {
                // First i >= 1500 with i % 3 == p.
                int i = 1500;
                while (i % PARTITIONS != p) i++;
                eq(offsetOf(i), res.get(new TopicPartition(topic, p)).offset(), "multi-partition lookup p" + p);
            }
        }
    }

    static void codecOffsetChecks(Admin admin, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        for (IsolationLevel iso : IsolationLevel.values()) {
            eq((long) PER_CODEC, one(admin, tp, OffsetSpec.latest(), iso).offset(), "latest " + topic);
            for (long j : new long[] {0, 3, 77, 150, PER_CODEC - 1}) {
                ListOffsetsResultInfo r = one(admin, tp, OffsetSpec.forTimestamp(t0 + 10 * j - 5), iso);
                eq(j, r.offset(), "forTimestamp in " + topic + " " + iso);
                eq(t0 + 10 * j, r.timestamp(), "forTimestamp timestamp in " + topic);
            }
            ListOffsetsResultInfo max = one(admin, tp, OffsetSpec.maxTimestamp(), iso);
            eq((long) PER_CODEC - 1, max.offset(), "max timestamp in " + topic);
        }
    }

    // --- Consuming -------------------------------------------------------------------------------------
    static KafkaConsumer<byte[], byte[]> sparkConsumer(IsolationLevel iso) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        // As Spark's KafkaSourceProvider sets them for executors.
        p.put("group.id", "spark-kafka-source-" + UUID.randomUUID() + "-executor");
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "none");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("isolation.level", iso.toString().toLowerCase());
        p.put("max.poll.records", "500");
        p.put("fetch.max.wait.ms", "200");
        return new KafkaConsumer<>(p);
    }

    // Spark's KafkaDataConsumer.get(offset): seek, poll, and expect the record at that offset first.
    static List<ConsumerRecord<byte[], byte[]>> fetchFrom(
            KafkaConsumer<byte[], byte[]> c, TopicPartition tp, long offset) {
        c.seek(tp, offset);
        long deadline = System.currentTimeMillis() + 20_000;
        while (System.currentTimeMillis() < deadline) {
            List<ConsumerRecord<byte[], byte[]>> recs = c.poll(Duration.ofMillis(512)).records(tp);
            if (!recs.isEmpty()) return recs;
        }
        throw new AssertionError("no records at " + tp + " offset " + offset);
    }

    static void sparkStyleConsume(String topic, IsolationLevel iso) {
        int perPartition = N / PARTITIONS;
        try (KafkaConsumer<byte[], byte[]> c = sparkConsumer(iso)) {
            for (int p = 0; p < PARTITIONS; p++) {
                TopicPartition tp = new TopicPartition(topic, p);
                c.assign(List.of(tp));
                long offset = 0;
                int seen = 0;
                while (offset < perPartition) {
                    List<ConsumerRecord<byte[], byte[]>> recs = fetchFrom(c, tp, offset);
                    eq(offset, recs.get(0).offset(), "first record after seek " + tp + " " + iso);
                    for (ConsumerRecord<byte[], byte[]> r : recs) {
                        eq(offset, r.offset(), "contiguous offsets " + tp);
                        int i = (int) (offset * PARTITIONS + p);
                        eq(keyOf(i), s(r.key()), "key of record " + i);
                        eq(valueOf(i), s(r.value()), "value of record " + i);
                        eq(tsOf(i), r.timestamp(), "timestamp of record " + i);
                        Header[] hs = r.headers().toArray();
                        eq(2, hs.length, "headers of record " + i);
                        eq("i", hs[0].key(), "header key");
                        eq(Integer.toString(i), s(hs[0].value()), "header value of record " + i);
                        eq("empty", hs[1].key(), "second header key");
                        eq(0, hs[1].value().length, "empty header value");
                        offset++;
                        seen++;
                    }
                }
                eq(perPartition, seen, "records read once from " + tp);
                // Seeking into the middle of a batch: the client drops the records before it.
                for (long mid : new long[] {1, 499, 501, perPartition - 1}) {
                    eq(mid, fetchFrom(c, tp, mid).get(0).offset(), "seek to " + mid + " " + tp);
                }
                // At the end: nothing, and no error.
                c.seek(tp, perPartition);
                check(c.poll(Duration.ofMillis(300)).isEmpty(), "poll at the log end is empty");
            }
        }
    }

    static void consumerOffsetLookups(String topic, IsolationLevel iso) {
        int perPartition = N / PARTITIONS;
        try (KafkaConsumer<byte[], byte[]> c = sparkConsumer(iso)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < PARTITIONS; p++) tps.add(new TopicPartition(topic, p));
            c.assign(tps);
            // Spark's consumer-based KafkaOffsetReader: seekToEnd / seekToBeginning + position.
            c.seekToEnd(tps);
            for (TopicPartition tp : tps) eq((long) perPartition, c.position(tp), "position at end " + tp);
            c.seekToBeginning(tps);
            for (TopicPartition tp : tps) eq(0L, c.position(tp), "position at beginning " + tp);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            Map<TopicPartition, Long> begin = c.beginningOffsets(tps);
            for (TopicPartition tp : tps) {
                eq((long) perPartition, end.get(tp), "endOffsets " + tp);
                eq(0L, begin.get(tp), "beginningOffsets " + tp);
            }
            Map<TopicPartition, Long> query = new HashMap<>();
            for (TopicPartition tp : tps) query.put(tp, t0 + 1000);
            Map<TopicPartition, OffsetAndTimestamp> found = c.offsetsForTimes(query);
            for (TopicPartition tp : tps) {
                int i = 1000;
                while (i % PARTITIONS != tp.partition()) i++;
                eq(offsetOf(i), found.get(tp).offset(), "offsetsForTimes " + tp);
                eq(tsOf(i), found.get(tp).timestamp(), "offsetsForTimes timestamp " + tp);
            }
        }
    }

    static void codecConsume(String topic) {
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> c = sparkConsumer(IsolationLevel.READ_UNCOMMITTED)) {
            c.assign(List.of(tp));
            long offset = 0;
            while (offset < PER_CODEC) {
                for (ConsumerRecord<byte[], byte[]> r : fetchFrom(c, tp, offset)) {
                    eq(offset, r.offset(), "offset in " + topic);
                    eq("k" + offset, s(r.key()), "key in " + topic);
                    check(s(r.value()).contains("-" + offset + "-"), "value in " + topic);
                    eq(t0 + 10 * offset, r.timestamp(), "timestamp in " + topic);
                    offset++;
                }
            }
        }
    }
}
