//! What a retry chain looks like: its stages and their delays, topic names, attempt limits,
//! per-key ordering and the outage budget.

use std::time::Duration;

/// How long a record waits before each retry.
#[derive(Debug, Clone, PartialEq)]
pub enum Backoff {
    /// One stage per listed delay; retries past the list stay in the last stage.
    Fixed(Vec<Duration>),
    /// Retry `n` (0-based) waits `min(max, initial * multiplier^n)`: one stage per distinct
    /// value. With `jitter`, each record's wait is uniform in `[0, stage delay]` ("full
    /// jitter"), so a record may wait behind an earlier one of its stage for up to that delay.
    Exponential {
        /// Delay of the first retry; must not be zero.
        initial: Duration,
        /// Growth of the delay per retry; must be at least 1 (Spring's `multiplier`).
        multiplier: f64,
        /// Cap on every delay (Spring's `maxDelay`); the capped delay's stage takes every
        /// later retry.
        max: Duration,
        /// Full jitter: a record waits a random time up to its stage's delay, not the whole
        /// delay (topic names keep the whole delay).
        jitter: bool,
    },
}

/// How retries of the same delay share topics: Spring Kafka's `SameIntervalTopicReuseStrategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SameIntervalTopicReuse {
    /// Spring's default (since 4.1): one topic per distinct delay. A fixed back-off has one
    /// retry topic, `<topic><retry_suffix>` with nothing appended; an exponential one ends in
    /// one topic for every retry at the capped delay.
    #[default]
    SingleTopic,
    /// One topic per retry: a fixed back-off's are `-retry-0`, `-retry-1`, …; a repeated
    /// delay of an exponential back-off gets an index after it (`-retry-16000-0`,
    /// `-retry-16000-1`).
    MultipleTopics,
}

/// What is appended to the retry suffix: Spring Kafka's `TopicSuffixingStrategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TopicSuffixing {
    /// Spring's default: the topic's delay in ms (`-retry-1000`), except where Spring appends
    /// an index anyway (a fixed back-off over multiple topics) or nothing (a single topic).
    #[default]
    DelayValue,
    /// The topic's index in the chain, from 0 (`-retry-0`, `-retry-1`); a single topic still
    /// gets nothing appended.
    IndexValue,
    /// Not one of Spring's: every retry topic is `<retry_suffix>-<delay ms>`, one per distinct
    /// delay, even the one topic of a fixed back-off (`orders-retry-1000`). lograil named its
    /// topics so before it followed Spring's defaults; keep it to go on reading such topics.
    AlwaysDelayValue,
}

/// When most recent records fail, stop burning their attempts: pause and probe.
#[derive(Debug, Clone, PartialEq)]
pub struct OutageBudget {
    /// Outcomes (success or retryable failure) looked at.
    pub window: usize,
    /// Share of failures in a full window that means an outage.
    pub failure_ratio: f64,
    /// First wait between probes; doubles after each failed probe up to `probe_max`.
    pub probe_interval: Duration,
    /// Longest wait between probes, where the doubling stops.
    pub probe_max: Duration,
}

impl Default for OutageBudget {
    fn default() -> OutageBudget {
        OutageBudget {
            window: 20,
            failure_ratio: 0.8,
            probe_interval: Duration::from_secs(5),
            probe_max: Duration::from_secs(60),
        }
    }
}

