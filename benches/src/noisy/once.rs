//! One run: a fresh topic and share group, the workers that complete its tasks (each task's
//! service a sleep), and their tally as the run's figures.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use consumer::{Admin, ClientConfig, Delivery, QueueConsumer};

use super::report::{tenant_figures, Done, RunFigures};
use super::send::produce;
use super::{NoisyArgs, Plan};
use crate::payload::{read_stamp, wall_us_now};

/// What the workers share.
#[derive(Debug, Default)]
struct Tally {
    done: Mutex<Vec<Done>>,
    seen: Mutex<HashSet<i64>>,
    completed: AtomicU64,
    redelivered: AtomicU64,
    receives: AtomicU64,
    first_receipt_us: AtomicU64,
    /// Set once every task is done, or the run is over.
    stop: AtomicBool,
    /// Workers that have been assigned the partition.
    joined: AtomicU64,
}

pub(super) async fn run_once(args: &NoisyArgs, plan: &Plan) -> anyhow::Result<RunFigures> {
    let name = format!("{}-{}-{}", args.topic_prefix, plan.run, std::process::id());
    create_queue(args, plan, &name).await?;
    let total = plan.total();
    let order = plan.order();
    if plan.fill_first {
        produce(args, &name, &order, 0, false).await?;
    }
    let tally = Arc::new(Tally::default());
    let workers: Vec<_> = (0..args.workers)
        .map(|_| tokio::spawn(Worker::new(args, plan, &name, &tally).run()))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    if !plan.fill_first {
        send_once_joined(args, plan, &name, &order, &tally, deadline).await?;
    }
    while !tally.stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tally.stop.store(true, Ordering::Relaxed);
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
    Ok(figures(plan, &tally, completed, closed_us))
}

/// The run's topic, one partition, and its share group with the plan's configs.
async fn create_queue(args: &NoisyArgs, plan: &Plan, name: &str) -> anyhow::Result<()> {
    let mut admin = Admin::connect(&args.brokers).await?;
    admin
        .create_topic(name, 1, &[])
        .await
        .with_context(|| format!("creating topic {name}"))?;
    let mut config: Vec<(&str, &str)> = vec![("share.auto.offset.reset", "earliest")];
    config.extend(plan.config.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    admin
        .alter_group_configs(name, &config)
        .await
        .with_context(|| format!("setting {:?} on share group {name}", plan.config))?;
    Ok(())
}

/// Sends the tasks (the flood first) once every worker holds the partition and has had a
/// round to open its share session.
async fn send_once_joined(
    args: &NoisyArgs,
    plan: &Plan,
    name: &str,
    order: &[String],
    tally: &Tally,
    deadline: Instant,
) -> anyhow::Result<()> {
    // Every worker holds the partition before the first task is sent.
    while tally.joined.load(Ordering::Relaxed) < args.workers as u64 {
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
    produce(args, name, order, flood, true).await?;
    Ok(())
}

/// The run's figures from the workers' tally.
fn figures(plan: &Plan, tally: &Tally, completed: u64, closed_us: u64) -> RunFigures {
    let done = std::mem::take(&mut *tally.done.lock().unwrap_or_else(PoisonError::into_inner));
    let first = tally.first_receipt_us.load(Ordering::Relaxed);
    // The throughput check's clock stops when the acknowledgements are in (a worker may
    // have taken thousands of records in one fetch); a noisy run's at the last task's end.
    let last = match plan.fill_first {
        true => closed_us,
        false => done.iter().map(|d| d.end_us).max().unwrap_or(first),
    };
    let busy_s = last.saturating_sub(first) as f64 / 1e6;
    RunFigures {
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
    }
}

/// One worker: a share consumer of the run's group completing tasks until the run stops.
struct Worker {
    config: ClientConfig,
    topic: String,
    /// Each task's service time.
    service: Duration,
    /// Tasks in the run: the worker that completes the last one stops the run.
    total: u64,
    tally: Arc<Tally>,
}

impl Worker {
    fn new(args: &NoisyArgs, plan: &Plan, name: &str, tally: &Arc<Tally>) -> Worker {
        let config = ClientConfig::new()
            .with("bootstrap.servers", args.brokers.as_str())
            .with("group.id", name)
            .with("share.acknowledgement.mode", "explicit")
            .with("max.poll.records", plan.max_poll_records.to_string());
        Worker {
            config,
            topic: name.to_string(),
            service: plan.service,
            total: plan.total(),
            tally: tally.clone(),
        }
    }

    async fn run(self) -> anyhow::Result<()> {
        let queue = QueueConsumer::from_config(&self.config).await?;
        queue.subscribe(&[self.topic.as_str()]);
        let tally = &self.tally;
        let mut counted = false;
        while !tally.stop.load(Ordering::Relaxed) {
            if !counted && !queue.assignment().is_empty() {
                counted = true;
                tally.joined.fetch_add(1, Ordering::Relaxed);
            }
            let batch = queue.receive(Duration::from_millis(100)).await?;
            if !batch.is_empty() {
                tally.receives.fetch_add(1, Ordering::Relaxed);
            }
            for delivery in batch {
                self.serve(delivery).await;
            }
        }
        queue.close().await?;
        Ok(())
    }

    /// Serves one task (the sleep), acknowledges it and counts it: once, however often it
    /// was delivered.
    async fn serve(&self, delivery: Delivery) {
        let tally = &self.tally;
        let start_us = wall_us_now();
        let _ = tally.first_receipt_us.compare_exchange(
            0,
            start_us,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
        if !self.service.is_zero() {
            tokio::time::sleep(self.service).await;
        }
        delivery.ack();
        let first = tally
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(delivery.offset);
        if !first {
            tally.redelivered.fetch_add(1, Ordering::Relaxed);
            return;
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
        if tally.completed.fetch_add(1, Ordering::Relaxed) + 1 >= self.total {
            tally.stop.store(true, Ordering::Relaxed);
        }
    }
}
