//! Command-line flags of `lograil-bench` (clap derive). Every flag has a doc comment: that is
//! what `lograil-bench --help` prints.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use serde::Serialize;

use crate::units::ByteSize;

/// Throughput and latency of any Kafka-compatible broker, driven through librdkafka.
///
/// Modes: `produce`, `consume`, `end-to-end`; `limits` measures the machine's raw disk and
/// loopback TCP rates so broker figures can be quoted as a fraction of them.
#[derive(Debug, Parser)]
#[command(name = "lograil-bench", version)]
pub struct Cli {
    /// What to measure.
    #[command(subcommand)]
    pub command: Command,
}

/// The modes of the harness.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Produce records (as fast as possible, or open-loop at --rate) and report throughput and
    /// per-record delivery latency (send, or intended send time with --rate, to acknowledgement).
    Produce(RunArgs),
    /// Read the topic from its first offsets to the end offsets it had at the start (or until
    /// --messages / --total-bytes) and report throughput. Run `produce` first to fill it.
    Consume(RunArgs),
    /// Produce and consume at once and report per-record latency from the time stamped in the
    /// record (its send time, or its intended send time with --rate) to its consumption.
    EndToEnd(RunArgs),
    /// The machine's raw limits: sequential file writes (with and without fdatasync) and
    /// loopback TCP throughput and round-trip time.
    Limits(LimitsArgs),
    /// Share-group workers (lograil's queue consumer, explicit acks) complete the records of a
    /// filled topic; compared with a plain fetch of the same records in the same run.
    Queue(QueueArgs),
    /// A consumer group of fixed capacity under open-loop load with a spike: useful
    /// (in-deadline) completions per second, and how long they take to recover.
    Spike(crate::spike::SpikeArgs),
    /// Draws the goodput over time of `spike --json` results into one SVG.
    SpikePlot(crate::spike::SpikePlotArgs),
    /// A noisy neighbour in a share group: tenant A floods the queue, B, C and D submit a few
    /// tasks each; their waits on an idle queue, under FIFO and under fair turns.
    Noisy(crate::noisy::NoisyArgs),
    /// The `spike` mode against share-group workers, with clients that put their deadline in
    /// a header and retry once.
    ShareSpike(crate::share_spike::ShareSpikeArgs),
}

/// The client library the producers and consumers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientKind {
    /// librdkafka through the `rdkafka` crate.
    Rdkafka,
    /// lograil's own Rust client (the `consumer` crate); librdkafka-only `-X` properties are
    /// not understood by it.
    Lograil,
}

