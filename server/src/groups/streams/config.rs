//! A streams group's own settings, Kafka's group configs `streams.session.timeout.ms`,
//! `streams.heartbeat.interval.ms`, `streams.num.standby.replicas` and
//! `streams.initial.rebalance.delay.ms`: set on the group with IncrementalAlterConfigs (as
//! `kafka-configs --entity-type groups` does; kept with the other group configs, in
//! `__share_group_state`), over the broker's `group.streams.*`. Kafka Streams' own
//! `num.standby.replicas` is ignored under `group.protocol=streams`: this is where a user sets
//! standbys for one application.

use std::time::Duration;

use super::StreamsConfig;

/// The group configs of streams groups.
pub const NAMES: [&str; 4] = [
    SESSION_TIMEOUT,
    HEARTBEAT_INTERVAL,
    STANDBY_REPLICAS,
    INITIAL_DELAY,
];
const SESSION_TIMEOUT: &str = "streams.session.timeout.ms";
const HEARTBEAT_INTERVAL: &str = "streams.heartbeat.interval.ms";
const STANDBY_REPLICAS: &str = "streams.num.standby.replicas";
const INITIAL_DELAY: &str = "streams.initial.rebalance.delay.ms";
/// Kafka's `group.streams.max.standby.replicas` (default 2).
const MAX_STANDBY_REPLICAS: u64 = 2;
/// The longest timeout or delay taken, in ms (an hour).
const MAX_MS: u64 = 3_600_000;

/// Whether `name` is a streams group config.
pub fn is_streams_config(name: &str) -> bool {
    NAMES.contains(&name)
}

/// Checks a value of `name` (one of [`NAMES`]); what is expected, if it is refused.
pub fn check(name: &str, value: &str) -> Result<(), &'static str> {
    let (min, max, expected) = match name {
        STANDBY_REPLICAS => (0, MAX_STANDBY_REPLICAS, "in 0..=2"),
        INITIAL_DELAY => (0, MAX_MS, "in 0..=3600000"),
        SESSION_TIMEOUT | HEARTBEAT_INTERVAL => (1, MAX_MS, "in 1..=3600000"),
        _ => return Err("a streams group config"),
    };
    match value.trim().parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(()),
        _ => Err(expected),
    }
}

impl StreamsConfig {
    /// A group's effective settings: the broker's, with the group's `overrides` (checked
    /// when they were set; others are not streams configs and are skipped).
    pub fn with_overrides(&self, overrides: &[(String, String)]) -> StreamsConfig {
        let mut config = self.clone();
        for (name, value) in overrides {
            let Ok(n) = value.trim().parse::<u64>() else {
                continue;
            };
            match name.as_str() {
                SESSION_TIMEOUT => config.session_timeout = Duration::from_millis(n),
                HEARTBEAT_INTERVAL => config.heartbeat_interval = Duration::from_millis(n),
                STANDBY_REPLICAS => config.standbys = usize::try_from(n).unwrap_or(0),
                INITIAL_DELAY => config.initial_delay = Duration::from_millis(n),
                _ => {}
            }
        }
        config
    }

    /// Each streams group config with its value here, as DescribeConfigs lists them.
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        let ms = |d: Duration| d.as_millis().to_string();
        vec![
            (SESSION_TIMEOUT, ms(self.session_timeout)),
            (HEARTBEAT_INTERVAL, ms(self.heartbeat_interval)),
            (STANDBY_REPLICAS, self.standbys.to_string()),
            (INITIAL_DELAY, ms(self.initial_delay)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_apply_over_the_broker_settings_and_bad_values_are_refused() {
        let broker = StreamsConfig::default();
        let overrides = [
            (STANDBY_REPLICAS.to_string(), "1".to_string()),
            (SESSION_TIMEOUT.to_string(), "6000".to_string()),
            (
                "share.record.lock.duration.ms".to_string(),
                "5000".to_string(),
            ),
        ];
        let group = broker.with_overrides(&overrides);
        assert_eq!(group.standbys, 1);
        assert_eq!(group.session_timeout, Duration::from_millis(6000));
        assert_eq!(group.heartbeat_interval, broker.heartbeat_interval);
        assert!(check(STANDBY_REPLICAS, "2").is_ok());
        assert!(check(STANDBY_REPLICAS, "3").is_err());
        assert!(check(SESSION_TIMEOUT, "0").is_err());
        assert!(check(HEARTBEAT_INTERVAL, "soon").is_err());
        assert!(check("streams.other", "1").is_err());
    }
}
