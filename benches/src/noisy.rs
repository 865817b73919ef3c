//! The `noisy` mode: a noisy neighbour in a share group (issue 27). Tenant A floods the queue
//! with `--flood` tasks at once, then tenants B, C and D submit `--few` each right after
//! (interleaved); `--workers` share-group workers (lograil's [`QueueConsumer`], explicit acks,
//! `max.poll.records` 1 by default, as a task queue's workers take one task at a time) each
//! spend `--service-ms` on every task (a sleep). Each task carries its submit time (the first 8
//! bytes of its value) and its tenant as its key; its *wait* is from submit to the start of its
//! service.
//!
//! Three runs, in this order, each on a fresh one-partition topic with a fresh group (the queue
//! empty, the workers joined before the first task is sent):
//!
//! 1. `idle`: B, C and D alone, the baseline of their wait;
//! 2. `fifo`: A's flood then B, C, D, the group without a fairness config (offset order);
//! 3. `fair`: the same with `--fair-config` (default `lograil.share.fairness.key=key`).
//!
//! Reported per run and tenant: the wait's p50, p99 and max, and the tenant's completion time
//! (its first submit to its last task's end); the targets of issue 27 are B/C/D's p99 wait under
//! fair turns at most 2x their idle wait, and A's completion time under fair turns within 5 % of
//! FIFO's (fair turns are work-conserving).
//!
//! Then the throughput check: `--throughput-records` records over `--throughput-tenants`
//! tenants (drawn at random, the same draws every run) fill a topic first, and the workers
//! complete them with no service time (`max.poll.records` 500), once without and once with the
//! fairness config: completed records per second both ways, in the same run (target: fair at
//! least 0.8 of FIFO).

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use consumer::{Admin, ClientConfig, Producer, ProducerRecord, QueueConsumer};
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::payload::{read_stamp, wall_us_now, Payload};

/// Flags of the `noisy` mode.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct NoisyArgs {
    /// Bootstrap broker address (lograil).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub brokers: String,
    /// Prefix of the topics (and groups) the runs create: PREFIX-RUN-PID.
    #[arg(long, default_value = "lograil-noisy")]
    pub topic_prefix: String,
    /// Tasks tenant A submits at once.
    #[arg(long, default_value_t = 10_000)]
    pub flood: u64,
    /// Tasks each of tenants B, C and D submits right after A's flood.
    #[arg(long, default_value_t = 20)]
    pub few: u64,
    /// Share-group workers, each a queue consumer of its own.
    #[arg(long, default_value_t = 8)]
    pub workers: usize,
    /// Each worker's time per task (a sleep), in ms.
    #[arg(long, default_value_t = 10.0)]
    pub service_ms: f64,
    /// Each worker's `max.poll.records` in the noisy-neighbour runs.
    #[arg(long, default_value_t = 1)]
    pub max_poll_records: u32,
    /// Size of each task's value (at least 8: the submit time).
    #[arg(long, default_value_t = 100)]
    pub message_size: usize,
    /// The group config of the fair run, as NAME=VALUE (repeatable); also the throughput
    /// check's fair half.
    #[arg(long = "fair-config", value_name = "NAME=VALUE", default_values_t = ["lograil.share.fairness.key=key".to_string()])]
    pub fair_config: Vec<String>,
    /// Which runs: any of idle, fifo, fair, throughput (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "idle,fifo,fair,throughput"
    )]
    pub runs: Vec<String>,
    /// Records of the throughput check (0: no throughput check).
    #[arg(long, default_value_t = 50_000)]
    pub throughput_records: u64,
    /// Tenants of the throughput check.
    #[arg(long, default_value_t = 100)]
    pub throughput_tenants: u64,
    /// Tokio worker threads shared by the producer and the workers.
    #[arg(long, default_value_t = 2)]
    pub tokio_workers: usize,
    /// Give up on a run after this many seconds.
    #[arg(long, default_value_t = 180)]
    pub timeout_secs: u64,
    /// Free text stored with the results.
    #[arg(long)]
    pub label: Option<String>,
    /// Write the parameters and results to this JSON file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw each tenant's wait (p50 and p99, idle / FIFO / fair) into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

