//! The `spike` mode: a queue under a load spike. A consumer group whose workers can complete
//! `--capacity` records per second (simulated work) reads a topic that producers feed open-loop
//! at `--load` of the capacity measured first, then at `--spike` times that load for
//! `--spike-secs`, then at `--load` again. Records carry their intended send time; a record is
//! *useful* when it is completed within `--deadline-ms` of it. The producers' delivery timeout
//! (`message.timeout.ms`, librdkafka retrying within it) is half the deadline: a client gives
//! up on a record it could not deliver while there was still time to complete it, so under
//! overload it sheds the oldest records instead of delivering only stale ones.
//!
//! Reported per second: records offered, acknowledged, failed or refused by the client, and
//! completed in and past the deadline; the useful completions per second (goodput) before the
//! spike, their minimum from the spike on, and the time from the spike's end until goodput is
//! back at 90 % of its pre-spike level. The same run against a broker with no bound, with a
//! producer quota and with a backlog bound is what BENCHMARKS.md compares
//! (`benches/scripts/spike.sh`).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde::{Deserialize, Serialize};

use crate::payload::{read_stamp, wall_us_now, Payload};

mod load;
mod report;
mod svg;

pub use report::{Second, SpikeReport};
pub use svg::{plot, write_svg, SpikePlotArgs};

/// Flags of the `spike` mode.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct SpikeArgs {
    /// Bootstrap broker address.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub brokers: String,
    /// The topic (created with --partitions if missing).
    #[arg(long, default_value = "lograil-spike")]
    pub topic: String,
    /// Partitions of the topic and of its calibration topic (TOPIC-calibrate) when
    /// created (an existing topic keeps its own).
    #[arg(long, default_value_t = 6)]
    pub partitions: i32,
    /// The consumer group (a backlog bound names it).
    #[arg(long, default_value = "lograil-spike")]
    pub group: String,
    /// Producer client id (a quota names it).
    #[arg(long, default_value = "lograil-spike")]
    pub client_id: String,
    /// Records per second the consumers can complete (their simulated work).
    #[arg(long, default_value_t = 20_000.0)]
    pub capacity: f64,
    /// Offered load before and after the spike, as a fraction of the measured capacity.
    #[arg(long, default_value_t = 0.8)]
    pub load: f64,
    /// Load during the spike, as a multiple of --load.
    #[arg(long, default_value_t = 2.0)]
    pub spike: f64,
    /// Seconds at --load before the spike.
    #[arg(long, default_value_t = 10)]
    pub before_secs: u64,
    /// Seconds of the spike, at --spike times --load.
    #[arg(long, default_value_t = 5)]
    pub spike_secs: u64,
    /// Seconds at --load after the spike.
    #[arg(long, default_value_t = 25)]
    pub after_secs: u64,
    /// A record is useful if completed within this long of its intended send time; half of it
    /// is the producers' `message.timeout.ms`.
    #[arg(long, default_value_t = 2000)]
    pub deadline_ms: u64,
    /// Size of each record's value in bytes: at least 8 (the intended send time),
    /// 16 for share-spike (the task id too).
    #[arg(long, default_value_t = 200)]
    pub message_size: usize,
    /// Extra librdkafka property for the producer, as NAME=VALUE (repeatable).
    #[arg(short = 'X', long = "config", value_name = "NAME=VALUE")]
    pub config: Vec<String>,
    /// Free text stored with the results (e.g. "quota on").
    #[arg(long)]
    pub label: Option<String>,
    /// Write the parameters and results to this JSON file (`spike-plot` draws them).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub(crate) type Counts = Arc<Mutex<Vec<Second>>>;

pub(crate) fn count(counts: &Counts, second: usize, f: impl FnOnce(&mut Second)) {
    let mut all = counts.lock().unwrap_or_else(PoisonError::into_inner);
    if all.len() <= second {
        all.resize(second + 1, Second::default());
    }
    f(&mut all[second]);
}

