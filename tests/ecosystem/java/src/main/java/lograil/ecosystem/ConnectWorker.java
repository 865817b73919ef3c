package lograil.ecosystem;

import java.io.FileReader;
import java.io.IOException;
import java.io.Reader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;
import org.apache.kafka.connect.runtime.distributed.DistributedHerder;

/**
 * A Kafka Connect distributed worker, started as {@code connect-distributed.sh} starts one
 * ({@link ConnectDistributed#startConnect}), that then puts each connector config given over
 * the worker's REST API ({@code PUT /connectors/<name>/config}, retried while the worker is not
 * ready).
 *
 * <pre>ConnectWorker WORKER.properties [CONNECTOR.properties...]</pre>
 *
 * On stdout: {@code STARTED <rest url>}, {@code SUBMITTED <name>}, and its connectors' lines.
 */
public final class ConnectWorker {
    private ConnectWorker() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: ConnectWorker WORKER.properties [CONNECTOR.properties...]");
            System.exit(2);
        }
        Connect<DistributedHerder> connect = new ConnectDistributed().startConnect(load(args[0]));
        Runtime.getRuntime().addShutdownHook(new Thread(connect::stop));
        URI rest = connect.rest().advertisedUrl();
        Counts.out("STARTED " + rest);
        HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
        for (int i = 1; i < args.length; i++) {
            Map<String, String> config = load(args[i]);
            String name = config.remove("name");
            HttpRequest put = HttpRequest.newBuilder(rest.resolve("/connectors/" + name + "/config"))
                    .header("Content-Type", "application/json")
                    .timeout(Duration.ofSeconds(30))
                    .PUT(HttpRequest.BodyPublishers.ofString(json(config)))
                    .build();
            long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
            while (true) {
                HttpResponse<String> answer = http.send(put, HttpResponse.BodyHandlers.ofString());
                if (answer.statusCode() / 100 == 2) {
                    break;
                }
                // 409: a rebalance is in progress; 5xx: the herder is not ready yet.
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(
                            "PUT " + name + ": " + answer.statusCode() + " " + answer.body());
                }
                Thread.sleep(500);
            }
            Counts.out("SUBMITTED " + name);
        }
        connect.awaitStop();
    }

    private static Map<String, String> load(String file) throws IOException {
        Properties props = new Properties();
        try (Reader in = new FileReader(file)) {
            props.load(in);
        }
        Map<String, String> out = new TreeMap<>();
        props.stringPropertyNames().forEach(k -> out.put(k, props.getProperty(k)));
        return out;
    }

    /** A JSON object of strings. */
    private static String json(Map<String, String> map) {
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, String> e : map.entrySet()) {
            if (out.length() > 1) {
                out.append(',');
            }
            out.append(quote(e.getKey())).append(':').append(quote(e.getValue()));
        }
        return out.append('}').toString();
    }

    private static String quote(String s) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
