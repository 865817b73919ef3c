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

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, ApiKey, EndTxnRequest, GroupId,
    InitProducerIdRequest, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::idempotence::Identity;
use super::{DeliveryError, Inner, Producer};
use crate::cluster::TRANSACTION_KEY;
use crate::connection::BrokerConnection;
use crate::error::{CallError, ErrorCode};
use crate::util::{backoff, lock, text};
use crate::TopicPartition;

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

/// The operations the state machine gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Init,
    Begin,
    Send,
    SendOffsets,
    Commit,
    Abort,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Init => "init_transactions",
            Op::Begin => "begin_transaction",
            Op::Send => "send",
            Op::SendOffsets => "send_offsets_to_transaction",
            Op::Commit => "commit_transaction",
            Op::Abort => "abort_transaction",
        }
    }
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

/// The state machine: the states and what each operation may do in each (pure, for the unit
/// tests). `Ok(next)` is the state the operation moves to when it starts.
pub(super) fn start(state: TransactionState, op: Op) -> Result<TransactionState, TransactionState> {
    use TransactionState as S;
    match (state, op) {
        (S::Uninitialized | S::Initializing, Op::Init) => Ok(S::Initializing),
        (S::Ready, Op::Begin) => Ok(S::InTransaction),
        (S::InTransaction, Op::Send | Op::SendOffsets) => Ok(S::InTransaction),
        (S::InTransaction | S::Committing, Op::Commit) => Ok(S::Committing),
        (S::InTransaction | S::AbortableError | S::Aborting, Op::Abort) => Ok(S::Aborting),
        (other, _) => Err(other),
    }
}

/// The state after an operation that started from `state` finished as `outcome`.
pub(super) fn finish(
    running: TransactionState,
    op: Op,
    outcome: &Result<(), TransactionError>,
) -> TransactionState {
    use TransactionState as S;
    match outcome {
        Err(e) if e.is_fatal() => S::FatalError,
        Err(TransactionError::Abortable(_)) => match running {
            // A failed init leaves nothing to abort.
            S::Initializing => S::Uninitialized,
            _ => S::AbortableError,
        },
        // A timeout or a refused state: as it was, so the call can be made again.
        Err(_) => running,
        Ok(()) => match op {
            Op::Init | Op::Commit | Op::Abort => S::Ready,
            Op::Begin | Op::Send | Op::SendOffsets => S::InTransaction,
        },
    }
}

/// A transactional producer's state, shared by its handles and (for failures) its sender.
#[derive(Debug)]
pub(super) struct Txn {
    pub id: String,
    timeout_ms: i32,
    core: Mutex<Core>,
    /// One transactional call at a time.
    op: tokio::sync::Mutex<()>,
    /// One AddPartitionsToTxn at a time (the partitions it adds are known once it is back).
    adding: tokio::sync::Mutex<()>,
    /// A batch failed after it was sent: its sequence numbers are in doubt and the epoch must
    /// be bumped before the next transaction (set by the sender).
    pub bump_needed: AtomicBool,
}

#[derive(Debug)]
struct Core {
    state: TransactionState,
    /// Partitions added to the open transaction.
    partitions: HashSet<(Arc<str>, i32)>,
    /// Whether the coordinator knows of the open transaction (a partition or a group was
    /// added): an empty transaction ends without EndTxn.
    started: bool,
    /// Why the transaction is abortable or the producer fatal.
    error: Option<TransactionError>,
}

