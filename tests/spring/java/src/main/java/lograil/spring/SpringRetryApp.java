package lograil.spring;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.BackOff;
import org.springframework.kafka.annotation.DltHandler;
import org.springframework.kafka.annotation.EnableKafka;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.annotation.RetryableTopic;
import org.springframework.kafka.config.ConcurrentKafkaListenerContainerFactory;
import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaAdmin;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.listener.ConsumerAwareRebalanceListener;
import org.springframework.kafka.retrytopic.RetryTopicHeaders;
import org.springframework.kafka.retrytopic.SameIntervalTopicReuseStrategy;

/**
 * A Spring Kafka service with non-blocking retries: one {@code @KafkaListener} with
 * {@code @RetryableTopic} (Spring's defaults unless told otherwise), in a plain Spring context.
 *
 * <pre>
 * java -jar spring-retry-app.jar --bootstrap HOST:PORT --topic T --group G
 *     [--naming default|multiple] [--attempts 3] [--delay-ms 1000] [--offset-reset earliest]
 * </pre>
 *
 * What the listener does depends on the record's value: {@code decline...} always throws
 * {@link PaymentDeclinedException}; {@code fail-until-N...} throws {@link TransientException}
 * on every attempt before N; anything else succeeds. Attempt numbers are Spring's
 * {@code retry_topic-attempts} header (1 on the main topic).
 *
 * <p>Lines on stdout (one per event, flushed): {@code ASSIGNED <group> <topic-partition,...>},
 * {@code DELIVERY topic=.. partition=.. offset=.. key=.. value=.. attempt=.. now=.. due=..
 * outcome=ok|fail}, {@code DLT topic=.. offset=.. key=.. value=..}, {@code STOPPED}. It stops
 * when stdin closes or reads {@code stop}.
 */
public final class SpringRetryApp {

    static final Map<String, String> ARGS = new HashMap<>();

