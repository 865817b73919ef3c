//! # lograil (the broker)
//!
//! A Kafka-protocol broker over [`log_core`]: real Kafka clients produce to it and fetch from
//! it unchanged. [`run`] serves a bound listener until a shutdown future completes; the
//! `lograil` binary only parses flags and calls it, and tests call it on `127.0.0.1:0`.
//!
//! A request travels: socket → [`frame`] (length-checked before allocating) →
//! `handlers::handle` (header decode, dispatch by API key through the registration table) →
//! one handler file per API → log-core; the response goes back out through [`response`], which
//! writes fetched records from the segment map without copying them.

#![warn(missing_docs)]

mod admission;
mod appender;
pub mod authorizer;
mod backlog;
mod blocking;
mod broker;
mod broker_defaults;
pub mod config;
mod connection;
mod console;
mod durable;
pub mod frame;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod groups;
mod handlers;
mod http;
mod limits;
pub mod metrics;
#[cfg(test)]
mod producer_model;
mod producers;
pub mod quotas;
mod response;
mod scrape;
pub mod security;
mod shares;
mod side;
mod topic_config;
mod transactions;

use std::future::Future;
use std::sync::Arc;

pub use config::{BrokerConfig, Limits};
pub use console::escape_html;
pub use handlers::APIS;
pub use metrics::Api;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::admission::Admission;
use crate::broker::Broker;
use crate::limits::RateLimiter;
use crate::security::{Listener, ListenerConfig, SecurityProtocol};
use crate::side::Side;