/// One tenant's figures in one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TenantFigures {
    pub tenant: String,
    pub tasks: u64,
    pub wait_p50_ms: f64,
    pub wait_p99_ms: f64,
    pub wait_max_ms: f64,
    /// From the tenant's first submit to the end of its last task.
    pub completion_s: f64,
}

/// One run: the tenants' figures and the run's totals.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunFigures {
    pub run: String,
    pub group_config: Vec<(String, String)>,
    pub tenants: Vec<TenantFigures>,
    pub completed: u64,
    /// Deliveries of a task already delivered (a lock ran out, a worker left).
    pub redelivered: u64,
    /// From the first task's receipt to the last task's end.
    pub busy_s: f64,
    /// `completed / busy_s`.
    pub completed_per_s: f64,
    /// Fetches (receive calls) that returned records, all workers together.
    #[serde(default)]
    pub receives: u64,
}

/// What a `noisy` run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NoisyReport {
    pub args: NoisyArgs,
    pub runs: Vec<RunFigures>,
    /// B/C/D's worst p99 wait under fair turns over their worst idle p99 (target <= 2).
    pub fair_p99_over_idle: Option<f64>,
    /// The same under FIFO, for contrast.
    pub fifo_p99_over_idle: Option<f64>,
    /// A's completion time under fair turns over FIFO's (target <= 1.05).
    pub flood_completion_fair_over_fifo: Option<f64>,
    /// Completed records/s with fairness on over off, same run (target >= 0.8).
    pub throughput_fair_over_fifo: Option<f64>,
}

/// Runs the mode.
pub fn run(args: &NoisyArgs) -> anyhow::Result<NoisyReport> {
    anyhow::ensure!(args.message_size >= 8, "--message-size must be at least 8");
    anyhow::ensure!(args.workers > 0, "--workers must be positive");
    let fair = parse_pairs(&args.fair_config)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.tokio_workers.max(1))
        .enable_all()
        .build()
        .context("starting a tokio runtime")?;
    rt.block_on(async {
        let mut runs = Vec::new();
        let service = Duration::from_secs_f64(args.service_ms.max(0.0) / 1000.0);
        let small: Vec<Submit> = ["B", "C", "D"]
            .iter()
            .map(|t| Submit::new(t, args.few))
            .collect();
        let mut noisy = vec![Submit::new("A", args.flood)];
        noisy.extend(small.iter().cloned());
        // The same order without the flood: B, C and D interleaved.
        let mut idle = vec![Submit::new("A", 0)];
        idle.extend(small.iter().cloned());
        for name in &args.runs {
            let plan = match name.as_str() {
                "idle" => Plan::noisy("idle", &[], idle.clone(), service, args),
                "fifo" => Plan::noisy("fifo", &[], noisy.clone(), service, args),
                "fair" => Plan::noisy("fair", &fair, noisy.clone(), service, args),
                "throughput" if args.throughput_records > 0 => {
                    // FIFO then fair, back to back: the ratio is of the same run.
                    for (run, config) in [("throughput-fifo", &[][..]), ("throughput-fair", &fair)]
                    {
                        let plan = Plan {
                            run: run.to_string(),
                            config: config.to_vec(),
                            submits: vec![Submit {
                                tenant: String::new(),
                                tasks: args.throughput_records,
                            }],
                            random_tenants: Some(args.throughput_tenants.max(1)),
                            service: Duration::ZERO,
                            max_poll_records: 500,
                            fill_first: true,
                        };
                        let figures = run_once(args, &plan).await?;
                        eprintln!("{run}: {:.0} records/s completed", figures.completed_per_s);
                        runs.push(figures);
                    }
                    continue;
                }
                "throughput" => continue,
                other => anyhow::bail!("unknown run {other} (idle, fifo, fair, throughput)"),
            };
            let figures = run_once(args, &plan).await?;
            eprintln!("{}", human_run(&figures));
            runs.push(figures);
        }
        Ok(summarize(args.clone(), runs))
    })
}