/// Flags of the `produce`, `consume` and `end-to-end` modes.
#[derive(Debug, Clone, Args, Serialize)]
pub struct RunArgs {
    /// The client library the producers and consumers use (topic setup and offsets always
    /// go through librdkafka).
    #[arg(long, value_enum, default_value = "rdkafka")]
    pub client: ClientKind,
    /// `--client lograil`: tokio worker threads of each client thread's runtime (0: a
    /// current-thread runtime).
    #[arg(long, default_value_t = 2)]
    pub tokio_workers: usize,
    /// `--client lograil`: every producer a task of one runtime of --tokio-workers threads
    /// instead of a thread of its own (for hundreds or thousands of producers).
    #[arg(long)]
    pub shared_runtime: bool,
    /// Bootstrap broker address (any Kafka-compatible broker).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub brokers: String,
    /// Topic to write to / read from; created with --partitions if missing.
    #[arg(long, default_value = "lograil-bench")]
    pub topic: String,
    /// Partitions of the topic when the harness creates it (an existing topic keeps its own).
    #[arg(long, default_value_t = 6)]
    pub partitions: i32,
    /// Producer clients, each on its own thread with its own librdkafka instance.
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    /// Consumer clients, each on its own thread; the partitions are dealt out round-robin and
    /// read with assign() (no consumer group).
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    /// Size of each record's value in bytes. The first 8 bytes carry the send time (µs since
    /// the Unix epoch) for end-to-end latency, so end-to-end needs at least 8.
    #[arg(long, default_value_t = 1000)]
    pub message_size: usize,
    /// Producer `batch.size` in bytes (librdkafka's default if not given: 1000000).
    #[arg(long)]
    pub batch_size: Option<u64>,
    /// Producer `linger.ms` (librdkafka's default if not given: 5).
    #[arg(long)]
    pub linger_ms: Option<f64>,
    /// Producer `acks`: 0, 1, or -1 (all).
    #[arg(long, default_value = "1", allow_hyphen_values = true)]
    pub acks: String,
    /// Records to produce in total (all producers), or at most this many to consume.
    /// Default 1000000 for produce and end-to-end; for consume, the whole topic.
    #[arg(long, conflicts_with = "total_bytes")]
    pub messages: Option<u64>,
    /// Instead of --messages: this many bytes of record values (e.g. 1GiB, 500MB).
    #[arg(long)]
    pub total_bytes: Option<ByteSize>,
    /// Open loop: send at this many records per second in total (split evenly among the
    /// producers), latency measured from each record's intended send time (corrects
    /// coordinated omission). Without it, producers send as fast as librdkafka accepts.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Records sent (with --rate: due) in the first this many ms are sent, counted and read,
    /// but left out of the latency figures: client start-up is not the broker's latency
    /// (librdkafka's first sends wait for metadata, an idempotent producer's for its id).
    #[arg(long, default_value_t = 0)]
    pub warmup_ms: u64,
    /// Distinct keys, cycled through record by record (partitioned by murmur2, as the Java
    /// client does); 0 sends records without a key.
    #[arg(long, default_value_t = 0)]
    pub keys: u64,
    /// With --keys: give each record a key drawn at random (uniformly) from the --keys keys
    /// instead of cycling through them; the draw is a function of the record's number, so every
    /// run sends the same sequence (e.g. to two brokers). A compacted topic's cleaner then
    /// keeps records scattered through every batch, as with real updates, not whole batches.
    #[arg(long, requires = "keys")]
    pub random_keys: bool,
    /// Extra librdkafka property for every client, as NAME=VALUE (repeatable), e.g.
    /// `-X fetch.wait.max.ms=10`.
    #[arg(short = 'X', long = "config", value_name = "NAME=VALUE")]
    pub config: Vec<String>,
    /// Transactions (librdkafka only): each producer has a transactional.id of its own, runs
    /// init_transactions before the run and commits a transaction every this many ms (checked
    /// after each send; the commit blocks the producer until the broker has ended it), and
    /// the last one at the end; consumers read with isolation.level=read_committed, so the
    /// end-to-end latency is a record's (intended) send to its commit being seen.
    #[arg(long, value_name = "MS")]
    pub transaction_ms: Option<u64>,
    /// PID of the broker process: report its CPU seconds per GiB moved and its peak RSS
    /// (from /proc/PID/stat and /proc/PID/status).
    #[arg(long)]
    pub broker_pid: Option<u32>,
    /// Give up after this many seconds (the run is reported as incomplete).
    #[arg(long, default_value_t = 300)]
    pub timeout_secs: u64,
    /// Free text stored with the results in --json (e.g. how the broker was started).
    #[arg(long)]
    pub label: Option<String>,
    /// Also write parameters, machine, broker, git revision and results to this JSON file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write every acknowledged record's (intended) send time, in µs since the Unix
    /// epoch, and its delivery latency in µs to this file, one record a line, in send order:
    /// the latency of any stretch of the run (e.g. while the broker did something else) can
    /// then be told from the rest. Produce and end-to-end only; 16 bytes of memory a record.
    #[arg(long, value_name = "FILE")]
    pub latency_file: Option<PathBuf>,
    /// Also draw the run to this SVG file: the latency percentile curve (delivery and/or
    /// end-to-end; x from 0 to 100 on a log scale of 1/(1 - p), y in ms) and the records
    /// acknowledged / read in each second of the run.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

/// Flags of the `limits` mode.
#[derive(Debug, Clone, Args, Serialize)]
pub struct LimitsArgs {
    /// Folder for the disk test file (created if missing; the file is removed afterwards).
    #[arg(long, default_value = "./target/bench-data")]
    pub dir: PathBuf,
    /// Bytes written by the buffered sequential write test (1 MiB writes).
    #[arg(long, default_value = "1GiB")]
    pub disk_bytes: ByteSize,
    /// Write sizes for the write + fdatasync test, comma-separated (one fdatasync per write).
    #[arg(long, value_delimiter = ',', default_value = "16KiB,64KiB,1MiB")]
    pub sync_sizes: Vec<ByteSize>,
    /// Seconds for each timed test (each fdatasync size, TCP throughput, TCP round trips).
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Size of each write in the loopback TCP throughput test.
    #[arg(long, default_value = "256KiB")]
    pub tcp_write_size: ByteSize,
    /// Free text stored with the results in --json.
    #[arg(long)]
    pub label: Option<String>,
    /// Also write parameters, machine, git revision and results to this JSON file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Flags of the `queue` mode.
#[derive(Debug, Clone, Args, Serialize)]
pub struct QueueArgs {
    /// Bootstrap broker address (lograil, or a Kafka 4.2+ cluster with share groups).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub brokers: String,
    /// The topic to read; fill it with `lograil-bench produce` first.
    #[arg(long, default_value = "lograil-bench")]
    pub topic: String,
    /// Share-group workers, each a queue consumer of its own.
    #[arg(long, default_value_t = 8)]
    pub workers: usize,
    /// Records to complete (default: the whole topic).
    #[arg(long)]
    pub messages: Option<u64>,
    /// Each worker's `max.poll.records`.
    #[arg(long, default_value_t = 500)]
    pub max_poll_records: u32,
    /// Tokio worker threads shared by the workers.
    #[arg(long, default_value_t = 2)]
    pub tokio_workers: usize,
    /// The broker's data directory (lograil): also report the share-group state written per
    /// completed record.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout_secs: u64,
    /// Also write the parameters and results to this JSON file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}
