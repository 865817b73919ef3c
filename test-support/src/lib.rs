//! What lograil's test suites share, so that each is written once:
//!
//! - [`broker`]: the real `lograil` binary on 127.0.0.1:0 ([`TestBroker`]), stopped gracefully
//!   or with SIGKILL and started again on the same data;
//! - [`certs`]: a throwaway CA and certificates for the TLS tests ([`Certs`]);
//! - [`in_process`]: the broker in the test's own process through `lograil::run`
//!   ([`InProcess`]), for tests that configure what the binary cannot (storage fakes, timings);
//! - [`wire`]: raw Kafka protocol, one frame at a time;
//! - [`kafka`]: Kafka operations over the raw protocol and librdkafka (create a topic, produce,
//!   fetch, ...) and [`kafka::wait_until`];
//! - [`power`]: a FUSE file system that can lose power ([`PowerCutFs`]): after a cut, only what
//!   was fsynced is left;
//! - [`process`]: child processes' stdout collected line by line, and a free port;
//! - [`cluster`]: where the client and retry-topic suites run ([`TestCluster`]): a lograil
//!   broker of their own, or the Apache Kafka cluster named by `LOGRAIL_TEST_KAFKA`.
//!
//! Not published; a dev-dependency of the suites (`publish = false`).
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_docs)]

pub mod broker;
pub mod certs;
pub mod cluster;
pub mod in_process;
pub mod java;
pub mod kafka;
pub mod power;
pub mod process;
pub mod wire;

pub use broker::{lograil, lograil_stdout, TestBroker};
pub use certs::Certs;
pub use cluster::TestCluster;
pub use in_process::InProcess;
pub use power::PowerCutFs;