fn parse_pairs(pairs: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    pairs
        .iter()
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .with_context(|| format!("{p}: expected NAME=VALUE"))
        })
        .collect()
}

/// `tasks` tasks of `tenant`, submitted together.
#[derive(Debug, Clone)]
struct Submit {
    tenant: String,
    tasks: u64,
}

impl Submit {
    fn new(tenant: &str, tasks: u64) -> Submit {
        Submit {
            tenant: tenant.to_string(),
            tasks,
        }
    }
}

/// One run's setup.
#[derive(Debug, Clone)]
struct Plan {
    run: String,
    config: Vec<(String, String)>,
    /// The first is sent whole, then the others interleaved task by task.
    submits: Vec<Submit>,
    /// Instead of the submits' tenants: each task's tenant drawn from this many.
    random_tenants: Option<u64>,
    service: Duration,
    max_poll_records: u32,
    /// Fill the topic before the workers start (throughput), instead of after they joined.
    fill_first: bool,
}

impl Plan {
    fn noisy(
        run: &str,
        config: &[(String, String)],
        submits: Vec<Submit>,
        service: Duration,
        args: &NoisyArgs,
    ) -> Plan {
        Plan {
            run: run.to_string(),
            config: config.to_vec(),
            submits,
            random_tenants: None,
            service,
            max_poll_records: args.max_poll_records,
            fill_first: false,
        }
    }

    fn total(&self) -> u64 {
        self.submits.iter().map(|s| s.tasks).sum()
    }

    /// The tenants in submit order: the first submit's tasks, then the others' in turn.
    fn order(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.total() as usize);
        let Some((first, rest)) = self.submits.split_first() else {
            return out;
        };
        for n in 0..first.tasks {
            out.push(match self.random_tenants {
                Some(count) => format!("t{:03}", splitmix(n) % count),
                None => first.tenant.clone(),
            });
        }
        let most = rest.iter().map(|s| s.tasks).max().unwrap_or(0);
        for n in 0..most {
            for s in rest.iter().filter(|s| n < s.tasks) {
                out.push(s.tenant.clone());
            }
        }
        out
    }
}

/// A fixed pseudo-random draw (splitmix64) of `n`.
fn splitmix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One completed task.
#[derive(Debug, Clone)]
struct Done {
    tenant: String,
    submit_us: u64,
    start_us: u64,
    end_us: u64,
}

/// What the workers share.
#[derive(Debug, Default)]
struct Tally {
    done: Mutex<Vec<Done>>,
    seen: Mutex<HashSet<i64>>,
    completed: AtomicU64,
    redelivered: AtomicU64,
    receives: AtomicU64,
    first_receipt_us: AtomicU64,
}

