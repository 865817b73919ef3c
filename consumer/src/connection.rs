//! One connection to one broker, pipelined: any number of tasks send requests on it at once,
//! each request goes out whole at the highest version both sides serve, and responses (which
//! Kafka sends in request order) are matched back by correlation id.
//!
//! The caller writes its request itself when nothing is queued before it (most requests go
//! out without waking another thread); what the socket does not take at once is queued for a
//! background task, which also reads the responses. A request that is not answered within
//! `request.timeout.ms` closes the connection, as the Java client does: every other request
//! waiting on it fails with [`NetError::Disconnected`] and the next call reconnects.
//!
//! `security.protocol` SSL and SASL_SSL put TLS (rustls) over the socket: then only the
//! background task writes (a TLS stream has no non-blocking write for callers to use); plain
//! TCP keeps the callers' direct writes. SASL_PLAINTEXT and SASL_SSL authenticate after
//! ApiVersions (`auth.rs`), before the connection is handed out.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Notify};

use crate::config::NetConfig;
use crate::error::ErrorCode;

/// The largest response accepted (a fetch is bounded by `fetch.max.bytes`, 50 MiB by default).
const MAX_RESPONSE: usize = 256 << 20;

/// A transport failure: the request may or may not have reached the broker.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// The TCP connection was refused or failed (DNS, unreachable host, …).
    #[error("connecting to {addr}: {source}")]
    Connect {
        /// The broker's `host:port`.
        addr: String,
        /// The socket error.
        source: Arc<std::io::Error>,
    },
    /// No TCP connection within `socket.connection.setup.timeout.ms`.
    #[error("connecting to {addr}: no connection within {after:?}")]
    ConnectTimeout {
        /// The broker's `host:port`.
        addr: String,
        /// The timeout that ran out.
        after: Duration,
    },
    /// The connection is closed, or closed before the response came (its socket failed, or
    /// another request on it timed out).
    #[error("connection to {addr} lost")]
    Disconnected {
        /// The broker's `host:port`.
        addr: String,
    },
    /// No response within `request.timeout.ms` (plus the wait of a long-polling request); the
    /// connection is closed.
    #[error("{api:?} to {addr}: no response within {after:?}")]
    Timeout {
        /// The broker's `host:port`.
        addr: String,
        /// The request that went unanswered.
        api: ApiKey,
        /// The timeout that ran out.
        after: Duration,
    },
    /// The broker's ApiVersions range for this API does not meet the versions this client
    /// speaks (or lacks the API). Not retriable.
    #[error("{addr} does not serve {api:?} in a version this client speaks")]
    Unsupported {
        /// The broker's `host:port`, or `broker <id>`.
        addr: String,
        /// The API the broker does not serve.
        api: ApiKey,
    },
    /// The exchange went wrong: the request did not encode, or the response did not decode,
    /// had bytes left over, answered another correlation id, lacked a part it must have, or
    /// (ApiVersions, on connecting) carried an error code. Not retriable.
    #[error("malformed {api:?} exchange with {addr}: {reason}")]
    Malformed {
        /// The broker's `host:port`, or `broker <id>`.
        addr: String,
        /// The request (ApiVersions when the correlation ids did not match).
        api: ApiKey,
        /// What was wrong.
        reason: String,
    },
    /// No broker accepted a connection, or a broker id is not in the metadata.
    #[error("no broker reachable (bootstrap.servers: {bootstrap})")]
    NoBroker {
        /// The bootstrap servers tried, comma-separated, or `broker <id> is not in the
        /// metadata`.
        bootstrap: String,
    },
    /// TLS failed: the broker's certificate is not signed by the truststore's CAs or not for
    /// the broker's name, the broker refused this client's certificate (or its lack of one),
    /// or the broker does not speak TLS on that port. Not retriable.
    #[error("TLS with {addr}: {reason}")]
    Tls {
        /// The broker's `host:port`.
        addr: String,
        /// What rustls reported.
        reason: String,
    },
    /// SASL authentication failed: the broker refused the credentials
    /// (`SASL_AUTHENTICATION_FAILED`), the mechanism (`UNSUPPORTED_SASL_MECHANISM`, the
    /// message lists those it enables) or the exchange (`ILLEGAL_SASL_STATE`), or the client
    /// refused the broker's part of a SCRAM exchange (`code` None). Not retriable.
    #[error("SASL {mechanism} authentication with {addr} failed: {message}{}", code.map(|c| format!(" ({c})")).unwrap_or_default())]
    Authentication {
        /// The broker's `host:port`.
        addr: String,
        /// The mechanism tried (`sasl.mechanism`).
        mechanism: &'static str,
        /// The broker's error code; None when the client ended the exchange.
        code: Option<ErrorCode>,
        /// The broker's error message (or what the client found wrong).
        message: String,
    },
}

