//! The broker's side listeners, `/metrics` (`--metrics-listen`) and the web console
//! (`--console-listen`, its actions with `--console-actions`): their sockets, HTTPS with the broker's keystore when asked for
//! (`--metrics-tls`, `--console-tls`), and the tasks that serve them on [`crate::http`].

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::broker::Broker;
use crate::{console, http, scrape, security, ServeError};

/// A side listener's socket, and its TLS acceptor when it serves HTTPS.
pub(crate) struct Side {
    socket: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl std::fmt::Debug for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Side")
            .field("socket", &self.socket)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Side {
    /// `socket`, over HTTPS with `tls`: the broker's keystore (`--ssl-keystore-location`), no
    /// client certificate asked for. Without a keystore, the error names the listener.
    pub(crate) fn new(
        socket: TcpListener,
        tls: bool,
        broker: &Broker,
        name: &str,
    ) -> Result<Side, ServeError> {
        let tls = if tls {
            let settings = security::tls::TlsSettings {
                client_auth: security::tls::ClientAuth::None,
                ..broker.config().security.tls.clone()
            };
            let acceptor = settings.acceptor().map_err(|source| ServeError::Tls {
                listener: name.to_string(),
                source,
            })?;
            Some(acceptor)
        } else {
            None
        };
        Ok(Side { socket, tls })
    }
}

/// Starts serving `/metrics` and the console (those given), with one scraper for both so the
/// console shows the consume rates `/metrics` samples; logs who may open the console.
pub(crate) fn spawn(
    broker: &Arc<Broker>,
    metrics: Option<Side>,
    console: Option<(Side, bool)>,
    gate: console::Gate,
) -> Result<Vec<JoinHandle<()>>, ServeError> {
    let scraper = Arc::new(scrape::Scraper::new(broker.clone()));
    let mut tasks = Vec::new();
    if let Some(Side { socket, tls }) = metrics {
        tasks.push(tokio::spawn(http::serve(
            socket,
            tls,
            Arc::new(scrape::http::Metrics(scraper.clone())),
            broker.shutdown(),
        )));
    }
    if let Some((Side { socket, tls }, actions)) = console {
        let loopback = socket.local_addr().is_ok_and(|a| a.ip().is_loopback());
        match gate {
            console::Gate::Basic => {
                tracing::info!(
                    "console: HTTP Basic authentication against the broker's SASL users"
                );
                if !loopback && tls.is_none() {
                    tracing::warn!(
                        "console: credentials cross the network in the clear (no TLS on \
                         --console-listen): bind it to loopback or give --console-tls"
                    );
                }
            }
            console::Gate::Open => tracing::warn!(
                "console: open to anyone who can reach it (no listener authenticates \
                 its clients); bind it to loopback or enable SASL"
            ),
        }
        let console =
            console::Console::new(broker.clone(), scraper, gate, actions).ok_or_else(|| {
                ServeError::Listener(std::io::Error::other(
                    "no random bytes for --console-actions",
                ))
            })?;
        if actions {
            tracing::info!(
                "console: actions on (--console-actions), each logged with its principal"
            );
        }
        tasks.push(tokio::spawn(http::serve(
            socket,
            tls,
            Arc::new(console),
            broker.shutdown(),
        )));
    }
    Ok(tasks)
}
