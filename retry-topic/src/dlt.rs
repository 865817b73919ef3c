//! Dead-letter topics from the outside: read their records (ours or Spring Kafka's), and
//! redrive them to their source, rate-limited and idempotent.
//!
//! **Idempotent redrive.** Each DLT has a one-partition ledger topic, `<dlt>-redrive-log`. Before
//! a record is produced, an `intent` entry naming it is written (acks=all); once the produce is
//! acknowledged, a `done` entry. A record with `done` is never produced again. After a crash
//! between the two, the target topic is scanned from the intent's time for the record's
//! [`headers::REDRIVE_OF`] header: found means done, absent means produce it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use consumer::{
    Admin, AdminError, ClientConfig, ConsumeError, Consumer, ConsumerRecord, NewTopic, Producer,
    ProducerRecord, TopicPartition,
};
use serde::{Deserialize, Serialize};

use crate::headers::{self, HistoryEntry, Origin};
use crate::retrying::now_ms;

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

/// Every record of `topic` (or those from `since` per partition) up to the end offsets it has
/// now. Fails with [`DltError::NoTopic`] when the topic does not exist.
pub async fn read_topic(
    client: &ClientConfig,
    topic: &str,
    since: Option<&BTreeMap<i32, i64>>,
) -> Result<Vec<ConsumerRecord>, DltError> {
    let mut admin = Admin::from_config(client).await?;
    let count = partition_count(&mut admin, topic).await?;
    let reader = reader(client).await?;
    let tps: Vec<TopicPartition> = (0..count).map(|p| TopicPartition::new(topic, p)).collect();
    let read_err = |e: &dyn std::fmt::Display| DltError::Read {
        topic: topic.to_string(),
        reason: e.to_string(),
    };
    let ends = reader.end_offsets(&tps).await.map_err(|e| read_err(&e))?;
    let starts = reader
        .beginning_offsets(&tps)
        .await
        .map_err(|e| read_err(&e))?;
    let mut wanted = BTreeMap::new();
    for tp in &tps {
        let from = since
            .and_then(|s| s.get(&tp.partition).copied())
            .unwrap_or(0)
            .max(starts.get(tp).copied().unwrap_or(0));
        let end = ends.get(tp).copied().unwrap_or(0);
        if from < end {
            wanted.insert(tp.clone(), (from, end));
        }
    }
    let records = read_ranges(&reader, &wanted)
        .await
        .map_err(|e| read_err(&e))?;
    reader.close().await;
    Ok(records)
}

async fn partition_count(admin: &mut Admin, topic: &str) -> Result<i32, DltError> {
    match admin.describe_topic(topic).await {
        Ok(t) if t.partitions > 0 => Ok(t.partitions),
        Ok(_) => Err(DltError::NoTopic(topic.to_string())),
        Err(AdminError::Call(c))
            if c.code() == Some(consumer::ErrorCode::UnknownTopicOrPartition) =>
        {
            Err(DltError::NoTopic(topic.to_string()))
        }
        Err(e) => Err(e.into()),
    }
}

async fn reader(client: &ClientConfig) -> Result<Consumer, DltError> {
    Consumer::from_config(&client.clone().with("auto.offset.reset", "earliest"))
        .await
        .map_err(|e| DltError::Client(e.to_string()))
}

/// Reads `[from, end)` of each partition.
async fn read_ranges(
    reader: &Consumer,
    wanted: &BTreeMap<TopicPartition, (i64, i64)>,
) -> Result<Vec<ConsumerRecord>, String> {
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let tps: Vec<TopicPartition> = wanted.keys().cloned().collect();
    reader.assign(&tps).map_err(|e| e.to_string())?;
    for (tp, (from, _)) in wanted {
        reader.seek(tp, *from).map_err(|e| e.to_string())?;
    }
    let mut remaining: BTreeSet<TopicPartition> = tps.into_iter().collect();
    let mut out = Vec::new();
    while !remaining.is_empty() {
        let record = match tokio::time::timeout(Duration::from_secs(30), reader.recv()).await {
            Err(_) => {
                return Err(format!(
                    "no record for 30 s with {} partitions not read to their end",
                    remaining.len()
                ))
            }
            Ok(Err(ConsumeError::Closed)) => return Err("reader closed".to_string()),
            Ok(Err(e)) => return Err(e.to_string()),
            Ok(Ok(r)) => r,
        };
        let tp = TopicPartition::new(&*record.topic, record.partition);
        let Some((_, end)) = wanted.get(&tp) else {
            continue;
        };
        if record.offset + 1 >= *end {
            remaining.remove(&tp);
        }
        if record.offset < *end {
            out.push(record);
        }
    }
    out.sort_by_key(|r| (r.partition, r.offset));
    Ok(out)
}

