//! InitProducerId, versions 0–5. An idempotent producer gets a fresh id (never reused, even
//! across restarts) at epoch 0; one that presents its id and epoch (v3+, KIP-360) gets the epoch
//! bumped, if this broker handed that id out (else a new id). With a transactional id the
//! transaction coordinator answers (`transactions`): a new id, or the id's epoch bumped (a new
//! id when it is exhausted), fencing any older producer of the id; an ongoing transaction of
//! the id is aborted first and answered CONCURRENT_TRANSACTIONS until its markers are written
//! (the client retries); a retry whose answer was lost (KIP-360) gets the same answer; a
//! `transaction_timeout_ms` not within 1 and `transaction.max.timeout.ms` is
//! INVALID_TRANSACTION_TIMEOUT; a stale epoch PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before
//! v4). `keep_prepared_txn` (KIP-939, v6) is not served. Authorization: WRITE on the
//! transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; without one, as Kafka since
//! KIP-679: IDEMPOTENT_WRITE on the cluster or WRITE on some topic, else
//! CLUSTER_AUTHORIZATION_FAILED.

use std::sync::Arc;

use acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::transaction;
use super::Handler;
use super::RequestContext;
use crate::broker::{Storage, Txns};

impl Handler for InitProducerIdRequest {
    const SERVED: (i16, i16) = (0, 5);
    type Needs = (Arc<Storage>, Arc<Txns>);

    async fn handle(
        (storage, txns): Self::Needs,
        request: InitProducerIdRequest,
        ctx: &RequestContext,
    ) -> InitProducerIdResponse {
        let response = InitProducerIdResponse::default()
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        if let Some(id) = request
            .transactional_id
            .as_ref()
            .filter(|id| !id.is_empty())
        {
            if !ctx.authorize(Operation::Write, ResourceType::TransactionalId, id) {
                return response
                    .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
            }
            let id = id.to_string();
            let timeout = request.transaction_timeout_ms;
            let expected = (request.producer_id.0 >= 0)
                .then_some((request.producer_id.0, request.producer_epoch));
            let key = id.clone();
            let fenced = transaction::fenced(ctx.version, 4);
            let outcome = transaction::run(&txns, &id, fenced, move |b| {
                b.coordinator
                    .init_producer_id(&key, timeout, expected, log_core::now_ms(), || {
                        b.producer_ids().allocate()
                    })
            })
            .await;
            return match outcome {
                Ok((producer_id, epoch)) => response
                    .with_producer_id(ProducerId(producer_id))
                    .with_producer_epoch(epoch),
                Err(error) => response.with_error_code(error.code()),
            };
        }
        if !ctx.authorize_cluster(Operation::IdempotentWrite)
            && !ctx.authorize_any(Operation::Write, ResourceType::Topic)
        {
            return response.with_error_code(ResponseError::ClusterAuthorizationFailed.code());
        }
        let (id, epoch) = (request.producer_id.0, request.producer_epoch);
        // Epoch exhausted, or an id this broker never handed out: a new id.
        if storage.producer_ids.issued(id) && (0..i16::MAX - 1).contains(&epoch) {
            return response
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(epoch + 1);
        }
        let owner = storage.clone();
        match crate::blocking::spawn(move || owner.producer_ids.allocate()).await {
            Ok(Ok(id)) => response
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(0),
            Ok(Err(e)) => {
                tracing::error!(error = %e, "could not reserve producer ids");
                response.with_error_code(ResponseError::KafkaStorageError.code())
            }
            Err(e) => {
                tracing::error!(error = %e, "producer id task failed");
                response.with_error_code(ResponseError::UnknownServerError.code())
            }
        }
    }

    fn throttle_time_ms(response: &mut InitProducerIdResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &InitProducerIdResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}