impl Txn {
    pub(super) fn new(id: String, timeout: Duration) -> Txn {
        Txn {
            id,
            timeout_ms: i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX),
            core: Mutex::new(Core {
                state: TransactionState::Uninitialized,
                partitions: HashSet::new(),
                started: false,
                error: None,
            }),
            op: tokio::sync::Mutex::new(()),
            adding: tokio::sync::Mutex::new(()),
            bump_needed: AtomicBool::new(false),
        }
    }

    pub(super) fn state(&self) -> TransactionState {
        lock(&self.core).state
    }

    /// The sender saw a record of the transaction fail.
    pub(super) fn delivery_failed(&self, error: &DeliveryError) {
        let mut core = lock(&self.core);
        match (core.state, error) {
            (_, DeliveryError::Aborted) | (TransactionState::FatalError, _) => {}
            (_, DeliveryError::Fatal(f)) => {
                core.state = TransactionState::FatalError;
                core.error = Some(TransactionError::Fenced(f.code));
            }
            (TransactionState::InTransaction | TransactionState::Committing, e) => {
                core.state = TransactionState::AbortableError;
                core.error = Some(TransactionError::Abortable(AbortReason::Delivery(
                    e.clone(),
                )));
            }
            _ => {}
        }
    }

    /// For `try_send`: the transaction is open and holds the partition.
    pub(super) fn joined(&self, topic: &Arc<str>, partition: i32) -> Result<(), TransactionError> {
        self.check(Op::Send)?;
        if lock(&self.core)
            .partitions
            .contains(&(topic.clone(), partition))
        {
            return Ok(());
        }
        Err(TransactionError::PartitionNotAdded {
            topic: topic.to_string(),
            partition,
        })
    }

    /// Checks that `op` may run now; the error the caller gets if not (the stored cause of an
    /// abortable or fatal state, rather than just the state).
    fn check(&self, op: Op) -> Result<TransactionState, TransactionError> {
        let core = lock(&self.core);
        start(core.state, op).map_err(|state| match (&core.error, state) {
            (Some(e), TransactionState::AbortableError | TransactionState::FatalError) => e.clone(),
            _ => TransactionError::InvalidState {
                operation: op.name(),
                state,
            },
        })
    }

    fn enter(&self, op: Op) -> Result<TransactionState, TransactionError> {
        let next = self.check(op)?;
        lock(&self.core).state = next;
        Ok(next)
    }

    fn leave(&self, running: TransactionState, op: Op, outcome: &Result<(), TransactionError>) {
        let mut core = lock(&self.core);
        if core.state == TransactionState::FatalError {
            return;
        }
        // The sender may have made the transaction abortable meanwhile; a commit then fails.
        if core.state == TransactionState::AbortableError && op != Op::Abort {
            return;
        }
        core.state = finish(running, op, outcome);
        match outcome {
            Ok(()) if matches!(op, Op::Init | Op::Commit | Op::Abort) => {
                core.partitions.clear();
                core.started = false;
                core.error = None;
            }
            Err(e) if e.is_fatal() || e.is_abortable() => core.error = Some(e.clone()),
            _ => {}
        }
    }
}

/// A Kafka error of a transactional call, sorted: fencing ends the producer, retriable ones
/// are retried, the rest ends the transaction (`abortable`) or the producer.
fn classify(e: CallError, abortable: bool) -> TransactionError {
    match e.code() {
        Some(
            code @ (ErrorCode::ProducerFenced
            | ErrorCode::InvalidProducerEpoch
            | ErrorCode::TransactionalIdAuthorizationFailed
            | ErrorCode::InvalidProducerIdMapping),
        ) => TransactionError::Fenced(code),
        Some(ErrorCode::TransactionAbortable) => TransactionError::Abortable(AbortReason::Call(e)),
        _ if abortable => TransactionError::Abortable(AbortReason::Call(e)),
        _ => TransactionError::Fatal(e),
    }
}

/// Worth calling again: retriable for Kafka, or `CONCURRENT_TRANSACTIONS` (the coordinator is
/// still writing the markers of the last transaction; the Java client retries it).
fn retry_again(e: &CallError) -> bool {
    e.is_retriable()
        || matches!(
            e.code(),
            Some(ErrorCode::ConcurrentTransactions | ErrorCode::OperationNotAttempted)
        )
}

