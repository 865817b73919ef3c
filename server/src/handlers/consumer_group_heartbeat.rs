//! ConsumerGroupHeartbeat, versions 0–1 (KIP-848, `group.protocol=consumer`): joins (member
//! epoch 0), stays in (the member's epoch, with the partitions it owns) or leaves (-1; -2, a
//! static member's leave: its partitions are held for its return under the same instance id
//! within the session timeout, and a new member of an instance id still in use is
//! UNRELEASED_INSTANCE_ID, as in Kafka) a consumer-protocol group; the group's server-side assignor (`uniform`, the
//! default, or `range`) computes the target and the answer moves the member towards it (see
//! `groups::consumer`). v0 makes the member id of a joiner that sent none; v1 requires the
//! client's. The request checks are Kafka's: INVALID_REQUEST for an empty group or member id,
//! a first heartbeat without its rebalance timeout, subscription or an empty owned list;
//! UNSUPPORTED_ASSIGNOR for an assignor not served. A subscription by regular expression
//! (`subscribed_topic_regex`, RE2 syntax as Kafka's RE2J, matching whole names; an invalid one
//! INVALID_REGULAR_EXPRESSION) is resolved at each of the member's heartbeats against the
//! topics its principal may DESCRIBE, so a topic created later joins its subscription within
//! a heartbeat interval. An empty classic group becomes a consumer-protocol group; a live one
//! too when `group.consumer.migration.policy` allows (KIP-848's online upgrade: its members
//! go on with the classic protocol, see `groups::consumer::classic`), else GROUP_ID_NOT_FOUND.
//! The last consumer-protocol member leaving a group of classic members makes it classic
//! again. Authorization, as Kafka: READ on the group (else
//! GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed topic (else
//! TOPIC_AUTHORIZATION_FAILED).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::RequestContext;
use crate::broker::{Groups, Storage};
use crate::groups::consumer::{assignor, Beat, TopicPartition};

impl Handler for ConsumerGroupHeartbeatRequest {
    const SERVED: (i16, i16) = (0, 1);
    type Needs = (Arc<Storage>, Arc<Groups>);

    async fn handle(
        (storage, groups): Self::Needs,
        request: ConsumerGroupHeartbeatRequest,
        ctx: &RequestContext,
    ) -> ConsumerGroupHeartbeatResponse {
        let group = request.group_id.to_string();
        if !ctx.authorize_group(Operation::Read, &group) {
            return fail(ResponseError::GroupAuthorizationFailed, None);
        }
        if request
            .subscribed_topic_names
            .iter()
            .flatten()
            .any(|topic| !ctx.authorize_topic(Operation::Describe, topic))
        {
            return fail(ResponseError::TopicAuthorizationFailed, None);
        }
        if let Err((error, why)) = check(&request, ctx.version) {
            tracing::debug!(group = %group, member = %request.member_id, why, "ConsumerGroupHeartbeat refused");
            return fail(error, Some(&why));
        }
        let mut member_id = request.member_id.to_string();
        if member_id.is_empty() {
            // v0: the coordinator names a new member.
            member_id = log_core::Uuid::new_v4().simple().to_string();
        }
        if request.member_epoch == 0 && groups.streams.delete(&group).is_err() {
            let why = format!("Group {group} is not a consumer group");
            return fail(ResponseError::GroupIdNotFound, Some(&why));
        }
        let metadata = |topic: &str| {
            let t = storage.log.topic(topic)?;
            Some((t.id(), u32::try_from(t.partitions().len()).ok()?))
        };
        let now = Instant::now();
        // An empty classic group becomes a consumer-protocol group; one with members too, if
        // the migration policy allows it (an online upgrade).
        if request.member_epoch == 0
            && groups.classic.contains(&group)
            && groups.classic.delete(&group).is_err()
            && !groups.upgrade(&group, now, &metadata)
        {
            let why = format!("Group {group} is not a consumer group");
            return fail(ResponseError::GroupIdNotFound, Some(&why));
        }
        let regex = match subscription_regex(&groups, &group, &member_id, &request) {
            Ok(regex) => regex,
            Err(why) => return fail(ResponseError::InvalidRegularExpression, Some(&why)),
        };
        let leaving = request.member_epoch < 0;
        let mut beat = beat(request, ctx, member_id.clone());
        if let Some(regex) = regex {
            beat.matched = matching(&storage, ctx, &regex);
        }
        let answer = groups.consumer.heartbeat(&group, beat, now, &metadata);
        if leaving {
            // The last member of the consumer protocol may leave classic members behind.
            groups.maybe_downgrade(&group, now);
        }
        // What changed is durable before it is answered, as in Kafka (an upgraded group's
        // classic record deleted, a downgraded one's written).
        let dirty = groups.consumer.has_unpersisted();
        groups.persist(dirty, vec![group.clone()]).await;
        let interval = groups.consumer.config.heartbeat_interval;
        let response = ConsumerGroupHeartbeatResponse::default()
            .with_heartbeat_interval_ms(i32::try_from(interval.as_millis()).unwrap_or(i32::MAX));
        let answer = match answer {
            Ok(answer) => answer,
            Err(error) => {
                return fail(error, None).with_heartbeat_interval_ms(response.heartbeat_interval_ms)
            }
        };
        let assignment = answer.assignment.as_ref().map(assignment);
        response
            .with_member_id(Some(StrBytes::from_string(member_id)))
            .with_member_epoch(answer.member_epoch)
            .with_assignment(assignment)
    }

