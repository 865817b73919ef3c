//! End-to-end tests: the real `lograil` binary on 127.0.0.1:0, driven by real, unmodified
//! Kafka clients (librdkafka through `rdkafka`, kcat, confluent-kafka, kafka-python) and by raw
//! protocol bytes; and the docs' shell blocks and table of tested versions, checked.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod acls;
mod admin;
mod availability;
mod backlog;
mod bad_input;
mod browser;
mod compacted_transactions;
mod compaction;
mod compatibility;
mod compression;
mod console;
mod console_actions;
mod console_messages;
mod console_shares;
mod console_tls;
mod console_topics;
mod consumer_protocol;
mod damaged;
mod demo;
mod docs;
mod external_clients;
mod fairness;
mod franz_go;
mod group_migration;
mod group_restart;
mod groups;
mod idempotence;
mod kafka_behaviours;
mod limits;
mod listener_security;
mod metrics;
mod power_cut;
mod protocol;
mod quota_enforcement;
mod quotas;
mod rdkafka_clients;
mod readme_layout;
mod security;
mod shares;
mod streams_groups;
mod structure;
mod topic_configs;
mod transaction_coordinator;
mod transaction_version_2;
mod transactions;
