//! Client quotas: DescribeClientQuotas and AlterClientQuotas, to the controller.

use kafka_protocol::messages::*;

use super::{Admin, AdminError};
use crate::error::{CallError, ErrorCode};
use crate::util::text;

/// A client-quota entity: (entity type `user` or `client-id`, name; `None` is the default
/// entity of that type).
pub type QuotaEntity = Vec<(String, Option<String>)>;

/// An entity's client quotas (Kafka's keys: `producer_byte_rate`, `consumer_byte_rate`,
/// `request_percentage`, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct ClientQuotas {
    /// Whose quotas these are.
    pub entity: QuotaEntity,
    /// Quota keys and their values (bytes per second for the byte rates, a percentage for
    /// `request_percentage`).
    pub values: Vec<(String, f64)>,
}

/// How a DescribeClientQuotas filter component matches an entity's component of its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaMatch {
    /// This name.
    Exact(String),
    /// The default entity.
    Default,
    /// Any entity of the type, the default included.
    Any,
}

impl Admin {
    /// The client quotas whose entities match `filter` ((entity type, match) pairs; with
    /// `strict`, entities with no other component). An empty filter without `strict` lists all.
    pub async fn describe_client_quotas(
        &mut self,
        filter: &[(String, QuotaMatch)],
        strict: bool,
    ) -> Result<Vec<ClientQuotas>, AdminError> {
        use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
        let components = filter
            .iter()
            .map(|(kind, wanted)| {
                let (match_type, name) = match wanted {
                    QuotaMatch::Exact(name) => (0, Some(text(name))),
                    QuotaMatch::Default => (1, None),
                    QuotaMatch::Any => (2, None),
                };
                ComponentData::default()
                    .with_entity_type(text(kind))
                    .with_match_type(match_type)
                    .with_match(name)
            })
            .collect();
        let request = DescribeClientQuotasRequest::default()
            .with_components(components)
            .with_strict(strict);
        let connection = self.cluster.controller_connection().await?;
        let response = connection.call(&request, 1).await?;
        quota_error(
            ApiKey::DescribeClientQuotas,
            response.error_code,
            response.error_message.as_deref(),
        )?;
        Ok(response
            .entries
            .unwrap_or_default()
            .into_iter()
            .map(|entry| ClientQuotas {
                entity: entry
                    .entity
                    .into_iter()
                    .map(|e| {
                        (
                            e.entity_type.to_string(),
                            e.entity_name.map(|n| n.to_string()),
                        )
                    })
                    .collect(),
                values: entry
                    .values
                    .into_iter()
                    .map(|v| (v.key.to_string(), v.value))
                    .collect(),
            })
            .collect())
    }

    /// Sets (`Some(value)`) or removes (`None`) quota keys of one entity; with `validate_only`
    /// the broker only checks them.
    pub async fn alter_client_quotas(
        &mut self,
        entity: &[(String, Option<String>)],
        ops: &[(String, Option<f64>)],
        validate_only: bool,
    ) -> Result<(), AdminError> {
        use kafka_protocol::messages::alter_client_quotas_request::{
            EntityData, EntryData, OpData,
        };
        let entry = EntryData::default()
            .with_entity(
                entity
                    .iter()
                    .map(|(kind, name)| {
                        EntityData::default()
                            .with_entity_type(text(kind))
                            .with_entity_name(name.as_deref().map(text))
                    })
                    .collect(),
            )
            .with_ops(
                ops.iter()
                    .map(|(key, value)| {
                        OpData::default()
                            .with_key(text(key))
                            .with_value(value.unwrap_or(0.0))
                            .with_remove(value.is_none())
                    })
                    .collect(),
            );
        let request = AlterClientQuotasRequest::default()
            .with_entries(vec![entry])
            .with_validate_only(validate_only);
        let connection = self.cluster.controller_connection().await?;
        let response = connection.call(&request, 1).await?;
        let entry = response
            .entries
            .first()
            .ok_or(AdminError::EmptyResponse(ApiKey::AlterClientQuotas))?;
        quota_error(
            ApiKey::AlterClientQuotas,
            entry.error_code,
            entry.error_message.as_deref(),
        )
    }
}

fn quota_error(api: ApiKey, code: i16, message: Option<&str>) -> Result<(), AdminError> {
    match ErrorCode::try_from_code(code) {
        None => Ok(()),
        Some(code) => Err(AdminError::Call(CallError::Broker {
            api,
            resource: "client quotas".to_string(),
            code,
            message: message.map(str::to_string),
        })),
    }
}
