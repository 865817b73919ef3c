//! Dead-letter topics from the outside: read their records (ours or Spring Kafka's), and
//! redrive them to their source, rate-limited and idempotent.
//!
//! **Idempotent redrive.** Each DLT has a one-partition ledger topic, `<dlt>-redrive-log`. Before
//! a record is produced, an `intent` entry naming it is written (acks=all); once the produce is
//! acknowledged, a `done` entry. A record with `done` is never produced again. After a crash
//! between the two, the target topic is scanned from the intent's time for the record's
//! [`headers::REDRIVE_OF`] header: found means done, absent means produce it.

use bytes::Bytes;
use consumer::{AdminError, ConsumerRecord};
use serde::Serialize;

use crate::headers::{self, HistoryEntry, Origin};

mod read;
mod redrive;

pub use read::read_topic;
pub use redrive::{ledger_topic, redrive, Redrive, RedriveReport};

/// Why reading or redriving a dead-letter topic failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DltError {
    /// The named topic does not exist (or has no partitions).
    #[error("topic {0} does not exist")]
    NoTopic(String),
    /// An admin request failed: connecting, describing, listing or creating topics, reading a
    /// group's committed offsets.
    #[error("admin: {0}")]
    Admin(#[from] AdminError),
    /// The reading consumer or the redrive producer could not be created; the client's error
    /// as text.
    #[error("client: {0}")]
    Client(String),
    /// Looking up offsets or reading records failed, or no record came for 30 s before the end
    /// offsets were reached.
    #[error("reading {topic}: {reason}")]
    Read {
        /// The topic being read.
        topic: String,
        /// The client's error, as text.
        reason: String,
    },
    /// An entry could not be written to the ledger topic (a record that could not be
    /// redriven is reported in [`RedriveReport::failed`] instead).
    #[error("writing {topic}: {reason}")]
    Write {
        /// The ledger topic.
        topic: String,
        /// The encoding or producer error, as text.
        reason: String,
    },
}

/// A dead-letter record, decoded.
#[derive(Debug, Clone, Serialize)]
pub struct DeadLetter {
    /// The dead-letter topic it was read from.
    pub topic: String,
    /// Its partition in the dead-letter topic.
    pub partition: i32,
    /// Its offset in the dead-letter topic.
    pub offset: i64,
    /// The dead-letter record's own timestamp, ms since the epoch (the original's is in
    /// [`origin`](Self::origin)).
    pub timestamp: i64,
    /// Lossy UTF-8; `None` for a null key.
    pub key: Option<String>,
    /// Lossy UTF-8; `None` for a null value (a tombstone).
    pub value: Option<String>,
    /// Where it first came from (`kafka_dlt-original-*` or `kafka_original-*`); `None` for a
    /// record without those headers.
    pub origin: Option<Origin>,
    /// The error class: the root cause's (`kafka_dlt-exception-cause-fqcn` or
    /// `kafka_exception-cause-fqcn`, what a Spring listener threw) when present, else
    /// `kafka_dlt-exception-fqcn` or `kafka_exception-fqcn` (`expired`, `panic`, a type name, …).
    pub class: Option<String>,
    /// The exception's class when [`class`](Self::class) is its cause: Spring's
    /// `ListenerExecutionFailedException`.
    pub wrapper: Option<String>,
    /// The error message (`kafka_dlt-exception-message`, else `kafka_exception-message`).
    pub message: Option<String>,
    /// Java's stack trace of the failure (`kafka_dlt-exception-stacktrace` or
    /// `kafka_exception-stacktrace`), as text.
    pub stack_trace: Option<String>,
    /// Attempts made (`retry_topic-attempts` minus one), when known.
    pub attempts: Option<u32>,
    /// lograil's attempt history (empty for Spring's records).
    pub history: Vec<HistoryEntry>,
    /// Headers as text: Spring's numbers in decimal, other binary values in hex.
    pub headers: Vec<(String, String)>,
    /// Headers that could not be read, with why.
    pub problems: Vec<String>,
}

impl DeadLetter {
    /// Decodes a dead-letter record. Never fails: a header that cannot be read leaves its
    /// field `None` (or empty) and is described in [`problems`](Self::problems).
    pub fn read(record: &ConsumerRecord) -> DeadLetter {
        let mut problems = Vec::new();
        let origin = Origin::from_headers(record).unwrap_or_else(|e| {
            problems.push(e.to_string());
            None
        });
        if origin.is_none() && problems.is_empty() {
            problems.push("no original-topic header (not written by a retry chain)".to_string());
        }
        let attempts = match headers::get(record, headers::ATTEMPTS) {
            None => None,
            Some(_) => match headers::attempts(record) {
                Ok(a) => Some(a.saturating_sub(1)),
                Err(e) => {
                    problems.push(e.to_string());
                    None
                }
            },
        };
        let history = headers::history(record).unwrap_or_else(|e| {
            problems.push(e.to_string());
            Vec::new()
        });
        let exception = headers::exception(record);
        DeadLetter {
            topic: record.topic.to_string(),
            partition: record.partition,
            offset: record.offset,
            timestamp: record.timestamp,
            key: record.key.as_ref().map(lossy),
            value: record.value.as_ref().map(lossy),
            origin,
            class: exception.class,
            wrapper: exception.wrapper,
            message: exception.message,
            stack_trace: exception.stack_trace,
            attempts,
            history,
            headers: record
                .headers
                .iter()
                .map(|(n, v)| {
                    let text = v.as_ref().map(|v| header_text(n, v));
                    (n.clone(), text.unwrap_or_default())
                })
                .collect(),
            problems,
        }
    }

    /// Does the error class, or its [`wrapper`](Self::wrapper), match `filter` (whole, or
    /// its last `.`/`::`/`$` segment)?
    pub fn matches(&self, filter: &str) -> bool {
        [&self.class, &self.wrapper]
            .into_iter()
            .flatten()
            .any(|class| {
                class == filter
                    || class.rsplit(['.', ':', '$']).next() == Some(filter)
                    || class.ends_with(&format!("::{filter}"))
            })
    }
}

fn lossy(b: &Bytes) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A header value as text: Spring's binary numbers as decimal (partitions and attempts are
/// 4-byte ints, offsets and timestamps 8-byte longs, `retry_topic-*-timestamp` Java
/// `BigInteger`s), UTF-8 text as is (line breaks and tabs included: Spring's stack traces),
/// other bytes as `0x…` hex.
fn header_text(name: &str, v: &Bytes) -> String {
    let number = match name {
        headers::DLT_ORIGINAL_PARTITION | headers::ORIGINAL_PARTITION | headers::ATTEMPTS => {
            <[u8; 4]>::try_from(v.as_ref())
                .ok()
                .map(|b| i64::from(i32::from_be_bytes(b)))
        }
        headers::DLT_ORIGINAL_OFFSET
        | headers::ORIGINAL_OFFSET
        | headers::DLT_ORIGINAL_TIMESTAMP
        | headers::ORIGINAL_TIMESTAMP_KAFKA => {
            <[u8; 8]>::try_from(v.as_ref()).ok().map(i64::from_be_bytes)
        }
        headers::BACKOFF_TIMESTAMP | headers::ORIGINAL_TIMESTAMP => headers::read_big_integer(v),
        _ => None,
    };
    if let Some(n) = number {
        return n.to_string();
    }
    match std::str::from_utf8(v) {
        Ok(s)
            if s.chars()
                .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t')) =>
        {
            s.to_string()
        }
        _ => format!(
            "0x{}",
            v.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ),
    }
}

#[cfg(test)]
mod tests;
