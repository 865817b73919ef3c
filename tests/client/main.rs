//! The client suite: lograil's own Rust client (`consumer` crate) against a real broker.
//!
//! By default every test starts its own `lograil` broker on 127.0.0.1:0. With
//! `LOGRAIL_TEST_KAFKA=<dir>` (a cluster started by `tests/kafka/kafka.sh start <dir>`), the same
//! tests run against that Apache Kafka cluster instead. Tests named `kafka_only_*` (a broker
//! killed under acks=all with replication factor 3) do nothing on lograil; `lograil_only_*`
//! (the whole broker frozen or killed) do nothing on the shared Kafka cluster.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod backpressure;
mod console;
mod cross_client;
mod demo;
mod failover;
mod features;
mod franz_txn;
mod group;
mod positions;
mod producer;
mod queue;
mod record_errors;
mod regex_subscription;
mod security;
mod share_isolation;
mod static_member;
mod transactions;
