import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeProducersResult.PartitionProducerState;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Transactions with the official Java client (kafka-clients) against a broker; prints one JSON
 * object per line on stdout for the Python test (tests/integration/test_transactions_java.py).
 *
 * Usage: java TxnCheck BOOTSTRAP "cmd arg..." ["cmd arg..." ...]
 * Every command runs even if an earlier one failed (each failure prints an "error" line); the exit
 * code is 1 if any command failed. Producers live across commands under a handle name.
 *
 * Commands:
 *   create-topic TOPIC PARTITIONS
 *   init HANDLE TRANSACTIONAL_ID [TXN_TIMEOUT_MS]   new transactional producer + initTransactions()
 *   open HANDLE TOPIC TAG N [GROUP SRC_TOPIC OFFSET_BASE]
 *                     beginTransaction(); N records (key TAG-k<i>, value TAG-<i>, partition i % #partitions),
 *                     optionally sendOffsetsToTransaction({SRC_TOPIC-p: OFFSET_BASE + p}, GROUP); flush()
 *   end HANDLE commit|abort
 *   txn HANDLE TOPIC TAG N commit|abort [GROUP SRC_TOPIC OFFSET_BASE]   open + end
 *   close HANDLE
 *   consume TOPIC read_committed|read_uncommitted N TIMEOUT_MS   assign() + seekToBeginning(), no group
 *   end-offsets TOPIC read_committed|read_uncommitted           Consumer.endOffsets (LSO / high watermark)
 *   group-offsets GROUP                                          Admin.listConsumerGroupOffsets
 *   describe-txns TRANSACTIONAL_ID...                           Admin.describeTransactions
 *   list-txns                                                   Admin.listTransactions
 *   describe-producers TOPIC PARTITIONS                         Admin.describeProducers
 *   expect-error EXCEPTION CMD ARG...   runs CMD; succeeds only if it fails with EXCEPTION (simple
 *                                       class name of the unwrapped cause)
 */
public final class TxnCheck {
    private static final long OP_TIMEOUT_MS = 20_000;
    private static final Map<String, KafkaProducer<String, String>> PRODUCERS = new HashMap<>();
    private static String bootstrap;

    public static void main(String[] args) {
        if (args.length < 2) {
            System.err.println("usage: TxnCheck BOOTSTRAP \"cmd arg...\" ...");
            System.exit(2);
        }
        bootstrap = args[0];
        CheckSupport.startWatchdog("TxnCheck", Long.getLong("clientcheck.deadline.ms", 80_000));
        int failures = CheckSupport.runAll(args, 1, TxnCheck::run, TxnCheck::unwrap);
        for (KafkaProducer<String, String> p : PRODUCERS.values()) {
            try {
                p.close(Duration.ofSeconds(3));
            } catch (Exception e) {
                // a fenced producer may refuse a clean close; the exit below ends it anyway
            }
        }
        CheckSupport.OUT.flush();
        System.exit(failures == 0 ? 0 : 1);
    }

    private static void run(String[] c) throws Exception {
        switch (c[0]) {
            case "create-topic": createTopic(c[1], Integer.parseInt(c[2])); break;
            case "init": init(c[1], c[2], c.length > 3 ? Integer.parseInt(c[3]) : 60_000); break;
            case "open": open(c); break;
            case "end": end(c[1], c[2]); break;
            case "txn": {
                List<String> o = new ArrayList<>(Arrays.asList("open", c[1], c[2], c[3], c[4]));
                if (c.length > 6) o.addAll(Arrays.asList(c[6], c[7], c[8]));
                open(o.toArray(new String[0]));
                end(c[1], c[5]);
                break;
            }
            case "close": PRODUCERS.remove(c[1]).close(Duration.ofSeconds(5)); break;
            case "consume": consume(c[1], c[2], Integer.parseInt(c[3]), Long.parseLong(c[4])); break;
            case "end-offsets": endOffsets(c[1], c[2]); break;
            case "group-offsets": groupOffsets(c[1]); break;
            case "describe-txns": describeTxns(Arrays.asList(c).subList(1, c.length)); break;
            case "list-txns": listTxns(); break;
            case "describe-producers": describeProducers(c[1], Integer.parseInt(c[2])); break;
            case "expect-error": expectError(c[1], Arrays.copyOfRange(c, 2, c.length)); break;
            default: throw new IllegalArgumentException("unknown command " + c[0]);
        }
    }

    // ---- admin ---------------------------------------------------------------------------------

    private static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) OP_TIMEOUT_MS);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "txncheck-admin");
        return Admin.create(p);
    }

    private static void createTopic(String topic, int partitions) throws Exception {
        try (Admin a = admin()) {
            a.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all()
                    .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            CheckSupport.emit(CheckSupport.obj("event", "created", "topic", topic, "numPartitions", partitions));
        }
    }

    private static void groupOffsets(String group) throws Exception {
        try (Admin a = admin()) {
            Map<TopicPartition, OffsetAndMetadata> m = a.listConsumerGroupOffsets(group)
                    .partitionsToOffsetAndMetadata().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            Map<String, Object> offsets = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : m.entrySet()) {
                offsets.put(e.getKey().toString(), e.getValue() == null ? null : e.getValue().offset());
            }
            CheckSupport.emit(CheckSupport.obj("event", "group_offsets", "group", group, "offsets", offsets));
        }
    }

    private static void describeTxns(List<String> ids) throws Exception {
        try (Admin a = admin()) {
            Map<String, TransactionDescription> m = a.describeTransactions(ids).all()
                    .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            for (String id : ids) {
                TransactionDescription d = m.get(id);
                List<Object> tps = new ArrayList<>();
                for (TopicPartition tp : d.topicPartitions()) tps.add(tp.toString());
                tps.sort(null);
                CheckSupport.emit(CheckSupport.obj("event", "txn_description", "transactionalId", id,
                        "coordinatorId", d.coordinatorId(), "state", d.state().toString(),
                        "producerId", d.producerId(), "producerEpoch", d.producerEpoch(),
                        "transactionTimeoutMs", d.transactionTimeoutMs(),
                        "transactionStartTimeMs", d.transactionStartTimeMs().isPresent()
                                ? d.transactionStartTimeMs().getAsLong() : null,
                        "topicPartitions", tps));
            }
        }
    }

    private static void listTxns() throws Exception {
        try (Admin a = admin()) {
            Collection<TransactionListing> all = a.listTransactions().all()
                    .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            List<Object> out = new ArrayList<>();
            for (TransactionListing l : all) {
                out.add(CheckSupport.obj("transactionalId", l.transactionalId(), "producerId", l.producerId(),
                        "state", l.state().toString()));
            }
            CheckSupport.emit(CheckSupport.obj("event", "txn_listing", "transactions", out));
        }
    }

    private static void describeProducers(String topic, int partitions) throws Exception {
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(topic, p));
        try (Admin a = admin()) {
            Map<TopicPartition, PartitionProducerState> m = a.describeProducers(tps).all()
                    .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            for (TopicPartition tp : tps) {
                List<Object> ps = new ArrayList<>();
                for (ProducerState s : m.get(tp).activeProducers()) {
                    ps.add(CheckSupport.obj("producerId", s.producerId(), "producerEpoch", s.producerEpoch(),
                            "lastSequence", s.lastSequence(), "lastTimestamp", s.lastTimestamp(),
                            "coordinatorEpoch", s.coordinatorEpoch().isPresent()
                                    ? s.coordinatorEpoch().getAsInt() : null,
                            "currentTransactionStartOffset", s.currentTransactionStartOffset().isPresent()
                                    ? s.currentTransactionStartOffset().getAsLong() : null));
                }
                CheckSupport.emit(CheckSupport.obj("event", "producers", "partition", tp.partition(), "active", ps));
            }
        }
    }

    private static void expectError(String expected, String[] cmd) throws Exception {
        try {
            run(cmd);
        } catch (Exception e) {
            Throwable root = unwrap(e);
            if (root.getClass().getSimpleName().equals(expected)) {
                CheckSupport.emit(CheckSupport.obj("event", "expected_error", "cmd", String.join(" ", cmd), "error", expected,
                        "message", String.valueOf(root.getMessage())));
                return;
            }
            throw e;
        }
        throw new IllegalStateException("'" + String.join(" ", cmd) + "' succeeded; expected " + expected);
    }

    // ---- producer ------------------------------------------------------------------------------

    private static void init(String handle, String transactionalId, int txnTimeoutMs) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, txnTimeoutMs);
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 20_000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "txncheck-" + handle);
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        PRODUCERS.put(handle, producer);
        producer.initTransactions();
        CheckSupport.emit(CheckSupport.obj("event", "initialized", "handle", handle, "transactionalId", transactionalId));
    }

    private static KafkaProducer<String, String> producer(String handle) {
        KafkaProducer<String, String> p = PRODUCERS.get(handle);
        if (p == null) throw new IllegalArgumentException("no producer " + handle);
        return p;
    }

    /** "open H TOPIC TAG N [GROUP SRC BASE]". */
    private static void open(String[] c) throws Exception {
        KafkaProducer<String, String> p = producer(c[1]);
        String topic = c[2], tag = c[3];
        int n = Integer.parseInt(c[4]);
        int partitions = p.partitionsFor(topic).size();
        p.beginTransaction();
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        long now = System.currentTimeMillis();
        for (int i = 0; i < n; i++) {
            sent.add(p.send(new ProducerRecord<>(topic, i % partitions, now, tag + "-k" + i, tag + "-" + i)));
        }
        if (c.length > 5) sendOffsets(p, c[5], c[6], Long.parseLong(c[7]));
        p.flush();
        for (int i = 0; i < n; i++) {
            RecordMetadata md = sent.get(i).get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            CheckSupport.emit(CheckSupport.obj("event", "sent", "tag", tag, "i", i, "partition", md.partition(), "offset", md.offset()));
        }
        CheckSupport.emit(CheckSupport.obj("event", "opened", "handle", c[1], "topic", topic, "tag", tag, "count", n));
    }

    private static void sendOffsets(KafkaProducer<String, String> p, String group, String src, long base) {
        int partitions = p.partitionsFor(src).size();
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (int q = 0; q < partitions; q++) offsets.put(new TopicPartition(src, q), new OffsetAndMetadata(base + q));
        p.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(group));
        CheckSupport.emit(CheckSupport.obj("event", "offsets_sent", "group", group, "topic", src, "base", base));
    }

    private static void end(String handle, String how) {
        KafkaProducer<String, String> p = producer(handle);
        if (how.equals("commit")) p.commitTransaction();
        else if (how.equals("abort")) p.abortTransaction();
        else throw new IllegalArgumentException("end: commit or abort, not " + how);
        CheckSupport.emit(CheckSupport.obj("event", "ended", "handle", handle, "how", how));
    }

    // ---- consumer ------------------------------------------------------------------------------

    private static KafkaConsumer<String, String> consumer(String isolation) {
        if (!isolation.equals("read_committed") && !isolation.equals("read_uncommitted")) {
            throw new IllegalArgumentException("isolation " + isolation);
        }
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) OP_TIMEOUT_MS);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "txncheck-consumer-" + isolation);
        return new KafkaConsumer<>(p);
    }

    private static List<TopicPartition> partitionsOf(KafkaConsumer<?, ?> c, String topic) {
        List<PartitionInfo> infos = c.partitionsFor(topic, Duration.ofMillis(OP_TIMEOUT_MS));
        if (infos == null || infos.isEmpty()) throw new IllegalStateException("no partitions for " + topic);
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo pi : infos) tps.add(new TopicPartition(topic, pi.partition()));
        tps.sort((x, y) -> Integer.compare(x.partition(), y.partition()));
        return tps;
    }

    private static void consume(String topic, String isolation, int n, long timeoutMs) {
        int count = 0;
        try (KafkaConsumer<String, String> c = consumer(isolation)) {
            List<TopicPartition> tps = partitionsOf(c, topic);
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + timeoutMs;
            boolean extraPollDone = false;
            while (true) {
                long left = deadline - System.currentTimeMillis();
                if (count >= n) {
                    // One short extra poll: "exactly N" means nothing more shows up either.
                    if (extraPollDone) break;
                    extraPollDone = true;
                    left = 500;
                } else if (left <= 0) {
                    break;
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(Math.min(left, 1000)))) {
                    count++;
                    CheckSupport.emit(CheckSupport.obj("event", "record", "isolation", isolation, "partition", r.partition(),
                            "offset", r.offset(), "key", r.key(), "value", r.value()));
                }
            }
            Map<String, Object> positions = new TreeMap<>();
            for (TopicPartition tp : tps) positions.put(String.valueOf(tp.partition()), c.position(tp));
            CheckSupport.emit(CheckSupport.obj("event", "consumed", "isolation", isolation, "count", count, "positions", positions));
        }
    }

    private static void endOffsets(String topic, String isolation) {
        try (KafkaConsumer<String, String> c = consumer(isolation)) {
            Map<String, Object> end = new TreeMap<>();
            for (Map.Entry<TopicPartition, Long> e
                    : c.endOffsets(partitionsOf(c, topic), Duration.ofMillis(OP_TIMEOUT_MS)).entrySet()) {
                end.put(String.valueOf(e.getKey().partition()), e.getValue());
            }
            CheckSupport.emit(CheckSupport.obj("event", "end_offsets", "isolation", isolation, "end", end));
        }
    }

    // ---- helpers -------------------------------------------------------------------------------

    private static Throwable unwrap(Throwable t) {
        while ((t instanceof ExecutionException || t.getClass().getName().equals("org.apache.kafka.common.KafkaException"))
                && t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t;
    }

}
