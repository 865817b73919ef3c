//! DescribeClientQuotas, versions 0–1: the client quotas whose entity matches the filter, as in
//! Kafka: each filter component names an entity type (`user`, `client-id`, `ip`) and matches an
//! exact name (0), the default entity (1) or any entity of that type (2); every component must
//! match, and with `strict` the entity has no other component. A malformed filter (an unknown
//! or repeated entity type, an exact match without a name) is INVALID_REQUEST. Authorization:
//! DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED.

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::RequestContext;
use crate::broker::Admin;
use crate::quotas::{Match, CLIENT_ID, IP, USER};

const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_ANY: i8 = 2;

impl Handler for DescribeClientQuotasRequest {
    const SERVED: (i16, i16) = (0, 1);
    type Needs = Arc<Admin>;

    async fn handle(
        admin: Self::Needs,
        request: DescribeClientQuotasRequest,
        ctx: &RequestContext,
    ) -> DescribeClientQuotasResponse {
        if !ctx.authorize_cluster(Operation::DescribeConfigs) {
            let error = ResponseError::ClusterAuthorizationFailed;
            return DescribeClientQuotasResponse::default()
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(error.to_string())));
        }
        let filter = match parse_filter(&request) {
            Ok(filter) => filter,
            Err(message) => {
                return DescribeClientQuotasResponse::default()
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_string(message)))
            }
        };
        let entries = admin
            .quotas
            .describe(&filter, request.strict)
            .into_iter()
            .map(|(entity, values)| {
                EntryData::default()
                    .with_entity(
                        entity
                            .components()
                            .into_iter()
                            .map(|(kind, name)| {
                                EntityData::default()
                                    .with_entity_type(StrBytes::from_static_str(kind))
                                    .with_entity_name(name.map(|n| StrBytes::from_string(n.into())))
                            })
                            .collect(),
                    )
                    .with_values(
                        values
                            .into_iter()
                            .map(|(kind, value)| {
                                ValueData::default()
                                    .with_key(StrBytes::from_static_str(kind.name()))
                                    .with_value(value)
                            })
                            .collect(),
                    )
            })
            .collect();
        DescribeClientQuotasResponse::default().with_entries(Some(entries))
    }

    fn throttle_time_ms(response: &mut DescribeClientQuotasResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &DescribeClientQuotasResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}

fn parse_filter(request: &DescribeClientQuotasRequest) -> Result<Vec<(&str, Match)>, String> {
    let mut filter: Vec<(&str, Match)> = Vec::new();
    for component in &request.components {
        let kind = match component.entity_type.as_str() {
            USER => USER,
            CLIENT_ID => CLIENT_ID,
            IP => IP,
            other => {
                return Err(format!(
                "unknown quota entity type {other:?} (lograil serves \"user\", \"client-id\" and \"ip\")"
            ))
            }
        };
        if filter.iter().any(|(k, _)| *k == kind) {
            return Err(format!("entity type {kind:?} is named twice in the filter"));
        }
        let wanted = match component.match_type {
            MATCH_EXACT => match &component._match {
                Some(name) => Match::Exact(name.to_string()),
                None => return Err(format!("an exact match of {kind:?} needs a name")),
            },
            MATCH_DEFAULT => Match::Default,
            MATCH_ANY => Match::Any,
            other => return Err(format!("unknown match type {other}")),
        };
        filter.push((kind, wanted));
    }
    Ok(filter)
}
