package lograil.ecosystem;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams word count with {@code processing.guarantee=exactly_once_v2}: the lines of
 * {@code --input} split into words, grouped by word (a repartition topic), counted (store
 * {@code eos-word-counts}, changelogged), every update to {@code --words-out} as word → count
 * (a decimal string). Each commit (every 100 ms, the exactly-once default) is a transaction over
 * the output, the changelog, the repartition topic and the consumed offsets, so after a SIGKILL
 * a read_committed reader of the output sees every word's counts 1, 2, … up to the exact count,
 * each once (no record cache: every update is written). Each count update takes 10 ms and the
 * producer does not linger, so the output holds records of an open transaction most of the
 * time: a kill leaves one to abort. On stdout: {@code STATE <new state>} on each
 * change, {@code CLOSED} once closed on SIGTERM.
 */
public final class ExactlyOnceCounts {
    private ExactlyOnceCounts() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = Args.parse(args,
                "bootstrap", "app-id", "input", "words-out", "state-dir", "replication",
                "guarantee", "group-protocol");

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(opts.get("input"), Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                .count(Materialized.as("eos-word-counts"))
                .toStream()
                .peek((word, count) -> pause())
                .mapValues(count -> Long.toString(count))
                .to(opts.get("words-out"), Produced.with(Serdes.String(), Serdes.String()));

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, opts.get("app-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, opts.get("state-dir"));
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, opts.get("replication"));
        // exactly_once_v2 (the test), or at_least_once to see the test fail; the commit interval
        // is each guarantee's default (100 ms, 30 s).
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, opts.get("guarantee"));
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
        // No record cache: every count update goes to the output.
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        props.put(StreamsConfig.producerPrefix("linger.ms"), "0");
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        // classic, or streams (KIP-1071: the broker assigns the tasks).
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, opts.get("group-protocol"));
        if (opts.get("group-protocol").equals("classic")) {
            // Test-friendly group timing (Kafka's minimum session timeout). A streams group
            // takes its timing from the broker.
            props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "6000");
            props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), "500");
        }

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> Counts.out("STATE " + now));
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            Counts.out("ERROR " + e);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(30));
            Counts.out("CLOSED");
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }

    private static void pause() {
        try {
            Thread.sleep(10);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
