//! Errors shared by the clients: a transport failure ([`NetError`], in `connection`) or a Kafka
//! error code a broker answered with ([`CallError::Broker`]).

use kafka_protocol::messages::ApiKey;

pub use crate::connection::NetError;
/// A Kafka error code (`NOT_LEADER_OR_FOLLOWER`, …), as the broker sent it.
pub use kafka_protocol::error::ResponseError as ErrorCode;

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
