//! Why a retrying consumer could not start or had to stop.

use consumer::{
    AdminError, AssignmentError, ConsumeError, ConsumerError, DeliveryError, ProducerError,
    SendError, TransactionError,
};

use crate::config::ConfigError;

/// Why [`RetryingConsumer::new`](crate::RetryingConsumer::new) or
/// [`RetryingConsumer::run`](crate::RetryingConsumer::run) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RetryError {
    /// The [`RetryConfig`](crate::RetryConfig) cannot work, or the consumer properties set
    /// `auto.offset.reset` to something other than `earliest`.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A client property the `consumer` crate refused on its own. (The client constructors
    /// report theirs inside [`Admin`](Self::Admin), [`Consumer`](Self::Consumer) and
    /// [`Producer`](Self::Producer).)
    #[error("client configuration: {0}")]
    Client(#[from] consumer::ConfigError),
    /// The main topic does not exist; unlike the retry topics and the DLT, it is never
    /// created.
    #[error("main topic {0} does not exist")]
    NoMainTopic(String),
    /// With per-key ordering, a retry topic's partition count differs from the main topic's.
    #[error("topic {topic} has {found} partitions, the main topic {expected}; per-key ordering needs the same count")]
    PartitionCount {
        /// The retry topic.
        topic: String,
        /// Its partition count.
        found: i32,
        /// The main topic's partition count.
        expected: i32,
    },
    /// Connecting the admin client, or describing or creating the chain's topics, failed.
    #[error("admin: {0}")]
    Admin(#[from] AdminError),
    /// The group consumer could not be created.
    #[error("consumer: {0}")]
    Consumer(#[from] ConsumerError),
    /// The producer that forwards records could not be created.
    #[error("producer: {0}")]
    Producer(#[from] ProducerError),
    /// Subscribing to the main and retry topics failed.
    #[error("subscribe: {0}")]
    Assignment(#[from] AssignmentError),
    /// Reading a record failed (a closed consumer ends [`run`](crate::RetryingConsumer::run)
    /// with `Ok` instead).
    #[error("consume: {0}")]
    Consume(#[from] ConsumeError),
    /// A record could not be written to the next topic; it stays uncommitted in its source
    /// and is read again after a restart.
    #[error("forward of {from} to {to}: {reason}")]
    Forward {
        /// The source record, `<topic>-<partition>@<offset>` (only `<topic>` when the
        /// history header could not be encoded).
        from: String,
        /// The topic it was being written to (empty when the history header could not be
        /// encoded).
        to: String,
        /// The producer's (or encoder's) error, as text.
        reason: String,
    },
    /// Exactly-once mode: the transactional producer could not start, or was fenced (another
    /// instance took its `transactional.id`) or refused for good; nothing of the open
    /// transaction is committed.
    #[error("transaction: {0}")]
    Transaction(#[from] TransactionError),
    /// With per-key ordering, the key chains of a newly assigned partition could not be read
    /// back from the retry topics: a client error, or not all read within 60 s.
    #[error("rebuilding per-key chains of partition {partition}: {reason}")]
    Rebuild {
        /// The partition number, the same in the main topic and every retry topic.
        partition: i32,
        /// The client's error, or the timeout, as text.
        reason: String,
    },
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
