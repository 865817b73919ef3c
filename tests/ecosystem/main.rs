//! Kafka Streams and Kafka Connect, Apache Kafka's own 4.4.0 artifacts, unmodified, against a
//! real broker: the Java programs of `tests/ecosystem/java` (built by `tests/ecosystem/build.sh`
//! when stale) run against a `lograil` broker of this build, or with `LOGRAIL_TEST_KAFKA=<dir>`
//! (a cluster from `tests/kafka/kafka.sh start <dir>`) against that Apache Kafka cluster, each
//! test with topics, groups and application ids of its own.
//!
//! - `streams`: a stateful word count and a windowed count (tumbling windows on timestamps the
//!   test sets), stopped mid-way, its local state deleted, restarted: the counts restored from
//!   the changelogs and exact at the end.
//! - `connect`: a distributed Connect worker (config, offset and status topics compacted) with
//!   a source and a sink connector of our own, 10,000 records through it, the worker killed
//!   (SIGKILL) mid-way and started again: every record at the sink, in order per partition,
//!   the source resumed from its committed offset.
//! - `transactions`: the Java client's transactional producer (commit, abort,
//!   `sendOffsetsToTransaction`, a fenced zombie) read back read_committed and read_uncommitted
//!   by the Java consumer and librdkafka; a Streams word count with `exactly_once_v2` killed
//!   (SIGKILL) mid-run and restarted: every count in the read_committed output once.
//! - `streams_group`: KIP-1071's streams groups (`group.protocol=streams`): two instances of
//!   the exactly-once word count share the tasks the broker assigns, one is killed (SIGKILL)
//!   mid-run and its tasks move to the other once it is fenced: every count once.
//! - `kip848`: the Java client in a KIP-848 consumer group (`group.protocol=consumer`), three
//!   members, one killed mid-way: every record read, duplicates only past its last commit.
//!
//! The tests take turns (a JVM each, on a small machine). Skipped, with the reason printed,
//! when `java` or `mvn` is not on PATH (`.ci/run` installs both).
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod connect;
mod group_migration;
mod java;
mod kip848;
mod streams;
mod streams_group;
mod transactions;