/// How long shutdown waits for in-flight requests before closing their connections.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Why the broker could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The broker's state could not be opened: the log, an internal topic, a file of the data
    /// dir (client quotas, SCRAM credentials, ACLs, ...) or `--sasl-plain-users-file`.
    #[error("opening the data dir: {0}")]
    Open(#[from] broker::StartError),
    /// A bound socket's address could not be read, or the task opening the data dir panicked.
    #[error("listener: {0}")]
    Listener(#[from] std::io::Error),
    /// Settings contradict each other ([`BrokerConfig::validate`]).
    #[error(transparent)]
    Config(#[from] config::LimitsError),
    /// A TLS listener is configured but its key store or trust store cannot be used.
    #[error("TLS of listener {listener}: {source}")]
    Tls {
        /// The listener's name.
        listener: String,
        /// What is wrong with its TLS settings.
        source: security::tls::TlsError,
    },
    /// A `listener.name.<listener>.*` setting names no listener of `listeners`.
    #[error("listener.name.{lower}.*: no listener {0} in --listeners", lower = .0.to_ascii_lowercase())]
    UnknownListener(String),
}

/// Serves Kafka clients on `listener` until `shutdown` completes, then stops accepting,
/// lets in-flight requests finish, flushes every partition and returns. The same as
/// [`Server::open`] then [`Server::serve`].
pub async fn run(
    listener: TcpListener,
    config: BrokerConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    Server::open(listener, config).await?.serve(shutdown).await
}

/// A broker whose data dir is open (every partition recovered) on bound listeners, not yet
/// accepting connections: what lies between "the data dir opened" and "serving", so a caller
/// can say it is ready only once it is.
#[derive(Debug)]
pub struct Server {
    listeners: Vec<Bound>,
    broker: Arc<Broker>,
    stop: watch::Sender<bool>,
    metrics_listener: Option<Side>,
    /// The console's listener, and whether its actions are on (`--console-actions`).
    console_listener: Option<(Side, bool)>,
}

/// A bound socket and the listener it serves.
#[derive(Debug)]
struct Bound {
    socket: TcpListener,
    listener: Arc<Listener>,
}

impl Server {
    /// Opens the data dir (recovering every partition, on the blocking pool) to serve one
    /// PLAINTEXT listener on `listener` (advertised as `config.advertised_host` when set).
    pub async fn open(listener: TcpListener, config: BrokerConfig) -> Result<Server, ServeError> {
        let plaintext = ListenerConfig {
            name: "PLAINTEXT".to_string(),
            protocol: SecurityProtocol::Plaintext,
            bind: String::new(),
            advertised: None,
        };
        Server::open_listeners(vec![(plaintext, listener)], config).await
    }

    /// Opens the data dir to serve each listener on its bound socket. A listener without an
    /// advertised address advertises `config.advertised_host` (when set) and its bound port.
    pub async fn open_listeners(
        listeners: Vec<(ListenerConfig, TcpListener)>,
        config: BrokerConfig,
    ) -> Result<Server, ServeError> {
        config.validate()?;
        let names: Vec<&str> = listeners.iter().map(|(l, _)| l.name.as_str()).collect();
        if let Some(unknown) = config.security.per_listener.unknown(&names) {
            return Err(ServeError::UnknownListener(unknown.to_string()));
        }
        let mut bound = Vec::with_capacity(listeners.len());
        // Listeners of equal TLS settings share one acceptor (and one keystore watch).
        let mut acceptors: Vec<(security::tls::TlsSettings, tokio_rustls::TlsAcceptor)> =
            Vec::new();
        for (mut listener, socket) in listeners {
            let settings = config.security.tls_for(&listener);
            let tls = if listener.protocol.uses_tls() {
                let known = acceptors.iter().find(|(s, _)| *s == settings);
                Some(match known {
                    Some((_, acceptor)) => acceptor.clone(),
                    None => {
                        let acceptor = settings.acceptor().map_err(|source| ServeError::Tls {
                            listener: listener.name.clone(),
                            source,
                        })?;
                        acceptors.push((settings.clone(), acceptor.clone()));
                        acceptor
                    }
                })
            } else {
                None
            };
            let secured = security::listener::Secured {
                client_auth: if tls.is_some() {
                    settings.client_auth
                } else {
                    security::tls::ClientAuth::None
                },
                tls,
                mechanisms: config.security.mechanisms_for(&listener),
            };
            let addr = socket.local_addr()?;
            if listener.advertised.is_none() {
                if let Some(host) = &config.advertised_host {
                    listener.advertised = Some((host.clone(), addr.port()));
                }
            }
            bound.push(Bound {
                listener: Arc::new(Listener::bound(&listener, addr, secured)),
                socket,
            });
        }
        let (stop, stopped) = watch::channel(false);
        let broker = crate::blocking::spawn(move || {
            Broker::open(
                config,
                stopped,
                Arc::new(crate::metrics::Metrics::new(&handlers::APIS)),
            )
        })
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))??;
        Ok(Server {
            listeners: bound,
            broker: Arc::new(broker),
            stop,
            metrics_listener: None,
            console_listener: None,
        })
    }

    /// Also serves Prometheus metrics at `/metrics` on `listener` (`--metrics-listen`), over
    /// HTTPS with `tls` (`--metrics-tls`): see docs/operations.md, "Metrics", for what is there.
    pub fn with_metrics_listener(
        mut self,
        listener: TcpListener,
        tls: bool,
    ) -> Result<Server, ServeError> {
        self.metrics_listener = Some(Side::new(listener, tls, &self.broker, "metrics")?);
        Ok(self)
    }

    /// Also serves the web console on `listener` (`--console-listen`), over HTTPS with `tls`
    /// (`--console-tls`): see `docs/console.md`. Read-only until [`Server::with_console_actions`].
    pub fn with_console_listener(
        mut self,
        listener: TcpListener,
        tls: bool,
    ) -> Result<Server, ServeError> {
        self.console_listener = Some((Side::new(listener, tls, &self.broker, "console")?, false));
        Ok(self)
    }

    /// Turns the console's actions on (`--console-actions`: reset offsets, delete records,
    /// redrive a dead letter, each confirmed, authorized as its Kafka request and logged).
    pub fn with_console_actions(mut self) -> Server {
        if let Some((_, actions)) = &mut self.console_listener {
            *actions = true;
        }
        self
    }

    /// Whether the console asks for credentials: when no Kafka listener takes
    /// unauthenticated clients (each is SASL, or TLS with a required client certificate).
    pub fn console_requires_authentication(&self) -> bool {
        self.listeners.iter().all(|b| {
            b.listener.protocol.uses_sasl()
                || b.listener.client_auth == crate::security::tls::ClientAuth::Required
        })
    }

    /// The address clients connect to: the first listener's.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        match self.listeners.first() {
            Some(bound) => bound.socket.local_addr(),
            None => Err(std::io::Error::other("no listener")),
        }
    }

    /// Each listener's name and bound address, in the order given.
    pub fn listener_addrs(&self) -> std::io::Result<Vec<(String, std::net::SocketAddr)>> {
        self.listeners
            .iter()
            .map(|b| Ok((b.listener.name.clone(), b.socket.local_addr()?)))
            .collect()
    }

    /// Serves until `shutdown` completes, then stops accepting, lets in-flight requests
    /// finish, flushes every partition and returns.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let gate = if self.console_requires_authentication() {
            console::Gate::Basic
        } else {
            console::Gate::Open
        };
        let Server {
            listeners,
            broker,
            stop,
            metrics_listener,
            console_listener,
        } = self;
        let side = side::spawn(&broker, metrics_listener, console_listener, gate)?;
        let served = serve(listeners, broker, stop, shutdown).await;
        for task in side {
            task.abort();
        }
        served
    }
}

