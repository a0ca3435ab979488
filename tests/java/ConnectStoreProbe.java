// Kafka Connect's own storage on the broker: KafkaOffsetBackingStore and KafkaConfigBackingStore,
// the classes a distributed worker keeps source offsets and connector configs in, configured
// from a DistributedConfig the way the worker does. They create their compacted topics
// themselves (cleanup.policy=compact, plus the "offset.storage."/"config.storage." topic
// settings passed through, which make segments roll fast so the broker's cleaner has work).
//
//   java -cp CP ConnectStoreProbe write BOOTSTRAP PREFIX ROUNDS   overwrite every key ROUNDS times
//   java -cp CP ConnectStoreProbe read  BOOTSTRAP PREFIX ROUNDS   fresh stores see the last round
//   ... [eos]   exactly.once.source.support=enabled: the config store claims write privileges
//               and writes through a transactional producer; the stores read read_committed
//
// Each "write" round sets the offsets of KEYS source partitions and the configs of CONNECTORS
// connectors (plus their task configs and target state); "read" starts new stores (which read
// their topics from the start) and checks every value is exactly the one from round ROUNDS-1.
// Prints "@@ " lines and PROBE OK at the end; exits non-zero at the first failed check.

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import java.util.Collection;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.runtime.RestartRequest;
import org.apache.kafka.connect.runtime.SessionKey;
import org.apache.kafka.connect.runtime.TargetState;
import org.apache.kafka.connect.runtime.distributed.DistributedConfig;
import org.apache.kafka.connect.storage.ClusterConfigState;
import org.apache.kafka.connect.storage.ConfigBackingStore;
import org.apache.kafka.connect.storage.KafkaConfigBackingStore;
import org.apache.kafka.connect.storage.KafkaOffsetBackingStore;
import org.apache.kafka.connect.util.ConnectorTaskId;
import org.apache.kafka.connect.util.TopicAdmin;

public class ConnectStoreProbe {
    static final int KEYS = 20;
    static final int CONNECTORS = 4;
    static int checks = 0;

