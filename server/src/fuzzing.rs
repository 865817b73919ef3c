//! An in-process way into the whole request path, for the fuzz targets in `fuzz/` (cargo feature
//! `fuzzing`: never compiled into the `lograil` binary).
//!
//! [`FuzzBroker`] opens a real broker state on a data dir and serves a byte stream as one
//! connection would: frames read by [`crate::frame::FrameReader`], each through
//! `handlers::handle` (header decode, dispatch by API key and version through [`crate::APIS`],
//! body decode, the handler, response encoding), until the stream ends or a frame closes the
//! connection.
//!
//! Requests run on a current-thread runtime whose clock is paused: a wait on a timer (a
//! long-polling fetch, a JoinGroup or SyncGroup waiting for other members) advances the clock
//! at once instead of sleeping, so every request is answered as it would be once its wait ran
//! out, and an input takes microseconds. The coordinator's clock follows the paused one: while
//! a request waits, group deadlines are ticked at growing steps of that clock, as the broker's
//! group timer does in real time.

use std::future::Future;
use std::net::SocketAddr;

use crate::security::Listener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::runtime::Runtime;
use tokio::sync::watch;

use crate::broker::{Broker, StartError};
use crate::frame::{FrameLimits, FrameReader};
use crate::handlers::request::{self, RequestError, Session};
use crate::BrokerConfig;

/// Largest frame a [`FuzzBroker`] reads: fuzz inputs are far smaller, and a length prefix
/// claiming more closes the connection before anything is allocated, as in the broker.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// What became of one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A response frame, length prefix included.
    Response(Bytes),
    /// No response (Produce with acks=0).
    NoResponse,
    /// The request was refused and the connection closed: unknown API or version, a header or
    /// body that does not decode.
    Refused(String),
    /// The request was handled but its response could not be encoded: the connection closed
    /// though the request was well formed. Always a bug.
    EncodeFailed(String),
}

/// One frame of the stream and what became of it.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The request frame, without its length prefix.
    pub request: Bytes,
    pub outcome: Outcome,
}

/// Why a [`FuzzBroker`] could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("opening the data dir: {0}")]
    Broker(#[from] StartError),
    #[error("starting the runtime: {0}")]
    Runtime(std::io::Error),
}

/// A broker on a data dir, served in-process.
#[derive(Debug)]
pub struct FuzzBroker {
    broker: Arc<Broker>,
    runtime: Runtime,
    /// Kept so that `shutdown.changed()` in handlers waits instead of returning at once.
    _stop: watch::Sender<bool>,
    /// Where the paused clock started: its distance from here is how far waits advanced it.
    started: tokio::time::Instant,
}

impl FuzzBroker {
    /// Opens (creating it if needed) a broker state on `data_dir`, with the defaults of
    /// `lograil serve` except for [`MAX_REQUEST_BYTES`].
    pub fn open(data_dir: &Path) -> Result<FuzzBroker, OpenError> {
        let config = BrokerConfig {
            data_dir: data_dir.to_path_buf(),
            max_request_bytes: MAX_REQUEST_BYTES,
            ..BrokerConfig::default()
        };
        let (stop, stopped) = watch::channel(false);
        let broker = Arc::new(Broker::open(
            config,
            stopped,
            Arc::new(crate::metrics::Metrics::new(&crate::handlers::APIS)),
        )?);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .map_err(OpenError::Runtime)?;
        let started = runtime.block_on(async { tokio::time::Instant::now() });
        Ok(FuzzBroker {
            broker,
            runtime,
            _stop: stop,
            started,
        })
    }

    /// Serves `stream` as the bytes one client sent on one connection: frame after frame
    /// until the stream ends, a frame is unreadable, or a request closes the connection.
    pub fn serve(&self, stream: &[u8]) -> Vec<Exchange> {
        let broker = &self.broker;
        let started = self.started;
        self.runtime.block_on(async move {
            let peer = SocketAddr::from(([127, 0, 0, 1], 40000));
            let listener = Arc::new(Listener::plaintext(SocketAddr::from((
                [127, 0, 0, 1],
                9092,
            ))));
            let mut session = Session::new(peer, listener, crate::security::Principal::anonymous());
            let mut reader = FrameReader::new(stream);
            let limits = FrameLimits {
                max_request_bytes: MAX_REQUEST_BYTES,
                max_non_produce_request_bytes: MAX_REQUEST_BYTES,
                unauthenticated: None,
            };
            let mut exchanges = Vec::new();
            while let Ok(Some(frame)) = reader.read_frame(&limits, &broker.request_budget()).await {
                let (frame, _budget) = frame.into_parts();
                let handled = with_group_clock(
                    broker,
                    started,
                    request::handle(broker, frame.clone(), &mut session),
                )
                .await;
                broker.groups().classic.tick(group_now(started), |g| {
                    broker.groups().offsets.has_offsets(g)
                });
                let outcome = match handled {
                    Ok(Some(response)) => Outcome::Response(response.to_bytes()),
                    Ok(None) => Outcome::NoResponse,
                    Err(e @ RequestError::Encode { .. }) => Outcome::EncodeFailed(e.to_string()),
                    Err(e) => Outcome::Refused(e.to_string()),
                };
                let closed = matches!(outcome, Outcome::Refused(_) | Outcome::EncodeFailed(_));
                exchanges.push(Exchange {
                    request: frame,
                    outcome,
                });
                if closed {
                    break;
                }
            }
            exchanges
        })
    }
}

/// The coordinator's "now": real time plus how far waits advanced the paused clock.
fn group_now(started: tokio::time::Instant) -> std::time::Instant {
    std::time::Instant::now() + started.elapsed()
}

/// Runs `request`, ticking the group coordinator while it waits: after 100 ms of the paused
/// clock, then at doubling steps (a few dozen ticks cover the longest wait a request can ask).
async fn with_group_clock<T>(
    broker: &Broker,
    started: tokio::time::Instant,
    request: impl Future<Output = T>,
) -> T {
    tokio::pin!(request);
    let mut step = Duration::from_millis(100);
    loop {
        tokio::select! {
            biased;
            out = &mut request => return out,
            () = tokio::time::sleep(step) => {
                broker
                    .groups().classic
                    .tick(group_now(started), |g| broker.groups().offsets.has_offsets(g));
                step = step.saturating_mul(2);
            }
        }
    }
}
