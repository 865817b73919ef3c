//! One request frame's way to its response frame, in the order it happens: read the API key
//! and version, check them against [`super::APIS`], count a Produce before decoding it, decode
//! the header, wait out a byte-rate quota, decode the body, check it against the bounds, run
//! the handler, set the throttle, count the response's errors, encode.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use tracing::Instrument;

use super::{api_versions, bounds, produce_legacy, throttle, Handler, RequestContext, Route};
use crate::broker::{Broker, Pick};
use crate::response::Response;
use crate::security::sasl::{Exchange, Step};
use crate::security::{Listener, Principal};

/// Why a request could not be answered; the connection is closed with this logged.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("unknown API key {0}")]
    UnknownApi(i16),
    #[error("{key:?} v{version} is not served (versions {min}–{max})")]
    UnsupportedVersion {
        key: ApiKey,
        version: i16,
        min: i16,
        max: i16,
    },
    #[error("malformed {key:?} v{version} {part}: {source}")]
    Malformed {
        key: ApiKey,
        version: i16,
        part: Part,
        source: BoxError,
    },
    #[error("{key:?} before SASL authentication (a SASL listener serves only ApiVersions, SaslHandshake and SaslAuthenticate until then)")]
    Unauthenticated { key: ApiKey },
    #[error("{0}")]
    Authentication(String),
    #[error("{key:?} after the SASL session expired (connections.max.reauth.ms) without re-authentication")]
    SessionExpired { key: ApiKey },
    #[error("malformed Produce v{version}: {reason}")]
    MalformedLegacyProduce { version: i16, reason: &'static str },
    #[error("{key:?} v{version} names {count} {what}, over the cap of {max} ({setting})")]
    TooMany {
        key: ApiKey,
        version: i16,
        what: &'static str,
        count: usize,
        max: usize,
        setting: &'static str,
    },
    #[error("{key:?} v{version} response could not be encoded: {source}")]
    Encode {
        key: ApiKey,
        version: i16,
        source: BoxError,
    },
}

/// Which part of a request could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Header,
    Body,
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Part::Header => "header",
            Part::Body => "body",
        })
    }
}

/// kafka-protocol's decoding and encoding errors, kept boxed at this edge.
pub use crate::response::BoxError;

/// A response buffer up to this size is kept from one response to the next; a larger one only
/// while responses stay larger (see [`Session::recycle`]).
const SCRATCH_KEEP: usize = 1024 * 1024;
/// A connection quiet for this long gives back a large response buffer.
pub const SCRATCH_IDLE_RELEASE: Duration = Duration::from_secs(1);

/// What a connection keeps from one request to the next.
#[derive(Debug)]
pub struct Session {
    pub peer: SocketAddr,
    /// The listener the connection came in on.
    pub listener: Arc<Listener>,
    /// Who the connection is: `User:ANONYMOUS` until it authenticates.
    pub principal: Principal,
    /// The SASL exchange (on other listeners than SASL ones, [`Exchange::Unavailable`]).
    sasl: Arc<Mutex<Exchange>>,
    /// A SASL listener's connection that has not authenticated yet: only ApiVersions,
    /// SaslHandshake and SaslAuthenticate are served.
    unauthenticated: bool,
    /// The connection closes once the current response is out (a failed authentication).
    closing: bool,
    /// After a SaslHandshake v0: the mechanism's messages come as bare frames (no request
    /// header) and are answered so, until the exchange ends.
    raw_tokens: bool,
    /// With `connections.max.reauth.ms`: when the authenticated session ends unless the
    /// client authenticates again (KIP-368); a request after that closes the connection.
    expires: Option<Instant>,
    /// The client id of the last request (recorded on the connection's span when it changes).
    client_id: Option<String>,
    /// The buffer responses are encoded into and split off: once a response is written and
    /// dropped, the next `reserve` reclaims the same memory, so a consumer's large fetches do
    /// not fault in fresh pages for every response.
    scratch: BytesMut,
    /// `scratch` grew past [`SCRATCH_KEEP`] for a response.
    large: bool,
    /// How long the connection stays muted after the last response (KIP-219): the client went
    /// over a quota.
    throttle: Option<Duration>,
}

