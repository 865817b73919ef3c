//! When appends reach the disk (`flush.messages`, `flush.ms`, `write.caching`) and what an
//! append's acknowledgement waits for.

/// When appends reach the disk: Kafka's `flush.messages` and `flush.ms`, and Redpanda's
/// `write.caching`. On one node there are no replicas, so an `acks=all` append is
/// acknowledged once fsynced (what "on every in-sync replica" can mean here), unless write
/// caching is on; `acks=0` and `acks=1` ride the page cache, fsynced in the background within
/// `flush.ms` (see [`Ack`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Durability {
    /// `flush.messages`: an append that leaves this many offsets or more not yet fsynced
    /// waits for an fsync, whatever its acks (`Some(1)`: every append). `None`: Kafka's
    /// default, no count.
    pub flush_messages: Option<u64>,
    /// `flush.ms`: data written is fsynced in the background at most about this long after
    /// it was written. `None`: never by time (Kafka's default).
    pub flush_ms: Option<u64>,
    /// `write.caching`: `acks=all` is acknowledged from the page cache too (the behaviour
    /// of lograil before durable acks, and of Kafka on one broker).
    pub write_caching: bool,
}

impl Durability {
    /// lograil's default `flush.ms`: a power cut loses at most about a second of what was
    /// acknowledged with `acks=0` or `acks=1` (an fsync a second per written partition costs
    /// little; Kafka's default never fsyncs by time).
    pub const DEFAULT_FLUSH_MS: u64 = 1000;

    /// Every append acknowledged only once fsynced (`flush.messages=1`), as the broker's own
    /// state topics are written.
    pub const ALWAYS: Durability = Durability {
        flush_messages: Some(1),
        flush_ms: None,
        write_caching: false,
    };

    /// The page cache for every append and nothing fsynced until a roll or a close: Kafka's
    /// default on one broker (`write.caching=true`, no `flush.*`).
    pub const PAGE_CACHE: Durability = Durability {
        flush_messages: None,
        flush_ms: None,
        write_caching: true,
    };

    /// Whether an append acknowledged with `ack`, leaving `unsynced` offsets not yet
    /// fsynced, must wait for an fsync before it is acknowledged.
    pub fn waits(&self, ack: Ack, unsynced: i64) -> bool {
        let by_count = self
            .flush_messages
            .is_some_and(|n| u64::try_from(unsynced).unwrap_or(0) >= n);
        by_count
            || match ack {
                Ack::Written => false,
                Ack::All => !self.write_caching,
                Ack::Fsynced => true,
            }
    }
}

impl Default for Durability {
    /// `acks=all` fsynced, the rest within [`Durability::DEFAULT_FLUSH_MS`].
    fn default() -> Self {
        Durability {
            flush_messages: None,
            flush_ms: Some(Self::DEFAULT_FLUSH_MS),
            write_caching: false,
        }
    }
}

/// What the acknowledgement of an append waits for: a Produce's `acks`, or the broker's own
/// writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ack {
    /// `acks=0` and `acks=1`: written to the page cache (and fsynced as `flush.*` say).
    Written,
    /// `acks=all`: fsynced, unless the topic's `write.caching` is on.
    All,
    /// Fsynced whatever the topic's settings: what the broker itself writes and relies on
    /// after a power cut (transaction markers).
    Fsynced,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TopicConfig;

    #[test]
    fn flush_settings_take_every_value_kafka_takes() {
        let config = TopicConfig::from_properties("flush.messages=1\n").unwrap();
        assert_eq!(config.durability.flush_messages, Some(1));
        let back = TopicConfig::from_properties(&config.to_properties()).unwrap();
        assert_eq!(back.durability, config.durability);

        let mut config = TopicConfig::default();
        assert_eq!(config.durability, Durability::default());
        assert_eq!(
            config.durability.flush_ms,
            Some(Durability::DEFAULT_FLUSH_MS)
        );
        config.set("flush.messages", "5000").unwrap();
        config.set("flush.ms", "0").unwrap();
        config.set("write.caching", "TRUE").unwrap();
        assert_eq!(
            config.durability,
            Durability {
                flush_messages: Some(5000),
                flush_ms: Some(0),
                write_caching: true
            }
        );
        let back = TopicConfig::from_properties(&config.to_properties()).unwrap();
        assert_eq!(back.durability, config.durability);
        // Kafka's default, Long.MAX_VALUE, is "never"; so is lograil's old -1.
        config.set("flush.messages", "9223372036854775807").unwrap();
        config.set("flush.ms", "-1").unwrap();
        assert_eq!(
            (config.durability.flush_messages, config.durability.flush_ms),
            (None, None)
        );
        let entries = config.entries();
        let value = |name| entries.iter().find(|(n, _)| *n == name).unwrap().1.clone();
        assert_eq!(value("flush.messages"), "9223372036854775807");
        assert_eq!(value("flush.ms"), "9223372036854775807");
        assert_eq!(value("write.caching"), "true");
        for (name, value, message) in [
            ("flush.messages", "0", "Invalid value 0 for configuration flush.messages: Value must be at least 1"),
            ("flush.ms", "-2", "Invalid value -2 for configuration flush.ms: Value must be at least 0"),
            ("write.caching", "yes", "Invalid value yes for configuration write.caching: Expected value to be either true or false"),
        ] {
            let before = config.clone();
            assert_eq!(config.set(name, value).unwrap_err().to_string(), message);
            assert_eq!(config, before, "refused values change nothing");
        }
    }

    #[test]
    fn acks_all_waits_for_an_fsync_unless_write_caching() {
        let default = Durability::default();
        assert!(default.waits(Ack::All, 1));
        assert!(!default.waits(Ack::Written, 1_000_000));
        assert!(default.waits(Ack::Fsynced, 1));
        assert!(!Durability::PAGE_CACHE.waits(Ack::All, 1_000_000));
        assert!(Durability::PAGE_CACHE.waits(Ack::Fsynced, 1));
        assert!(Durability::ALWAYS.waits(Ack::Written, 1));
        let every_100 = Durability {
            flush_messages: Some(100),
            ..Durability::PAGE_CACHE
        };
        assert!(!every_100.waits(Ack::Written, 99));
        assert!(every_100.waits(Ack::Written, 100));
    }
}