/// A retry chain's settings. Defaults follow Spring Kafka 4.1's `@RetryableTopic` (3 attempts,
/// a fixed 1 s back-off, suffixes `-retry` and `-dlt`, same-interval topic reuse, delay
/// suffixes: `orders` → `orders-retry` → `orders-dlt`), so a chain and a Spring service with
/// default settings use the same topics; the extras Spring does not have are lograil's.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryConfig {
    /// The main topic.
    pub topic: String,
    /// The consumer group reading the main topic and the retry topics.
    pub group: String,
    /// The wait before each retry; it also names the retry topics, one per distinct delay.
    pub backoff: Backoff,
    /// Deliveries at most, the first included (Spring's `maxAttempts`).
    pub max_attempts: u32,
    /// A record not done this long after its main-topic timestamp goes to the DLT at its
    /// next failure (Spring's `timeout`).
    pub retry_deadline: Option<Duration>,
    /// Retry topics are `<topic><retry_suffix>`, with the delay or index appended as
    /// [`topic_reuse`](Self::topic_reuse) and [`topic_suffixing`](Self::topic_suffixing) say.
    pub retry_suffix: String,
    /// The dead-letter topic is `<topic><dlt_suffix>`.
    pub dlt_suffix: String,
    /// Whether retries of one delay share a topic (Spring's `sameIntervalTopicReuseStrategy`).
    pub topic_reuse: SameIntervalTopicReuse,
    /// What retry topic names end with (Spring's `topicSuffixingStrategy`).
    pub topic_suffixing: TopicSuffixing,
    /// Park later records of a key behind one in retry, and release them in order.
    pub key_ordering: bool,
    /// `None`: every failure takes an attempt, whatever the others do.
    pub outage: Option<OutageBudget>,
    /// Commit processed records at least this often (forwards are committed at once).
    pub commit_interval: Duration,
    /// Replication factor of topics created for the chain (-1: the broker's default).
    pub replication_factor: i16,
    /// Java client properties for the consumer only (`session.timeout.ms`, …).
    pub consumer_properties: Vec<(String, String)>,
    /// Java client properties for the producer only (`linger.ms`, …).
    pub producer_properties: Vec<(String, String)>,
    /// Exactly once: each forward (to a retry topic, the DLT, or parked) and the source
    /// offset's commit are one transaction, and the chain reads `read_committed`
    /// ([`RetryConfig::exactly_once`]).
    pub exactly_once: bool,
    /// The producer's `transactional.id` in exactly-once mode (`None`: `<group>-retry-` and a
    /// random suffix, new for each instance).
    pub transactional_id: Option<String>,
}

impl RetryConfig {
    /// A chain for `topic` read by consumer group `group`, with the defaults: a fixed 1 s
    /// back-off, 3 attempts, suffixes `-retry` and `-dlt`, Spring's naming (one retry topic,
    /// `<topic>-retry`), no retry deadline, no per-key ordering,
    /// the default [`OutageBudget`], commits every 500 ms, the broker's replication factor.
    pub fn new(topic: impl Into<String>, group: impl Into<String>) -> RetryConfig {
        RetryConfig {
            topic: topic.into(),
            group: group.into(),
            backoff: Backoff::Fixed(vec![Duration::from_secs(1)]),
            max_attempts: 3,
            retry_deadline: None,
            retry_suffix: vocabulary::RETRY_SUFFIX.to_string(),
            dlt_suffix: vocabulary::DEAD_LETTER_SUFFIX.to_string(),
            topic_reuse: SameIntervalTopicReuse::default(),
            topic_suffixing: TopicSuffixing::default(),
            key_ordering: false,
            outage: Some(OutageBudget::default()),
            commit_interval: Duration::from_millis(500),
            replication_factor: -1,
            consumer_properties: Vec::new(),
            producer_properties: Vec::new(),
            exactly_once: false,
            transactional_id: None,
        }
    }

    /// One stage per delay.
    pub fn delays(mut self, delays: impl IntoIterator<Item = Duration>) -> RetryConfig {
        self.backoff = Backoff::Fixed(delays.into_iter().collect());
        self
    }

    /// Exponential backoff (see [`Backoff::Exponential`]); the values are checked by
    /// [`RetryConfig::topology`].
    pub fn exponential(
        mut self,
        initial: Duration,
        multiplier: f64,
        max: Duration,
        jitter: bool,
    ) -> RetryConfig {
        self.backoff = Backoff::Exponential {
            initial,
            multiplier,
            max,
            jitter,
        };
        self
    }