impl NetError {
    /// Worth trying again: false for a version or protocol mismatch, a malformed exchange,
    /// and TLS and authentication failures (the next try would fail the same way).
    pub fn is_retriable(&self) -> bool {
        !matches!(
            self,
            NetError::Unsupported { .. }
                | NetError::Malformed { .. }
                | NetError::Tls { .. }
                | NetError::Authentication { .. }
        )
    }

    pub(crate) fn malformed(addr: &str, api: ApiKey, reason: impl std::fmt::Display) -> NetError {
        NetError::Malformed {
            addr: addr.to_string(),
            api,
            reason: reason.to_string(),
        }
    }
}

/// A request waiting for its response.
struct Pending {
    correlation_id: i32,
    reply: oneshot::Sender<Result<Bytes, NetError>>,
}

/// Who writes frames to the socket.
enum Writer {
    /// Plain TCP: a caller writes its frame itself when nothing is queued before it.
    Direct(Arc<OwnedWriteHalf>),
    /// TLS: the background task writes every frame (it owns the stream's write half).
    Task,
}

/// The connection's write side and the requests waiting for responses, under one lock so
/// that requests are registered in the order their bytes go out.
struct Out {
    /// Taken out when the connection closes (dropping the last handle shuts the socket).
    half: Option<Writer>,
    /// Frames (the first maybe partly written) not yet taken by the socket.
    queue: VecDeque<Bytes>,
    /// Requests written or queued, oldest first.
    pending: VecDeque<Pending>,
}

