//! Every broker setting of `lograil serve`, declared once (the `settings!` table): its flag
//! (and `--config` file key), doc, parser, and where its value lands in the [`BrokerConfig`];
//! the `--config` file read with the same definitions.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::{Args as _, FromArgMatches as _};
use lograil::BrokerConfig;

/// Every broker setting, from flags or from the `--config` file (parsed by the same
/// definitions), each declared once below: its flag (and file key), doc, parser, and where its
/// value lands in the [`BrokerConfig`]. Unset ones keep the broker's defaults.
macro_rules! settings {
    ($($(#[$meta:meta])* $name:ident: $ty:ty => |$c:ident, $v:ident| $land:expr,)*) => {
        #[derive(Debug, Clone, Default, clap::Args)]
        pub(super) struct Settings {
            $($(#[$meta])* $name: Option<$ty>,)*
        }

        impl Settings {
            /// These settings, each falling back to `other`'s.
            fn or_each(self, other: Settings) -> Settings {
                Settings {
                    $($name: self.$name.or(other.$name),)*
                }
            }

            /// Applies every setting given onto `config`.
            pub(super) fn apply(&self, config: &mut BrokerConfig) -> anyhow::Result<()> {
                $(if let Some(value) = self.$name.clone() {
                    let land = |$c: &mut BrokerConfig, $v: $ty| -> anyhow::Result<()> {
                        $land;
                        Ok(())
                    };
                    land(config, value)?;
                })*
                Ok(())
            }
        }
    };
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A count as `usize`, or why not.
fn size(flag: &str, v: u64) -> anyhow::Result<usize> {
    usize::try_from(v).with_context(|| format!("--{flag} {v} is too large"))
}

/// A default topic config (by its Kafka name) of new topics.
fn topic_default(config: &mut BrokerConfig, name: &str, value: i64) -> anyhow::Result<()> {
    config
        .topic_defaults
        .set_number(name, value)
        .with_context(|| format!("--{}", name.replace('.', "-")))
}

/// A default topic config of new topics given as text (`compression.type`).
fn topic_default_text(config: &mut BrokerConfig, name: &str, value: &str) -> anyhow::Result<()> {
    config
        .topic_defaults
        .set(name, value)
        .with_context(|| format!("--{}", name.replace('.', "-")))
}

settings! {
    /// Host advertised to clients in Metadata (default: the listen address, 127.0.0.1 for 0.0.0.0).
    #[arg(long)]
    advertised_host: String => |c, v| c.advertised_host = Some(v),
    /// This broker's node id.
    #[arg(long)]
    node_id: i32 => |c, v| c.node_id = v,
    /// Create topics on first use (Metadata with auto-creation allowed): true or false.
    #[arg(long)]
    auto_create_topics: bool => |c, v| c.auto_create_topics = v,
    /// Partitions of an auto-created topic (and of CreateTopics asking for -1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(log_core::MAX_PARTITIONS)))]
    default_partitions: u32 => |c, v| c.default_partitions = v,
    /// Largest request frame accepted; a bigger one closes the connection.
    #[arg(long)]
    max_request_bytes: usize => |c, v| c.max_request_bytes = v,
    /// How often retention deletes old segments, in ms.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    retention_check_interval_ms: u64 => |c, v| c.retention_check_interval = ms(v),
    /// Most closed segments kept loaded (log memory-mapped, indexes in memory) at once; the
    /// least recently read are unloaded beyond it (default 10000; each is one memory map).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_loaded_segments: u64 => |c, v| c.log.loaded_segments = usize::try_from(v).unwrap_or(usize::MAX),
    /// Most active segments (one per partition) with their file open and mapped at once; the
    /// least recently used are parked (fsynced, closed) and open again on their next write or
    /// read (default 10000, lowered to half the open-file limit when that is smaller).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_open_segments: u64 => |c, v| c.log.open_segments = usize::try_from(v).unwrap_or(usize::MAX),
    /// Time between two passes of the scrubber, which checks every closed segment's CRCs in
    /// the background so damage is reported before a consumer meets it, in ms (lograil's own;
    /// default 86400000, a day; 0: only the pass at start-up after an unclean shutdown).
    #[arg(long)]
    log_scrub_interval_ms: u64 => |c, v| c.log.scrub.interval = (v > 0).then(|| ms(v)),
    /// Most bytes a second the scrubber reads (lograil's own; default 52428800, 50 MiB/s).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    log_scrub_bytes_per_second: u64 => |c, v| c.log.scrub.bytes_per_second = v,
    /// Whether the log cleaner compacts the topics whose cleanup.policy holds compact
    /// (Kafka's `log.cleaner.enable`, default true).
    #[arg(long)]
    log_cleaner_enable: bool => |c, v| c.log.cleaner.enabled = v,
    /// Pause between two looks of the log cleaner at the compacted partitions, in ms (Kafka's
    /// `log.cleaner.backoff.ms`, default 15000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    log_cleaner_backoff_ms: u64 => |c, v| c.log.cleaner.backoff = ms(v),
    /// Most memory one pass of the log cleaner gives its map of keys to latest offsets, in
    /// bytes (Kafka's `log.cleaner.dedupe.buffer.size`, default 134217728, which holds 3,670,016 keys).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1024..))]
    log_cleaner_dedupe_buffer_size: u64 => |c, v| c.log.cleaner.dedupe_buffer_bytes = usize::try_from(v).unwrap_or(usize::MAX),
    /// Most bytes a second the log cleaner reads and writes (Kafka's
    /// `log.cleaner.io.max.bytes.per.second`; default unbounded).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    log_cleaner_io_max_bytes_per_second: u64 => |c, v| c.log.cleaner.io_bytes_per_second = Some(v),
    /// How long a new consumer group waits for more members before its first rebalance, in ms
    /// (Kafka's `group.initial.rebalance.delay.ms`, default 3000).
    #[arg(long)]
    group_initial_rebalance_delay_ms: u64 => |c, v| c.groups.initial_rebalance_delay = ms(v),
    /// Smallest session timeout a consumer may ask for, in ms (`group.min.session.timeout.ms`,
    /// default 6000).
    #[arg(long)]
    group_min_session_timeout_ms: u64 => |c, v| c.groups.min_session_timeout = ms(v),
    /// Kafka's `group.consumer.session.timeout.ms`: a member of a consumer-protocol group
    /// (KIP-848, `group.protocol=consumer`) silent this long is fenced and its partitions go to
    /// the others (default 45000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    group_consumer_session_timeout_ms: u64 => |c, v| c.groups.consumer.session_timeout = ms(v),
    /// Kafka's `group.consumer.heartbeat.interval.ms`: how often consumer-protocol members
    /// heartbeat (default 5000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=i32::MAX as u64))]
    group_consumer_heartbeat_interval_ms: u64 => |c, v| c.groups.consumer.heartbeat_interval = ms(v),
    /// Kafka's `group.consumer.max.size`: members of one consumer-protocol group (default
    /// 1000; Kafka's is unbounded); a joiner over it gets GROUP_MAX_SIZE_REACHED.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    group_consumer_max_size: u64 => |c, v| c.groups.consumer.max_size = size("group-consumer-max-size", v)?,
    /// Kafka's `group.consumer.migration.policy`: whether a live classic group becomes a
    /// consumer-protocol group when a `group.protocol=consumer` member joins it (`upgrade`),
    /// and back when its last such member leaves (`downgrade`): `bidirectional` (default),
    /// `upgrade`, `downgrade` or `disabled`.
    #[arg(long)]
    group_consumer_migration_policy: String => |c, v| c.groups.consumer.migration = v.parse().map_err(|e: String| anyhow::anyhow!("--group-consumer-migration-policy {e}"))?,
    /// Kafka's `group.streams.session.timeout.ms`: a member of a streams group (KIP-1071,
    /// `group.protocol=streams`) silent this long is fenced and its tasks go to the others
    /// (default 45000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    group_streams_session_timeout_ms: u64 => |c, v| c.groups.streams.session_timeout = ms(v),
    /// Kafka's `group.streams.heartbeat.interval.ms`: how often streams group members
    /// heartbeat (default 5000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=i32::MAX as u64))]
    group_streams_heartbeat_interval_ms: u64 => |c, v| c.groups.streams.heartbeat_interval = ms(v),
    /// Kafka's `group.streams.num.standby.replicas`: standby replicas of each stateful task
    /// (default 0, at most 2 as Kafka's `group.streams.max.standby.replicas`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=2))]
    group_streams_num_standby_replicas: u64 => |c, v| c.groups.streams.standbys = v as usize,
    /// Kafka's `group.streams.initial.rebalance.delay.ms`: how long a new streams group waits
    /// for more members before its first assignment (default 3000; 0: none).
    #[arg(long)]
    group_streams_initial_rebalance_delay_ms: u64 => |c, v| c.groups.streams.initial_delay = ms(v),
    /// Kafka's `group.streams.max.size`: members of one streams group (default 1000; Kafka's is
    /// unbounded); a joiner over it gets GROUP_MAX_SIZE_REACHED.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    group_streams_max_size: u64 => |c, v| c.groups.streams.max_size = size("group-streams-max-size", v)?,
    /// Kafka's `group.streams.assignment.interval.ms`: a streams group's target assignment is
    /// computed at most once per this interval (default 1000; 0: at every change).
    #[arg(long)]
    group_streams_assignment_interval_ms: u64 => |c, v| c.groups.streams.assignment_interval = ms(v),
    /// Default `segment.bytes` of topics: roll the active segment at this size.
    #[arg(long)]
    segment_bytes: i64 => |c, v| topic_default(c, "segment.bytes", v)?,
    /// Default `segment.ms`: roll the active segment at this age.
    #[arg(long, allow_negative_numbers = true)]
    segment_ms: i64 => |c, v| topic_default(c, "segment.ms", v)?,
    /// Default `retention.bytes` per partition (-1: unlimited).
    #[arg(long, allow_negative_numbers = true)]
    retention_bytes: i64 => |c, v| topic_default(c, "retention.bytes", v)?,
    /// Default `retention.ms` (-1: keep forever).
    #[arg(long, allow_negative_numbers = true)]
    retention_ms: i64 => |c, v| topic_default(c, "retention.ms", v)?,
    /// Default `max.message.bytes`: the largest record batch accepted.
    #[arg(long)]
    max_message_bytes: i64 => |c, v| topic_default(c, "max.message.bytes", v)?,
    /// Default `index.interval.bytes`: bytes of log between two sparse index entries.
    #[arg(long)]
    index_interval_bytes: i64 => |c, v| topic_default(c, "index.interval.bytes", v)?,
    /// Default `flush.messages` (Kafka's meaning): an append that leaves this many records
    /// not yet fsynced waits for an fsync, whatever its acks; 1 fsyncs every append (group
    /// commit). Default: no count (9223372036854775807).
    #[arg(long, allow_negative_numbers = true)]
    flush_messages: i64 => |c, v| topic_default(c, "flush.messages", v)?,
    /// Default `flush.ms`: what acks=0 and acks=1 wrote is fsynced in the background about
    /// this many ms after it was written, so a power cut loses at most about that much of it
    /// (default 1000; 9223372036854775807: never, Kafka's default).
    #[arg(long, allow_negative_numbers = true)]
    flush_ms: i64 => |c, v| topic_default(c, "flush.ms", v)?,
    /// Default `write.caching` of topics (Redpanda's name): true acknowledges acks=all from
    /// the page cache too, as Kafka does on one broker (faster; a power cut may then lose what
    /// was acknowledged since the last fsync). Default false: acks=all is acknowledged once
    /// fsynced.
    #[arg(long)]
    write_caching: bool => |c, v| topic_default_text(c, "write.caching", &v.to_string())?,
    /// Default `compression.type` of topics: producer (keep the producer's codec, the
    /// default), uncompressed, gzip, snappy, lz4 or zstd (the broker recompresses batches of
    /// another codec).
    #[arg(long)]
    compression_type: String => |c, v| topic_default_text(c, "compression.type", &v)?,
    /// Default `compression.gzip.level`: 1 to 9, or -1 (the codec's default, 6).
    #[arg(long, allow_negative_numbers = true)]
    compression_gzip_level: i64 => |c, v| topic_default(c, "compression.gzip.level", v)?,
    /// Default `compression.lz4.level`: 1 to 17 (default 9).
    #[arg(long)]
    compression_lz4_level: i64 => |c, v| topic_default(c, "compression.lz4.level", v)?,
    /// Default `compression.zstd.level`: -131072 to 22 (default 3).
    #[arg(long, allow_negative_numbers = true)]
    compression_zstd_level: i64 => |c, v| topic_default(c, "compression.zstd.level", v)?,
    /// Default `message.timestamp.type`: CreateTime (the producer's, the default) or
    /// LogAppendTime (the broker's clock when it appends).
    #[arg(long)]
    message_timestamp_type: String => |c, v| topic_default_text(c, "message.timestamp.type", &v)?,

    // Limits: what one client can make the broker hold or do (docs/operations.md, "Limits").
    /// Kafka's `max.connections`: connections at once (default 10000); a new connection over
    /// it is closed at once.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: u64 => |c, v| c.limits.max_connections = size("max-connections", v)?,
    /// Kafka's `max.connections.per.ip`: connections at once from one address (default 1000).
    /// A new connection over it takes the place of one of the address's connections not busy
    /// with a request (a half-sent request's first, then one never served, then the longest
    /// idle); it is closed at once only when all are busy.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_connections_per_ip: u64 => |c, v| c.limits.max_connections_per_ip = size("max-connections-per-ip", v)?,
    /// Kafka's `max.connection.creation.rate`: connections accepted per second, all addresses
    /// together, in bursts of one second's worth (default unlimited); a connection over it
    /// waits to be accepted. Per address: the `connection_creation_rate` quota of `ip` entities.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_connection_creation_rate: u32 => |c, v| c.limits.max_connection_creation_rate = Some(v),
    /// Kafka's `connections.max.idle.ms`: a connection that sends no request for this long is
    /// closed (default 600000, 10 min).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    connections_max_idle_ms: u64 => |c, v| c.limits.connections_max_idle = ms(v),
    /// Once the first byte of a request arrives, the whole request must arrive within this
    /// many ms, or the connection is closed (default 30000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    request_read_timeout_ms: u64 => |c, v| c.limits.request_read_timeout = ms(v),
    /// Kafka's `queued.max.request.bytes`: bytes of requests over 64 KiB being read or handled
    /// at once, all connections together (default 268435456, 256 MiB; at least
    /// --max-request-bytes). A connection waits, reading nothing more, until there is room.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    queued_max_request_bytes: u64 => |c, v| c.limits.queued_max_request_bytes = size("queued-max-request-bytes", v)?,
    /// Largest request of any API but Produce (default 1048576, 1 MiB); a bigger one closes
    /// the connection. Produce requests have --max-request-bytes.
    #[arg(long, value_parser = clap::value_parser!(u64).range(8..))]
    max_non_produce_request_bytes: u64 => |c, v| c.limits.max_non_produce_request_bytes = size("max-non-produce-request-bytes", v)?,
    /// Group ids one DescribeGroups or DeleteGroups request may name (default 10000); more
    /// closes the connection.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_groups_per_request: u64 => |c, v| c.limits.max_groups_per_request = size("max-groups-per-request", v)?,
    /// Kafka's `fetch.max.bytes`: the most record bytes in one fetch response, whatever the
    /// request asks (default 57671680, 55 MiB); a first batch larger than that still comes
    /// whole, so a consumer always progresses.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    fetch_max_bytes: u64 => |c, v| c.limits.fetch_max_bytes = size("fetch-max-bytes", v)?,
    /// `max.broker.partitions` (KIP-578): partitions the broker holds, all topics together
    /// (default 100000, measured in BENCHMARKS.md). Creating more is POLICY_VIOLATION; a request naming more topics or
    /// partitions than this closes the connection.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_broker_partitions: u32 => |c, v| c.limits.max_broker_partitions = v,
    /// Partitions one CreateTopics request may create, all its topics together (default 10000,
    /// Kafka's fixed limit); more fails every topic of the request with POLICY_VIOLATION.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_partitions_per_request: u32 => |c, v| c.limits.max_partitions_per_request = v,
    /// Topics auto-created per second at most, in bursts of as many (default 100); a topic
    /// over it is answered LEADER_NOT_AVAILABLE, which clients retry.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    auto_create_topics_per_second: u32 => |c, v| c.limits.auto_create_topics_per_second = v,
    /// Kafka's `producer.id.expiration.ms`: an idempotent producer's state on a partition is
    /// dropped after this long without a produce (default 86400000, 1 day).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    producer_id_expiration_ms: u64 => |c, v| { c.limits.producer_id_expiration = ms(v); c.log.cleaner.producer_id_expiration = ms(v) },
    /// Kafka's `producer.id.expiration.check.interval.ms` (default 600000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    producer_id_expiration_check_interval_ms: u64 => |c, v| c.limits.producer_id_expiration_check_interval = ms(v),
    /// Kafka's `transaction.max.timeout.ms`: the longest `transaction.timeout.ms` a
    /// transactional producer may ask for (default 900000, 15 min); more is
    /// INVALID_TRANSACTION_TIMEOUT at InitProducerId.
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..))]
    transaction_max_timeout_ms: i32 => |c, v| c.transactions.max_timeout_ms = v,
    /// Kafka's `transactional.id.expiration.ms`: a transactional id with no transaction open
    /// and no request for this long is forgotten (default 604800000, 7 days).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    transactional_id_expiration_ms: u64 => |c, v| c.transactions.id_expiration = ms(v),
    /// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how often
    /// transactions past their timeout are looked for and aborted, and unfinished ones
    /// retried (default 10000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    transaction_abort_timed_out_transaction_cleanup_interval_ms: u64 => |c, v| c.transactions.abort_check_interval = ms(v),
    /// Kafka's `group.max.size`: members of one consumer group, new members waiting for their
    /// id included (default 1000); a JoinGroup over it gets GROUP_MAX_SIZE_REACHED.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    group_max_size: u64 => |c, v| c.groups.max_size = size("group-max-size", v)?,
    /// Kafka's `group.share.record.lock.duration.ms`: how long a share consumer holds a record it
    /// was given before it comes back (default 30000; groups may set their own).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1000..=3_600_000))]
    group_share_record_lock_duration_ms: u64 => |c, v| c.share.lock_duration_ms = i64::try_from(v).unwrap_or(i64::MAX),
    /// Kafka's `group.share.delivery.count.limit`: deliveries of a record before it is archived
    /// (and dead-lettered) (default 5; groups may set their own).
    #[arg(long, value_parser = clap::value_parser!(u16).range(2..=10))]
    group_share_delivery_count_limit: u16 => |c, v| c.share.delivery_limit = v,
    /// Kafka's `group.share.partition.max.record.locks`: records a share group may hold at once
    /// on one partition (default 2000; groups may set their own).
    #[arg(long, value_parser = clap::value_parser!(u64).range(100..=10_000))]
    group_share_partition_max_record_locks: u64 => |c, v| {
        c.share.max_record_locks = size("group-share-partition-max-record-locks", v)?;
        c.share.max_window = c.share.max_record_locks * 16;
    },
    /// Kafka's `group.share.session.timeout.ms`: a share consumer silent this long leaves its
    /// group and its records come back (default 45000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1000..=3_600_000))]
    group_share_session_timeout_ms: u64 => |c, v| c.share.session_timeout_ms = i64::try_from(v).unwrap_or(i64::MAX),
    /// Kafka's `group.share.heartbeat.interval.ms` (default 5000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    group_share_heartbeat_interval_ms: u64 => |c, v| c.share.heartbeat_interval_ms = i64::try_from(v).unwrap_or(i64::MAX),
    /// Kafka's `errors.deadletterqueue.topic.name.prefix` (KIP-1191): the prefix a share
    /// group's dead-letter topic must have (default `dlq.`; `""`: any name). Checked when a
    /// record is dead-lettered; a topic without it gets no dead letters.
    #[arg(long)]
    errors_deadletterqueue_topic_name_prefix: String => |c, v| c.share.dead_letter_topic_prefix = v.trim().to_string(),
    /// Kafka's `errors.deadletterqueue.auto.create.topics.enable` (KIP-1191): create a share
    /// group's missing dead-letter topic at its first dead letter, with
    /// `errors.deadletterqueue.group.enable=true` (true or false, default false).
    #[arg(long)]
    errors_deadletterqueue_auto_create_topics_enable: bool => |c, v| c.share.dead_letter_auto_create = v,
    /// Kafka's `group.share.max.size`: members of one share group (default 200).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    group_share_max_size: u64 => |c, v| c.share_group_max_size = size("group-share-max-size", v)?,
    /// Kafka's `offsets.retention.minutes`: committed offsets of a group without members are
    /// deleted once it has been empty this long (default 10080, 7 days).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    offsets_retention_minutes: u64 => |c, v| {
        let secs = v.checked_mul(60).context("--offsets-retention-minutes is too large")?;
        c.limits.offsets_retention = Duration::from_secs(secs);
    },
    /// Kafka's `offsets.retention.check.interval.ms` (default 600000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    offsets_retention_check_interval_ms: u64 => |c, v| c.limits.offsets_retention_check_interval = ms(v),
    /// Kafka's `quota.window.num`: samples client quota rates are measured over (default 11).
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=1000))]
    quota_window_num: u32 => |c, v| c.quota_window.samples = v,
    /// Kafka's `quota.window.size.seconds`: the length of one sample (default 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3600))]
    quota_window_size_seconds: u64 => |c, v| c.quota_window.size = Duration::from_secs(v),

    // Security: listeners, TLS and SASL (docs/security.md).
    /// Kafka's `listeners`: `NAME://HOST:PORT,...`, e.g. `PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9093`
    /// (an empty host binds every interface; port 0 a free one). Instead of `--listen`.
    #[arg(long)]
    listeners: String => |c, v| c.security.listeners.listeners = Some(v),
    /// `NAME:PROTOCOL,...` for listener names that are not a protocol (PLAINTEXT, SSL,
    /// SASL_PLAINTEXT, SASL_SSL), e.g. `CLIENT:SASL_SSL`.
    #[arg(long)]
    listener_security_protocol_map: String => |c, v| c.security.listeners.protocol_map = v,
    /// `NAME://HOST:PORT,...`: what Metadata tells clients who came in on each listener
    /// (default: its bound address).
    #[arg(long)]
    advertised_listeners: String => |c, v| c.security.listeners.advertised = v,
    /// PEM file of the broker's private key and certificate chain (SSL and SASL_SSL listeners).
    #[arg(long)]
    ssl_keystore_location: PathBuf => |c, v| c.security.tls.keystore = Some(v),
    /// PEM only (Kafka's `ssl.keystore.type=PEM`).
    #[arg(long)]
    ssl_keystore_type: String => |_c, v| pem_only("ssl.keystore.type", &v)?,
    /// PEM file of the CAs that client certificates must chain to (mTLS).
    #[arg(long)]
    ssl_truststore_location: PathBuf => |c, v| c.security.tls.truststore = Some(v),
    /// PEM only (Kafka's `ssl.truststore.type=PEM`).
    #[arg(long)]
    ssl_truststore_type: String => |_c, v| pem_only("ssl.truststore.type", &v)?,
    /// `none` (default), `requested` or `required`: whether TLS clients must show a
    /// certificate; its subject is then the principal (`User:CN=alice,O=acme`).
    #[arg(long)]
    ssl_client_auth: String => |c, v| c.security.tls.client_auth = v.parse().map_err(anyhow::Error::msg)?,
    /// `TLSv1.2,TLSv1.3` (default) or `TLSv1.3`.
    #[arg(long)]
    ssl_enabled_protocols: String => |c, v| c.security.tls.tls12 = tls12(&v)?,
    /// Not supported: the keystore's key must not be encrypted.
    #[arg(long)]
    ssl_key_password: String => |_c, _v| encrypted_key()?,
    /// Kafka's `listener.name.<listener>.<setting>=<value>`, given as
    /// `<listener>.<setting>=<value>` (`sasl_ssl.ssl.client.auth=none`), once per setting: one
    /// listener's own `ssl.keystore.location`, `ssl.truststore.location`, `ssl.client.auth`,
    /// `ssl.enabled.protocols` or `sasl.enabled.mechanisms`, in place of the broker-wide one.
    /// As in Kafka, the broker-wide `ssl.client.auth` applies to SSL listeners only; a SASL_SSL
    /// listener asks for client certificates only when its own setting says so.
    #[arg(long, value_name = "LISTENER.SETTING=VALUE")]
    listener_name: Vec<String> => |c, v| for entry in v { listener_setting(c, &entry)?; },
    /// SASL mechanisms offered: any of `SCRAM-SHA-256,SCRAM-SHA-512,PLAIN` (default all three).
    #[arg(long)]
    sasl_enabled_mechanisms: String => |c, v| c.security.sasl.mechanisms = mechanisms(&v)?,
    /// PLAIN's users: a file of `name=password` lines (lograil's own; Kafka writes them in JAAS).
    #[arg(long)]
    sasl_plain_users_file: PathBuf => |c, v| c.security.sasl.plain_users = Some(v),
    /// Largest request before a SASL connection authenticates, bytes (default 524288).
    #[arg(long, value_parser = clap::value_parser!(u64).range(64..))]
    sasl_server_max_receive_size: u64 => |c, v| c.security.sasl.max_receive_size = size("sasl-server-max-receive-size", v)?,
    /// How long a failed authentication waits for its answer, ms (default 100).
    #[arg(long)]
    connection_failed_authentication_delay_ms: u64 => |c, v| c.security.sasl.failed_authentication_delay = ms(v),
    /// Time a connection has to finish its TLS handshake and SASL authentication, ms
    /// (lograil's own; default 10000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    authentication_timeout_ms: u64 => |c, v| c.security.sasl.authentication_timeout = ms(v),
    /// How long a SASL authentication lasts before the client must authenticate again on its
    /// connection (KIP-368), ms; 0 (default): for the connection's life.
    #[arg(long)]
    connections_max_reauth_ms: u64 => |c, v| c.security.sasl.reauthentication = (v > 0).then(|| ms(v)),

    // Authorization (docs/security.md)
    /// Kafka's `authorizer.class.name`: `org.apache.kafka.metadata.authorizer.StandardAuthorizer`,
    /// `kafka.security.authorizer.AclAuthorizer` or lograil's `acl` check every request against
    /// the ACLs (Create/Describe/DeleteAcls, kept in the data dir). Unset or empty: no
    /// authorizer, everything is allowed (the default).
    #[arg(long)]
    authorizer_class_name: String => |c, v| c.authorization.set_class(&v)?,
    /// Kafka's `super.users`: principals allowed everything, separated by `;`
    /// (`User:admin;User:ops`).
    #[arg(long)]
    super_users: String => |c, v| c.authorization.set_super_users(&v)?,
    /// Kafka's `allow.everyone.if.no.acl.found`: true allows an operation on a resource no ACL
    /// applies to (default false: only super users may).
    #[arg(long)]
    allow_everyone_if_no_acl_found: bool => |c, v| c.authorization.allow_everyone_if_no_acl_found = v,
}

