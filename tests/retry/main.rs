//! The retry-topic suite: retrying consumers (the `retry-topic` crate) and `lograil dlt`
//! against a real broker.
//!
//! As the client suite: every test starts its own `lograil` broker on 127.0.0.1:0, or with
//! `LOGRAIL_TEST_KAFKA=<dir>` (a cluster from `tests/kafka/kafka.sh start <dir>`) runs against
//! that Apache Kafka cluster instead, with its own topics and groups.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod harness;

mod chain;
mod dlt;
mod exactly_once;
mod hol;
mod kill;
mod ordering;
mod spring;
