//! The suffixes that name a retry chain's topics, as the `retry-topic` crate and Spring Kafka
//! write them, and the test the broker's metrics and console apply to a topic's name.

/// What a retry chain's dead-letter topic appends to the main topic's name (`orders-dlt`):
/// `retry-topic`'s default and Spring Kafka's since 2.8.
pub const DEAD_LETTER_SUFFIX: &str = "-dlt";

/// What a retry chain's retry topics append to the main topic's name, before any delay or
/// index (`orders-retry`, `orders-retry-1000`): `retry-topic`'s default and Spring Kafka's.
pub const RETRY_SUFFIX: &str = "-retry";

/// The dead-letter suffix of Spring Kafka before 2.8 (`orders.DLT`), still recognised.
pub const LEGACY_DEAD_LETTER_SUFFIX: &str = ".DLT";

/// Whether `topic` is named as a retry chain's dead-letter topic: it ends with
/// [`DEAD_LETTER_SUFFIX`] or [`LEGACY_DEAD_LETTER_SUFFIX`] (case-sensitive) after a non-empty
/// main topic name. A chain configured with another suffix is not recognised by name.
pub fn is_dead_letter_topic(topic: &str) -> bool {
    [DEAD_LETTER_SUFFIX, LEGACY_DEAD_LETTER_SUFFIX]
        .iter()
        .any(|suffix| topic.len() > suffix.len() && topic.ends_with(suffix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_letter_topics_by_name() {
        assert!(is_dead_letter_topic("orders-dlt"));
        assert!(is_dead_letter_topic("orders.DLT"));
        assert!(!is_dead_letter_topic("orders"));
        assert!(!is_dead_letter_topic("-dlt"));
        assert!(!is_dead_letter_topic(".DLT"));
        assert!(!is_dead_letter_topic("orders-dlt-archive"));
        assert!(!is_dead_letter_topic("orders-DLT"));
        assert!(!is_dead_letter_topic("orders-retry"));
    }
}
