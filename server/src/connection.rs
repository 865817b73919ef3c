//! One client connection: frames in, one at a time, responses out in the same order.
//!
//! Requests are handled one after the other, as Kafka does (it mutes a connection while a
//! request is in flight), which answers pipelined requests in order by construction. A frame
//! that is malformed, truncated or too large closes this connection with one logged line; the
//! broker and its other connections carry on.
//!
//! Time limits: a connection that sends no request for `connections.max.idle.ms` is closed, and
//! so is one whose request does not arrive whole within `--request-read-timeout-ms` of its first
//! byte (a client that declares a large request and stalls must not hold the memory or the
//! request budget for long).
//!
//! The connection tells the gate what it is doing ([`Phase`]: half-sent, never served, idle,
//! busy), so that an address at `max.connections.per.ip` can close one of its connections that
//! is not busy for a new one; an evicted connection ends at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tracing::Instrument;

use crate::broker::Broker;
use crate::frame::{Frame, FrameLimits, FrameReader};
use crate::handlers::request::{self, RequestError, Session, SCRATCH_IDLE_RELEASE};
use crate::limits::{Activity, Phase, Slot};
use crate::metrics::AuthFailure;
use crate::response::Response;
use crate::security::{tls, Listener, Principal};

/// How long a response (or what is left in the write buffer) may take to go out once shutdown
/// has begun: a client that stops reading cannot hold the broker's exit up for longer.
const SHUTDOWN_WRITE: std::time::Duration = std::time::Duration::from_secs(1);

/// Bytes read from a TLS connection's socket at a time (see `serve_secured`).
const TLS_READ_BUFFER: usize = 256 * 1024;

/// Serves one connection until the client closes it, sends something unreadable, times out or
/// the broker shuts down; in a span naming the peer and (once known) the client id. `slot` is
/// the connection's place under the connection caps, freed when it ends.
pub async fn serve(
    broker: Arc<Broker>,
    socket: TcpStream,
    peer: SocketAddr,
    listener: Arc<Listener>,
    slot: Slot,
) {
    let span = tracing::info_span!("connection", %peer, listener = %listener.name, client_id = tracing::field::Empty);
    serve_secured(broker.clone(), socket, peer, listener, slot.activity())
        .instrument(span)
        .await;
    release_share_sessions(&broker, peer).await;
    drop(slot);
}

/// Serves the connection in the clear or, on an SSL or SASL_SSL listener, once its TLS
/// handshake is done within the authentication timeout.
async fn serve_secured(
    broker: Arc<Broker>,
    socket: TcpStream,
    peer: SocketAddr,
    listener: Arc<Listener>,
    activity: &Activity,
) {
    let _ = socket.set_nodelay(true);
    let started = tokio::time::Instant::now();
    let Some(acceptor) = listener.tls.clone() else {
        let (reader, writer) = socket.into_split();
        let session = Session::new(peer, listener, Principal::anonymous());
        return serve_in_span(broker, reader, writer, session, started, activity).await;
    };
    let mut shutdown = broker.shutdown();
    let timeout = broker.access().security.sasl.authentication_timeout;
    // Read through a buffer: rustls reads one TLS record (16 KiB) at a time, and a large
    // produce would otherwise cost a read syscall per record.
    let socket = tokio::io::BufReader::with_capacity(TLS_READ_BUFFER, socket);
    let handshake = tokio::time::timeout(timeout, acceptor.accept(socket));
    let stream = tokio::select! {
        biased;
        _ = shutdown.changed() => return,
        () = activity.evicted() => return,
        stream = handshake => stream,
    };
    let stream = match stream {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            broker.metrics().authentication_failed(AuthFailure::Tls);
            tracing::info!(error = %e, "closing connection: TLS handshake failed");
            return;
        }
        Err(_) => {
            broker.metrics().authentication_failed(AuthFailure::Tls);
            tracing::info!(
                timeout_ms = timeout.as_millis(),
                "closing connection: no TLS handshake within --authentication-timeout-ms"
            );
            return;
        }
    };
    // mTLS: the certificate's subject, unless the connection authenticates with SASL.
    let principal = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .and_then(|leaf| tls::subject(leaf))
        .map_or_else(Principal::anonymous, |subject| Principal::user(&subject));
    let (reader, writer) = tokio::io::split(stream);
    let session = Session::new(peer, listener, principal);
    serve_in_span(broker, reader, writer, session, started, activity).await
}