    static String arg(String name, String fallback) {
        return ARGS.getOrDefault(name, fallback);
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] argv) throws Exception {
        for (int i = 0; i < argv.length; i++) {
            if (argv[i].equals("-h") || argv[i].equals("--help")) {
                System.out.println("java -jar spring-retry-app.jar --bootstrap HOST:PORT --topic T --group G"
                        + " [--naming default|multiple] [--attempts N] [--delay-ms MS] [--offset-reset earliest|latest]");
                return;
            }
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("bad argument " + argv[i]);
            }
            ARGS.put(argv[i].substring(2), argv[++i]);
        }
        for (String required : new String[] {"bootstrap", "topic", "group"}) {
            if (!ARGS.containsKey(required)) {
                throw new IllegalArgumentException("--" + required + " is required");
            }
        }
        // The annotations' placeholders resolve from system properties.
        System.setProperty("app.topic", arg("topic", ""));
        System.setProperty("app.group", arg("group", ""));
        System.setProperty("app.attempts", arg("attempts", "3"));
        System.setProperty("app.delay", arg("delay-ms", "1000"));

        AnnotationConfigApplicationContext context = new AnnotationConfigApplicationContext();
        context.register(AppConfig.class);
        switch (arg("naming", "default")) {
            case "default" -> context.register(DefaultNamingListener.class);
            case "multiple" -> context.register(MultipleTopicsListener.class);
            default -> throw new IllegalArgumentException("--naming default|multiple");
        }
        context.refresh();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
            // Only the end of stdin or "stop" matters.
        }
        context.close();
        say("STOPPED");
    }

    /** The beans a {@code @RetryableTopic} listener needs: a container factory, a template, an admin. */
    @Configuration
    @EnableKafka
    public static class AppConfig {

        @Bean
        public KafkaAdmin admin() {
            return new KafkaAdmin(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, arg("bootstrap", "")));
        }

        @Bean
        public ProducerFactory<String, String> producerFactory() {
            Map<String, Object> props = new HashMap<>();
            props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, arg("bootstrap", ""));
            props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
            props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
            props.put(ProducerConfig.LINGER_MS_CONFIG, 0);
            return new DefaultKafkaProducerFactory<>(props);
        }

        @Bean
        public KafkaTemplate<String, String> kafkaTemplate(ProducerFactory<String, String> pf) {
            return new KafkaTemplate<>(pf);
        }

        @Bean
        public ConsumerFactory<String, String> consumerFactory() {
            Map<String, Object> props = new HashMap<>();
            props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, arg("bootstrap", ""));
            props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
            props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
            // A retry group reading a retry topic for the first time must start at the
            // earliest offset: Kafka's default, latest, skips the retries already waiting.
            props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, arg("offset-reset", "earliest"));
            props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 6000);
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 300);
            props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 100);
            return new DefaultKafkaConsumerFactory<>(props);
        }

        @Bean
        public ConcurrentKafkaListenerContainerFactory<String, String> kafkaListenerContainerFactory(
                ConsumerFactory<String, String> cf) {
            ConcurrentKafkaListenerContainerFactory<String, String> factory =
                    new ConcurrentKafkaListenerContainerFactory<>();
            factory.setConsumerFactory(cf);
            // Short polls: Spring wakes a paused retry partition between polls.
            factory.getContainerProperties().setPollTimeout(200);
            factory.setContainerCustomizer(container -> {
                String group = container.getGroupId();
                container.getContainerProperties().setConsumerRebalanceListener(new ConsumerAwareRebalanceListener() {
                    @Override
                    public void onPartitionsAssigned(Consumer<?, ?> consumer, Collection<TopicPartition> partitions) {
                        if (!partitions.isEmpty()) {
                            say("ASSIGNED " + group + " " + String.join(",",
                                    partitions.stream().map(TopicPartition::toString).sorted().toList()));
                        }
                    }
                });
            });
            return factory;
        }
    }

    /** What every listener does with a record. */
    abstract static class Behaviour {

        void handle(ConsumerRecord<String, String> record) {
            int attempt = attempts(record);
            String value = record.value() == null ? "" : record.value();
            boolean fail = value.startsWith("decline")
                    || (value.startsWith("fail-until-") && attempt < failUntil(value));
            Header due = record.headers().lastHeader(RetryTopicHeaders.DEFAULT_HEADER_BACKOFF_TIMESTAMP);
            say("DELIVERY topic=" + record.topic() + " partition=" + record.partition() + " offset=" + record.offset()
                    + " key=" + record.key() + " value=" + value + " attempt=" + attempt
                    + " now=" + System.currentTimeMillis()
                    + " due=" + (due == null ? -1 : new BigInteger(due.value()).longValue())
                    + " outcome=" + (fail ? "fail" : "ok"));
            if (value.startsWith("decline")) {
                throw new PaymentDeclinedException("card declined for " + record.key());
            }
            if (fail) {
                throw new TransientException("payment service unavailable (attempt " + attempt + ")");
            }
        }

        void dlt(ConsumerRecord<String, String> record) {
            say("DLT topic=" + record.topic() + " offset=" + record.offset() + " key=" + record.key()
                    + " value=" + record.value());
        }

        static int attempts(ConsumerRecord<?, ?> record) {
            Header h = record.headers().lastHeader(RetryTopicHeaders.DEFAULT_HEADER_ATTEMPTS);
            if (h == null) {
                return 1;
            }
            byte[] v = h.value();
            return v.length == 4 ? ByteBuffer.wrap(v).getInt() : v[0];
        }

        static int failUntil(String value) {
            String rest = value.substring("fail-until-".length());
            int end = 0;
            while (end < rest.length() && Character.isDigit(rest.charAt(end))) {
                end++;
            }
            return Integer.parseInt(rest.substring(0, end));
        }
    }

    /** Spring's defaults: for a fixed back-off, one retry topic {@code <topic>-retry} (4.1's same-interval reuse). */
    public static class DefaultNamingListener extends Behaviour {

        @RetryableTopic(attempts = "${app.attempts}", backOff = @BackOff(delayString = "${app.delay}"))
        @KafkaListener(topics = "${app.topic}", groupId = "${app.group}")
        public void listen(ConsumerRecord<String, String> record) {
            handle(record);
        }

        @DltHandler
        public void onDlt(ConsumerRecord<String, String> record) {
            dlt(record);
        }
    }

    /** One retry topic per attempt: {@code <topic>-retry-0}, {@code <topic>-retry-1}, ... */
    public static class MultipleTopicsListener extends Behaviour {

        @RetryableTopic(attempts = "${app.attempts}", backOff = @BackOff(delayString = "${app.delay}"),
                sameIntervalTopicReuseStrategy = SameIntervalTopicReuseStrategy.MULTIPLE_TOPICS)
        @KafkaListener(topics = "${app.topic}", groupId = "${app.group}")
        public void listen(ConsumerRecord<String, String> record) {
            handle(record);
        }

        @DltHandler
        public void onDlt(ConsumerRecord<String, String> record) {
            dlt(record);
        }
    }
}
