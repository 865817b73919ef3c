//! lograil's benchmarks: the criterion micro-benchmarks of log-core live in `benches/`, and
//! this library is the `lograil-bench` harness, which drives any Kafka-compatible broker through
//! librdkafka (the `rdkafka` crate) or lograil's own client (`--client lograil`) and measures
//! throughput and latency.
//!
//! It is not a load generator for production clusters (one machine, one process), and it does
//! not use consumer groups: consumers are assigned partitions explicitly, so it works against a
//! broker without a group coordinator.
//!
//! One job per module:
//!
//! | module | job |
//! |---|---|
//! | [`args`] | the command-line flags |
//! | [`run`] | the `produce`, `consume` and `end-to-end` modes |
//! | [`produce`] / [`consume`] | one producer / consumer client on its thread |
//! | [`lograil_client`] | the same jobs with lograil's own client (`--client lograil`) |
//! | [`topic`] | creating the topic, its partitions and offsets |
//! | [`clients`] | librdkafka settings from the flags |
//! | [`librdkafka`] | `-X` properties, librdkafka's warnings and errors on stderr |
//! | [`client_stats`] | librdkafka's statistics: broker round trips, producer queueing |
//! | [`payload`] | record values and the send time stamped in them |
//! | [`latency`] | HdrHistogram in µs and percentiles |
//! | [`timeline`] | records acknowledged / read per second of the run |
//! | [`progress`] | the progress lines on a terminal (indicatif) |
//! | [`plot`] | the `--plot` SVG (plotters): latency percentiles and throughput over time |
//! | [`limits`] | the machine's raw disk and loopback TCP limits |
//! | [`queue`] | the `queue` mode: share-group workers against plain fetches |
//! | [`spike`] | the `spike` mode: a consumer group's goodput through a load spike |
//! | [`share_spike`] | the `share-spike` mode: the same spike against share-group workers |
//! | [`noisy`] | the `noisy` mode: a noisy neighbour in a share group, FIFO against fair turns |
//! | [`proc_stats`] | CPU and peak RSS of the broker and the harness from /proc |
//! | [`machine`] | CPU, cores, memory, kernel, git revision |
//! | [`report`] | the human table and the JSON file |
//! | [`units`] | byte sizes and rates |
//!
//! ```
//! use lograil_benches::latency::Latency;
//! let mut l = Latency::new();
//! for us in [120, 150, 900] {
//!     l.record_micros(us);
//! }
//! assert_eq!(l.summary().max_us, 900);
//! ```
#![warn(missing_docs)]

pub mod args;
pub mod client_stats;
pub mod clients;
pub mod consume;
pub mod latency;
pub mod librdkafka;
pub mod limits;
pub mod lograil_client;
pub mod machine;
pub mod noisy;
pub mod payload;
pub mod plot;
pub mod proc_stats;
pub mod produce;
pub mod progress;
pub mod queue;
pub mod report;
pub mod run;
pub mod share_spike;
pub mod spike;
pub mod timeline;
pub mod topic;
pub mod units;
