//! Transactions, as the Java client's `TransactionManager` runs them with transaction version 1
//! (Kafka 4's clients against a cluster without `transaction.version=2`, and any broker that
//! serves the transactional APIs at their older versions):
//!
//! - [`Producer::init_transactions`]: FindCoordinator (key type 1, the transactional id) then
//!   InitProducerId with the transactional id, which fences an older producer of the same id
//!   and aborts (or finishes) the transaction it left open;
//! - [`Producer::begin_transaction`]: local only;
//! - a send to a partition the transaction does not hold yet waits for AddPartitionsToTxn
//!   before its record is queued, so no batch of the partition goes out before the coordinator
//!   knows it (the batches carry the transactional attribute and the transactional id);
//! - [`Producer::send_offsets_to_transaction`]: AddOffsetsToTxn to the transaction coordinator,
//!   then TxnOffsetCommit to the group's coordinator with the consumer's group metadata (its
//!   generation and member id fence a consumer the group has moved on from: EOS v2, KIP-447);
//! - [`Producer::commit_transaction`]: a flush, then EndTxn(commit) unless a record failed;
//! - [`Producer::abort_transaction`]: records not sent yet fail with
//!   [`DeliveryError::Aborted`], those in flight are waited for, then EndTxn(abort); after a
//!   batch failed with its sequence numbers in doubt, InitProducerId with the current id and
//!   epoch bumps the epoch (KIP-360) so the next transaction starts clean.
//!
//! Retriable failures (`COORDINATOR_NOT_AVAILABLE`, `NOT_COORDINATOR`, a coordinator loading,
//! `CONCURRENT_TRANSACTIONS`, a lost connection) are retried with backoff until `max.block.ms`;
//! fencing is fatal ([`TransactionError::Fenced`]); a failed send or a refused offset commit
//! makes the transaction abortable ([`TransactionError::Abortable`]).
//!
//! - `state`: the state machine, and the transaction's state a producer shares with its sender.
//! - `calls`: the transactional calls to the coordinators, retried until `max.block.ms`.

mod calls;
mod state;

pub(super) use state::Txn;

use std::time::Duration;

use super::{DeliveryError, Producer};
use crate::error::{CallError, ErrorCode};

/// Where a transactional producer is (the Java client's `TransactionManager.State`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionState {
    /// Before [`Producer::init_transactions`] succeeded.
    Uninitialized,
    /// `init_transactions` is under way (or timed out: call it again).
    Initializing,
    /// No transaction open: [`Producer::begin_transaction`] may start one.
    Ready,
    /// A transaction is open: sends and `send_offsets_to_transaction` join it.
    InTransaction,
    /// `commit_transaction` is under way (or timed out: call it again).
    Committing,
    /// `abort_transaction` is under way (or timed out: call it again).
    Aborting,
    /// Something in the transaction failed: only `abort_transaction` is allowed.
    AbortableError,
    /// Fenced, or refused for good: the producer can only be dropped.
    FatalError,
}

/// Why an abortable transaction must be aborted.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AbortReason {
    /// A record of the transaction was not delivered.
    #[error("a record of the transaction failed: {0}")]
    Delivery(DeliveryError),
    /// A call of the transaction was refused (an offset commit of a member the group fenced,
    /// a topic not authorized, …).
    #[error(transparent)]
    Call(CallError),
}

/// Why a transactional call failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TransactionError {
    /// The producer has no `transactional.id`.
    #[error("the producer has no transactional.id")]
    NotTransactional,
    /// The call is not allowed in this state (e.g. a send before `begin_transaction`, a
    /// commit after a failure, which needs an abort).
    #[error("{operation} is not allowed in state {state:?}")]
    InvalidState {
        /// The call that was refused.
        operation: &'static str,
        /// The producer's state then.
        state: TransactionState,
    },
    /// Another producer with the same `transactional.id` took over (`PRODUCER_FENCED`,
    /// `INVALID_PRODUCER_EPOCH`), or the broker refused the id for good
    /// (`TRANSACTIONAL_ID_AUTHORIZATION_FAILED`): fatal, the producer can only be dropped.
    #[error("transactional producer fenced: {0}")]
    Fenced(ErrorCode),
    /// Another failure that ends the producer (an error the transaction cannot recover from).
    #[error("transactional producer failed: {0}")]
    Fatal(CallError),
    /// Part of the transaction failed: call [`Producer::abort_transaction`], then start again.
    #[error("the transaction must be aborted: {0}")]
    Abortable(AbortReason),
    /// `try_send` to a partition not in the open transaction yet: it cannot wait for
    /// AddPartitionsToTxn (send one record there with `send` first).
    #[error(
        "{topic}-{partition} is not in the transaction yet (send adds it; try_send cannot wait)"
    )]
    PartitionNotAdded {
        /// The record's topic.
        topic: String,
        /// The record's partition.
        partition: i32,
    },
    /// The call did not finish within `max.block.ms` (the coordinator kept answering with
    /// retriable errors or not at all): call it again.
    #[error("not done within max.block.ms ({0:?}); call it again")]
    Timeout(Duration),
}

impl TransactionError {
    /// Whether the producer can go on after an abort (not fenced, not fatal).
    pub fn is_abortable(&self) -> bool {
        matches!(self, TransactionError::Abortable(_))
    }

    /// Whether the producer is finished (fenced or refused for good).
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            TransactionError::Fenced(_) | TransactionError::Fatal(_)
        )
    }
}

/// A consumer's place in its group, for [`Producer::send_offsets_to_transaction`]
/// (the Java client's `ConsumerGroupMetadata`; [`crate::Consumer::group_metadata`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupMetadata {
    /// `group.id`.
    pub group_id: String,
    /// The generation the member joined (-1: no membership checks, as for an assigned
    /// consumer).
    pub generation_id: i32,
    /// The member id the coordinator gave (empty: none).
    pub member_id: String,
    /// `group.instance.id`, for static members.
    pub group_instance_id: Option<String>,
}

impl ConsumerGroupMetadata {
    /// Metadata naming only the group: the coordinator checks no membership (Kafka's EOS v1
    /// style, for consumers outside a group protocol).
    pub fn new(group_id: impl Into<String>) -> ConsumerGroupMetadata {
        ConsumerGroupMetadata {
            group_id: group_id.into(),
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

impl Producer {
    fn txn(&self) -> Result<&Txn, TransactionError> {
        self.inner()
            .txn
            .as_ref()
            .ok_or(TransactionError::NotTransactional)
    }

    /// The transactional state (`None` without `transactional.id`).
    pub fn transaction_state(&self) -> Option<TransactionState> {
        self.inner().txn.as_ref().map(Txn::state)
    }
}
