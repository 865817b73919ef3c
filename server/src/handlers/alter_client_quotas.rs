//! AlterClientQuotas, versions 0–1: sets and removes Kafka's client quotas
//! (`producer_byte_rate`, `consumer_byte_rate`, `request_percentage`) of `user` and
//! `client-id` entities, and `connection_creation_rate` of `ip` entities (KIP-612), default
//! entities (a null name) included. Each entry is applied on its own and durably
//! (`<data-dir>/client-quotas`) before the answer; `validate_only` only checks. Bad entities
//! (an `ip` combined with another type, or not an address), keys (a key of the other kind of
//! entity) or values are INVALID_REQUEST with the reason, as in Kafka. Authorization:
//! ALTER_CONFIGS on the cluster, else every entry CLUSTER_AUTHORIZATION_FAILED.

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::RequestContext;
use crate::broker::Admin;
use crate::quotas::{AlterError, Entity, Op, QuotaError, QuotaKind};

impl Handler for AlterClientQuotasRequest {
    const SERVED: (i16, i16) = (0, 1);
    type Needs = Arc<Admin>;

    async fn handle(
        admin: Self::Needs,
        request: AlterClientQuotasRequest,
        ctx: &RequestContext,
    ) -> AlterClientQuotasResponse {
        let validate_only = request.validate_only;
        let allowed = ctx.authorize_cluster(Operation::AlterConfigs);
        let echoed: Vec<Vec<EntityData>> = request
            .entries
            .iter()
            .map(|entry| {
                entry
                    .entity
                    .iter()
                    .map(|e| {
                        EntityData::default()
                            .with_entity_type(e.entity_type.clone())
                            .with_entity_name(e.entity_name.clone())
                    })
                    .collect()
            })
            .collect();
        if !allowed {
            let denied = ResponseError::ClusterAuthorizationFailed;
            let entries = echoed
                .into_iter()
                .map(|entity| {
                    EntryData::default()
                        .with_entity(entity)
                        .with_error_code(denied.code())
                        .with_error_message(Some(StrBytes::from_string(denied.to_string())))
                })
                .collect();
            return AlterClientQuotasResponse::default().with_entries(entries);
        }
        let owner = admin.clone();
        let outcomes = crate::blocking::spawn(move || {
            request
                .entries
                .iter()
                .map(|entry| match apply(&owner, entry, validate_only) {
                    Ok(()) => (0, None),
                    Err(AlterError::Invalid(e)) => {
                        (ResponseError::InvalidRequest.code(), Some(e.to_string()))
                    }
                    Err(AlterError::Io(e)) => {
                        tracing::error!(error = %e, "client quotas not saved");
                        (ResponseError::KafkaStorageError.code(), Some(e.to_string()))
                    }
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "AlterClientQuotas task failed");
            let failed = ResponseError::UnknownServerError;
            vec![(failed.code(), Some(failed.to_string())); echoed.len()]
        });
        let entries = echoed
            .into_iter()
            .zip(outcomes)
            .map(|(entity, (code, message))| {
                EntryData::default()
                    .with_entity(entity)
                    .with_error_code(code)
                    .with_error_message(message.map(StrBytes::from_string))
            })
            .collect();
        AlterClientQuotasResponse::default().with_entries(entries)
    }

    fn throttle_time_ms(response: &mut AlterClientQuotasResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &AlterClientQuotasResponse, f: &mut dyn FnMut(i16)) {
        r.entries.iter().for_each(|e| f(e.error_code))
    }
}

fn apply(
    admin: &Arc<Admin>,
    entry: &kafka_protocol::messages::alter_client_quotas_request::EntryData,
    validate_only: bool,
) -> Result<(), AlterError> {
    let entity = Entity::from_components(
        entry
            .entity
            .iter()
            .map(|e| (e.entity_type.as_str(), e.entity_name.as_deref())),
    )?;
    let ops = entry
        .ops
        .iter()
        .map(|op| {
            let kind = QuotaKind::parse(&op.key)
                .ok_or_else(|| QuotaError::UnknownKey(op.key.to_string()))?;
            Ok(Op {
                kind,
                value: (!op.remove).then_some(op.value),
            })
        })
        .collect::<Result<Vec<_>, QuotaError>>()?;
    admin.quotas.alter(&entity, &ops, validate_only)
}
