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

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use plotters::prelude::*;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use serde::{Deserialize, Serialize};

use crate::clients::{log_to_stderr, parse_properties};
use crate::payload::{read_stamp, wall_us_now, Clock, Payload};

/// Flags of the `spike` mode.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct SpikeArgs {
    /// Bootstrap broker address.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub brokers: String,
    /// The topic (created with --partitions if missing).
    #[arg(long, default_value = "lograil-spike")]
    pub topic: String,
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
    #[arg(long, default_value_t = 5)]
    pub spike_secs: u64,
    /// Seconds at --load after the spike.
    #[arg(long, default_value_t = 25)]
    pub after_secs: u64,
    /// A record is useful if completed within this long of its intended send time; half of it
    /// is the producers' `message.timeout.ms`.
    #[arg(long, default_value_t = 2000)]
    pub deadline_ms: u64,
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

/// Flags of the `spike-plot` mode.
#[derive(Debug, Clone, Args)]
pub struct SpikePlotArgs {
    /// The SVG file to write.
    pub svg: PathBuf,
    /// `spike --json` results, one line each (labelled by their --label).
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
}

/// Draws the runs of `args.runs` into `args.svg`.
pub fn plot(args: &SpikePlotArgs) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    for path in &args.runs {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        runs.push(
            serde_json::from_str::<SpikeReport>(&text)
                .with_context(|| format!("parsing {}", path.display()))?,
        );
    }
    write_svg(&args.svg, &runs)
}

/// Counts in one second of the run.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Second {
    pub offered: u64,
    pub acked: u64,
    /// Delivery failed (timed out at the client, or refused by the broker).
    pub failed: u64,
    /// Refused by the client at once (its queue was full).
    pub refused: u64,
    pub useful: u64,
    pub late: u64,
    /// Resubmitted by a client whose record was not completed by its deadline (`share-spike`).
    #[serde(default)]
    pub retried: u64,
}

/// What a spike run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpikeReport {
    pub args: SpikeArgs,
    pub measured_capacity: f64,
    pub base_rate: f64,
    pub seconds: Vec<Second>,
    /// Mean useful completions per second over the pre-spike seconds after the first 3.
    pub goodput_before: f64,
    /// Lowest useful completions in a second from the spike's start to the end.
    pub goodput_min_from_spike: u64,
    /// Seconds from the end of the spike until goodput is back at 90 % of `goodput_before`
    /// (for two seconds in a row); `None` if it never is.
    pub recovery_secs: Option<u64>,
}

pub(crate) type Counts = Arc<Mutex<Vec<Second>>>;

pub(crate) fn count(counts: &Counts, second: usize, f: impl FnOnce(&mut Second)) {
    let mut all = counts.lock().unwrap_or_else(PoisonError::into_inner);
    if all.len() <= second {
        all.resize(second + 1, Second::default());
    }
    f(&mut all[second]);
}

struct Deliveries {
    counts: Counts,
    start: Instant,
}

impl ClientContext for Deliveries {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        log_to_stderr(level, fac, message);
    }
}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let second = self.start.elapsed().as_secs() as usize;
        count(&self.counts, second, |s| match result {
            Ok(_) => s.acked += 1,
            Err(_) => s.failed += 1,
        });
    }
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
    produce(args, base_rate, start, total, &counts, clients)?;
    stop.store(true, Ordering::Relaxed);
    consumer
        .join()
        .map_err(|_| anyhow::anyhow!("the consumer thread panicked"))??;
    let mut seconds = counts
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    seconds.truncate(total as usize);
    Ok(summarize(args.clone(), measured, base_rate, seconds))
}

/// Useful completions before the spike, their low, and the recovery time.
fn summarize(args: SpikeArgs, measured: f64, base_rate: f64, seconds: Vec<Second>) -> SpikeReport {
    let before: Vec<u64> = seconds
        .iter()
        .take(args.before_secs as usize)
        .skip(3)
        .map(|s| s.useful)
        .collect();
    let goodput_before = before.iter().sum::<u64>() as f64 / before.len().max(1) as f64;
    let spike_start = args.before_secs as usize;
    let spike_end = spike_start + args.spike_secs as usize;
    let goodput_min_from_spike = seconds
        .iter()
        .skip(spike_start)
        .map(|s| s.useful)
        .min()
        .unwrap_or(0);
    let good = |s: &Second| s.useful as f64 >= 0.9 * goodput_before;
    let recovery_secs = (spike_end..seconds.len().saturating_sub(1))
        .find(|&i| good(&seconds[i]) && good(&seconds[i + 1]))
        .map(|i| (i - spike_end) as u64);
    SpikeReport {
        args,
        measured_capacity: measured,
        base_rate,
        seconds,
        goodput_before,
        goodput_min_from_spike,
        recovery_secs,
    }
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
    let mut config = producer_config(args);
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

fn producer_config(args: &SpikeArgs) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &args.brokers)
        .set("client.id", &args.client_id)
        .set("acks", "1")
        .set("linger.ms", "5")
        .set(
            "message.timeout.ms",
            (args.deadline_ms / 2).max(1).to_string(),
        );
    config
}

