//! # lograil (the broker)
//!
//! A Kafka-protocol broker over [`log_core`]: real Kafka clients produce to it and fetch from
//! it unchanged. [`run`] serves a bound listener until a shutdown future completes; the
//! `lograil` binary only parses flags and calls it, and tests call it on `127.0.0.1:0`.
//!
//! A request travels: socket → [`frame`] (length-checked before allocating) →
//! `handlers::handle` (header decode, dispatch by API key through the registration table) →
//! one handler file per API → log-core.

mod appender;
mod broker;
pub mod config;
mod connection;
mod durable;
pub mod frame;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod groups;
mod handlers;
mod producers;

use std::future::Future;
use std::sync::Arc;

pub use config::BrokerConfig;
pub use handlers::{Api, APIS};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::broker::Broker;

/// How long shutdown waits for in-flight requests before closing their connections.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Why the broker could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("opening the data dir: {0}")]
    Open(#[from] broker::StartError),
    #[error("listener: {0}")]
    Listener(#[from] std::io::Error),
}

/// Serves Kafka clients on `listener` until `shutdown` completes, then stops accepting,
/// lets in-flight requests finish, flushes every partition and returns.
pub async fn run(
    listener: TcpListener,
    config: BrokerConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let bound = listener.local_addr()?;
    let (stop, stopped) = watch::channel(false);
    let broker = {
        let bound_config = config.clone();
        let stopped = stopped.clone();
        // Opening recovers every partition: blocking file work.
        tokio::task::spawn_blocking(move || Broker::open(bound_config, bound, stopped))
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))??
    };
    let broker = Arc::new(broker);
    let retention = tokio::spawn(run_retention(broker.clone()));
    let group_timer = tokio::spawn(run_group_timer(broker.clone()));
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    connections.spawn(connection::serve(broker.clone(), socket, peer));
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    tracing::info!("shutting down: finishing in-flight requests");
    let _ = stop.send(true);
    broker.appended.notify_waiters();
    // In-flight requests finish; a connection stuck past the grace period is dropped.
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("connections still busy after {SHUTDOWN_GRACE:?}: closing them");
        connections.shutdown().await;
    }
    retention.abort();
    group_timer.abort();
    let owner = broker.clone();
    let closed = tokio::task::spawn_blocking(move || {
        let mut result = Ok(());
        for topic in owner.log.topics() {
            for partition in topic.partitions() {
                if let Err(e) = partition.close() {
                    tracing::error!(partition = partition.name(), error = %e, "flush on shutdown failed");
                    result = Err(e);
                }
            }
        }
        result
    })
    .await;
    if !matches!(closed, Ok(Ok(()))) {
        tracing::error!("some partitions could not be flushed on shutdown");
    }
    tracing::info!("stopped");
    Ok(())
}

async fn run_retention(broker: Arc<Broker>) {
    let mut every = tokio::time::interval(broker.config.retention_check_interval);
    every.tick().await;
    loop {
        every.tick().await;
        let owner = broker.clone();
        let result =
            tokio::task::spawn_blocking(move || owner.log.apply_retention(log_core::now_ms()))
                .await;
        match result {
            Ok(Ok(report)) if report.deleted_segments > 0 => {
                tracing::info!(
                    segments = report.deleted_segments,
                    bytes = report.deleted_bytes,
                    "retention"
                );
            }
            Ok(Err(e)) => tracing::error!(error = %e, "retention failed"),
            _ => {}
        }
    }
}

/// Session expiry and rebalance deadlines of consumer groups.
async fn run_group_timer(broker: Arc<Broker>) {
    let mut every = tokio::time::interval(std::time::Duration::from_millis(100));
    loop {
        every.tick().await;
        broker.groups.tick(std::time::Instant::now());
    }
}