    /// Whether retries of one delay share a topic (default: Spring's, [`SameIntervalTopicReuse::SingleTopic`]).
    pub fn topic_reuse(mut self, reuse: SameIntervalTopicReuse) -> RetryConfig {
        self.topic_reuse = reuse;
        self
    }

    /// What retry topic names end with (default: Spring's, [`TopicSuffixing::DelayValue`]).
    pub fn topic_suffixing(mut self, suffixing: TopicSuffixing) -> RetryConfig {
        self.topic_suffixing = suffixing;
        self
    }

    /// The retry and dead-letter suffixes (Spring's `retryTopicSuffix`, `dltTopicSuffix`;
    /// default `-retry` and `-dlt`).
    pub fn suffixes(mut self, retry: impl Into<String>, dlt: impl Into<String>) -> RetryConfig {
        self.retry_suffix = retry.into();
        self.dlt_suffix = dlt.into();
        self
    }

    /// Deliveries at most, the first included: `n - 1` retries; with 1 there are no retry
    /// topics and a failure goes straight to the DLT; 0 is refused by
    /// [`RetryConfig::topology`].
    pub fn max_attempts(mut self, n: u32) -> RetryConfig {
        self.max_attempts = n;
        self
    }

    /// A failed record whose next retry would be due more than `d` after its main-topic
    /// timestamp goes to the DLT instead (Spring's `timeout`; default: no deadline).
    pub fn retry_deadline(mut self, d: Duration) -> RetryConfig {
        self.retry_deadline = Some(d);
        self
    }

    /// Per-key ordering (default off). When on, every retry topic must have the main topic's
    /// partition count ([`RetryError::PartitionCount`](crate::RetryError::PartitionCount)).
    pub fn key_ordering(mut self, on: bool) -> RetryConfig {
        self.key_ordering = on;
        self
    }

    /// The outage budget (default: [`OutageBudget::default`]); `None` turns it off.
    pub fn outage(mut self, budget: Option<OutageBudget>) -> RetryConfig {
        self.outage = budget;
        self
    }

    /// Replication factor of the retry and dead-letter topics created at start (-1, the
    /// default: the broker's); topics that exist already are left as they are.
    pub fn replication_factor(mut self, rf: i16) -> RetryConfig {
        self.replication_factor = rf;
        self
    }

    /// Commit processed records at least this often (default 500 ms); forwarded records are
    /// committed at once.
    pub fn commit_interval(mut self, every: Duration) -> RetryConfig {
        self.commit_interval = every;
        self
    }

    /// Adds a Java client property for the consumer only, set over the common client
    /// properties, `group.id` and `enable.auto.commit=false`. An `auto.offset.reset` other
    /// than `earliest` is refused by [`RetryingConsumer::new`](crate::RetryingConsumer::new).
    pub fn consumer_property(mut self, name: &str, value: &str) -> RetryConfig {
        self.consumer_properties
            .push((name.to_string(), value.to_string()));
        self
    }

    /// Adds a Java client property for the producer only, set over the common client
    /// properties, `acks=all` and `enable.idempotence=true`.
    pub fn producer_property(mut self, name: &str, value: &str) -> RetryConfig {
        self.producer_properties
            .push((name.to_string(), value.to_string()));
        self
    }

    /// Exactly-once forwarding (Spring Kafka's chain with a transactional
    /// `KafkaTransactionManager`; Kafka's EOS v2, KIP-447): the record forwarded to the next
    /// retry topic or the DLT and its source offset commit in one transaction of a
    /// transactional producer (`send_offsets_to_transaction` with the consumer's group
    /// metadata, so a consumer the group fenced cannot commit), and processed records'
    /// offsets are committed through transactions too. The consumer reads `read_committed`,
    /// so a forward whose transaction aborted (a crash, a rebalance) is never read, and is
    /// done again from the source record. A handler's own side effects stay at least once.
    /// Needs a cluster with transactions (`transaction.state.log.*` on Kafka).
    pub fn exactly_once(mut self, on: bool) -> RetryConfig {
        self.exactly_once = on;
        self
    }

