//! Header names and byte encodings, as Spring Kafka writes and reads them, plus lograil's own
//! attempt history.
//!
//! Spring Kafka has two families of "original record" headers: its `DeadLetterPublishingRecoverer`
//! defaults (`kafka_dlt-original-*`, `kafka_dlt-exception-*`) and the names its
//! `@RetryableTopic` flow uses on retry and dead-letter records (`kafka_original-*`,
//! `kafka_exception-*`). We write the second family on retry records and both on dead-letter
//! records, and read either.
//!
//! Encodings (Spring's): partition a 4-byte big-endian int, offset and timestamp 8-byte
//! big-endian longs, timestamp type the Java enum's text (`CreateTime`, `LogAppendTime`), texts
//! UTF-8; `retry_topic-attempts` a 4-byte big-endian int (1 byte in Spring 2.7, still read);
//! `retry_topic-backoff-timestamp` and `retry_topic-original-timestamp` a Java
//! `BigInteger.toByteArray()` (minimal two's complement, big-endian).

use bytes::Bytes;
use consumer::{ConsumerRecord, TimestampType};
use serde::{Deserialize, Serialize};

// The names are vocabulary's (the broker's console reads them too); their encodings are ours.
pub use vocabulary::headers::{
    is_chain_header, ATTEMPTS, BACKOFF_TIMESTAMP, DEADLINE, DLT_EXCEPTION_CAUSE_FQCN,
    DLT_EXCEPTION_FQCN, DLT_EXCEPTION_MESSAGE, DLT_EXCEPTION_STACKTRACE,
    DLT_ORIGINAL_CONSUMER_GROUP, DLT_ORIGINAL_OFFSET, DLT_ORIGINAL_PARTITION,
    DLT_ORIGINAL_TIMESTAMP, DLT_ORIGINAL_TIMESTAMP_TYPE, DLT_ORIGINAL_TOPIC, DLT_ORIGIN_NAMES,
    EXCEPTION_CAUSE_FQCN, EXCEPTION_FQCN, EXCEPTION_HEADERS, EXCEPTION_MESSAGE,
    EXCEPTION_STACKTRACE, HISTORY, ORIGINAL_OFFSET, ORIGINAL_PARTITION, ORIGINAL_TIMESTAMP,
    ORIGINAL_TIMESTAMP_KAFKA, ORIGINAL_TIMESTAMP_TYPE, ORIGINAL_TOPIC, PARKED_BEHIND, REDRIVE_OF,
    RETRY_ORIGIN_NAMES,
};

/// Entries kept in the history header (the oldest are dropped first; `attempt` numbers stay).
pub const HISTORY_LIMIT: usize = 32;
/// Characters of an error message kept in a header.
pub const MESSAGE_LIMIT: usize = 1024;

/// A header that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("header {name}: {reason}")]
pub struct BadHeader {
    /// The header's name.
    pub name: &'static str,
    /// What is wrong with its value.
    pub reason: String,
}

impl BadHeader {
    fn new(name: &'static str, reason: impl Into<String>) -> BadHeader {
        BadHeader {
            name,
            reason: reason.into(),
        }
    }
}

/// Java's `BigInteger.valueOf(v).toByteArray()`: the shortest two's complement big-endian form.
pub fn big_integer(v: i64) -> Vec<u8> {
    let bytes = v.to_be_bytes();
    let mut start = 0;
    while start < 7 {
        let (b, next) = (bytes[start], bytes[start + 1]);
        let redundant = (b == 0x00 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0);
        if !redundant {
            break;
        }
        start += 1;
    }
    bytes[start..].to_vec()
}

/// `new BigInteger(bytes).longValue()` for 1 to 8 bytes (longer values are refused, not
/// truncated as Java would).
pub fn read_big_integer(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || bytes.len() > 8 {
        return None;
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0x00 };
    let mut full = [fill; 8];
    full[8 - bytes.len()..].copy_from_slice(bytes);
    Some(i64::from_be_bytes(full))
}

/// Java's name of a timestamp type (`TimestampType.toString()`).
pub fn timestamp_type_name(t: TimestampType) -> &'static str {
    match t {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    }
}

/// The value of header `name`, if present and not null.
pub fn get<'a>(record: &'a ConsumerRecord, name: &str) -> Option<&'a Bytes> {
    record
        .headers
        .iter()
        .rev()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v.as_ref())
}

/// The first of `names` present.
fn first<'a>(record: &'a ConsumerRecord, names: &[&str]) -> Option<&'a Bytes> {
    names.iter().find_map(|n| get(record, n))
}

fn text(record: &ConsumerRecord, names: &[&str]) -> Option<String> {
    first(record, names).map(|v| String::from_utf8_lossy(v).into_owned())
}

