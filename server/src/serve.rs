//! `lograil serve`: flags and an optional config file into a [`BrokerConfig`], then
//! [`lograil::run`] until SIGINT or SIGTERM.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use lograil::config::set_topic_config;
use lograil::BrokerConfig;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on; port 0 picks a free port (the start-up line shows which).
    #[arg(long, default_value = "127.0.0.1:9092")]
    listen: String,
    /// Directory holding the topics' data.
    #[arg(long, default_value = "./data")]
    data_dir: PathBuf,
    /// A file of `name=value` lines: any flag below by its long name (`default-partitions=3`)
    /// or any topic config by its Kafka name (`segment.bytes=1048576`). Flags win over the file.
    #[arg(long)]
    config: Option<PathBuf>,
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
    #[arg(long)]
    default_partitions: Option<u32>,
    /// Largest request frame accepted; a bigger one closes the connection.
    #[arg(long)]
    max_request_bytes: Option<usize>,
    /// How often retention deletes old segments, in ms.
    #[arg(long)]
    retention_check_interval_ms: Option<u64>,
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
    segment_bytes: Option<String>,
    /// Default `segment.ms`: roll the active segment at this age.
    #[arg(long)]
    segment_ms: Option<String>,
    /// Default `retention.bytes` per partition (-1: unlimited).
    #[arg(long)]
    retention_bytes: Option<String>,
    /// Default `retention.ms` (-1: keep forever).
    #[arg(long)]
    retention_ms: Option<String>,
    /// Default `max.message.bytes`: the largest record batch accepted.
    #[arg(long)]
    max_message_bytes: Option<String>,
    /// Default `flush.messages`: 1 acknowledges an append only once it is fsynced (durability
    /// `always`, with group commit).
    #[arg(long)]
    flush_messages: Option<String>,
    /// Default `flush.ms`: fsync in the background at most this many ms apart.
    #[arg(long)]
    flush_ms: Option<String>,
}

impl Args {
    fn broker_config(&self) -> anyhow::Result<BrokerConfig> {
        let mut config = BrokerConfig {
            data_dir: self.data_dir.clone(),
            ..BrokerConfig::default()
        };
        if let Some(path) = &self.config {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let (name, value) = line.split_once('=').with_context(|| {
                    format!("{}:{}: expected name=value", path.display(), n + 1)
                })?;
                apply(&mut config, name.trim(), value.trim())
                    .with_context(|| format!("{}:{}", path.display(), n + 1))?;
            }
        }
        let flags: [(&str, Option<String>); 15] = [
            (
                "group-initial-rebalance-delay-ms",
                self.group_initial_rebalance_delay_ms.map(|v| v.to_string()),
            ),
            (
                "group-min-session-timeout-ms",
                self.group_min_session_timeout_ms.map(|v| v.to_string()),
            ),
            ("advertised-host", self.advertised_host.clone()),
            ("node-id", self.node_id.map(|v| v.to_string())),
            (
                "auto-create-topics",
                self.auto_create_topics.map(|v| v.to_string()),
            ),
            (
                "default-partitions",
                self.default_partitions.map(|v| v.to_string()),
            ),
            (
                "max-request-bytes",
                self.max_request_bytes.map(|v| v.to_string()),
            ),
            (
                "retention-check-interval-ms",
                self.retention_check_interval_ms.map(|v| v.to_string()),
            ),
            ("segment.bytes", self.segment_bytes.clone()),
            ("segment.ms", self.segment_ms.clone()),
            ("retention.bytes", self.retention_bytes.clone()),
            ("retention.ms", self.retention_ms.clone()),
            ("max.message.bytes", self.max_message_bytes.clone()),
            ("flush.messages", self.flush_messages.clone()),
            ("flush.ms", self.flush_ms.clone()),
        ];
        for (name, value) in flags {
            if let Some(value) = value {
                apply(&mut config, name, &value)
                    .with_context(|| format!("--{}", name.replace('.', "-")))?;
            }
        }
        Ok(config)
    }
}

fn apply(config: &mut BrokerConfig, name: &str, value: &str) -> anyhow::Result<()> {
    match name {
        "listen" | "data-dir" => anyhow::bail!("{name} is given on the command line"),
        "advertised-host" => config.advertised_host = Some(value.to_string()),
        "node-id" => config.node_id = value.parse()?,
        "auto-create-topics" => config.auto_create_topics = value.parse()?,
        "default-partitions" => {
            config.default_partitions = value.parse()?;
            anyhow::ensure!(
                (1..=log_core::MAX_PARTITIONS).contains(&config.default_partitions),
                "default-partitions must be 1..={}",
                log_core::MAX_PARTITIONS
            );
        }
        "max-request-bytes" => config.max_request_bytes = value.parse()?,
        "retention-check-interval-ms" => {
            config.retention_check_interval = Duration::from_millis(value.parse::<u64>()?.max(1))
        }
        "group-initial-rebalance-delay-ms" => {
            config.groups.initial_rebalance_delay = Duration::from_millis(value.parse()?)
        }
        "group-min-session-timeout-ms" => {
            config.groups.min_session_timeout = Duration::from_millis(value.parse()?)
        }
        topic_config => set_topic_config(&mut config.topic_defaults, topic_config, value)
            .map_err(anyhow::Error::msg)?,
    }
    Ok(())
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let config = args.broker_config()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("binding {}", args.listen))?;
        let addr = listener.local_addr()?;
        println!(
            "lograil listening on {addr} (data dir {})",
            config.data_dir.display()
        );
        std::io::stdout().flush()?;
        lograil::run(listener, config, shutdown_signal()).await?;
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
