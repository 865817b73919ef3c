//! One consumer client on its own thread: assigned explicit partitions at explicit offsets (no
//! consumer group, nothing committed), it reads until its stop rule says so, counting records
//! and bytes and, for end-to-end runs, the latency from each record's stamped send time.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::Context;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde::Serialize;

use crate::args::ClientKind;
use crate::latency::{Latency, LatencySummary};
use crate::librdkafka::StderrLog;
use crate::payload::{read_stamp, wall_us_now};
use crate::timeline::PerSecond;
use crate::units::{mb_per_s, per_s};

/// A partition to read: from `start`, up to (not including) `end` if given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionRange {
    /// The partition number.
    pub partition: i32,
    /// The first offset to read.
    pub start: i64,
    /// One past the last offset to read; `None`: read until the stop rule holds.
    pub end: Option<i64>,
}

/// When consumers stop (whichever comes first).
#[derive(Debug, Clone)]
pub struct StopRule {
    /// Records read by all consumers together.
    pub consumed_total: Arc<AtomicU64>,
    /// Stop once all consumers together have read this many.
    pub limit: Option<u64>,
    /// End-to-end: stop once the producers are done and every acknowledged record was read.
    pub producers_done: Option<(Arc<AtomicBool>, Arc<AtomicU64>)>,
    /// Give up (and report the run as timed out) at this instant.
    pub deadline: Instant,
}

impl StopRule {
    /// Whether the consumers are done.
    pub fn reached(&self) -> bool {
        let consumed = self.consumed_total.load(Ordering::Relaxed);
        if self.limit.is_some_and(|limit| consumed >= limit) {
            return true;
        }
        if let Some((done, acked)) = &self.producers_done {
            if done.load(Ordering::Acquire) && consumed >= acked.load(Ordering::Relaxed) {
                return true;
            }
        }
        false
    }
}

/// What one consumer thread does.
#[derive(Debug, Clone)]
pub struct ConsumerJob {
    /// The client library the job uses.
    pub client: ClientKind,
    /// `--client lograil`: tokio worker threads of the job's runtime (0: current-thread).
    pub tokio_workers: usize,
    /// The librdkafka consumer properties (translated for `--client lograil`).
    pub config: ClientConfig,
    /// The topic to read.
    pub topic: String,
    /// The partitions this consumer reads, assigned at their start offsets.
    pub partitions: Vec<PartitionRange>,
    /// Record end-to-end latency from the stamp in each value.
    pub measure_latency: bool,
    /// Only for records stamped at or after this time (µs since the Unix epoch; `--warmup-ms`).
    pub measure_from_us: u64,
    /// When to stop, shared by all the run's consumers.
    pub stop: StopRule,
    /// Start of the run's measured phase: records read are counted per second since it.
    pub epoch: Instant,
}

/// What one consumer thread did.
#[derive(Debug, Clone, Default)]
pub struct ConsumerOutcome {
    /// Records read.
    pub records: u64,
    /// Value and key bytes.
    pub bytes: u64,
    /// Errors polled instead of a record (the consumer goes on polling).
    pub errors: u64,
    /// The first of those errors.
    pub first_error: Option<String>,
    /// End-to-end latency of the records read that were stamped from
    /// [`ConsumerJob::measure_from_us`] on (only with [`ConsumerJob::measure_latency`]).
    pub latency: Latency,
    /// When the partitions were assigned; `None` if there was none to read.
    pub assigned_at: Option<Instant>,
    /// When the first record arrived; `None` if none did.
    pub first_record: Option<Instant>,
    /// When the last record arrived; `None` if none did.
    pub last_record: Option<Instant>,
    /// Records read in each second since the job's epoch.
    pub per_second: PerSecond,
    /// The deadline passed before the consumer was done.
    pub timed_out: bool,
}

