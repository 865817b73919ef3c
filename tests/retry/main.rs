//! The retry-topic suite: retrying consumers (the `retry-topic` crate) and `lograil dlt`
//! against a real broker.
//!
//! As the client suite: every test starts its own `lograil` broker on 127.0.0.1:0, or with
//! `LOGRAIL_TEST_KAFKA=<dir>` (a cluster from `tests/kafka/kafka.sh start <dir>`) runs against
//! that Apache Kafka cluster instead, with its own topics and groups.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

mod chain;
mod dlt;
mod exactly_once;
mod hol;
mod kill;
mod ordering;
mod spring;
