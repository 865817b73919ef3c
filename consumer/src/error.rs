//! Errors shared by the clients: a transport failure ([`NetError`]) or a Kafka error code a
//! broker answered with ([`CallError::Broker`]). The network layer and every client above it
//! name these; this module names no other of the crate.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;

/// A Kafka error code (`NOT_LEADER_OR_FOLLOWER`, …), as the broker sent it.
pub use kafka_protocol::error::ResponseError as ErrorCode;

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

/// A request to the cluster that failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// No answer: the connection failed, timed out or the exchange was malformed.
    #[error(transparent)]
    Net(#[from] NetError),
    /// The broker answered with a non-zero error code.
    #[error("{api:?} for {resource}: {code}{}", message.as_deref().map(|m| format!(" ({m})")).unwrap_or_default())]
    Broker {
        /// The request that got the error.
        api: ApiKey,
        /// What the error is about: a topic, a partition, a group.
        resource: String,
        /// The error code from the response.
        code: ErrorCode,
        /// The response's error message; None when it has none (most APIs send a code only,
        /// and brokers often leave the message null).
        message: Option<String>,
    },
}

impl CallError {
    pub(crate) fn broker(api: ApiKey, resource: impl Into<String>, code: ErrorCode) -> CallError {
        CallError::Broker {
            api,
            resource: resource.into(),
            code,
            message: None,
        }
    }

    /// Worth trying again (after a metadata refresh or a backoff): a lost connection, a timeout,
    /// or an error code Kafka marks retriable (not a TLS or authentication failure).
    pub fn is_retriable(&self) -> bool {
        match self {
            CallError::Net(e) => e.is_retriable(),
            CallError::Broker { code, .. } => code.is_retriable(),
        }
    }

    /// The Kafka error code, if the broker answered with one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            CallError::Broker { code, .. } => Some(*code),
            CallError::Net(_) => None,
        }
    }
}

/// `Ok` for error code 0, else the error.
pub(crate) fn check(
    code: i16,
    api: ApiKey,
    resource: impl FnOnce() -> String,
) -> Result<(), CallError> {
    match ErrorCode::try_from_code(code) {
        None => Ok(()),
        Some(code) => Err(CallError::broker(api, resource(), code)),
    }
}