/// Open loop: `base_rate` records/s, times `--spike` during the spike; each record stamped with
/// its intended send time. With `clients`, also the retries of tasks not completed in time.
fn produce(
    args: &SpikeArgs,
    base_rate: f64,
    start: Instant,
    total_secs: u64,
    counts: &Counts,
    clients: Option<&Clients>,
) -> anyhow::Result<()> {
    let mut config = producer_config(args);
    for (k, v) in parse_properties(&args.config)? {
        config.set(k, v);
    }
    let context = Deliveries {
        counts: counts.clone(),
        start,
    };
    let producer: BaseProducer<Deliveries> = config.create_with_context(context)?;
    let clock = Clock::new();
    let mut payload = Payload::new(args.message_size);
    let spike = (args.before_secs, args.before_secs + args.spike_secs);
    let end = start + Duration::from_secs(total_secs);
    let mut next = start;
    let deadline = Duration::from_millis(args.deadline_ms);
    // Attempts in send order (so by due time): (due, task, attempt).
    let mut due: VecDeque<(Instant, u64, u32)> = VecDeque::new();
    let mut tasks = 0u64;
    let mut value = payload.bytes().to_vec();
    while next < end {
        let now = Instant::now();
        if let Some(c) = clients {
            // A task whose attempt reached its deadline uncompleted is resubmitted, now.
            while due.front().is_some_and(|d| d.0 <= now) {
                let Some((_, task, attempt)) = due.pop_front() else {
                    break;
                };
                let done = c
                    .completed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains(&task);
                if done || attempt >= c.retries {
                    continue;
                }
                let second = now.duration_since(start).as_secs();
                let refused =
                    send_task(&producer, args, c, &mut value, clock.wall_us(now), task).is_err();
                count(counts, second as usize, |s| {
                    s.offered += 1;
                    s.retried += 1;
                    s.refused += u64::from(refused);
                });
                due.push_back((now + deadline, task, attempt + 1));
            }
        }
        if next > now {
            let wake = due.front().map_or(next, |d| d.0.min(next));
            producer.poll(wake.saturating_duration_since(now));
            continue;
        }
        let second = next.duration_since(start).as_secs();
        let rate = if (spike.0..spike.1).contains(&second) {
            base_rate * args.spike
        } else {
            base_rate
        };
        let refused = match clients {
            Some(c) => {
                tasks += 1;
                due.push_back((next + deadline, tasks, 0));
                send_task(&producer, args, c, &mut value, clock.wall_us(next), tasks).is_err()
            }
            None => {
                payload.stamp(clock.wall_us(next));
                let record = BaseRecord::<(), [u8]>::to(&args.topic).payload(payload.bytes());
                producer.send(record).is_err()
            }
        };
        count(counts, second as usize, |s| {
            s.offered += 1;
            s.refused += u64::from(refused);
        });
        next += Duration::from_secs_f64(1.0 / rate);
        producer.poll(Duration::ZERO);
    }
    // Deliveries still pending time out within the deadline.
    let _ = producer.flush(Duration::from_millis(args.deadline_ms + 1000));
    Ok(())
}