/// What to redrive, where, how fast.
#[derive(Debug, Clone, Default)]
pub struct Redrive {
    /// The dead-letter topic to redrive.
    pub from: String,
    /// `None`: each record's original topic.
    pub to: Option<String>,
    /// Records per second at most (`None`: as fast as acknowledgements come).
    pub rate: Option<f64>,
    /// Only records whose error class matches (see [`DeadLetter::matches`]).
    pub filter: Option<String>,
}

/// What a redrive did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RedriveReport {
    /// `(partition, offset, target topic)` of each record produced.
    pub redriven: Vec<(i32, i64, String)>,
    /// Records redriven by an earlier run.
    pub already: usize,
    /// Records left out by the filter.
    pub filtered: usize,
    /// Records not redriven, with why (they stay in the DLT).
    pub failed: Vec<(i32, i64, String)>,
    /// How long the whole run took, in seconds.
    pub seconds: f64,
}

/// An entry of the ledger topic.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LedgerEntry {
    state: LedgerState,
    to: String,
    at: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum LedgerState {
    Intent,
    Done,
}

/// The ledger topic of a dead-letter topic.
pub fn ledger_topic(dlt: &str) -> String {
    format!("{dlt}-redrive-log")
}

fn record_id(topic: &str, partition: i32, offset: i64) -> String {
    format!("{topic}/{partition}/{offset}")
}

