//! The user's handler: what it is given, what it returns, how failures are classified, and a
//! panic turned into a failed attempt.

use std::any::TypeId;
use std::error::Error as StdError;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;

use consumer::ConsumerRecord;
use futures_util::FutureExt;

/// A record handed to the handler, with where it stands in the chain.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The record as read from the main topic or a retry topic, chain headers included.
    pub record: ConsumerRecord,
    /// 1 on the main topic, 2 on the first retry, …
    pub attempt: u32,
    /// The main-topic record's timestamp.
    pub original_timestamp: i64,
}

/// Retryable or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Worth another attempt: the record goes to its next retry stage, or to the dead-letter
    /// topic once the attempts or the retry deadline run out. Counts towards the outage
    /// budget.
    Retryable,
    /// Straight to the dead-letter topic.
    Fatal,
}

type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// A failed attempt. Any `std::error::Error` converts into it (so `?` works in a handler),
/// classified by the [`Classifier`]; [`HandlerError::fatal`] and [`HandlerError::retryable`]
/// decide the class themselves.
#[derive(Debug)]
pub struct HandlerError {
    /// Forced by the handler; `None`: the classifier decides.
    pub(crate) class: Option<Class>,
    /// The error's type name: `kafka_dlt-exception-fqcn`.
    pub(crate) type_name: String,
    pub(crate) message: String,
    pub(crate) source: Option<BoxError>,
}

impl<E: StdError + Send + Sync + 'static> From<E> for HandlerError {
    fn from(e: E) -> HandlerError {
        HandlerError {
            class: None,
            type_name: std::any::type_name::<E>().to_string(),
            message: e.to_string(),
            source: Some(Box::new(e)),
        }
    }
}

impl HandlerError {
    /// A failure worth retrying, whatever the classifier says.
    pub fn retryable(e: impl Into<HandlerError>) -> HandlerError {
        HandlerError {
            class: Some(Class::Retryable),
            ..e.into()
        }
    }

    /// A failure no retry will fix: straight to the dead-letter topic.
    pub fn fatal(e: impl Into<HandlerError>) -> HandlerError {
        HandlerError {
            class: Some(Class::Fatal),
            ..e.into()
        }
    }

    /// A failure described by a class name and a message (no error value).
    pub fn new(type_name: impl Into<String>, message: impl Into<String>) -> HandlerError {
        HandlerError {
            class: None,
            type_name: type_name.into(),
            message: message.into(),
            source: None,
        }
    }

    /// The error class written to `kafka_exception-fqcn` and `kafka_dlt-exception-fqcn`: the
    /// Rust type name of a converted error (`std::any::type_name`), [`PANIC_CLASS`] for a
    /// panic, or the name given to [`HandlerError::new`].
    pub fn type_name(&self) -> &str {
        &self.type_name
    }

    /// The error's `Display` text (clipped to [`headers::MESSAGE_LIMIT`] characters in the
    /// headers), or a panic's message.
    ///
    /// [`headers::MESSAGE_LIMIT`]: crate::headers::MESSAGE_LIMIT
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// A rule: is this error (or one in its source chain) of a type?
type Matcher = Box<dyn Fn(&(dyn StdError + 'static)) -> bool + Send + Sync>;

/// Maps errors to [`Class`]: retryable unless the error, or one in its `source()` chain, is of
/// a type registered with [`Classifier::fatal`] (Spring's default: everything is retryable
/// but a list of fatal exceptions). A panic is retryable.
#[derive(Default)]
pub struct Classifier {
    fatal: Vec<(TypeId, Matcher)>,
}

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Classifier({} fatal types)", self.fatal.len())
    }
}

impl Classifier {
    /// Errors of type `E` are fatal.
    pub fn fatal<E: StdError + 'static>(mut self) -> Classifier {
        self.fatal
            .push((TypeId::of::<E>(), Box::new(|e| e.is::<E>())));
        self
    }