impl Session {
    /// A connection on `listener` from `peer`, as `principal` until it authenticates with SASL
    /// (a TLS client certificate's subject, or `User:ANONYMOUS`).
    pub fn new(peer: SocketAddr, listener: Arc<Listener>, principal: Principal) -> Session {
        let sasl = listener.protocol.uses_sasl();
        Session {
            peer,
            sasl: Arc::new(Mutex::new(Exchange::new(sasl))),
            unauthenticated: sasl,
            listener,
            principal,
            closing: false,
            raw_tokens: false,
            expires: None,
            client_id: None,
            scratch: BytesMut::new(),
            large: false,
            throttle: None,
        }
    }

    /// The throttle the last request earned, if any: the connection reads nothing for that
    /// long once its response is out.
    pub fn take_throttle(&mut self) -> Option<Duration> {
        self.throttle.take()
    }

    /// Called once a response of `len` bytes is written and dropped. A buffer that grew past
    /// [`SCRATCH_KEEP`] is kept while responses stay that large (a consumer catching up with
    /// large fetches reuses it: see BENCHMARKS.md, "large fetches"), and given back at the first
    /// smaller one, or when the connection goes quiet ([`SCRATCH_IDLE_RELEASE`]), so that one
    /// large response does not hold its memory for the life of the connection.
    pub fn recycle(&mut self, len: usize) {
        if len > SCRATCH_KEEP {
            self.large = true;
        } else if self.large {
            self.release_buffer();
        }
    }

    /// Whether the response buffer is one to give back when the connection goes quiet.
    pub fn holds_large_buffer(&self) -> bool {
        self.large
    }

    /// Gives the response buffer's memory back.
    pub fn release_buffer(&mut self) {
        self.scratch = BytesMut::new();
        self.large = false;
    }

    /// Whether the connection still has to authenticate (a SASL listener's, before its
    /// exchange succeeded).
    pub fn unauthenticated(&self) -> bool {
        self.unauthenticated
    }

    /// Whether the connection closes once the last response is out.
    pub fn closing(&self) -> bool {
        self.closing
    }

    /// After a SaslHandshake or SaslAuthenticate: the principal once authenticated; closing
    /// once failed.
    fn after_sasl(&mut self, key: ApiKey, version: i16, lifetime: Option<Duration>) {
        let exchange = self.sasl.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(principal) = exchange.principal() {
            if key == ApiKey::SaslAuthenticate || self.raw_tokens {
                self.principal = principal.clone();
                self.unauthenticated = false;
                self.raw_tokens = false;
                self.expires = lifetime.map(|lifetime| Instant::now() + lifetime);
            }
        } else if exchange.failed() {
            self.closing = true;
        } else if exchange.named() && key == ApiKey::SaslHandshake && version == 0 {
            self.raw_tokens = true;
        }
    }

    /// Records the client id of a request (on the connection's span when it changed).
    fn note_client(&mut self, client_id: &str) {
        if self.client_id.as_deref() != Some(client_id) {
            tracing::Span::current().record("client_id", client_id);
            self.client_id = Some(client_id.to_string());
        }
    }
}

/// Handles one request frame in a span naming the API, version and correlation id. Returns the
/// response frame (length prefix included), or `None` when the request gets no response
/// (Produce with acks=0). Counted and timed per API and version in the broker's metrics.
pub async fn handle(
    broker: &Arc<Broker>,
    frame: Bytes,
    session: &mut Session,
) -> Result<Option<Response>, RequestError> {
    if session.raw_tokens {
        return raw_token(broker, frame, session).await.map(Some);
    }
    let started = Instant::now();
    // Frames are at least 8 bytes (the frame reader checks): key, version and correlation id
    // are there.
    let mut peek = frame.get(..8).unwrap_or_default();
    let (key, version, correlation_id) = if peek.len() == 8 {
        (peek.get_i16(), peek.get_i16(), peek.get_i32())
    } else {
        (-1, -1, -1)
    };
    let handled = handle_frame(broker, frame, session, key, version, correlation_id).await;
    broker
        .metrics()
        .request(key, version, started.elapsed(), handled.is_err());
    handled
}

