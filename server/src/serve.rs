//! `lograil serve`: flags and an optional config file into a [`BrokerConfig`], then
//! [`lograil::run`] until SIGINT or SIGTERM.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::{Args as _, FromArgMatches as _};
use lograil::BrokerConfig;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on; port 0 picks a free port (the start-up line shows which).
    #[arg(long, default_value = "127.0.0.1:9092")]
    listen: String,
    /// Directory holding the topics' data.
    #[arg(long, default_value = "./data")]
    data_dir: PathBuf,
    /// Serve Prometheus metrics at http://ADDR/metrics (OpenMetrics text); port 0 picks a free
    /// port (the start-up line shows which). Off unless given.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<String>,
    /// A file of `name=value` lines: any setting below by its flag name (`default-partitions=3`),
    /// topic defaults also by their Kafka name (`segment.bytes=1048576`). Flags win over the file.
    #[arg(long)]
    config: Option<PathBuf>,
    #[command(flatten)]
    settings: Settings,
}

/// Every broker setting, from flags or from the `--config` file (parsed by the same
/// definitions). Unset ones keep the broker's defaults.
#[derive(Debug, Clone, Default, clap::Args)]
struct Settings {
    /// Host advertised to clients in Metadata (default: the listen address, 127.0.0.1 for 0.0.0.0).
    #[arg(long)]
    advertised_host: Option<String>,
    /// This broker's node id.
    #[arg(long)]
    node_id: Option<i32>,
    /// Create topics on first use (Metadata with auto-creation allowed): true or false.
    #[arg(long)]
    auto_create_topics: Option<bool>,
    /// Partitions of an auto-created topic (and of CreateTopics asking for -1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(log_core::MAX_PARTITIONS)))]
    default_partitions: Option<u32>,
    /// Largest request frame accepted; a bigger one closes the connection.
    #[arg(long)]
    max_request_bytes: Option<usize>,
    /// How often retention deletes old segments, in ms.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    retention_check_interval_ms: Option<u64>,
    /// Most closed segments kept loaded (log memory-mapped, indexes in memory) at once; the
    /// least recently read are unloaded beyond it (default 10000; each is one memory map).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_loaded_segments: Option<u64>,
    /// Time between two passes of the scrubber, which checks every closed segment's CRCs in
    /// the background so damage is reported before a consumer meets it, in ms (lograil's own;
    /// default 86400000, a day; 0: only the pass at start-up after an unclean shutdown).
    #[arg(long)]
    log_scrub_interval_ms: Option<u64>,
    /// Most bytes a second the scrubber reads (lograil's own; default 52428800, 50 MiB/s).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    log_scrub_bytes_per_second: Option<u64>,
    /// How long a new consumer group waits for more members before its first rebalance, in ms
    /// (Kafka's `group.initial.rebalance.delay.ms`, default 3000).
    #[arg(long)]
    group_initial_rebalance_delay_ms: Option<u64>,
    /// Smallest session timeout a consumer may ask for, in ms (`group.min.session.timeout.ms`,
    /// default 6000).
    #[arg(long)]
    group_min_session_timeout_ms: Option<u64>,
    /// Default `segment.bytes` of topics: roll the active segment at this size.
    #[arg(long)]
    segment_bytes: Option<i64>,
    /// Default `segment.ms`: roll the active segment at this age.
    #[arg(long, allow_negative_numbers = true)]
    segment_ms: Option<i64>,
    /// Default `retention.bytes` per partition (-1: unlimited).
    #[arg(long, allow_negative_numbers = true)]
    retention_bytes: Option<i64>,
    /// Default `retention.ms` (-1: keep forever).
    #[arg(long, allow_negative_numbers = true)]
    retention_ms: Option<i64>,
    /// Default `max.message.bytes`: the largest record batch accepted.
    #[arg(long)]
    max_message_bytes: Option<i64>,
    /// Default `index.interval.bytes`: bytes of log between two sparse index entries.
    #[arg(long)]
    index_interval_bytes: Option<i64>,
    /// Default `flush.messages`: 1 acknowledges an append only once it is fsynced (durability
    /// `always`, with group commit).
    #[arg(long, allow_negative_numbers = true)]
    flush_messages: Option<i64>,
    /// Default `flush.ms`: fsync in the background at most this many ms apart.
    #[arg(long, allow_negative_numbers = true)]
    flush_ms: Option<i64>,

