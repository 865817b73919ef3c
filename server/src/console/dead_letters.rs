//! Dead-letter topics and their records, read from the log for the console.
//!
//! A topic is a dead-letter topic when its name is a retry chain's (`…-dlt`, `….DLT`: the
//! `retry-topic` crate's and Spring Kafka's, [`vocabulary::is_dead_letter_topic`]) or it
//! takes a share group's dead letters (`errors.deadletterqueue.group.enable`). A record's
//! origin, error and attempts come from the headers either writer sets: Spring Kafka's
//! `kafka_dlt-*` and `kafka_*` families and lograil's `lograil.retry.history` (the names are
//! [`vocabulary::headers`]'; the encodings those of `retry-topic/src/headers.rs`, which the
//! broker does not link), and KIP-1191's `__dlq.errors.*` that the broker's share groups write.

use log_core::{batch, Topic};

use super::records;
use serde::Deserialize;
use vocabulary::headers::{
    ATTEMPTS, DLQ_ERRORS_DELIVERY_COUNT, DLQ_ERRORS_MESSAGE, DLQ_ERRORS_OFFSET,
    DLQ_ERRORS_PARTITION, DLQ_ERRORS_TOPIC, DLT_EXCEPTION_FQCN, DLT_EXCEPTION_MESSAGE,
    DLT_ORIGINAL_OFFSET, DLT_ORIGINAL_PARTITION, DLT_ORIGINAL_TOPIC, EXCEPTION_FQCN,
    EXCEPTION_MESSAGE, HISTORY, ORIGINAL_OFFSET, ORIGINAL_PARTITION, ORIGINAL_TOPIC,
};

/// Attempts of a record's history shown.
pub const HISTORY_SHOWN: usize = 32;

/// Whether `topic` holds dead letters.
pub fn is_dead_letter_topic(topic: &Topic) -> bool {
    vocabulary::is_dead_letter_topic(topic.name()) || topic.config().dlq_group_enable
}

/// A dead letter as the console shows it.
#[derive(Debug)]
pub struct DeadLetter {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<bytes::Bytes>,
    pub value: Option<bytes::Bytes>,
    pub headers: Vec<(String, Option<bytes::Bytes>)>,
    /// The original record's topic, partition and offset (-1 where a header is absent).
    pub origin: Option<(String, i32, i64)>,
    pub error_class: Option<String>,
    pub error_message: Option<String>,
    /// Spring's `retry_topic-attempts` or the share group's delivery count.
    pub attempts: Option<i64>,
    /// lograil's attempt history (empty without one); `Err`: the header is malformed.
    pub history: Result<Vec<Attempt>, String>,
}

/// One entry of `lograil.retry.history`.
#[derive(Debug, Deserialize)]
pub struct Attempt {
    pub attempt: u32,
    pub at: i64,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    #[serde(default)]
    pub consumer: String,
    pub class: String,
    #[serde(default)]
    pub message: String,
}

/// One page of a dead-letter partition from `from`: the records and the offset the next
/// page starts at (`None` at the log end).
#[derive(Debug)]
pub struct Page {
    pub records: Vec<DeadLetter>,
    pub next: Option<i64>,
    /// Why reading stopped early (a damaged segment, a batch that does not decode).
    pub error: Option<String>,
}

/// A page of `partition`'s dead letters from `from` ([`records::read`]'s bounds; transaction
/// markers are not dead letters). Reads the log.
pub fn read(partition: &log_core::Partition, from: i64) -> Page {
    let page = records::read(partition, from, |r| !r.control);
    Page {
        records: page.records.into_iter().map(interpret).collect(),
        next: page.next,
        error: page.error,
    }
}

fn interpret(record: batch::DecodedRecord) -> DeadLetter {
    let header = |names: &[&str]| names.iter().find_map(|n| record.header(n)).cloned();
    let text = |names: &[&str]| header(names).map(|v| String::from_utf8_lossy(&v).into_owned());
    // Spring's integers are big-endian binary (`retry_topic-attempts` was 1 byte in Spring
    // 2.7); KIP-1191's are decimal text.
    let binary = |name: &str| -> Option<i64> {
        let v = record.header(name)?;
        match v.len() {
            8 => <[u8; 8]>::try_from(v.as_ref()).ok().map(i64::from_be_bytes),
            4 => <[u8; 4]>::try_from(v.as_ref())
                .ok()
                .map(|b| i64::from(i32::from_be_bytes(b))),
            1 => Some(i64::from(v[0])),
            _ => None,
        }
    };
    let decimal = |name: &str| -> Option<i64> {
        std::str::from_utf8(record.header(name)?)
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let int = |spring: [&str; 2], kip: &str| {
        spring
            .into_iter()
            .find_map(&binary)
            .or_else(|| decimal(kip))
    };
    let origin = text(&[DLT_ORIGINAL_TOPIC, ORIGINAL_TOPIC, DLQ_ERRORS_TOPIC]).map(|topic| {
        let partition = int(
            [DLT_ORIGINAL_PARTITION, ORIGINAL_PARTITION],
            DLQ_ERRORS_PARTITION,
        );
        let offset = int([DLT_ORIGINAL_OFFSET, ORIGINAL_OFFSET], DLQ_ERRORS_OFFSET);
        let partition = partition.and_then(|p| i32::try_from(p).ok()).unwrap_or(-1);
        (topic, partition, offset.unwrap_or(-1))
    });
    let history = match record.header(HISTORY) {
        None => Ok(Vec::new()),
        Some(v) => serde_json::from_slice::<Vec<Attempt>>(v).map_err(|e| e.to_string()),
    };
    DeadLetter {
        origin,
        error_class: text(&[DLT_EXCEPTION_FQCN, EXCEPTION_FQCN]),
        error_message: text(&[DLT_EXCEPTION_MESSAGE, EXCEPTION_MESSAGE, DLQ_ERRORS_MESSAGE]),
        attempts: binary(ATTEMPTS).or_else(|| decimal(DLQ_ERRORS_DELIVERY_COUNT)),
        history,
        offset: record.offset,
        timestamp: record.timestamp,
        key: record.key,
        value: record.value,
        headers: record.headers,
    }
}
