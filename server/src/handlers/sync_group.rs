//! SyncGroup, versions 0–3: the leader hands in the assignment; every member gets its own
//! part once the leader has (followers wait for it). A classic member of a consumer-protocol
//! group gets the partitions the group's assignor gives it now. Authorization: READ on the
//! group, else GROUP_AUTHORIZATION_FAILED.

use std::sync::Arc;
use std::time::{Duration, Instant};

use acl::Operation;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::bounds::Counts;
use super::Handler;
use super::{errors, RequestContext};
use crate::broker::Groups;
use crate::groups::{Reply, Synced};
use tokio::sync::watch;

/// How long a follower waits for its leader's assignment before it is told to rejoin.
const SYNC_WAIT: Duration = Duration::from_secs(300);

impl Handler for SyncGroupRequest {
    const SERVED: (i16, i16) = (0, 3);
    type Needs = (Arc<Groups>, watch::Receiver<bool>);

    fn counts(&self) -> Counts {
        Counts {
            members: self.assignments.len(),
            ..Counts::default()
        }
    }

    async fn handle(
        (groups, shutdown): Self::Needs,
        request: SyncGroupRequest,
        ctx: &RequestContext,
    ) -> SyncGroupResponse {
        if !ctx.authorize_group(Operation::Read, &request.group_id) {
            return SyncGroupResponse::default()
                .with_error_code(ResponseError::GroupAuthorizationFailed.code());
        }
        let assignments = request
            .assignments
            .into_iter()
            // Copied: the group keeps them, and a slice would keep the connection's whole read
            // buffer alive with it.
            .map(|a| {
                (
                    a.member_id.to_string(),
                    Bytes::copy_from_slice(&a.assignment),
                )
            })
            .collect();
        let now = Instant::now();
        if let Some(synced) = groups.consumer.classic_sync(
            &request.group_id,
            &request.member_id,
            request.group_instance_id.as_deref(),
            request.generation_id,
            request.protocol_name.as_deref(),
            now,
        ) {
            return response(synced);
        }
        let reply = groups.classic.sync(
            &request.group_id,
            request.generation_id,
            &request.member_id,
            request.group_instance_id.as_deref(),
            assignments,
            now,
        );
        let synced = match reply {
            Reply::Now(synced) => synced,
            Reply::Later(rx) => {
                let mut shutdown = shutdown.clone();
                tokio::select! {
                    answer = tokio::time::timeout(SYNC_WAIT, rx) => match answer {
                        Ok(Ok(synced)) => synced,
                        _ => Synced::failed(ResponseError::RebalanceInProgress),
                    },
                    _ = shutdown.changed() => Synced::failed(ResponseError::CoordinatorNotAvailable),
                }
            }
        };
        // A group now Stable has its members on disk before the answer, as in Kafka (a
        // follower answered by the leader's sync may be told first).
        groups.store_group_records(Vec::new()).await;
        response(synced)
    }

    fn throttle_time_ms(response: &mut SyncGroupResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &SyncGroupResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}

fn response(synced: Synced) -> SyncGroupResponse {
    SyncGroupResponse::default()
        .with_error_code(errors::code_of(synced.error))
        .with_protocol_type(synced.protocol_type.map(StrBytes::from_string))
        .with_protocol_name(synced.protocol_name.map(StrBytes::from_string))
        .with_assignment(synced.assignment)
}
