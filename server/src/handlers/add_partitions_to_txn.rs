//! AddPartitionsToTxn, versions 0–5. v0–3 (clients): the partitions join the producer's
//! transaction (it becomes Ongoing), stored in `__transaction_state` before the answer. A
//! partition of a topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION, one of an internal
//! topic INVALID_TOPIC_EXCEPTION (Kafka: `__consumer_offsets` goes through AddOffsetsToTxn),
//! one not authorized TOPIC_AUTHORIZATION_FAILED; if any partition has an error the others get
//! OPERATION_NOT_ATTEMPTED and nothing is added, as in Kafka. A coordinator refusal is every
//! partition's error: INVALID_PRODUCER_ID_MAPPING (unknown id or another producer id),
//! PRODUCER_FENCED (another epoch; INVALID_PRODUCER_EPOCH before v2), CONCURRENT_TRANSACTIONS
//! (markers being written), COORDINATOR_NOT_AVAILABLE (the record was not written). v4–5
//! (KIP-890, brokers' batched form): several transactions, each added or, with `verify_only`,
//! checked (a partition not in the transaction is INVALID_TXN_STATE). Authorization: v0–3
//! WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
//! partition) and WRITE on each topic; v4+ CLUSTER_ACTION on the cluster (else the top-level
//! CLUSTER_AUTHORIZATION_FAILED).

use std::sync::Arc;

use acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, TopicName};

use super::bounds::Counts;
use super::transaction;
use super::Handler;
use super::RequestContext;
use crate::broker::{Storage, Txns};

/// Why `topic`'s partition `index` may not join a transaction, if it may not: WRITE on the
/// topic (when `authorize`: a client's request), not an internal topic, and existing. Produce
/// v12's implicit add checks the same.
pub(super) fn partition_refusal(
    storage: &Storage,
    ctx: &RequestContext,
    topic: &str,
    index: i32,
    authorize: bool,
) -> Option<ResponseError> {
    if authorize && !ctx.authorize_topic(Operation::Write, topic) {
        Some(ResponseError::TopicAuthorizationFailed)
    } else if Storage::is_internal(topic) {
        Some(ResponseError::InvalidTopicException)
    } else if storage.partition(topic, index).is_none() {
        Some(ResponseError::UnknownTopicOrPartition)
    } else {
        None
    }
}

/// Per partition of one transaction: (topic, partition, error code).
type Results = Vec<(String, i32, i16)>;

impl Handler for AddPartitionsToTxnRequest {
    const SERVED: (i16, i16) = (0, 5);
    type Needs = (Arc<Storage>, Arc<Txns>);

    fn counts(&self) -> Counts {
        let topics = self
            .v3_and_below_topics
            .iter()
            .chain(self.transactions.iter().flat_map(|t| &t.topics));
        let (mut count, mut partitions) = (0, 0);
        for t in topics {
            count += 1;
            partitions += t.partitions.len();
        }
        Counts {
            topics: count,
            partitions,
            ..Counts::default()
        }
    }

    async fn handle(
        (storage, txns): Self::Needs,
        request: AddPartitionsToTxnRequest,
        ctx: &RequestContext,
    ) -> AddPartitionsToTxnResponse {
        let response = AddPartitionsToTxnResponse::default();
        let fenced = transaction::fenced(ctx.version, 2);
        if ctx.version <= 3 {
            let id = request.v3_and_below_transactional_id.to_string();
            let txn = Transaction {
                id: &id,
                producer_id: request.v3_and_below_producer_id.0,
                epoch: request.v3_and_below_producer_epoch,
                topics: &request.v3_and_below_topics,
                verify_only: false,
            };
            let results = add(&storage, &txns, ctx, txn, fenced).await;
            return response.with_results_by_topic_v3_and_below(topic_results(results));
        }
        if !ctx.authorize_cluster(Operation::ClusterAction) {
            return response.with_error_code(ResponseError::ClusterAuthorizationFailed.code());
        }
        let mut results = Vec::with_capacity(request.transactions.len());
        for txn in &request.transactions {
            let id = txn.transactional_id.to_string();
            let named = Transaction {
                id: &id,
                producer_id: txn.producer_id.0,
                epoch: txn.producer_epoch,
                topics: &txn.topics,
                verify_only: txn.verify_only,
            };
            let partitions = add(&storage, &txns, ctx, named, fenced).await;
            results.push(
                AddPartitionsToTxnResult::default()
                    .with_transactional_id(txn.transactional_id.clone())
                    .with_topic_results(topic_results(partitions)),
            );
        }
        response.with_results_by_transaction(results)
    }

