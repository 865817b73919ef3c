package lograil.ecosystem;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.StateRestoreListener;

/**
 * A Kafka Streams application (at-least-once): the lines of {@code --input} split into words,
 * grouped by word (a repartition topic), then
 * <ul>
 *   <li>counted: store {@code word-counts} (RocksDB, changelogged), every update to
 *       {@code --words-out} as word → count;</li>
 *   <li>counted per tumbling window of {@code --window-ms} on the records' timestamps: store
 *       {@code window-counts}, every update to {@code --windows-out} as
 *       {@code word@windowStartMs} → count.</li>
 * </ul>
 * Counts are written as decimal strings. The internal topics roll a segment every 500 ms and
 * have {@code min.cleanable.dirty.ratio=0.01}, so the broker's cleaner compacts the changelogs
 * while the test runs. On stdout: {@code STATE <new state>} on each change,
 * {@code RESTORED <store> <partition> <records>} for each store partition restored from its
 * changelog. SIGTERM closes the application cleanly (offsets committed). {@code --group-protocol}
 * is {@code classic} (the consumer's rebalance protocol, with test-friendly timings) or
 * {@code streams} (KIP-1071: the broker assigns the tasks and creates the internal topics).
 */
public final class Counts {
    private Counts() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = Args.parse(args,
                "bootstrap", "app-id", "input", "words-out", "windows-out", "state-dir",
                "replication", "window-ms", "group-protocol");
        long windowMs = Long.parseLong(opts.get("window-ms"));

        StreamsBuilder builder = new StreamsBuilder();
        KGroupedStream<String, String> words = builder
                .stream(opts.get("input"), Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()));
        words.count(Materialized.as("word-counts"))
                .toStream()
                .mapValues(count -> Long.toString(count))
                .to(opts.get("words-out"), Produced.with(Serdes.String(), Serdes.String()));
        // A long grace period: the input's partitions reach the repartition topic interleaved,
        // so a window sees its records out of order; none may be dropped as late.
        words.windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(windowMs), Duration.ofHours(1)))
                .count(Materialized.as("window-counts"))
                .toStream()
                .map((window, count) -> KeyValue.pair(
                        window.key() + "@" + window.window().start(), Long.toString(count)))
                .to(opts.get("windows-out"), Produced.with(Serdes.String(), Serdes.String()));

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, opts.get("app-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, opts.get("state-dir"));
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, opts.get("replication"));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        // Internal topics that roll a segment every half second and are compacted as soon as
        // there is anything to clean: the second run restores from compacted changelogs.
        props.put(StreamsConfig.topicPrefix("segment.ms"), "500");
        props.put(StreamsConfig.topicPrefix("min.cleanable.dirty.ratio"), "0.01");
        // Purge committed records from the repartition topic (DeleteRecords) every second.
        props.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, "1000");
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, opts.get("group-protocol"));
        if (opts.get("group-protocol").equals("classic")) {
            // Test-friendly group timing (Kafka's minimum session timeout). A streams group
            // takes its timing from the broker.
            props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "6000");
            props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), "500");
        }

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> out("STATE " + now));
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {}

            @Override
            public void onBatchRestored(TopicPartition tp, String store, long end, long records) {}

            @Override
            public void onRestoreEnd(TopicPartition tp, String store, long total) {
                out("RESTORED " + store + " " + tp.partition() + " " + total);
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            out("ERROR " + e);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            out("CLOSED");
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }

    static synchronized void out(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