/// Share-group records fetched over this connection go back to the queue now that it is gone
/// (on shutdown they stay as stored: a restart makes them available again).
async fn release_share_sessions(broker: &Arc<Broker>, peer: SocketAddr) {
    if broker.is_shutting_down() || !broker.shares().members.has_sessions() {
        return;
    }
    let owner = broker.clone();
    let released = crate::blocking::spawn(move || {
        owner.shares().connection_closed(&owner.storage().log, peer)
    })
    .await;
    if let Ok(pending) = released {
        pending.durable(&broker.storage().syncer).await;
    }
}

/// Serves requests one at a time: waits for the next request, reads its frame, handles it,
/// writes the response, sits out a quota throttle; then flushes what is left.
async fn serve_in_span<R, W>(
    broker: Arc<Broker>,
    reader: R,
    writer: W,
    mut session: Session,
    started: tokio::time::Instant,
    activity: &Activity,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut reader = FrameReader::new(reader);
    let mut writer = BufWriter::with_capacity(64 * 1024, writer);
    let mut shutdown = broker.shutdown();
    let limits = ConnectionLimits::new(&broker);
    let auth_deadline = started + broker.access().security.sasl.authentication_timeout;
    loop {
        if broker.is_shutting_down() {
            break;
        }
        let deadline = session.unauthenticated().then_some(auth_deadline);
        if !reader.has_buffered()
            && !next_request_begins(
                &mut reader,
                &mut session,
                &broker,
                &mut shutdown,
                activity,
                deadline,
            )
            .await
        {
            break;
        }
        activity.set(Phase::Partial, Instant::now());
        let frame_limits = limits.for_session(&session);
        let Some(frame) = read_request(
            &mut reader,
            &broker,
            frame_limits,
            deadline,
            &mut shutdown,
            activity,
        )
        .await
        else {
            break;
        };
        activity.set(Phase::Busy, Instant::now());
        let (frame, budget) = frame.into_parts();
        // Boxed: the request's future (the largest handler's state, ~16 KiB) lives only while
        // the request is handled, not for the whole life of an idle connection.
        let handled = Box::pin(request::handle(&broker, frame, &mut session)).await;
        // The request is done with: its bytes no longer count against the budget.
        drop(budget);
        match respond(handled, &mut session, &mut writer, &mut shutdown).await {
            Next::Serve => {}
            Next::Close => break,
            Next::Gone => return,
        }
        if !sit_out_throttle(&mut session, &mut shutdown).await {
            break;
        }
        activity.set(Phase::Idle, Instant::now());
    }
    // Whatever is buffered goes out, unless the client stopped reading.
    let _ = tokio::time::timeout(SHUTDOWN_WRITE, writer.flush()).await;
}

/// The largest request a connection reads, before and after it authenticated.
struct ConnectionLimits {
    authenticated: FrameLimits,
    unauthenticated: FrameLimits,
}

impl ConnectionLimits {
    fn new(broker: &Broker) -> Self {
        let authenticated = FrameLimits {
            max_request_bytes: broker.config().max_request_bytes,
            max_non_produce_request_bytes: broker.config().limits.max_non_produce_request_bytes,
            unauthenticated: None,
        };
        // Before authentication a request is small (sasl.server.max.receive.size).
        let sasl = &broker.access().security.sasl;
        let unauthenticated = FrameLimits {
            unauthenticated: Some(sasl.max_receive_size.min(broker.config().max_request_bytes)),
            ..authenticated
        };
        ConnectionLimits {
            authenticated,
            unauthenticated,
        }
    }

    fn for_session(&self, session: &Session) -> &FrameLimits {
        if session.unauthenticated() {
            &self.unauthenticated
        } else {
            &self.authenticated
        }
    }
}

/// Reads the rest of a request whose first bytes are here, within `--request-read-timeout-ms`
/// (and the authentication deadline, if any). `None` when the connection is over: the frame was
/// unreadable or late (logged), the client closed it, the broker is shutting down or the
/// connection was evicted.
async fn read_request<R: AsyncRead + Unpin>(
    reader: &mut FrameReader<R>,
    broker: &Broker,
    frame_limits: &FrameLimits,
    auth_deadline: Option<tokio::time::Instant>,
    shutdown: &mut watch::Receiver<bool>,
    activity: &Activity,
) -> Option<Frame> {
    let request_read_timeout = broker.config().limits.request_read_timeout;
    let mut read_timeout = request_read_timeout;
    if let Some(deadline) = auth_deadline {
        read_timeout =
            read_timeout.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
    }
    let read = tokio::time::timeout(
        read_timeout,
        reader.read_frame(frame_limits, broker.request_budget()),
    );
    let frame = tokio::select! {
        biased;
        frame = read => frame,
        _ = shutdown.changed() => return None,
        () = activity.evicted() => {
            tracing::debug!("closing a half-sent request's connection to make room for a new one from the same address (--max-connections-per-ip)");
            return None;
        }
    };
    match frame {
        Ok(Ok(frame)) => frame,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "closing connection");
            None
        }
        Err(_) => {
            tracing::warn!(
                timeout_ms = request_read_timeout.as_millis(),
                "closing connection: a request did not arrive whole within --request-read-timeout-ms"
            );
            None
        }
    }
}

