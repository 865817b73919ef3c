//! Why a consumer call failed: no record to hand out, a commit refused, a seek or pause of a
//! partition not assigned, a consumer that could not start.

use crate::config::ConfigError;
use crate::error::{CallError, NetError};
use crate::TopicPartition;

/// Why no record could be handed out.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumeError {
    /// `auto.offset.reset=none` and the partition has no committed offset, or its position is
    /// out of range: seek to go on.
    #[error("{partition}: no valid offset (auto.offset.reset=none); seek to go on")]
    NoOffset {
        /// The partition waiting for a seek.
        partition: TopicPartition,
    },
    /// A batch failed its checks (CRC, framing). The partition stays at `offset` until a seek.
    #[error("{partition} at offset {offset}: corrupt batch: {reason}")]
    Corrupt {
        /// The partition of the batch.
        partition: TopicPartition,
        /// The batch's base offset, or the partition's position if that is later.
        offset: i64,
        /// What the check found.
        reason: String,
    },
    /// The broker refused with a non-retriable error (authorization, …).
    #[error(transparent)]
    Broker(CallError),
    /// The group refused this member for good (`FENCED_INSTANCE_ID`, an inconsistent protocol,
    /// the group full, …): the consumer stops.
    #[error("group membership failed: {0}")]
    Group(CallError),
    /// The consumer is closing: its background tasks are stopping.
    #[error("the consumer is closed")]
    Closed,
}

/// Why a commit failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CommitError {
    /// The consumer has no `group.id`, so there is no group to commit to (or read commits of).
    #[error("no group.id: nothing to commit to")]
    NoGroup,
    /// A rebalance is on its way or took the partitions: the records will be read again by
    /// whoever owns them now (at least once).
    #[error("the group rebalanced; the commit was not applied: {0}")]
    Rebalanced(CallError),
    /// Any other failure: the coordinator refused the request, or none answered before
    /// `request.timeout.ms` ran out.
    #[error(transparent)]
    Call(CallError),
}

/// Why a seek or pause was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AssignmentError {
    /// A seek, pause or resume named a partition this consumer does not have now.
    #[error("{0} is not assigned to this consumer")]
    NotAssigned(TopicPartition),
    /// `subscribe` after `assign`, or `assign` after `subscribe`.
    #[error("subscribe and assign cannot be mixed on one consumer")]
    Mixed,
    /// `subscribe` on a consumer without `group.id`.
    #[error("subscribe needs group.id")]
    NoGroup,
}

/// Why a consumer could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// The properties were refused ([`Consumer::from_config`](super::Consumer::from_config)).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No bootstrap server answered with the cluster's metadata.
    #[error(transparent)]
    Net(#[from] NetError),
}