/// Sends one attempt of `task` stamped `wall_us` (its intended send time), with its id and, if
/// asked, its deadline header; `Err` if the client refused it at once (its queue was full).
fn send_task(
    producer: &BaseProducer<Deliveries>,
    args: &SpikeArgs,
    clients: &Clients,
    value: &mut [u8],
    wall_us: u64,
    task: u64,
) -> Result<(), ()> {
    value[..8].copy_from_slice(&wall_us.to_le_bytes());
    value[8..16].copy_from_slice(&task.to_le_bytes());
    let mut record = BaseRecord::<(), [u8]>::to(&args.topic).payload(&*value);
    if clients.deadline_header {
        let deadline_ms = (wall_us / 1000 + args.deadline_ms) as i64;
        record = record.headers(OwnedHeaders::new().insert(Header {
            key: "deadline",
            value: Some(&deadline_ms.to_be_bytes()),
        }));
    }
    producer.send(record).map_err(|_| ())
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

impl SpikeReport {
    /// The per-second table and the summary.
    pub fn human(&self) -> String {
        let a = &self.args;
        let mut out = format!(
            "capacity {:.0} records/s measured, load {:.0} records/s, spike x{} for {} s from {} s, deadline {} ms{}\n",
            self.measured_capacity,
            self.base_rate,
            a.spike,
            a.spike_secs,
            a.before_secs,
            a.deadline_ms,
            a.label.as_deref().map(|l| format!(" ({l})")).unwrap_or_default()
        );
        out += "  s  offered   acked  failed refused  useful    late\n";
        for (i, s) in self.seconds.iter().enumerate() {
            out += &format!(
                "{i:3} {:8} {:7} {:7} {:7} {:7} {:7}\n",
                s.offered, s.acked, s.failed, s.refused, s.useful, s.late
            );
        }
        out += &format!(
            "goodput before the spike: {:.0}/s; lowest from the spike on: {}/s; back at 90 % {} after the spike\n",
            self.goodput_before,
            self.goodput_min_from_spike,
            self.recovery_secs
                .map_or("never".to_string(), |s| format!("{s} s"))
        );
        out
    }
}

/// Draws goodput per second of `runs` (labelled by their --label), the spike shaded.
pub fn write_svg(path: &Path, runs: &[SpikeReport]) -> anyhow::Result<()> {
    let first = runs.first().context("no run to draw")?;
    let secs = runs.iter().map(|r| r.seconds.len()).max().unwrap_or(1) as f64;
    let top = runs
        .iter()
        .flat_map(|r| r.seconds.iter().map(|s| s.useful.max(s.offered)))
        .max()
        .unwrap_or(1) as f64
        * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "useful completions per second (within the deadline)",
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..secs, 0f64..top)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("records/s")
            .draw()?;
        let (s0, s1) = (
            first.args.before_secs as f64,
            (first.args.before_secs + first.args.spike_secs) as f64,
        );
        chart.draw_series([Rectangle::new(
            [(s0, 0.0), (s1, top)],
            RGBColor(230, 230, 230).filled(),
        )])?;
        const COLORS: [RGBColor; 6] = [RED, BLUE, GREEN, MAGENTA, BLACK, RGBColor(255, 140, 0)];
        for (run, &color) in runs.iter().zip(COLORS.iter().cycle()) {
            let label = run.args.label.clone().unwrap_or_else(|| "run".to_string());
            chart
                .draw_series(LineSeries::new(
                    run.seconds
                        .iter()
                        .enumerate()
                        .map(|(i, s)| (i as f64 + 0.5, s.useful as f64)),
                    color.stroke_width(2),
                ))?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
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

    fn args() -> SpikeArgs {
        SpikeArgs {
            brokers: String::new(),
            topic: String::new(),
            partitions: 1,
            group: String::new(),
            client_id: String::new(),
            capacity: 100.0,
            load: 0.8,
            spike: 2.0,
            before_secs: 5,
            spike_secs: 2,
            after_secs: 5,
            deadline_ms: 1000,
            message_size: 100,
            config: Vec::new(),
            label: None,
            json: None,
        }
    }

    fn seconds(useful: &[u64]) -> Vec<Second> {
        useful
            .iter()
            .map(|&u| Second {
                useful: u,
                ..Second::default()
            })
            .collect()
    }

    #[test]
    fn recovery_is_counted_from_the_end_of_the_spike() {
        // Seconds 3 and 4 are the baseline (80); the spike is seconds 5 and 6.
        let s = seconds(&[0, 10, 50, 80, 80, 60, 0, 0, 30, 75, 79, 80]);
        let report = summarize(args(), 100.0, 80.0, s);
        assert_eq!(report.goodput_before, 80.0);
        assert_eq!(report.goodput_min_from_spike, 0);
        // 72 is 90 % of 80: seconds 9 and 10 are the first two in a row, 2 s after the spike.
        assert_eq!(report.recovery_secs, Some(2));
    }

    #[test]
    fn no_recovery_is_reported_as_none() {
        let s = seconds(&[0, 0, 0, 80, 80, 60, 0, 0, 0, 0, 0, 80]);
        let report = summarize(args(), 100.0, 80.0, s);
        assert_eq!(report.recovery_secs, None);
    }
}
