//! The `queue` mode: share-group workers (lograil's [`QueueConsumer`]) complete the records of
//! a filled topic one by one with explicit acknowledgements, measured against the plain fetch
//! rate of the same topic (lograil's group-less [`Consumer`] reading it whole) in the same run.
//!
//! Completed means acknowledged to the broker: each worker accepts every record it receives,
//! the acknowledgements ride on its next fetch, and the clock stops when every worker has
//! closed (its last acknowledgements sent) after the group completed `--messages` records.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use consumer::{Admin, ClientConfig, Consumer, QueueConsumer, TopicPartition};
use serde::Serialize;

use crate::args::QueueArgs;

/// What a `queue` run measured.
#[derive(Debug, Clone, Serialize)]
pub struct QueueReport {
    /// Records completed by the share group and fetched plainly: `--messages`, at most all
    /// the topic holds.
    pub records: u64,
    /// Share-group workers (`--workers`).
    pub workers: usize,
    /// Plain fetches of the same records: records per second.
    pub fetch_records_per_s: f64,
    /// Records completed (acknowledged) per second by the share group, from its first
    /// record until every worker has closed.
    pub completed_records_per_s: f64,
    /// `completed / fetch`.
    pub ratio: f64,
    /// From the workers' start to their first record (the group's first assignment).
    pub first_record_s: f64,
    /// Records appended to `__share_group_state` (the sum of its end offsets), per completed
    /// record; `None` without `--data-dir`.
    pub state_records_per_record: Option<f64>,
    /// Bytes the `.log` files of the broker's `__share_group_state` partitions under
    /// `--data-dir` grew by, per completed record; `None` without `--data-dir`.
    pub state_bytes_per_record: Option<f64>,
    /// Deliveries after a record's first (a lock ran out before its acknowledgement): a
    /// record delivered three times counts twice; each also counts as completed when
    /// acknowledged.
    pub redelivered: u64,
}

impl QueueReport {
    /// The human-readable report.
    pub fn human(&self) -> String {
        let mut out = format!(
            "{} records of the topic, {} share-group workers, explicit acks\n\
             plain fetch:        {:>12.0} records/s\n\
             completed (acked):  {:>12.0} records/s  = {:.2} x the fetch rate\n\
             first record after  {:>12.2} s (group join)\n\
             redelivered:        {:>12}\n",
            self.records,
            self.workers,
            self.fetch_records_per_s,
            self.completed_records_per_s,
            self.ratio,
            self.first_record_s,
            self.redelivered,
        );
        if let (Some(r), Some(b)) = (self.state_records_per_record, self.state_bytes_per_record) {
            out += &format!(
                "state log:          {r:>12.3} records and {b:.1} bytes per completed record\n"
            );
        }
        out
    }
}

/// Runs the mode: a plain fetch of the records, then the share group completing them. Fails
/// when the topic is missing or empty, or when `--timeout-secs` passes before the group has
/// completed the records.
pub fn run(args: &QueueArgs) -> anyhow::Result<QueueReport> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.tokio_workers.max(1))
        .enable_all()
        .build()
        .context("starting a tokio runtime")?;
    rt.block_on(measure(args))
}

async fn measure(args: &QueueArgs) -> anyhow::Result<QueueReport> {
    let mut admin = Admin::connect(&args.brokers).await?;
    let (partitions, records) = records_to_complete(&mut admin, args).await?;

    let fetch_s = plain_fetch(args, &partitions, records).await?;
    let state_before = match &args.data_dir {
        Some(dir) => Some((
            state_size(dir),
            state_records(&mut admin).await.unwrap_or(0),
        )),
        None => None,
    };

    let group = format!("lograil-bench-queue-{}", std::process::id());
    admin
        .alter_group_configs(&group, &[("share.auto.offset.reset", "earliest")])
        .await?;
    let run = complete(args, &group, records).await?;
    let completed = run.completed;
    let completed_s = run.done.duration_since(run.first).as_secs_f64();
    let state = match (state_before, args.data_dir.as_ref()) {
        (Some((bytes, records)), Some(dir)) => {
            let n = completed as f64;
            let grown = state_size(dir).saturating_sub(bytes) as f64;
            let appended = state_records(&mut admin).await.unwrap_or(records) - records;
            Some((appended as f64 / n, grown / n))
        }
        _ => None,
    };
    let fetch_rate = records as f64 / fetch_s;
    let completed_rate = completed as f64 / completed_s;
    Ok(QueueReport {
        records,
        workers: args.workers,
        fetch_records_per_s: fetch_rate,
        completed_records_per_s: completed_rate,
        ratio: completed_rate / fetch_rate,
        first_record_s: run.first.duration_since(run.started).as_secs_f64(),
        state_records_per_record: state.map(|s| s.0),
        state_bytes_per_record: state.map(|s| s.1),
        redelivered: run.redelivered,
    })
}

