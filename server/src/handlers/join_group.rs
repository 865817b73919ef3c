//! JoinGroup, versions 0–5 (the join barrier of a rebalance; see `groups::coordinator`).
//! v4+ new members first get MEMBER_ID_REQUIRED with their id (KIP-394); v5 adds
//! `group.instance.id` (static membership, KIP-345). The response waits until the group's
//! rebalance completes, as in Kafka. A KIP-848 consumer-protocol group with members takes the
//! member as a classic member of its own (KIP-848's online migration, answered at once, see
//! `groups::consumer::classic`); an empty one becomes classic.
//! Authorization: READ on the group, else GROUP_AUTHORIZATION_FAILED.

use std::sync::Arc;
use std::time::{Duration, Instant};

use acl::Operation;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::{errors, RequestContext};
use crate::broker::{Groups, Storage};
use crate::groups::{Join, Joined, Reply};
use tokio::sync::watch;

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

impl Handler for JoinGroupRequest {
    const SERVED: (i16, i16) = (0, 5);
    type Needs = (Arc<Storage>, Arc<Groups>, watch::Receiver<bool>);

    async fn handle(
        (storage, groups, shutdown): Self::Needs,
        request: JoinGroupRequest,
        ctx: &RequestContext,
    ) -> JoinGroupResponse {
        if !ctx.authorize_group(Operation::Read, &request.group_id) {
            let denied = Joined::failed(ResponseError::GroupAuthorizationFailed, "");
            return response(denied, ctx.version);
        }
        let session_timeout = millis(request.session_timeout_ms);
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        let rebalance_timeout = if ctx.version == 0 {
            session_timeout
        } else {
            millis(request.rebalance_timeout_ms)
        };
        let join = Join {
            group_id: request.group_id.to_string(),
            member_id: request.member_id.to_string(),
            instance_id: request.group_instance_id.map(|i| i.to_string()),
            client_id: ctx.client_id.clone(),
            client_host: format!("/{}", ctx.peer.ip()),
            session_timeout,
            rebalance_timeout,
            protocol_type: request.protocol_type.to_string(),
            protocols: request
                .protocols
                .into_iter()
                // Copied: the group keeps it, and a slice would keep the connection's whole
                // read buffer alive with it.
                .map(|p| (p.name.to_string(), Bytes::copy_from_slice(&p.metadata)))
                .collect(),
            require_known_member_id: ctx.version >= 4,
        };
        let member_id = join.member_id.clone();
        let metadata = |topic: &str| {
            let t = storage.log.topic(topic)?;
            Some((t.id(), u32::try_from(t.partitions().len()).ok()?))
        };
        if let Err(error) = groups.classic.check_join(&join) {
            return response(Joined::failed(error, &member_id), ctx.version);
        }
        if let Some(joined) = groups
            .consumer
            .classic_join(&join, Instant::now(), &metadata)
        {
            let dirty = groups.consumer.has_unpersisted();
            groups.persist(dirty, Vec::new()).await;
            return response(joined, ctx.version);
        }
        // An empty consumer-protocol group becomes a classic group.
        if groups.consumer.delete(&join.group_id).is_err()
            || groups.streams.delete(&join.group_id).is_err()
        {
            let refused = Joined::failed(ResponseError::InconsistentGroupProtocol, &member_id);
            return response(refused, ctx.version);
        }
        let joined = match groups.classic.join(join, Instant::now()) {
            Reply::Now(joined) => joined,
            Reply::Later(rx) => {
                // The coordinator answers by the rebalance deadline; the margin covers its tick.
                let wait = rebalance_timeout + Duration::from_secs(5);
                let mut shutdown = shutdown.clone();
                tokio::select! {
                    answer = tokio::time::timeout(wait, rx) => match answer {
                        Ok(Ok(joined)) => joined,
                        _ => Joined::failed(ResponseError::UnknownMemberId, &member_id),
                    },
                    _ = shutdown.changed() => Joined::failed(ResponseError::CoordinatorNotAvailable, &member_id),
                }
            }
        };
        // A Stable group's record changed by this join (a static member back under a new
        // member id, a consumer-protocol group turned classic) is durable before the answer.
        groups.store_group_records(Vec::new()).await;
        response(joined, ctx.version)
    }

    fn throttle_time_ms(response: &mut JoinGroupResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &JoinGroupResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}

fn response(mut joined: Joined, version: i16) -> JoinGroupResponse {
    let text = |s: String| StrBytes::from_string(s);
    if version < 7 {
        // Non-nullable before v7: the Java client fails on a null (e.g. with the
        // MEMBER_ID_REQUIRED answer to a first join), so an empty string as Kafka sends.
        joined.protocol_name.get_or_insert_with(String::new);
    }
    JoinGroupResponse::default()
        .with_error_code(errors::code_of(joined.error))
        .with_generation_id(joined.generation)
        .with_protocol_type(joined.protocol_type.map(text))
        .with_protocol_name(joined.protocol_name.map(text))
        .with_leader(text(joined.leader))
        .with_member_id(text(joined.member_id))
        .with_members(
            joined
                .members
                .into_iter()
                .map(|(id, instance, metadata)| {
                    JoinGroupResponseMember::default()
                        .with_member_id(text(id))
                        .with_group_instance_id(instance.map(text))
                        .with_metadata(metadata)
                })
                .collect(),
        )
}
