// The call sequences of Spark's Kafka connector (spark-sql-kafka-0-10), reproduced with the plain
// Java client, since the connector jar cannot be installed here. One JVM run, every check exact;
// the first failure throws (non-zero exit). The last line printed is "PROBE OK" on success.
//
//   java -cp "$(tests/java/client-jars.sh 4.3.0)" tests/java/SparkConnectorProbe.java HOST:PORT PREFIX [k=v ...]
//
// k=v arguments are client settings every client gets, as Spark passes its kafka.* options to
// the driver's, the executors' and the sink's clients (security.protocol=SASL_SSL, ...).
//
// Written to compile against kafka-clients 3.9 (what Spark 4.0's connector is built on) and 4.3.
//
// 1. Sink (KafkaWriteTask): two "tasks", each with its own producer (idempotence on, the client
//    default: InitProducerId + Produce), write rows with headers, null and non-null keys, with and
//    without an explicit partition; no timestamp (the broker keeps the producer's CreateTime).
// 2. Driver, admin route (KafkaOffsetReaderAdmin, the default): describeCluster, describeTopics,
//    listOffsets earliest / latest / forTimestamp with ListOffsetsOptions(isolation level).
// 3. Executors (KafkaDataConsumer): one consumer per partition with the executor parameters
//    (group.id <unique>-executor, auto.offset.reset=none, no auto commit), assign + seek + poll +
//    position, reading [from, until) of each range: zero missing, zero duplicated rows, for both
//    isolation levels, and from the offsets found by timestamp.
// 4. Streaming: a producer writes while the "driver" asks for the latest offsets every 100 ms and
//    runs a micro-batch over [previous, latest) with cached executor consumers.
// 5. useDeprecatedOffsetFetching=true (KafkaOffsetReaderConsumer): a throwaway group
//    spark-kafka-source-<uuid>-<hash>-driver-0 subscribes (FindCoordinator, JoinGroup, SyncGroup),
//    poll(0) + pause, position (OffsetFetch, then a reset to earliest), seekToBeginning / seekToEnd
//    + position, offsetsForTimes, committed (OffsetFetch); heartbeats while idle; close() leaves
//    the group (LeaveGroup). With a broker whose offsets.retention.check.interval.ms is short, the
//    probe then waits until the Empty group without offsets is gone from listConsumerGroups
//    (KIP-211: the next cleanup removes it).
// 6. kafka.isolation.level=read_committed over transactions: a transactional writer commits,
//    aborts and leaves one transaction open among plain rows; latest at read_committed is the
//    last stable offset, the executors' reads at read_committed skip markers and aborted rows
//    (offset gaps, as KafkaDataConsumer.fetchRecord) and end at it; once committed, the next
//    [previous latest, latest) range holds the transaction and the rows after it.