fn coordinator_moved(e: &CallError) -> bool {
    matches!(e, CallError::Net(_))
        || matches!(
            e.code(),
            Some(ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable)
        )
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

    /// Registers the `transactional.id` with its coordinator and gets the producer id and
    /// epoch: a producer of the same id started earlier is fenced, and the transaction it left
    /// open is aborted (or its commit finished) before this returns. Call once, first.
    pub async fn init_transactions(&self) -> Result<(), TransactionError> {
        let txn = self.txn()?;
        let _op = txn.op.lock().await;
        let running = txn.enter(Op::Init)?;
        let outcome = self.init_identity(None).await;
        txn.leave(running, Op::Init, &outcome);
        outcome
    }

    /// InitProducerId with the transactional id (`bump`: the current identity, KIP-360); the
    /// new identity is the producer's, and every partition's sequence starts from 0.
    async fn init_identity(&self, bump: Option<Identity>) -> Result<(), TransactionError> {
        let inner = self.inner();
        let txn = self.txn()?;
        let (id, epoch) = bump.map_or((-1, -1), |i| (i.id, i.epoch));
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(text(&txn.id))))
            .with_transaction_timeout_ms(txn.timeout_ms)
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch);
        let response = self
            .with_txn_coordinator(|connection| {
                let request = &request;
                async move {
                    let version = connection.version::<InitProducerIdRequest>(4)?;
                    let response = connection.call_at(request, version).await?;
                    crate::error::check(response.error_code, ApiKey::InitProducerId, || {
                        format!("transactional id {}", txn.id)
                    })?;
                    Ok(response)
                }
            })
            .await
            .map_err(|e| e.map(|e| classify(e, false)))?;
        let identity = Identity {
            id: response.producer_id.0,
            epoch: response.producer_epoch,
        };
        {
            let mut acc = lock(&inner.accumulator);
            for queue in acc.partitions.values_mut() {
                queue.next_sequence = 0;
                queue.acked_sequence = 0;
            }
            *lock(&inner.identity) = Some((identity.id, identity.epoch));
        }
        txn.bump_needed.store(false, Ordering::Release);
        inner.wake.notify_one();
        Ok(())
    }

    /// Starts a transaction: every send until the commit or abort belongs to it.
    pub fn begin_transaction(&self) -> Result<(), TransactionError> {
        let txn = self.txn()?;
        let running = txn.enter(Op::Begin)?;
        txn.leave(running, Op::Begin, &Ok(()));
        Ok(())
    }

    /// For a send of a transactional producer: the transaction must be open, and the
    /// partition in it (AddPartitionsToTxn the first time).
    pub(super) async fn join_transaction(
        &self,
        topic: &Arc<str>,
        partition: i32,
    ) -> Result<(), TransactionError> {
        let Some(txn) = self.inner().txn.as_ref() else {
            return Ok(());
        };
        txn.check(Op::Send)?;
        let key = (topic.clone(), partition);
        if lock(&txn.core).partitions.contains(&key) {
            return Ok(());
        }
        let _adding = txn.adding.lock().await;
        if lock(&txn.core).partitions.contains(&key) {
            return Ok(());
        }
        let identity = self.identity_now()?;
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(text(&txn.id)))
            .with_v3_and_below_producer_id(ProducerId(identity.id))
            .with_v3_and_below_producer_epoch(identity.epoch)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(text(topic)))
                .with_partitions(vec![partition])]);
        let resource = format!("{topic}-{partition}");
        let outcome = self
            .with_txn_coordinator(|connection| {
                let request = &request;
                let resource = &resource;
                async move {
                    let version = connection.version::<AddPartitionsToTxnRequest>(3)?;
                    let response = connection.call_at(request, version).await?;
                    crate::error::check(response.error_code, ApiKey::AddPartitionsToTxn, || {
                        resource.clone()
                    })?;
                    for t in &response.results_by_topic_v3_and_below {
                        for p in &t.results_by_partition {
                            crate::error::check(
                                p.partition_error_code,
                                ApiKey::AddPartitionsToTxn,
                                || resource.clone(),
                            )?;
                        }
                    }
                    Ok(())
                }
            })
            .await
            .map_err(|e| e.map(|e| classify(e, true)));
        match outcome {
            Ok(()) => {
                let mut core = lock(&txn.core);
                core.partitions.insert(key);
                core.started = true;
                Ok(())
            }
            Err(e) => {
                if e.is_fatal() || e.is_abortable() {
                    let running = txn.state();
                    txn.leave(running, Op::Send, &Err(e.clone()));
                }
                Err(e)
            }
        }
    }

    /// Commits `offsets` (the next offset to read of each partition) for the consumer's group
    /// as part of the open transaction: they take effect if and only if it commits. The
    /// group metadata's generation and member id let the group's coordinator refuse a
    /// consumer the group has moved on from (then the transaction must be aborted).
    pub async fn send_offsets_to_transaction(
        &self,
        offsets: &BTreeMap<TopicPartition, i64>,
        group: &ConsumerGroupMetadata,
    ) -> Result<(), TransactionError> {
        let txn = self.txn()?;
        let _op = txn.op.lock().await;
        let running = txn.enter(Op::SendOffsets)?;
        let outcome = self.send_offsets(txn, offsets, group).await;
        txn.leave(running, Op::SendOffsets, &outcome);
        outcome
    }

    async fn send_offsets(
        &self,
        txn: &Txn,
        offsets: &BTreeMap<TopicPartition, i64>,
        group: &ConsumerGroupMetadata,
    ) -> Result<(), TransactionError> {
        let identity = self.identity_now()?;
        let add = AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(text(&txn.id)))
            .with_producer_id(ProducerId(identity.id))
            .with_producer_epoch(identity.epoch)
            .with_group_id(GroupId(text(&group.group_id)));
        self.with_txn_coordinator(|connection| {
            let add = &add;
            async move {
                let version = connection.version::<AddOffsetsToTxnRequest>(3)?;
                let response = connection.call_at(add, version).await?;
                crate::error::check(response.error_code, ApiKey::AddOffsetsToTxn, || {
                    format!("group {}", group.group_id)
                })
            }
        })
        .await
        .map_err(|e| e.map(|e| classify(e, true)))?;
        lock(&txn.core).started = true;
        let mut topics: BTreeMap<&str, Vec<TxnOffsetCommitRequestPartition>> = BTreeMap::new();
        for (tp, offset) in offsets {
            topics.entry(&tp.topic).or_default().push(
                TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(tp.partition)
                    .with_committed_offset(*offset)
                    .with_committed_leader_epoch(-1)
                    .with_committed_metadata(Some(StrBytes::default())),
            );
        }
        let commit = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(text(&txn.id)))
            .with_group_id(GroupId(text(&group.group_id)))
            .with_producer_id(ProducerId(identity.id))
            .with_producer_epoch(identity.epoch)
            .with_generation_id(group.generation_id)
            .with_member_id(text(&group.member_id))
            .with_group_instance_id(group.group_instance_id.as_deref().map(text))
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, ps)| {
                        TxnOffsetCommitRequestTopic::default()
                            .with_name(TopicName(text(t)))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        let cluster = &self.inner().cluster;
        let deadline = Instant::now() + self.inner().config.max_block;
        let mut attempt = 0;
        loop {
            let result = async {
                let (_, connection) = cluster.coordinator(&group.group_id).await?;
                let version = connection.version::<TxnOffsetCommitRequest>(3)?;
                let response = connection.call_at(&commit, version).await?;
                for t in &response.topics {
                    for p in &t.partitions {
                        crate::error::check(p.error_code, ApiKey::TxnOffsetCommit, || {
                            format!("{}-{}", t.name.0.as_str(), p.partition_index)
                        })?;
                    }
                }
                Ok::<(), CallError>(())
            }
            .await;
            let e = match result {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if coordinator_moved(&e) {
                cluster.forget_coordinator(&group.group_id);
            }
            // UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID: the group moved on
            // from this consumer (the Java client's CommitFailedException), abortable.
            if !retry_again(&e) {
                return Err(classify(e, true));
            }
            self.pause(&mut attempt, deadline).await?;
        }
    }

    /// Sends every record of the transaction, then commits it: its records become visible to
    /// `read_committed` consumers and its offsets the group's. A record that failed makes it
    /// [`TransactionError::Abortable`] instead. After a [`TransactionError::Timeout`] call it
    /// again.
    pub async fn commit_transaction(&self) -> Result<(), TransactionError> {
        let txn = self.txn()?;
        let _op = txn.op.lock().await;
        let running = txn.enter(Op::Commit)?;
        self.flush_unless_failed(txn).await;
        let outcome = match txn.check(Op::Commit) {
            Err(e) => Err(e),
            Ok(_) => self.end(txn, true).await,
        };
        txn.leave(running, Op::Commit, &outcome);
        outcome
    }

    /// Aborts the transaction: records not sent yet fail with [`DeliveryError::Aborted`],
    /// those sent are never visible to `read_committed` consumers, its offsets are dropped.
    pub async fn abort_transaction(&self) -> Result<(), TransactionError> {
        let txn = self.txn()?;
        let _op = txn.op.lock().await;
        let running = txn.enter(Op::Abort)?;
        self.settle_for_abort(txn).await;
        let outcome = async {
            self.end(txn, false).await?;
            if txn.bump_needed.load(Ordering::Acquire) {
                let current = self.identity_now()?;
                self.init_identity(Some(current)).await?;
            }
            Ok(())
        }
        .await;
        txn.leave(running, Op::Abort, &outcome);
        outcome
    }

    /// Sends everything queued and waits for it, or until a record of the transaction failed
    /// (after a sequence gap the sender holds the rest until the abort's epoch bump).
    async fn flush_unless_failed(&self, txn: &Txn) {
        let inner = self.inner();
        let generation = inner.flush.begin();
        inner.wake.notify_one();
        loop {
            let waited = tokio::time::timeout(
                inner
                    .config
                    .net
                    .retry_backoff
                    .max(Duration::from_millis(10)),
                inner.flush.wait(generation),
            )
            .await;
            let failed = matches!(
                txn.state(),
                TransactionState::AbortableError | TransactionState::FatalError
            );
            if waited.is_ok() || failed {
                return;
            }
        }
    }

    /// Fails the records not sent yet and waits for those in flight. Once a batch's sequence
    /// is in doubt the sender sends nothing more until the epoch bump, so batches waiting for a
    /// retry are failed too (the abort drops them anyway), also those requeued meanwhile.
    async fn settle_for_abort(&self, txn: &Txn) {
        let inner = self.inner();
        let generation = inner.flush.begin();
        inner.wake.notify_one();
        loop {
            let all = txn.bump_needed.load(Ordering::Acquire);
            inner.fail_unsent(|| DeliveryError::Aborted, all);
            let waited = tokio::time::timeout(
                inner
                    .config
                    .net
                    .retry_backoff
                    .max(Duration::from_millis(10)),
                inner.flush.wait(generation),
            )
            .await;
            if waited.is_ok() {
                return;
            }
        }
    }

    /// EndTxn, unless the coordinator never heard of the transaction.
    async fn end(&self, txn: &Txn, commit: bool) -> Result<(), TransactionError> {
        if !lock(&txn.core).started {
            return Ok(());
        }
        let identity = self.identity_now()?;
        let request = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(text(&txn.id)))
            .with_producer_id(ProducerId(identity.id))
            .with_producer_epoch(identity.epoch)
            .with_committed(commit);
        self.with_txn_coordinator(|connection| {
            let request = &request;
            async move {
                let version = connection.version::<EndTxnRequest>(3)?;
                let response = connection.call_at(request, version).await?;
                crate::error::check(response.error_code, ApiKey::EndTxn, || {
                    format!("transactional id {}", txn.id)
                })
            }
        })
        .await
        .map_err(|e| e.map(|e| classify(e, false)))
    }

    /// The producer id and epoch now (init_transactions has given one).
    fn identity_now(&self) -> Result<Identity, TransactionError> {
        let identity = *lock(&self.inner().identity);
        identity
            .map(|(id, epoch)| Identity { id, epoch })
            .ok_or(TransactionError::InvalidState {
                operation: "a transactional call",
                state: TransactionState::Uninitialized,
            })
    }

    /// Waits out the next backoff, or the timeout if the deadline comes first.
    async fn pause(&self, attempt: &mut u32, deadline: Instant) -> Result<(), TransactionError> {
        let net = &self.inner().config.net;
        let pause = backoff(net.retry_backoff, net.retry_backoff_max, *attempt);
        *attempt += 1;
        if Instant::now() + pause >= deadline {
            return Err(TransactionError::Timeout(self.inner().config.max_block));
        }
        tokio::time::sleep(pause).await;
        Ok(())
    }

    /// Runs `call` against the transaction coordinator, finding it again after it moved and
    /// retrying retriable failures with backoff, until `max.block.ms`. `Err(Ok(e))` is a
    /// timeout or state error as it is; `Err(Err(call))` a failure for the caller to classify.
    async fn with_txn_coordinator<T, F, Fut>(&self, mut call: F) -> Result<T, TxnCallError>
    where
        F: FnMut(Arc<BrokerConnection>) -> Fut,
        Fut: Future<Output = Result<T, CallError>>,
    {
        let txn = self.txn().map_err(TxnCallError::Done)?;
        let cluster = &self.inner().cluster;
        let deadline = Instant::now() + self.inner().config.max_block;
        let mut attempt = 0;
        loop {
            let result = match cluster.coordinator_of(TRANSACTION_KEY, &txn.id).await {
                Ok((_, connection)) => call(connection).await,
                Err(e) => Err(e),
            };
            let e = match result {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            if coordinator_moved(&e) {
                cluster.forget_coordinator_of(TRANSACTION_KEY, &txn.id);
            }
            if !retry_again(&e) {
                return Err(TxnCallError::Call(e));
            }
            tracing::debug!(transactional_id = %txn.id, error = %e, "retrying a transactional call");
            self.pause(&mut attempt, deadline)
                .await
                .map_err(TxnCallError::Done)?;
        }
    }
}

