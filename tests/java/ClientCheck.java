import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReferenceArray;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Drives the official Java client (kafka-clients) against a broker and prints one JSON object per
 * line on stdout, so a Python test can assert exact outcomes.
 *
 * Usage: java ClientCheck BOOTSTRAP "cmd arg..." ["cmd arg..." ...]
 * Every command runs even if an earlier one failed (each failure prints an "error" line); the exit
 * code is 1 if any command failed. BOOTSTRAP may be "-" for the offline commands.
 *
 * Commands:
 *   api-ranges                          the client's own [oldest, latest] per API key (offline)
 *   codecs                              compress/decompress through Kafka's codecs (offline)
 *   partitions NUM KEY...               the producer's partition for each String key (offline)
 *   create-topic TOPIC PARTITIONS
 *   describe-topic TOPIC
 *   expect-error EXCEPTION CMD ARG...   runs CMD; succeeds only if it fails with EXCEPTION (simple
 *                                       class name of the unwrapped cause)
 *   list-topics
 *   delete-topic TOPIC
 *   produce TOPIC N COMPRESSION ACKS BASE_TS   records i=0..N-1, timestamp BASE_TS + i
 *   consume TOPIC N TIMEOUT_MS          assign() + seekToBeginning(), no group
 *   offsets TOPIC TS[,TS...]            beginningOffsets, endOffsets, offsetsForTimes per TS
 */
public final class ClientCheck {
    private static final long OP_TIMEOUT_MS = 20_000;
    private static String bootstrap;

    public static void main(String[] args) {
        if (args.length < 2) {
            System.err.println("usage: ClientCheck BOOTSTRAP \"cmd arg...\" ...");
            System.exit(2);
        }
        bootstrap = args[0];
        CheckSupport.startWatchdog("ClientCheck", Long.getLong("clientcheck.deadline.ms", 80_000));
        int failures = CheckSupport.runAll(args, 1, ClientCheck::run, ClientCheck::unwrap);
        CheckSupport.OUT.flush();
        // Client threads (e.g. a stuck sender) must not keep the JVM alive.
        System.exit(failures == 0 ? 0 : 1);
    }

    private static void run(String[] c) throws Exception {
        switch (c[0]) {
            case "api-ranges": apiRanges(); break;
            case "codecs": codecs(); break;
            case "partitions": partitions(Integer.parseInt(c[1]), Arrays.copyOfRange(c, 2, c.length)); break;
            case "create-topic": createTopic(c[1], Integer.parseInt(c[2])); break;
            case "describe-topic": describeTopic(c[1]); break;
            case "expect-error": expectError(c[1], Arrays.copyOfRange(c, 2, c.length)); break;
            case "list-topics": listTopics(); break;
            case "delete-topic": deleteTopic(c[1]); break;
            case "produce": produce(c[1], Integer.parseInt(c[2]), c[3], c[4], Long.parseLong(c[5])); break;
            case "consume": consume(c[1], Integer.parseInt(c[2]), Long.parseLong(c[3])); break;
            case "offsets": offsets(c[1], c[2]); break;
            default: throw new IllegalArgumentException("unknown command " + c[0]);
        }
    }

    // ---- offline -------------------------------------------------------------------------------

    /** The version window this client build can speak, per API (stable versions only). */
    private static void apiRanges() {
        for (ApiKeys k : ApiKeys.clientApis()) {
            CheckSupport.emit(CheckSupport.obj("event", "api_range", "api", k.name(), "key", (int) k.id,
                    "oldest", (int) k.oldestVersion(), "latest", (int) k.latestVersion(),
                    "latest_unstable", (int) k.latestVersion(true)));
        }
    }

