// The official Java client (kafka-clients 4.3) in share groups (KIP-932), driven line by line by
// a test: a KafkaShareConsumer, an Admin client for the share group APIs, or a throughput run.
//
//   java -cp "$(tests/java/client-jars.sh)" tests/java/ShareProbe.java consumer HOST:PORT GROUP TOPIC [k=v ...]
//   java -cp "$(tests/java/client-jars.sh)" tests/java/ShareProbe.java admin HOST:PORT
//   java -cp "$(tests/java/client-jars.sh)" tests/java/ShareProbe.java bench HOST:PORT GROUP TOPIC RECORDS CONSUMERS [k=v ...]
//
// Every line meant for the test starts with "@@ " (client logs may share stdout).
//
// consumer: subscribe(TOPIC) and poll in a loop. Prints "@@ REC <partition> <offset> <delivery
// count> <value>" per record. In explicit mode (share.acknowledgement.mode=explicit) each record
// is acknowledged by policy: RELEASE if its value is in release=V1,V2 (every delivery) or in
// releaseOnce=... (first delivery only), REJECT if in reject=..., ACCEPT otherwise; then
// commitSync and "@@ COMMIT <partition> ok|<exception class>" per partition. In implicit mode
// (the default) records are accepted by the next poll. holdFrom=N: on the first poll with a
// record at offset >= N, acknowledge (and commit) only the records below N, print "@@ HELD" and
// stop polling (the rest stay acquired until their lock expires or the member goes).
// pollDelayMs=N sleeps after each non-empty poll. Arguments with a dot are consumer configs.
// Acknowledgement commit callbacks print "@@ ACKCB <partition> <records> ok|<exception class>".
// Commands on stdin: "close" (close(), "@@ CLOSED"), "halt" (exit at once: no acknowledgements,
// no leave, like kill -9).
//
// admin: one command per stdin line, each answered by its "@@ " lines and then "@@ DONE";
// a failure prints "@@ ERR <exception class> <message>" (the cause of an ExecutionException).
//   list                       -> @@ GROUP <id> <state> <type>            (share groups)
//   describe G...              -> @@ DESC <id> <state> <member count>
//                                 @@ MEMBER <id> <client id> <t-p,...>    (sorted by client id)
//                                 or @@ DESCERR <id> <exception class>
//   offsets G                  -> @@ OFFSET <topic> <partition> <start offset> <lag|->
//   alter G T:P:OFFSET...      -> (nothing on success)
//   delete-offsets G T...      -> (nothing on success)
//   delete G...                -> @@ DELETED <id> | @@ NOTDELETED <id> <exception class>
//   set-config G k=v...        -> (nothing on success; incrementalAlterConfigs SET on GROUP G)
//   get-config G               -> @@ CONFIG <name> <value> <source>       (share.* only)
//
// bench: creates TOPIC (one partition) unless it exists, sets share.auto.offset.reset=earliest
// on GROUP, produces RECORDS records of valueBytes=100 bytes with a KafkaProducer
// (batch.size=batchBytes, 16384 by default; linger.ms=5), prints "@@ PRODUCED <records>",
// then CONSUMERS consumer threads in explicit mode accept every record (acknowledgements go
// with the next ShareFetch; commit=sync calls commitSync after each poll) until RECORDS
// records have been delivered; prints "@@ BENCH <records> <seconds> <records/s>", timed from
// the first record delivered.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DeleteShareGroupsResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareProbe {
    static synchronized void out(String line) {
        System.out.println("@@ " + line);
        System.out.flush();
    }

    static String parts(Collection<TopicPartition> tps) {
        if (tps.isEmpty()) {
            return "-";
        }
        return tps.stream().map(TopicPartition::toString).sorted().collect(Collectors.joining(","));
    }

    static Set<String> list(Map<String, String> opts, String name) {
        String v = opts.get(name);
        return v == null || v.isEmpty() ? Set.of() : new HashSet<>(Arrays.asList(v.split(",")));
    }

    static ConcurrentLinkedQueue<String> readCommands() {
        ConcurrentLinkedQueue<String> queue = new ConcurrentLinkedQueue<>();
        Thread t = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    queue.add(line.trim());
                }
            } catch (Exception e) {
                // stdin closed
            }
            queue.add("halt"); // the test went away: do not linger
        });
        t.setDaemon(true);
        t.start();
        return queue;
    }

    public static void main(String[] args) throws Exception {
        if (args.length >= 4 && args[0].equals("consumer")) {
            consumer(args[1], args[2], args[3], Arrays.copyOfRange(args, 4, args.length));
        } else if (args.length == 2 && args[0].equals("admin")) {
            admin(args[1]);
        } else if (args.length >= 6 && args[0].equals("bench")) {
            bench(args[1], args[2], args[3], Long.parseLong(args[4]), Integer.parseInt(args[5]),
                    Arrays.copyOfRange(args, 6, args.length));
        } else {
            System.err.println("usage: ShareProbe consumer HOST:PORT GROUP TOPIC [k=v ...] | admin HOST:PORT"
                    + " | bench HOST:PORT GROUP TOPIC RECORDS CONSUMERS [k=v ...]");
            System.exit(2);
        }
    }

    // --- a share consumer ---------------------------------------------------------------------
    static Properties consumerProps(String bootstrap, String group, String[] extra, Map<String, String> opts) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        for (String kv : extra) {
            String[] pair = kv.split("=", 2);
            if (pair[0].contains(".")) {
                p.put(pair[0], pair[1]);
            } else {
                opts.put(pair[0], pair[1]);
            }
        }
        return p;
    }

    static void printCommit(Map<TopicIdPartition, Optional<KafkaException>> results) {
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : results.entrySet()) {
            out("COMMIT " + e.getKey().partition() + " "
                    + e.getValue().map(x -> x.getClass().getSimpleName()).orElse("ok"));
        }
    }

    static void consumer(String bootstrap, String group, String topic, String[] extra) throws Exception {
        Map<String, String> opts = new HashMap<>();
        Properties p = consumerProps(bootstrap, group, extra, opts);
        boolean explicit = "explicit".equals(p.getProperty("share.acknowledgement.mode"));
        Set<String> release = list(opts, "release");
        Set<String> releaseOnce = list(opts, "releaseOnce");
        Set<String> reject = list(opts, "reject");
        long holdFrom = Long.parseLong(opts.getOrDefault("holdFrom", "-1"));
        long pollDelayMs = Long.parseLong(opts.getOrDefault("pollDelayMs", "0"));
        ConcurrentLinkedQueue<String> commands = readCommands();
        KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(p);
        consumer.setAcknowledgementCommitCallback((offsets, exception) -> {
            for (Map.Entry<TopicIdPartition, Set<Long>> e : offsets.entrySet()) {
                out("ACKCB " + e.getKey().partition() + " " + e.getValue().size() + " "
                        + (exception == null ? "ok" : exception.getClass().getSimpleName()));
            }
        });
        consumer.subscribe(List.of(topic));
        boolean holding = false;
        try {
            while (true) {
                String cmd = commands.poll();
                if (cmd != null) {
                    if (cmd.equals("halt")) {
                        Runtime.getRuntime().halt(0);
                    }
                    if (cmd.equals("close")) {
                        consumer.close();
                        out("CLOSED");
                        System.exit(0);
                    }
                }
                if (holding) {
                    Thread.sleep(50);
                    continue;
                }
                ConsumerRecords<String, String> records;
                try {
                    records = consumer.poll(Duration.ofMillis(100));
                } catch (KafkaException e) {
                    out("POLLERR " + e.getClass().getSimpleName() + " " + String.valueOf(e.getMessage()).replace('\n', ' '));
                    Thread.sleep(100);
                    continue;
                }
                if (records.isEmpty()) {
                    continue;
                }
                for (ConsumerRecord<String, String> r : records) {
                    out("REC " + r.partition() + " " + r.offset() + " " + r.deliveryCount().map(String::valueOf).orElse("-")
                            + " " + r.value());
                    if (holdFrom >= 0 && r.offset() >= holdFrom) {
                        holding = true;
                    }
                }
                if (explicit) {
                    int acked = 0;
                    for (ConsumerRecord<String, String> r : records) {
                        if (holding && r.offset() >= holdFrom) {
                            continue;
                        }
                        AcknowledgeType type = AcknowledgeType.ACCEPT;
                        if (release.contains(r.value())
                                || (releaseOnce.contains(r.value()) && r.deliveryCount().orElse((short) 1) == 1)) {
                            type = AcknowledgeType.RELEASE;
                        } else if (reject.contains(r.value())) {
                            type = AcknowledgeType.REJECT;
                        }
                        consumer.acknowledge(r, type);
                        acked++;
                    }
                    if (acked > 0) {
                        printCommit(consumer.commitSync());
                    }
                }
                if (holding) {
                    out("HELD");
                }
                if (pollDelayMs > 0) {
                    Thread.sleep(pollDelayMs);
                }
            }
        } catch (Exception e) {
            out("ERROR " + e.getClass().getSimpleName() + " " + String.valueOf(e.getMessage()).replace('\n', ' '));
            Runtime.getRuntime().halt(3);
        }
    }

    // --- throughput ---------------------------------------------------------------------------
    static void bench(String bootstrap, String group, String topic, long total, int consumers, String[] extra)
            throws Exception {
        Map<String, String> benchOpts = new HashMap<>();
        consumerProps(bootstrap, group, extra, benchOpts);
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            if (!get(admin.listTopics().names()).contains(topic)) {
                get(admin.createTopics(List.of(new org.apache.kafka.clients.admin.NewTopic(topic, 1, (short) 1))).all());
            }
            ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp earliest = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                    AlterConfigOp.OpType.SET);
            get(admin.incrementalAlterConfigs(Map.of(res, List.of(earliest))).all());
        }
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("linger.ms", "5");
        pp.put("batch.size", benchOpts.getOrDefault("batchBytes", "16384"));
        byte[] value = new byte[Integer.parseInt(benchOpts.getOrDefault("valueBytes", "100"))];
        try (org.apache.kafka.clients.producer.KafkaProducer<byte[], byte[]> producer =
                new org.apache.kafka.clients.producer.KafkaProducer<>(pp,
                        new org.apache.kafka.common.serialization.ByteArraySerializer(),
                        new org.apache.kafka.common.serialization.ByteArraySerializer())) {
            for (long i = 0; i < total; i++) {
                producer.send(new org.apache.kafka.clients.producer.ProducerRecord<>(topic, 0, null, value));
            }
            producer.flush();
        }
        out("PRODUCED " + total);
        AtomicLong delivered = new AtomicLong();
        AtomicLong firstAt = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        for (int i = 0; i < consumers; i++) {
            Map<String, String> opts = new HashMap<>();
            Properties p = consumerProps(bootstrap, group, extra, opts);
            p.put("share.acknowledgement.mode", "explicit");
            p.put("client.id", "bench-" + i);
            boolean sync = "sync".equals(opts.get("commit"));
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p,
                        new org.apache.kafka.common.serialization.ByteArrayDeserializer(),
                        new org.apache.kafka.common.serialization.ByteArrayDeserializer())) {
                    c.subscribe(List.of(topic));
                    while (delivered.get() < total) {
                        ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(100));
                        if (records.isEmpty()) {
                            continue;
                        }
                        firstAt.compareAndSet(0, System.nanoTime());
                        for (ConsumerRecord<byte[], byte[]> r : records) {
                            c.acknowledge(r, AcknowledgeType.ACCEPT);
                        }
                        if (sync) {
                            c.commitSync();
                        }
                        delivered.addAndGet(records.count());
                    }
                    c.commitSync();
                } catch (Throwable e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            });
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        long end = System.nanoTime();
        if (!failures.isEmpty()) {
            out("ERROR " + failures.get(0));
            System.exit(3);
        }
        double seconds = (end - firstAt.get()) / 1e9;
        out(String.format("BENCH %d %.2f %.0f", delivered.get(), seconds, delivered.get() / seconds));
        System.exit(0);
    }

    // --- Admin ------------------------------------------------------------------------------
    static <T> T get(KafkaFuture<T> f) throws Exception {
        try {
            return f.get();
        } catch (ExecutionException e) {
            throw (Exception) e.getCause();
        }
    }

    static void admin(String bootstrap) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("default.api.timeout.ms", "30000");
        p.put("request.timeout.ms", "10000");
        try (Admin admin = Admin.create(p);
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] w = line.trim().split("\\s+");
                try {
                    adminCommand(admin, w);
                } catch (Exception e) {
                    out("ERR " + e.getClass().getSimpleName() + " " + String.valueOf(e.getMessage()).replace('\n', ' '));
                }
                out("DONE");
            }
        }
    }

    static void adminCommand(Admin admin, String[] w) throws Exception {
        List<String> rest = Arrays.asList(w).subList(1, w.length);
        switch (w[0]) {
            case "list":
                for (GroupListing g : get(admin.listGroups(ListGroupsOptions.forShareGroups()).all())) {
                    out("GROUP " + g.groupId() + " " + g.groupState().map(Object::toString).orElse("-")
                            + " " + g.type().map(Object::toString).orElse("-"));
                }
                break;
            case "describe": {
                Map<String, KafkaFuture<ShareGroupDescription>> described = admin.describeShareGroups(rest).describedGroups();
                for (String id : rest) {
                    ShareGroupDescription d;
                    try {
                        d = get(described.get(id));
                    } catch (Exception e) {
                        out("DESCERR " + id + " " + e.getClass().getSimpleName());
                        continue;
                    }
                    out("DESC " + id + " " + d.groupState() + " " + d.members().size());
                    List<ShareMemberDescription> members = new ArrayList<>(d.members());
                    members.sort((a, b) -> a.clientId().compareTo(b.clientId()));
                    for (ShareMemberDescription m : members) {
                        out("MEMBER " + id + " " + m.clientId() + " " + parts(m.assignment().topicPartitions()));
                    }
                }
                break;
            }
            case "offsets": {
                Map<TopicPartition, SharePartitionOffsetInfo> offsets = get(admin.listShareGroupOffsets(
                        Map.of(w[1], new ListShareGroupOffsetsSpec())).partitionsToOffsetInfo(w[1]));
                TreeMap<String, Map.Entry<TopicPartition, SharePartitionOffsetInfo>> sorted = new TreeMap<>();
                for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : offsets.entrySet()) {
                    if (e.getValue() != null) {
                        sorted.put(e.getKey().toString(), e);
                    }
                }
                for (Map.Entry<TopicPartition, SharePartitionOffsetInfo> e : sorted.values()) {
                    out("OFFSET " + e.getKey().topic() + " " + e.getKey().partition() + " " + e.getValue().startOffset()
                            + " " + e.getValue().lag().map(String::valueOf).orElse("-"));
                }
                break;
            }
            case "alter": {
                Map<TopicPartition, Long> alter = new HashMap<>();
                for (String spec : rest.subList(1, rest.size())) {
                    String[] s = spec.split(":");
                    alter.put(new TopicPartition(s[0], Integer.parseInt(s[1])), Long.parseLong(s[2]));
                }
                get(admin.alterShareGroupOffsets(w[1], alter).all());
                break;
            }
            case "delete-offsets":
                get(admin.deleteShareGroupOffsets(w[1], new HashSet<>(rest.subList(1, rest.size()))).all());
                break;
            case "delete": {
                DeleteShareGroupsResult r = admin.deleteShareGroups(rest);
                for (Map.Entry<String, KafkaFuture<Void>> e : new TreeMap<>(r.deletedGroups()).entrySet()) {
                    try {
                        get(e.getValue());
                        out("DELETED " + e.getKey());
                    } catch (Exception ex) {
                        out("NOTDELETED " + e.getKey() + " " + ex.getClass().getSimpleName());
                    }
                }
                break;
            }
            case "set-config": {
                List<AlterConfigOp> ops = new ArrayList<>();
                for (String kv : rest.subList(1, rest.size())) {
                    String[] pair = kv.split("=", 2);
                    ops.add(new AlterConfigOp(new ConfigEntry(pair[0], pair[1]), AlterConfigOp.OpType.SET));
                }
                ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, w[1]);
                get(admin.incrementalAlterConfigs(Map.of(res, ops)).all());
                break;
            }
            case "get-config": {
                ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, w[1]);
                Config config = get(admin.describeConfigs(List.of(res)).values().get(res));
                List<ConfigEntry> entries = new ArrayList<>(config.entries());
                entries.sort((a, b) -> a.name().compareTo(b.name()));
                for (ConfigEntry e : entries) {
                    if (e.name().startsWith("share.")) {
                        out("CONFIG " + e.name() + " " + e.value() + " " + e.source());
                    }
                }
                break;
            }
            default:
                throw new IllegalArgumentException("unknown command " + w[0]);
        }
    }
}