    fn throttle_time_ms(response: &mut AddPartitionsToTxnResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &AddPartitionsToTxnResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code);
        r.results_by_topic_v3_and_below
            .iter()
            .chain(
                r.results_by_transaction
                    .iter()
                    .flat_map(|t| &t.topic_results),
            )
            .flat_map(|t| &t.results_by_partition)
            .for_each(|p| f(p.partition_error_code));
    }
}

/// One transaction of the request: its producer and the partitions to add (or check).
struct Transaction<'a> {
    id: &'a str,
    producer_id: i64,
    epoch: i16,
    topics: &'a [AddPartitionsToTxnTopic],
    /// Only check that the partitions are in the transaction (v4+, KIP-890).
    verify_only: bool,
}

/// Adds (or with `verify_only` checks) one transaction's partitions.
async fn add(
    storage: &Arc<Storage>,
    txns: &Arc<Txns>,
    ctx: &RequestContext,
    txn: Transaction<'_>,
    fenced: ResponseError,
) -> Results {
    let Transaction {
        id,
        producer_id,
        epoch,
        topics,
        verify_only,
    } = txn;
    let all = || {
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t.name.to_string(), *p)))
    };
    let every =
        |error: ResponseError| -> Results { all().map(|(t, p)| (t, p, error.code())).collect() };
    if ctx.version <= 3 && !ctx.authorize(Operation::Write, ResourceType::TransactionalId, id) {
        return every(ResponseError::TransactionalIdAuthorizationFailed);
    }
    // Per partition: its own error, if any.
    let checked: Vec<(String, i32, Option<ResponseError>)> = all()
        .map(|(topic, index)| {
            let error = partition_refusal(storage, ctx, &topic, index, ctx.version <= 3);
            (topic, index, error)
        })
        .collect();
    if checked.iter().any(|(_, _, e)| e.is_some()) {
        return checked
            .into_iter()
            .map(|(t, p, e)| {
                let error = e.unwrap_or(ResponseError::OperationNotAttempted);
                (t, p, error.code())
            })
            .collect();
    }
    let partitions: Vec<(String, i32)> = checked.into_iter().map(|(t, p, _)| (t, p)).collect();
    if verify_only {
        return match txns
            .coordinator
            .verify_partitions(id, producer_id, epoch, &partitions)
        {
            Ok(found) => partitions
                .into_iter()
                .zip(found)
                .map(|((t, p), found)| {
                    let code = if found {
                        0
                    } else {
                        ResponseError::InvalidTxnState.code()
                    };
                    (t, p, code)
                })
                .collect(),
            Err(e) => every(super::errors::txn(&e, fenced)),
        };
    }
    let key = id.to_string();
    let added = partitions.clone();
    let outcome = transaction::run(txns, id, fenced, move |b| {
        b.coordinator
            .add_partitions(&key, producer_id, epoch, &added, log_core::now_ms())
    })
    .await;
    let code = outcome.err().map_or(0, |e| e.code());
    partitions.into_iter().map(|(t, p)| (t, p, code)).collect()
}

/// Results grouped by topic, in the order the request named them.
fn topic_results(results: Results) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut topics: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for (topic, index, code) in results {
        let partition = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(index)
            .with_partition_error_code(code);
        match topics.iter_mut().find(|t| t.name.as_str() == topic) {
            Some(t) => t.results_by_partition.push(partition),
            None => topics.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(TopicName(topic.into()))
                    .with_results_by_partition(vec![partition]),
            ),
        }
    }
    topics
}