    /** The first of these classes the client jar has: Kafka 4.4 moved internal helpers into
     * `internals` packages, and this program is compiled against 3.9 and 4.x alike. */
    private static Class<?> firstClass(String... names) throws ClassNotFoundException {
        for (String n : names) {
            try {
                return Class.forName(n);
            } catch (ClassNotFoundException e) {
                // try the next name
            }
        }
        throw new ClassNotFoundException(String.join(" / ", names));
    }

    /** Proves the codec jars (and their native parts) load here, independent of any broker. The
     * buffer classes Compression takes are reached by reflection (their package differs by version). */
    private static void codecs() throws Exception {
        Class<?> outClass = firstClass("org.apache.kafka.common.utils.internals.ByteBufferOutputStream",
                "org.apache.kafka.common.utils.ByteBufferOutputStream");
        Class<?> supplierClass = firstClass("org.apache.kafka.common.utils.internals.BufferSupplier",
                "org.apache.kafka.common.utils.BufferSupplier");
        Method wrapForOutput = Compression.class.getMethod("wrapForOutput", outClass, byte.class);
        Method wrapForInput = Compression.class.getMethod("wrapForInput", ByteBuffer.class, byte.class, supplierClass);
        byte[] payload = ("kafkalite codec check " + "x".repeat(2000)).getBytes(StandardCharsets.UTF_8);
        for (String name : List.of("none", "gzip", "snappy", "lz4", "zstd")) {
            Compression codec = Compression.of(name).build();
            Object bbos = outClass.getConstructor(int.class).newInstance(1024);
            try (OutputStream os = (OutputStream) wrapForOutput.invoke(codec, bbos, (byte) 2)) {
                os.write(payload);
            }
            ByteBuffer compressed = (ByteBuffer) outClass.getMethod("buffer").invoke(bbos);
            compressed.flip();
            int compressedSize = compressed.remaining();
            ByteArrayOutputStream back = new ByteArrayOutputStream();
            Object supplier = supplierClass.getMethod("create").invoke(null);
            try (InputStream is = (InputStream) wrapForInput.invoke(codec, compressed, (byte) 2, supplier)) {
                is.transferTo(back);
            }
            if (!Arrays.equals(payload, back.toByteArray())) {
                throw new IllegalStateException(name + ": round trip changed the bytes");
            }
            CheckSupport.emit(CheckSupport.obj("event", "codec", "codec", name, "ok", true, "raw", payload.length,
                    "compressed", compressedSize));
        }
        CheckSupport.emit(CheckSupport.obj("event", "codec_impls",
                "lz4", net.jpountz.lz4.LZ4Factory.fastestInstance().toString(),
                "zstd_native", com.github.luben.zstd.util.Native.isLoaded(),
                // snappy-java has no pure-Java fallback: this native call throws if the lib did not load.
                "snappy_native", org.xerial.snappy.Snappy.maxCompressedLength(100) > 100));
    }

    /** What KafkaProducer's built-in partitioner picks for a keyed record. */
    private static void partitions(int numPartitions, String[] keys) {
        for (String k : keys) {
            byte[] kb = new StringSerializer().serialize("unused", k);
            CheckSupport.emit(CheckSupport.obj("event", "partition_for_key", "key", k,
                    "partition", BuiltInPartitioner.partitionForKey(kb, numPartitions)));
        }
    }

    // ---- admin ---------------------------------------------------------------------------------