    /// The class forced by [`HandlerError::fatal`] or [`HandlerError::retryable`] if any;
    /// else [`Class::Fatal`] if the error or one in its `source()` chain is of a type
    /// registered with [`Classifier::fatal`]; else [`Class::Retryable`].
    pub fn classify(&self, e: &HandlerError) -> Class {
        if let Some(c) = e.class {
            return c;
        }
        let mut next: Option<&(dyn StdError + 'static)> = match &e.source {
            Some(s) => Some(s.as_ref()),
            None => None,
        };
        while let Some(err) = next {
            if self.fatal.iter().any(|(_, m)| m(err)) {
                return Class::Fatal;
            }
            next = err.source();
        }
        Class::Retryable
    }
}

/// The user's code for one record.
pub trait Handler: Send + Sync + 'static {
    /// Handles one delivery: `Ok` marks the record done, `Err` is a failed attempt (and so is
    /// a panic). Any `Fn(Delivery) -> impl Future<Output = Result<(), HandlerError>>` closure
    /// implements it.
    fn handle(
        &self,
        delivery: Delivery,
    ) -> Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send>>;
}

impl<F, Fut> Handler for F
where
    F: Fn(Delivery) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), HandlerError>> + Send + 'static,
{
    fn handle(
        &self,
        delivery: Delivery,
    ) -> Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send>> {
        Box::pin(self(delivery))
    }
}

/// The class name a panic is reported under.
pub const PANIC_CLASS: &str = "panic";

/// Runs the handler; a panic (while creating or polling its future) is a failed attempt.
pub(crate) async fn call(handler: &dyn Handler, delivery: Delivery) -> Result<(), HandlerError> {
    let future = match std::panic::catch_unwind(AssertUnwindSafe(|| handler.handle(delivery))) {
        Ok(f) => f,
        Err(payload) => return Err(panicked(payload)),
    };
    match AssertUnwindSafe(future).catch_unwind().await {
        Ok(result) => result,
        Err(payload) => Err(panicked(payload)),
    }
}

fn panicked(payload: Box<dyn std::any::Any + Send>) -> HandlerError {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "handler panicked".to_string());
    HandlerError::new(PANIC_CLASS, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("bad input")]
    struct BadInput;

    #[derive(Debug, thiserror::Error)]
    #[error("wrapped")]
    struct Wrapper(#[source] BadInput);

    #[derive(Debug, thiserror::Error)]
    #[error("timeout")]
    struct Timeout;

    #[test]
    fn classifier_walks_the_source_chain() {
        let c = Classifier::default().fatal::<BadInput>();
        assert_eq!(c.classify(&BadInput.into()), Class::Fatal);
        assert_eq!(c.classify(&Wrapper(BadInput).into()), Class::Fatal);
        assert_eq!(c.classify(&Timeout.into()), Class::Retryable);
        assert_eq!(
            c.classify(&HandlerError::retryable(BadInput)),
            Class::Retryable
        );
        assert_eq!(c.classify(&HandlerError::fatal(Timeout)), Class::Fatal);
        let e: HandlerError = Timeout.into();
        assert!(e.type_name().ends_with("Timeout"));
        assert_eq!(e.message(), "timeout");
    }

    fn delivery() -> Delivery {
        Delivery {
            record: ConsumerRecord {
                topic: "t".into(),
                partition: 0,
                offset: 0,
                timestamp: 0,
                timestamp_type: consumer::TimestampType::CreateTime,
                key: None,
                value: None,
                headers: Vec::new(),
            },
            attempt: 1,
            original_timestamp: 0,
        }
    }

    #[tokio::test]
    async fn a_panic_is_a_failure() {
        let handler = |d: Delivery| async move {
            if d.attempt == 1 {
                panic!("boom at {}", d.attempt);
            }
            Ok(())
        };
        let e = call(&handler, delivery()).await.unwrap_err();
        assert_eq!((e.type_name(), e.message()), (PANIC_CLASS, "boom at 1"));
        let ok = call(
            &handler,
            Delivery {
                attempt: 2,
                ..delivery()
            },
        )
        .await;
        assert!(ok.is_ok());
    }
}