/// Who completes the spike's records, on a thread of its own: [`consume`] (a consumer group,
/// the `spike` mode) or share-group workers (`share-spike`). Its arguments: the run's flags,
/// the topic, the group, where to send the instant it counts seconds from once it reads, the
/// counts and the stop flag.
pub(crate) type ConsumeFn = Arc<
    dyn Fn(&SpikeArgs, &str, &str, SyncSender<Instant>, &Counts, &AtomicBool) -> anyhow::Result<()>
        + Send
        + Sync,
>;

/// What the clients of `share-spike` do beyond the `spike` mode's: each record carries its
/// task's id (value bytes 8..16) and, with `deadline_header`, its deadline in the broker's
/// `deadline` header; a client whose task was not completed in time by its deadline gives up
/// on that attempt and resubmits the task (fresh stamp, fresh deadline) up to `retries` times.
#[derive(Debug, Clone, Default)]
pub(crate) struct Clients {
    pub retries: u32,
    pub deadline_header: bool,
    /// Tasks completed within their deadline (the workers fill it).
    pub completed: Arc<Mutex<HashSet<u64>>>,
}

/// Runs the mode.
pub fn run(args: &SpikeArgs) -> anyhow::Result<SpikeReport> {
    run_with(args, Arc::new(consume), None)
}

/// The spike against `consume`, with `clients`' retries if given.
pub(crate) fn run_with(
    args: &SpikeArgs,
    consume: ConsumeFn,
    clients: Option<&Clients>,
) -> anyhow::Result<SpikeReport> {
    anyhow::ensure!(args.capacity > 0.0, "--capacity must be positive");
    anyhow::ensure!(
        args.message_size >= if clients.is_some() { 16 } else { 8 },
        "--message-size must be at least 8 (16 with retries: the task id)"
    );
    ensure_topic(args, &args.topic)?;
    let calibration_topic = format!("{}-calibrate", args.topic);
    ensure_topic(args, &calibration_topic)?;
    let measured = calibrate(args, &calibration_topic, &consume, clients.is_some())?;
    eprintln!("measured capacity: {measured:.0} records/s");
    let base_rate = measured * args.load;
    let total = args.before_secs + args.spike_secs + args.after_secs;
    let counts: Counts = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let (joined, start) = std::sync::mpsc::sync_channel(1);
    let consumer = {
        let (args, counts, stop, consume) =
            (args.clone(), counts.clone(), stop.clone(), consume.clone());
        std::thread::spawn(move || consume(&args, &args.topic, &args.group, joined, &counts, &stop))
    };
    // The load starts once the consumer has joined its group.
    let start = start
        .recv_timeout(Duration::from_secs(60))
        .context("the consumer did not join its group within 60 s")?;
    load::produce(args, base_rate, start, total, &counts, clients)?;
    stop.store(true, Ordering::Relaxed);
    consumer
        .join()
        .map_err(|_| anyhow::anyhow!("the consumer thread panicked"))??;
    let mut seconds = counts
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    seconds.truncate(total as usize);
    Ok(report::summarize(
        args.clone(),
        measured,
        base_rate,
        seconds,
    ))
}

fn ensure_topic(args: &SpikeArgs, topic: &str) -> anyhow::Result<()> {
    let admin: AdminClient<_> = ClientConfig::new()
        .set("bootstrap.servers", &args.brokers)
        .create()
        .context("creating the admin client")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let new = NewTopic::new(topic, args.partitions, TopicReplication::Fixed(1));
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for result in runtime.block_on(admin.create_topics([&new], &options))? {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => anyhow::bail!("creating {name}: {code}"),
        }
    }
    Ok(())
}