async fn run_once(args: &NoisyArgs, plan: &Plan) -> anyhow::Result<RunFigures> {
    let name = format!("{}-{}-{}", args.topic_prefix, plan.run, std::process::id());
    let mut admin = Admin::connect(&args.brokers).await?;
    admin
        .create_topic(&name, 1, &[])
        .await
        .with_context(|| format!("creating topic {name}"))?;
    let mut config: Vec<(&str, &str)> = vec![("share.auto.offset.reset", "earliest")];
    config.extend(plan.config.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    admin
        .alter_group_configs(&name, &config)
        .await
        .with_context(|| format!("setting {:?} on share group {name}", plan.config))?;
    let total = plan.total();
    let order = plan.order();
    if plan.fill_first {
        produce(args, &name, &order, 0, false).await?;
    }
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let joined = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for _ in 0..args.workers {
        let config = ClientConfig::new()
            .with("bootstrap.servers", args.brokers.as_str())
            .with("group.id", name.as_str())
            .with("share.acknowledgement.mode", "explicit")
            .with("max.poll.records", plan.max_poll_records.to_string());
        let (tally, stop, joined, topic) =
            (tally.clone(), stop.clone(), joined.clone(), name.clone());
        let service = plan.service;
        workers.push(tokio::spawn(async move {
            let queue = QueueConsumer::from_config(&config).await?;
            queue.subscribe(&[topic.as_str()]);
            let mut counted = false;
            while !stop.load(Ordering::Relaxed) {
                if !counted && !queue.assignment().is_empty() {
                    counted = true;
                    joined.fetch_add(1, Ordering::Relaxed);
                }
                let batch = queue.receive(Duration::from_millis(100)).await?;
                if !batch.is_empty() {
                    tally.receives.fetch_add(1, Ordering::Relaxed);
                }
                for delivery in batch {
                    let start_us = wall_us_now();
                    let _ = tally.first_receipt_us.compare_exchange(
                        0,
                        start_us,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                    if !service.is_zero() {
                        tokio::time::sleep(service).await;
                    }
                    delivery.ack();
                    let first = tally
                        .seen
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(delivery.offset);
                    if !first {
                        tally.redelivered.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let tenant = delivery
                        .key
                        .as_deref()
                        .map(|k| String::from_utf8_lossy(k).into_owned())
                        .unwrap_or_default();
                    let submit_us = delivery
                        .value
                        .as_deref()
                        .and_then(read_stamp)
                        .unwrap_or(start_us);
                    tally
                        .done
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(Done {
                            tenant,
                            submit_us,
                            start_us,
                            end_us: wall_us_now(),
                        });
                    if tally.completed.fetch_add(1, Ordering::Relaxed) + 1 >= total {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
            }
            queue.close().await?;
            anyhow::Ok(())
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    if !plan.fill_first {
        // Every worker holds the partition before the first task is sent.
        while joined.load(Ordering::Relaxed) < args.workers as u64 {
            anyhow::ensure!(
                Instant::now() < deadline,
                "{}: the workers did not join within --timeout-secs",
                plan.run
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // A worker's first fetch opens its share session: give them one round.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let flood = plan.submits.first().map_or(0, |s| s.tasks as usize);
        produce(args, &name, &order, flood, true).await?;
    }
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await??;
    }
    // Every worker has closed: its last acknowledgements are with the broker.
    let closed_us = wall_us_now();
    let completed = tally.completed.load(Ordering::Relaxed);
    anyhow::ensure!(
        completed >= total,
        "{}: timed out, {completed} of {total} tasks completed",
        plan.run
    );
    let done = std::mem::take(&mut *tally.done.lock().unwrap_or_else(PoisonError::into_inner));
    let first = tally.first_receipt_us.load(Ordering::Relaxed);
    // The throughput check's clock stops when the acknowledgements are in (a worker may
    // have taken thousands of records in one fetch); a noisy run's at the last task's end.
    let last = match plan.fill_first {
        true => closed_us,
        false => done.iter().map(|d| d.end_us).max().unwrap_or(first),
    };
    let busy_s = last.saturating_sub(first) as f64 / 1e6;
    Ok(RunFigures {
        run: plan.run.clone(),
        group_config: plan.config.clone(),
        tenants: if plan.random_tenants.is_some() {
            Vec::new()
        } else {
            tenant_figures(&done)
        },
        completed,
        redelivered: tally.redelivered.load(Ordering::Relaxed),
        busy_s,
        completed_per_s: completed as f64 / busy_s.max(1e-6),
        receives: tally.receives.load(Ordering::Relaxed),
    })
}

/// Producers the flood is split among, sending at once, so that it is in the queue before the
/// small tenants' tasks follow (one producer of one-record batches delivers ~1,000 a second).
const FLOOD_PRODUCERS: usize = 8;

/// Sends one task per entry of `order` (its tenant as the key), each stamped with its send
/// time. `one_by_one` (the noisy-neighbour runs): each task a batch of its own (a task queue's
/// producers submit tasks as they come, and share-group workers acquire whole batches), the
/// first `flood` tasks split among [`FLOOD_PRODUCERS`] producers and all acknowledged before
/// the rest is sent; else (the throughput fill) one producer, batches of about 20 tasks.
async fn produce(
    args: &NoisyArgs,
    topic: &str,
    order: &[String],
    flood: usize,
    one_by_one: bool,
) -> anyhow::Result<()> {
    let topic: Arc<str> = Arc::from(topic);
    let (flood, rest) = order.split_at(flood.min(order.len()));
    if !one_by_one {
        let batch = (20 * (args.message_size + 30)).to_string();
        let producer = producer(args, &[("linger.ms", "5"), ("batch.size", &batch)]).await?;
        send_all(&producer, &topic, order, args.message_size).await?;
        producer.close().await;
        return Ok(());
    }
    let single = [("linger.ms", "0"), ("batch.size", "1")];
    let mut producers = Vec::new();
    for _ in 0..FLOOD_PRODUCERS {
        producers.push(Arc::new(producer(args, &single).await?));
    }
    let chunk = flood.len().div_ceil(FLOOD_PRODUCERS).max(1);
    let mut sends = Vec::new();
    for (producer, tasks) in producers.iter().zip(flood.chunks(chunk)) {
        let (producer, topic, tasks) = (producer.clone(), topic.clone(), tasks.to_vec());
        let size = args.message_size;
        sends.push(tokio::spawn(async move {
            send_all(&producer, &topic, &tasks, size).await
        }));
    }
    for send in sends {
        send.await??;
    }
    if let Some(first) = producers.first() {
        send_all(first, &topic, rest, args.message_size).await?;
    }
    for producer in producers {
        if let Ok(producer) = Arc::try_unwrap(producer) {
            producer.close().await;
        }
    }
    Ok(())
}

async fn producer(args: &NoisyArgs, extra: &[(&str, &str)]) -> anyhow::Result<Producer> {
    let mut config = ClientConfig::new()
        .with("bootstrap.servers", args.brokers.as_str())
        .with("acks", "1");
    for (k, v) in extra {
        config = config.with(*k, *v);
    }
    Producer::from_config(&config)
        .await
        .context("starting a producer")
}

/// Sends `tenants`' tasks in order and waits for every acknowledgement.
async fn send_all(
    producer: &Producer,
    topic: &Arc<str>,
    tenants: &[String],
    size: usize,
) -> anyhow::Result<()> {
    let mut payload = Payload::new(size);
    let mut pending = Vec::with_capacity(tenants.len());
    for tenant in tenants {
        payload.stamp(wall_us_now());
        let record = ProducerRecord::new(topic.clone())
            .partition(0)
            .key(Bytes::copy_from_slice(tenant.as_bytes()))
            .value(Bytes::copy_from_slice(payload.bytes()));
        pending.push(producer.send(record).await?);
    }
    for delivery in pending {
        delivery.await.context("a task was not acknowledged")?;
    }
    Ok(())
}

/// Nearest-rank percentile of sorted `values`.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn tenant_figures(done: &[Done]) -> Vec<TenantFigures> {
    let mut by_tenant: BTreeMap<&str, Vec<&Done>> = BTreeMap::new();
    for d in done {
        by_tenant.entry(d.tenant.as_str()).or_default().push(d);
    }
    by_tenant
        .into_iter()
        .map(|(tenant, tasks)| {
            let mut waits: Vec<f64> = tasks
                .iter()
                .map(|d| d.start_us.saturating_sub(d.submit_us) as f64 / 1000.0)
                .collect();
            waits.sort_by(f64::total_cmp);
            let first = tasks.iter().map(|d| d.submit_us).min().unwrap_or(0);
            let last = tasks.iter().map(|d| d.end_us).max().unwrap_or(first);
            TenantFigures {
                tenant: tenant.to_string(),
                tasks: tasks.len() as u64,
                wait_p50_ms: percentile(&waits, 50.0),
                wait_p99_ms: percentile(&waits, 99.0),
                wait_max_ms: waits.last().copied().unwrap_or(0.0),
                completion_s: last.saturating_sub(first) as f64 / 1e6,
            }
        })
        .collect()
}

fn summarize(args: NoisyArgs, runs: Vec<RunFigures>) -> NoisyReport {
    let find = |name: &str| runs.iter().find(|r| r.run == name);
    let small_p99 = |run: &RunFigures| {
        run.tenants
            .iter()
            .filter(|t| t.tenant != "A")
            .map(|t| t.wait_p99_ms)
            .fold(None, |m: Option<f64>, w| Some(m.map_or(w, |m| m.max(w))))
    };
    let flood = |run: &RunFigures| {
        run.tenants
            .iter()
            .find(|t| t.tenant == "A")
            .map(|t| t.completion_s)
    };
    let idle = find("idle").and_then(small_p99);
    let over_idle = |name: &str| Some(find(name).and_then(small_p99)? / idle?);
    let flood_ratio = find("fair")
        .and_then(flood)
        .zip(find("fifo").and_then(flood))
        .map(|(fair, fifo)| fair / fifo);
    let throughput = find("throughput-fair")
        .zip(find("throughput-fifo"))
        .map(|(fair, fifo)| fair.completed_per_s / fifo.completed_per_s);
    NoisyReport {
        fair_p99_over_idle: over_idle("fair"),
        fifo_p99_over_idle: over_idle("fifo"),
        flood_completion_fair_over_fifo: flood_ratio,
        throughput_fair_over_fifo: throughput,
        args,
        runs,
    }
}

fn human_run(run: &RunFigures) -> String {
    let mut out = format!(
        "{}: {} tasks in {:.2} s ({:.0}/s), {} redelivered, {:.1} tasks a fetch\n",
        run.run,
        run.completed,
        run.busy_s,
        run.completed_per_s,
        run.redelivered,
        run.completed as f64 / run.receives.max(1) as f64
    );
    for t in &run.tenants {
        out += &format!(
            "  {:>6} {:>6} tasks  wait p50 {:>9.1} ms  p99 {:>9.1} ms  max {:>9.1} ms  done after {:>7.2} s\n",
            t.tenant, t.tasks, t.wait_p50_ms, t.wait_p99_ms, t.wait_max_ms, t.completion_s
        );
    }
    out
}

impl NoisyReport {
    /// The table and the targets.
    pub fn human(&self) -> String {
        let a = &self.args;
        let mut out = format!(
            "noisy neighbour: A floods {} tasks, then B, C, D {} each; {} workers, {} ms a task, max.poll.records {}{}\n",
            a.flood,
            a.few,
            a.workers,
            a.service_ms,
            a.max_poll_records,
            a.label.as_deref().map(|l| format!(" ({l})")).unwrap_or_default()
        );
        for run in &self.runs {
            out += &human_run(run);
        }
        let ratio = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.2}"));
        out += &format!(
            "B/C/D p99 wait over idle: fair {} (target <= 2), fifo {}\n\
             A's completion, fair over fifo: {} (target <= 1.05)\n\
             completed records/s, fair over fifo: {} (target >= 0.8)\n",
            ratio(self.fair_p99_over_idle),
            ratio(self.fifo_p99_over_idle),
            ratio(self.flood_completion_fair_over_fifo),
            ratio(self.throughput_fair_over_fifo),
        );
        out
    }
}

/// Draws each tenant's p99 wait (bars) and p50 wait (ticks) per run, on a log scale.
pub fn write_svg(path: &std::path::Path, report: &NoisyReport) -> anyhow::Result<()> {
    let runs: Vec<&RunFigures> = report
        .runs
        .iter()
        .filter(|r| !r.tenants.is_empty())
        .collect();
    anyhow::ensure!(!runs.is_empty(), "no noisy-neighbour run to draw");
    let tenants: Vec<String> = {
        let mut all: Vec<String> = runs
            .iter()
            .flat_map(|r| r.tenants.iter().map(|t| t.tenant.clone()))
            .collect();
        all.sort();
        all.dedup();
        all
    };
    let top = runs
        .iter()
        .flat_map(|r| r.tenants.iter().map(|t| t.wait_p99_ms))
        .fold(1.0f64, f64::max)
        * 2.0;
    let bottom = runs
        .iter()
        .flat_map(|r| r.tenants.iter().map(|t| t.wait_p50_ms))
        .fold(top, f64::min)
        .max(0.1)
        / 2.0;
    let width = runs.len() as f64 + 1.0;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "wait per tenant (submit to start of service): p99 bars, p50 ticks",
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(
                0f64..tenants.len() as f64 * width,
                (bottom..top).log_scale(),
            )?;
        let names = tenants.clone();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(tenants.len() * 2 + 1)
            .x_label_formatter(&move |x| {
                let i = (x / width).floor() as usize;
                let centre = i as f64 * width + width / 2.0;
                if (x - centre).abs() < width / 4.0 {
                    names.get(i).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc("tenant")
            .y_desc("ms")
            .draw()?;
        const COLORS: [RGBColor; 4] = [GREEN, RED, BLUE, MAGENTA];
        for (k, (run, &color)) in runs.iter().zip(COLORS.iter().cycle()).enumerate() {
            let bars: Vec<(f64, f64, f64)> = tenants
                .iter()
                .enumerate()
                .filter_map(|(i, name)| {
                    let t = run.tenants.iter().find(|t| &t.tenant == name)?;
                    let x = i as f64 * width + 0.5 + k as f64;
                    Some((x, t.wait_p50_ms.max(bottom), t.wait_p99_ms.max(bottom)))
                })
                .collect();
            chart
                .draw_series(bars.iter().map(|&(x, _, p99)| {
                    Rectangle::new([(x, bottom), (x + 0.8, p99)], color.mix(0.7).filled())
                }))?
                .label(run.run.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled())
                });
            chart.draw_series(bars.iter().map(|&(x, p50, _)| {
                PathElement::new([(x, p50), (x + 0.8, p50)], BLACK.stroke_width(3))
            }))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
    }
    std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flood_comes_first_then_the_few_in_turn() {
        let plan = Plan {
            run: "fifo".into(),
            config: Vec::new(),
            submits: vec![
                Submit::new("A", 3),
                Submit::new("B", 2),
                Submit::new("C", 1),
            ],
            random_tenants: None,
            service: Duration::ZERO,
            max_poll_records: 1,
            fill_first: false,
        };
        assert_eq!(plan.order(), ["A", "A", "A", "B", "C", "B"]);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), 50.0);
        assert_eq!(percentile(&values, 99.0), 99.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
    }

    #[test]
    fn the_targets_are_ratios_of_the_same_run() {
        let tenant = |name: &str, p99: f64, done: f64| TenantFigures {
            tenant: name.into(),
            tasks: 1,
            wait_p50_ms: p99 / 2.0,
            wait_p99_ms: p99,
            wait_max_ms: p99,
            completion_s: done,
        };
        let run = |name: &str, tenants: Vec<TenantFigures>| RunFigures {
            run: name.into(),
            group_config: Vec::new(),
            tenants,
            completed: 1,
            redelivered: 0,
            busy_s: 1.0,
            completed_per_s: 1.0,
            receives: 1,
        };
        let args = NoisyArgs::try_parse_from_defaults();
        let report = summarize(
            args,
            vec![
                run("idle", vec![tenant("B", 40.0, 0.1), tenant("C", 50.0, 0.1)]),
                run(
                    "fifo",
                    vec![tenant("A", 10.0, 20.0), tenant("B", 9000.0, 20.0)],
                ),
                run(
                    "fair",
                    vec![tenant("A", 10.0, 21.0), tenant("C", 80.0, 0.2)],
                ),
            ],
        );
        assert_eq!(report.fair_p99_over_idle, Some(80.0 / 50.0));
        assert_eq!(report.fifo_p99_over_idle, Some(9000.0 / 50.0));
        assert_eq!(report.flood_completion_fair_over_fifo, Some(21.0 / 20.0));
        assert_eq!(report.throughput_fair_over_fifo, None);
    }

    impl NoisyArgs {
        fn try_parse_from_defaults() -> NoisyArgs {
            #[derive(clap::Parser)]
            struct Wrap {
                #[command(flatten)]
                args: NoisyArgs,
            }
            <Wrap as clap::Parser>::parse_from(["noisy"]).args
        }
    }
}