    /// The `transactional.id` of the exactly-once producer. One per running instance: two
    /// instances with the same id fence each other. A stable id per instance (a pod name)
    /// lets a restarted instance abort the transaction its predecessor left open at once;
    /// with the default (random per instance) that transaction holds its partitions'
    /// `read_committed` readers until `transaction.timeout.ms` (60 s by default).
    pub fn transactional_id(mut self, id: impl Into<String>) -> RetryConfig {
        self.transactional_id = Some(id.into());
        self
    }

    /// The chain's topics, or why this configuration cannot work.
    pub fn topology(&self) -> Result<Topology, ConfigError> {
        if self.topic.is_empty() || self.group.is_empty() {
            return Err(ConfigError("topic and group must not be empty".into()));
        }
        if self.max_attempts == 0 {
            return Err(ConfigError("max_attempts must be at least 1".into()));
        }
        let retries = self.max_attempts - 1;
        // The delay of each retry, in order.
        let waits: Vec<Duration> = match &self.backoff {
            Backoff::Fixed(d) if d.is_empty() && retries > 0 => {
                return Err(ConfigError("no delays given".into()))
            }
            Backoff::Fixed(d) => (0..retries as usize)
                .map(|i| d[i.min(d.len().saturating_sub(1))])
                .collect(),
            Backoff::Exponential {
                initial,
                multiplier,
                max,
                ..
            } => {
                if multiplier.is_nan() || *multiplier < 1.0 || initial.is_zero() {
                    return Err(ConfigError(
                        "exponential backoff needs initial > 0 and multiplier >= 1".into(),
                    ));
                }
                // As Spring Framework's ExponentialBackOff counts (and so names the topics):
                // each delay is the previous one times the multiplier, cut to whole ms, capped.
                let max_ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
                let mut current: Option<u64> = None;
                (0..retries)
                    .map(|_| {
                        let next = match current {
                            None => u64::try_from(initial.as_millis()).unwrap_or(u64::MAX),
                            Some(c) if c >= max_ms => max_ms,
                            Some(c) => ((c as f64 * multiplier) as u64).min(max_ms),
                        };
                        current = Some(next);
                        Duration::from_millis(next.min(max_ms))
                    })
                    .collect()
            }
        };
        let (stages, stage_of_retry) = self.name_stages(&waits);
        let jitter = matches!(self.backoff, Backoff::Exponential { jitter: true, .. });
        Ok(Topology {
            main: self.topic.clone(),
            dlt: format!("{}{}", self.topic, self.dlt_suffix),
            stages,
            stage_of_retry,
            jitter,
        })
    }

