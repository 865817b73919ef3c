package lograil.ecosystem;

import java.io.BufferedWriter;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.RandomAccessFile;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/**
 * A sink connector that appends one line per record to {@code file}:
 * {@code <topic> TAB <partition> TAB <offset> TAB <value>}, and a line {@code START} each time
 * its task starts. Lines are kept in memory and written out in {@link SinkTask#flush}, which the
 * worker calls before it commits the consumer offsets: a killed worker loses only lines whose
 * offsets were not committed, which it delivers again (at least once). A line cut by a kill
 * during a write is ended before the next {@code START}. One task.
 */
public final class LineSink extends SinkConnector {
    private Map<String, String> config;

    @Override
    public void start(Map<String, String> props) {
        config = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return LineTask.class;
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
                .define("file", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "output file");
    }

    @Override
    public String version() {
        return "1";
    }

    public static final class LineTask extends SinkTask {
        private BufferedWriter out;
        private final StringBuilder pending = new StringBuilder();

        @Override
        public void start(Map<String, String> props) {
            try {
                Path file = Path.of(props.get("file"));
                boolean cut = false;
                if (Files.exists(file) && Files.size(file) > 0) {
                    try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "r")) {
                        f.seek(f.length() - 1);
                        cut = f.read() != '\n';
                    }
                }
                out = new BufferedWriter(new OutputStreamWriter(
                        new FileOutputStream(file.toFile(), true), StandardCharsets.UTF_8));
                out.write(cut ? "\nSTART\n" : "START\n");
                out.flush();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void put(Collection<SinkRecord> records) {
            for (SinkRecord r : records) {
                pending.append(r.topic()).append('\t').append(r.kafkaPartition()).append('\t')
                        .append(r.kafkaOffset()).append('\t').append(r.value()).append('\n');
            }
        }

        @Override
        public void flush(Map<TopicPartition, OffsetAndMetadata> offsets) {
            try {
                out.write(pending.toString());
                pending.setLength(0);
                out.flush();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void stop() {
            try {
                out.close();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public String version() {
            return "1";
        }
    }
}