/// Accepts connections on `listeners` and serves each in its own task until `shutdown`
/// completes, then shuts the broker down.
async fn serve(
    listeners: Vec<Bound>,
    broker: Arc<Broker>,
    stop: watch::Sender<bool>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let timers = Timers::spawn(&broker);
    let mut connections = JoinSet::new();
    let mut admission = Admission::new(&broker.config().limits);
    let creation_rate = broker
        .config()
        .limits
        .max_connection_creation_rate
        .map(RateLimiter::per_second);
    tokio::pin!(shutdown);
    loop {
        // max.connection.creation.rate: accepting waits (the kernel queues new connections).
        if let Some(rate) = &creation_rate {
            let wait = rate.take_or_wait(std::time::Instant::now());
            if !wait.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(wait) => continue,
                    () = &mut shutdown => break,
                }
            }
        }
        tokio::select! {
            accepted = accept(&listeners) => match accepted {
                Ok((socket, peer, listener)) => {
                    admission.admit(&broker, socket, peer, listener, &mut connections);
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
    drop(listeners);
    shut_down(broker, stop, connections, timers).await;
    Ok(())
}

/// The broker's background tasks (retention, group and transaction timers, expiries), ended
/// at shutdown.
struct Timers(Vec<tokio::task::JoinHandle<()>>);

impl Timers {
    fn spawn(broker: &Arc<Broker>) -> Timers {
        Timers(vec![
            tokio::spawn(run_retention(broker.clone())),
            tokio::spawn(run_group_timer(broker.clone())),
            tokio::spawn(run_producer_expiry(broker.clone())),
            tokio::spawn(run_offsets_expiry(broker.clone())),
            tokio::spawn(run_transaction_timer(broker.clone())),
        ])
    }

    fn abort(self) {
        for timer in self.0 {
            timer.abort();
        }
    }
}

/// Stops the broker once it accepts no more: in-flight requests finish (a connection stuck
/// past the grace period is dropped), the background tasks end, and the log's files are made
/// final.
async fn shut_down(
    broker: Arc<Broker>,
    stop: watch::Sender<bool>,
    mut connections: JoinSet<()>,
    timers: Timers,
) {
    tracing::info!("shutting down: finishing in-flight requests");
    let _ = stop.send(true);
    broker.storage().appended.notify_waiters();
    // In-flight requests finish; a connection stuck past the grace period is dropped.
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("connections still busy after {SHUTDOWN_GRACE:?}: closing them");
        connections.shutdown().await;
    }
    timers.abort();
    let owner = broker.clone();
    // The log's files are final once this returns (its threads stopped, every partition
    // flushed and closed, the clean-shutdown mark written), even while tasks still hold the
    // broker: an embedding owner may remove the data dir.
    let closed = crate::blocking::spawn(move || {
        owner
            .storage()
            .producers
            .save_snapshots(&owner.storage().log);
        owner.storage().log.shut_down()
    })
    .await;
    match closed {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::error!(error = %e, "some partitions could not be flushed on shutdown")
        }
        Err(e) => tracing::error!(error = %e, "the shutdown's flush failed"),
    }
    tracing::info!("stopped");
}

/// The next connection on any of `listeners`, with the listener it came in on.
async fn accept(
    listeners: &[Bound],
) -> std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr, Arc<Listener>)> {
    std::future::poll_fn(|cx| {
        for bound in listeners {
            if let std::task::Poll::Ready(accepted) = bound.socket.poll_accept(cx) {
                return std::task::Poll::Ready(
                    accepted.map(|(socket, peer)| (socket, peer, bound.listener.clone())),
                );
            }
        }
        std::task::Poll::Pending
    })
    .await
}

