//! The `produce`, `consume` and `end-to-end` modes: set up the topic, start the client
//! threads, wait for them, and add up what they did into a [`RunReport`].

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::ScopedJoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use crate::args::{ClientKind, RunArgs};
use crate::clients;
use crate::consume::{
    deal, ConsumeSummary, ConsumerJob, ConsumerOutcome, PartitionRange, StopRule,
};
use crate::librdkafka::parse_properties;
use crate::lograil_client;
use crate::machine::Machine;
use crate::payload::{wall_us_now, Clock, Keys, STAMP_LEN};
use crate::proc_stats::CostProbe;
use crate::produce::{ProduceSummary, ProducerJob, ProducerOutcome, Transaction};
use crate::progress::{Counter, Progress};
use crate::report::RunReport;
use crate::topic;

/// Records produced when neither --messages nor --total-bytes is given.
const DEFAULT_MESSAGES: u64 = 1_000_000;

/// How long consumers of an end-to-end run get to start fetching before producers start.
const CONSUMER_SETTLE: Duration = Duration::from_millis(500);

/// Which mode to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `produce`: producers only.
    Produce,
    /// `consume`: consumers only, reading what is already in the topic.
    Consume,
    /// `end-to-end`: producers and consumers at once.
    EndToEnd,
}

impl Mode {
    /// The mode's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Produce => "produce",
            Mode::Consume => "consume",
            Mode::EndToEnd => "end-to-end",
        }
    }
}

/// Runs one mode and reports it.
pub fn run(mode: Mode, args: &RunArgs) -> anyhow::Result<RunReport> {
    validate(mode, args)?;
    let overrides = parse_properties(&args.config)?;
    let machine = Machine::detect();
    let started_at_unix_s = wall_us_now() / 1_000_000;
    let partitions = topic::ensure_topic(args, &overrides)?;
    let producer_config = clients::producer_config(args, &overrides);
    let consumer_config = clients::consumer_config(args, &overrides);
    let deadline = Instant::now() + Duration::from_secs(args.timeout_secs);
    let messages = message_count(mode, args)?;

    let broker_probe = args
        .broker_pid
        .map(|pid| CostProbe::start(Some(pid)))
        .transpose()
        .context("--broker-pid")?;
    let client_probe = CostProbe::start(None)?;
    let wall = Instant::now();
    let (produce, consume) = match mode {
        Mode::Produce => {
            let messages = messages.unwrap_or(0);
            let produce = produce_only(args, &producer_config, messages, deadline, wall)?;
            (Some(produce), None)
        }
        Mode::Consume => {
            let ranges = whole_topic(args, &overrides, partitions)?;
            let consume = consume_only(args, &consumer_config, &ranges, messages, deadline, wall)?;
            (None, Some(consume))
        }
        Mode::EndToEnd => {
            let (produce, consume) = end_to_end(
                args,
                &overrides,
                partitions,
                messages.unwrap_or(0),
                deadline,
                wall,
            )?;
            (Some(produce), Some(consume))
        }
    };
    let wall_s = wall.elapsed().as_secs_f64();
    let moved = match (&produce, &consume) {
        (Some(p), _) => p.bytes,
        (None, Some(c)) => c.bytes,
        (None, None) => 0,
    };
    // A broker that exited during the run loses its cost figures, not the run's.
    let broker_cost = broker_probe.and_then(|probe| match probe.finish(moved, wall_s) {
        Ok(cost) => Some(cost),
        Err(e) => {
            eprintln!("no broker cost: {e:#} (did the broker exit?)");
            None
        }
    });
    let client_cost = client_probe.finish(moved, wall_s)?;
    Ok(RunReport {
        tool: "lograil-bench",
        version: env!("CARGO_PKG_VERSION"),
        mode: mode.name(),
        started_at_unix_s,
        label: args.label.clone(),
        parameters: args.clone(),
        partitions,
        producer_config: matches!(mode, Mode::Produce | Mode::EndToEnd)
            .then(|| clients::properties(&producer_config)),
        consumer_config: matches!(mode, Mode::Consume | Mode::EndToEnd)
            .then(|| clients::properties(&consumer_config)),
        machine,
        wall_seconds: wall_s,
        produce,
        consume,
        broker_cost,
        client_cost,
    })
}