    static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("@@ FAIL " + what);
            System.out.flush();
            System.exit(1);
        }
        checks++;
    }

    static ByteBuffer buf(String s) {
        return ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
    }

    static String str(ByteBuffer b) {
        if (b == null) return null;
        byte[] a = new byte[b.remaining()];
        b.duplicate().get(a);
        return new String(a, StandardCharsets.UTF_8);
    }

    static DistributedConfig workerConfig(String bootstrap, String prefix, boolean eos) {
        Map<String, String> p = new HashMap<>();
        if (eos) p.put("exactly.once.source.support", "enabled");
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", prefix + "-cluster");
        p.put("key.converter", JsonConverter.class.getName());
        p.put("value.converter", JsonConverter.class.getName());
        p.put("offset.storage.topic", prefix + "-offsets");
        p.put("config.storage.topic", prefix + "-configs");
        p.put("status.storage.topic", prefix + "-status");
        p.put("offset.storage.replication.factor", "1");
        p.put("config.storage.replication.factor", "1");
        p.put("status.storage.replication.factor", "1");
        p.put("offset.storage.partitions", "1");  // one partition: the test counts its records
        for (String store : new String[] {"offset.storage.", "config.storage."}) {
            p.put(store + "segment.ms", "100");
            p.put(store + "min.cleanable.dirty.ratio", "0.01");
            p.put(store + "delete.retention.ms", "0");
        }
        return new DistributedConfig(p);
    }

    static Map<String, Object> adminProps(String bootstrap) {
        Map<String, Object> a = new HashMap<>();
        a.put("bootstrap.servers", bootstrap);
        return a;
    }

    static JsonConverter internalConverter(boolean isKey) {
        JsonConverter c = new JsonConverter();
        c.configure(Map.of("schemas.enable", "false"), isKey);
        return c;
    }

    static String offsetKey(int k) {
        // What OffsetStorageWriter stores: ["connector", {source partition}] as JSON.
        return "[\"probe-source\",{\"table\":\"t" + k + "\"}]";
    }

    static String offsetValue(int k, int round) {
        return "{\"lsn\":" + (round * 1000 + k) + ",\"round\":" + round + "}";
    }

    static Map<String, String> connectorConfig(int c, int round) {
        Map<String, String> m = new HashMap<>();
        m.put("connector.class", "org.apache.kafka.connect.file.FileStreamSourceConnector");
        m.put("name", "conn-" + c);
        m.put("file", "/tmp/in-" + c + "-" + round);
        m.put("topic", "out-" + c);
        m.put("tasks.max", "1");
        m.put("round", Integer.toString(round));
        return m;
    }

    /** Counts what the herder would be told; the probe only needs the store to have a listener. */
    static final AtomicInteger updates = new AtomicInteger();

    static final ConfigBackingStore.UpdateListener LISTENER = new ConfigBackingStore.UpdateListener() {
        public void onConnectorConfigRemove(String c) { updates.incrementAndGet(); }
        public void onConnectorConfigUpdate(String c) { updates.incrementAndGet(); }
        public void onTaskConfigUpdate(Collection<ConnectorTaskId> t) { updates.incrementAndGet(); }
        public void onConnectorTargetStateChange(String c) { updates.incrementAndGet(); }
        public void onSessionKeyUpdate(SessionKey k) { }
        public void onRestartRequest(RestartRequest r) { }
        public void onLoggingLevelUpdate(String ns, String level) { }
    };

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable t) {
            t.printStackTrace();
            System.out.println("@@ FAIL " + t);
            System.out.flush();
            System.exit(1);
        }
        System.exit(0);  // the stores' client threads must not keep the JVM alive
    }

    static void run(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], prefix = args[2];
        int rounds = Integer.parseInt(args[3]);
        boolean eos = args.length > 4 && args[4].equals("eos");
        DistributedConfig config = workerConfig(bootstrap, prefix, eos);
        TopicAdmin admin = new TopicAdmin(adminProps(bootstrap));

        KafkaOffsetBackingStore offsets =
                new KafkaOffsetBackingStore(() -> admin, () -> prefix + "-worker", internalConverter(true));
        offsets.configure(config);
        offsets.start();
        KafkaConfigBackingStore configs = new KafkaConfigBackingStore(
                internalConverter(false), config, null, () -> admin, prefix + "-worker");
        configs.setUpdateListener(LISTENER);
        configs.start();
        System.out.println("@@ started");

        if (mode.equals("write")) {
            if (eos) configs.claimWritePrivileges();  // what the leader does before writing
            for (int round = 0; round < rounds; round++) {
                Map<ByteBuffer, ByteBuffer> batch = new HashMap<>();
                for (int k = 0; k < KEYS; k++) batch.put(buf(offsetKey(k)), buf(offsetValue(k, round)));
                offsets.set(batch, (error, ignored) -> { }).get(30, TimeUnit.SECONDS);
                for (int c = 0; c < CONNECTORS; c++) {
                    String name = "conn-" + c;
                    TargetState state = round % 2 == 0 ? TargetState.STARTED : TargetState.PAUSED;
                    configs.putConnectorConfig(name, connectorConfig(c, round), state);
                    List<Map<String, String>> tasks = new ArrayList<>();
                    tasks.add(Map.of("task.class", "x", "round", Integer.toString(round)));
                    configs.putTaskConfigs(name, tasks);
                }
                Thread.sleep(40);  // let segments roll (segment.ms 100) so older rounds get cleaned
            }
            System.out.println("@@ wrote " + rounds);
            check(updates.get() >= rounds * CONNECTORS, "listener saw only " + updates.get() + " updates");
        }

        // Both modes: what the stores hold now is the last round, and nothing else.
        int last = rounds - 1;
        List<ByteBuffer> keys = new ArrayList<>();
        for (int k = 0; k < KEYS; k++) keys.add(buf(offsetKey(k)));
        Map<ByteBuffer, ByteBuffer> got = offsets.get(keys).get(30, TimeUnit.SECONDS);
        for (int k = 0; k < KEYS; k++) {
            String v = str(got.get(buf(offsetKey(k))));
            check(offsetValue(k, last).equals(v), "offset of t" + k + ": " + v);
        }
        check(offsets.connectorPartitions("probe-source").size() == KEYS,
                "connectorPartitions: " + offsets.connectorPartitions("probe-source"));

        configs.refresh(30, TimeUnit.SECONDS);
        ClusterConfigState snap = configs.snapshot();
        check(snap.connectors().size() == CONNECTORS, "connectors: " + snap.connectors());
        TargetState want = last % 2 == 0 ? TargetState.STARTED : TargetState.PAUSED;
        for (int c = 0; c < CONNECTORS; c++) {
            String name = "conn-" + c;
            check(connectorConfig(c, last).equals(snap.rawConnectorConfig(name)),
                    name + " config: " + snap.rawConnectorConfig(name));
            check(snap.targetState(name) == want, name + " target state: " + snap.targetState(name));
            check(snap.taskCount(name) == 1, name + " tasks: " + snap.taskCount(name));
            Map<String, String> task = snap.rawTaskConfig(new ConnectorTaskId(name, 0));
            check(task != null && Integer.toString(last).equals(task.get("round")), name + " task: " + task);
            check(snap.inconsistentConnectors().isEmpty(), "inconsistent: " + snap.inconsistentConnectors());
        }
        System.out.println("@@ checked offsets and configs of round " + last);

        offsets.stop();
        configs.stop();
        admin.close();
        System.out.println("checks passed: " + checks);
        System.out.println("PROBE OK");
    }
}