impl Out {
    /// Writes queued frames until the queue is empty (true) or the socket is full (false;
    /// always, with frames queued, when the task writes).
    fn flush(&mut self) -> std::io::Result<bool> {
        let half = match self.half.as_ref() {
            None => return Err(std::io::ErrorKind::NotConnected.into()),
            Some(Writer::Task) => return Ok(self.queue.is_empty()),
            Some(Writer::Direct(half)) => half,
        };
        while let Some(front) = self.queue.front_mut() {
            match half.try_write(front) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) if n == front.len() => {
                    self.queue.pop_front();
                }
                Ok(n) => front.advance(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Fails every waiting request (their senders dropped) and drops the write side.
    fn shut(&mut self) {
        self.half = None;
        self.queue.clear();
        self.pending.clear();
    }
}

/// A live (or dead, see [`BrokerConnection::is_alive`]) connection to one broker.
#[derive(Debug)]
pub(crate) struct BrokerConnection {
    addr: String,
    client_id: StrBytes,
    request_timeout: Duration,
    /// API key → (min, max) the broker serves.
    versions: HashMap<i16, (i16, i16)>,
    correlation: AtomicI32,
    out: Arc<Mutex<Out>>,
    /// Wakes the background task: frames were queued.
    queued: Arc<Notify>,
    alive: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for BrokerConnection {
    fn drop(&mut self) {
        self.close();
    }
}

impl Out {
    fn new(half: Writer) -> Arc<Mutex<Out>> {
        Arc::new(Mutex::new(Out {
            half: Some(half),
            queue: VecDeque::new(),
            pending: VecDeque::new(),
        }))
    }
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Out({} frames queued, {} pending)",
            self.queue.len(),
            self.pending.len()
        )
    }
}

/// An open socket, before the connection's task takes it.
pub(crate) enum Transport {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// The TCP connection to `addr` and, under SSL and SASL_SSL, its TLS handshake, within
/// `socket.connection.setup.timeout.ms`.
pub(crate) async fn open(addr: &str, net: &NetConfig) -> Result<Transport, NetError> {
    let setup = async {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|source| NetError::Connect {
                addr: addr.to_string(),
                source: Arc::new(source),
            })?;
        let _ = stream.set_nodelay(true);
        let Some(tls) = net.security.tls.as_ref() else {
            return Ok(Transport::Plain(stream));
        };
        let name = server_name(addr).ok_or_else(|| NetError::Tls {
            addr: addr.to_string(),
            reason: "the host is neither a DNS name nor an IP address".to_string(),
        })?;
        let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
        match connector.connect(name, stream).await {
            Ok(stream) => Ok(Transport::Tls(Box::new(stream))),
            Err(e) => Err(match tls_error(addr, &e) {
                Some(e) => e,
                // A broker that hangs up on a ClientHello is no TLS listener (Kafka's plaintext
                // listeners read it as an oversized request and close).
                None if matches!(
                    e.kind(),
                    std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
                ) =>
                {
                    NetError::Tls {
                        addr: addr.to_string(),
                        reason: format!(
                            "the broker closed the connection during the handshake ({e}): is \
                             this a TLS listener? security.protocol must match the broker's \
                             listener"
                        ),
                    }
                }
                None => NetError::Connect {
                    addr: addr.to_string(),
                    source: Arc::new(e),
                },
            }),
        }
    };
    let timeout = net.connection_setup_timeout;
    match tokio::time::timeout(timeout, setup).await {
        Err(_) => Err(NetError::ConnectTimeout {
            addr: addr.to_string(),
            after: timeout,
        }),
        Ok(result) => result,
    }
}

/// The name a broker's certificate is checked against: the host of `host:port` (an IP
/// address, or a DNS name; `[v6]:port` too).
fn server_name(addr: &str) -> Option<rustls::pki_types::ServerName<'static>> {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    rustls::pki_types::ServerName::try_from(host.to_string()).ok()
}

/// A rustls error (a certificate refused, an alert from the broker) inside an I/O error.
pub(crate) fn tls_error(addr: &str, e: &std::io::Error) -> Option<NetError> {
    let inner = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    let hint = match inner {
        rustls::Error::InvalidMessage(_) => {
            " (is this a TLS listener? security.protocol must match the broker's listener)"
        }
        _ => "",
    };
    Some(NetError::Tls {
        addr: addr.to_string(),
        reason: format!("{inner}{hint}"),
    })
}