/// Kafka's key and trust stores in PEM, the only type served.
fn pem_only(setting: &str, value: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        value.eq_ignore_ascii_case("PEM"),
        "{setting}={value}: only PEM is supported (JKS and PKCS12 stores: convert them to PEM)"
    );
    Ok(())
}

/// `ssl.key.password` is refused: the keystore's key must be in the clear.
fn encrypted_key() -> anyhow::Result<()> {
    anyhow::bail!("ssl.key.password: encrypted private keys are not supported; decrypt the key into the PEM keystore")
}

/// Whether `ssl.enabled.protocols` allows TLS 1.2 beside TLS 1.3.
fn tls12(value: &str) -> anyhow::Result<bool> {
    let mut tls12 = false;
    let mut tls13 = false;
    for protocol in value.split(',').map(str::trim) {
        match protocol {
            "TLSv1.2" => tls12 = true,
            "TLSv1.3" => tls13 = true,
            other => anyhow::bail!("ssl.enabled.protocols: {other:?} is not TLSv1.2 or TLSv1.3"),
        }
    }
    anyhow::ensure!(tls13, "ssl.enabled.protocols must include TLSv1.3");
    Ok(tls12)
}

/// One `listener.name.<listener>.<setting>=<value>`, given without its `listener.name.`.
fn listener_setting(config: &mut BrokerConfig, entry: &str) -> anyhow::Result<()> {
    let malformed = || format!("--listener-name {entry:?}: expected LISTENER.SETTING=VALUE");
    let (key, value) = entry.split_once('=').with_context(malformed)?;
    let (listener, setting) = key.split_once('.').with_context(malformed)?;
    let value = value.trim();
    let own = config.security.per_listener.entry(listener.trim());
    match setting.trim() {
        "ssl.keystore.location" => own.keystore = Some(PathBuf::from(value)),
        "ssl.truststore.location" => own.truststore = Some(PathBuf::from(value)),
        "ssl.keystore.type" => pem_only(key, value)?,
        "ssl.truststore.type" => pem_only(key, value)?,
        "ssl.key.password" => encrypted_key()?,
        "ssl.client.auth" => {
            let auth = value.parse().map_err(anyhow::Error::msg);
            own.client_auth = Some(auth.with_context(|| format!("listener.name.{key}"))?);
        }
        "ssl.enabled.protocols" => own.tls12 = Some(tls12(value)?),
        "sasl.enabled.mechanisms" => own.mechanisms = Some(mechanisms(value)?),
        other => anyhow::bail!(
            "listener.name.{key}: {other:?} is not a per-listener setting lograil serves \
             (ssl.keystore.location, ssl.truststore.location, ssl.client.auth, \
             ssl.enabled.protocols, sasl.enabled.mechanisms)"
        ),
    }
    Ok(())
}