/// What a connection does once a request is answered.
enum Next {
    /// Serves the next request.
    Serve,
    /// Closes, once what is buffered went out.
    Close,
    /// Closes at once: the client went away, or shutdown began while the response went out.
    Gone,
}

/// Sends the handler's response, if there is one, and gives its buffer back to the session.
async fn respond<W: AsyncWrite + Unpin>(
    handled: Result<Option<Response>, RequestError>,
    session: &mut Session,
    writer: &mut W,
    shutdown: &mut watch::Receiver<bool>,
) -> Next {
    match handled {
        Ok(Some(response)) => {
            let len = response.encoded_len();
            if !write_response(&response, writer, shutdown).await {
                return Next::Gone;
            }
            drop(response);
            session.recycle(len);
            if session.closing() {
                return Next::Close;
            }
            Next::Serve
        }
        Ok(None) => Next::Serve,
        Err(e) => {
            tracing::warn!(error = %e, "closing connection");
            Next::Close
        }
    }
}

/// Writes one response; `false` when the connection is over (the client went away, or shutdown
/// began while it was going out).
///
/// Each response goes out before the next request is handled: that request may wait (a
/// long-polling fetch, a JoinGroup) and must not hold this one back. A client that stops reading
/// cannot hold up shutdown either: once shutdown begins, the response gets a last short chance to
/// go out. (Most responses that meet shutdown here are the ones shutdown itself answered.)
async fn write_response<W: AsyncWrite + Unpin>(
    response: &Response,
    writer: &mut W,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    let written = response.write_to(writer);
    tokio::pin!(written);
    tokio::select! {
        biased;
        result = &mut written => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "client went away");
                return false;
            }
            true
        }
        _ = shutdown.changed() => {
            let _ = tokio::time::timeout(SHUTDOWN_WRITE, written).await;
            false
        }
    }
}

/// KIP-219: a client over its quota got its response with `throttle_time_ms`; the connection
/// reads nothing more for that long. `false` when shutdown began meanwhile.
async fn sit_out_throttle(session: &mut Session, shutdown: &mut watch::Receiver<bool>) -> bool {
    if let Some(throttle) = session.take_throttle() {
        tokio::select! {
            biased;
            _ = shutdown.changed() => return false,
            () = tokio::time::sleep(throttle) => {}
        }
    }
    true
}

/// Waits, between requests, for the first bytes of the next one. `false` when the connection
/// is over: the client closed it, it stayed idle past `connections.max.idle.ms`, or the broker
/// is shutting down. A large response buffer is given back while waiting (see
/// [`Session::recycle`]).
async fn next_request_begins<R: AsyncRead + Unpin>(
    reader: &mut FrameReader<R>,
    session: &mut Session,
    broker: &Broker,
    shutdown: &mut watch::Receiver<bool>,
    activity: &Activity,
    auth_deadline: Option<tokio::time::Instant>,
) -> bool {
    let idle = broker.config().limits.connections_max_idle;
    let idle_deadline = tokio::time::Instant::now() + idle;
    let deadline = auth_deadline.map_or(idle_deadline, |auth| auth.min(idle_deadline));
    loop {
        // Biased, the read first: a request already waiting costs no timer.
        tokio::select! {
            biased;
            filled = reader.fill() => {
                return match filled {
                    Ok(0) => false,
                    Ok(_) => true,
                    Err(e) => {
                        tracing::debug!(error = %e, "connection failed");
                        false
                    }
                };
            }
            _ = shutdown.changed() => return false,
            () = activity.evicted() => {
                tracing::debug!("closing a connection waiting for a request to make room for a new one from the same address (--max-connections-per-ip)");
                return false;
            }
            () = tokio::time::sleep(SCRATCH_IDLE_RELEASE), if session.holds_large_buffer() => {
                session.release_buffer();
            }
            () = tokio::time::sleep_until(deadline) => {
                if deadline < idle_deadline {
                    broker.metrics().authentication_failed(AuthFailure::Sasl);
                    tracing::info!("closing connection: not authenticated within --authentication-timeout-ms");
                } else {
                    tracing::info!(
                        idle_ms = idle.as_millis(),
                        "closing idle connection (--connections-max-idle-ms)"
                    );
                }
                return false;
            }
        }
    }
}
