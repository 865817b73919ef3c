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
//! ApiVersions (`auth`), before the connection is handed out.
//!
//! - `transport`: the TCP connection and its TLS handshake.
//! - `io`: the socket task: queued frames written, responses read and matched, receive
//!   buffers reused.
//! - `auth`: SASL authentication, after ApiVersions.

mod auth;
mod io;
pub(crate) mod transport;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::sync::{oneshot, Notify};

use crate::config::NetConfig;
use crate::error::NetError;
use crate::util::lock;
use io::{Out, Pending, Writer};
use transport::{open, Transport};

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
                let task = tokio::spawn(io::run(
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
                let task = tokio::spawn(io::run(
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
            auth::authenticate(&connection, sasl).await?;
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
