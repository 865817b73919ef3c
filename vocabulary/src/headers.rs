//! Record header names: Spring Kafka's retry and dead-letter headers, which the `retry-topic`
//! crate writes and reads and the broker's console shows; lograil's own (`lograil.retry.*`,
//! `lograil.redrive.of`); the `deadline` the broker's share groups honour; and KIP-1191's
//! `__dlq.errors.*`, which the broker writes on a share group's dead letters.
//!
//! Names only: their byte encodings are `retry-topic`'s (`retry_topic::headers`) and, for
//! KIP-1191's, the broker's (decimal text).
//!
//! Spring Kafka has two families of "original record" headers: its `DeadLetterPublishingRecoverer`
//! defaults (`kafka_dlt-original-*`, `kafka_dlt-exception-*`) and the names its
//! `@RetryableTopic` flow uses on retry and dead-letter records (`kafka_original-*`,
//! `kafka_exception-*`). "The original record" is the main-topic record a retry chain started
//! from.

/// The attempt number of the record's next delivery (the main topic's delivery is attempt 1).
pub const ATTEMPTS: &str = "retry_topic-attempts";
/// When the record is due again, ms since the epoch.
pub const BACKOFF_TIMESTAMP: &str = "retry_topic-backoff-timestamp";
/// The timestamp of the record on the main topic (a Java `BigInteger`, unlike
/// [`ORIGINAL_TIMESTAMP_KAFKA`]).
pub const ORIGINAL_TIMESTAMP: &str = "retry_topic-original-timestamp";

/// `DeadLetterPublishingRecoverer`'s name for the original record's topic (UTF-8).
pub const DLT_ORIGINAL_TOPIC: &str = "kafka_dlt-original-topic";
/// The original record's partition, a 4-byte big-endian int.
pub const DLT_ORIGINAL_PARTITION: &str = "kafka_dlt-original-partition";
/// The original record's offset, an 8-byte big-endian long.
pub const DLT_ORIGINAL_OFFSET: &str = "kafka_dlt-original-offset";
/// The original record's timestamp, ms since the epoch, an 8-byte big-endian long.
pub const DLT_ORIGINAL_TIMESTAMP: &str = "kafka_dlt-original-timestamp";
/// The original record's timestamp type, as Java names it (`CreateTime`, `LogAppendTime`).
pub const DLT_ORIGINAL_TIMESTAMP_TYPE: &str = "kafka_dlt-original-timestamp-type";
/// The consumer group that failed the record (UTF-8); the same name in both of Spring's
/// families.
pub const DLT_ORIGINAL_CONSUMER_GROUP: &str = "kafka_dlt-original-consumer-group";
/// The error class of the failure that dead-lettered the record: Spring writes the
/// exception's fully qualified class name, `retry-topic` its handler error's type name or
/// its own classes for an expired or malformed record.
pub const DLT_EXCEPTION_FQCN: &str = "kafka_dlt-exception-fqcn";
/// The message of the failure that dead-lettered the record (UTF-8).
pub const DLT_EXCEPTION_MESSAGE: &str = "kafka_dlt-exception-message";
/// The root cause's class (UTF-8): Spring wraps a listener's exception in
/// `ListenerExecutionFailedException`, so this is the class the listener threw.
pub const DLT_EXCEPTION_CAUSE_FQCN: &str = "kafka_dlt-exception-cause-fqcn";
/// Java's printed stack trace of the failure (UTF-8 text, several lines).
pub const DLT_EXCEPTION_STACKTRACE: &str = "kafka_dlt-exception-stacktrace";
/// The key deserializer's failure, as [`DLT_EXCEPTION_FQCN`] (Spring only).
pub const DLT_KEY_EXCEPTION_FQCN: &str = "kafka_dlt-key-exception-fqcn";
/// The key deserializer's failure, as [`DLT_EXCEPTION_MESSAGE`] (Spring only).
pub const DLT_KEY_EXCEPTION_MESSAGE: &str = "kafka_dlt-key-exception-message";
/// The key deserializer's failure, as [`DLT_EXCEPTION_STACKTRACE`] (Spring only).
pub const DLT_KEY_EXCEPTION_STACKTRACE: &str = "kafka_dlt-key-exception-stacktrace";

