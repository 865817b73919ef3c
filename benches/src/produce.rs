//! One producer client on its own thread: sends its share of the records, closed-loop (as fast
//! as librdkafka accepts them) or open-loop at a fixed rate, and records each record's delivery
//! latency — from its send time, or from its intended send time in open loop, so a stalled
//! broker shows up as latency rather than as fewer samples (coordinated omission).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaErrorCode;
use serde::Serialize;

use crate::args::ClientKind;
use crate::client_stats::{ClientStats, ClientStatsSummary};
use crate::latency::{Latency, LatencySummary};
use crate::librdkafka::log_to_stderr;
use crate::payload::{Clock, Keys, Payload};
use crate::timeline::PerSecond;
use crate::units::{mb_per_s, per_s};

/// What one producer thread does.
#[derive(Debug, Clone)]
pub struct ProducerJob {
    /// The client library the job uses.
    pub client: ClientKind,
    /// `--client lograil`: tokio worker threads of the job's runtime (0: current-thread).
    pub tokio_workers: usize,
    /// The librdkafka producer properties (translated for `--client lograil`).
    pub config: ClientConfig,
    /// The topic to produce to; the client's partitioner picks the partition.
    pub topic: String,
    /// Records this producer sends.
    pub messages: u64,
    /// Bytes of each record's value, the send-time stamp included.
    pub message_size: usize,
    /// The record keys, if records are keyed.
    pub keys: Keys,
    /// Open loop: time between two sends of this producer.
    pub interval: Option<Duration>,
    /// Open loop: this producer's first send is this far into the run (staggers producers).
    pub phase: Duration,
    /// Converts send instants to the µs since the Unix epoch stamped in each value.
    pub clock: Clock,
    /// Latency is measured for records sent from this time on (µs since the Unix epoch;
    /// `--warmup-ms`).
    pub measure_from_us: u64,
    /// Give up (and report the run as timed out) at this instant.
    pub deadline: Instant,
    /// Records acknowledged by the broker, all producers together.
    pub acked_total: Arc<AtomicU64>,
    /// Start of the run's measured phase: acknowledgements are counted per second since it.
    pub epoch: Instant,
    /// Keep each acknowledged record's send time and latency ([`ProducerOutcome::samples`]).
    pub keep_samples: bool,
    /// `--transaction-ms`: send in transactions.
    pub transaction: Option<Transaction>,
}

/// A transactional producer's id and how often it commits.
#[derive(Debug, Clone)]
pub struct Transaction {
    /// The producer's `transactional.id`.
    pub id: String,
    /// Commit the open transaction once it is this old (checked after each send).
    pub every: Duration,
}

/// How long a transactional call (init, commit) may take.
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(30);

/// What one producer thread did.
#[derive(Debug, Clone, Default)]
pub struct ProducerOutcome {
    /// Records handed to the client library (not necessarily acknowledged).
    pub sent: u64,
    /// Records the broker acknowledged.
    pub acked: u64,
    /// Records whose delivery failed.
    pub failed: u64,
    /// Value and key bytes of the acknowledged records.
    pub acked_bytes: u64,
    /// The first delivery error, if any delivery failed.
    pub first_error: Option<String>,
    /// Delivery latency ((intended) send to acknowledgement) of the acknowledged records
    /// sent from [`ProducerJob::measure_from_us`] on.
    pub latency: Latency,
    /// (Intended) send time of the first record; `None` if none was sent.
    pub first_send: Option<Instant>,
    /// The last acknowledgement, or the last transaction's commit if later; `None` if
    /// neither happened.
    pub last_ack: Option<Instant>,
    /// Records acknowledged in each second since the job's epoch.
    pub per_second: PerSecond,
    /// With `keep_samples`: (intended send time in µs since the Unix epoch, delivery latency
    /// in µs) of each acknowledged record, in the order acknowledged.
    pub samples: Vec<(u64, u64)>,
    /// The deadline passed before every record was sent and its delivery reported.
    pub timed_out: bool,
    /// librdkafka's statistics: broker round trips and producer queueing.
    pub client_stats: ClientStats,
    /// `--transaction-ms`: transactions committed.
    pub transactions: u64,
}

#[derive(Debug, Default)]
struct Deliveries {
    latency: Latency,
    acked: u64,
    failed: u64,
    acked_bytes: u64,
    first_error: Option<String>,
    last_ack: Option<Instant>,
    per_second: PerSecond,
    samples: Vec<(u64, u64)>,
}

