//! Redriving a dead-letter topic to its source, rate-limited, with the ledger topic that makes
//! it idempotent.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use consumer::{
    Admin, AdminError, ClientConfig, ConsumerRecord, DeliveryFuture, NewTopic, Producer,
    ProducerRecord, SendError,
};
use serde::{Deserialize, Serialize};

use super::read::{offsets_since, partition_count, read_topic};
use super::{lossy, DeadLetter, DltError};
use crate::headers;
use crate::retrying::now_ms;

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

pub(super) fn record_id(topic: &str, partition: i32, offset: i64) -> String {
    format!("{topic}/{partition}/{offset}")
}

/// Copies every record of `opts.from` not redriven before to its target, at most `opts.rate`
/// per second. Records that cannot be redriven (no target known) are reported and stay.
pub async fn redrive(client: &ClientConfig, opts: &Redrive) -> Result<RedriveReport, DltError> {
    let started = std::time::Instant::now();
    let mut admin = Admin::from_config(client).await?;
    partition_count(&mut admin, &opts.from).await?;
    let ledger = ledger_topic(&opts.from);
    ensure_ledger(&mut admin, &ledger).await?;
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
    let batch = plan(&mut admin, opts, &states, &records, &mut report).await;
    send_paced(&producer, &ledger, opts.rate, &batch, &mut report).await?;
    producer.close().await;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Creates the ledger topic (one partition) unless it exists.
async fn ensure_ledger(admin: &mut Admin, ledger: &str) -> Result<(), DltError> {
    if partition_count(admin, ledger).await.is_err() {
        let created = admin
            .create(&NewTopic {
                name: ledger.to_string(),
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
    Ok(())
}

/// The copies to produce, by record id: every record not redriven before, that the filter
/// keeps and whose target is known; the others counted or reported as failed.
async fn plan(
    admin: &mut Admin,
    opts: &Redrive,
    states: &HashMap<String, LedgerEntry>,
    records: &[ConsumerRecord],
    report: &mut RedriveReport,
) -> Vec<(String, ProducerRecord)> {
    let mut partitions: HashMap<String, i32> = HashMap::new();
    let mut batch: Vec<(String, ProducerRecord)> = Vec::new();
    for record in records {
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
            match partition_count(admin, &to).await {
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
        let out = redriven_copy(record, &to, partition, &id);
        batch.push((id, out));
    }
    batch
}

/// The copy of `record` for `to`: its key and value, its headers but the retry chain's, and
/// which record it redrives.
fn redriven_copy(
    record: &ConsumerRecord,
    to: &str,
    partition: Option<i32>,
    id: &str,
) -> ProducerRecord {
    ProducerRecord {
        topic: Arc::from(to),
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
                Some(Bytes::from(id.to_string())),
            )))
            .collect(),
        timestamp: None,
    }
}

/// Produces `batch`, paced: record i goes no earlier than i / rate seconds after the start;
/// intents and dones are written per chunk of about a tenth of a second's records.
async fn send_paced(
    producer: &Producer,
    ledger: &str,
    rate: Option<f64>,
    batch: &[(String, ProducerRecord)],
    report: &mut RedriveReport,
) -> Result<(), DltError> {
    let chunk = rate
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
        write_ledger(producer, ledger, &intents).await?;
        let mut pending = Vec::new();
        for (id, out) in group {
            if let Some(rate) = rate {
                let at = start + Duration::from_secs_f64(index as f64 / rate);
                tokio::time::sleep_until(at).await;
            }
            index += 1;
            let sent = producer.send(out.clone()).await;
            pending.push((id.clone(), out.topic.to_string(), sent));
        }
        let dones = acknowledged(pending, report).await;
        write_ledger(producer, ledger, &dones).await?;
    }
    Ok(())
}

/// A send: (record id, target topic, what `send` answered).
type Sent = (String, String, Result<DeliveryFuture, SendError>);

/// Waits for each send's acknowledgement: the acknowledged copies are reported redriven and
/// returned as done (for the ledger), the others reported failed.
async fn acknowledged(
    pending: Vec<Sent>,
    report: &mut RedriveReport,
) -> Vec<(String, LedgerEntry)> {
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
    dones
}

pub(super) fn parse_id(id: &str) -> (i32, i64) {
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