/// The topic's partitions, and the records to complete: `--messages`, at most those the
/// topic holds (an error when it holds none).
async fn records_to_complete(
    admin: &mut Admin,
    args: &QueueArgs,
) -> anyhow::Result<(Vec<i32>, u64)> {
    let topic = admin
        .describe_topic(&args.topic)
        .await
        .with_context(|| format!("topic {}: run `lograil-bench produce` first", args.topic))?;
    let partitions: Vec<i32> = (0..topic.partitions).collect();
    let ends = admin
        .list_offsets(&args.topic, topic.partitions, -1)
        .await?;
    let starts = admin
        .list_offsets(&args.topic, topic.partitions, -2)
        .await?;
    let available: i64 = ends.iter().zip(&starts).map(|(e, s)| e - s).sum();
    let records = args
        .messages
        .unwrap_or(u64::try_from(available).unwrap_or(0))
        .min(u64::try_from(available).unwrap_or(0));
    anyhow::ensure!(records > 0, "topic {} is empty", args.topic);
    Ok((partitions, records))
}

/// What the share group's workers count together.
#[derive(Debug, Default)]
struct Counts {
    completed: AtomicU64,
    redelivered: AtomicU64,
    /// When the first record was received.
    first: tokio::sync::OnceCell<Instant>,
}

/// How the share group completed the records.
struct Completion {
    completed: u64,
    redelivered: u64,
    /// The workers' start, their first record, and when the last of them had closed.
    started: Instant,
    first: Instant,
    done: Instant,
}

/// Runs `--workers` share-group workers of `group` until together they have completed
/// `records` records (an error when `--timeout-secs` passes first).
async fn complete(args: &QueueArgs, group: &str, records: u64) -> anyhow::Result<Completion> {
    let counts = Arc::new(Counts::default());
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.timeout_secs);
    let mut workers = Vec::new();
    for _ in 0..args.workers {
        let config = ClientConfig::new()
            .with("bootstrap.servers", args.brokers.as_str())
            .with("group.id", group)
            .with("share.acknowledgement.mode", "explicit")
            .with("max.poll.records", args.max_poll_records.to_string());
        let target = Target {
            topic: args.topic.clone(),
            records,
            deadline,
        };
        workers.push(tokio::spawn(work(config, target, counts.clone())));
    }
    for worker in workers {
        worker.await??;
    }
    let done = Instant::now();
    let completed = counts.completed.load(Ordering::Relaxed);
    anyhow::ensure!(
        completed >= records,
        "timed out: {completed} of {records} records completed"
    );
    let first = *counts.first.get().context("no record was delivered")?;
    Ok(Completion {
        completed,
        redelivered: counts.redelivered.load(Ordering::Relaxed),
        started,
        first,
        done,
    })
}

/// What a worker works on: the topic, until the group has completed `records` or `deadline`.
struct Target {
    topic: String,
    records: u64,
    deadline: Instant,
}

/// One worker: receives, accepts every record it gets and counts it, then closes (sending its
/// last acknowledgements).
async fn work(config: ClientConfig, target: Target, counts: Arc<Counts>) -> anyhow::Result<()> {
    let queue = QueueConsumer::from_config(&config).await?;
    queue.subscribe(&[target.topic.as_str()]);
    while counts.completed.load(Ordering::Relaxed) < target.records
        && Instant::now() < target.deadline
    {
        let batch = queue.receive(Duration::from_millis(200)).await?;
        if !batch.is_empty() {
            let _ = counts.first.set(Instant::now());
        }
        for delivery in batch {
            if delivery.delivery_count() > 1 {
                counts.redelivered.fetch_add(1, Ordering::Relaxed);
            }
            delivery.ack();
            counts.completed.fetch_add(1, Ordering::Relaxed);
        }
    }
    queue.close().await?;
    Ok(())
}

/// Seconds for one plain consumer (assigned every partition) to read `records` records.
async fn plain_fetch(args: &QueueArgs, partitions: &[i32], records: u64) -> anyhow::Result<f64> {
    let config = ClientConfig::new()
        .with("bootstrap.servers", args.brokers.as_str())
        .with("enable.auto.commit", "false");
    let consumer = Consumer::from_config(&config).await?;
    let assigned: Vec<TopicPartition> = partitions
        .iter()
        .map(|p| TopicPartition::new(args.topic.as_str(), *p))
        .collect();
    consumer.assign(&assigned)?;
    consumer.seek_to_beginning(&assigned)?;
    let started = Instant::now();
    let mut read = 0;
    while read < records {
        consumer.recv().await?;
        read += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    consumer.close().await;
    Ok(seconds)
}

/// Bytes in the broker's `__share_group_state` partitions under `dir`.
fn state_size(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("__share_group_state-")
        })
        .flat_map(|e| std::fs::read_dir(e.path()).into_iter().flatten().flatten())
        .filter(|f| f.file_name().to_string_lossy().ends_with(".log"))
        .filter_map(|f| f.metadata().ok())
        .map(|m| m.len())
        .sum()
}

async fn state_records(admin: &mut Admin) -> anyhow::Result<i64> {
    let topic = admin.describe_topic("__share_group_state").await?;
    let ends = admin
        .list_offsets("__share_group_state", topic.partitions, -1)
        .await?;
    Ok(ends.iter().sum())
}
