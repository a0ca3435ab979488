// Debezium's Postgres connector in its embedded engine, with its source offsets in Kafka Connect's
// KafkaOffsetBackingStore on the broker (a compacted topic) and every change event produced to a
// broker topic by the engine's change consumer (a KafkaProducer, acks=all, idempotent).
//
//   java -cp CP DebeziumProbe BOOTSTRAP PG_PORT OFFSETS_TOPIC EVENTS_TOPIC PHASE EXPECT
//
// The table is public.items(id int primary key, name text, n int).
// PHASE first: the table holds rows 1..3; the engine snapshots them, then this program inserts
//   rows 4 and 5 and updates row 1 through JDBC while the engine streams.
// PHASE second: the test changed the table while no engine ran (insert 6, update 2); the engine
//   resumes from its stored offset and must deliver just those changes, no snapshot.
// The engine runs until EXPECT events went out, then a little longer (to catch extra ones), then
// closes (which commits its offsets). Each event is printed as "@@ event OP ID"; PROBE OK at the end.

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.format.Json;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class DebeziumProbe {
    static final ObjectMapper JSON = new ObjectMapper();
    static final AtomicInteger sent = new AtomicInteger();
    static volatile Throwable failure;

    static void fail(String what) {
        System.out.println("@@ FAIL " + what);
        System.out.flush();
        System.exit(1);
    }

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable t) {
            t.printStackTrace();
            fail(t.toString());
        }
        System.exit(0);
    }

    static void run(String[] args) throws Exception {
        String bootstrap = args[0], pgPort = args[1], offsetsTopic = args[2], eventsTopic = args[3];
        String phase = args[4];
        int expect = Integer.parseInt(args[5]);

        Properties producerProps = new Properties();
        producerProps.put("bootstrap.servers", bootstrap);
        producerProps.put("acks", "all");
        producerProps.put("enable.idempotence", "true");
        producerProps.put("key.serializer", StringSerializer.class.getName());
        producerProps.put("value.serializer", StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps);

        Properties p = new Properties();
        p.setProperty("name", "kcoord-dbz");
        p.setProperty("connector.class", "io.debezium.connector.postgresql.PostgresConnector");
        p.setProperty("offset.storage", "org.apache.kafka.connect.storage.KafkaOffsetBackingStore");
        p.setProperty("offset.storage.topic", offsetsTopic);
        p.setProperty("offset.storage.partitions", "1");
        p.setProperty("offset.storage.replication.factor", "1");
        p.setProperty("bootstrap.servers", bootstrap);
        p.setProperty("offset.flush.interval.ms", "200");
        p.setProperty("database.hostname", "127.0.0.1");
        p.setProperty("database.port", pgPort);
        p.setProperty("database.user", "postgres");
        p.setProperty("database.password", "postgres");
        p.setProperty("database.dbname", "postgres");
        p.setProperty("topic.prefix", "dbz");
        p.setProperty("plugin.name", "pgoutput");
        p.setProperty("slot.name", "kcoord_dbz");
        p.setProperty("publication.autocreate.mode", "filtered");
        p.setProperty("table.include.list", "public.items");
        p.setProperty("snapshot.mode", "initial");
        p.setProperty("key.converter.schemas.enable", "false");
        p.setProperty("value.converter.schemas.enable", "false");

        DebeziumEngine<ChangeEvent<String, String>> engine = DebeziumEngine.create(Json.class)
                .using(p)
                .notifying((List<ChangeEvent<String, String>> batch,
                            DebeziumEngine.RecordCommitter<ChangeEvent<String, String>> committer) -> {
                    for (ChangeEvent<String, String> e : batch) {
                        if (e.value() == null) {  // the tombstone after a delete: none expected here
                            committer.markProcessed(e);
                            continue;
                        }
                        String op;
                        JsonNode row;
                        try {
                            JsonNode v = JSON.readTree(e.value());
                            op = v.path("op").asText();
                            row = op.equals("d") ? v.path("before") : v.path("after");
                            producer.send(new ProducerRecord<>(eventsTopic, e.key(), e.value()))
                                    .get(30, TimeUnit.SECONDS);
                        } catch (Exception ex) {
                            failure = ex;
                            throw new InterruptedException("produce failed: " + ex);
                        }
                        System.out.println("@@ event " + op + " " + row.path("id").asInt() + " "
                                + row.path("name").asText());
                        System.out.flush();
                        sent.incrementAndGet();
                        committer.markProcessed(e);
                    }
                    committer.markBatchFinished();
                })
                .using((success, message, error) -> {
                    if (!success) {
                        failure = error != null ? error : new RuntimeException(message);
                        System.out.println("@@ engine stopped: " + message);
                    }
                })
                .build();
        ExecutorService pool = Executors.newSingleThreadExecutor();
        pool.execute(engine);

        if (phase.equals("first")) {
            waitFor(3, "the snapshot of rows 1..3");
            try (Connection c = DriverManager.getConnection(
                    "jdbc:postgresql://127.0.0.1:" + pgPort + "/postgres", "postgres", "postgres");
                 Statement s = c.createStatement()) {
                s.executeUpdate("INSERT INTO items VALUES (4, 'four', 0), (5, 'five', 0)");
                s.executeUpdate("UPDATE items SET name = 'one-updated', n = 1 WHERE id = 1");
            }
        }
        waitFor(expect, expect + " events");
        Thread.sleep(1500);  // events beyond the expected ones would arrive in this time
        engine.close();
        pool.shutdown();
        if (!pool.awaitTermination(30, TimeUnit.SECONDS)) fail("engine did not stop");
        producer.close();
        if (failure != null) fail("engine: " + failure);
        System.out.println("@@ sent " + sent.get());
        if (sent.get() != expect) fail("sent " + sent.get() + " events, expected " + expect);
        System.out.println("PROBE OK");
    }

    static void waitFor(int n, String what) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 60_000;
        while (sent.get() < n) {
            if (failure != null) fail("engine: " + failure);
            if (System.currentTimeMillis() > deadline) fail("timed out waiting for " + what + " (sent " + sent.get() + ")");
            Thread.sleep(50);
        }
    }
}