async fn handle_frame(
    broker: &Arc<Broker>,
    frame: Bytes,
    session: &mut Session,
    raw_key: i16,
    version: i16,
    correlation_id: i32,
) -> Result<Option<Response>, RequestError> {
    let api = super::served(raw_key).ok_or(RequestError::UnknownApi(raw_key))?;
    let key = api.key;
    if !(api.min..=api.max).contains(&version) {
        if key == ApiKey::ApiVersions {
            // KIP-511: answer with a v0 body listing our ranges, so the client can pick one.
            return Ok(Some(api_versions::unsupported(correlation_id)));
        }
        return Err(RequestError::UnsupportedVersion {
            key,
            version,
            min: api.min,
            max: api.max,
        });
    }
    if key == ApiKey::Produce {
        if version < produce_legacy::MIN_VERSION {
            return produce_legacy::reject(frame, version)
                .map(|r| r.map(Response::from))
                .map_err(|reason| RequestError::MalformedLegacyProduce { version, reason });
        }
        count_produce(broker, &frame, version)?;
    }
    if session.unauthenticated
        && !matches!(
            key,
            ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
        )
    {
        return Err(RequestError::Unauthenticated { key });
    }
    if session.expires.is_some_and(|at| Instant::now() >= at)
        && !matches!(key, ApiKey::SaslHandshake | ApiKey::SaslAuthenticate)
    {
        return Err(RequestError::SessionExpired { key });
    }
    let request_bytes = frame.len();
    let mut body = frame;
    let header = RequestHeader::decode(&mut body, key.request_header_version(version))
        .map_err(|e| malformed(key, version, Part::Header, e))?;
    let client_id = header.client_id.as_deref().unwrap_or_default();
    session.note_client(client_id);
    let ctx = RequestContext {
        version,
        client_id: client_id.to_string(),
        peer: session.peer,
        principal: session.principal.clone(),
        listener: session.listener.clone(),
        sasl: session.sasl.clone(),
        authorizer: broker.access().authorizer.clone(),
    };
    // A Produce or Fetch waits until its quota entity is out of debt (all its connections
    // share the quota); a Produce's bytes are taken out then.
    let quota_throttle = if broker.admin().quotas.any() {
        throttle::wait_for_quota(
            broker,
            key,
            session.principal.name(),
            client_id,
            request_bytes,
        )
        .await
    } else {
        Duration::ZERO
    };
    let call = Call {
        broker,
        body,
        ctx,
        session,
        correlation_id: header.correlation_id,
        quota_throttle,
    };
    let handled = super::dispatch(raw_key, call)
        .await
        .unwrap_or(Err(RequestError::UnknownApi(raw_key)));
    if matches!(key, ApiKey::SaslHandshake | ApiKey::SaslAuthenticate) {
        session.after_sasl(key, version, broker.access().security.sasl.reauthentication);
    }
    handled
}

/// One bare SASL message after a SaslHandshake v0 (Kafka's original framing, before
/// SaslAuthenticate): answered with the bare next message; a refusal closes the connection
/// with no answer, after `connection.failed.authentication.delay.ms`, as Kafka does.
async fn raw_token(
    broker: &Broker,
    token: Bytes,
    session: &mut Session,
) -> Result<Response, RequestError> {
    let step = session
        .sasl
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .authenticate(&token, &broker.access().security.verifier());
    let message = match step {
        Step::Continue(message) => message,
        Step::Done(principal, message) => {
            tracing::info!(%principal, "authenticated");
            session.after_sasl(
                ApiKey::SaslAuthenticate,
                0,
                broker.access().security.sasl.reauthentication,
            );
            message
        }
        Step::Failed(_, reason) => {
            broker
                .metrics()
                .authentication_failed(crate::metrics::AuthFailure::Sasl);
            tokio::time::sleep(broker.access().security.sasl.failed_authentication_delay).await;
            return Err(RequestError::Authentication(reason));
        }
    };
    let mut frame = BytesMut::with_capacity(4 + message.len());
    frame.put_u32(u32::try_from(message.len()).unwrap_or(u32::MAX));
    frame.extend_from_slice(&message);
    Ok(Response::from(frame))
}

