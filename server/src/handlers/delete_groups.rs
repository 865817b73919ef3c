//! DeleteGroups, versions 0–2: a group (classic or KIP-848 consumer protocol) without members
//! is deleted with its committed offsets
//! (tombstones in `__consumer_offsets`); one with members is NON_EMPTY_GROUP. Authorization:
//! DELETE on each group, else GROUP_AUTHORIZATION_FAILED for it.

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use super::bounds::Counts;
use super::Handler;
use super::{errors, RequestContext};
use crate::broker::Groups;

impl Handler for DeleteGroupsRequest {
    const SERVED: (i16, i16) = (0, 2);
    type Needs = Arc<Groups>;

    fn counts(&self) -> Counts {
        Counts {
            groups: self.groups_names.len(),
            ..Counts::default()
        }
    }

    async fn handle(
        groups: Self::Needs,
        request: DeleteGroupsRequest,
        ctx: &RequestContext,
    ) -> DeleteGroupsResponse {
        let (owner, ctx) = (groups.clone(), ctx.clone());
        let results = crate::blocking::map_each(
            request.groups_names,
            move |id| {
                let known = owner.classic.describe(&id).is_some()
                    || owner.consumer.contains(&id)
                    || owner.streams.contains(&id)
                    || owner.offsets.has_offsets(&id);
                let code = if !ctx.authorize_group(Operation::Delete, &id) {
                    ResponseError::GroupAuthorizationFailed.code()
                } else if !known {
                    ResponseError::GroupIdNotFound.code()
                } else if let Err(e) = owner.classic.delete(&id) {
                    e.code()
                } else if let Err(e) = owner.consumer.delete(&id) {
                    e.code()
                } else if let Err(e) = owner.streams.delete(&id) {
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
            },
            |id| {
                DeletableGroupResult::default()
                    .with_group_id(id)
                    .with_error_code(ResponseError::UnknownServerError.code())
            },
        )
        .await;
        DeleteGroupsResponse::default().with_results(results)
    }

    fn throttle_time_ms(response: &mut DeleteGroupsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &DeleteGroupsResponse, f: &mut dyn FnMut(i16)) {
        r.results.iter().for_each(|g| f(g.error_code))
    }
}
