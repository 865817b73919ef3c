//! Why a retrying consumer could not start or had to stop.

use consumer::{
    AdminError, AssignmentError, ConsumeError, ConsumerError, DeliveryError, ProducerError,
    SendError,
};

use crate::config::ConfigError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RetryError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("client configuration: {0}")]
    Client(#[from] consumer::ConfigError),
    #[error("main topic {0} does not exist")]
    NoMainTopic(String),
    #[error("topic {topic} has {found} partitions, the main topic {expected}; per-key ordering needs the same count")]
    PartitionCount {
        topic: String,
        found: i32,
        expected: i32,
    },
    #[error("admin: {0}")]
    Admin(#[from] AdminError),
    #[error("consumer: {0}")]
    Consumer(#[from] ConsumerError),
    #[error("producer: {0}")]
    Producer(#[from] ProducerError),
    #[error("subscribe: {0}")]
    Assignment(#[from] AssignmentError),
    #[error("consume: {0}")]
    Consume(#[from] ConsumeError),
    /// A record could not be written to the next topic; it stays uncommitted in its source
    /// and is read again after a restart.
    #[error("forward of {from} to {to}: {reason}")]
    Forward {
        from: String,
        to: String,
        reason: String,
    },
    #[error("rebuilding per-key chains of partition {partition}: {reason}")]
    Rebuild { partition: i32, reason: String },
}

impl RetryError {
    pub(crate) fn send(from: String, to: &str, e: &SendError) -> RetryError {
        RetryError::Forward {
            from,
            to: to.to_string(),
            reason: e.to_string(),
        }
    }

    pub(crate) fn delivery(from: String, to: &str, e: &DeliveryError) -> RetryError {
        RetryError::Forward {
            from,
            to: to.to_string(),
            reason: e.to_string(),
        }
    }
}
