//! The `share-spike` mode: the `spike` mode's load spike ([`crate::spike`]: its open-loop load,
//! phases, calibration and goodput accounting) against share-group workers instead of a
//! consumer group, with clients that have deadlines and retry (issue 27).
//!
//! - Workers: `--workers` queue consumers (lograil's [`QueueConsumer`], explicit acks,
//!   `--max-poll-records` each) in one share group, completing `--capacity` records per second
//!   between them (each its even share, simulated work).
//! - Deadlines: every record carries its task's deadline (intended send time + `--deadline-ms`)
//!   in the `deadline` header, so lograil archives a record whose deadline has passed instead of
//!   delivering it (`--no-deadline-header`: the broker is not told, for contrast).
//! - Retries: a client waits for its task until the deadline; a task not completed by then is
//!   resubmitted once (`--retries`), with a fresh stamp and deadline, while the first attempt
//!   may still be queued: the retry loop that sustains a metastable failure (the seed's
//!   simulation, "FIFO, 3 retries"). The producer's own delivery timeout is still half the
//!   deadline (librdkafka retries within it).
//!
//! `--group-config NAME=VALUE` sets configs on the run's share group (not the calibration's),
//! e.g. `lograil.share.overload.target.ms=500` for the overload mode. The JSON it writes is a
//! `spike` report (so `spike-plot` draws it) with a `share` object beside.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use consumer::{Admin, ClientConfig, Delivery, QueueConsumer};
use serde::{Deserialize, Serialize};

use crate::payload::{read_stamp, wall_us_now};
use crate::spike::{
    count, read_task, run_with, Clients, ConsumeFn, Counts, SpikeArgs, SpikeReport,
};

/// Flags of the `share-spike` mode: the `spike` mode's and these.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct ShareSpikeArgs {
    /// The `spike` mode's flags.
    #[command(flatten)]
    #[serde(flatten)]
    pub spike: SpikeArgs,
    /// Share-group workers; each completes --capacity / --workers records per second.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Each worker's `max.poll.records` (records it holds locked at once, at most).
    #[arg(long, default_value_t = 20)]
    pub max_poll_records: u32,
    /// Times a client resubmits a task not completed by its deadline.
    #[arg(long, default_value_t = 1)]
    pub retries: u32,
    /// Do not put the deadline in the `deadline` header (the broker cannot drop expired
    /// records).
    #[arg(long)]
    pub no_deadline_header: bool,
    /// A config of the run's share group, NAME=VALUE (repeatable).
    #[arg(long = "group-config", value_name = "NAME=VALUE")]
    pub group_config: Vec<String>,
}

/// The `share` object of the JSON: what the share-group run adds to a spike report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShareExtras {
    /// Share-group workers (`--workers`).
    pub workers: usize,
    /// Each worker's `max.poll.records` (`--max-poll-records`).
    pub max_poll_records: u32,
    /// Resubmissions of a task at most (`--retries`).
    pub retries: u32,
    /// Records carried their deadline in the `deadline` header (not
    /// `--no-deadline-header`).
    pub deadline_header: bool,
    /// Configs set on the run's share group, as NAME=VALUE (`--group-config`).
    pub group_config: Vec<String>,
    /// Resubmissions in the whole run.
    pub retried: u64,
}

/// What a `share-spike` run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShareSpikeReport {
    /// The spike report; its fields sit at the top level of the JSON.
    #[serde(flatten)]
    pub report: SpikeReport,
    /// What the share-group run adds.
    pub share: ShareExtras,
}

impl ShareSpikeReport {
    /// The human-readable report: a line on the share group, then the spike report.
    pub fn human(&self) -> String {
        let s = &self.share;
        format!(
            "share group: {} workers, max.poll.records {}, {} retr{} a task, deadline header {}, group configs {:?}; {} resubmitted\n{}",
            s.workers,
            s.max_poll_records,
            s.retries,
            if s.retries == 1 { "y" } else { "ies" },
            if s.deadline_header { "on" } else { "off" },
            s.group_config,
            s.retried,
            self.report.human()
        )
    }
}

/// Runs the mode.
pub fn run(args: &ShareSpikeArgs) -> anyhow::Result<ShareSpikeReport> {
    anyhow::ensure!(args.workers > 0, "--workers must be positive");
    let mut group_config = Vec::new();
    for pair in &args.group_config {
        let (k, v) = pair
            .split_once('=')
            .with_context(|| format!("{pair}: expected NAME=VALUE"))?;
        group_config.push((k.trim().to_string(), v.trim().to_string()));
    }
    let clients = Clients {
        retries: args.retries,
        deadline_header: !args.no_deadline_header,
        completed: Arc::default(),
    };
    let workers = Workers {
        count: args.workers,
        max_poll_records: args.max_poll_records,
        group_config,
        clients: clients.clone(),
    };
    let consume: ConsumeFn = Arc::new(move |a, topic, group, joined, counts, stop| {
        workers.consume(a, topic, group, joined, counts, stop)
    });
    let report = run_with(&args.spike, consume, Some(&clients))?;
    let retried = report.seconds.iter().map(|s| s.retried).sum();
    Ok(ShareSpikeReport {
        report,
        share: ShareExtras {
            workers: args.workers,
            max_poll_records: args.max_poll_records,
            retries: args.retries,
            deadline_header: !args.no_deadline_header,
            group_config: args.group_config.clone(),
            retried,
        },
    })
}