/// A failed call to the transaction coordinator: given up (a timeout) or refused.
pub(super) enum TxnCallError {
    Done(TransactionError),
    Call(CallError),
}

impl TxnCallError {
    fn map(self, f: impl FnOnce(CallError) -> TransactionError) -> TransactionError {
        match self {
            TxnCallError::Done(e) => e,
            TxnCallError::Call(e) => f(e),
        }
    }
}

impl Inner {
    /// Fails every batch not sent yet (no sequence numbers: nothing of it reached a broker),
    /// and with `all` also those waiting for a retry.
    pub(super) fn fail_unsent(&self, error: impl Fn() -> DeliveryError, all: bool) {
        let unsent: Vec<super::accumulator::Batch> = {
            let mut acc = lock(&self.accumulator);
            let mut out = Vec::new();
            for queue in acc.partitions.values_mut() {
                let (keep, drop): (Vec<_>, Vec<_>) = std::mem::take(&mut queue.batches)
                    .into_iter()
                    .partition(|b| !all && b.encoded.is_some());
                queue.batches = keep.into();
                out.extend(drop);
            }
            out
        };
        for batch in unsent {
            let freed: usize = batch.records.iter().map(|r| r.size).sum();
            self.memory.release(freed);
            for record in batch.records {
                record.reply.send(Err(error()));
            }
            self.flush.complete(batch.flush_generation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TransactionState as S;

    fn abortable() -> TransactionError {
        TransactionError::Abortable(AbortReason::Delivery(DeliveryError::Closed))
    }

    #[test]
    fn operations_are_allowed_only_in_their_states() {
        let all = [
            S::Uninitialized,
            S::Initializing,
            S::Ready,
            S::InTransaction,
            S::Committing,
            S::Aborting,
            S::AbortableError,
            S::FatalError,
        ];
        let allowed = |s: S, op: Op| start(s, op).is_ok();
        for s in all {
            assert_eq!(
                allowed(s, Op::Init),
                matches!(s, S::Uninitialized | S::Initializing)
            );
            assert_eq!(allowed(s, Op::Begin), s == S::Ready, "{s:?}");
            assert_eq!(allowed(s, Op::Send), s == S::InTransaction, "{s:?}");
            assert_eq!(allowed(s, Op::SendOffsets), s == S::InTransaction, "{s:?}");
            assert_eq!(
                allowed(s, Op::Commit),
                matches!(s, S::InTransaction | S::Committing),
                "{s:?}"
            );
            assert_eq!(
                allowed(s, Op::Abort),
                matches!(s, S::InTransaction | S::AbortableError | S::Aborting),
                "{s:?}"
            );
        }
        // Nothing at all once fatal.
        for op in [
            Op::Init,
            Op::Begin,
            Op::Send,
            Op::SendOffsets,
            Op::Commit,
            Op::Abort,
        ] {
            assert_eq!(start(S::FatalError, op), Err(S::FatalError));
        }
    }

    #[test]
    fn outcomes_move_the_state() {
        assert_eq!(finish(S::Initializing, Op::Init, &Ok(())), S::Ready);
        assert_eq!(
            finish(S::InTransaction, Op::Begin, &Ok(())),
            S::InTransaction
        );
        assert_eq!(finish(S::Committing, Op::Commit, &Ok(())), S::Ready);
        assert_eq!(finish(S::Aborting, Op::Abort, &Ok(())), S::Ready);
        // A failed send or offset commit: abort, nothing else.
        assert_eq!(
            finish(S::InTransaction, Op::SendOffsets, &Err(abortable())),
            S::AbortableError
        );
        assert_eq!(
            finish(S::Committing, Op::Commit, &Err(abortable())),
            S::AbortableError
        );
        // Fenced: the end.
        let fenced = Err(TransactionError::Fenced(ErrorCode::ProducerFenced));
        assert_eq!(finish(S::Committing, Op::Commit, &fenced), S::FatalError);
        assert_eq!(finish(S::Initializing, Op::Init, &fenced), S::FatalError);
        // A timeout leaves the call to be made again.
        let timeout = Err(TransactionError::Timeout(Duration::from_secs(1)));
        assert_eq!(finish(S::Committing, Op::Commit, &timeout), S::Committing);
        assert_eq!(finish(S::Aborting, Op::Abort, &timeout), S::Aborting);
        assert_eq!(finish(S::Initializing, Op::Init, &timeout), S::Initializing);
        assert!(start(finish(S::Committing, Op::Commit, &timeout), Op::Commit).is_ok());
    }

    #[test]
    fn a_failed_record_makes_the_transaction_abortable_and_a_commit_refused() {
        let txn = Txn::new("t".into(), Duration::from_secs(60));
        lock(&txn.core).state = S::InTransaction;
        txn.delivery_failed(&DeliveryError::Timeout(Duration::from_secs(1)));
        assert_eq!(txn.state(), S::AbortableError);
        let refused = txn.check(Op::Commit).unwrap_err();
        assert!(refused.is_abortable(), "{refused}");
        assert!(txn.check(Op::Abort).is_ok());
        // Records failed by the abort itself change nothing.
        lock(&txn.core).state = S::Aborting;
        txn.delivery_failed(&DeliveryError::Aborted);
        assert_eq!(txn.state(), S::Aborting);
    }

    #[test]
    fn fencing_codes_are_fatal_and_others_follow_the_call() {
        let call = |code| CallError::broker(ApiKey::EndTxn, "t", code);
        assert!(classify(call(ErrorCode::ProducerFenced), true).is_fatal());
        assert!(classify(call(ErrorCode::InvalidProducerEpoch), true).is_fatal());
        assert!(classify(call(ErrorCode::TransactionalIdAuthorizationFailed), true).is_fatal());
        assert!(classify(call(ErrorCode::IllegalGeneration), true).is_abortable());
        assert!(classify(call(ErrorCode::TransactionAbortable), false).is_abortable());
        assert!(classify(call(ErrorCode::InvalidTxnState), false).is_fatal());
        assert!(retry_again(&call(ErrorCode::ConcurrentTransactions)));
        assert!(retry_again(&call(ErrorCode::CoordinatorNotAvailable)));
        assert!(retry_again(&call(ErrorCode::NotCoordinator)));
        assert!(!retry_again(&call(ErrorCode::ProducerFenced)));
    }
}