/// Receives delivery reports on librdkafka's polling thread. The delivery opaque of a record
/// is its (intended) send time in ns since the clock's anchor.
#[derive(Debug)]
struct DeliveryContext {
    clock: Clock,
    deliveries: Mutex<Deliveries>,
    stats: Mutex<ClientStats>,
    acked_total: Arc<AtomicU64>,
    epoch: Instant,
    keep_samples: bool,
    measure_from_us: u64,
}

impl DeliveryContext {
    fn lock(&self) -> std::sync::MutexGuard<'_, Deliveries> {
        self.deliveries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl ClientContext for DeliveryContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        log_to_stderr(level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        eprintln!("librdkafka producer error: {error}: {reason}");
    }

    fn stats(&self, statistics: Statistics) {
        self.stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add(&statistics);
    }
}

impl ProducerContext for DeliveryContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, sent_ns: usize) {
        let now = Instant::now();
        let sent = self.clock.instant(sent_ns as u64);
        let mut d = self.lock();
        match result {
            Ok(message) => {
                let latency = now.saturating_duration_since(sent);
                if self.clock.wall_us(sent) >= self.measure_from_us {
                    d.latency.record(latency);
                }
                if self.keep_samples {
                    let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
                    d.samples.push((self.clock.wall_us(sent), us));
                }
                d.acked += 1;
                d.acked_bytes += (message.payload_len() + message.key_len()) as u64;
                d.last_ack = Some(now);
                d.per_second.record(self.epoch, now);
                self.acked_total.fetch_add(1, Ordering::Relaxed);
            }
            Err((error, _)) => {
                d.failed += 1;
                if d.first_error.is_none() {
                    d.first_error = Some(error.to_string());
                }
            }
        }
    }
}

/// Creates the librdkafka producer, connects it (a Metadata request), waits at `start`, then
/// sends.
pub fn run_producer(job: ProducerJob, start: &Barrier) -> anyhow::Result<ProducerOutcome> {
    // Whatever happens in the set-up, pass the barrier once, or the other threads would wait
    // for this one forever.
    let setup = connect(&job);
    start.wait();
    let producer = setup?;

    let mut outcome = send_all(&job, &producer)?;
    let mut committed = None;
    if job.transaction.is_some() {
        producer
            .commit_transaction(TRANSACTION_TIMEOUT)
            .context("commit_transaction")?;
        outcome.transactions += 1;
        committed = Some(Instant::now());
    }
    if !wait_for_deliveries(&producer, outcome.sent, job.deadline) {
        outcome.timed_out = true;
    }
    take_deliveries(&producer, &mut outcome, committed);
    Ok(outcome)
}

/// Sends the job's records (in transactions, committed every [`Transaction::every`]), until
/// all are sent or the deadline passes; the deliveries are still to come.
fn send_all(
    job: &ProducerJob,
    producer: &ThreadedProducer<DeliveryContext>,
) -> anyhow::Result<ProducerOutcome> {
    let mut payload = Payload::new(job.message_size);
    let mut outcome = ProducerOutcome::default();
    let run_start = Instant::now();
    let mut began = Instant::now();
    if job.transaction.is_some() {
        producer.begin_transaction().context("begin_transaction")?;
    }
    for n in 0..job.messages {
        let intended = intended_send(job, run_start, n);
        if intended > job.deadline {
            outcome.timed_out = true;
            break;
        }
        outcome.first_send.get_or_insert(intended);
        payload.stamp(job.clock.wall_us(intended));
        let sent_ns = usize::try_from(job.clock.nanos(intended)).unwrap_or(usize::MAX);
        let mut record = BaseRecord::with_opaque_to(&job.topic, sent_ns).payload(payload.bytes());
        if let Some(key) = job.keys.get(n) {
            record = record.key(key);
        }
        if !send(producer, record, job.deadline)? {
            outcome.timed_out = true;
            break;
        }
        outcome.sent += 1;
        if let Some(t) = &job.transaction {
            if began.elapsed() >= t.every {
                producer
                    .commit_transaction(TRANSACTION_TIMEOUT)
                    .context("commit_transaction")?;
                outcome.transactions += 1;
                producer.begin_transaction().context("begin_transaction")?;
                began = Instant::now();
            }
        }
    }
    Ok(outcome)
}

