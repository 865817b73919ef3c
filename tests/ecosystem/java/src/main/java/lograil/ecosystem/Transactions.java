package lograil.ecosystem;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client's transactions, one step after the other, against {@code --bootstrap}:
 * <ol>
 *   <li>a transactional producer ({@code <txn-prefix>-plain}) commits {@code committed-1-0..4},
 *       aborts {@code aborted-0..4} (flushed first, so they are in the log) and commits
 *       {@code committed-2-0..4} to {@code --output};</li>
 *   <li>consume-transform-produce: a read_committed consumer of group {@code --group} reads
 *       {@code --input-records} records of {@code --input} (20 a poll), a transactional producer
 *       ({@code <txn-prefix>-ctp}) writes {@code ctp-<value>} for each to {@code --output} and
 *       commits the consumer's offsets with {@code sendOffsetsToTransaction}; its second
 *       transaction is aborted (flushed first) and the consumer sought back, so those records
 *       are written again in the next one;</li>
 *   <li>a zombie: producer A ({@code <txn-prefix>-zombie}) sends {@code zombie-0} in an open
 *       transaction; producer B of the same transactional.id runs initTransactions (fencing A,
 *       aborting its transaction) and commits {@code fresh-0}; A's commitTransaction must throw
 *       ProducerFencedException;</li>
 *   <li>{@code --output} read from the beginning to its end offsets, read_committed and then
 *       read_uncommitted.</li>
 * </ol>
 * On stdout: {@code STEP <name>} before each step, {@code CTP-ABORTED <n>} (the records of the
 * aborted transaction), {@code CTP-DONE <transactions committed>}, {@code FENCED <exception>} or
 * {@code NOT-FENCED}, {@code EPOCH <the plain producer's epoch after its three transactions>},
 * {@code READ <isolation level> <count> <values, comma separated>} and
 * {@code DONE}; an unexpected exception is printed as {@code ERROR <exception>} (exit 1).
 */
public final class Transactions {
    private static final Duration STEP_TIMEOUT = Duration.ofSeconds(60);
    private static final int CTP_POLL_RECORDS = 20;

    private Transactions() {}

    public static void main(String[] args) {
        Map<String, String> opts = Args.parse(args,
                "bootstrap", "input", "input-records", "output", "group", "txn-prefix");
        String bootstrap = opts.get("bootstrap");
        String output = opts.get("output");
        String prefix = opts.get("txn-prefix");
        try {
            out("STEP commit-abort");
            commitAndAbort(bootstrap, prefix + "-plain", output);
            out("EPOCH " + producerEpoch(bootstrap, prefix + "-plain"));
            out("STEP consume-transform-produce");
            consumeTransformProduce(bootstrap, prefix + "-ctp", opts.get("input"),
                    Integer.parseInt(opts.get("input-records")), output, opts.get("group"));
            out("STEP zombie");
            zombie(bootstrap, prefix + "-zombie", output);
            out("STEP read");
            for (String level : List.of("read_committed", "read_uncommitted")) {
                List<String> values = readAll(bootstrap, output, level);
                out("READ " + level + " " + values.size() + " " + String.join(",", values));
            }
            out("DONE");
        } catch (Exception e) {
            e.printStackTrace();
            out("ERROR " + e);
            System.exit(1);
        }
    }

    private static void commitAndAbort(String bootstrap, String txnId, String topic) {
        try (KafkaProducer<String, String> p = producer(bootstrap, txnId)) {
            p.initTransactions();
            p.beginTransaction();
            for (int i = 0; i < 5; i++) {
                p.send(new ProducerRecord<>(topic, "k" + i, "committed-1-" + i));
            }
            p.commitTransaction();
            p.beginTransaction();
            for (int i = 0; i < 5; i++) {
                p.send(new ProducerRecord<>(topic, "k" + i, "aborted-" + i));
            }
            // In the log before the abort: read_uncommitted must see them, read_committed not.
            p.flush();
            p.abortTransaction();
            p.beginTransaction();
            for (int i = 0; i < 5; i++) {
                p.send(new ProducerRecord<>(topic, "k" + i, "committed-2-" + i));
            }
            p.commitTransaction();
        }
    }

    private static void consumeTransformProduce(String bootstrap, String txnId, String input,
            int inputRecords, String output, String group) {
        Properties c = consumerProps(bootstrap, "read_committed");
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(CTP_POLL_RECORDS));
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c);
                KafkaProducer<String, String> p = producer(bootstrap, txnId)) {
            p.initTransactions();
            consumer.subscribe(List.of(input));
            int processed = 0;
            int committed = 0;
            boolean aborted = false;
            long deadline = System.nanoTime() + STEP_TIMEOUT.toNanos();
            while (processed < inputRecords) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("consume-transform-produce: " + processed
                            + " of " + inputRecords + " records in " + STEP_TIMEOUT);
                }
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                Map<TopicPartition, Long> firsts = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    p.send(new ProducerRecord<>(output, r.key(), "ctp-" + r.value()));
                    firsts.putIfAbsent(tp, r.offset());
                    offsets.put(tp, new OffsetAndMetadata(r.offset() + 1));
                }
                if (committed == 1 && !aborted) {
                    p.flush();
                    p.abortTransaction();
                    aborted = true;
                    firsts.forEach(consumer::seek);
                    out("CTP-ABORTED " + records.count());
                    continue;
                }
                p.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                p.commitTransaction();
                committed++;
                processed += records.count();
            }
            out("CTP-DONE " + committed);
        }
    }

    private static void zombie(String bootstrap, String txnId, String topic) {
        KafkaProducer<String, String> zombie = producer(bootstrap, txnId);
        try {
            zombie.initTransactions();
            zombie.beginTransaction();
            zombie.send(new ProducerRecord<>(topic, "z", "zombie-0"));
            zombie.flush();
            try (KafkaProducer<String, String> fresh = producer(bootstrap, txnId)) {
                fresh.initTransactions();
                fresh.beginTransaction();
                fresh.send(new ProducerRecord<>(topic, "z", "fresh-0"));
                fresh.commitTransaction();
            }
            try {
                zombie.commitTransaction();
                out("NOT-FENCED");
            } catch (ProducerFencedException e) {
                out("FENCED " + e.getClass().getSimpleName());
            } catch (KafkaException e) {
                out("FENCED-OTHER " + e.getClass().getName() + ": " + e.getMessage());
            }
        } finally {
            zombie.close(Duration.ofSeconds(5));
        }
    }

    /**
     * The producer epoch of {@code txnId} as DescribeTransactions reports it: with transaction
     * version 2 (KIP-890 part 2) each transaction's end bumps it.
     */
    private static int producerEpoch(String bootstrap, String txnId) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            TransactionDescription d = admin.describeTransactions(List.of(txnId))
                    .description(txnId).get();
            return d.producerEpoch();
        }
    }

    /** The values of every partition of {@code topic}, partition by partition, in offset order. */
    private static List<String> readAll(String bootstrap, String topic, String level) {
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(bootstrap, level))) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : c.partitionsFor(topic)) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            partitions.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
            c.assign(partitions);
            c.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = c.endOffsets(partitions);
            Map<TopicPartition, List<String>> got = new HashMap<>();
            long deadline = System.nanoTime() + STEP_TIMEOUT.toNanos();
            while (partitions.stream().anyMatch(tp -> c.position(tp) < ends.get(tp))) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(level + ": " + topic + " not read to "
                            + ends + " in " + STEP_TIMEOUT);
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    got.computeIfAbsent(new TopicPartition(r.topic(), r.partition()),
                            tp -> new ArrayList<>()).add(r.value());
                }
            }
            List<String> values = new ArrayList<>();
            for (TopicPartition tp : partitions) {
                values.addAll(got.getOrDefault(tp, List.of()));
            }
            return values;
        }
    }

    private static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, Long.toString(STEP_TIMEOUT.toMillis()));
        return new KafkaProducer<>(p);
    }

    private static Properties consumerProps(String bootstrap, String level) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, level);
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        // Test-friendly group timing (Kafka's minimum session timeout).
        c.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
        c.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        return c;
    }

    static synchronized void out(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
