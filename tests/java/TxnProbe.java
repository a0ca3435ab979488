// The official Java client's transactions against the broker (kafka-clients 4.3 or 3.9):
//
//   java -cp "$(tests/java/client-jars.sh)" tests/java/TxnProbe.java flow HOST:PORT TOPIC TXID
//   java -cp "$(tests/java/client-jars.sh)" tests/java/TxnProbe.java ctp HOST:PORT IN OUT GROUP TXID [k=v ...]
//
// flow: one JVM run of every check of a transactional producer (exits non-zero at the first failed
// check, prints "PROBE OK" at the end):
//   - commit, abort, commit, a transaction begun right after a commit (the client's
//     AddPartitionsToTxn may meet CONCURRENT_TRANSACTIONS while the markers are written, and
//     retries), one left open while Admin looks at it: describeTransactions (Ongoing, producer id
//     and epoch, partitions, timeout, start time), listTransactions (with state and producer id
//     filters), describeProducers (the open transaction's first offset), then committed;
//   - a read_committed consumer sees exactly the committed records, a read_uncommitted one all;
//   - a second producer with the same transactional.id fences the first: the first's commit fails
//     with ProducerFencedException (or InvalidProducerEpochException, Kafka's answer to a stale
//     epoch on Produce), the second commits;
//   - a transaction open past transaction.timeout.ms is aborted by the broker: describeTransactions
//     shows CompleteAbort with a bumped epoch, read_committed sees none of it, the producer's
//     commit fails. (The broker must run with a short
//     --transaction-abort-timed-out-transaction-cleanup-interval-ms.)
//
// ctp: consume-transform-produce (exactly-once): a read_committed consumer in group GROUP
// (classic by default; group.protocol=consumer among the k=v consumer configs) subscribes to IN;
// per poll with records: beginTransaction, send "out-<value>" (key: the input value) to OUT for
// every record, flush, sendOffsetsToTransaction(positions, consumer.groupMetadata()), print
// "@@ OPEN <n>" and sleep openMs=N (so a test can kill -9 the JVM inside an open transaction
// holding both records and offsets), commitTransaction, print "@@ COMMITTED <n> <records>". Exits with "@@ CAUGHTUP <total>" once
// the consumer's positions reach the read_committed end of IN on every assigned partition and
// no record came for idleMs=N (default 3000). Arguments without a dot are probe options.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeProducersResult;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnProbe {
    static int checks = 0;

    static void check(boolean ok, String what) {
        if (!ok) {
            System.out.println("FAILED: " + what);
            System.out.flush();
            System.exit(1);
        }
        checks++;
    }

    static void say(String line) {
        System.out.println("@@ " + line);
        System.out.flush();
    }

    static KafkaProducer<String, String> producer(String boot, String txid, int timeoutMs) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, boot);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txid);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, timeoutMs);
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30000);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<String, String> consumer(String boot, String isolation, Map<String, String> extra) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, boot);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    /** Every value of the partitions at the isolation level, read from the start to its end. */
    static List<String> readAll(String boot, String isolation, List<TopicPartition> tps) {
        List<String> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = consumer(boot, isolation, Map.of())) {
            c.assign(tps);
            c.seekToBeginning(tps);
            // endOffsets at the consumer's isolation level: the LSO at read_committed.
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            long deadline = System.currentTimeMillis() + 30000;
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                check(System.currentTimeMillis() < deadline, "reading " + tps + " " + isolation + " reached " + end);
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    out.add(r.value());
                }
            }
        }
        return out;
    }

    static Throwable root(Throwable t) {
        while (t instanceof ExecutionException && t.getCause() != null) t = t.getCause();
        return t;
    }

    static boolean fencedLike(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof ProducerFencedException || c instanceof InvalidProducerEpochException) return true;
        }
        return false;
    }

    static TransactionDescription describe(Admin admin, String txid) throws Exception {
        return admin.describeTransactions(List.of(txid)).description(txid).get();
    }

    static TransactionDescription awaitState(Admin admin, String txid, TransactionState state) throws Exception {
        long deadline = System.currentTimeMillis() + 30000;
        TransactionDescription d = describe(admin, txid);
        while (d.state() != state) {
            check(System.currentTimeMillis() < deadline, txid + " never reached " + state + ", last " + d);
            Thread.sleep(100);
            d = describe(admin, txid);
        }
        return d;
    }

    static List<String> sendAll(KafkaProducer<String, String> p, String topic, String prefix, int n) throws Exception {
        List<String> values = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String v = prefix + i;
            p.send(new ProducerRecord<>(topic, i % 2, v, v)).get();
            values.add(v);
        }
        return values;
    }

    // --- flow ---------------------------------------------------------------------------------------
    static void flow(String boot, String topic, String txid) throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, boot);
        List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
            List<String> committed = new ArrayList<>();
            List<String> all = new ArrayList<>();
            long pid;
            short epoch;
            try (KafkaProducer<String, String> p = producer(boot, txid, 60000)) {
                p.initTransactions();
                p.beginTransaction();
                committed.addAll(sendAll(p, topic, "c", 4));
                p.commitTransaction();
                p.beginTransaction();
                all.addAll(sendAll(p, topic, "a", 4));
                p.abortTransaction();
                // Back-to-back transactions: each begins while the last one's markers may still be
                // in flight (CONCURRENT_TRANSACTIONS on AddPartitionsToTxn; the client retries).
                for (int t = 0; t < 5; t++) {
                    p.beginTransaction();
                    committed.addAll(sendAll(p, topic, "b" + t + "-", 2));
                    p.commitTransaction();
                }
                say("COMMITTED AND ABORTED");

                long before = System.currentTimeMillis();
                p.beginTransaction();
                p.send(new ProducerRecord<>(topic, 1, "o0", "o0")).get();
                TransactionDescription d = describe(admin, txid);
                check(d.state() == TransactionState.ONGOING, "describe: Ongoing, got " + d.state());
                check(d.producerId() >= 0 && d.producerEpoch() >= 0, "describe: producer id/epoch " + d);
                check(d.transactionTimeoutMs() == 60000, "describe: timeout 60000, got " + d.transactionTimeoutMs());
                check(d.transactionStartTimeMs().isPresent(), "describe: a start time");
                long start = d.transactionStartTimeMs().getAsLong();
                check(start >= before - 1000 && start <= System.currentTimeMillis(), "describe: start time " + start);
                check(d.topicPartitions().equals(Set.of(new TopicPartition(topic, 1))),
                        "describe: the partitions of the open transaction, got " + d.topicPartitions());
                pid = d.producerId();
                epoch = (short) d.producerEpoch();
                say("DESCRIBED " + d.state() + " " + pid + " " + epoch + " " + d.topicPartitions());

                Collection<TransactionListing> listed = admin.listTransactions().all().get();
                check(listed.stream().anyMatch(l -> l.transactionalId().equals(txid) && l.producerId() == pid
                        && l.state() == TransactionState.ONGOING), "listTransactions: " + listed);
                Collection<TransactionListing> ongoing = admin.listTransactions(
                        new ListTransactionsOptions().filterStates(List.of(TransactionState.ONGOING))
                                .filterProducerIds(List.of(pid))).all().get();
                check(ongoing.size() == 1 && ongoing.iterator().next().transactionalId().equals(txid),
                        "listTransactions filtered by Ongoing and the producer id: " + ongoing);
                Collection<TransactionListing> none = admin.listTransactions(
                        new ListTransactionsOptions().filterStates(List.of(TransactionState.PREPARE_ABORT)))
                        .all().get();
                check(none.stream().noneMatch(l -> l.transactionalId().equals(txid)), "PrepareAbort filter: " + none);

                TopicPartition open = new TopicPartition(topic, 1);
                DescribeProducersResult dp = admin.describeProducers(List.of(open));
                List<ProducerState> states = dp.partitionResult(open).get().activeProducers();
                ProducerState ps = states.stream().filter(s -> s.producerId() == pid).findFirst().orElse(null);
                check(ps != null, "describeProducers: the producer on " + open + ": " + states);
                check(ps.producerEpoch() == epoch, "describeProducers: epoch " + ps);
                long end = admin.listOffsets(Map.of(open, org.apache.kafka.clients.admin.OffsetSpec.latest()))
                        .partitionResult(open).get().offset();
                check(ps.currentTransactionStartOffset().isPresent()
                        && ps.currentTransactionStartOffset().getAsLong() == end - 1,
                        "describeProducers: the open transaction's first offset is the last record (" + (end - 1)
                                + "): " + ps);
                check(ps.lastTimestamp() > 0 && ps.lastSequence() >= 0, "describeProducers: sequence/timestamp " + ps);
                say("PRODUCERS " + ps);

                // read_committed stops below the open transaction.
                List<String> rc = readAll(boot, "read_committed", tps);
                check(new TreeSet<>(rc).equals(new TreeSet<>(committed)) && rc.size() == committed.size(),
                        "read_committed with a transaction open: " + rc + " expected " + committed);

                p.commitTransaction();
                committed.add("o0");
                TransactionDescription done = awaitState(admin, txid, TransactionState.COMPLETE_COMMIT);
                check(done.topicPartitions().isEmpty() && done.producerId() == pid && done.producerEpoch() == epoch,
                        "CompleteCommit keeps the producer, no partitions: " + done);
                check(!done.transactionStartTimeMs().isPresent()
                        || done.transactionStartTimeMs().getAsLong() == start,
                        "CompleteCommit start time: " + done);
                DescribeProducersResult dp2 = admin.describeProducers(List.of(open));
                ProducerState ps2 = dp2.partitionResult(open).get().activeProducers().stream()
                        .filter(s -> s.producerId() == pid).findFirst().orElseThrow();
                check(!ps2.currentTransactionStartOffset().isPresent(), "no open transaction after commit: " + ps2);
            }
            all.addAll(committed);
            List<String> rc = readAll(boot, "read_committed", tps);
            check(new TreeSet<>(rc).equals(new TreeSet<>(committed)) && rc.size() == committed.size(),
                    "read_committed: " + rc + " expected " + committed);
            List<String> ru = readAll(boot, "read_uncommitted", tps);
            check(new TreeSet<>(ru).equals(new TreeSet<>(all)) && ru.size() == all.size(),
                    "read_uncommitted: " + ru + " expected " + all);
            say("READ " + rc.size() + " " + ru.size());

            // A second producer with the same transactional.id fences the first.
            String ftxid = txid + "-fence";
            List<String> fenced = new ArrayList<>();
            try (KafkaProducer<String, String> p1 = producer(boot, ftxid, 60000)) {
                p1.initTransactions();
                p1.beginTransaction();
                fenced.addAll(sendAll(p1, topic, "f", 2));
                try (KafkaProducer<String, String> p2 = producer(boot, ftxid, 60000)) {
                    // Fencing an ongoing transaction aborts it first (the client retries through
                    // CONCURRENT_TRANSACTIONS).
                    p2.initTransactions();
                    TransactionDescription d = describe(admin, ftxid);
                    check(d.producerEpoch() > 0, "the second producer's epoch is bumped: " + d);
                    Throwable failure = null;
                    try {
                        p1.send(new ProducerRecord<>(topic, 0, "f-late", "f-late")).get();
                        p1.commitTransaction();
                    } catch (Exception e) {
                        failure = root(e);
                    }
                    check(failure != null && fencedLike(failure), "the first producer is fenced: " + failure);
                    say("FENCED " + failure.getClass().getSimpleName());
                    p2.beginTransaction();
                    committed.addAll(sendAll(p2, topic, "g", 2));
                    p2.commitTransaction();
                    // Its markers follow EndTxn's answer: read once they are written.
                    awaitState(admin, ftxid, TransactionState.COMPLETE_COMMIT);
                }
            } catch (Exception e) {
                // close() of a fenced producer may throw again; nothing more to check then.
                check(fencedLike(e), "unexpected failure around fencing: " + e);
            }
            rc = readAll(boot, "read_committed", tps);
            check(new TreeSet<>(rc).equals(new TreeSet<>(committed)) && rc.size() == committed.size(),
                    "read_committed after fencing: " + rc + " expected " + committed);
            say("FENCING OK");

            // A transaction open past its timeout is aborted by the broker.
            String ttxid = txid + "-timeout";
            try (KafkaProducer<String, String> p = producer(boot, ttxid, 1000)) {
                p.initTransactions();
                short firstEpoch = (short) describe(admin, ttxid).producerEpoch();
                p.beginTransaction();
                sendAll(p, topic, "t", 2);
                TransactionDescription aborted = awaitState(admin, ttxid, TransactionState.COMPLETE_ABORT);
                check(aborted.producerEpoch() == firstEpoch + 1, "the broker's abort bumps the epoch: " + aborted);
                check(aborted.topicPartitions().isEmpty(), "CompleteAbort has no partitions: " + aborted);
                say("TIMED OUT " + aborted.state() + " epoch " + aborted.producerEpoch());
                Throwable failure = null;
                try {
                    p.commitTransaction();
                } catch (Exception e) {
                    failure = root(e);
                }
                check(failure != null, "commit after the broker aborted on timeout must fail");
                say("TIMEOUT COMMIT FAILED " + failure.getClass().getSimpleName());
            } catch (Exception e) {
                check(fencedLike(e), "unexpected failure around the timeout: " + e);
            }
            rc = readAll(boot, "read_committed", tps);
            check(new TreeSet<>(rc).equals(new TreeSet<>(committed)) && rc.size() == committed.size(),
                    "read_committed after the timed-out transaction: " + rc + " expected " + committed);
        }
        System.out.println("checks passed: " + checks);
        System.out.println("PROBE OK");
    }

    // --- consume-transform-produce ---------------------------------------------------------------
    static void ctp(String boot, String in, String out, String group, String txid, String[] rest) throws Exception {
        Map<String, String> configs = new HashMap<>();
        Map<String, String> opts = new HashMap<>();
        for (String a : rest) {
            String[] kv = a.split("=", 2);
            (kv[0].contains(".") ? configs : opts).put(kv[0], kv[1]);
        }
        long openMs = Long.parseLong(opts.getOrDefault("openMs", "0"));
        long idleMs = Long.parseLong(opts.getOrDefault("idleMs", "3000"));
        configs.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        configs.putIfAbsent(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "25");
        try (KafkaConsumer<String, String> c = consumer(boot, "read_committed", configs);
             KafkaProducer<String, String> p = producer(boot, txid, 30000)) {
            p.initTransactions();
            say("INIT");
            c.subscribe(List.of(in));
            int n = 0;
            long total = 0;
            long lastRecord = System.currentTimeMillis();
            while (true) {
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) {
                    Set<TopicPartition> assigned = c.assignment();
                    if (!assigned.isEmpty() && System.currentTimeMillis() - lastRecord > idleMs) {
                        Map<TopicPartition, Long> end = c.endOffsets(assigned);
                        if (assigned.stream().allMatch(tp -> c.position(tp) >= end.get(tp))) {
                            say("CAUGHTUP " + total);
                            break;
                        }
                    }
                    continue;
                }
                lastRecord = System.currentTimeMillis();
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : recs) {
                    p.send(new ProducerRecord<>(out, r.value(), "out-" + r.value()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                n++;
                p.flush();  // the records are in the log before the test may kill the JVM
                p.sendOffsetsToTransaction(offsets, c.groupMetadata());  // and the offsets pending
                say("OPEN " + n);
                if (openMs > 0) Thread.sleep(openMs);
                p.commitTransaction();
                total += recs.count();
                say("COMMITTED " + n + " " + recs.count());
            }
        }
        System.out.println("PROBE OK");
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "flow" -> flow(args[1], args[2], args[3]);
            case "ctp" -> ctp(args[1], args[2], args[3], args[4], args[5],
                    java.util.Arrays.copyOfRange(args, 6, args.length));
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
        System.exit(0);
    }
}