/// The share-group side of a run.
struct Workers {
    count: usize,
    max_poll_records: u32,
    /// Set on the run's group (`--group`) only.
    group_config: Vec<(String, String)>,
    clients: Clients,
}

impl Workers {
    fn consume(
        &self,
        args: &SpikeArgs,
        topic: &str,
        group: &str,
        joined: SyncSender<Instant>,
        counts: &Counts,
        stop: &AtomicBool,
    ) -> anyhow::Result<()> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("starting a tokio runtime")?;
        rt.block_on(self.run_workers(args, topic, group, joined, counts, stop))
    }

    async fn run_workers(
        &self,
        args: &SpikeArgs,
        topic: &str,
        group: &str,
        joined: SyncSender<Instant>,
        counts: &Counts,
        stop: &AtomicBool,
    ) -> anyhow::Result<()> {
        self.configure_group(args, group).await?;
        // The workers run on the runtime; the stop flag is the caller's, so they are joined
        // here before it returns.
        let crew = Arc::new(Crew::default());
        let per_record = Duration::from_secs_f64(self.count as f64 / args.capacity);
        let deadline_us = args.deadline_ms * 1000;
        let mut tasks = Vec::new();
        for _ in 0..self.count {
            let worker = Worker {
                config: ClientConfig::new()
                    .with("bootstrap.servers", args.brokers.as_str())
                    .with("group.id", group)
                    .with("share.acknowledgement.mode", "explicit")
                    .with("max.poll.records", self.max_poll_records.to_string()),
                topic: topic.to_string(),
                per_record,
                deadline_us,
                crew: crew.clone(),
                counts: counts.clone(),
                completed: self.clients.completed.clone(),
            };
            tasks.push(tokio::spawn(worker.run()));
        }
        let join_by = Instant::now() + Duration::from_secs(60);
        while crew.assigned.load(Ordering::Relaxed) < self.count {
            if stop.load(Ordering::Relaxed) || Instant::now() > join_by {
                crew.stop.store(true, Ordering::Relaxed);
                anyhow::bail!("the share-group workers did not all join {group}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let start = Instant::now();
        let _ = crew.started.set(start);
        let _ = joined.send(start);
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        crew.stop.store(true, Ordering::Relaxed);
        for task in tasks {
            task.await??;
        }
        Ok(())
    }

    /// Sets `share.auto.offset.reset=earliest` on `group`, and `--group-config` too when it
    /// is the run's group (not the calibration's).
    async fn configure_group(&self, args: &SpikeArgs, group: &str) -> anyhow::Result<()> {
        let mut admin = Admin::connect(&args.brokers).await?;
        let mut config = vec![("share.auto.offset.reset", "earliest")];
        if group == args.group {
            config.extend(
                self.group_config
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            );
        }
        admin
            .alter_group_configs(group, &config)
            .await
            .with_context(|| format!("setting {config:?} on share group {group}"))?;
        Ok(())
    }
}

/// What the workers of one run share.
#[derive(Debug, Default)]
struct Crew {
    /// Workers that have been assigned the partition.
    assigned: AtomicUsize,
    /// The instant the run's seconds count from, once every worker has joined.
    started: tokio::sync::OnceCell<Instant>,
    /// Set when the workers are to close.
    stop: AtomicBool,
}

/// One share-group worker: completes the records it receives at its even share of
/// `--capacity`, counting each as useful or late.
struct Worker {
    config: ClientConfig,
    topic: String,
    /// The simulated work: one record per `per_record`.
    per_record: Duration,
    /// A record is late once this long has passed since its stamp.
    deadline_us: u64,
    crew: Arc<Crew>,
    counts: Counts,
    /// Tasks completed within their deadline.
    completed: Arc<Mutex<HashSet<u64>>>,
}

impl Worker {
    async fn run(self) -> anyhow::Result<()> {
        let queue = QueueConsumer::from_config(&self.config).await?;
        queue.subscribe(&[self.topic.as_str()]);
        let mut counted = false;
        let mut free_at = Instant::now();
        while !self.crew.stop.load(Ordering::Relaxed) {
            if !counted && !queue.assignment().is_empty() {
                counted = true;
                self.crew.assigned.fetch_add(1, Ordering::Relaxed);
            }
            let batch = queue.receive(Duration::from_millis(50)).await?;
            let Some(&start) = self.crew.started.get() else {
                // Not counted yet: the others are still joining.
                for d in batch {
                    d.release(Duration::ZERO);
                }
                continue;
            };
            for delivery in batch {
                self.complete(delivery, start, &mut free_at).await;
            }
        }
        queue.close().await?;
        Ok(())
    }

    /// Works on one record (until `free_at`, then one `per_record` more), acknowledges it
    /// and counts it in its second since `start`: useful, or late (past its deadline).
    async fn complete(&self, delivery: Delivery, start: Instant, free_at: &mut Instant) {
        // The simulated work: one record per `per_record`.
        let now = Instant::now();
        if *free_at > now {
            tokio::time::sleep(*free_at - now).await;
        }
        *free_at = (*free_at).max(now) + self.per_record;
        delivery.ack();
        let value = delivery.value.as_deref().unwrap_or_default();
        let Some(stamp) = read_stamp(value) else {
            return;
        };
        let late = wall_us_now().saturating_sub(stamp) > self.deadline_us;
        if !late {
            if let Some(task) = read_task(value) {
                self.completed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(task);
            }
        }
        let second = start.elapsed().as_secs() as usize;
        count(&self.counts, second, |s| match late {
            true => s.late += 1,
            false => s.useful += 1,
        });
    }
}