impl BrokerConnection {
    /// Connects to `addr` (`host:port`) as `net` says (TLS, SASL), and learns which versions
    /// the broker serves.
    pub(crate) async fn connect(addr: &str, net: &NetConfig) -> Result<BrokerConnection, NetError> {
        let transport = open(addr, net).await?;
        let queued = Arc::new(Notify::new());
        let alive = Arc::new(AtomicBool::new(true));
        let (out, task) = match transport {
            Transport::Plain(stream) => {
                let (read, write) = stream.into_split();
                let out = Out::new(Writer::Direct(Arc::new(write)));
                let task = tokio::spawn(run(
                    addr.to_string(),
                    read,
                    None::<tokio::io::Sink>,
                    out.clone(),
                    queued.clone(),
                    alive.clone(),
                ));
                (out, task)
            }
            Transport::Tls(stream) => {
                let (read, write) = tokio::io::split(*stream);
                let out = Out::new(Writer::Task);
                let task = tokio::spawn(run(
                    addr.to_string(),
                    read,
                    Some(write),
                    out.clone(),
                    queued.clone(),
                    alive.clone(),
                ));
                (out, task)
            }
        };
        let mut connection = BrokerConnection {
            addr: addr.to_string(),
            client_id: StrBytes::from_string(net.client_id.clone()),
            request_timeout: net.request_timeout,
            versions: HashMap::new(),
            correlation: AtomicI32::new(0),
            out,
            queued,
            alive,
            task,
        };
        // ApiVersions v0 is understood by every broker, old and new.
        let response: ApiVersionsResponse = connection
            .call_at(&ApiVersionsRequest::default(), 0)
            .await?;
        if response.error_code != 0 {
            return Err(NetError::malformed(
                addr,
                ApiKey::ApiVersions,
                format!("error code {}", response.error_code),
            ));
        }
        connection.versions = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        if let Some(sasl) = net.security.sasl.as_ref() {
            crate::auth::authenticate(&connection, sasl).await?;
        }
        Ok(connection)
    }

    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// False once the socket failed or a request timed out; the next call reconnects.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed) && !self.task.is_finished()
    }

    /// Closes the connection: every request waiting on it fails.
    pub(crate) fn close(&self) {
        self.alive.store(false, Ordering::Relaxed);
        self.task.abort();
        lock(&self.out).shut();
    }

    /// The version `R` is sent at: the highest both sides serve, at most `max_version`.
    pub(crate) fn version<R: Request>(&self, max_version: i16) -> Result<i16, NetError> {
        let api = api_key::<R>();
        let unsupported = || NetError::Unsupported {
            addr: self.addr.clone(),
            api,
        };
        let (min, max) = self
            .versions
            .get(&R::KEY)
            .copied()
            .ok_or_else(unsupported)?;
        let version = max.min(max_version).min(R::VERSIONS.max);
        if version < min || version < R::VERSIONS.min {
            return Err(unsupported());
        }
        Ok(version)
    }

    /// Sends `request` at the highest version both sides serve, up to `max_version`, and waits
    /// (at most `request.timeout.ms`) for the response.
    pub(crate) async fn call<R: Request>(
        &self,
        request: &R,
        max_version: i16,
    ) -> Result<R::Response, NetError> {
        let version = self.version::<R>(max_version)?;
        self.call_at(request, version).await
    }

    /// [`BrokerConnection::call`] at exactly `version` (from [`BrokerConnection::version`]).
    pub(crate) async fn call_at<R: Request>(
        &self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, NetError> {
        self.call_with_timeout(request, version, self.request_timeout)
            .await
    }

    /// As [`BrokerConnection::call_at`], waiting `timeout` (long-polling requests such as a
    /// fetch or a join add their own wait to the request timeout).
    pub(crate) async fn call_with_timeout<R: Request>(
        &self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response, NetError> {
        self.start::<R>(request, version)?.wait(self, timeout).await
    }

    /// Queues `request` on the connection now (requests go out in the order `start` is
    /// called) and returns what waits for its response.
    pub(crate) fn start<R: Request>(
        &self,
        request: &R,
        version: i16,
    ) -> Result<PendingResponse<R::Response>, NetError> {
        let (frame, correlation_id) = self.frame(request, version)?;
        let (reply, response) = oneshot::channel();
        self.submit(
            frame,
            Some(Pending {
                correlation_id,
                reply,
            }),
        )?;
        Ok(PendingResponse {
            response,
            version,
            api: api_key::<R>(),
            _type: std::marker::PhantomData,
        })
    }

    /// Queues a request the broker does not answer (Produce with acks=0).
    pub(crate) fn send_only<R: Request>(&self, request: &R, version: i16) -> Result<(), NetError> {
        let (frame, _) = self.frame(request, version)?;
        self.submit(frame, None)
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    fn disconnected(&self) -> NetError {
        NetError::Disconnected {
            addr: self.addr.clone(),
        }
    }

    /// Registers `pending` and writes `frame` now if nothing is queued before it and the
    /// socket takes it; the rest is left to the background task.
    fn submit(&self, frame: Bytes, pending: Option<Pending>) -> Result<(), NetError> {
        if !self.is_alive() {
            return Err(self.disconnected());
        }
        let mut out = lock(&self.out);
        if out.half.is_none() {
            return Err(self.disconnected());
        }
        out.pending.extend(pending);
        out.queue.push_back(frame);
        if out.queue.len() == 1 {
            match out.flush() {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(_) => {
                    drop(out);
                    self.close();
                    return Err(self.disconnected());
                }
            }
        }
        drop(out);
        self.queued.notify_one();
        Ok(())
    }

    /// The request as a length-prefixed frame, and its correlation id.
    fn frame<R: Request>(&self, request: &R, version: i16) -> Result<(Bytes, i32), NetError> {
        let api = api_key::<R>();
        let correlation_id = self.correlation.fetch_add(1, Ordering::Relaxed);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        // Sized up front: a Produce request of large batches would otherwise grow (and copy)
        // its buffer many times over.
        let size = header
            .compute_size(R::header_version(version))
            .and_then(|h| request.compute_size(version).map(|r| h + r))
            .unwrap_or(0);
        let mut buf = BytesMut::with_capacity(4 + size);
        buf.put_i32(0);
        header
            .encode(&mut buf, R::header_version(version))
            .and_then(|()| request.encode(&mut buf, version))
            .map_err(|e| NetError::malformed(&self.addr, api, e))?;
        let len = i32::try_from(buf.len() - 4)
            .map_err(|_| NetError::malformed(&self.addr, api, "request over 2 GiB"))?;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        Ok((buf.freeze(), correlation_id))
    }
}

/// A request on its way; `wait` for its response.
#[derive(Debug)]
pub(crate) struct PendingResponse<T> {
    response: oneshot::Receiver<Result<Bytes, NetError>>,
    version: i16,
    api: ApiKey,
    _type: std::marker::PhantomData<fn() -> T>,
}

impl<T: Decodable + HeaderVersion> PendingResponse<T> {
    /// The response, decoded; after `timeout` without one the connection is closed.
    pub(crate) async fn wait(
        self,
        connection: &BrokerConnection,
        timeout: Duration,
    ) -> Result<T, NetError> {
        let addr = &connection.addr;
        let api = self.api;
        let mut body = match tokio::time::timeout(timeout, self.response).await {
            Err(_) => {
                connection.close();
                return Err(NetError::Timeout {
                    addr: addr.clone(),
                    api,
                    after: timeout,
                });
            }
            Ok(Err(_)) => return Err(connection.disconnected()),
            Ok(Ok(result)) => result?,
        };
        ResponseHeader::decode(&mut body, T::header_version(self.version))
            .map_err(|e| NetError::malformed(addr, api, e))?;
        let response =
            T::decode(&mut body, self.version).map_err(|e| NetError::malformed(addr, api, e))?;
        if body.has_remaining() {
            return Err(NetError::malformed(
                addr,
                api,
                format!("{} bytes left over", body.remaining()),
            ));
        }
        Ok(response)
    }
}

fn api_key<R: Request>() -> ApiKey {
    ApiKey::try_from(R::KEY).unwrap_or(ApiKey::ApiVersions)
}

/// Writes what callers could not (plain TCP: they write themselves while the socket takes
/// it), whenever woken.
async fn write_direct(out: &Mutex<Out>, queued: &Notify) {
    loop {
        queued.notified().await;
        loop {
            let blocked = {
                let mut o = lock(out);
                match o.flush() {
                    Ok(true) => break,
                    Ok(false) => match o.half.as_ref() {
                        Some(Writer::Direct(half)) => half.clone(),
                        _ => return,
                    },
                    Err(_) => return,
                }
            };
            if blocked.writable().await.is_err() {
                return;
            }
        }
    }
}

/// Writes every queued frame, in order, to `write` (the TLS stream's write half), flushing
/// whenever the queue runs empty.
async fn write_queued<W: AsyncWrite + Unpin>(mut write: W, out: &Mutex<Out>, queued: &Notify) {
    loop {
        queued.notified().await;
        loop {
            let frame = {
                let mut o = lock(out);
                if o.half.is_none() {
                    return;
                }
                o.queue.pop_front()
            };
            let Some(frame) = frame else {
                break;
            };
            if write.write_all(&frame).await.is_err() {
                return;
            }
        }
        if write.flush().await.is_err() {
            return;
        }
    }
}

/// The socket task: writes the frames callers queued (`write` None: plain TCP, whose callers
/// write too), reads responses in order, and fails every pending request when either side
/// stops (with the TLS error when TLS ended it, else [`NetError::Disconnected`]).
async fn run<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    addr: String,
    mut read: R,
    write: Option<W>,
    out: Arc<Mutex<Out>>,
    queued: Arc<Notify>,
    alive: Arc<AtomicBool>,
) {
    let writer = async {
        match write {
            None => write_direct(&out, &queued).await,
            Some(write) => write_queued(write, &out, &queued).await,
        }
        None
    };
    let reader = async {
        let mut buffers = ReceiveBuffers::default();
        loop {
            let len = match read.read_i32().await {
                Ok(len) => len,
                Err(e) => return tls_error(&addr, &e),
            };
            // (A `None` here ends the connection, with no error of TLS's to report.)
            let len = usize::try_from(len)
                .ok()
                .filter(|n| *n >= 4 && *n <= MAX_RESPONSE)?;
            // Read into spare capacity: no zeroing of (up to fetch-sized) buffers.
            let mut body = buffers.take(len);
            while body.len() < len {
                let left = len - body.len();
                let mut limited = (&mut body).limit(left);
                match read.read_buf(&mut limited).await {
                    Ok(0) => return None,
                    Err(e) => return tls_error(&addr, &e),
                    Ok(_) => {}
                }
            }
            let body = body.freeze();
            buffers.keep(&body);
            let correlation_id = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
            let p = lock(&out).pending.pop_front()?;
            if p.correlation_id != correlation_id {
                let _ = p.reply.send(Err(NetError::Malformed {
                    addr: addr.clone(),
                    api: ApiKey::ApiVersions,
                    reason: format!(
                        "response to correlation id {correlation_id}, expected {}",
                        p.correlation_id
                    ),
                }));
                return None;
            }
            // The caller may have given up (its future dropped): nothing to do.
            let _ = p.reply.send(Ok(body));
        }
    };
    let failure = tokio::select! {
        f = writer => f,
        f = reader => f,
    };
    alive.store(false, Ordering::Relaxed);
    let mut out = lock(&out);
    // A TLS failure (the broker refused the client's certificate, which TLS 1.3 reports after
    // the handshake) goes to the requests waiting; dropping the senders fails the rest with
    // `Disconnected`.
    if let Some(failure) = failure {
        for p in out.pending.drain(..) {
            let _ = p.reply.send(Err(failure.clone()));
        }
    }
    out.shut();
}

/// Large responses are read into buffers of earlier ones once nothing refers to them any more
/// (the records handed out are slices of their response). A fresh buffer of megabytes costs a
/// page fault per 4 KiB as it is filled: reading a 6 MB fetch response took 5-6 ms that way
/// against 1-1.5 ms into memory already touched (this 2-vCPU VM, `lograil-bench consume`).
#[derive(Default)]
struct ReceiveBuffers {
    /// Responses of at least `REUSE_MIN` bytes, newest last; at most `REUSE_KEEP`.
    recent: VecDeque<Bytes>,
}

const REUSE_MIN: usize = 256 << 10;
const REUSE_KEEP: usize = 4;
/// New large buffers are rounded up to this, so that a slightly larger response fits later.
const REUSE_ROUND: usize = 1 << 20;

impl ReceiveBuffers {
    /// An empty buffer with room for `len` bytes: a free earlier one if there is one large
    /// enough.
    fn take(&mut self, len: usize) -> BytesMut {
        if len < REUSE_MIN {
            return BytesMut::with_capacity(len);
        }
        if let Some(i) = self.recent.iter().position(Bytes::is_unique) {
            if let Some(Ok(mut buf)) = self.recent.remove(i).map(Bytes::try_into_mut) {
                buf.clear();
                if buf.capacity() >= len {
                    return buf;
                }
            }
        }
        BytesMut::with_capacity(len.div_ceil(REUSE_ROUND) * REUSE_ROUND)
    }

    /// Remembers a large response's buffer for reuse once its records are dropped.
    fn keep(&mut self, body: &Bytes) {
        if body.len() >= REUSE_MIN {
            self.recent.push_back(body.clone());
            if self.recent.len() > REUSE_KEEP {
                self.recent.pop_front();
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One connection to one broker for raw Kafka requests (tests, tools), with versions
/// negotiated by ApiVersions. The clients use the cluster-aware routing instead.
#[derive(Debug)]
pub struct Connection {
    inner: BrokerConnection,
}

impl Connection {
    /// Connects to `addr` (`host:port`) over plain TCP with the default timeouts (10 s to
    /// connect, 30 s per request).
    pub async fn connect(addr: &str) -> Result<Connection, NetError> {
        Connection::connect_with(addr, &NetConfig::new(addr)).await
    }

    /// Connects to `addr` as `net` says (timeouts, client id, TLS, SASL); `net`'s bootstrap
    /// servers are not used.
    pub async fn connect_with(addr: &str, net: &NetConfig) -> Result<Connection, NetError> {
        Ok(Connection {
            inner: BrokerConnection::connect(addr, net).await?,
        })
    }

    /// Connects to the first of `net`'s bootstrap servers that accepts (a TLS or
    /// authentication failure is returned at once: the others would fail the same way).
    pub async fn connect_any(net: &NetConfig) -> Result<Connection, NetError> {
        let mut last = None;
        for addr in &net.bootstrap_servers {
            match Connection::connect_with(addr, net).await {
                Ok(c) => return Ok(c),
                Err(e) if !e.is_retriable() => return Err(e),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| NetError::NoBroker {
            bootstrap: net.bootstrap_servers.join(","),
        }))
    }

    /// Sends `request` at the highest version both sides serve, up to `max_version`.
    pub async fn call<R: Request>(
        &mut self,
        request: &R,
        max_version: i16,
    ) -> Result<R::Response, NetError> {
        self.inner.call(request, max_version).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_buffer_is_reused_once_its_slices_are_dropped() {
        let mut buffers = ReceiveBuffers::default();
        let mut first = buffers.take((5 << 19) + 1);
        assert_eq!(first.capacity(), 3 << 20, "rounded up to whole MiB");
        first.extend_from_slice(&vec![7u8; 5 << 19]);
        let first = first.freeze();
        let address = first.as_ptr();
        buffers.keep(&first);
        let record = first.slice(100..200);
        drop(first);
        let second = buffers.take(3 << 20);
        assert_ne!(second.as_ptr(), address, "a record still refers to it");
        drop(record);
        let third = buffers.take(3 << 20);
        assert_eq!(third.as_ptr(), address, "free again: reused");
        assert!(third.is_empty());
        let small = buffers.take(1000);
        assert!(
            small.capacity() < REUSE_MIN,
            "small responses are not pooled"
        );
    }
}
