// The official Java client (kafka-clients 4.x) driven line by line by a test: a consumer group
// member (classic protocol by default, group.protocol=consumer for KIP-848), or an Admin client
// for the group APIs.
//
//   java -cp "$(tests/java/client-jars.sh)" tests/java/GroupProbe.java member HOST:PORT GROUP TOPIC [k=v ...]
//   java -cp "$(tests/java/client-jars.sh)" tests/java/GroupProbe.java admin HOST:PORT
//
// Every line meant for the test starts with "@@ " (client logs may share stdout).
//
// member: subscribe(TOPIC) and poll in a loop. Prints "@@ ASSIGNED <generation> <member id>
// <t-p,...>" from the rebalance listener, "@@ REC <partition> <offset> <value>" per record and,
// after each poll that returned records, commitSync of the positions reached and
// "@@ COMMITTED <partition> <offset>" (a commit refused by a rebalance prints "@@ COMMITFAIL
// <exception class> <message>").
// Partitions revoked print "@@ REVOKED <t-p,...>", partitions lost (fenced) "@@ LOST <t-p,...>".
// commitOnRevoke=true also commits (commitSync) the positions of the partitions revoked, from the
// rebalance listener, before "@@ REVOKED": a classic cooperative consumer's poll returns records
// while it rebalances, and their commit after poll fails (RebalanceInProgressException, refused
// by the client itself) until the rebalance completes, by which time a partition may be revoked.
// Arguments with a dot are consumer configs; pollDelayMs=N sleeps after each non-empty poll so
// that rebalances interleave with consumption; pattern=REGEX subscribes by a java.util.regex
// Pattern (matched by the client against its metadata) and subscriptionPattern=REGEX by a
// SubscriptionPattern (RE2J, resolved by the broker, group.protocol=consumer only) instead of
// TOPIC. Commands on stdin: "close" (commitSync, close, "@@ CLOSED"), "halt" (exit at once: no
// commit, no LeaveGroup, like kill -9), "stall" (stop calling poll, "@@ STALLED": the JVM and the
// client's background threads stay alive), "resume" (poll again, "@@ RESUMED"). A fenced static
// member prints "@@ FENCED" and exits.
//
// admin: one command per stdin line, each answered by its "@@ " lines and then "@@ DONE";
// a failure prints "@@ ERR <exception class> <message>" (the cause of an ExecutionException).
//   list                              -> @@ GROUP <id> <state> <type> <protocol type>
//   describe G...                     -> @@ DESC <id> <state> <assignor> <member count>
//                                        @@ MEMBER <id> <member id> <instance id|-> <client id> <t-p,...>
//                                        or @@ DESCERR <id> <exception class>
//   describe-type G...                -> @@ TDESC <id> <type> <state> <assignor> <member count>
//                                           <group epoch|-> <target assignment epoch|->
//                                        @@ TMEMBER <id> <member id> <instance id|-> <client id> <host>
//                                           <member epoch|-> <t-p,...> <target t-p,...|none>
//                                        or @@ DESCERR <id> <exception class>
//   offsets G                         -> @@ OFFSET <topic> <partition> <offset> <metadata>
//   alter G T:P:OFFSET...             -> (nothing on success)
//   delete-offsets G T:P...           -> (nothing on success)
//   delete G...                       -> @@ DELETED <id> | @@ NOTDELETED <id> <exception class>
//   remove-static G INSTANCE...       -> (nothing on success)

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DeleteConsumerGroupsResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.serialization.StringDeserializer;