/// The `produce` mode: the producers send `messages` records, showing the acknowledged ones
/// as they come; `epoch` is the start of the run's measured phase.
fn produce_only(
    args: &RunArgs,
    config: &rdkafka::ClientConfig,
    messages: u64,
    deadline: Instant,
    epoch: Instant,
) -> anyhow::Result<ProduceSummary> {
    let acked = Arc::new(AtomicU64::new(0));
    let jobs = producer_jobs(args, config, messages, deadline, &acked, epoch);
    let _progress = Progress::start(
        Mode::Produce.name(),
        Some(messages),
        vec![Counter::new("acked", &acked)],
    );
    run_producers(jobs, args)
}

/// Every partition from its low to its high watermark; an error when all are empty.
fn whole_topic(
    args: &RunArgs,
    overrides: &[(String, String)],
    partitions: i32,
) -> anyhow::Result<Vec<PartitionRange>> {
    let marks = topic::watermarks(args, overrides, partitions)?;
    let ranges: Vec<PartitionRange> = (0..partitions)
        .zip(marks)
        .map(|(partition, (low, high))| PartitionRange {
            partition,
            start: low,
            end: Some(high),
        })
        .collect();
    if ranges.iter().all(|r| r.end <= Some(r.start)) {
        bail!("topic {} is empty: run `produce` first", args.topic);
    }
    Ok(ranges)
}

/// The `consume` mode: the consumers read `ranges`, at most `messages` records (`None`: all
/// of them), showing the records read as they come; `epoch` is the start of the run's
/// measured phase.
fn consume_only(
    args: &RunArgs,
    config: &rdkafka::ClientConfig,
    ranges: &[PartitionRange],
    messages: Option<u64>,
    deadline: Instant,
    epoch: Instant,
) -> anyhow::Result<ConsumeSummary> {
    let available: u64 = ranges
        .iter()
        .map(|r| u64::try_from(r.end.unwrap_or(r.start) - r.start).unwrap_or(0))
        .sum();
    let consumed = Arc::new(AtomicU64::new(0));
    let stop = StopRule {
        consumed_total: consumed.clone(),
        limit: messages,
        producers_done: None,
        deadline,
    };
    let jobs = consumer_jobs(args, config, ranges, false, &stop, epoch);
    let total = messages.map_or(available, |m| m.min(available));
    let _progress = Progress::start(
        Mode::Consume.name(),
        Some(total),
        vec![Counter::new("read", &consumed)],
    );
    let outcomes = run_together(jobs, run_consumer)?;
    Ok(ConsumeSummary::of(&outcomes, false))
}

fn validate(mode: Mode, args: &RunArgs) -> anyhow::Result<()> {
    if matches!(mode, Mode::Produce | Mode::EndToEnd) && args.producers == 0 {
        bail!("--producers must be at least 1");
    }
    if matches!(mode, Mode::Consume | Mode::EndToEnd) && args.consumers == 0 {
        bail!("--consumers must be at least 1");
    }
    if mode == Mode::Consume && args.latency_file.is_some() {
        bail!("--latency-file holds producers' delivery latencies: produce or end-to-end only");
    }
    if mode == Mode::EndToEnd && args.message_size < STAMP_LEN {
        bail!("end-to-end needs --message-size of at least {STAMP_LEN} (the send-time stamp)");
    }
    if args.message_size == 0 && args.total_bytes.is_some() {
        bail!("--total-bytes needs a --message-size above 0");
    }
    if args.transaction_ms.is_some() && args.client != ClientKind::Rdkafka {
        bail!("--transaction-ms needs --client rdkafka");
    }
    if let Some(rate) = args.rate {
        if !(rate.is_finite() && rate > 0.0) {
            bail!("--rate must be a positive number of records per second");
        }
        if mode == Mode::Consume {
            bail!("--rate paces producers; consume reads as fast as it can");
        }
    }
    Ok(())
}

/// Records to produce (or at most to consume: `None` means the whole topic).
fn message_count(mode: Mode, args: &RunArgs) -> anyhow::Result<Option<u64>> {
    let from_bytes = match args.total_bytes {
        Some(total) => {
            let size = u64::try_from(args.message_size).context("--message-size")?;
            Some(total.0.div_ceil(size.max(1)))
        }
        None => None,
    };
    Ok(match (args.messages.or(from_bytes), mode) {
        (Some(n), _) => Some(n),
        (None, Mode::Consume) => None,
        (None, _) => Some(DEFAULT_MESSAGES),
    })
}