fn fixed<const N: usize>(
    record: &ConsumerRecord,
    names: &[&'static str],
) -> Result<Option<[u8; N]>, BadHeader> {
    for name in names {
        if let Some(v) = get(record, name) {
            return <[u8; N]>::try_from(v.as_ref())
                .map(Some)
                .map_err(|_| BadHeader::new(name, format!("{} bytes, expected {N}", v.len())));
        }
    }
    Ok(None)
}

/// `retry_topic-attempts`: 1 when absent (a main-topic record).
pub fn attempts(record: &ConsumerRecord) -> Result<u32, BadHeader> {
    let Some(v) = get(record, ATTEMPTS) else {
        return Ok(1);
    };
    let raw = match v.len() {
        1 => i64::from(v[0]),
        4 => i64::from(i32::from_be_bytes([v[0], v[1], v[2], v[3]])),
        n => return Err(BadHeader::new(ATTEMPTS, format!("{n} bytes, expected 4"))),
    };
    u32::try_from(raw)
        .ok()
        .filter(|a| *a >= 1)
        .ok_or_else(|| BadHeader::new(ATTEMPTS, format!("{raw} is not an attempt number")))
}

/// `retry_topic-backoff-timestamp`, if present.
pub fn backoff_timestamp(record: &ConsumerRecord) -> Result<Option<i64>, BadHeader> {
    big_integer_header(record, BACKOFF_TIMESTAMP)
}

/// `retry_topic-original-timestamp`, else the record's own timestamp.
pub fn original_timestamp(record: &ConsumerRecord) -> Result<i64, BadHeader> {
    Ok(big_integer_header(record, ORIGINAL_TIMESTAMP)?.unwrap_or(record.timestamp))
}

fn big_integer_header(
    record: &ConsumerRecord,
    name: &'static str,
) -> Result<Option<i64>, BadHeader> {
    match get(record, name) {
        None => Ok(None),
        Some(v) => read_big_integer(v)
            .map(Some)
            .ok_or_else(|| BadHeader::new(name, format!("{} bytes is not a long", v.len()))),
    }
}

/// The `deadline` header, if present; unreadable is an error.
pub fn deadline(record: &ConsumerRecord) -> Result<Option<i64>, BadHeader> {
    let Some(v) = get(record, DEADLINE) else {
        return Ok(None);
    };
    if let Ok(b) = <[u8; 8]>::try_from(v.as_ref()) {
        return Ok(Some(i64::from_be_bytes(b)));
    }
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .map(Some)
        .ok_or_else(|| BadHeader::new(DEADLINE, "neither 8 bytes nor decimal text"))
}

/// One attempt in [`HISTORY`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// The attempt that failed (1: the main-topic delivery; 0 when a malformed header sent
    /// the record to the DLT before its attempt number was read).
    pub attempt: u32,
    /// When it failed, ms since the epoch.
    pub at: i64,
    /// Where the record was read from.
    pub topic: String,
    /// The partition it was read from.
    pub partition: i32,
    /// Its offset there.
    pub offset: i64,
    /// Which consumer ran it (`group/client.id/pid`).
    pub consumer: String,
    /// The error class (a Rust type name, a Java class name, `expired`, `panic`, …).
    pub class: String,
    /// The error message (a handler's is cut with [`clip`]).
    pub message: String,
}

/// The history a record carries (empty when it has none); malformed is an error.
pub fn history(record: &ConsumerRecord) -> Result<Vec<HistoryEntry>, BadHeader> {
    match get(record, HISTORY) {
        None => Ok(Vec::new()),
        Some(v) => serde_json::from_slice(v).map_err(|e| BadHeader::new(HISTORY, e.to_string())),
    }
}

/// Where a record first came from (Spring's original headers, else the record itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    /// The original record's topic.
    pub topic: String,
    /// Its partition; -1 when its header is absent.
    pub partition: i32,
    /// Its offset; -1 when its header is absent.
    pub offset: i64,
    /// Its timestamp, ms since the epoch; -1 when its header is absent.
    pub timestamp: i64,
    /// Its timestamp type as Java names it (`CreateTime`, `LogAppendTime`); empty when its
    /// header is absent.
    pub timestamp_type: String,
    /// The consumer group that failed it ([`DLT_ORIGINAL_CONSUMER_GROUP`]); `None` when
    /// absent, and always from [`Origin::of`].
    pub group: Option<String>,
}

impl Origin {
    /// The origin named by the record's headers (either family), or `None` without them.
    pub fn from_headers(record: &ConsumerRecord) -> Result<Option<Origin>, BadHeader> {
        let Some(topic) = text(record, &[DLT_ORIGINAL_TOPIC, ORIGINAL_TOPIC]) else {
            return Ok(None);
        };
        let partition = fixed::<4>(record, &[DLT_ORIGINAL_PARTITION, ORIGINAL_PARTITION])?
            .map(i32::from_be_bytes)
            .unwrap_or(-1);
        let offset = fixed::<8>(record, &[DLT_ORIGINAL_OFFSET, ORIGINAL_OFFSET])?
            .map(i64::from_be_bytes)
            .unwrap_or(-1);
        let timestamp = fixed::<8>(record, &[DLT_ORIGINAL_TIMESTAMP, ORIGINAL_TIMESTAMP_KAFKA])?
            .map(i64::from_be_bytes)
            .unwrap_or(-1);
        Ok(Some(Origin {
            topic,
            partition,
            offset,
            timestamp,
            timestamp_type: text(
                record,
                &[DLT_ORIGINAL_TIMESTAMP_TYPE, ORIGINAL_TIMESTAMP_TYPE],
            )
            .unwrap_or_default(),
            group: text(record, &[DLT_ORIGINAL_CONSUMER_GROUP]),
        }))
    }

