// The official Java clients (kafka-clients 4.3) against kcoord's authorizer and security
// metadata, in one JVM run per phase.
//
//   java -cp "$(tests/java/client-jars.sh 4.3.0)" tests/java/SecurityProbe.java setup HOST:PORT PREFIX
//   java -cp ... tests/java/SecurityProbe.java enforced HOST:PORT PREFIX
//   java -cp ... tests/java/SecurityProbe.java scram-after-restart HOST:PORT PREFIX
//
// setup (the broker runs with super.users=User:ANONYMOUS): creates PREFIX-allowed and
// PREFIX-other with records, commits an offset of group PREFIX-other-group, grants User:ANONYMOUS
// Read on the topic PREFIX-allowed and the group PREFIX-group through Admin.createAcls, checks
// describeAcls, and alters and describes SCRAM credentials (alterUserScramCredentials).
// enforced (the broker restarted without super users; every PLAINTEXT client is User:ANONYMOUS):
// a consumer reads PREFIX-allowed with PREFIX-group and commits; each forbidden action is answered
// with Kafka's exception: another topic, another group, a share group, produce, delete topic,
// create topic, describe configs, create ACLs, delete the group, the SCRAM APIs; listTopics shows
// only the readable topic. scram-after-restart: the credentials survived a restart.
// Every check is exact; the first failure throws. The last line printed is "PROBE OK".

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ClusterAuthorizationException;
import org.apache.kafka.common.errors.GroupAuthorizationException;
import org.apache.kafka.common.errors.ResourceNotFoundException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.errors.UnacceptableCredentialException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class SecurityProbe {
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

    static void fails(Class<?> want, org.apache.kafka.common.KafkaFuture<?> f, String what) throws Exception {
        Throwable t = failure(f);
        check(want.isInstance(t), what + ": want " + want.getSimpleName() + ", got " + t);
    }

    static Properties base(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "20000");
        return p;
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group) {
        Properties p = base(bootstrap);
        p.put("group.id", group);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    static final int RECORDS = 5;

    public static void main(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], prefix = args[2];
        String allowed = prefix + "-allowed", other = prefix + "-other", group = prefix + "-group";
        try (Admin admin = Admin.create(base(bootstrap))) {
            switch (mode) {
                case "setup" -> setup(admin, bootstrap, allowed, other, group, prefix);
                case "enforced" -> enforced(admin, bootstrap, allowed, other, group, prefix);
                case "scram-after-restart" -> scramAfterRestart(admin, prefix);
                default -> throw new IllegalArgumentException(mode);
            }
        }
        System.out.println("checks passed: " + checks);
        System.out.println("PROBE OK");
    }

    static void setup(Admin admin, String bootstrap, String allowed, String other, String group, String prefix)
            throws Exception {
        admin.createTopics(List.of(new NewTopic(allowed, 1, (short) 1), new NewTopic(other, 1, (short) 1)))
            .all().get();
        Properties pp = base(bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; i < RECORDS; i++) {
                producer.send(new ProducerRecord<>(allowed, "k" + i, "v" + i)).get();
                producer.send(new ProducerRecord<>(other, "k" + i, "v" + i)).get();
            }
        }
        // Another group's committed offset, which the restricted consumer must not change.
        admin.alterConsumerGroupOffsets(
            prefix + "-other-group", Map.of(new TopicPartition(other, 0), new OffsetAndMetadata(2))).all().get();

        String anon = "User:ANONYMOUS";
        List<AclBinding> acls = List.of(
            new AclBinding(new ResourcePattern(ResourceType.TOPIC, allowed, PatternType.LITERAL),
                new AccessControlEntry(anon, "*", AclOperation.READ, AclPermissionType.ALLOW)),
            new AclBinding(new ResourcePattern(ResourceType.GROUP, group, PatternType.LITERAL),
                new AccessControlEntry(anon, "*", AclOperation.READ, AclPermissionType.ALLOW)),
            // Matched by nothing the consumer does: the DescribeAcls and DeleteAcls checks' subject.
            new AclBinding(new ResourcePattern(ResourceType.TOPIC, prefix + "-x", PatternType.PREFIXED),
                new AccessControlEntry("User:carol", "10.0.0.1", AclOperation.WRITE, AclPermissionType.DENY)));
        admin.createAcls(acls).all().get();
        // Invalid bindings: INVALID_REQUEST per binding, as Kafka.
        AclBinding badCluster = new AclBinding(new ResourcePattern(ResourceType.CLUSTER, "other", PatternType.LITERAL),
            new AccessControlEntry(anon, "*", AclOperation.ALTER, AclPermissionType.ALLOW));
        fails(org.apache.kafka.common.errors.InvalidRequestException.class,
            admin.createAcls(List.of(badCluster)).all(), "a cluster resource not named kafka-cluster");

        AclBindingFilter mine = new AclBindingFilter(
            new ResourcePatternFilter(ResourceType.ANY, null, PatternType.ANY), AccessControlEntryFilter.ANY);
        Collection<AclBinding> described = admin.describeAcls(mine).values().get();
        eq(Set.copyOf(acls), Set.copyOf(described), "describeAcls ANY");
        AclBindingFilter matching = new AclBindingFilter(
            new ResourcePatternFilter(ResourceType.TOPIC, prefix + "-xyz", PatternType.MATCH), AccessControlEntryFilter.ANY);
        eq(Set.of(acls.get(2)), Set.copyOf(admin.describeAcls(matching).values().get()), "describeAcls MATCH");

        // SCRAM credentials: Kafka's validation and errors, then two users.
        fails(UnacceptableCredentialException.class, admin.alterUserScramCredentials(List.of(
            new UserScramCredentialUpsertion(prefix + "-weak", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100),
                "pw"))).all(), "too few iterations");
        fails(ResourceNotFoundException.class, admin.alterUserScramCredentials(List.of(
            new UserScramCredentialDeletion(prefix + "-nobody", ScramMechanism.SCRAM_SHA_512))).all(),
            "deleting an unknown credential");
        List<UserScramCredentialAlteration> alterations = List.of(
            new UserScramCredentialUpsertion(prefix + "-alice", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                "alice-secret"),
            new UserScramCredentialUpsertion(prefix + "-bob", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                "bob-secret"));
        admin.alterUserScramCredentials(alterations).all().get();
        Map<String, UserScramCredentialsDescription> creds =
            admin.describeUserScramCredentials(List.of(prefix + "-alice", prefix + "-bob")).all().get();
        eq(List.of(new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)),
            creds.get(prefix + "-alice").credentialInfos(), "alice's credential");
        eq(List.of(new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)),
            creds.get(prefix + "-bob").credentialInfos(), "bob's credential");
        fails(ResourceNotFoundException.class,
            admin.describeUserScramCredentials(List.of(prefix + "-nobody")).description(prefix + "-nobody"),
            "describing an unknown user");
    }

    static void scramAfterRestart(Admin admin, String prefix) throws Exception {
        Map<String, UserScramCredentialsDescription> creds = admin.describeUserScramCredentials().all().get();
        eq(List.of(new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)),
            creds.get(prefix + "-alice").credentialInfos(), "alice's credential after the restart");
        admin.alterUserScramCredentials(List.of(
            new UserScramCredentialDeletion(prefix + "-bob", ScramMechanism.SCRAM_SHA_256))).all().get();
        check(!admin.describeUserScramCredentials().all().get().containsKey(prefix + "-bob"), "bob deleted");
    }

    static void enforced(Admin admin, String bootstrap, String allowed, String other, String group, String prefix)
            throws Exception {
        TopicPartition tp = new TopicPartition(allowed, 0);
        // The consumer the ACLs allow: it reads the topic with its group and commits.
        try (KafkaConsumer<String, String> c = consumer(bootstrap, group)) {
            c.subscribe(List.of(allowed));
            List<String> values = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (values.size() < RECORDS && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) values.add(r.value());
            }
            eq(List.of("v0", "v1", "v2", "v3", "v4"), values, "the allowed topic's records");
            c.commitSync();
            eq((long) RECORDS, c.committed(Set.of(tp)).get(tp).offset(), "committed offset");
            eq(Map.of(tp, (long) RECORDS), c.endOffsets(List.of(tp)), "ListOffsets (Describe implied by Read)");
        }
        // Another topic, with the allowed group: TOPIC_AUTHORIZATION_FAILED.
        try (KafkaConsumer<String, String> c = consumer(bootstrap, group)) {
            c.assign(List.of(new TopicPartition(other, 0)));
            c.seekToBeginning(List.of(new TopicPartition(other, 0)));
            boolean denied = false;
            try {
                c.poll(Duration.ofSeconds(5));
            } catch (TopicAuthorizationException e) {
                denied = e.unauthorizedTopics().contains(other);
            }
            check(denied, "fetching another topic is TopicAuthorizationException");
        }
        // The allowed topic with another group: GROUP_AUTHORIZATION_FAILED.
        try (KafkaConsumer<String, String> c = consumer(bootstrap, prefix + "-other-group")) {
            c.subscribe(List.of(allowed));
            boolean denied = false;
            try {
                c.poll(Duration.ofSeconds(5));
            } catch (GroupAuthorizationException e) {
                denied = true;
            }
            check(denied, "joining another group is GroupAuthorizationException");
        }
        // A share consumer in a group it may not read: GROUP_AUTHORIZATION_FAILED.
        Properties sp = base(bootstrap);
        sp.put("group.id", prefix + "-share");
        sp.put("key.deserializer", StringDeserializer.class.getName());
        sp.put("value.deserializer", StringDeserializer.class.getName());
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(sp)) {
            c.subscribe(List.of(allowed));
            boolean denied = false;
            long deadline = System.currentTimeMillis() + 15_000;
            while (!denied && System.currentTimeMillis() < deadline) {
                try {
                    c.poll(Duration.ofMillis(500));
                } catch (GroupAuthorizationException e) {
                    denied = true;
                }
            }
            check(denied, "a share consumer denied Read on its group gets GroupAuthorizationException");
        }
        // Produce: no Write anywhere. An idempotent producer fails at InitProducerId (no
        // IdempotentWrite nor Write on any topic), a plain one at Produce.
        Properties pp = base(bootstrap);
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.put("enable.idempotence", "false");
        pp.put("max.block.ms", "10000");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            Throwable t = null;
            try {
                producer.send(new ProducerRecord<>(allowed, "k", "forbidden")).get();
            } catch (ExecutionException e) {
                t = e.getCause();
            }
            check(t instanceof TopicAuthorizationException, "producing is TopicAuthorizationException: " + t);
        }
        pp.put("enable.idempotence", "true");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            Throwable t = null;
            try {
                producer.send(new ProducerRecord<>(allowed, "k", "forbidden")).get();
            } catch (ExecutionException e) {
                t = e.getCause();
            } catch (org.apache.kafka.common.KafkaException e) {
                // send() after InitProducerId already failed throws at once ("...in an error
                // state") with the fatal error as its cause; before, the future fails with it.
                t = e.getCause() != null ? e.getCause() : e;
            }
            check(t instanceof ClusterAuthorizationException,
                "an idempotent producer is ClusterAuthorizationException: " + t);
        }
        // Admin: only the readable topic is listed; every change is refused.
        eq(Set.of(allowed), admin.listTopics().names().get().stream()
            .filter(n -> n.startsWith(prefix)).collect(java.util.stream.Collectors.toSet()), "listTopics");
        fails(TopicAuthorizationException.class, admin.deleteTopics(List.of(allowed)).all(), "deleteTopics");
        fails(TopicAuthorizationException.class,
            admin.createTopics(List.of(new NewTopic(prefix + "-new", 1, (short) 1))).all(), "createTopics");
        fails(TopicAuthorizationException.class, admin.describeConfigs(
            List.of(new ConfigResource(ConfigResource.Type.TOPIC, allowed))).all(), "describeConfigs");
        fails(TopicAuthorizationException.class, admin.describeTopics(List.of(other)).allTopicNames(),
            "describeTopics of another topic");
        fails(GroupAuthorizationException.class,
            admin.deleteConsumerGroups(List.of(group)).all(), "deleteConsumerGroups (Read is not Delete)");
        fails(GroupAuthorizationException.class,
            admin.listConsumerGroupOffsets(prefix + "-other-group").all(), "listConsumerGroupOffsets of another group");
        fails(ClusterAuthorizationException.class, admin.createAcls(List.of(
            new AclBinding(new ResourcePattern(ResourceType.TOPIC, other, PatternType.LITERAL),
                new AccessControlEntry("User:ANONYMOUS", "*", AclOperation.ALL, AclPermissionType.ALLOW)))).all(),
            "createAcls");
        fails(ClusterAuthorizationException.class, admin.describeAcls(AclBindingFilter.ANY).values(), "describeAcls");
        fails(ClusterAuthorizationException.class,
            admin.describeUserScramCredentials().all(), "describeUserScramCredentials");
        fails(ClusterAuthorizationException.class, admin.alterUserScramCredentials(List.of(
            new UserScramCredentialUpsertion(prefix + "-mallory",
                new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), "x"))).all(),
            "alterUserScramCredentials");
        // What the allowed group may do, still works: its own offsets.
        eq(Map.of(tp, new OffsetAndMetadata(RECORDS)),
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().entrySet().stream()
                .collect(java.util.stream.Collectors.toMap(Map.Entry::getKey,
                    e -> new OffsetAndMetadata(e.getValue().offset()))), "the allowed group's offsets");
    }
}