    // Limits: what one client can make the broker hold or do (the README's "Limits").
    /// Kafka's `max.connections`: connections at once (default 10000); a new connection over
    /// it is closed at once.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: Option<u64>,
    /// Kafka's `max.connections.per.ip`: connections at once from one address (default 1000).
    /// A new connection over it takes the place of one of the address's connections not busy
    /// with a request (a half-sent request's first, then one never served, then the longest
    /// idle); it is closed at once only when all are busy.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_connections_per_ip: Option<u64>,
    /// Kafka's `max.connection.creation.rate`: connections accepted per second, all addresses
    /// together, in bursts of one second's worth (default unlimited); a connection over it
    /// waits to be accepted. Per address: the `connection_creation_rate` quota of `ip` entities.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_connection_creation_rate: Option<u32>,
    /// Kafka's `connections.max.idle.ms`: a connection that sends no request for this long is
    /// closed (default 600000, 10 min).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    connections_max_idle_ms: Option<u64>,
    /// Once the first byte of a request arrives, the whole request must arrive within this
    /// many ms, or the connection is closed (default 30000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    request_read_timeout_ms: Option<u64>,
    /// Kafka's `queued.max.request.bytes`: bytes of requests over 64 KiB being read or handled
    /// at once, all connections together (default 268435456, 256 MiB; at least
    /// --max-request-bytes). A connection waits, reading nothing more, until there is room.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    queued_max_request_bytes: Option<u64>,
    /// Largest request of any API but Produce (default 1048576, 1 MiB); a bigger one closes
    /// the connection. Produce requests have --max-request-bytes.
    #[arg(long, value_parser = clap::value_parser!(u64).range(8..))]
    max_non_produce_request_bytes: Option<u64>,
    /// Group ids one DescribeGroups or DeleteGroups request may name (default 10000); more
    /// closes the connection.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_groups_per_request: Option<u64>,
    /// Kafka's `fetch.max.bytes`: the most record bytes in one fetch response, whatever the
    /// request asks (default 57671680, 55 MiB); a first batch larger than that still comes
    /// whole, so a consumer always progresses.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    fetch_max_bytes: Option<u64>,
    /// `max.broker.partitions` (KIP-578): partitions the broker holds, all topics together
    /// (default 10000). Creating more is POLICY_VIOLATION; a request naming more topics or
    /// partitions than this closes the connection.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_broker_partitions: Option<u32>,
    /// Partitions one CreateTopics request may create, all its topics together (default 10000,
    /// Kafka's fixed limit); more fails every topic of the request with POLICY_VIOLATION.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_partitions_per_request: Option<u32>,
    /// Topics auto-created per second at most, in bursts of as many (default 100); a topic
    /// over it is answered LEADER_NOT_AVAILABLE, which clients retry.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    auto_create_topics_per_second: Option<u32>,
    /// Kafka's `producer.id.expiration.ms`: an idempotent producer's state on a partition is
    /// dropped after this long without a produce (default 86400000, 1 day).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    producer_id_expiration_ms: Option<u64>,
    /// Kafka's `producer.id.expiration.check.interval.ms` (default 600000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    producer_id_expiration_check_interval_ms: Option<u64>,
    /// Kafka's `group.max.size`: members of one consumer group, new members waiting for their
    /// id included (default 1000); a JoinGroup over it gets GROUP_MAX_SIZE_REACHED.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    group_max_size: Option<u64>,
    /// Kafka's `group.share.record.lock.duration.ms`: how long a share consumer holds a record it
    /// was given before it comes back (default 30000; groups may set their own).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1000..=3_600_000))]
    group_share_record_lock_duration_ms: Option<u64>,
    /// Kafka's `group.share.delivery.count.limit`: deliveries of a record before it is archived
    /// (and dead-lettered) (default 5; groups may set their own).
    #[arg(long, value_parser = clap::value_parser!(u16).range(2..=10))]
    group_share_delivery_count_limit: Option<u16>,
    /// Kafka's `group.share.partition.max.record.locks`: records a share group may hold at once
    /// on one partition (default 2000; groups may set their own).
    #[arg(long, value_parser = clap::value_parser!(u64).range(100..=10_000))]
    group_share_partition_max_record_locks: Option<u64>,
    /// Kafka's `group.share.session.timeout.ms`: a share consumer silent this long leaves its
    /// group and its records come back (default 45000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1000..=3_600_000))]
    group_share_session_timeout_ms: Option<u64>,
    /// Kafka's `group.share.heartbeat.interval.ms` (default 5000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    group_share_heartbeat_interval_ms: Option<u64>,
    /// Kafka's `group.share.max.size`: members of one share group (default 200).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    group_share_max_size: Option<u64>,
    /// Kafka's `offsets.retention.minutes`: committed offsets of a group without members are
    /// deleted once it has been empty this long (default 10080, 7 days).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    offsets_retention_minutes: Option<u64>,
    /// Kafka's `offsets.retention.check.interval.ms` (default 600000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    offsets_retention_check_interval_ms: Option<u64>,
    /// Kafka's `quota.window.num`: samples client quota rates are measured over (default 11).
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=1000))]
    quota_window_num: Option<u32>,
    /// Kafka's `quota.window.size.seconds`: the length of one sample (default 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3600))]
    quota_window_size_seconds: Option<u64>,
}