    private static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) OP_TIMEOUT_MS);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "clientcheck-admin");
        return Admin.create(p);
    }

    private static void createTopic(String topic, int partitions) throws Exception {
        try (Admin a = admin()) {
            CreateTopicsResult r = a.createTopics(List.of(new NewTopic(topic, partitions, (short) 1)));
            r.all().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            CheckSupport.emit(CheckSupport.obj("event", "created", "topic", topic,
                    "topicId", r.topicId(topic).get().toString(),
                    "numPartitions", r.numPartitions(topic).get(),
                    "replicationFactor", r.replicationFactor(topic).get()));
        }
    }

    private static void describeTopic(String topic) throws Exception {
        try (Admin a = admin()) {
            TopicDescription d = a.describeTopics(List.of(topic)).allTopicNames()
                    .get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS).get(topic);
            List<Object> parts = new ArrayList<>();
            for (TopicPartitionInfo pi : d.partitions()) {
                parts.add(CheckSupport.obj("partition", pi.partition(),
                        "leader", pi.leader() == null ? null : pi.leader().id(),
                        "replicas", nodeIds(pi.replicas()), "isr", nodeIds(pi.isr())));
            }
            CheckSupport.emit(CheckSupport.obj("event", "described", "topic", d.name(), "topicId", d.topicId().toString(),
                    "internal", d.isInternal(), "partitions", parts));
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

    private static void listTopics() throws Exception {
        try (Admin a = admin()) {
            Set<String> names = new TreeSet<>(a.listTopics().names().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS));
            CheckSupport.emit(CheckSupport.obj("event", "topics", "topics", new ArrayList<>(names)));
        }
    }

    private static void deleteTopic(String topic) throws Exception {
        try (Admin a = admin()) {
            a.deleteTopics(List.of(topic)).all().get(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            CheckSupport.emit(CheckSupport.obj("event", "deleted", "topic", topic));
        }
    }

    // ---- producer ------------------------------------------------------------------------------

    /** Record i's value: mostly non-ASCII text; every tenth record (i % 10 == 7) a null value. */
    static String valueFor(int i) {
        return i % 10 == 7 ? null : "v-" + i + "-\u00e9\u6f22\u5b57";
    }

    static List<Header> headersFor(int i) {
        return List.of(
                new RecordHeader("idx", String.valueOf(i).getBytes(StandardCharsets.UTF_8)),
                new RecordHeader("bin", new byte[] {0, 1, 2, (byte) 0xff}),
                new RecordHeader("dup", "a".getBytes(StandardCharsets.UTF_8)),
                new RecordHeader("dup", "b".getBytes(StandardCharsets.UTF_8)),
                new RecordHeader("nil", null));
    }

    private static void produce(String topic, int n, String compression, String acks, long baseTs) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        p.put(ProducerConfig.ACKS_CONFIG, acks);
        // Idempotence is left at its default: on for acks=all, silently off for acks=0/1.
        p.put(ProducerConfig.LINGER_MS_CONFIG, 20); // batch several records per partition
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 15_000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30_000);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "clientcheck-producer-" + compression + "-acks" + acks);
        AtomicReferenceArray<Object> results = new AtomicReferenceArray<>(n);
        CountDownLatch done = new CountDownLatch(n);
        // close() with a bound: an unreachable broker must not stall the exit.
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        try {
            // Fail fast if metadata is unavailable, rather than blocking max.block.ms per send().
            producer.partitionsFor(topic);
            for (int i = 0; i < n; i++) {
                final int idx = i;
                ProducerRecord<String, String> rec = new ProducerRecord<>(topic, null, baseTs + i,
                        "k-" + i, valueFor(i), headersFor(i));
                producer.send(rec, (md, ex) -> {
                    results.set(idx, ex != null ? ex : md);
                    done.countDown();
                });
            }
            producer.flush();
            if (!done.await(OP_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                throw new IllegalStateException("send callbacks incomplete: " + done.getCount() + " missing");
            }
        } finally {
            producer.close(Duration.ofSeconds(5));
        }
        Exception firstError = null;
        for (int i = 0; i < n; i++) {
            Object r = results.get(i);
            if (r instanceof Exception) {
                Throwable root = unwrap((Exception) r);
                CheckSupport.emit(CheckSupport.obj("event", "send_error", "topic", topic, "i", i, "error", root.getClass().getName(),
                        "message", String.valueOf(root.getMessage())));
                if (firstError == null) firstError = (Exception) r;
            } else {
                RecordMetadata md = (RecordMetadata) r;
                CheckSupport.emit(CheckSupport.obj("event", "sent", "topic", md.topic(), "i", i, "key", "k-" + i,
                        "partition", md.partition(), "offset", md.offset(), "timestamp", md.timestamp()));
            }
        }
        if (firstError != null) throw firstError;
        CheckSupport.emit(CheckSupport.obj("event", "produced", "topic", topic, "count", n, "compression", compression, "acks", acks));
    }

    // ---- consumer ------------------------------------------------------------------------------

    private static KafkaConsumer<String, String> consumer(String clientId) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        // No group.id: consumer groups are not used; positions come from seekToBeginning().
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10_000);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) OP_TIMEOUT_MS);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
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

    private static void consume(String topic, int n, long timeoutMs) throws Exception {
        int count = 0;
        try (KafkaConsumer<String, String> c = consumer("clientcheck-consumer")) {
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
                    left = 300;
                } else if (left <= 0) {
                    break;
                }
                ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(Math.min(left, 1000)));
                for (ConsumerRecord<String, String> r : recs) {
                    count++;
                    List<Object> hs = new ArrayList<>();
                    for (Header h : r.headers()) hs.add(Arrays.asList(h.key(), CheckSupport.hex(h.value())));
                    CheckSupport.emit(CheckSupport.obj("event", "record", "topic", r.topic(), "partition", r.partition(),
                            "offset", r.offset(), "key", r.key(), "value", r.value(),
                            "timestamp", r.timestamp(), "timestampType", r.timestampType().name(),
                            "leaderEpoch", r.leaderEpoch().orElse(null), "headers", hs));
                }
            }
        }
        CheckSupport.emit(CheckSupport.obj("event", "consumed", "topic", topic, "count", count, "expected", n));
        if (count != n) throw new IllegalStateException("consumed " + count + " records, expected " + n);
    }

    private static void offsets(String topic, String tsList) throws Exception {
        try (KafkaConsumer<String, String> c = consumer("clientcheck-offsets")) {
            List<TopicPartition> tps = partitionsOf(c, topic);
            Duration t = Duration.ofMillis(OP_TIMEOUT_MS);
            Map<String, Object> begin = new TreeMap<>();
            for (Map.Entry<TopicPartition, Long> e : c.beginningOffsets(tps, t).entrySet())
                begin.put(String.valueOf(e.getKey().partition()), e.getValue());
            Map<String, Object> end = new TreeMap<>();
            for (Map.Entry<TopicPartition, Long> e : c.endOffsets(tps, t).entrySet())
                end.put(String.valueOf(e.getKey().partition()), e.getValue());
            CheckSupport.emit(CheckSupport.obj("event", "offsets", "topic", topic, "beginning", begin, "end", end));
            for (String s : tsList.split(",")) {
                long ts = Long.parseLong(s);
                Map<TopicPartition, Long> query = new HashMap<>();
                for (TopicPartition tp : tps) query.put(tp, ts);
                Map<String, Object> res = new TreeMap<>();
                for (Map.Entry<TopicPartition, OffsetAndTimestamp> e : c.offsetsForTimes(query, t).entrySet()) {
                    OffsetAndTimestamp ot = e.getValue();
                    res.put(String.valueOf(e.getKey().partition()),
                            ot == null ? null : Arrays.asList(ot.offset(), ot.timestamp()));
                }
                CheckSupport.emit(CheckSupport.obj("event", "offsets_for_times", "topic", topic, "ts", ts, "result", res));
            }
        }
    }

    // ---- helpers -------------------------------------------------------------------------------

    private static List<Integer> nodeIds(Collection<Node> nodes) {
        List<Integer> ids = new ArrayList<>();
        for (Node n : nodes) ids.add(n.id());
        return ids;
    }

    private static Throwable unwrap(Throwable t) {
        while ((t instanceof ExecutionException || t.getClass().getName().endsWith("KafkaException"))
                && t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t;
    }

}