    /// The retry topics for `waits` (the delay of each retry, in order) and the stage of each
    /// retry, named as Spring Kafka's `DestinationTopicPropertiesFactory` names them. With
    /// [`SameIntervalTopicReuse::SingleTopic`] a stage is a distinct delay (Spring assumes the
    /// repeated delay is the last, as its back-offs make it; a list of delays that comes back
    /// to an earlier one reuses that one's topic).
    fn name_stages(&self, waits: &[Duration]) -> (Vec<Stage>, Vec<usize>) {
        let base = format!("{}{}", self.topic, self.retry_suffix);
        let multiple = self.topic_reuse == SameIntervalTopicReuse::MultipleTopics
            && self.topic_suffixing != TopicSuffixing::AlwaysDelayValue;
        let mut distinct: Vec<Duration> = Vec::new();
        for w in waits {
            if !distinct.contains(w) {
                distinct.push(*w);
            }
        }
        // Spring's "fixed delay" case: the index is appended instead of the delay.
        let by_index = match self.topic_suffixing {
            TopicSuffixing::IndexValue => true,
            TopicSuffixing::DelayValue => waits.len() > 1 && distinct.len() == 1,
            TopicSuffixing::AlwaysDelayValue => false,
        };
        if !multiple {
            let stages: Vec<Stage> = distinct
                .iter()
                .enumerate()
                .map(|(i, delay)| {
                    let topic = if self.topic_suffixing == TopicSuffixing::AlwaysDelayValue {
                        format!("{base}-{}", delay.as_millis())
                    } else if distinct.len() == 1 {
                        base.clone()
                    } else if by_index {
                        format!("{base}-{i}")
                    } else {
                        format!("{base}-{}", delay.as_millis())
                    };
                    Stage {
                        topic,
                        delay: *delay,
                    }
                })
                .collect();
            let of_retry = waits
                .iter()
                .map(|w| distinct.iter().position(|d| d == w).unwrap_or(0))
                .collect();
            return (stages, of_retry);
        }
        let stages = waits
            .iter()
            .enumerate()
            .map(|(i, delay)| {
                let topic = if by_index {
                    format!("{base}-{i}")
                } else {
                    let first = waits.iter().position(|w| w == delay).unwrap_or(i);
                    let repeated = waits.iter().filter(|w| *w == delay).count() > 1;
                    if repeated {
                        format!("{base}-{}-{}", delay.as_millis(), i - first)
                    } else {
                        format!("{base}-{}", delay.as_millis())
                    }
                };
                Stage {
                    topic,
                    delay: *delay,
                }
            })
            .collect();
        (stages, (0..waits.len()).collect())
    }
}

/// A configuration that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("retry configuration: {0}")]
pub struct ConfigError(pub String);

/// A retry topic and its delay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// Its name: `<topic><retry_suffix>`, maybe with the delay or index appended.
    pub topic: String,
    /// The delay in the topic's name; with jitter, a record's wait is at most this.
    pub delay: Duration,
}

/// Where a record is read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The main topic.
    Main,
    /// A retry topic: its index in [`Topology::stages`].
    Retry(usize),
}

/// The topics of a chain.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    /// The main topic ([`RetryConfig::topic`]).
    pub main: String,
    /// The dead-letter topic, `<main><dlt_suffix>`.
    pub dlt: String,
    /// Retry topics in order: one per distinct delay, or one per retry
    /// ([`SameIntervalTopicReuse::MultipleTopics`]).
    pub stages: Vec<Stage>,
    /// The stage of retry `n` (0-based: attempt `n + 2`).
    stage_of_retry: Vec<usize>,
    jitter: bool,
}

impl Topology {
    /// The main topic and the retry topics: what the consumer reads.
    pub fn read_topics(&self) -> Vec<String> {
        std::iter::once(self.main.clone())
            .chain(self.stages.iter().map(|s| s.topic.clone()))
            .collect()
    }

    /// Where in the chain `topic` is; `None` for any other topic, the DLT included.
    pub fn place(&self, topic: &str) -> Option<Place> {
        if topic == self.main {
            return Some(Place::Main);
        }
        self.stages
            .iter()
            .position(|s| s.topic == topic)
            .map(Place::Retry)
    }

    /// The stage that delivers attempt `attempt` (2 or more); `None` past the last retry.
    pub fn stage_for_attempt(&self, attempt: u32) -> Option<usize> {
        let retry = usize::try_from(attempt.checked_sub(2)?).ok()?;
        self.stage_of_retry.get(retry).copied()
    }

    /// How long a record sent to `stage` now waits there.
    pub fn wait(&self, stage: usize) -> Duration {
        let delay = self.stages[stage].delay;
        if self.jitter {
            let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
            Duration::from_millis(fastrand::u64(0..=ms))
        } else {
            delay
        }
    }
}

#[cfg(test)]
mod tests;