/// Splits `messages` over the producers, with the open-loop interval and phase of each;
/// `epoch` is the start of the run's measured phase.
fn producer_jobs(
    args: &RunArgs,
    config: &rdkafka::ClientConfig,
    messages: u64,
    deadline: Instant,
    acked: &Arc<AtomicU64>,
    epoch: Instant,
) -> Vec<ProducerJob> {
    let clock = Clock::new();
    let measure_from_us = measure_from_us(args);
    let n = args.producers.max(1) as u64;
    (0..n)
        .map(|i| ProducerJob {
            client: args.client,
            tokio_workers: args.tokio_workers,
            config: config.clone(),
            topic: args.topic.clone(),
            messages: messages / n + u64::from(i < messages % n),
            message_size: args.message_size,
            keys: if args.random_keys {
                Keys::random(args.keys)
            } else {
                Keys::new(args.keys)
            },
            interval: args
                .rate
                .map(|rate| Duration::from_secs_f64(n as f64 / rate)),
            phase: args.rate.map_or(Duration::ZERO, |rate| {
                Duration::from_secs_f64(i as f64 / rate)
            }),
            clock,
            measure_from_us,
            deadline,
            acked_total: acked.clone(),
            epoch,
            keep_samples: args.latency_file.is_some(),
            transaction: args.transaction_ms.map(|ms| Transaction {
                id: format!("lograil-bench-{}-{i}", std::process::id()),
                every: Duration::from_millis(ms),
            }),
        })
        .collect()
}

/// Latencies are measured for records sent from this wall-clock time on (µs since the Unix
/// epoch): `--warmup-ms` from now.
fn measure_from_us(args: &RunArgs) -> u64 {
    crate::payload::wall_us_now() + args.warmup_ms.saturating_mul(1000)
}

fn consumer_jobs(
    args: &RunArgs,
    config: &rdkafka::ClientConfig,
    ranges: &[PartitionRange],
    measure_latency: bool,
    stop: &StopRule,
    epoch: Instant,
) -> Vec<ConsumerJob> {
    let measure_from_us = measure_from_us(args);
    deal(ranges, args.consumers)
        .into_iter()
        .map(|partitions| ConsumerJob {
            client: args.client,
            tokio_workers: args.tokio_workers,
            config: config.clone(),
            topic: args.topic.clone(),
            partitions,
            measure_latency,
            measure_from_us,
            stop: stop.clone(),
            epoch,
        })
        .collect()
}

/// Runs a producer job with its client library.
fn run_producer(job: ProducerJob, start: &Barrier) -> anyhow::Result<ProducerOutcome> {
    match job.client {
        ClientKind::Rdkafka => crate::produce::run_producer(job, start),
        ClientKind::Lograil => lograil_client::run_producer(job, start),
    }
}

/// Runs a consumer job with its client library.
fn run_consumer(job: ConsumerJob, ready: &Barrier) -> anyhow::Result<ConsumerOutcome> {
    match job.client {
        ClientKind::Rdkafka => crate::consume::run_consumer(job, ready),
        ClientKind::Lograil => lograil_client::run_consumer(job, ready),
    }
}

fn run_producers(jobs: Vec<ProducerJob>, args: &RunArgs) -> anyhow::Result<ProduceSummary> {
    let outcomes = if args.shared_runtime {
        if !matches!(args.client, ClientKind::Lograil) {
            anyhow::bail!("--shared-runtime runs lograil's client: give --client lograil too");
        }
        lograil_client::run_producers_shared(jobs)?
    } else {
        run_together(jobs, run_producer)?
    };
    Ok(ProduceSummary::of(&outcomes, args.rate))
}

/// One thread per job, all released at once by a barrier; their outcomes in job order.
fn run_together<J: Send, T: Send>(
    jobs: Vec<J>,
    run: fn(J, &Barrier) -> anyhow::Result<T>,
) -> anyhow::Result<Vec<T>> {
    let barrier = Barrier::new(jobs.len());
    std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .into_iter()
            .map(|job| {
                let barrier = &barrier;
                s.spawn(move || run(job, barrier))
            })
            .collect();
        join_all(handles)
    })
}