/// The consumers' completion rate on a backlog: fills `topic` with six seconds of capacity,
/// then drains it for five; the best of seconds 1 to 4 after the join (the first may hold the
/// first fetches, the last may run dry; a slower second is the machine, not the capacity).
/// `small_batches` (share groups): the fill is sent in batches of at most 20 records, about
/// what the run's load makes with `linger.ms` 5, since a share-group worker acquires whole
/// batches: one batch of the fill's default size would go to a single worker.
fn calibrate(
    args: &SpikeArgs,
    topic: &str,
    consume: &ConsumeFn,
    small_batches: bool,
) -> anyhow::Result<f64> {
    let mut config = load::producer_config(args);
    if small_batches {
        config.set("batch.num.messages", "20");
    }
    let producer: BaseProducer = config.create()?;
    let mut payload = Payload::new(args.message_size);
    payload.stamp(wall_us_now());
    let fill = (args.capacity * 6.0) as u64;
    for _ in 0..fill {
        let mut record = BaseRecord::<(), [u8]>::to(topic).payload(payload.bytes());
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(5));
                }
                Err((e, _)) => anyhow::bail!("filling the calibration topic: {e}"),
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(60))?;
    let counts: Counts = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let group = format!("{}-calibrate", args.group);
    let (joined, start) = std::sync::mpsc::sync_channel(1);
    let drainer = {
        let (args, topic, counts, stop, consume) = (
            args.clone(),
            topic.to_string(),
            counts.clone(),
            stop.clone(),
            consume.clone(),
        );
        std::thread::spawn(move || consume(&args, &topic, &group, joined, &counts, &stop))
    };
    // Seconds 1 to 4 after the join are measured.
    let start = start
        .recv_timeout(Duration::from_secs(60))
        .context("the calibration consumer did not join its group within 60 s")?;
    std::thread::sleep((start + Duration::from_secs(5)).saturating_duration_since(Instant::now()));
    stop.store(true, Ordering::Relaxed);
    drainer
        .join()
        .map_err(|_| anyhow::anyhow!("the calibration consumer panicked"))??;
    let seconds = counts
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let best = seconds
        .iter()
        .skip(1)
        .take(4)
        .map(|s| s.useful + s.late)
        .max()
        .unwrap_or(0);
    anyhow::ensure!(best > 0, "the calibration consumer completed nothing");
    Ok(best as f64)
}

/// The task id `share-spike` records carry (value bytes 8..16).
pub(crate) fn read_task(value: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(value.get(8..16)?.try_into().ok()?))
}

/// A group member completing at most `--capacity` records per second, committing every 100 ms;
/// each record useful or late by its stamp. Once it has partitions, it sends the instant it
/// counts seconds from through `joined`.
fn consume(
    args: &SpikeArgs,
    topic: &str,
    group: &str,
    joined: std::sync::mpsc::SyncSender<Instant>,
    counts: &Counts,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &args.brokers)
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "true")
        .set("auto.commit.interval.ms", "100")
        .set("fetch.wait.max.ms", "20")
        .create()?;
    consumer.subscribe(&[topic])?;
    let start = loop {
        anyhow::ensure!(!stop.load(Ordering::Relaxed), "stopped before joining");
        if let Some(Err(e)) = consumer.poll(Duration::from_millis(0)) {
            anyhow::bail!("joining {group}: {e}");
        }
        if consumer.assignment().is_ok_and(|a| a.count() > 0) {
            let start = Instant::now();
            let _ = joined.send(start);
            break start;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let per_record = Duration::from_secs_f64(1.0 / args.capacity);
    let deadline_us = args.deadline_ms * 1000;
    let mut free_at = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let Some(message) = consumer.poll(Duration::from_millis(50)) else {
            continue;
        };
        let Ok(message) = message else { continue };
        // The simulated work: one record per `per_record`.
        let now = Instant::now();
        if free_at > now {
            std::thread::sleep(free_at - now);
        }
        free_at = free_at.max(now) + per_record;
        let Some(stamp) = message.payload().and_then(read_stamp) else {
            continue;
        };
        let late = wall_us_now().saturating_sub(stamp) > deadline_us;
        let second = start.elapsed().as_secs() as usize;
        count(counts, second, |s| match late {
            true => s.late += 1,
            false => s.useful += 1,
        });
    }
    Ok(())
}