/// When record `n` is sent: now in closed loop; in open loop its slot after `run_start`,
/// slept until.
fn intended_send(job: &ProducerJob, run_start: Instant, n: u64) -> Instant {
    match job.interval {
        Some(interval) => {
            let at = run_start + job.phase + interval.mul_f64(n as f64);
            let now = Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
            at
        }
        None => Instant::now(),
    }
}

/// Hands `record` to librdkafka, waiting while its queue is full; `false` when the deadline
/// passes first.
fn send(
    producer: &ThreadedProducer<DeliveryContext>,
    mut record: BaseRecord<'_, str, [u8], usize>,
    deadline: Instant,
) -> anyhow::Result<bool> {
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(true),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                // librdkafka's queue is full: the broker is behind. Wait for deliveries.
                record = back;
                if Instant::now() > deadline {
                    return Ok(false);
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            Err((e, _)) => return Err(e).context("producing a record"),
        }
    }
}

/// Waits for every delivery report of the `sent` records (the polling thread records them);
/// `false` when the deadline passes first.
fn wait_for_deliveries(
    producer: &ThreadedProducer<DeliveryContext>,
    sent: u64,
    deadline: Instant,
) -> bool {
    loop {
        let done = {
            let d = producer.context().lock();
            d.acked + d.failed
        };
        if done >= sent {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Moves the delivery reports and librdkafka's statistics into `outcome`; `committed` is when
/// the last transaction was committed.
fn take_deliveries(
    producer: &ThreadedProducer<DeliveryContext>,
    outcome: &mut ProducerOutcome,
    committed: Option<Instant>,
) {
    let d = std::mem::take(&mut *producer.context().lock());
    outcome.acked = d.acked;
    outcome.failed = d.failed;
    outcome.acked_bytes = d.acked_bytes;
    outcome.first_error = d.first_error;
    outcome.latency = d.latency;
    // A transactional run ends when its last transaction is committed.
    outcome.last_ack = d.last_ack.max(committed);
    outcome.per_second = d.per_second;
    outcome.samples = d.samples;
    outcome.client_stats = *producer
        .context()
        .stats
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
}

/// The producer, connected (a Metadata request) so that connecting is not timed.
fn connect(job: &ProducerJob) -> anyhow::Result<ThreadedProducer<DeliveryContext>> {
    let context = DeliveryContext {
        clock: job.clock,
        deliveries: Mutex::default(),
        stats: Mutex::default(),
        acked_total: job.acked_total.clone(),
        epoch: job.epoch,
        keep_samples: job.keep_samples,
        measure_from_us: job.measure_from_us,
    };
    let mut config = job.config.clone();
    if let Some(t) = &job.transaction {
        config.set("transactional.id", &t.id);
    }
    let producer: ThreadedProducer<DeliveryContext> = config
        .create_with_context(context)
        .context("creating the producer")?;
    producer
        .client()
        .fetch_metadata(Some(&job.topic), Duration::from_secs(10))
        .context("producer metadata")?;
    if job.transaction.is_some() {
        producer
            .init_transactions(TRANSACTION_TIMEOUT)
            .context("init_transactions")?;
    }
    Ok(producer)
}

/// The producers of a run together.
#[derive(Debug, Clone, Serialize)]
pub struct ProduceSummary {
    /// Producer threads.
    pub producers: usize,
    /// Records handed to the client libraries.
    pub records_sent: u64,
    /// Records the broker acknowledged.
    pub records_acked: u64,
    /// Records whose delivery failed.
    pub records_failed: u64,
    /// Value and key bytes acknowledged.
    pub bytes: u64,
    /// From the first send to the last acknowledgement.
    pub seconds: f64,
    /// `bytes` over `seconds`, in MB/s (10^6 bytes).
    pub mb_per_s: f64,
    /// Acknowledged records per second of `seconds`.
    pub records_per_s: f64,
    /// Open loop: the rate asked for, records/s.
    pub target_rate: Option<f64>,
    /// Per record, from (intended) send to acknowledgement.
    pub delivery_latency: LatencySummary,
    /// From librdkafka's statistics (approximate, see `client_stats`).
    pub librdkafka: ClientStatsSummary,
    /// The first delivery error of the first producer that had one.
    pub first_error: Option<String>,
    /// Some producer hit the deadline (`--timeout-secs`): the run is incomplete.
    pub timed_out: bool,
    /// `--transaction-ms`: transactions committed, all producers.
    pub transactions: u64,
    /// The merged delivery latency histogram (for `--plot`; not in the JSON).
    #[serde(skip)]
    pub delivery_histogram: Latency,
    /// Records acknowledged in each second of the run (for `--plot`; not in the JSON).
    #[serde(skip)]
    pub acked_per_second: PerSecond,
    /// Every producer's [`ProducerOutcome::samples`], in send order (for `--latency-file`;
    /// not in the JSON).
    #[serde(skip)]
    pub samples: Vec<(u64, u64)>,
}

impl ProduceSummary {
    /// Adds up the producers' outcomes.
    pub fn of(outcomes: &[ProducerOutcome], target_rate: Option<f64>) -> ProduceSummary {
        let mut latency = Latency::new();
        let mut stats = ClientStats::default();
        let mut per_second = PerSecond::new();
        for o in outcomes {
            latency.merge(&o.latency);
            stats.merge(&o.client_stats);
            per_second.merge(&o.per_second);
        }
        let first = outcomes.iter().filter_map(|o| o.first_send).min();
        let last = outcomes.iter().filter_map(|o| o.last_ack).max();
        let seconds = match (first, last) {
            (Some(first), Some(last)) => last.saturating_duration_since(first).as_secs_f64(),
            _ => 0.0,
        };
        let mut samples: Vec<(u64, u64)> = outcomes
            .iter()
            .flat_map(|o| o.samples.iter().copied())
            .collect();
        samples.sort_unstable();
        let acked: u64 = outcomes.iter().map(|o| o.acked).sum();
        let bytes: u64 = outcomes.iter().map(|o| o.acked_bytes).sum();
        ProduceSummary {
            producers: outcomes.len(),
            records_sent: outcomes.iter().map(|o| o.sent).sum(),
            records_acked: acked,
            records_failed: outcomes.iter().map(|o| o.failed).sum(),
            bytes,
            seconds,
            mb_per_s: mb_per_s(bytes, seconds),
            records_per_s: per_s(acked, seconds),
            target_rate,
            delivery_latency: latency.summary(),
            librdkafka: stats.summary(),
            first_error: outcomes.iter().find_map(|o| o.first_error.clone()),
            timed_out: outcomes.iter().any(|o| o.timed_out),
            transactions: outcomes.iter().map(|o| o.transactions).sum(),
            delivery_histogram: latency,
            acked_per_second: per_second,
            samples,
        }
    }
}

impl ProduceSummary {
    /// Writes [`ProduceSummary::samples`] to `path` as text: `send_us latency_us`, one record a
    /// line (`--latency-file`).
    pub fn write_samples(&self, path: &std::path::Path) -> anyhow::Result<()> {
        use std::io::Write;
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut out = std::io::BufWriter::new(file);
        for (sent_us, latency_us) in &self.samples {
            writeln!(out, "{sent_us} {latency_us}")?;
        }
        out.flush()
            .with_context(|| format!("writing {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_spans_first_send_to_last_ack() {
        let t0 = Instant::now();
        let mut a = ProducerOutcome {
            sent: 10,
            acked: 10,
            acked_bytes: 10_000_000,
            first_send: Some(t0),
            last_ack: Some(t0 + Duration::from_millis(500)),
            ..ProducerOutcome::default()
        };
        a.latency.record_micros(100);
        let b = ProducerOutcome {
            sent: 10,
            acked: 9,
            failed: 1,
            acked_bytes: 10_000_000,
            first_error: Some("boom".into()),
            first_send: Some(t0 + Duration::from_millis(100)),
            last_ack: Some(t0 + Duration::from_secs(1)),
            ..ProducerOutcome::default()
        };
        let s = ProduceSummary::of(&[a, b], None);
        assert_eq!(s.records_sent, 20);
        assert_eq!(s.records_acked, 19);
        assert_eq!(s.records_failed, 1);
        assert!((s.seconds - 1.0).abs() < 1e-9);
        assert!((s.mb_per_s - 20.0).abs() < 1e-9);
        assert_eq!(s.delivery_latency.count, 1);
        assert_eq!(s.first_error.as_deref(), Some("boom"));
    }
}