public class GroupProbe {
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
        if (args.length >= 5 && args[0].equals("member")) {
            member(args[1], args[2], args[3], Arrays.copyOfRange(args, 4, args.length));
        } else if (args.length >= 4 && args[0].equals("member")) {
            member(args[1], args[2], args[3], new String[0]);
        } else if (args.length == 2 && args[0].equals("admin")) {
            admin(args[1]);
        } else {
            System.err.println("usage: GroupProbe member HOST:PORT GROUP TOPIC [k=v ...] | admin HOST:PORT");
            System.exit(2);
        }
    }

    // --- a consumer group member -------------------------------------------------------------
    static void member(String bootstrap, String group, String topic, String[] extra) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("group.protocol", "classic");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("heartbeat.interval.ms", "300");
        p.put("session.timeout.ms", "10000");
        p.put("max.poll.records", "20");
        long pollDelayMs = 0;
        String pattern = null;
        String subscriptionPattern = null;
        boolean commitOnRevoke = false;
        for (String kv : extra) {
            String[] pair = kv.split("=", 2);
            if (pair[0].equals("commitOnRevoke")) {
                commitOnRevoke = Boolean.parseBoolean(pair[1]);
            } else if (pair[0].equals("pollDelayMs")) {
                pollDelayMs = Long.parseLong(pair[1]);
            } else if (pair[0].equals("pattern")) {
                pattern = pair[1];
            } else if (pair[0].equals("subscriptionPattern")) {
                subscriptionPattern = pair[1];
            } else {
                p.put(pair[0], pair[1]);
            }
        }
        if ("consumer".equals(p.get("group.protocol"))) {
            // KIP-848: the broker owns session and heartbeat timing; the client refuses these.
            p.remove("heartbeat.interval.ms");
            p.remove("session.timeout.ms");
        }
        ConcurrentLinkedQueue<String> commands = readCommands();
        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
        final boolean commitRevoked = commitOnRevoke;
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                if (commitRevoked && !partitions.isEmpty()) {
                    Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
                    for (TopicPartition tp : partitions) {
                        positions.put(tp, new OffsetAndMetadata(consumer.position(tp)));
                    }
                    commit(consumer, positions);
                }
                out("REVOKED " + parts(partitions));
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                out("ASSIGNED " + consumer.groupMetadata().generationId() + " "
                        + consumer.groupMetadata().memberId() + " " + parts(consumer.assignment()));
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> partitions) {
                out("LOST " + parts(partitions));
            }
        };
        if (pattern != null) {
            consumer.subscribe(Pattern.compile(pattern), listener);
        } else if (subscriptionPattern != null) {
            consumer.subscribe(new SubscriptionPattern(subscriptionPattern), listener);
        } else {
            consumer.subscribe(List.of(topic), listener);
        }
        boolean stalled = false;
        try {
            while (true) {
                String cmd = commands.poll();
                if (cmd != null) {
                    if (cmd.equals("halt")) {
                        Runtime.getRuntime().halt(0);
                    }
                    if (cmd.equals("close")) {
                        consumer.commitSync();
                        consumer.close();
                        out("CLOSED");
                        System.exit(0);
                    }
                    if (cmd.equals("stall")) {
                        stalled = true;
                        out("STALLED");
                    }
                    if (cmd.equals("resume")) {
                        stalled = false;
                        out("RESUMED");
                    }
                }
                if (stalled) {
                    Thread.sleep(20);
                    continue;
                }
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                if (records.isEmpty()) {
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    out("REC " + r.partition() + " " + r.offset() + " " + r.value());
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                if (pollDelayMs > 0) {
                    Thread.sleep(pollDelayMs);
                }
                commit(consumer, offsets);
            }
        } catch (FencedInstanceIdException e) {
            out("FENCED " + e.getMessage());
            Runtime.getRuntime().halt(0);
        } catch (Exception e) {
            out("ERROR " + e.getClass().getSimpleName() + " " + e.getMessage());
            Runtime.getRuntime().halt(3);
        }
    }

    static void commit(KafkaConsumer<String, String> consumer, Map<TopicPartition, OffsetAndMetadata> offsets) {
        try {
            consumer.commitSync(offsets);
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                out("COMMITTED " + e.getKey().partition() + " " + e.getValue().offset());
            }
        } catch (CommitFailedException | RebalanceInProgressException e) {
            out("COMMITFAIL " + e.getClass().getSimpleName() + " " + String.valueOf(e.getMessage()).replace('\n', ' '));
        }
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
        p.put("default.api.timeout.ms", "20000");
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
                for (GroupListing g : get(admin.listGroups(ListGroupsOptions.forConsumerGroups()).all())) {
                    out("GROUP " + g.groupId() + " " + g.groupState().map(Object::toString).orElse("-")
                            + " " + g.type().map(Object::toString).orElse("-")
                            + " " + (g.protocol().isEmpty() ? "-" : g.protocol()));
                }
                break;
            case "describe": {
                Map<String, KafkaFuture<ConsumerGroupDescription>> described = admin.describeConsumerGroups(rest).describedGroups();
                for (String id : rest) {
                    ConsumerGroupDescription d;
                    try {
                        d = get(described.get(id));
                    } catch (Exception e) {
                        out("DESCERR " + id + " " + e.getClass().getSimpleName());
                        continue;
                    }
                    out("DESC " + id + " " + d.groupState() + " " + (d.partitionAssignor().isEmpty() ? "-" : d.partitionAssignor())
                            + " " + d.members().size());
                    for (MemberDescription m : d.members()) {
                        out("MEMBER " + id + " " + m.consumerId() + " " + m.groupInstanceId().orElse("-") + " "
                                + m.clientId() + " " + parts(m.assignment().topicPartitions()));
                    }
                }
                break;
            }
            case "describe-type": {
                Map<String, KafkaFuture<ConsumerGroupDescription>> described = admin.describeConsumerGroups(rest).describedGroups();
                for (String id : rest) {
                    ConsumerGroupDescription d;
                    try {
                        d = get(described.get(id));
                    } catch (Exception e) {
                        out("DESCERR " + id + " " + e.getClass().getSimpleName());
                        continue;
                    }
                    out("TDESC " + id + " " + d.type() + " " + d.groupState() + " "
                            + (d.partitionAssignor().isEmpty() ? "-" : d.partitionAssignor()) + " " + d.members().size()
                            + " " + d.groupEpoch().map(String::valueOf).orElse("-")
                            + " " + d.targetAssignmentEpoch().map(String::valueOf).orElse("-"));
                    for (MemberDescription m : d.members()) {
                        out("TMEMBER " + id + " " + m.consumerId() + " " + m.groupInstanceId().orElse("-") + " "
                                + m.clientId() + " " + m.host() + " " + m.memberEpoch().map(String::valueOf).orElse("-")
                                + " " + parts(m.assignment().topicPartitions()) + " "
                                + m.targetAssignment().map(a -> parts(a.topicPartitions())).orElse("none"));
                    }
                }
                break;
            }
            case "offsets":
                Map<TopicPartition, OffsetAndMetadata> offsets = get(admin.listConsumerGroupOffsets(w[1]).partitionsToOffsetAndMetadata());
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : new TreeMap<>(offsets.entrySet().stream()
                        .filter(x -> x.getValue() != null)
                        .collect(Collectors.toMap(x -> x.getKey().toString(), x -> x))).values()) {
                    out("OFFSET " + e.getKey().topic() + " " + e.getKey().partition() + " " + e.getValue().offset()
                            + " " + (e.getValue().metadata().isEmpty() ? "-" : e.getValue().metadata()));
                }
                break;
            case "alter": {
                Map<TopicPartition, OffsetAndMetadata> alter = new HashMap<>();
                for (String spec : rest.subList(1, rest.size())) {
                    String[] s = spec.split(":");
                    alter.put(new TopicPartition(s[0], Integer.parseInt(s[1])), new OffsetAndMetadata(Long.parseLong(s[2])));
                }
                get(admin.alterConsumerGroupOffsets(w[1], alter).all());
                break;
            }
            case "delete-offsets": {
                java.util.Set<TopicPartition> tps = new java.util.HashSet<>();
                for (String spec : rest.subList(1, rest.size())) {
                    String[] s = spec.split(":");
                    tps.add(new TopicPartition(s[0], Integer.parseInt(s[1])));
                }
                get(admin.deleteConsumerGroupOffsets(w[1], tps).all());
                break;
            }
            case "delete": {
                DeleteConsumerGroupsResult r = admin.deleteConsumerGroups(rest);
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
            case "remove-static": {
                List<MemberToRemove> members = new ArrayList<>();
                for (String instance : rest.subList(1, rest.size())) {
                    members.add(new MemberToRemove(instance));
                }
                get(admin.removeMembersFromConsumerGroup(w[1], new RemoveMembersFromConsumerGroupOptions(members)).all());
                break;
            }
            default:
                throw new IllegalArgumentException("unknown command " + w[0]);
        }
    }
}
