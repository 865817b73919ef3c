//! # vocabulary — names lograil's crates share, declared once
//!
//! The broker (`lograil-broker`), the client (`consumer`), the broker's console and
//! `retry-topic` speak of the same things under the same names: Kafka's security protocols,
//! the names that make a topic a dead-letter or retry topic, and the header names of a retry
//! chain (Spring Kafka's and lograil's). Each is declared here, and nowhere else.
//!
//! **It is** a leaf: names, their parsing and their printing, no I/O, no dependency but
//! `thiserror`. **It is not** the place for behaviour built on the names (how a chain names
//! its topics, how a header's bytes are encoded): that stays with the crate that does it.
//!
//! ```
//! use vocabulary::{is_dead_letter_topic, SecurityProtocol};
//!
//! let protocol: SecurityProtocol = "sasl_ssl".parse().unwrap();
//! assert!(protocol.uses_tls() && protocol.uses_sasl());
//! assert_eq!(protocol.to_string(), "SASL_SSL");
//! assert!(is_dead_letter_topic("orders-dlt"));
//! assert_eq!(vocabulary::headers::ATTEMPTS, "retry_topic-attempts");
//! ```

#![warn(missing_docs, unreachable_pub)]

pub mod headers;
mod security;
mod topic_names;

pub use security::{SecurityProtocol, UnknownSecurityProtocol};
pub use topic_names::{
    is_dead_letter_topic, DEAD_LETTER_SUFFIX, LEGACY_DEAD_LETTER_SUFFIX, RETRY_SUFFIX,
};