/// Creates the librdkafka consumer, assigns its partitions, waits at `ready` (so producers
/// start only after every consumer is fetching), then reads until the stop rule holds.
pub fn run_consumer(job: ConsumerJob, ready: &Barrier) -> anyhow::Result<ConsumerOutcome> {
    // Whatever happens in the set-up, pass the barrier once, or the other threads would wait
    // for this one forever.
    let setup = assign(&job);
    ready.wait();
    let (consumer, mut outcome, mut open_ends, mut unfinished) = setup?;
    let bounded = job.partitions.iter().all(|r| r.end.is_some());
    if outcome.assigned_at.is_none() {
        return Ok(outcome); // no partition to read
    }
    loop {
        if bounded && unfinished == 0 {
            break;
        }
        if job.stop.reached() {
            break;
        }
        if Instant::now() > job.stop.deadline {
            outcome.timed_out = true;
            break;
        }
        let message = match consumer.poll(Duration::from_millis(100)) {
            None => continue,
            Some(Err(e)) => {
                outcome.errors += 1;
                if outcome.first_error.is_none() {
                    eprintln!("consumer error: {e}");
                    outcome.first_error = Some(e.to_string());
                }
                continue;
            }
            Some(Ok(message)) => message,
        };
        let now = Instant::now();
        if job.measure_latency {
            if let Some(sent_us) = message
                .payload()
                .and_then(read_stamp)
                .filter(|us| *us >= job.measure_from_us)
            {
                outcome
                    .latency
                    .record_micros(wall_us_now().saturating_sub(sent_us));
            }
        }
        outcome.records += 1;
        outcome.bytes += (message.payload_len() + message.key_len()) as u64;
        outcome.first_record.get_or_insert(now);
        outcome.last_record = Some(now);
        outcome.per_second.record(job.epoch, now);
        job.stop.consumed_total.fetch_add(1, Ordering::Relaxed);
        let end = usize::try_from(message.partition())
            .ok()
            .and_then(|p| open_ends.get_mut(p));
        if let Some(end_slot) = end {
            if end_slot.is_some_and(|end| message.offset() + 1 >= end) {
                *end_slot = None;
                unfinished = unfinished.saturating_sub(1);
            }
        }
    }
    Ok(outcome)
}

type Assigned = (
    BaseConsumer<StderrLog>,
    ConsumerOutcome,
    Vec<Option<i64>>,
    usize,
);

/// The consumer, assigned; the end offset of each partition still to finish (by partition
/// number) and how many those are.
fn assign(job: &ConsumerJob) -> anyhow::Result<Assigned> {
    let consumer: BaseConsumer<StderrLog> = job
        .config
        .create_with_context(StderrLog)
        .context("creating the consumer")?;
    let mut assignment = TopicPartitionList::new();
    let mut open_ends: Vec<Option<i64>> = Vec::new();
    let mut unfinished = 0usize;
    for range in &job.partitions {
        if range.end.is_some_and(|end| end <= range.start) {
            continue;
        }
        assignment
            .add_partition_offset(&job.topic, range.partition, Offset::Offset(range.start))
            .with_context(|| format!("assigning partition {}", range.partition))?;
        let index = usize::try_from(range.partition).context("negative partition")?;
        if open_ends.len() <= index {
            open_ends.resize(index + 1, None);
        }
        open_ends[index] = range.end;
        unfinished += usize::from(range.end.is_some());
    }
    let mut outcome = ConsumerOutcome::default();
    if assignment.count() > 0 {
        outcome.assigned_at = Some(Instant::now());
        consumer.assign(&assignment).context("assign")?;
    }
    Ok((consumer, outcome, open_ends, unfinished))
}

/// Deals `ranges` out to `consumers` round-robin by partition.
pub fn deal(ranges: &[PartitionRange], consumers: usize) -> Vec<Vec<PartitionRange>> {
    let mut out = vec![Vec::new(); consumers.max(1)];
    let n = out.len();
    for (i, range) in ranges.iter().enumerate() {
        out[i % n].push(*range);
    }
    out
}

/// The consumers of a run together.
#[derive(Debug, Clone, Serialize)]
pub struct ConsumeSummary {
    /// Consumer threads.
    pub consumers: usize,
    /// Records read by all consumers.
    pub records: u64,
    /// Value and key bytes read.
    pub bytes: u64,
    /// From the first assign (consume) or the first record (end-to-end) to the last record.
    pub seconds: f64,
    /// `bytes` over `seconds`, in MB/s (10^6 bytes).
    pub mb_per_s: f64,
    /// `records` over `seconds`.
    pub records_per_s: f64,
    /// From the first assign to the first record, ms.
    pub first_record_after_ms: Option<f64>,
    /// End-to-end runs: per record, from its stamped (intended) send time to its consumption.
    pub end_to_end_latency: Option<LatencySummary>,
    /// Errors polled instead of a record, all consumers.
    pub errors: u64,
    /// The first consumer error of the first consumer that had one.
    pub first_error: Option<String>,
    /// Some consumer hit the deadline (`--timeout-secs`): the run is incomplete.
    pub timed_out: bool,
    /// End-to-end runs: the merged latency histogram (for `--plot`; not in the JSON).
    #[serde(skip)]
    pub end_to_end_histogram: Option<Latency>,
    /// Records read in each second of the run (for `--plot`; not in the JSON).
    #[serde(skip)]
    pub read_per_second: PerSecond,
}