/// A Produce is counted before it is decoded: one of empty partitions decodes to ten times
/// its size.
fn count_produce(broker: &Broker, frame: &[u8], version: i16) -> Result<(), RequestError> {
    let cap = usize::try_from(broker.config().limits.max_broker_partitions).unwrap_or(usize::MAX);
    let Some(counts) = bounds::scan_produce(frame, version, cap) else {
        // Malformed: the decoder says why.
        return Ok(());
    };
    let named = counts.topics.max(counts.partitions);
    if named <= cap {
        return Ok(());
    }
    Err(RequestError::TooMany {
        key: ApiKey::Produce,
        version,
        what: if counts.partitions > cap {
            "partitions"
        } else {
            "topics"
        },
        count: named,
        max: cap,
        setting: "--max-broker-partitions",
    })
}

fn malformed(key: ApiKey, version: i16, part: Part, e: anyhow::Error) -> RequestError {
    RequestError::Malformed {
        key,
        version,
        part,
        source: e.into(),
    }
}

/// A request whose header is read, on its way to its handler.
pub(super) struct Call<'a> {
    broker: &'a Arc<Broker>,
    /// The request body (the frame past its header).
    body: Bytes,
    ctx: RequestContext,
    session: &'a mut Session,
    correlation_id: i32,
    /// What a Produce's bytes earned against its byte-rate quota before it was handled.
    quota_throttle: Duration,
}

impl Route for Call<'_> {
    type Output = Result<Option<Response>, RequestError>;

    /// Decodes the body as `H`, checks it against the bounds, runs its handler and encodes the
    /// response.
    async fn route<H: Handler>(mut self) -> Self::Output
    where
        H::Response: Send,
    {
        let broker = self.broker;
        let version = self.ctx.version;
        let key = ApiKey::try_from(H::KEY).map_err(|()| RequestError::UnknownApi(H::KEY))?;
        let request = H::decode(&mut self.body, version)
            .map_err(|e| malformed(key, version, Part::Body, e))?;
        bounds::check(&request.counts(), broker.config()).map_err(|over| {
            RequestError::TooMany {
                key,
                version,
                what: over.what,
                count: over.count,
                max: over.max,
                setting: over.setting,
            }
        })?;
        let answered = request.answered();
        let span = tracing::info_span!(
            "request",
            api = ?key,
            version,
            correlation_id = self.correlation_id
        );
        let handled =
            H::handle(<H::Needs as Pick>::pick(broker), request, &self.ctx).instrument(span);
        // request_percentage counts the time the handler runs, not the time it waits.
        let (mut response, busy) = if broker.admin().quotas.any_request_quota() {
            let (response, busy) = throttle::timed(handled).await;
            (response, Some(busy))
        } else {
            (handled.await, None)
        };
        let mut throttle = self.quota_throttle;
        if answered {
            broker
                .metrics()
                .response(H::KEY, version, |f| H::each_error(&response, f));
            // A handler's own throttle (a backlog-bounded topic's).
            let own =
                H::throttle_time_ms(&mut response).map_or(0, |ms| u64::try_from(*ms).unwrap_or(0));
            throttle = throttle.max(Duration::from_millis(own));
        }
        if broker.admin().quotas.any() {
            let response_bytes = (answered && key == ApiKey::Fetch)
                .then(|| response.compute_size(version).unwrap_or(0));
            throttle = throttle.max(throttle::after_handling(
                broker,
                key,
                self.ctx.principal.name(),
                &self.ctx.client_id,
                response_bytes,
                busy,
            ));
        }
        if !throttle.is_zero() || (!answered && broker.admin().quotas.any()) {
            let ms = u64::try_from(throttle.as_millis()).unwrap_or(u64::MAX);
            broker.metrics().record_throttle(&self.ctx.client_id, ms);
        }
        self.session.throttle = (!throttle.is_zero()).then_some(throttle);
        if !answered {
            // Produce with acks=0: no response, but the connection is muted all the same.
            return Ok(None);
        }
        if let Some(ms) = H::throttle_time_ms(&mut response) {
            *ms = i32::try_from(throttle.as_millis()).unwrap_or(i32::MAX);
        }
        let shared = H::shared(&response);
        let scratch = &mut self.session.scratch;
        Response::frame(
            key,
            version,
            self.correlation_id,
            &response,
            scratch,
            shared,
        )
        .map(Some)
        .map_err(|source| RequestError::Encode {
            key,
            version,
            source,
        })
    }
}