/// Consumers from the current end of every partition, then producers; consumers stop once
/// they have read every record the producers got acknowledged.
fn end_to_end(
    args: &RunArgs,
    overrides: &[(String, String)],
    partitions: i32,
    messages: u64,
    deadline: Instant,
    epoch: Instant,
) -> anyhow::Result<(ProduceSummary, ConsumeSummary)> {
    let marks = topic::watermarks(args, overrides, partitions)?;
    let ranges: Vec<PartitionRange> = (0..partitions)
        .zip(marks)
        .map(|(partition, (_, high))| PartitionRange {
            partition,
            start: high,
            end: None,
        })
        .collect();
    let acked = Arc::new(AtomicU64::new(0));
    let consumed = Arc::new(AtomicU64::new(0));
    let producers_done = Arc::new(AtomicBool::new(false));
    let stop = StopRule {
        consumed_total: consumed.clone(),
        limit: Some(messages),
        producers_done: Some((producers_done.clone(), acked.clone())),
        deadline,
    };
    let consumer_jobs = consumer_jobs(
        args,
        &clients::consumer_config(args, overrides),
        &ranges,
        true,
        &stop,
        epoch,
    );
    let producer_jobs = producer_jobs(
        args,
        &clients::producer_config(args, overrides),
        messages,
        deadline,
        &acked,
        epoch,
    );
    let _progress = Progress::start(
        Mode::EndToEnd.name(),
        Some(messages),
        vec![
            Counter::new("acked", &acked),
            Counter::new("read", &consumed),
        ],
    );
    let consumers_ready = Barrier::new(consumer_jobs.len() + 1);
    std::thread::scope(|s| {
        let consumers: Vec<_> = consumer_jobs
            .into_iter()
            .map(|job| {
                let ready = &consumers_ready;
                s.spawn(move || run_consumer(job, ready))
            })
            .collect();
        consumers_ready.wait();
        std::thread::sleep(CONSUMER_SETTLE);
        let produced = run_producers(producer_jobs, args);
        producers_done.store(true, Ordering::Release);
        let consumed = join_all(consumers);
        Ok((produced?, ConsumeSummary::of(&consumed?, true)))
    })
}

fn join_all<T>(handles: Vec<ScopedJoinHandle<'_, anyhow::Result<T>>>) -> anyhow::Result<Vec<T>> {
    let mut out = Vec::with_capacity(handles.len());
    let mut first_error = None;
    for handle in handles {
        match handle.join() {
            Ok(Ok(v)) => out.push(v),
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(_) => {
                first_error.get_or_insert(anyhow!("a client thread panicked"));
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(extra: &[&str]) -> RunArgs {
        let mut argv = vec!["lograil-bench", "produce"];
        argv.extend_from_slice(extra);
        match crate::args::Cli::parse_from(argv).command {
            crate::args::Command::Produce(a) => a,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn message_counts() {
        assert_eq!(
            message_count(Mode::Produce, &args(&[])).unwrap(),
            Some(DEFAULT_MESSAGES)
        );
        assert_eq!(message_count(Mode::Consume, &args(&[])).unwrap(), None);
        let a = args(&["--total-bytes", "1GiB", "--message-size", "1000"]);
        assert_eq!(message_count(Mode::Produce, &a).unwrap(), Some(1_073_742));
        let a = args(&["--messages", "7"]);
        assert_eq!(message_count(Mode::Consume, &a).unwrap(), Some(7));
    }

    #[test]
    fn producers_share_messages_and_rate() {
        let a = args(&["--producers", "3", "--messages", "10", "--rate", "300"]);
        let acked = Arc::new(AtomicU64::new(0));
        let config = rdkafka::ClientConfig::new();
        let jobs = producer_jobs(&a, &config, 10, Instant::now(), &acked, Instant::now());
        let counts: Vec<u64> = jobs.iter().map(|j| j.messages).collect();
        assert_eq!(counts, vec![4, 3, 3]);
        assert_eq!(jobs[0].interval, Some(Duration::from_millis(10)));
        assert!(jobs[2].phase.abs_diff(Duration::from_micros(6667)) < Duration::from_micros(1));
    }

    #[test]
    fn validation() {
        assert!(validate(Mode::EndToEnd, &args(&["--message-size", "4"])).is_err());
        assert!(validate(Mode::Produce, &args(&["--producers", "0"])).is_err());
        assert!(validate(Mode::Produce, &args(&["--rate", "0"])).is_err());
        assert!(validate(Mode::Consume, &args(&["--rate", "10"])).is_err());
        assert!(validate(Mode::Produce, &args(&["--acks", "-1"])).is_ok());
    }
}