fn mechanisms(value: &str) -> anyhow::Result<Vec<sasl::Mechanism>> {
    let list: Vec<sasl::Mechanism> = value
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| {
            sasl::Mechanism::from_name(m).with_context(|| {
                format!(
                    "sasl.enabled.mechanisms: {m:?} is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
                )
            })
        })
        .collect::<anyhow::Result<_>>()?;
    anyhow::ensure!(!list.is_empty(), "sasl.enabled.mechanisms is empty");
    Ok(list)
}

impl Settings {
    /// These settings, each falling back to `other`'s; the per-listener ones of both, `other`'s
    /// first so that these win where both set one.
    pub(super) fn or(mut self, mut other: Settings) -> Settings {
        let mut per_listener = other.listener_name.take().unwrap_or_default();
        per_listener.extend(self.listener_name.take().unwrap_or_default());
        let mut merged = self.or_each(other);
        merged.listener_name = (!per_listener.is_empty()).then_some(per_listener);
        merged
    }

    /// Reads a `--config` file: each `name=value` line is the flag `--name=value` (a dotted
    /// Kafka name as its dashed flag; `listener.name.x.y=v` as `--listener-name=x.y=v`), parsed
    /// by clap like the command line. A later line wins.
    pub(super) fn from_file(path: &Path) -> anyhow::Result<Settings> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut args = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, value) = line
                .split_once('=')
                .with_context(|| format!("{}:{}: expected name=value", path.display(), n + 1))?;
            let name = name.trim();
            args.push(match name.strip_prefix("listener.name.") {
                Some(setting) => format!("--listener-name={setting}={}", value.trim()),
                None => format!("--{}={}", name.replace('.', "-"), value.trim()),
            });
        }
        let command = Settings::augment_args(
            clap::Command::new("lograil serve --config")
                .no_binary_name(true)
                .args_override_self(true),
        );
        let matches = command
            .try_get_matches_from(args)
            .with_context(|| format!("in {}", path.display()))?;
        Ok(Settings::from_arg_matches(&matches)?)
    }
}
