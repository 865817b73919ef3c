package lograil.ecosystem;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/**
 * A source connector of numbered records: {@code record-0} … {@code record-<count - 1>} (key: the
 * number), record n to partition {@code n % partitions} of {@code topic}, {@code batch} records
 * every {@code interval.ms}. Its source offset is the next number, so a restarted worker
 * continues from the last offset the worker committed (records after it are sent again: at
 * least once). One task. Prints {@code SOURCE-START next=N} when its task starts.
 */
public final class NumberSource extends SourceConnector {
    static final Map<String, String> SOURCE_PARTITION = Map.of("source", "numbers");

    private Map<String, String> config;

    @Override
    public void start(Map<String, String> props) {
        config = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return NumberTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return List.of(config);
    }

    @Override
    public void stop() {}

    @Override
    public ConfigDef config() {
        return new ConfigDef()
                .define("topic", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "target topic")
                .define("count", ConfigDef.Type.LONG, ConfigDef.Importance.HIGH, "records in all")
                .define("partitions", ConfigDef.Type.INT, 1, ConfigDef.Importance.LOW,
                        "record n goes to partition n % partitions")
                .define("batch", ConfigDef.Type.INT, 100, ConfigDef.Importance.LOW,
                        "records per poll")
                .define("interval.ms", ConfigDef.Type.LONG, 100L, ConfigDef.Importance.LOW,
                        "pause before each poll");
    }

    @Override
    public String version() {
        return "1";
    }

    public static final class NumberTask extends SourceTask {
        private String topic;
        private long count;
        private int partitions;
        private int batch;
        private long intervalMs;
        private long next;

        @Override
        public void start(Map<String, String> props) {
            topic = props.get("topic");
            count = Long.parseLong(props.get("count"));
            partitions = Integer.parseInt(props.getOrDefault("partitions", "1"));
            batch = Integer.parseInt(props.getOrDefault("batch", "100"));
            intervalMs = Long.parseLong(props.getOrDefault("interval.ms", "100"));
            Map<String, Object> offset = context.offsetStorageReader().offset(SOURCE_PARTITION);
            next = offset == null ? 0 : ((Number) offset.get("next")).longValue();
            Counts.out("SOURCE-START next=" + next);
        }

        @Override
        public List<SourceRecord> poll() throws InterruptedException {
            Thread.sleep(intervalMs);
            if (next >= count) {
                return null;
            }
            List<SourceRecord> records = new ArrayList<>();
            for (long end = Math.min(next + batch, count); next < end; next++) {
                records.add(new SourceRecord(SOURCE_PARTITION, Map.of("next", next + 1), topic,
                        (int) (next % partitions), Schema.STRING_SCHEMA, Long.toString(next),
                        Schema.STRING_SCHEMA, "record-" + next));
            }
            return records;
        }

        @Override
        public void stop() {}

        @Override
        public String version() {
            return "1";
        }
    }
}
