//! DeleteGroups, versions 0–2: a group without members is deleted with its committed offsets
//! (tombstones in `__consumer_offsets`); one with members is NON_EMPTY_GROUP.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use super::{errors, RequestContext};
use crate::broker::Broker;

pub async fn handle(
    broker: &Arc<Broker>,
    request: DeleteGroupsRequest,
    _: &RequestContext,
) -> Option<DeleteGroupsResponse> {
    let owner = broker.clone();
    let results = crate::blocking::spawn(move || {
        request
            .groups_names
            .into_iter()
            .map(|id| {
                let known = owner.groups.describe(&id).is_some() || owner.offsets.has_offsets(&id);
                let code = if !known {
                    ResponseError::GroupIdNotFound.code()
                } else if let Err(e) = owner.groups.delete(&id) {
                    e.code()
                } else {
                    match owner.offsets.delete(&id, None) {
                        Ok(_) => 0,
                        Err(e) => errors::offsets(&e).code(),
                    }
                };
                DeletableGroupResult::default()
                    .with_group_id(id)
                    .with_error_code(code)
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    Some(DeleteGroupsResponse::default().with_results(results))
}
