package lograil.ecosystem;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A member of a consumer group of {@code --group-protocol} {@code consumer} (KIP-848, the
 * broker's assignor) or {@code classic} (the client's default assignors): reads {@code --topic}
 * in {@code --group}, committing synchronously after every tenth record of a partition. Prints
 * {@code A p,p,...} (its whole assignment after each rebalance callback), {@code M partition
 * offset} per record, {@code C partition next} per commit and {@code CLOSED} once a SIGTERM has
 * closed it (leaving the group).
 */
public final class Kip848Consumer {
    private Kip848Consumer() {}

    public static void main(String[] argv) {
        Map<String, String> args = Args.parse(argv, "bootstrap", "topic", "group", "group-protocol");
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args.get("group"));
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, args.get("group-protocol"));
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    show(consumer, partitions, false);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    show(consumer, partitions, true);
                }
            };
            consumer.subscribe(List.of(args.get("topic")), listener);
            Thread main = Thread.currentThread();
            AtomicBoolean stopping = new AtomicBoolean();
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                stopping.set(true);
                consumer.wakeup();
                try {
                    main.join(30_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }));
            Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();
            while (!stopping.get()) {
                ConsumerRecords<String, String> records;
                try {
                    records = consumer.poll(Duration.ofMillis(100));
                } catch (WakeupException e) {
                    break;
                }
                for (ConsumerRecord<String, String> r : records) {
                    System.out.println("M " + r.partition() + " " + r.offset());
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    pending.put(tp, new OffsetAndMetadata(r.offset() + 1));
                    if (r.offset() % 10 == 9) {
                        try {
                            consumer.commitSync(pending);
                            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : pending.entrySet()) {
                                System.out.println("C " + e.getKey().partition() + " " + e.getValue().offset());
                            }
                        } catch (RuntimeException e) {
                            System.err.println("commit failed: " + e);
                        }
                        pending.clear();
                    }
                    try {
                        Thread.sleep(2);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
                System.out.flush();
            }
        }
        System.out.println("CLOSED");
        System.out.flush();
    }

    /** The whole assignment once this callback's partitions are added or taken away. */
    private static void show(KafkaConsumer<String, String> consumer, Collection<TopicPartition> changed, boolean added) {
        TreeSet<Integer> now = new TreeSet<>();
        for (TopicPartition tp : consumer.assignment()) {
            now.add(tp.partition());
        }
        for (TopicPartition tp : changed) {
            if (added) {
                now.add(tp.partition());
            } else {
                now.remove(tp.partition());
            }
        }
        List<String> parts = new ArrayList<>();
        for (Integer p : now) {
            parts.add(p.toString());
        }
        System.out.println("A " + String.join(",", parts));
        System.out.flush();
    }
}