/// `@RetryableTopic`'s name for the original record's topic (UTF-8).
pub const ORIGINAL_TOPIC: &str = "kafka_original-topic";
/// The original record's partition, a 4-byte big-endian int.
pub const ORIGINAL_PARTITION: &str = "kafka_original-partition";
/// The original record's offset, an 8-byte big-endian long: what per-key ordering tracks a
/// record in retry by.
pub const ORIGINAL_OFFSET: &str = "kafka_original-offset";
/// The original record's timestamp, ms since the epoch, an 8-byte big-endian long (not
/// [`ORIGINAL_TIMESTAMP`], which is a `BigInteger`).
pub const ORIGINAL_TIMESTAMP_KAFKA: &str = "kafka_original-timestamp";
/// The original record's timestamp type, as Java names it (`CreateTime`, `LogAppendTime`).
pub const ORIGINAL_TIMESTAMP_TYPE: &str = "kafka_original-timestamp-type";
/// The error class of the latest failed attempt (see [`DLT_EXCEPTION_FQCN`]).
pub const EXCEPTION_FQCN: &str = "kafka_exception-fqcn";
/// The message of the latest failed attempt (UTF-8).
pub const EXCEPTION_MESSAGE: &str = "kafka_exception-message";
/// The root cause's class of the latest failed attempt (see [`DLT_EXCEPTION_CAUSE_FQCN`]).
pub const EXCEPTION_CAUSE_FQCN: &str = "kafka_exception-cause-fqcn";
/// Java's printed stack trace of the latest failed attempt (UTF-8 text).
pub const EXCEPTION_STACKTRACE: &str = "kafka_exception-stacktrace";
/// The key deserializer's failure, as [`EXCEPTION_FQCN`] (Spring only).
pub const KEY_EXCEPTION_FQCN: &str = "kafka_key-exception-fqcn";
/// The key deserializer's failure, as [`EXCEPTION_MESSAGE`] (Spring only).
pub const KEY_EXCEPTION_MESSAGE: &str = "kafka_key-exception-message";
/// The key deserializer's failure, as [`EXCEPTION_STACKTRACE`] (Spring only).
pub const KEY_EXCEPTION_STACKTRACE: &str = "kafka_key-exception-stacktrace";

/// Every header of an attempt's failure in both of Spring's families, the key-deserializer
/// ones included: a new failure removes them all before writing its own (Spring's
/// `stripPreviousExceptionHeaders`), so nothing of an earlier attempt, Spring's or ours,
/// stays beside it.
pub const EXCEPTION_HEADERS: [&str; 14] = [
    EXCEPTION_FQCN,
    EXCEPTION_CAUSE_FQCN,
    EXCEPTION_MESSAGE,
    EXCEPTION_STACKTRACE,
    KEY_EXCEPTION_FQCN,
    KEY_EXCEPTION_MESSAGE,
    KEY_EXCEPTION_STACKTRACE,
    DLT_EXCEPTION_FQCN,
    DLT_EXCEPTION_CAUSE_FQCN,
    DLT_EXCEPTION_MESSAGE,
    DLT_EXCEPTION_STACKTRACE,
    DLT_KEY_EXCEPTION_FQCN,
    DLT_KEY_EXCEPTION_MESSAGE,
    DLT_KEY_EXCEPTION_STACKTRACE,
];

/// The `@RetryableTopic` family's original-record names: topic, partition, offset, timestamp,
/// timestamp type.
pub const RETRY_ORIGIN_NAMES: [&str; 5] = [
    ORIGINAL_TOPIC,
    ORIGINAL_PARTITION,
    ORIGINAL_OFFSET,
    ORIGINAL_TIMESTAMP_KAFKA,
    ORIGINAL_TIMESTAMP_TYPE,
];
/// The `DeadLetterPublishingRecoverer` family's original-record names, in
/// [`RETRY_ORIGIN_NAMES`]' order.
pub const DLT_ORIGIN_NAMES: [&str; 5] = [
    DLT_ORIGINAL_TOPIC,
    DLT_ORIGINAL_PARTITION,
    DLT_ORIGINAL_OFFSET,
    DLT_ORIGINAL_TIMESTAMP,
    DLT_ORIGINAL_TIMESTAMP_TYPE,
];

/// lograil's attempt history, a JSON array of attempts (`retry_topic::headers::HistoryEntry`).
pub const HISTORY: &str = "lograil.retry.history";
/// On a record parked behind an earlier record of its key (per-key ordering): the original
/// offset of the record it waits for, as decimal text.
pub const PARKED_BEHIND: &str = "lograil.retry.parked-behind";
/// On a redriven record: `<dead-letter topic>/<partition>/<offset>` it was copied from.
pub const REDRIVE_OF: &str = "lograil.redrive.of";
/// Whether a header is one a retry chain or a dead-letter queue writes: dropped from a record
/// redriven to its topic (by `lograil dlt redrive` or the console).
pub fn is_chain_header(name: &str) -> bool {
    name.starts_with("retry_topic-")
        || name.starts_with("kafka_dlt-")
        || name.starts_with("kafka_original-")
        || name.starts_with("kafka_exception-")
        || name.starts_with("kafka_key-exception-")
        || name.starts_with("lograil.retry.")
        || name.starts_with("__dlq.errors.")
        || name == REDRIVE_OF
}

/// A record's deadline, ms since the epoch (8 bytes big-endian, or decimal text), as the
/// broker's share groups read it and a retry chain honours it.
pub const DEADLINE: &str = "deadline";

/// KIP-1191, on a share group's dead letter: the topic the record was delivered from.
pub const DLQ_ERRORS_TOPIC: &str = "__dlq.errors.topic";
/// KIP-1191: the partition the record was delivered from (decimal text).
pub const DLQ_ERRORS_PARTITION: &str = "__dlq.errors.partition";
/// KIP-1191: the record's offset in that partition (decimal text).
pub const DLQ_ERRORS_OFFSET: &str = "__dlq.errors.offset";
/// KIP-1191: the share group that gave up on the record.
pub const DLQ_ERRORS_GROUP: &str = "__dlq.errors.group";
/// KIP-1191: how many times the record was delivered (decimal text).
pub const DLQ_ERRORS_DELIVERY_COUNT: &str = "__dlq.errors.delivery.count";
/// KIP-1191: why the record was dead-lettered.
pub const DLQ_ERRORS_MESSAGE: &str = "__dlq.errors.message";