impl ConsumeSummary {
    /// Adds up the consumers' outcomes.
    pub fn of(outcomes: &[ConsumerOutcome], latency: bool) -> ConsumeSummary {
        let mut hist = Latency::new();
        let mut per_second = PerSecond::new();
        for o in outcomes {
            hist.merge(&o.latency);
            per_second.merge(&o.per_second);
        }
        let assigned = outcomes.iter().filter_map(|o| o.assigned_at).min();
        let first = outcomes.iter().filter_map(|o| o.first_record).min();
        let last = outcomes.iter().filter_map(|o| o.last_record).max();
        // End-to-end consumers wait for the producers, so their rate counts from the first
        // record; a plain consume counts from the assign (the fetches start there).
        let from = if latency { first } else { assigned };
        let seconds = match (from, last) {
            (Some(a), Some(l)) => l.saturating_duration_since(a).as_secs_f64(),
            _ => 0.0,
        };
        let records = outcomes.iter().map(|o| o.records).sum();
        let bytes = outcomes.iter().map(|o| o.bytes).sum();
        ConsumeSummary {
            consumers: outcomes.len(),
            records,
            bytes,
            seconds,
            mb_per_s: mb_per_s(bytes, seconds),
            records_per_s: per_s(records, seconds),
            first_record_after_ms: match (assigned, first) {
                (Some(a), Some(f)) => Some(f.saturating_duration_since(a).as_secs_f64() * 1e3),
                _ => None,
            },
            end_to_end_latency: latency.then(|| hist.summary()),
            errors: outcomes.iter().map(|o| o.errors).sum(),
            first_error: outcomes.iter().find_map(|o| o.first_error.clone()),
            timed_out: outcomes.iter().any(|o| o.timed_out),
            end_to_end_histogram: latency.then_some(hist),
            read_per_second: per_second,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(partition: i32) -> PartitionRange {
        PartitionRange {
            partition,
            start: 0,
            end: Some(10),
        }
    }

    #[test]
    fn partitions_are_dealt_round_robin() {
        let ranges: Vec<_> = (0..5).map(range).collect();
        let dealt = deal(&ranges, 2);
        let parts = |v: &Vec<PartitionRange>| v.iter().map(|r| r.partition).collect::<Vec<_>>();
        assert_eq!(parts(&dealt[0]), vec![0, 2, 4]);
        assert_eq!(parts(&dealt[1]), vec![1, 3]);
        assert_eq!(deal(&ranges, 0).len(), 1);
        assert_eq!(deal(&ranges[..1], 3)[2].len(), 0);
    }

    #[test]
    fn stop_rule_limits() {
        let consumed = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicU64::new(5));
        let rule = StopRule {
            consumed_total: consumed.clone(),
            limit: Some(10),
            producers_done: Some((done.clone(), acked)),
            deadline: Instant::now() + Duration::from_secs(60),
        };
        consumed.store(5, Ordering::Relaxed);
        assert!(!rule.reached(), "producers still running");
        done.store(true, Ordering::Release);
        assert!(rule.reached(), "all acknowledged records read");
        done.store(false, Ordering::Release);
        consumed.store(10, Ordering::Relaxed);
        assert!(rule.reached(), "limit");
    }

    #[test]
    fn summary_measures_from_assign() {
        let t0 = Instant::now();
        let o = ConsumerOutcome {
            records: 1000,
            bytes: 2_000_000,
            assigned_at: Some(t0),
            first_record: Some(t0 + Duration::from_millis(10)),
            last_record: Some(t0 + Duration::from_secs(2)),
            ..ConsumerOutcome::default()
        };
        let s = ConsumeSummary::of(&[o], false);
        assert!((s.mb_per_s - 1.0).abs() < 1e-9);
        assert!((s.records_per_s - 500.0).abs() < 1e-9);
        assert!(s.end_to_end_latency.is_none());
        let first = s.first_record_after_ms.unwrap();
        assert!((first - 10.0).abs() < 1e-6);
    }
}
