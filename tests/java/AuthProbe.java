// The official Java client on a secured listener (SASL_SSL with PLAIN or SCRAM, SSL with mutual
// TLS): the client configuration comes as k=v arguments, exactly as a Kafka user would write it.
//
//   java -cp "$(tests/java/client-jars.sh)" tests/java/AuthProbe.java roundtrip HOST:PORT TOPIC [k=v ...]
//   java -cp "$(tests/java/client-jars.sh)" tests/java/AuthProbe.java badauth HOST:PORT [k=v ...]
//   java -cp "$(tests/java/client-jars.sh)" tests/java/AuthProbe.java scram-user HOST:PORT USER PASSWORD MECHANISM
//   java -cp "$(tests/java/client-jars.sh)" tests/java/AuthProbe.java slowproduce HOST:PORT TOPIC [k=v ...]
//
// roundtrip: create TOPIC through Admin, produce 100 records (acks=all, idempotent), consume
// them in a group (subscribe, poll, commitSync) and read the committed offset back through Admin.
// badauth: the first Admin call must fail with SaslAuthenticationException; prints
// "@@ AUTHFAIL <message>". scram-user: Admin.alterUserScramCredentials upserts USER with
// PASSWORD for MECHANISM (SCRAM-SHA-256 or SCRAM-SHA-512, 8192 iterations) and describes it back.
// slowproduce: one record every 250 ms for 6 s on one producer, each acknowledged, so that a broker
// with a short connections.max.reauth.ms sees the client re-authenticate (KIP-368).
// Each prints PROBE OK at the end.

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class AuthProbe {
    static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("CHECK FAILED: " + what);
            System.exit(1);
        }
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        Properties base = new Properties();
        base.put("bootstrap.servers", args[1]);
        int first = mode.equals("roundtrip") || mode.equals("slowproduce") ? 3 : mode.equals("scram-user") ? 5 : 2;
        for (int i = first; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            base.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        if (mode.equals("scram-user")) {
            ScramMechanism mechanism = ScramMechanism.fromMechanismName(args[4]);
            try (Admin admin = Admin.create(base)) {
                admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(
                    args[2], new ScramCredentialInfo(mechanism, 8192), args[3]))).all().get();
                var described = admin.describeUserScramCredentials(List.of(args[2])).all().get();
                check(described.get(args[2]).credentialInfos().equals(List.of(new ScramCredentialInfo(mechanism, 8192))),
                    "described " + described);
            }
            System.out.println("PROBE OK");
            return;
        }
        if (mode.equals("slowproduce")) {
            Properties pp = new Properties();
            pp.putAll(base);
            pp.put("acks", "all");
            pp.put("key.serializer", StringSerializer.class.getName());
            pp.put("value.serializer", StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
                for (int i = 0; i < 24; i++) {
                    producer.send(new ProducerRecord<>(args[2], "k", "v" + i)).get();
                    Thread.sleep(250);
                }
            }
            System.out.println("PROBE OK");
            return;
        }
        if (mode.equals("badauth")) {
            Properties p = new Properties();
            p.putAll(base);
            p.put("request.timeout.ms", "10000");
            p.put("default.api.timeout.ms", "15000");
            try (Admin admin = Admin.create(p)) {
                admin.describeCluster().nodes().get();
                check(false, "describeCluster succeeded with bad credentials");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof SaslAuthenticationException, "not an authentication error: " + e.getCause());
                System.out.println("@@ AUTHFAIL " + e.getCause().getMessage());
            }
            System.out.println("PROBE OK");
            return;
        }
        String topic = args[2];
        try (Admin admin = Admin.create(base)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        }
        Properties pp = new Properties();
        pp.putAll(base);
        pp.put("acks", "all");
        pp.put("enable.idempotence", "true");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            for (int i = 0; i < 100; i++) {
                producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i));
            }
            producer.flush();
        }
        Properties cp = new Properties();
        cp.putAll(base);
        cp.put("group.id", topic);
        cp.put("auto.offset.reset", "earliest");
        cp.put("enable.auto.commit", "false");
        // close() waits for the fetch left in flight after the last poll, which the broker holds
        // this long on a drained partition (500 ms by default).
        cp.put("fetch.max.wait.ms", "100");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.size() < 100 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    got.add(r.value());
                }
            }
            consumer.commitSync();
        }
        check(got.size() == 100 && got.get(0).equals("v0") && got.get(99).equals("v99"), "consumed " + got.size());
        try (Admin admin = Admin.create(base)) {
            Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(topic).partitionsToOffsetAndMetadata().get();
            check(offsets.get(new TopicPartition(topic, 0)).offset() == 100, "committed " + offsets);
        }
        System.out.println("PROBE OK");
    }
}