impl Settings {
    /// Reads a `--config` file: each `name=value` line is the flag `--name=value` (a dotted
    /// Kafka name as its dashed flag), parsed by clap like the command line. A later line wins.
    fn from_file(path: &Path) -> anyhow::Result<Settings> {
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
            args.push(format!(
                "--{}={}",
                name.trim().replace('.', "-"),
                value.trim()
            ));
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

    /// These settings, each falling back to `other`'s.
    fn or(self, other: Settings) -> Settings {
        Settings {
            advertised_host: self.advertised_host.or(other.advertised_host),
            node_id: self.node_id.or(other.node_id),
            auto_create_topics: self.auto_create_topics.or(other.auto_create_topics),
            default_partitions: self.default_partitions.or(other.default_partitions),
            max_request_bytes: self.max_request_bytes.or(other.max_request_bytes),
            retention_check_interval_ms: self
                .retention_check_interval_ms
                .or(other.retention_check_interval_ms),
            max_loaded_segments: self.max_loaded_segments.or(other.max_loaded_segments),
            log_scrub_interval_ms: self.log_scrub_interval_ms.or(other.log_scrub_interval_ms),
            log_scrub_bytes_per_second: self
                .log_scrub_bytes_per_second
                .or(other.log_scrub_bytes_per_second),
            group_initial_rebalance_delay_ms: self
                .group_initial_rebalance_delay_ms
                .or(other.group_initial_rebalance_delay_ms),
            group_min_session_timeout_ms: self
                .group_min_session_timeout_ms
                .or(other.group_min_session_timeout_ms),
            segment_bytes: self.segment_bytes.or(other.segment_bytes),
            segment_ms: self.segment_ms.or(other.segment_ms),
            retention_bytes: self.retention_bytes.or(other.retention_bytes),
            retention_ms: self.retention_ms.or(other.retention_ms),
            max_message_bytes: self.max_message_bytes.or(other.max_message_bytes),
            index_interval_bytes: self.index_interval_bytes.or(other.index_interval_bytes),
            flush_messages: self.flush_messages.or(other.flush_messages),
            flush_ms: self.flush_ms.or(other.flush_ms),
            max_connections: self.max_connections.or(other.max_connections),
            max_connections_per_ip: self.max_connections_per_ip.or(other.max_connections_per_ip),
            max_connection_creation_rate: self
                .max_connection_creation_rate
                .or(other.max_connection_creation_rate),
            connections_max_idle_ms: self
                .connections_max_idle_ms
                .or(other.connections_max_idle_ms),
            request_read_timeout_ms: self
                .request_read_timeout_ms
                .or(other.request_read_timeout_ms),
            queued_max_request_bytes: self
                .queued_max_request_bytes
                .or(other.queued_max_request_bytes),
            max_non_produce_request_bytes: self
                .max_non_produce_request_bytes
                .or(other.max_non_produce_request_bytes),
            max_groups_per_request: self.max_groups_per_request.or(other.max_groups_per_request),
            fetch_max_bytes: self.fetch_max_bytes.or(other.fetch_max_bytes),
            max_broker_partitions: self.max_broker_partitions.or(other.max_broker_partitions),
            max_partitions_per_request: self
                .max_partitions_per_request
                .or(other.max_partitions_per_request),
            auto_create_topics_per_second: self
                .auto_create_topics_per_second
                .or(other.auto_create_topics_per_second),
            producer_id_expiration_ms: self
                .producer_id_expiration_ms
                .or(other.producer_id_expiration_ms),
            producer_id_expiration_check_interval_ms: self
                .producer_id_expiration_check_interval_ms
                .or(other.producer_id_expiration_check_interval_ms),
            group_max_size: self.group_max_size.or(other.group_max_size),
            group_share_record_lock_duration_ms: self
                .group_share_record_lock_duration_ms
                .or(other.group_share_record_lock_duration_ms),
            group_share_delivery_count_limit: self
                .group_share_delivery_count_limit
                .or(other.group_share_delivery_count_limit),
            group_share_partition_max_record_locks: self
                .group_share_partition_max_record_locks
                .or(other.group_share_partition_max_record_locks),
            group_share_session_timeout_ms: self
                .group_share_session_timeout_ms
                .or(other.group_share_session_timeout_ms),
            group_share_heartbeat_interval_ms: self
                .group_share_heartbeat_interval_ms
                .or(other.group_share_heartbeat_interval_ms),
            group_share_max_size: self.group_share_max_size.or(other.group_share_max_size),
            offsets_retention_minutes: self
                .offsets_retention_minutes
                .or(other.offsets_retention_minutes),
            offsets_retention_check_interval_ms: self
                .offsets_retention_check_interval_ms
                .or(other.offsets_retention_check_interval_ms),
            quota_window_num: self.quota_window_num.or(other.quota_window_num),
            quota_window_size_seconds: self
                .quota_window_size_seconds
                .or(other.quota_window_size_seconds),
        }
    }

    /// Applies every setting given onto `config`.
    fn apply(&self, config: &mut BrokerConfig) -> anyhow::Result<()> {
        let ms = Duration::from_millis;
        if let Some(host) = &self.advertised_host {
            config.advertised_host = Some(host.clone());
        }
        if let Some(id) = self.node_id {
            config.node_id = id;
        }
        if let Some(create) = self.auto_create_topics {
            config.auto_create_topics = create;
        }
        if let Some(partitions) = self.default_partitions {
            config.default_partitions = partitions;
        }
        if let Some(bytes) = self.max_request_bytes {
            config.max_request_bytes = bytes;
        }
        if let Some(every) = self.retention_check_interval_ms {
            config.retention_check_interval = ms(every);
        }
        if let Some(loaded) = self.max_loaded_segments {
            config.log.loaded_segments = usize::try_from(loaded).unwrap_or(usize::MAX);
        }
        if let Some(every) = self.log_scrub_interval_ms {
            config.log.scrub.interval = (every > 0).then(|| ms(every));
        }
        if let Some(rate) = self.log_scrub_bytes_per_second {
            config.log.scrub.bytes_per_second = rate;
        }
        if let Some(delay) = self.group_initial_rebalance_delay_ms {
            config.groups.initial_rebalance_delay = ms(delay);
        }
        if let Some(timeout) = self.group_min_session_timeout_ms {
            config.groups.min_session_timeout = ms(timeout);
        }
        self.apply_limits(config)?;
        let topic_defaults = [
            ("segment.bytes", self.segment_bytes),
            ("segment.ms", self.segment_ms),
            ("retention.bytes", self.retention_bytes),
            ("retention.ms", self.retention_ms),
            ("max.message.bytes", self.max_message_bytes),
            ("index.interval.bytes", self.index_interval_bytes),
            ("flush.messages", self.flush_messages),
            ("flush.ms", self.flush_ms),
        ];
        for (name, value) in topic_defaults {
            if let Some(value) = value {
                config
                    .topic_defaults
                    .set_number(name, value)
                    .with_context(|| format!("--{}", name.replace('.', "-")))?;
            }
        }
        Ok(())
    }
}

impl Settings {
    /// Applies the limits given onto `config`.
    fn apply_limits(&self, config: &mut BrokerConfig) -> anyhow::Result<()> {
        let ms = Duration::from_millis;
        let size = |flag: &str, v: u64| {
            usize::try_from(v).with_context(|| format!("--{flag} {v} is too large"))
        };
        let limits = &mut config.limits;
        if let Some(n) = self.max_connections {
            limits.max_connections = size("max-connections", n)?;
        }
        if let Some(n) = self.max_connections_per_ip {
            limits.max_connections_per_ip = size("max-connections-per-ip", n)?;
        }
        if let Some(rate) = self.max_connection_creation_rate {
            limits.max_connection_creation_rate = Some(rate);
        }
        if let Some(t) = self.connections_max_idle_ms {
            limits.connections_max_idle = ms(t);
        }
        if let Some(t) = self.request_read_timeout_ms {
            limits.request_read_timeout = ms(t);
        }
        if let Some(n) = self.queued_max_request_bytes {
            limits.queued_max_request_bytes = size("queued-max-request-bytes", n)?;
        }
        if let Some(n) = self.max_non_produce_request_bytes {
            limits.max_non_produce_request_bytes = size("max-non-produce-request-bytes", n)?;
        }
        if let Some(n) = self.max_groups_per_request {
            limits.max_groups_per_request = size("max-groups-per-request", n)?;
        }
        if let Some(n) = self.fetch_max_bytes {
            limits.fetch_max_bytes = size("fetch-max-bytes", n)?;
        }
        if let Some(n) = self.max_broker_partitions {
            limits.max_broker_partitions = n;
        }
        if let Some(n) = self.max_partitions_per_request {
            limits.max_partitions_per_request = n;
        }
        if let Some(n) = self.auto_create_topics_per_second {
            limits.auto_create_topics_per_second = n;
        }
        if let Some(t) = self.producer_id_expiration_ms {
            limits.producer_id_expiration = ms(t);
        }
        if let Some(t) = self.producer_id_expiration_check_interval_ms {
            limits.producer_id_expiration_check_interval = ms(t);
        }
        if let Some(minutes) = self.offsets_retention_minutes {
            let secs = minutes
                .checked_mul(60)
                .context("--offsets-retention-minutes is too large")?;
            limits.offsets_retention = Duration::from_secs(secs);
        }
        if let Some(t) = self.offsets_retention_check_interval_ms {
            limits.offsets_retention_check_interval = ms(t);
        }
        if let Some(n) = self.group_max_size {
            config.groups.max_size = size("group-max-size", n)?;
        }
        let share = &mut config.share;
        if let Some(ms) = self.group_share_record_lock_duration_ms {
            share.lock_duration_ms = i64::try_from(ms).unwrap_or(i64::MAX);
        }
        if let Some(limit) = self.group_share_delivery_count_limit {
            share.delivery_limit = limit;
        }
        if let Some(n) = self.group_share_partition_max_record_locks {
            share.max_record_locks = size("group-share-partition-max-record-locks", n)?;
            share.max_window = share.max_record_locks * 16;
        }
        if let Some(ms) = self.group_share_session_timeout_ms {
            share.session_timeout_ms = i64::try_from(ms).unwrap_or(i64::MAX);
        }
        if let Some(ms) = self.group_share_heartbeat_interval_ms {
            share.heartbeat_interval_ms = i64::try_from(ms).unwrap_or(i64::MAX);
        }
        if let Some(n) = self.group_share_max_size {
            config.share_group_max_size = size("group-share-max-size", n)?;
        }
        if let Some(n) = self.quota_window_num {
            config.quota_window.samples = n;
        }
        if let Some(s) = self.quota_window_size_seconds {
            config.quota_window.size = Duration::from_secs(s);
        }
        Ok(())
    }
}

impl Args {
    fn broker_config(&self) -> anyhow::Result<BrokerConfig> {
        let mut config = BrokerConfig {
            data_dir: self.data_dir.clone(),
            ..BrokerConfig::default()
        };
        let from_file = match &self.config {
            Some(path) => Settings::from_file(path)?,
            None => Settings::default(),
        };
        self.settings.clone().or(from_file).apply(&mut config)?;
        config.validate()?;
        Ok(config)
    }
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let config = args.broker_config()?;
    // Every partition keeps its active segment's file open, and every client a socket: take
    // all the open files the system allows this process (the soft limit is often 1024).
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::info!(limit, "open files"),
        Err(e) => tracing::warn!(error = %e, "could not raise the open-file limit"),
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("binding {}", args.listen))?;
        let metrics_listener = match &args.metrics_listen {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("binding --metrics-listen {addr}"))?,
            ),
            None => None,
        };
        let data_dir = config.data_dir.clone();
        let mut server = lograil::Server::open(listener, config).await?;
        let mut metrics = String::new();
        if let Some(listener) = metrics_listener {
            metrics = format!(", metrics at http://{}/metrics", listener.local_addr()?);
            server = server.with_metrics_listener(listener);
        }
        // Only now: tests and scripts take this line to mean the broker is ready.
        println!(
            "lograil listening on {} (data dir {}){metrics}",
            server.local_addr()?,
            data_dir.display()
        );
        std::io::stdout().flush()?;
        server.serve(shutdown_signal()).await?;
        Ok(())
    })
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
    tracing::info!("signal received");
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;
    use log_core::Durability;

    use super::Args;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn config_from(file: &str, flags: &[&str]) -> anyhow::Result<lograil::BrokerConfig> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("broker.properties");
        std::fs::write(&path, file)?;
        let mut argv = vec![
            "serve".to_string(),
            "--config".into(),
            path.display().to_string(),
        ];
        argv.extend(flags.iter().map(|f| f.to_string()));
        Cli::try_parse_from(argv)?.args.broker_config()
    }

    #[test]
    fn the_config_file_uses_the_flags_definitions_and_flags_win() {
        let config = config_from(
            "# defaults\ndefault-partitions=3\nsegment.bytes=2097152\nflush.messages=1\n\
             group-initial-rebalance-delay-ms=0\nretention.ms=-1\n",
            &["--segment-bytes", "4194304", "--retention-bytes", "-1"],
        )
        .unwrap();
        assert_eq!(config.default_partitions, 3);
        assert_eq!(
            config.topic_defaults.segment_bytes,
            4 << 20,
            "the flag wins"
        );
        assert_eq!(config.topic_defaults.durability, Durability::Always);
        assert_eq!(config.topic_defaults.retention_ms, None);
        assert_eq!(config.groups.initial_rebalance_delay, Duration::ZERO);
    }

    #[test]
    fn limits_take_kafka_names_in_the_config_file() {
        let config = config_from(
            "max.connections.per.ip=5\nconnections.max.idle.ms=2000\nfetch.max.bytes=1024\n\
             offsets.retention.minutes=60\ngroup.max.size=7\n",
            &["--queued-max-request-bytes", "209715200"],
        )
        .unwrap();
        let limits = &config.limits;
        assert_eq!(limits.max_connections_per_ip, 5);
        assert_eq!(limits.connections_max_idle, Duration::from_secs(2));
        assert_eq!(limits.fetch_max_bytes, 1024);
        assert_eq!(limits.offsets_retention, Duration::from_secs(3600));
        assert_eq!(limits.queued_max_request_bytes, 200 << 20);
        assert_eq!(config.groups.max_size, 7);
    }

    #[test]
    fn bad_settings_are_refused() {
        for file in [
            "segment.bytes=1048575\n",
            "default-partitions=0\n",
            "no-such-setting=1\n",
            "listen=127.0.0.1:1\n",
            "just some words\n",
            "flush.messages=5\n",
            "node-id=abc\n",
            "max.connections=0\n",
            // Smaller than --max-request-bytes (100 MiB): a large request could never be read.
            "queued.max.request.bytes=1048576\n",
        ] {
            assert!(config_from(file, &[]).is_err(), "{file:?} was accepted");
        }
        assert!(config_from("", &["--retention-ms", "-7"]).is_err());
    }
}