/// Copies every record of `opts.from` not redriven before to its target, at most `opts.rate`
/// per second. Records that cannot be redriven (no target known) are reported and stay.
pub async fn redrive(client: &ClientConfig, opts: &Redrive) -> Result<RedriveReport, DltError> {
    let started = std::time::Instant::now();
    let mut admin = Admin::from_config(client).await?;
    partition_count(&mut admin, &opts.from).await?;
    let ledger = ledger_topic(&opts.from);
    if partition_count(&mut admin, &ledger).await.is_err() {
        let created = admin
            .create(&NewTopic {
                name: ledger.clone(),
                partitions: 1,
                replication_factor: -1,
                configs: Vec::new(),
            })
            .await;
        match created {
            Ok(()) => {}
            Err(AdminError::Call(c))
                if c.code() == Some(consumer::ErrorCode::TopicAlreadyExists) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let mut states = read_ledger(client, &ledger).await?;
    let producer = Producer::from_config(
        &client
            .clone()
            .with("acks", "all")
            .with("enable.idempotence", "true"),
    )
    .await
    .map_err(|e| DltError::Client(e.to_string()))?;
    settle_intents(client, &producer, &ledger, &mut states).await?;

    let records = read_topic(client, &opts.from, None).await?;
    let mut report = RedriveReport::default();
    let mut partitions: HashMap<String, i32> = HashMap::new();
    let mut batch: Vec<(String, ProducerRecord)> = Vec::new();
    for record in &records {
        let id = record_id(&opts.from, record.partition, record.offset);
        if states.get(&id).map(|e| e.state) == Some(LedgerState::Done) {
            report.already += 1;
            continue;
        }
        let letter = DeadLetter::read(record);
        if let Some(f) = &opts.filter {
            if !letter.matches(f) {
                report.filtered += 1;
                continue;
            }
        }
        let origin = letter.origin.as_ref();
        let Some(to) = opts.to.clone().or_else(|| origin.map(|o| o.topic.clone())) else {
            report.failed.push((
                record.partition,
                record.offset,
                "no original-topic header: give --to".to_string(),
            ));
            continue;
        };
        if !partitions.contains_key(&to) {
            match partition_count(&mut admin, &to).await {
                Ok(n) => partitions.insert(to.clone(), n),
                Err(e) => {
                    report
                        .failed
                        .push((record.partition, record.offset, e.to_string()));
                    continue;
                }
            };
        }
        let count = partitions.get(&to).copied().unwrap_or(1);
        let partition = origin
            .filter(|o| o.topic == to && o.partition >= 0 && o.partition < count)
            .map(|o| o.partition);
        let out = ProducerRecord {
            topic: Arc::from(to.as_str()),
            partition,
            key: record.key.clone(),
            value: record.value.clone(),
            headers: record
                .headers
                .iter()
                .filter(|(n, _)| !headers::is_chain_header(n))
                .cloned()
                .chain(std::iter::once((
                    headers::REDRIVE_OF.to_string(),
                    Some(Bytes::from(id.clone())),
                )))
                .collect(),
            timestamp: None,
        };
        batch.push((id, out));
    }

    // Paced: record i goes no earlier than i / rate seconds after the start; intents and
    // dones are written per chunk of about a tenth of a second's records.
    let chunk = opts
        .rate
        .map(|r| ((r / 10.0).floor() as usize).max(1))
        .unwrap_or(100);
    let start = tokio::time::Instant::now();
    let mut index = 0usize;
    for group in batch.chunks(chunk) {
        let now = now_ms();
        let intents: Vec<(String, LedgerEntry)> = group
            .iter()
            .map(|(id, r)| {
                (
                    id.clone(),
                    LedgerEntry {
                        state: LedgerState::Intent,
                        to: r.topic.to_string(),
                        at: now,
                    },
                )
            })
            .collect();
        write_ledger(&producer, &ledger, &intents).await?;
        let mut pending = Vec::new();
        for (id, out) in group {
            if let Some(rate) = opts.rate {
                let at = start + Duration::from_secs_f64(index as f64 / rate);
                tokio::time::sleep_until(at).await;
            }
            index += 1;
            let sent = producer.send(out.clone()).await;
            pending.push((id.clone(), out.topic.to_string(), sent));
        }
        let mut dones = Vec::new();
        for (id, to, sent) in pending {
            let (partition, offset) = parse_id(&id);
            let result = match sent {
                Ok(delivery) => delivery.await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match result {
                Ok(_) => {
                    dones.push((
                        id,
                        LedgerEntry {
                            state: LedgerState::Done,
                            to: to.clone(),
                            at: now_ms(),
                        },
                    ));
                    report.redriven.push((partition, offset, to));
                }
                Err(e) => report.failed.push((partition, offset, e)),
            }
        }
        write_ledger(&producer, &ledger, &dones).await?;
    }
    producer.close().await;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

fn parse_id(id: &str) -> (i32, i64) {
    let mut parts = id.rsplitn(3, '/');
    let offset = parts.next().and_then(|s| s.parse().ok()).unwrap_or(-1);
    let partition = parts.next().and_then(|s| s.parse().ok()).unwrap_or(-1);
    (partition, offset)
}

async fn read_ledger(
    client: &ClientConfig,
    ledger: &str,
) -> Result<HashMap<String, LedgerEntry>, DltError> {
    let mut states: HashMap<String, LedgerEntry> = HashMap::new();
    for record in read_topic(client, ledger, None).await? {
        let (Some(key), Some(value)) = (&record.key, &record.value) else {
            continue;
        };
        match serde_json::from_slice::<LedgerEntry>(value) {
            // A later entry wins, but never turns done back into intent.
            Ok(entry) => {
                let id = lossy(key);
                if states.get(&id).map(|e| e.state) != Some(LedgerState::Done) {
                    states.insert(id, entry);
                }
            }
            Err(e) => {
                tracing::warn!(offset = record.offset, error = %e, "unreadable ledger entry skipped")
            }
        }
    }
    Ok(states)
}

async fn write_ledger(
    producer: &Producer,
    ledger: &str,
    entries: &[(String, LedgerEntry)],
) -> Result<(), DltError> {
    let fail = |reason: String| DltError::Write {
        topic: ledger.to_string(),
        reason,
    };
    let mut deliveries = Vec::new();
    for (id, entry) in entries {
        let value = serde_json::to_vec(entry).map_err(|e| fail(e.to_string()))?;
        let record = ProducerRecord::new(ledger)
            .key(id.clone())
            .value(value)
            .partition(0);
        deliveries.push(
            producer
                .send(record)
                .await
                .map_err(|e| fail(e.to_string()))?,
        );
    }
    for d in deliveries {
        d.await.map_err(|e| fail(e.to_string()))?;
    }
    Ok(())
}

/// Intents without a `done` (a crash between produce and ledger): looks for the redriven
/// copies in their targets and marks the found ones done.
async fn settle_intents(
    client: &ClientConfig,
    producer: &Producer,
    ledger: &str,
    states: &mut HashMap<String, LedgerEntry>,
) -> Result<(), DltError> {
    let mut by_target: BTreeMap<String, i64> = BTreeMap::new();
    for entry in states.values().filter(|e| e.state == LedgerState::Intent) {
        let since = by_target.entry(entry.to.clone()).or_insert(entry.at);
        *since = (*since).min(entry.at);
    }
    for (target, since) in by_target {
        let from = offsets_since(client, &target, since - 1000).await?;
        let found: BTreeSet<String> = read_topic(client, &target, Some(&from))
            .await?
            .iter()
            .filter_map(|r| headers::get(r, headers::REDRIVE_OF).map(lossy))
            .collect();
        let done: Vec<(String, LedgerEntry)> = states
            .iter()
            .filter(|(id, e)| {
                e.state == LedgerState::Intent && e.to == target && found.contains(*id)
            })
            .map(|(id, e)| {
                (
                    id.clone(),
                    LedgerEntry {
                        state: LedgerState::Done,
                        ..e.clone()
                    },
                )
            })
            .collect();
        write_ledger(producer, ledger, &done).await?;
        for (id, entry) in done {
            states.insert(id, entry);
        }
    }
    Ok(())
}

/// The first offset at or after `ms` of each partition of `topic`.
async fn offsets_since(
    client: &ClientConfig,
    topic: &str,
    ms: i64,
) -> Result<BTreeMap<i32, i64>, DltError> {
    let mut admin = Admin::from_config(client).await?;
    let count = partition_count(&mut admin, topic).await?;
    let reader = reader(client).await?;
    let tps: Vec<TopicPartition> = (0..count).map(|p| TopicPartition::new(topic, p)).collect();
    let read_err = |e: &dyn std::fmt::Display| DltError::Read {
        topic: topic.to_string(),
        reason: e.to_string(),
    };
    let found = reader
        .offsets_for_times(&tps, ms)
        .await
        .map_err(|e| read_err(&e))?;
    let ends = reader.end_offsets(&tps).await.map_err(|e| read_err(&e))?;
    reader.close().await;
    Ok(tps
        .iter()
        .map(|tp| {
            let at = found.get(tp).or_else(|| ends.get(tp)).copied().unwrap_or(0);
            (tp.partition, at)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use consumer::TimestampType;

    fn record(headers: &[(&str, &[u8])]) -> ConsumerRecord {
        ConsumerRecord {
            topic: "orders-dlt".into(),
            partition: 1,
            offset: 4,
            timestamp: 10,
            timestamp_type: TimestampType::CreateTime,
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::from_static(b"v")),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), Some(Bytes::copy_from_slice(v))))
                .collect(),
        }
    }

    #[test]
    fn a_record_without_chain_headers_is_read_with_a_problem_noted() {
        let d = DeadLetter::read(&record(&[("trace", b"abc")]));
        assert!(d.origin.is_none());
        assert_eq!(d.problems.len(), 1);
        assert_eq!(d.headers, vec![("trace".to_string(), "abc".to_string())]);
        assert!(!d.matches("expired"));
    }

    #[test]
    fn filter_matches_whole_or_last_segment() {
        let d = DeadLetter::read(&record(&[
            (
                headers::DLT_EXCEPTION_FQCN,
                b"java.lang.IllegalStateException",
            ),
            (headers::ATTEMPTS, &[0, 0, 0, 3]),
        ]));
        assert!(d.matches("java.lang.IllegalStateException"));
        assert!(d.matches("IllegalStateException"));
        assert!(!d.matches("State"));
        assert_eq!(d.attempts, Some(2));
        let r = DeadLetter::read(&record(&[(
            headers::DLT_EXCEPTION_FQCN,
            b"app::errors::Timeout",
        )]));
        assert!(r.matches("Timeout"));
    }

    #[test]
    fn ids_round_trip_and_headers_print_as_numbers_text_or_hex() {
        assert_eq!(parse_id(&record_id("a/b-dlt", 3, 17)), (3, 17));
        let four = Bytes::from_static(&[0, 0, 0, 3]);
        assert_eq!(header_text("x-custom", &four), "0x00000003");
        // Spring's numbers, in their widths; a number of another width stays hex.
        assert_eq!(header_text(headers::DLT_ORIGINAL_PARTITION, &four), "3");
        assert_eq!(header_text(headers::ATTEMPTS, &four), "3");
        let offset = Bytes::copy_from_slice(&1234i64.to_be_bytes());
        assert_eq!(header_text(headers::ORIGINAL_OFFSET, &offset), "1234");
        assert_eq!(
            header_text(headers::DLT_ORIGINAL_OFFSET, &four),
            "0x00000003"
        );
        let due = Bytes::from(headers::big_integer(1_700_000_000_123));
        assert_eq!(
            header_text(headers::BACKOFF_TIMESTAMP, &due),
            "1700000000123"
        );
        // A Java stack trace is text.
        let trace = "x.ListenerExecutionFailedException: failed\n\tat x.A.b(A.java:1)\r\n";
        assert_eq!(
            header_text(headers::DLT_EXCEPTION_STACKTRACE, &Bytes::from(trace)),
            trace
        );
    }

    #[test]
    fn spring_records_match_their_cause_class() {
        let d = DeadLetter::read(&record(&[
            (headers::ORIGINAL_TOPIC, b"orders"),
            (
                headers::EXCEPTION_FQCN,
                b"org.springframework.kafka.listener.ListenerExecutionFailedException",
            ),
            (
                headers::EXCEPTION_CAUSE_FQCN,
                b"shop.PaymentDeclinedException",
            ),
        ]));
        assert_eq!(d.class.as_deref(), Some("shop.PaymentDeclinedException"));
        assert!(d.matches("PaymentDeclinedException"));
        assert!(d.matches("shop.PaymentDeclinedException"));
        assert!(d.matches("ListenerExecutionFailedException"));
        assert!(!d.matches("IllegalStateException"));
    }
}
