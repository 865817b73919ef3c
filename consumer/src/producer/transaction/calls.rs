//! The transactional calls: InitProducerId with the transactional id, AddPartitionsToTxn,
//! AddOffsetsToTxn and TxnOffsetCommit, EndTxn; each to its coordinator, found again when it
//! moves, retriable failures retried with backoff until `max.block.ms`, the rest sorted into
//! fenced, fatal or abortable.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
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

use super::state::{Op, Txn};
use super::{AbortReason, ConsumerGroupMetadata, TransactionError, TransactionState};
use crate::cluster::TRANSACTION_KEY;
use crate::connection::BrokerConnection;
use crate::error::{CallError, ErrorCode};
use crate::producer::batch::Batch;
use crate::producer::idempotence::Identity;
use crate::producer::{DeliveryError, Inner, Producer};
use crate::util::{backoff, lock, text};
use crate::TopicPartition;

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
    pub(in crate::producer) async fn join_transaction(
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
            .with_generation_id_or_member_epoch(group.generation_id)
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
        let unsent: Vec<Batch> = {
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
