//! `lograil serve`: flags and an optional config file into a [`BrokerConfig`], then
//! [`lograil::run`] until SIGINT or SIGTERM.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use lograil::BrokerConfig;

mod settings;

use settings::Settings;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address of the one PLAINTEXT listener (default 127.0.0.1:9092); port 0 picks a free
    /// port (the start-up line shows which). `--listeners` names several, with security.
    #[arg(long)]
    listen: Option<String>,
    /// Directory holding the topics' data.
    #[arg(long, default_value = "./data")]
    data_dir: PathBuf,
    /// Serve Prometheus metrics at http://ADDR/metrics (OpenMetrics text); port 0 picks a free
    /// port (the start-up line shows which). Off unless given.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<String>,
    /// Serve --metrics-listen over HTTPS, with the broker's keystore (--ssl-keystore-location).
    #[arg(long, requires = "metrics_listen")]
    metrics_tls: bool,
    /// Serve the web console at http://ADDR/ (read-only unless --console-actions); port 0 picks a free port (the
    /// start-up line shows which). Off unless given. Asks for a SASL user's name and password
    /// when every listener authenticates its clients, and is open otherwise.
    #[arg(long, value_name = "ADDR")]
    console_listen: Option<String>,
    /// Serve --console-listen over HTTPS, with the broker's keystore (--ssl-keystore-location),
    /// so that its Basic credentials never cross the network in the clear.
    #[arg(long, requires = "console_listen")]
    console_tls: bool,
    /// Let the console act, not only show: reset a group's offsets, delete records up to an
    /// offset, redrive a dead letter. Each asks for confirmation, carries a CSRF token, is
    /// authorized as its Kafka request would be, and is logged with its principal.
    #[arg(long, requires = "console_listen")]
    console_actions: bool,
    /// A file of `name=value` lines: any setting below by its flag name (`default-partitions=3`),
    /// topic defaults also by their Kafka name (`segment.bytes=1048576`). Flags win over the file.
    #[arg(long)]
    config: Option<PathBuf>,
    #[command(flatten)]
    settings: Settings,
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

/// Active segments (up to `--max-open-segments`) and clients' sockets hold open files: takes
/// all the system allows this process (the soft limit is often 1024), and leaves the sockets
/// at least half.
fn raise_open_files(config: &mut BrokerConfig) {
    let limit = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => limit,
        Err(e) => {
            tracing::warn!(error = %e, "could not raise the open-file limit");
            rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft)
        }
    };
    tracing::info!(limit, "open files");
    let half = usize::try_from(limit / 2).unwrap_or(usize::MAX).max(1);
    if config.log.open_segments > half {
        tracing::info!(
            open_segments = half,
            "--max-open-segments lowered to half the open-file limit"
        );
        config.log.open_segments = half;
    }
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let mut config = args.broker_config()?;
    raise_open_files(&mut config);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut listeners = Vec::new();
        for listener in config.security.listeners.parse(args.listen.as_deref())? {
            let socket = tokio::net::TcpListener::bind(&listener.bind)
                .await
                .with_context(|| format!("binding {} ({})", listener.bind, listener.name))?;
            listeners.push((listener, socket));
        }
        let named = config.security.listeners.listeners.is_some();
        let metrics_listener = match &args.metrics_listen {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("binding --metrics-listen {addr}"))?,
            ),
            None => None,
        };
        let console_listener = match &args.console_listen {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .with_context(|| format!("binding --console-listen {addr}"))?,
            ),
            None => None,
        };
        let data_dir = config.data_dir.clone();
        let mut server = lograil::Server::open_listeners(listeners, config).await?;
        let mut endpoints = String::new();
        let scheme = |tls: bool| if tls { "https" } else { "http" };
        if let Some(listener) = metrics_listener {
            let addr = listener.local_addr()?;
            endpoints = format!(", metrics at {}://{addr}/metrics", scheme(args.metrics_tls));
            server = server.with_metrics_listener(listener, args.metrics_tls)?;
        }
        if let Some(listener) = console_listener {
            let addr = listener.local_addr()?;
            endpoints.push_str(&format!(
                ", console at {}://{addr}/",
                scheme(args.console_tls)
            ));
            server = server.with_console_listener(listener, args.console_tls)?;
            if args.console_actions {
                server = server.with_console_actions();
            }
        }
        // Only now: tests and scripts take this line to mean the broker is ready.
        let addrs: Vec<String> = server
            .listener_addrs()?
            .into_iter()
            .map(|(name, addr)| {
                if named {
                    format!("{addr} ({name})")
                } else {
                    addr.to_string()
                }
            })
            .collect();
        println!(
            "lograil listening on {} (data dir {}){endpoints}",
            addrs.join(", "),
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
mod tests;