    fn throttle_time_ms(response: &mut ConsumerGroupHeartbeatResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &ConsumerGroupHeartbeatResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}

/// The answer of a refused heartbeat: `error`, with `message` or the error's own.
fn fail(error: ResponseError, message: Option<&str>) -> ConsumerGroupHeartbeatResponse {
    let message = message.map_or_else(|| error.to_string(), str::to_string);
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}

/// The regular expression the member subscribes by after this heartbeat (the one it sends,
/// else the one it has), compiled to match whole topic names as Kafka's RE2J `matches()`;
/// or why the one it sends is not one.
fn subscription_regex(
    groups: &Groups,
    group: &str,
    member_id: &str,
    request: &ConsumerGroupHeartbeatRequest,
) -> Result<Option<regex::Regex>, String> {
    let source = match &request.subscribed_topic_regex {
        Some(sent) => Some(sent.to_string()),
        None => groups.consumer.member_regex(group, member_id),
    };
    let Some(source) = source.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    super::pattern::whole(&source).map(Some).map_err(|e| {
        format!("SubscribedTopicRegex `{source}` is not a valid regular expression: {e}.")
    })
}

/// The topics `regex` matches that the principal may DESCRIBE (others are left out, as Kafka
/// does), internal topics aside.
fn matching(storage: &Storage, ctx: &RequestContext, regex: &regex::Regex) -> BTreeSet<String> {
    storage
        .log
        .topics()
        .iter()
        .map(|t| t.name().to_string())
        .filter(|name| !Storage::is_internal(name) && regex.is_match(name))
        .filter(|name| ctx.authorize_topic(Operation::Describe, name))
        .collect()
}

/// The heartbeat of `member_id` as the group coordinator takes it.
fn beat(request: ConsumerGroupHeartbeatRequest, ctx: &RequestContext, member_id: String) -> Beat {
    let owned: Option<BTreeSet<TopicPartition>> = request.topic_partitions.as_ref().map(|t| {
        t.iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, *p)))
            .collect()
    });
    Beat {
        member_id,
        epoch: request.member_epoch,
        instance_id: request.instance_id.as_ref().map(|i| i.to_string()),
        rack_id: request.rack_id.as_ref().map(|r| r.to_string()),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        topics: request
            .subscribed_topic_names
            .map(|names| names.into_iter().map(|n| n.to_string()).collect()),
        regex: request.subscribed_topic_regex.map(|r| r.to_string()),
        matched: BTreeSet::new(),
        assignor: request.server_assignor.map(|a| a.to_string()),
        owned,
        client_id: ctx.client_id.clone(),
        client_host: format!("/{}", ctx.peer.ip()),
    }
}

/// A member's assignment, by topic id.
fn assignment(partitions: &BTreeSet<TopicPartition>) -> Assignment {
    Assignment::default().with_topic_partitions(
        super::assignment::by_topic(partitions)
            .into_iter()
            .map(|(topic_id, partitions)| {
                TopicPartitions::default()
                    .with_topic_id(topic_id)
                    .with_partitions(partitions)
            })
            .collect(),
    )
}

/// Kafka's checks of a heartbeat on its own (the message is Kafka's too).
fn check(
    request: &ConsumerGroupHeartbeatRequest,
    version: i16,
) -> Result<(), (ResponseError, String)> {
    let invalid = |why: &str| Err((ResponseError::InvalidRequest, why.to_string()));
    let empty = |s: &Option<StrBytes>| s.as_ref().is_some_and(|s| s.is_empty());
    if request.group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if empty(&request.instance_id) {
        return invalid("InstanceId can't be empty.");
    }
    if empty(&request.rack_id) {
        return invalid("RackId can't be empty.");
    }
    let no_member_id = request.member_id.is_empty();
    match request.member_epoch {
        0 => {
            if no_member_id && version >= 1 {
                return invalid("MemberId can't be empty.");
            }
            if request.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if request
                .topic_partitions
                .as_ref()
                .is_none_or(|t| !t.is_empty())
            {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            // Kafka 4.4: an empty list or regex joins the group subscribed to nothing.
            if request.subscribed_topic_names.is_none() && request.subscribed_topic_regex.is_none()
            {
                return invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                );
            }
        }
        -2 if request.instance_id.is_none() => return invalid("InstanceId can't be null."),
        epoch if epoch > 0 || epoch == -1 || epoch == -2 => {
            if no_member_id {
                return invalid("MemberId can't be empty.");
            }
        }
        _ => return invalid("MemberEpoch is invalid."),
    }
    if let Some(name) = &request.server_assignor {
        if !assignor::ASSIGNORS.contains(&name.as_str()) {
            let why = format!(
                "ServerAssignor {name} is not supported. Supported assignors: {}.",
                assignor::ASSIGNORS.join(", ")
            );
            return Err((ResponseError::UnsupportedAssignor, why));
        }
    }
    Ok(())
}
