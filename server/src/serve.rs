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
        if let Some(delay) = self.group_initial_rebalance_delay_ms {
            config.groups.initial_rebalance_delay = ms(delay);
        }
        if let Some(timeout) = self.group_min_session_timeout_ms {
            config.groups.min_session_timeout = ms(timeout);
        }
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
        Ok(config)
    }
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
            "# defaults\ndefault-partitions=3\nsegment.bytes=2048\nflush.messages=1\n\
             group-initial-rebalance-delay-ms=0\nretention.ms=-1\n",
            &["--segment-bytes", "4096", "--retention-bytes", "-1"],
        )
        .unwrap();
        assert_eq!(config.default_partitions, 3);
        assert_eq!(config.topic_defaults.segment_bytes, 4096, "the flag wins");
        assert_eq!(config.topic_defaults.durability, Durability::Always);
        assert_eq!(config.topic_defaults.retention_ms, None);
        assert_eq!(config.groups.initial_rebalance_delay, Duration::ZERO);
    }

    #[test]
    fn bad_settings_are_refused() {
        for file in [
            "segment.bytes=10\n",
            "default-partitions=0\n",
            "no-such-setting=1\n",
            "listen=127.0.0.1:1\n",
            "just some words\n",
            "flush.messages=5\n",
            "node-id=abc\n",
        ] {
            assert!(config_from(file, &[]).is_err(), "{file:?} was accepted");
        }
        assert!(config_from("", &["--retention-ms", "-7"]).is_err());
    }
}