async fn run_retention(broker: Arc<Broker>) {
    let mut every = tokio::time::interval(broker.config().retention_check_interval);
    every.tick().await;
    loop {
        every.tick().await;
        let owner = broker.clone();
        let result =
            crate::blocking::spawn(move || owner.storage().log.apply_retention(log_core::now_ms()))
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

/// Drops idempotent-producer state unused for `producer.id.expiration.ms`.
async fn run_producer_expiry(broker: Arc<Broker>) {
    let limits = &broker.config().limits;
    let expiration_ms =
        i64::try_from(limits.producer_id_expiration.as_millis()).unwrap_or(i64::MAX);
    let mut every = tokio::time::interval(limits.producer_id_expiration_check_interval);
    every.tick().await;
    loop {
        every.tick().await;
        let dropped = broker
            .storage()
            .producers
            .expire(log_core::now_ms(), expiration_ms);
        if dropped > 0 {
            tracing::info!(
                dropped,
                "expired idle producers (--producer-id-expiration-ms)"
            );
        }
    }
}

/// Deletes the offsets of groups empty for `offsets.retention.minutes`.
async fn run_offsets_expiry(broker: Arc<Broker>) {
    let mut every = tokio::time::interval(broker.config().limits.offsets_retention_check_interval);
    every.tick().await;
    loop {
        every.tick().await;
        let owner = broker.clone();
        let expired =
            crate::blocking::spawn(move || owner.groups().expire_offsets(log_core::now_ms())).await;
        match expired {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "expiring offsets failed"),
            Err(e) => tracing::error!(error = %e, "offset expiry task failed"),
        }
    }
}

/// The transaction coordinator's timer: at start, and after every failed try, completes the
/// transactions found prepared (markers written again); aborts ongoing transactions past
/// their `transaction.timeout.ms` (`--transaction-abort-timed-out-transaction-cleanup-interval-ms`);
/// forgets ids idle for `transactional.id.expiration.ms`.
async fn run_transaction_timer(broker: Arc<Broker>) {
    let mut every = tokio::time::interval(broker.txns().coordinator.config().abort_check_interval);
    loop {
        every.tick().await;
        let owner = broker.clone();
        let now = log_core::now_ms();
        let due = crate::blocking::spawn(move || {
            let aborted = owner.txns().coordinator.abort_timed_out(now)?;
            let expired = owner.txns().coordinator.expire(now)?;
            Ok::<_, log_core::StateLogError>((aborted, expired))
        })
        .await;
        match due {
            Ok(Ok((_, expired))) if expired > 0 => {
                tracing::info!(
                    expired,
                    "forgot transactional ids idle for transactional.id.expiration.ms"
                );
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::error!(error = %e, "transaction timer: writing __transaction_state failed")
            }
            Err(e) => tracing::error!(error = %e, "transaction timer task failed"),
        }
        for id in broker.txns().coordinator.prepared() {
            broker.txns().clone().complete(id).await;
        }
    }
}

/// Session expiry and rebalance deadlines of consumer groups.
async fn run_group_timer(broker: Arc<Broker>) {
    let mut every = tokio::time::interval(std::time::Duration::from_millis(100));
    loop {
        every.tick().await;
        let now = std::time::Instant::now();
        let forgotten = broker
            .groups()
            .classic
            .tick(now, |group| broker.groups().offsets.has_offsets(group));
        for (group, _) in broker.groups().consumer.tick(now) {
            broker.groups().maybe_downgrade(&group, now);
        }
        let streams = &broker.groups().streams;
        streams.tick_with(now, |group| {
            let overrides = broker.shares().overrides(group);
            streams.config.with_overrides(&overrides).session_timeout
        });
        broker
            .groups()
            .streams
            .forget(|group| broker.groups().offsets.has_offsets(group));
        broker
            .groups()
            .consumer
            .forget(|group| broker.groups().offsets.has_offsets(group));
        broker.groups().store_group_records(forgotten).await;
        // Share groups: locks that ran out, members gone silent (log work: blocking pool).
        let owner = broker.clone();
        let ticked = crate::blocking::spawn(move || {
            owner
                .shares()
                .tick(&owner.storage().log, log_core::now_ms())
        })
        .await;
        if let Ok(pending) = ticked {
            pending.durable(&broker.storage().syncer).await;
        }
    }
}