    /// The origin of a main-topic record: the record itself.
    pub fn of(record: &ConsumerRecord) -> Origin {
        Origin {
            topic: record.topic.to_string(),
            partition: record.partition,
            offset: record.offset,
            timestamp: record.timestamp,
            timestamp_type: timestamp_type_name(record.timestamp_type).to_string(),
            group: None,
        }
    }
}

/// The failure a record carries, from either of Spring's families (the dead-letter one first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exception {
    /// The error class: the root cause's when the record names one (what a Spring listener
    /// threw), else the exception's.
    pub class: Option<String>,
    /// The exception's class when it is not [`class`](Self::class): Spring's wrapper,
    /// `org.springframework.kafka.listener.ListenerExecutionFailedException`.
    pub wrapper: Option<String>,
    /// The message.
    pub message: Option<String>,
    /// Java's printed stack trace, when the record has one.
    pub stack_trace: Option<String>,
}

/// The failure a record carries (see [`Exception`]); one family's headers are read together.
pub fn exception(record: &ConsumerRecord) -> Exception {
    let dlt = get(record, DLT_EXCEPTION_FQCN).is_some();
    let [fqcn, cause, message, stack] = if dlt {
        [
            DLT_EXCEPTION_FQCN,
            DLT_EXCEPTION_CAUSE_FQCN,
            DLT_EXCEPTION_MESSAGE,
            DLT_EXCEPTION_STACKTRACE,
        ]
    } else {
        [
            EXCEPTION_FQCN,
            EXCEPTION_CAUSE_FQCN,
            EXCEPTION_MESSAGE,
            EXCEPTION_STACKTRACE,
        ]
    };
    let outer = text(record, &[fqcn]);
    let cause = text(record, &[cause]);
    let (class, wrapper) = match (outer, cause) {
        (Some(o), Some(c)) if o != c => (Some(c), Some(o)),
        (o, c) => (c.or(o), None),
    };
    Exception {
        class,
        wrapper,
        message: text(record, &[message]).or_else(|| text(record, &[EXCEPTION_MESSAGE])),
        stack_trace: text(record, &[stack]),
    }
}

/// Cuts `s` to [`MESSAGE_LIMIT`] characters.
pub fn clip(s: &str) -> String {
    match s.char_indices().nth(MESSAGE_LIMIT) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

/// Headers to write on a forwarded record, replacing any of the same name in `base`.
#[derive(Debug, Default)]
pub struct HeaderSet(pub Vec<(String, Option<Bytes>)>);

impl HeaderSet {
    /// `record`'s headers.
    pub fn from_record(record: &ConsumerRecord) -> HeaderSet {
        HeaderSet(record.headers.clone())
    }

    /// Is a header `name` there (with a null value too)?
    pub fn has(&self, name: &str) -> bool {
        self.0.iter().any(|(n, _)| n == name)
    }

    /// Sets `name` to `value`: every header of that name is removed, one is appended.
    pub fn set(&mut self, name: &str, value: impl Into<Bytes>) {
        self.0.retain(|(n, _)| n != name);
        self.0.push((name.to_string(), Some(value.into())));
    }

    /// Removes every header named `name`.
    pub fn remove(&mut self, name: &str) {
        self.0.retain(|(n, _)| n != name);
    }

    /// Removes the failure headers of earlier attempts ([`EXCEPTION_HEADERS`]).
    pub fn clear_exception(&mut self) {
        self.0
            .retain(|(n, _)| !EXCEPTION_HEADERS.contains(&n.as_str()));
    }

    /// Spring's original-record headers of `origin`, in `names` (topic, partition, offset,
    /// timestamp, timestamp type), unless already there (Spring's `appendOriginalHeaders=false`).
    pub fn set_origin(&mut self, names: [&str; 5], origin: &Origin) {
        let [topic, partition, offset, timestamp, timestamp_type] = names;
        if self.has(topic) {
            return;
        }
        self.set(topic, origin.topic.clone());
        self.set(partition, origin.partition.to_be_bytes().to_vec());
        self.set(offset, origin.offset.to_be_bytes().to_vec());
        self.set(timestamp, origin.timestamp.to_be_bytes().to_vec());
        self.set(timestamp_type, origin.timestamp_type.clone());
    }
}

#[cfg(test)]
mod tests;
