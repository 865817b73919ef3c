//! InitProducerId, versions 0–4, for idempotent producers. A new producer gets a fresh id (never
//! reused, even across restarts) at epoch 0; a producer that presents its id and epoch (v3+,
//! KIP-360) gets the epoch bumped, if this broker handed that id out (else a new id).
//! Transactional ids are refused: no transactions yet. Authorization, as Kafka since KIP-679:
//! IDEMPOTENT_WRITE on the cluster or WRITE on some topic, else CLUSTER_AUTHORIZATION_FAILED
//! (WRITE on the transactional id first when one is given, else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

use std::sync::Arc;

use acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::Handler;
use super::RequestContext;
use crate::broker::Broker;

impl Handler for InitProducerIdRequest {
    const SERVED: (i16, i16) = (0, 4);

    async fn handle(
        broker: &Arc<Broker>,
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
            let error =
                if ctx.authorize(broker, Operation::Write, ResourceType::TransactionalId, id) {
                    ResponseError::InvalidRequest
                } else {
                    ResponseError::TransactionalIdAuthorizationFailed
                };
            return response.with_error_code(error.code());
        }
        if !ctx.authorize_cluster(broker, Operation::IdempotentWrite)
            && !ctx.authorize_any(broker, Operation::Write, ResourceType::Topic)
        {
            return response.with_error_code(ResponseError::ClusterAuthorizationFailed.code());
        }
        let (id, epoch) = (request.producer_id.0, request.producer_epoch);
        // Epoch exhausted, or an id this broker never handed out: a new id.
        if broker.producer_ids.issued(id) && (0..i16::MAX - 1).contains(&epoch) {
            return response
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(epoch + 1);
        }
        let owner = broker.clone();
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
