package lograil.share;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A share consumer (KIP-932) driven by command-line options, for lograil's compatibility tests.
 * Uses Apache Kafka's own KafkaShareConsumer unmodified. Prints one JSON object per line on
 * stdout (see {@link #USAGE}); the client's own logging goes to stderr.
 */
public final class ShareWorker {
    static final String USAGE = String.join("\n",
        "usage: java -jar share-worker.jar --bootstrap HOST:PORT --group G --topics T1[,T2...] [options]",
        "",
        "  --client-id ID          client.id (default: share-worker-<pid>)",
        "  --label L               tag written into every output line as \"w\" (default: the client id)",
        "  --mode implicit|explicit  share.acknowledgement.mode (default implicit)",
        "  --max-records N         stop after receiving N records, at the end of a batch (0 = no limit)",
        "  --idle-ms T             stop when nothing arrived for T ms since the last record",
        "                          (default 5000; 0 = never)",
        "  --start-idle-ms T       stop when nothing at all arrived T ms after the start (default",
        "                          15000; 0 = never); joining takes up to a heartbeat interval",
        "  --timeout-ms T          stop after T ms in any case (default 60000)",
        "  --poll-ms T             timeout of each poll (default 500)",
        "  --max-poll-records N    max.poll.records",
        "  --process-ms T          sleep T ms per record (pretend to work; spreads load)",
        "  --commit poll|sync|async  explicit mode: send acks with the next poll (default), or call",
        "                          commitSync / commitAsync after each batch",
        "  --reject-prefix P       explicit: REJECT records whose value starts with P",
        "  --release-prefix P      explicit: RELEASE records whose value starts with P while their",
        "                          delivery count <= --release-times (default 1), then ACCEPT",
        "  --release-times K",
        "  --crash-on P            a record whose value starts with P crashes the worker: the rest",
        "                          of its batch is acknowledged and committed, then the JVM halts",
        "                          (exit 3) without closing the consumer; the poison stays acquired",
        "  --crash-after N         halt (exit 3) once the batch holding the N-th record has been",
        "                          printed, acknowledging nothing of it and not closing the consumer",
        "  --hang-after N          once the batch holding the N-th record has been printed, stop",
        "                          polling and sleep until killed, connections open, records acquired",
        "  --prop K=V              any other consumer property (repeatable)",
        "  --debug-protocol        log every request with its API version (kafka NetworkClient at",
        "                          DEBUG) to stderr",
        "",
        "Output, one JSON object per line, each with ev, w (label), ts (epoch ms):",
        "  start {client, client_id, group, topics, mode}",
        "  record {topic, partition, offset, delivery_count, key, value}",
        "  ack {topic, partition, offset, type}             explicit mode: the acknowledgement made",
        "  commit {topic, partition, offsets, error}        acknowledgement commit callback result",
        "  commit_sync {topic, partition, error}            per-partition result of commitSync",
        "  error {where, error}",
        "  crash {reason, held} (crash-after) / crash {reason, topic, partition, offset,",
        "    delivery_count} (crash-on) / hang {reason, held}",
        "  end {reason, received}                           before close",
        "  closed {ms} / close_error {error}");

    private static final Out OUT = new Out();

    public static void main(String[] argv) throws Exception {
        Opts o;
        try {
            o = Opts.parse(argv);
        } catch (IllegalArgumentException e) {
            System.err.println(e.getMessage());
            System.err.println(USAGE);
            System.exit(2);
            return;
        }
        if (o.debugProtocol) {
            // slf4j-simple reads these when the first logger is created (the consumer's).
            System.setProperty("org.slf4j.simpleLogger.log.org.apache.kafka.clients.NetworkClient", "debug");
        }
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
        System.setProperty("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
        System.exit(new ShareWorker(o).run());
    }

    private final Opts o;
    private final String label;
    private long received;

    private ShareWorker(Opts o) {
        this.o = o;
        this.label = o.label != null ? o.label : o.clientId;
    }

    private int run() {
        Properties p = new Properties();
        p.put("bootstrap.servers", o.bootstrap);
        p.put("group.id", o.group);
        p.put("client.id", o.clientId);
        p.put("share.acknowledgement.mode", o.mode);
        if (o.maxPollRecords != null) p.put("max.poll.records", o.maxPollRecords);
        p.putAll(o.props);

        emit("start", "client", "java", "client_version", clientVersion(),
            "client_id", o.clientId, "group", o.group, "topics", o.topics, "mode", o.mode);

        KafkaShareConsumer<String, String> c;
        try {
            c = new KafkaShareConsumer<>(p, new StringDeserializer(), new StringDeserializer());
        } catch (KafkaException e) {
            emit("error", "where", "create", "error", describe(e));
            return 2;
        }
        c.setAcknowledgementCommitCallback((Map<TopicIdPartition, Set<Long>> offsets, Exception ex) -> {
            for (Map.Entry<TopicIdPartition, Set<Long>> e : offsets.entrySet()) {
                emit("commit", "topic", e.getKey().topic(), "partition", e.getKey().partition(),
                    "offsets", new ArrayList<>(new TreeSet<>(e.getValue())), "error", ex == null ? null : describe(ex));
            }
        });
        c.subscribe(o.topics);

        boolean explicit = o.mode.equals("explicit");
        long start = System.currentTimeMillis();
        long lastRecord = start;
        String reason;
        int consecutiveErrors = 0;
        while (true) {
            long now = System.currentTimeMillis();
            if (now - start >= o.timeoutMs) { reason = "timeout"; break; }
            if (received == 0 && o.startIdleMs > 0 && now - start >= o.startIdleMs) { reason = "idle"; break; }
            if (received > 0 && o.idleMs > 0 && now - lastRecord >= o.idleMs) { reason = "idle"; break; }
            ConsumerRecords<String, String> batch;
            try {
                batch = c.poll(Duration.ofMillis(o.pollMs));
                consecutiveErrors = 0;
            } catch (KafkaException | IllegalStateException e) {
                emit("error", "where", "poll", "error", describe(e));
                if (++consecutiveErrors >= 20) { reason = "errors"; break; }
                sleep(200);
                continue;
            }
            if (batch.isEmpty()) continue;
            lastRecord = System.currentTimeMillis();
            long before = received;
            for (ConsumerRecord<String, String> r : batch) {
                received++;
                emit("record", "topic", r.topic(), "partition", r.partition(), "offset", r.offset(),
                    "delivery_count", r.deliveryCount().map(Short::intValue).orElse(null),
                    "key", r.key(), "value", r.value());
            }
            // Crash or hang at the end of the batch holding the N-th record: every record of the
            // batch has been reported, none acknowledged.
            if (o.crashAfter > 0 && before < o.crashAfter && received >= o.crashAfter) {
                emit("crash", "reason", "crash-after", "held", received - before);
                halt();
            }
            if (o.hangAfter > 0 && before < o.hangAfter && received >= o.hangAfter) {
                emit("hang", "reason", "hang-after", "held", received - before);
                while (true) sleep(60_000);
            }
            ConsumerRecord<String, String> poison = null;
            for (ConsumerRecord<String, String> r : batch) {
                if (o.processMs > 0) sleep(o.processMs);
                String v = r.value() == null ? "" : r.value();
                if (o.crashOn != null && v.startsWith(o.crashOn)) {
                    if (poison == null) poison = r;
                    continue; // never acknowledged
                }
                if (explicit) {
                    AcknowledgeType t = decide(r, v);
                    c.acknowledge(r, t);
                    emit("ack", "topic", r.topic(), "partition", r.partition(), "offset", r.offset(), "type", t.name());
                }
            }
            if (poison != null) {
                if (explicit) commitSync(c);
                emit("crash", "reason", "crash-on", "topic", poison.topic(), "partition", poison.partition(),
                    "offset", poison.offset(), "delivery_count", poison.deliveryCount().map(Short::intValue).orElse(null));
                halt();
            }
            if (explicit && o.commit.equals("sync")) commitSync(c);
            if (explicit && o.commit.equals("async")) {
                try {
                    c.commitAsync();
                } catch (KafkaException e) {
                    emit("error", "where", "commitAsync", "error", describe(e));
                }
            }
            if (o.maxRecords > 0 && received >= o.maxRecords) { reason = "max-records"; break; }
        }
        emit("end", "reason", reason, "received", received);
        long t0 = System.currentTimeMillis();
        try {
            // Explicit: sends the acks made since the last poll. Implicit: accepts the last batch.
            c.close(Duration.ofSeconds(30));
            emit("closed", "ms", System.currentTimeMillis() - t0);
        } catch (KafkaException e) {
            emit("close_error", "error", describe(e));
            return 1;
        }
        return 0;
    }

    private AcknowledgeType decide(ConsumerRecord<String, String> r, String v) {
        if (o.rejectPrefix != null && v.startsWith(o.rejectPrefix)) return AcknowledgeType.REJECT;
        if (o.releasePrefix != null && v.startsWith(o.releasePrefix)
            && r.deliveryCount().map(Short::intValue).orElse(1) <= o.releaseTimes) return AcknowledgeType.RELEASE;
        return AcknowledgeType.ACCEPT;
    }

    private void commitSync(KafkaShareConsumer<String, String> c) {
        try {
            Map<TopicIdPartition, Optional<KafkaException>> res = c.commitSync(Duration.ofSeconds(30));
            for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : res.entrySet()) {
                emit("commit_sync", "topic", e.getKey().topic(), "partition", e.getKey().partition(),
                    "error", e.getValue().map(ShareWorker::describe).orElse(null));
            }
        } catch (KafkaException e) {
            emit("error", "where", "commitSync", "error", describe(e));
        }
    }

    /** kafka-clients' version: AppInfoParser moved to an internals package in Kafka 4.4. */
    static String clientVersion() {
        for (String name : new String[] {"org.apache.kafka.common.utils.internals.AppInfoParser",
                "org.apache.kafka.common.utils.AppInfoParser"}) {
            try {
                return (String) Class.forName(name).getMethod("getVersion").invoke(null);
            } catch (ReflectiveOperationException e) {
                // not in this version; try the next name
            }
        }
        return "unknown";
    }

    private static void halt() {
        System.out.flush();
        Runtime.getRuntime().halt(3);
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static String describe(Throwable e) {
        return e.getClass().getSimpleName() + ": " + e.getMessage();
    }

    private void emit(String ev, Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("ev", ev);
        m.put("w", label);
        m.put("ts", System.currentTimeMillis());
        for (int i = 0; i + 1 < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        OUT.line(Json.write(m));
    }

    /** stdout, one whole line per call, flushed. */
    static final class Out {
        synchronized void line(String s) {
            System.out.println(s);
            System.out.flush();
        }
    }

    /** The small subset of JSON this tool writes: maps, lists, strings, numbers, booleans, null. */
    static final class Json {
        static String write(Object v) {
            StringBuilder b = new StringBuilder();
            write(b, v);
            return b.toString();
        }

        private static void write(StringBuilder b, Object v) {
            if (v == null) {
                b.append("null");
            } else if (v instanceof Number || v instanceof Boolean) {
                b.append(v);
            } else if (v instanceof Map<?, ?> m) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    if (!first) b.append(',');
                    first = false;
                    string(b, String.valueOf(e.getKey()));
                    b.append(':');
                    write(b, e.getValue());
                }
                b.append('}');
            } else if (v instanceof Iterable<?> it) {
                b.append('[');
                boolean first = true;
                for (Object x : it) {
                    if (!first) b.append(',');
                    first = false;
                    write(b, x);
                }
                b.append(']');
            } else {
                string(b, v.toString());
            }
        }

        private static void string(StringBuilder b, String s) {
            b.append('"');
            for (int i = 0; i < s.length(); i++) {
                char ch = s.charAt(i);
                switch (ch) {
                    case '"' -> b.append("\\\"");
                    case '\\' -> b.append("\\\\");
                    case '\n' -> b.append("\\n");
                    case '\r' -> b.append("\\r");
                    case '\t' -> b.append("\\t");
                    default -> {
                        if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch));
                        else b.append(ch);
                    }
                }
            }
            b.append('"');
        }
    }

    static final class Opts {
        String bootstrap, group, clientId, label, mode = "implicit", commit = "poll";
        List<String> topics;
        long maxRecords, idleMs = 5000, startIdleMs = 15000, timeoutMs = 60000, pollMs = 500, processMs;
        String maxPollRecords;
        String rejectPrefix, releasePrefix, crashOn;
        int releaseTimes = 1;
        long crashAfter, hangAfter;
        boolean debugProtocol;
        Properties props = new Properties();

        static Opts parse(String[] a) {
            Opts o = new Opts();
            for (int i = 0; i < a.length; i++) {
                String k = a[i];
                if (k.equals("--help") || k.equals("-h")) {
                    System.out.println(USAGE);
                    System.exit(0);
                }
                if (k.equals("--debug-protocol")) { o.debugProtocol = true; continue; }
                if (i + 1 >= a.length) throw new IllegalArgumentException("missing value for " + k);
                String v = a[++i];
                switch (k) {
                    case "--bootstrap" -> o.bootstrap = v;
                    case "--group" -> o.group = v;
                    case "--topics" -> o.topics = Arrays.asList(v.split(","));
                    case "--client-id" -> o.clientId = v;
                    case "--label" -> o.label = v;
                    case "--mode" -> o.mode = v;
                    case "--commit" -> o.commit = v;
                    case "--max-records" -> o.maxRecords = Long.parseLong(v);
                    case "--idle-ms" -> o.idleMs = Long.parseLong(v);
                    case "--start-idle-ms" -> o.startIdleMs = Long.parseLong(v);
                    case "--timeout-ms" -> o.timeoutMs = Long.parseLong(v);
                    case "--poll-ms" -> o.pollMs = Long.parseLong(v);
                    case "--process-ms" -> o.processMs = Long.parseLong(v);
                    case "--max-poll-records" -> o.maxPollRecords = v;
                    case "--reject-prefix" -> o.rejectPrefix = v;
                    case "--release-prefix" -> o.releasePrefix = v;
                    case "--release-times" -> o.releaseTimes = Integer.parseInt(v);
                    case "--crash-on" -> o.crashOn = v;
                    case "--crash-after" -> o.crashAfter = Long.parseLong(v);
                    case "--hang-after" -> o.hangAfter = Long.parseLong(v);
                    case "--prop" -> {
                        int eq = v.indexOf('=');
                        if (eq <= 0) throw new IllegalArgumentException("--prop wants K=V, not " + v);
                        o.props.put(v.substring(0, eq), v.substring(eq + 1));
                    }
                    default -> throw new IllegalArgumentException("unknown option " + k);
                }
            }
            if (o.bootstrap == null || o.group == null || o.topics == null)
                throw new IllegalArgumentException("--bootstrap, --group and --topics are required");
            if (!o.mode.equals("implicit") && !o.mode.equals("explicit"))
                throw new IllegalArgumentException("--mode is implicit or explicit");
            if (!List.of("poll", "sync", "async").contains(o.commit))
                throw new IllegalArgumentException("--commit is poll, sync or async");
            if (o.mode.equals("implicit") && (o.rejectPrefix != null || o.releasePrefix != null))
                throw new IllegalArgumentException("--reject-prefix/--release-prefix need --mode explicit");
            if (o.clientId == null) o.clientId = "share-worker-" + ProcessHandle.current().pid();
            return o;
        }
    }
}