import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class SparkConnectorProbe {
    static final int PARTITIONS = 3;
    static final int ROWS = 2000; // batch topic rows, written by two sink tasks
    static final int STREAM_ROWS = 1200; // streaming topic rows
    static final long LATEST = -1L, EARLIEST = -2L; // KafkaOffsetRangeLimit

    static String bootstrap;
    static final Properties clientOptions = new Properties();  // the kafka.* options of the query
    static final String uniqueGroupId = "spark-kafka-source-" + UUID.randomUUID() + "-" + "/ckpt".hashCode();
    static int checks = 0;

    static void check(boolean ok, String what) {
        checks++;
        if (!ok) throw new AssertionError("CHECK FAILED: " + what);
    }

    static void eq(Object want, Object got, String what) {
        check(Objects.equals(want, got), what + ": want " + want + ", got " + got);
    }

    static byte[] b(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    static String s(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    static void log(String msg) {
        System.out.println(msg);
        System.out.flush();
    }

    // What row i carries (the DataFrame a Spark job would write).
    static String keyOf(int i) { return i % 7 == 0 ? null : "key-" + (i % 50); }
    static String valueOf(int i) { return "row-" + i + "-" + "v".repeat(i % 30); }
    static Integer partitionOf(int i) { return i % 5 == 0 ? Integer.valueOf(i % PARTITIONS) : null; }

    // What the sink learnt about row i from the broker.
    record Written(int partition, long offset, long timestamp) {}

    // A row as an executor read it.
    record Row(String topic, int partition, long offset, long timestamp, String key, String value, Header[] headers) {
        int id() {
            return Integer.parseInt(s(headers[0].value()));
        }
    }

    public static void main(String[] args) throws Exception {
        bootstrap = args[0];
        String prefix = args[1];
        boolean expectGroupExpiry = args.length > 2 && args[2].equals("expect-group-expiry");
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq > 0) clientOptions.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        String batchTopic = prefix + "-batch";
        String streamTopic = prefix + "-stream";
        long start = System.currentTimeMillis();

        try (Admin admin = Admin.create(driverParams())) {
            admin.createTopics(List.of(
                    new NewTopic(batchTopic, PARTITIONS, (short) 1),
                    new NewTopic(streamTopic, PARTITIONS, (short) 1))).all().get();

            Map<Integer, Written> written = sink(batchTopic);
            log("sink wrote " + written.size() + " rows (" + (System.currentTimeMillis() - start) + " ms)");

            driverMetadata(admin, batchTopic);
            for (IsolationLevel iso : IsolationLevel.values()) batchRead(admin, batchTopic, written, iso);
            byTimestamp(admin, batchTopic, written);
            log("batch reads done (" + (System.currentTimeMillis() - start) + " ms)");

            streaming(admin, streamTopic);
            log("streaming done (" + (System.currentTimeMillis() - start) + " ms)");

            transactions(admin, prefix + "-txn");
            log("read_committed over transactions done (" + (System.currentTimeMillis() - start) + " ms)");

            String group = deprecatedOffsetFetching(admin, batchTopic, written);
            log("throwaway group " + group + " left (" + (System.currentTimeMillis() - start) + " ms)");
            if (expectGroupExpiry) {
                long gone = waitUntilGroupGone(admin, group);
                log("GROUP EXPIRED " + group + " " + gone + " ms after LeaveGroup");
            }
        }
        log("checks passed: " + checks);
        log("PROBE OK");
    }

    // --- parameters, as KafkaSourceProvider builds them -------------------------------------------------
    static Properties driverParams() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.putAll(clientOptions);
        p.put("request.timeout.ms", "20000");
        p.put("default.api.timeout.ms", "30000");
        return p;
    }

    static Properties executorParams(IsolationLevel iso) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.putAll(clientOptions);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("auto.offset.reset", "none");
        p.put("group.id", uniqueGroupId + "-executor");
        p.put("enable.auto.commit", "false");
        p.put("receive.buffer.bytes", "65536");
        p.put("isolation.level", iso.toString().toLowerCase());
        // As a user's kafka.fetch.max.wait.ms: after its last poll a consumer has a fetch in
        // flight at the end of the range, which the broker holds this long on a drained partition,
        // and close() waits for it; the default 500 ms would be paid for each of ~15 executors.
        p.put("fetch.max.wait.ms", "100");
        return p;
    }

    static Properties sinkParams() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.putAll(clientOptions);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        // A user's kafka.linger.ms: batches of many records (the client default is 0 on 3.9).
        p.put("linger.ms", "10");
        return p;
    }

    // --- 1. sink -------------------------------------------------------------------------------------------
    static Map<Integer, Written> sink(String topic) throws Exception {
        Map<Integer, Written> written = new ConcurrentHashMap<>();
        AtomicReference<Exception> failure = new AtomicReference<>();
        List<Thread> tasks = new ArrayList<>();
        for (int task = 0; task < 2; task++) {
            final int t = task;
            Thread th = new Thread(() -> {
                // KafkaWriteTask: send every row with a callback, flush, then check for errors.
                try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(sinkParams())) {
                    for (int i = t; i < ROWS; i += 2) {
                        final int id = i;
                        List<Header> headers = new ArrayList<>();
                        headers.add(new RecordHeader("id", b(Integer.toString(i))));
                        headers.add(new RecordHeader("task", b(Integer.toString(t))));
                        if (i % 3 == 0) headers.add(new RecordHeader("null-value", null));
                        ProducerRecord<byte[], byte[]> rec =
                                new ProducerRecord<>(topic, partitionOf(i), b(keyOf(i)), b(valueOf(i)), headers);
                        producer.send(rec, (md, e) -> {
                            if (e != null) failure.compareAndSet(null, e);
                            else written.put(id, new Written(md.partition(), md.offset(), md.timestamp()));
                        });
                    }
                    producer.flush();
                } catch (Exception e) {
                    failure.compareAndSet(null, e);
                }
            });
            th.start();
            tasks.add(th);
        }
        for (Thread th : tasks) th.join();
        if (failure.get() != null) throw failure.get();
        eq(ROWS, written.size(), "rows acknowledged");
        Set<String> places = new HashSet<>();
        for (Map.Entry<Integer, Written> e : written.entrySet()) {
            Written w = e.getValue();
            check(places.add(w.partition() + "@" + w.offset()), "two rows at " + w.partition() + "@" + w.offset());
            Integer want = partitionOf(e.getKey());
            if (want != null) eq(want.intValue(), w.partition(), "explicit partition of row " + e.getKey());
        }
        return written;
    }

    static Map<Integer, Long> rowsPerPartition(Map<Integer, Written> written) {
        Map<Integer, Long> n = new TreeMap<>();
        for (int p = 0; p < PARTITIONS; p++) n.put(p, 0L);
        for (Written w : written.values()) n.merge(w.partition(), 1L, Long::sum);
        return n;
    }

    // --- 2. driver (admin) ---------------------------------------------------------------------------------
    static Set<TopicPartition> assignedTopicPartitions(Admin admin, String topic) throws Exception {
        // ConsumerStrategy.assignedTopicPartitions for "subscribe": describeTopics.
        Map<String, TopicDescription> d = admin.describeTopics(List.of(topic)).allTopicNames().get();
        Set<TopicPartition> out = new HashSet<>();
        d.get(topic).partitions().forEach(p -> out.add(new TopicPartition(topic, p.partition())));
        return out;
    }

    static void driverMetadata(Admin admin, String topic) throws Exception {
        DescribeClusterResult cluster = admin.describeCluster();
        Collection<Node> nodes = cluster.nodes().get();
        eq(1, nodes.size(), "cluster size");
        Node node = nodes.iterator().next();
        eq(bootstrap, node.host() + ":" + node.port(), "advertised address");
        check(cluster.clusterId().get() != null, "cluster id");
        Set<TopicPartition> tps = assignedTopicPartitions(admin, topic);
        eq(PARTITIONS, tps.size(), "partitions of " + topic);
        Map<String, TopicDescription> d = admin.describeTopics(List.of(topic)).allTopicNames().get();
        d.get(topic).partitions().forEach(p -> eq(node.id(), p.leader().id(), "leader of " + p.partition()));
    }

    static Map<TopicPartition, Long> listOffsets(Admin admin, Map<TopicPartition, OffsetSpec> specs, IsolationLevel iso)
            throws Exception {
        Map<TopicPartition, ListOffsetsResultInfo> res =
                admin.listOffsets(specs, new ListOffsetsOptions(iso)).all().get();
        Map<TopicPartition, Long> out = new HashMap<>();
        res.forEach((tp, info) -> out.put(tp, info.offset()));
        return out;
    }

    static Map<TopicPartition, Long> fetchOffsets(Admin admin, Set<TopicPartition> tps, OffsetSpec spec, IsolationLevel iso)
            throws Exception {
        Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
        for (TopicPartition tp : tps) specs.put(tp, spec);
        return listOffsets(admin, specs, iso);
    }

    // --- 3. executors --------------------------------------------------------------------------------------
    // KafkaDataConsumer.get for [from, until): seek, poll, position after poll, one record at a time.
    static List<Row> readRange(KafkaConsumer<byte[], byte[]> c, TopicPartition tp, long from, long until) {
        return readRange(c, tp, from, until, false);
    }

    // gaps: offsets without a visible record are skipped, as KafkaDataConsumer.fetchRecord does
    // ("Skip missing records", a warning): control batches and aborted transactions at
    // read_committed. Without gaps every offset of the range must hold the next record.
    static List<Row> readRange(KafkaConsumer<byte[], byte[]> c, TopicPartition tp, long from, long until, boolean gaps) {
        List<Row> out = new ArrayList<>();
        long offset = from;
        long deadline = System.currentTimeMillis() + 30_000;
        while (offset < until) {
            check(System.currentTimeMillis() < deadline, "timed out reading " + tp + " at " + offset + " < " + until);
            c.seek(tp, offset);
            // A poll after which only markers or aborted records were left in the range returns
            // nothing and waits all of its timeout: short, as the loop goes on until the deadline.
            ConsumerRecords<byte[], byte[]> polled = c.poll(Duration.ofMillis(100));
            List<ConsumerRecord<byte[], byte[]>> recs = polled.records(tp);
            long offsetAfterPoll = c.position(tp);
            for (ConsumerRecord<byte[], byte[]> r : recs) {
                if (r.offset() < offset) continue;
                if (r.offset() >= until) break;
                if (!gaps) eq(offset, r.offset(), "next offset in " + tp + " (no gaps without transactions or compaction)");
                out.add(new Row(r.topic(), r.partition(), r.offset(), r.timestamp(), s(r.key()), s(r.value()),
                        r.headers().toArray()));
                offset = r.offset() + 1;
            }
            // Nothing visible in [offset, offsetAfterPoll): go on from there (fetchRecord's
            // "invisible" offsets); a poll that neither returns records nor moves the position
            // is Spark's TimeoutException, hence the deadline above.
            if (recs.isEmpty() && offsetAfterPoll > offset) offset = Math.min(offsetAfterPoll, until);
        }
        return out;
    }

    static KafkaConsumer<byte[], byte[]> executorConsumer(TopicPartition tp, IsolationLevel iso) {
        KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(executorParams(iso));
        c.assign(List.of(tp));
        return c;
    }

    static List<Row> executorRead(Map<TopicPartition, Long> from, Map<TopicPartition, Long> until, IsolationLevel iso) {
        return executorRead(from, until, iso, false);
    }

    static List<Row> executorRead(Map<TopicPartition, Long> from, Map<TopicPartition, Long> until, IsolationLevel iso,
            boolean gaps) {
        List<Row> rows = new ArrayList<>();
        for (TopicPartition tp : until.keySet()) {
            try (KafkaConsumer<byte[], byte[]> c = executorConsumer(tp, iso)) {
                rows.addAll(readRange(c, tp, from.get(tp), until.get(tp), gaps));
            }
        }
        return rows;
    }

    static void checkRow(Row r, Map<Integer, Written> written, String what) {
        int id = r.id();
        Written w = written.get(id);
        check(w != null, what + ": unknown row " + id);
        eq(w.partition(), r.partition(), what + ": partition of row " + id);
        eq(w.offset(), r.offset(), what + ": offset of row " + id);
        eq(w.timestamp(), r.timestamp(), what + ": timestamp of row " + id);
        eq(keyOf(id), r.key(), what + ": key of row " + id);
        eq(valueOf(id), r.value(), what + ": value of row " + id);
        eq(id % 3 == 0 ? 3 : 2, r.headers().length, what + ": headers of row " + id);
        eq("id", r.headers()[0].key(), what + ": first header");
        eq(Integer.toString(id % 2), s(r.headers()[1].value()), what + ": task header of row " + id);
        if (id % 3 == 0) check(r.headers()[2].value() == null, what + ": null header value of row " + id);
    }

    static void exactlyOnce(List<Row> rows, Set<Integer> want, Map<Integer, Written> written, String what) {
        Map<Integer, Integer> seen = new HashMap<>();
        for (Row r : rows) {
            checkRow(r, written, what);
            seen.merge(r.id(), 1, Integer::sum);
        }
        int dups = 0;
        for (int n : seen.values()) if (n > 1) dups++;
        Set<Integer> missing = new HashSet<>(want);
        missing.removeAll(seen.keySet());
        Set<Integer> extra = new HashSet<>(seen.keySet());
        extra.removeAll(want);
        eq(0, dups, what + ": duplicated rows");
        eq(Set.of(), missing, what + ": missing rows");
        eq(Set.of(), extra, what + ": unexpected rows");
    }

    static void batchRead(Admin admin, String topic, Map<Integer, Written> written, IsolationLevel iso) throws Exception {
        // getOffsetRangesFromUnresolvedOffsets(earliest, latest)
        Set<TopicPartition> tps = assignedTopicPartitions(admin, topic);
        Map<TopicPartition, Long> from = fetchOffsets(admin, tps, OffsetSpec.earliest(), iso);
        Map<TopicPartition, Long> until = fetchOffsets(admin, tps, OffsetSpec.latest(), iso);
        Map<Integer, Long> perPartition = rowsPerPartition(written);
        for (TopicPartition tp : tps) {
            eq(0L, from.get(tp), "earliest " + tp + " " + iso);
            // Without transactions the last stable offset is the high watermark.
            eq(perPartition.get(tp.partition()), until.get(tp), "latest " + tp + " " + iso);
        }
        List<Row> rows = executorRead(from, until, iso);
        exactlyOnce(rows, written.keySet(), written, "earliest->latest " + iso);
    }

    static void byTimestamp(Admin admin, String topic, Map<Integer, Written> written) throws Exception {
        IsolationLevel iso = IsolationLevel.READ_COMMITTED;
        Set<TopicPartition> tps = assignedTopicPartitions(admin, topic);
        List<Long> stamps = new ArrayList<>();
        for (Written w : written.values()) stamps.add(w.timestamp());
        Collections.sort(stamps);
        long median = stamps.get(stamps.size() / 2);
        // startingOffsetsByTimestamp: the first offset whose timestamp is >= the query, per partition.
        Map<TopicPartition, Long> from = fetchOffsets(admin, tps, OffsetSpec.forTimestamp(median), iso);
        Map<TopicPartition, Long> until = fetchOffsets(admin, tps, OffsetSpec.latest(), iso);
        Set<Integer> want = new HashSet<>();
        for (TopicPartition tp : tps) {
            long first = Long.MAX_VALUE;
            for (Written w : written.values()) {
                if (w.partition() == tp.partition() && w.timestamp() >= median) first = Math.min(first, w.offset());
            }
            long expect = first == Long.MAX_VALUE ? -1L : first;
            eq(expect, from.get(tp), "forTimestamp(" + median + ") " + tp);
            // readTimestampOffsets: no match (-1) means "latest" for the strategy Spark defaults to.
            if (from.get(tp) == -1L) from.put(tp, until.get(tp));
        }
        for (Map.Entry<Integer, Written> e : written.entrySet()) {
            Written w = e.getValue();
            if (w.offset() >= from.get(new TopicPartition(topic, w.partition()))) want.add(e.getKey());
        }
        check(!want.isEmpty() && want.size() < written.size(), "a timestamp in the middle of the data");
        exactlyOnce(executorRead(from, until, iso), want, written, "startingOffsetsByTimestamp");
        // A timestamp after every record: no offset (-1) on every partition.
        Map<TopicPartition, Long> none =
                fetchOffsets(admin, tps, OffsetSpec.forTimestamp(stamps.get(stamps.size() - 1) + 60_000), iso);
        for (TopicPartition tp : tps) eq(-1L, none.get(tp), "forTimestamp after the last record " + tp);
    }

    // --- 4. streaming ----------------------------------------------------------------------------------------
    static void streaming(Admin admin, String topic) throws Exception {
        Map<Integer, Written> written = new ConcurrentHashMap<>();
        AtomicReference<Exception> failure = new AtomicReference<>();
        AtomicInteger sent = new AtomicInteger();
        Thread producerThread = new Thread(() -> {
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(sinkParams())) {
                for (int i = 0; i < STREAM_ROWS; i++) {
                    final int id = i;
                    List<Header> headers = new ArrayList<>();
                    headers.add(new RecordHeader("id", b(Integer.toString(i))));
                    headers.add(new RecordHeader("task", b(Integer.toString(i % 2))));
                    if (i % 3 == 0) headers.add(new RecordHeader("null-value", null));
                    producer.send(new ProducerRecord<>(topic, partitionOf(i), b(keyOf(i)), b(valueOf(i)), headers),
                            (md, e) -> {
                                if (e != null) failure.compareAndSet(null, e);
                                else written.put(id, new Written(md.partition(), md.offset(), md.timestamp()));
                            });
                    sent.incrementAndGet();
                    if (i % 40 == 39) Thread.sleep(60); // ~2 s of steady writes
                }
                producer.flush();
            } catch (Exception e) {
                failure.compareAndSet(null, e);
            }
        });

        IsolationLevel iso = IsolationLevel.READ_UNCOMMITTED;
        Set<TopicPartition> tps = assignedTopicPartitions(admin, topic);
        // startingOffsets=latest on an empty topic: the query starts at 0 everywhere.
        Map<TopicPartition, Long> committed = fetchOffsets(admin, tps, OffsetSpec.latest(), iso);
        for (TopicPartition tp : tps) eq(0L, committed.get(tp), "initial offset " + tp);
        Map<TopicPartition, KafkaConsumer<byte[], byte[]>> pool = new HashMap<>();
        List<Row> rows = new ArrayList<>();
        int batches = 0, triggers = 0;
        producerThread.start();
        long deadline = System.currentTimeMillis() + 60_000;
        try {
            while (true) {
                check(System.currentTimeMillis() < deadline, "stream did not catch up: " + rows.size() + " rows");
                boolean producerDone = !producerThread.isAlive();
                triggers++;
                // latestOffset(): fetchLatestOffsets(knownOffsets), which must never go backwards.
                Map<TopicPartition, Long> latest = fetchOffsets(admin, tps, OffsetSpec.latest(), iso);
                boolean any = false;
                for (TopicPartition tp : tps) {
                    check(latest.get(tp) >= committed.get(tp), "latest offset went back on " + tp);
                    if (latest.get(tp) > committed.get(tp)) any = true;
                }
                if (any) {
                    batches++;
                    for (TopicPartition tp : tps) {
                        long from = committed.get(tp), until = latest.get(tp);
                        if (until <= from) continue;
                        KafkaConsumer<byte[], byte[]> c = pool.computeIfAbsent(tp, k -> executorConsumer(k, iso));
                        rows.addAll(readRange(c, tp, from, until));
                    }
                    committed = latest;
                } else if (producerDone) {
                    break;
                }
                Thread.sleep(100);
            }
        } finally {
            for (KafkaConsumer<byte[], byte[]> c : pool.values()) c.close();
            producerThread.join();
        }
        if (failure.get() != null) throw failure.get();
        eq(STREAM_ROWS, written.size(), "streamed rows acknowledged");
        exactlyOnce(rows, written.keySet(), written, "streaming");
        check(batches >= 4, "the stream saw data arrive over several triggers, got " + batches + " batches");
        log("streaming: " + rows.size() + " rows in " + batches + " micro-batches over " + triggers + " triggers");
    }

    // --- 5. useDeprecatedOffsetFetching=true --------------------------------------------------------------------
    static final Method POLL_LONG = pollLong();

    static Method pollLong() {
        try {
            return KafkaConsumer.class.getMethod("poll", long.class);
        } catch (NoSuchMethodException e) {
            return null; // removed in kafka-clients 4.0
        }
    }

    // Spark's consumer.poll(0): on 3.x the deprecated poll(long), which blocks until the group is
    // joined; on 4.x (no poll(long)) the same wait with poll(Duration).
    static void pollZero(KafkaConsumer<byte[], byte[]> c) throws Exception {
        if (POLL_LONG != null) {
            POLL_LONG.invoke(c, 0L);
            return;
        }
        long deadline = System.currentTimeMillis() + 30_000;
        do {
            c.poll(Duration.ofMillis(50));
        } while (c.assignment().isEmpty() && System.currentTimeMillis() < deadline);
    }

    // partitionsAssignedToConsumer: poll(0), assignment, (position), pause.
    static Set<TopicPartition> assigned(KafkaConsumer<byte[], byte[]> c, boolean fetchingEarliest) throws Exception {
        pollZero(c);
        Set<TopicPartition> partitions = c.assignment();
        if (!fetchingEarliest) for (TopicPartition p : partitions) c.position(p);
        c.pause(partitions);
        return partitions;
    }

    static String deprecatedOffsetFetching(Admin admin, String topic, Map<Integer, Written> written) throws Exception {
        String group = uniqueGroupId + "-driver-0";
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.putAll(clientOptions);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("max.poll.records", "1");
        p.put("receive.buffer.bytes", "65536");
        p.put("group.id", group);
        p.put("isolation.level", "read_committed");
        p.put("heartbeat.interval.ms", "100");
        Set<TopicPartition> tps = assignedTopicPartitions(admin, topic);
        Map<Integer, Long> perPartition = rowsPerPartition(written);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic)); // SubscribeStrategy.createConsumer
            // fetchTopicPartitions
            pollZero(c);
            Set<TopicPartition> partitions = c.assignment();
            c.pause(partitions);
            eq(tps, partitions, "partitions assigned to the driver consumer");
            // fetchEarliestOffsets
            partitions = assigned(c, true);
            c.seekToBeginning(partitions);
            for (TopicPartition tp : partitions) eq(0L, c.position(tp), "earliest by consumer " + tp);
            // fetchLatestOffsets(None)
            partitions = assigned(c, false);
            c.seekToEnd(partitions);
            for (TopicPartition tp : partitions) {
                eq(perPartition.get(tp.partition()), c.position(tp), "latest by consumer " + tp);
            }
            // fetchSpecificTimestampBasedOffsets
            partitions = assigned(c, false);
            List<Long> stamps = new ArrayList<>();
            for (Written w : written.values()) stamps.add(w.timestamp());
            Collections.sort(stamps);
            long ts = stamps.get(stamps.size() / 3);
            Map<TopicPartition, Long> query = new HashMap<>();
            for (TopicPartition tp : partitions) query.put(tp, ts);
            Map<TopicPartition, OffsetAndTimestamp> found = c.offsetsForTimes(query);
            Map<TopicPartition, Long> byAdmin =
                    fetchOffsets(admin, partitions, OffsetSpec.forTimestamp(ts), IsolationLevel.READ_COMMITTED);
            for (TopicPartition tp : partitions) {
                OffsetAndTimestamp f = found.get(tp);
                eq(byAdmin.get(tp), f == null ? -1L : f.offset(), "offsetsForTimes vs admin " + tp);
            }
            // Nothing is ever committed by Spark's driver group.
            Map<TopicPartition, OffsetAndMetadata> committed = c.committed(partitions);
            for (TopicPartition tp : partitions) check(committed.get(tp) == null, "no committed offset " + tp);
            // Idle between triggers: the background thread heartbeats; the member stays.
            long until = System.currentTimeMillis() + 700;
            while (System.currentTimeMillis() < until) {
                pollZero(c);
                Thread.sleep(50);
            }
            ConsumerGroupDescription d =
                    admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
            eq("stable", d.state().toString().toLowerCase(), "state of " + group);
            eq(1, d.members().size(), "members of " + group);
            eq(tps, d.members().iterator().next().assignment().topicPartitions(), "assignment of " + group);
            Set<String> listed = new HashSet<>();
            for (ConsumerGroupListing l : admin.listConsumerGroups().all().get()) listed.add(l.groupId());
            check(listed.contains(group), group + " listed while active");
        } // close(): LeaveGroup
        return group;
    }

    // --- 6. kafka.isolation.level=read_committed over transactions -----------------------------------
    // A transactional writer (commit, abort, a transaction left open) and a plain one interleave;
    // the driver's latest at read_committed is the last stable offset, and the executors read
    // [earliest, latest) skipping the offsets of markers and aborted records.
    static void transactions(Admin admin, String topic) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
        Set<TopicPartition> tps = Set.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
        Map<Integer, List<String>> committed = perPartition();
        Map<Integer, List<String>> all = perPartition();
        Properties tp = sinkParams();
        tp.put("transactional.id", topic + "-writer");
        try (KafkaProducer<byte[], byte[]> txn = new KafkaProducer<>(tp);
             KafkaProducer<byte[], byte[]> plain = new KafkaProducer<>(sinkParams())) {
            txn.initTransactions();
            txn.beginTransaction();
            write(txn, topic, "c", 6, all, committed);
            txn.commitTransaction();
            write(plain, topic, "p", 4, all, committed);
            txn.beginTransaction();
            write(txn, topic, "a", 6, all, null);
            txn.abortTransaction();
            txn.beginTransaction();
            write(txn, topic, "d", 4, all, committed);
            txn.commitTransaction();
            // The stable part ends with an aborted transaction and its marker.
            txn.beginTransaction();
            write(txn, topic, "b", 4, all, null);
            txn.abortTransaction();
            // An open transaction, then plain rows after it: beyond the last stable offset. (Its
            // first offsets are where it starts: the abort's markers, written after EndTxn is
            // answered, may come before.)
            Map<Integer, List<String>> later = perPartition();
            txn.beginTransaction();
            Map<Integer, Long> openStart = write(txn, topic, "o", 4, all, later);
            write(plain, topic, "q", 2, all, later);

            Map<TopicPartition, Long> from = fetchOffsets(admin, tps, OffsetSpec.earliest(), IsolationLevel.READ_COMMITTED);
            Map<TopicPartition, Long> lso = fetchOffsets(admin, tps, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED);
            Map<TopicPartition, Long> hw = fetchOffsets(admin, tps, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED);
            for (TopicPartition p : tps) {
                eq(openStart.get(p.partition()), lso.get(p), "latest at read_committed: the open transaction's first offset " + p);
                check(hw.get(p) > lso.get(p), "latest at read_uncommitted is beyond it " + p);
            }
            eq(committed, values(executorRead(from, lso, IsolationLevel.READ_COMMITTED, true)),
                    "read_committed [earliest, latest)");
            // Markers are skipped at read_uncommitted too.
            eq(all, values(executorRead(from, hw, IsolationLevel.READ_UNCOMMITTED, true)),
                    "read_uncommitted [earliest, latest)");

            txn.commitTransaction();
            // The next micro-batches ask for latest until the markers (written after EndTxn is
            // answered) move it to the end; then [previous latest, latest) holds the rest.
            Map<TopicPartition, Long> end = fetchOffsets(admin, tps, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED);
            Map<TopicPartition, Long> next = fetchOffsets(admin, tps, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED);
            long deadline = System.currentTimeMillis() + 10_000;
            while (!next.equals(end)) {
                check(System.currentTimeMillis() < deadline, "latest at read_committed reaches " + end + ": " + next);
                Thread.sleep(100);
                end = fetchOffsets(admin, tps, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED);
                next = fetchOffsets(admin, tps, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED);
            }
            for (TopicPartition p : tps) check(next.get(p) > hw.get(p), "the commit markers are in " + p);
            eq(later, values(executorRead(lso, next, IsolationLevel.READ_COMMITTED, true)),
                    "read_committed [previous latest, latest)");
        }
    }

    static Map<Integer, List<String>> perPartition() {
        return new TreeMap<>(Map.of(0, new ArrayList<>(), 1, new ArrayList<>()));
    }

    // n rows "<prefix><i>" over partitions 0 and 1, each acknowledged before the next; returns
    // the offset of the first row in each partition.
    static Map<Integer, Long> write(KafkaProducer<byte[], byte[]> producer, String topic, String prefix, int n,
            Map<Integer, List<String>> all, Map<Integer, List<String>> visible) throws Exception {
        Map<Integer, Long> first = new HashMap<>();
        for (int i = 0; i < n; i++) {
            String v = prefix + i;
            long offset = producer.send(new ProducerRecord<>(topic, i % 2, null, b(v))).get().offset();
            first.putIfAbsent(i % 2, offset);
            all.get(i % 2).add(v);
            if (visible != null) visible.get(i % 2).add(v);
        }
        return first;
    }

    static Map<Integer, List<String>> values(List<Row> rows) {
        Map<Integer, List<String>> out = perPartition();
        long[] last = {-1, -1};
        for (Row r : rows) {
            check(r.offset() > last[r.partition()], "offsets increase in " + r.partition());
            last[r.partition()] = r.offset();
            out.get(r.partition()).add(r.value());
        }
        return out;
    }

    static long waitUntilGroupGone(Admin admin, String group) throws Exception {
        long left = System.currentTimeMillis();
        long deadline = left + 20_000;
        while (System.currentTimeMillis() < deadline) {
            Set<String> listed = new HashSet<>();
            for (ConsumerGroupListing l : admin.listConsumerGroups().all().get()) listed.add(l.groupId());
            if (!listed.contains(group)) return System.currentTimeMillis() - left;
            Thread.sleep(100);
        }
        throw new AssertionError("CHECK FAILED: throwaway group " + group + " still listed 20 s after LeaveGroup");
    }
}
